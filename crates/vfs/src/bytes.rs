//! [`FileBytes`]: a file's bytes in memory, in 64 KiB chunks allocated on first write. A
//! file extended (by `fallocate` or a write past its end) costs no memory until written,
//! reads of never-written chunks give zeros, and growth never copies what is there; freed
//! chunks go back to the allocator's free lists rather than to the kernel, so file systems
//! that create and remove many spill files do not fault fresh pages in for each.

/// Bytes per chunk.
const CHUNK: usize = 64 << 10;

#[derive(Debug, Clone, Default)]
pub struct FileBytes {
    len: u64,
    chunks: Vec<Option<Box<[u8]>>>,
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
            self.chunks.truncate(keep);
            let tail = len as usize % CHUNK;
            if tail != 0 {
                if let Some(Some(c)) = self.chunks.last_mut() {
                    c[tail..].fill(0);
                }
            }
        }
        self.len = len;
    }

    /// Copies bytes from `offset` into `buf`; returns how many (fewer at the end).
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.len.saturating_sub(offset) as usize);
        let mut done = 0;
        while done < n {
            let at = offset as usize + done;
            let (i, o) = (at / CHUNK, at % CHUNK);
            let k = (CHUNK - o).min(n - done);
            match self.chunks.get(i).and_then(|c| c.as_deref()) {
                Some(c) => buf[done..done + k].copy_from_slice(&c[o..o + k]),
                None => buf[done..done + k].fill(0),
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
            self.chunks.resize_with(chunks, || None);
        }
        let mut done = 0;
        while done < data.len() {
            let at = offset as usize + done;
            let (i, o) = (at / CHUNK, at % CHUNK);
            let k = (CHUNK - o).min(data.len() - done);
            let c = self.chunks[i].get_or_insert_with(|| vec![0u8; CHUNK].into_boxed_slice());
            c[o..o + k].copy_from_slice(&data[done..done + k]);
            done += k;
        }
        self.len = self.len.max(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same operations on a plain vector, for comparison.
    fn check(f: &FileBytes, model: &[u8]) {
        assert_eq!(f.len(), model.len() as u64);
        let mut buf = vec![0xAAu8; model.len() + 10];
        let n = f.read(0, &mut buf);
        assert_eq!(&buf[..n], model);
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
            match step % 4 {
                0 | 1 => {
                    let data: Vec<u8> = (0..len).map(|i| (i as u64 ^ x) as u8).collect();
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
            check(&f, &model);
            let mut part = vec![0u8; 1000];
            let at = off.min(model.len() as u64);
            let n = f.read(at, &mut part);
            assert_eq!(&part[..n], &model[at as usize..at as usize + n]);
        }
    }
}
