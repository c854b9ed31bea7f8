//! [`FileBytes`]: a file's bytes in memory, in 64 KiB chunks allocated on first write. A
//! file extended (by `fallocate` or a write past its end) costs no memory until written,
//! reads of never-written chunks give zeros, and growth never copies what is there; freed
//! chunks go back to the allocator's free lists rather than to the kernel, so file systems
//! that create and remove many spill files do not fault fresh pages in for each.
//!
//! Once the process holds more than [`pack_above_bytes`] of file bytes uncompressed (by
//! default a third of the machine's memory), a
//! chunk written to its end is kept LZ4-compressed (`lz4_flex`) when that saves at least
//! half of it: spill files are written front to back and their records are mostly padding
//! (a 128-byte row carries 12 bytes of data), so a simulated run holds its spill files in a
//! fraction of their size — paper 000's 33 GB of batch files fit this machine's memory. A
//! compressed chunk is unpacked on access; the last one unpacked is kept for the next read.
//! Below the threshold nothing is compressed, so runs that fit in memory pay nothing for
//! it, random reads included: on the 24 GiB development machine (threshold 8 GiB) that is
//! every quick and full experiment, all running at once in one `reproduce` (with the 4 GiB
//! threshold this had before, the full scale's concurrent runs crossed it and spent 7% of
//! the `astree` experiment's time unpacking).

use std::sync::atomic::{AtomicU64, Ordering};

/// Uncompressed chunk bytes held by all files of the process.
static RAW_BYTES: AtomicU64 = AtomicU64::new(0);

