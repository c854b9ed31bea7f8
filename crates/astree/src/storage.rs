//! Where a store's bytes go: [`MemStorage`] (RAM, with a crash model for tests),
//! [`FileStorage`] (a real file), or one file of any [`crate::segments::Segments`]
//! ([`crate::segments::SingleFile`], e.g. a simfs file on a simulated drive).
//!
//! The crash model keeps a *durable* image (as of the last sync) and the writes made
//! since; [`MemStorage::crash`] returns the image a crash could leave: the durable one with
//! some prefix of the later writes applied, the last of them possibly torn.

use crate::TreeError;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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

/// A real file (optionally O_DIRECT), timed with the wall clock.
pub struct FileStorage {
    file: File,
    path: PathBuf,
    len: u64,
    direct: bool,
    io: IoTime,
    started: std::time::Instant,
    /// Once cancelled (by an interrupt), every read, write and sync fails with
    /// [`TreeError::Interrupted`], so the run unwinds and its owner removes the files.
    cancel: Option<trace::Cancel>,
}

impl FileStorage {
    /// Opens (creating if needed) `path`; `direct` uses O_DIRECT (then every read and
    /// write goes through a 4 KiB-aligned bounce buffer).
    pub fn open(path: &Path, direct: bool) -> Result<Self, TreeError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| TreeError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut o = OpenOptions::new();
        o.read(true).write(true).create(true).truncate(false);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        Ok(FileStorage {
            file,
            path: path.to_path_buf(),
            len,
            direct,
            io: IoTime::default(),
            started: std::time::Instant::now(),
            cancel: None,
        })
    }

    /// The same file, stopping at its next I/O once `cancel` is cancelled.
    pub fn with_cancel(mut self, cancel: Option<trace::Cancel>) -> Self {
        self.cancel = cancel;
        self
    }

    fn check_cancel(&self) -> Result<(), TreeError> {
        match &self.cancel {
            Some(c) if c.is_cancelled() => Err(TreeError::Interrupted),
            _ => Ok(()),
        }
    }

    /// The same open file under a new name (after a rename).
    pub fn with_path(mut self, path: &Path) -> Self {
        self.path = path.to_path_buf();
        self
    }

    fn io(&self, source: std::io::Error) -> TreeError {
        TreeError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }
}

const ALIGN: u64 = 4096;

/// A zeroed buffer with a 4 KiB-aligned window of `len` bytes: (buffer, window start).
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let v = vec![0u8; len + ALIGN as usize];
    let start = v.as_ptr().align_offset(ALIGN as usize);
    (v, start)
}

impl Storage for FileStorage {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), TreeError> {
        self.check_cancel()?;
        let t = std::time::Instant::now();
        let r = if self.direct {
            let lo = offset / ALIGN * ALIGN;
            let hi = (offset + buf.len() as u64).div_ceil(ALIGN) * ALIGN;
            let n = (hi - lo) as usize;
            let (mut v, at) = aligned(n);
            let window = &mut v[at..at + n];
            let mut got = 0;
            while got < n {
                match self.file.read_at(&mut window[got..], lo + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) => return Err(self.io(e)),
                }
            }
            let skip = (offset - lo) as usize;
            if got < skip + buf.len() {
                Err(self.io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "short read",
                )))
            } else {
                buf.copy_from_slice(&window[skip..skip + buf.len()]);
                Ok(())
            }
        } else {
            self.file.read_exact_at(buf, offset).map_err(|e| self.io(e))
        };
        self.io.read_ns += t.elapsed().as_nanos() as u64;
        r
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        self.check_cancel()?;
        let t = std::time::Instant::now();
        if self.direct {
            if !offset.is_multiple_of(ALIGN) || !(data.len() as u64).is_multiple_of(ALIGN) {
                return Err(TreeError::Config(format!(
                    "with O_DIRECT, writes must be 4 KiB aligned (offset {offset}, {} bytes)",
                    data.len()
                )));
            }
            let (mut v, at) = aligned(data.len());
            v[at..at + data.len()].copy_from_slice(data);
            self.file
                .write_all_at(&v[at..at + data.len()], offset)
                .map_err(|e| self.io(e))?;
        } else {
            self.file
                .write_all_at(data, offset)
                .map_err(|e| self.io(e))?;
        }
        self.len = self.len.max(offset + data.len() as u64);
        self.io.write_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        self.check_cancel()?;
        let t = std::time::Instant::now();
        let r = self.file.sync_data().map_err(|e| self.io(e));
        self.io.sync_ns += t.elapsed().as_nanos() as u64;
        r
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn truncate(&mut self, len: u64) -> Result<(), TreeError> {
        self.file.set_len(len).map_err(|e| self.io(e))?;
        self.len = len;
        Ok(())
    }
    fn io_time(&self) -> IoTime {
        self.io
    }
    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
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
