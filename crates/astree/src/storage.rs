//! Where a single-file store's bytes go: [`MemStorage`] (RAM, with a crash model for
//! tests), or one file of any [`crate::segments::Segments`]
//! ([`crate::segments::SingleFile`]: a real file, or a simfs file on a simulated drive).
//!
//! The crash model keeps a *durable* image (as of the last sync) and the writes made
//! since; [`MemStorage::crash`] returns the image a crash could leave: the durable one with
//! some prefix of the later writes applied, the last of them possibly torn.

use crate::TreeError;

/// Time spent in reads and writes, for the read/write split of an operation's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoTime {
    pub read_ns: u64,
    pub write_ns: u64,
    pub sync_ns: u64,
}

pub trait Storage {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), TreeError>;
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), TreeError>;
    /// Makes every write so far durable.
    fn sync(&mut self) -> Result<(), TreeError>;
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Drops everything past `len` (recovery truncates an untrusted log tail).
    fn truncate(&mut self, len: u64) -> Result<(), TreeError>;
    /// Time spent so far in reads, writes and syncs (zero where not measured).
    fn io_time(&self) -> IoTime {
        IoTime::default()
    }
    /// The storage's clock: wall time (files) or virtual time (simulated drive).
    fn now_ns(&self) -> u64 {
        0
    }
}

/// RAM storage with a crash model.
#[derive(Debug, Clone, Default)]
pub struct MemStorage {
    live: Vec<u8>,
    durable: Vec<u8>,
    /// Writes since the last sync, in order.
    pending: Vec<(u64, Vec<u8>)>,
    /// Tests: `sync` returns without making anything durable (a crash during fsync).
    pub sync_is_lost: bool,
}

impl MemStorage {
    pub fn new() -> Self {
        Self::default()
    }

    /// Storage holding exactly `image`, all durable.
    pub fn from_image(image: Vec<u8>) -> Self {
        MemStorage {
            live: image.clone(),
            durable: image,
            pending: Vec::new(),
            sync_is_lost: false,
        }
    }

    /// Writes not yet synced.
    pub fn pending_writes(&self) -> usize {
        self.pending.len()
    }

    /// Length of pending write `i`.
    pub fn pending_len(&self, i: usize) -> usize {
        self.pending[i].1.len()
    }

    /// The image after a crash: the durable image plus the first `applied` pending writes,
    /// then `torn_bytes` of the next one (if any).
    pub fn crash(&self, applied: usize, torn_bytes: usize) -> Vec<u8> {
        let mut img = self.durable.clone();
        let put = |img: &mut Vec<u8>, off: u64, data: &[u8]| {
            let end = off as usize + data.len();
            if img.len() < end {
                img.resize(end, 0);
            }
            img[off as usize..end].copy_from_slice(data);
        };
        for (off, data) in self.pending.iter().take(applied) {
            put(&mut img, *off, data);
        }
        if let Some((off, data)) = self.pending.get(applied) {
            put(&mut img, *off, &data[..torn_bytes.min(data.len())]);
        }
        img
    }
}

impl Storage for MemStorage {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), TreeError> {
        let end = offset as usize + buf.len();
        if end > self.live.len() {
            return Err(TreeError::Io {
                path: "memory".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read of {end} past {}", self.live.len()),
                ),
            });
        }
        buf.copy_from_slice(&self.live[offset as usize..end]);
        Ok(())
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        let end = offset as usize + data.len();
        if self.live.len() < end {
            self.live.resize(end, 0);
        }
        self.live[offset as usize..end].copy_from_slice(data);
        self.pending.push((offset, data.to_vec()));
        Ok(())
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        if !self.sync_is_lost {
            self.durable = self.live.clone();
            self.pending.clear();
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.live.len() as u64
    }
    fn truncate(&mut self, len: u64) -> Result<(), TreeError> {
        self.live.truncate(len as usize);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_images() {
        let mut s = MemStorage::new();
        s.write_at(0, b"aaaa").unwrap();
        s.sync().unwrap();
        s.write_at(4, b"bbbb").unwrap();
        s.write_at(0, b"cc").unwrap();
        assert_eq!(s.crash(0, 0), b"aaaa");
        assert_eq!(s.crash(0, 2), b"aaaabb");
        assert_eq!(s.crash(1, 1), b"caaabbbb");
        assert_eq!(s.crash(2, 0), b"ccaabbbb");
    }
}