/// Above this many uncompressed bytes held, full chunks are compressed: what
/// [`set_pack_above_bytes`] or `FLASHLAB_PACK_ABOVE_BYTES` (bytes) set, else a third of the
/// machine's memory (`MemTotal` in /proc/meminfo), at least 1 GiB; 4 GiB where the memory
/// cannot be read. Compression is invisible to the file's users: only memory and time
/// change with it, never a result.
pub fn pack_above_bytes() -> u64 {
    match PACK_ABOVE_BYTES.load(Ordering::Relaxed) {
        0 => {
            let from_env = std::env::var("FLASHLAB_PACK_ABOVE_BYTES")
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
            let bytes = from_env.unwrap_or_else(|| {
                std::fs::read_to_string("/proc/meminfo")
                    .ok()
                    .and_then(|m| mem_total_bytes(&m))
                    .map_or(4 << 30, |total| (total / 3).max(1 << 30))
            });
            // A concurrent first call computes the same value; either store stands.
            let _ = PACK_ABOVE_BYTES.compare_exchange(
                0,
                bytes.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            PACK_ABOVE_BYTES.load(Ordering::Relaxed)
        }
        set => set,
    }
}

/// [`pack_above_bytes`] as set (0: not yet chosen).
static PACK_ABOVE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Compresses full chunks once the process holds more than `bytes` uncompressed, from now
/// on (chunks already held stay as they are). For runs that need more memory than the
/// machine has, where every byte kept raw is a byte another run cannot have.
pub fn set_pack_above_bytes(bytes: u64) {
    PACK_ABOVE_BYTES.store(bytes.max(1), Ordering::Relaxed);
}

/// `MemTotal` of a /proc/meminfo text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Bytes per chunk.
const CHUNK: usize = 64 << 10;

/// A chunk's bytes.
#[derive(Debug, Clone, Default)]
enum Chunk {
    /// Never written: zeros.
    #[default]
    Empty,
    Raw(Box<[u8]>),
    /// LZ4-compressed.
    Packed(Box<[u8]>),
}

#[derive(Debug, Default)]
pub struct FileBytes {
    len: u64,
    chunks: Vec<Chunk>,
    /// The last packed chunk read: its index and bytes.
    unpacked: Option<(usize, Box<[u8]>)>,
}

impl Clone for FileBytes {
    fn clone(&self) -> Self {
        let raw = self
            .chunks
            .iter()
            .filter(|c| matches!(c, Chunk::Raw(_)))
            .count();
        RAW_BYTES.fetch_add((raw * CHUNK) as u64, Ordering::Relaxed);
        FileBytes {
            len: self.len,
            chunks: self.chunks.clone(),
            unpacked: None,
        }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        let raw = self
            .chunks
            .iter()
            .filter(|c| matches!(c, Chunk::Raw(_)))
            .count();
        RAW_BYTES.fetch_sub((raw * CHUNK) as u64, Ordering::Relaxed);
    }
}

/// Whether every byte is 0 (a block at a time, so the compiler vectorizes it).
fn all_zero(data: &[u8]) -> bool {
    let mut blocks = data.chunks_exact(256);
    blocks.all(|b| b.iter().fold(0u8, |a, &x| a | x) == 0)
        && blocks.remainder().iter().all(|&x| x == 0)
}

fn unpack(packed: &[u8]) -> Box<[u8]> {
    let mut out = vec![0u8; CHUNK];
    let n = lz4_flex::block::decompress_into(packed, &mut out)
        .expect("a chunk this file packed itself");
    debug_assert_eq!(n, CHUNK);
    out.into_boxed_slice()
}

impl FileBytes {
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the length: growing adds zeros (no memory until written), shrinking drops the
    /// bytes past `len`.
    pub fn set_len(&mut self, len: u64) {
        if len < self.len {
            let keep = (len as usize).div_ceil(CHUNK);
            let dropped = self
                .chunks
                .iter()
                .skip(keep)
                .filter(|c| matches!(c, Chunk::Raw(_)))
                .count();
            RAW_BYTES.fetch_sub((dropped * CHUNK) as u64, Ordering::Relaxed);
            self.chunks.truncate(keep);
            let tail = len as usize % CHUNK;
            // The new last chunk's bytes past `len` become zeros (if it holds any: a
            // file grown by `set_len` may have fewer chunks than its length covers).
            if tail != 0 && self.chunks.len() == keep {
                if let Some(c) = self.raw_mut(keep - 1) {
                    c[tail..].fill(0);
                }
            }
        }
        self.len = len;
    }

    /// Chunk `i` as raw bytes to change (unpacked if it was packed); None if never written.
    fn raw_mut(&mut self, i: usize) -> Option<&mut Box<[u8]>> {
        if let Chunk::Packed(p) = &self.chunks[i] {
            let raw = unpack(p);
            self.chunks[i] = Chunk::Raw(raw);
            RAW_BYTES.fetch_add(CHUNK as u64, Ordering::Relaxed);
        }
        if matches!(&self.unpacked, Some((j, _)) if *j == i) {
            self.unpacked = None;
        }
        match &mut self.chunks[i] {
            Chunk::Raw(c) => Some(c),
            _ => None,
        }
    }

    /// Copies bytes from `offset` into `buf`; returns how many (fewer at the end).
    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.len.saturating_sub(offset) as usize);
        let mut done = 0;
        while done < n {
            let at = offset as usize + done;
            let (i, o) = (at / CHUNK, at % CHUNK);
            let k = (CHUNK - o).min(n - done);
            match self.chunks.get(i) {
                Some(Chunk::Raw(c)) => buf[done..done + k].copy_from_slice(&c[o..o + k]),
                Some(Chunk::Packed(p)) => {
                    if !matches!(&self.unpacked, Some((j, _)) if *j == i) {
                        self.unpacked = Some((i, unpack(p)));
                    }
                    let (_, c) = self.unpacked.as_ref().expect("just unpacked");
                    buf[done..done + k].copy_from_slice(&c[o..o + k]);
                }
                Some(Chunk::Empty) | None => buf[done..done + k].fill(0),
            }
            done += k;
        }
        n
    }

    /// Writes `data` at `offset`, growing the file as needed.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        let chunks = (end as usize).div_ceil(CHUNK);
        if self.chunks.len() < chunks {
            self.chunks.resize_with(chunks, Chunk::default);
        }
        let mut done = 0;
        while done < data.len() {
            let at = offset as usize + done;
            let (i, o) = (at / CHUNK, at % CHUNK);
            let k = (CHUNK - o).min(data.len() - done);
            if matches!(self.chunks[i], Chunk::Empty) {
                // Zeros written where the file holds none yet change nothing: the chunk
                // stays unallocated (replayed runs write zeros; so do sparse-file tests).
                if all_zero(&data[done..done + k]) {
                    done += k;
                    continue;
                }
                self.chunks[i] = Chunk::Raw(vec![0u8; CHUNK].into_boxed_slice());
                RAW_BYTES.fetch_add(CHUNK as u64, Ordering::Relaxed);
            }
            let c = self.raw_mut(i).expect("written chunk");
            c[o..o + k].copy_from_slice(&data[done..done + k]);
            if o + k == CHUNK {
                self.pack(i);
            }
            done += k;
        }
        self.len = self.len.max(end);
    }

    /// Keeps chunk `i` compressed if that halves it at least, once the process holds more
    /// than [`pack_above_bytes`] uncompressed.
    fn pack(&mut self, i: usize) {
        if RAW_BYTES.load(Ordering::Relaxed) <= pack_above_bytes() {
            return;
        }
        if let Chunk::Raw(c) = &self.chunks[i] {
            let packed = lz4_flex::block::compress(c);
            if packed.len() <= CHUNK / 2 {
                self.chunks[i] = Chunk::Packed(packed.into_boxed_slice());
                RAW_BYTES.fetch_sub(CHUNK as u64, Ordering::Relaxed);
            }
        }
    }

    /// Compresses every full chunk worth it now, whatever the process holds (tests).
    #[cfg(test)]
    fn pack_all(&mut self) {
        for i in 0..self.chunks.len() {
            if let Chunk::Raw(c) = &self.chunks[i] {
                let packed = lz4_flex::block::compress(c);
                if packed.len() <= CHUNK / 2 {
                    self.chunks[i] = Chunk::Packed(packed.into_boxed_slice());
                    RAW_BYTES.fetch_sub(CHUNK as u64, Ordering::Relaxed);
                }
            }
        }
    }

    /// Bytes of memory the file's contents take (chunks as held).
    pub fn held_bytes(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Empty => 0,
                Chunk::Raw(c) | Chunk::Packed(c) => c.len() as u64,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on a plain vector, for comparison.
    fn check(f: &mut FileBytes, model: &[u8]) {
        assert_eq!(f.len(), model.len() as u64);
        let mut buf = vec![0xAAu8; model.len() + 10];
        let n = f.read(0, &mut buf);
        assert_eq!(n, model.len());
        if let Some(i) = (0..n).find(|&i| buf[i] != model[i]) {
            panic!("byte {i} of {n}: {} where {} was written", buf[i], model[i]);
        }
    }

    #[test]
    fn mostly_padding_written_front_to_back_is_held_compressed() {
        // 1,000 chunks of 148-byte records with 12 bytes of data each, written 8 KiB at a
        // time, then read back in 8 KiB pieces and partly overwritten.
        let mut f = FileBytes::default();
        let mut model = Vec::new();
        let mut x = 1u64;
        while model.len() < 1000 * CHUNK {
            let mut rec = [0u8; 148];
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            rec[..8].copy_from_slice(&x.to_le_bytes());
            rec[20..24].copy_from_slice(&(x as u32).to_le_bytes());
            model.extend_from_slice(&rec);
        }
        for (i, piece) in model.chunks(8192).enumerate() {
            f.write(i as u64 * 8192, piece);
        }
        // As a run past pack_above_bytes() would have it.
        f.pack_all();
        assert!(
            f.held_bytes() < model.len() as u64 / 3,
            "{} bytes held for {}",
            f.held_bytes(),
            model.len()
        );
        let mut buf = vec![0u8; 8192];
        for at in (0..model.len()).step_by(8192) {
            let n = f.read(at as u64, &mut buf);
            assert_eq!(&buf[..n], &model[at..at + n]);
        }
        f.write(100_000, &[7u8; 300]);
        model[100_000..100_300].fill(7);
        check(&mut f, &model);
    }

    #[test]
    fn the_threshold_is_a_third_of_the_memory() {
        let meminfo = "MemTotal:       24634184 kB\nMemFree:        1000 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(24634184 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 10 kB\n"), None);
        assert!(pack_above_bytes() >= 1 << 30);
    }

    #[test]
    fn zeros_written_where_nothing_was_take_no_memory() {
        let mut f = FileBytes::default();
        f.write(0, &vec![0u8; 5 * CHUNK + 100]);
        assert_eq!((f.len(), f.held_bytes()), (5 * CHUNK as u64 + 100, 0));
        f.write(CHUNK as u64 + 3, &[9]);
        assert_eq!(f.held_bytes(), CHUNK as u64);
        let mut model = vec![0u8; 5 * CHUNK + 100];
        model[CHUNK + 3] = 9;
        check(&mut f, &model);
    }

    #[test]
    fn behaves_as_a_vector_across_chunk_boundaries() {
        let mut f = FileBytes::default();
        let mut model: Vec<u8> = Vec::new();
        let mut x = 7u64;
        for step in 0..300 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) % (3 * CHUNK as u64);
            let len = ((x >> 13) % 70_000) as usize;
            match step % 5 {
                0 | 1 | 4 => {
                    // Every fifth write is of zeros (over data, over holes, past the end).
                    let data: Vec<u8> = if step % 5 == 4 {
                        vec![0; len]
                    } else {
                        (0..len).map(|i| (i as u64 ^ x) as u8).collect()
                    };
                    f.write(off, &data);
                    let end = off as usize + len;
                    if model.len() < end {
                        model.resize(end, 0);
                    }
                    model[off as usize..end].copy_from_slice(&data);
                }
                2 => {
                    f.set_len(off);
                    model.resize(off as usize, 0);
                }
                _ => {
                    let grow = model.len() as u64 + len as u64;
                    f.set_len(grow);
                    model.resize(grow as usize, 0);
                }
            }
            check(&mut f, &model);
            let mut part = vec![0u8; 1000];
            let at = off.min(model.len() as u64);
            let n = f.read(at, &mut part);
            assert_eq!(&part[..n], &model[at as usize..at as usize + n]);
        }
    }
}
