//! The free-space bitmap of all blocks (bit set = in use), with the searches the
//! allocation policies need.

#[derive(Debug, Clone)]
pub struct Bitmap {
    words: Vec<u64>,
    blocks: u64,
    used: u64,
}

impl Bitmap {
    pub fn new(blocks: u64) -> Self {
        let mut b = Bitmap {
            words: vec![0; blocks.div_ceil(64) as usize],
            blocks,
            used: 0,
        };
        // Bits past the end count as used so searches never return them.
        let tail = blocks % 64;
        if tail != 0 {
            *b.words.last_mut().expect("at least one word") = !0u64 << tail;
        }
        b
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    pub fn free_blocks(&self) -> u64 {
        self.blocks - self.used
    }

    #[inline]
    pub fn is_used(&self, b: u64) -> bool {
        self.words[(b / 64) as usize] >> (b % 64) & 1 == 1
    }

    /// Blocks `start..start + 8 * out.len()` as an on-disk bitmap (bit `i` of byte `j` is
    /// block `start + 8j + i`; blocks past the end count as used), a word at a time where
    /// `start` is a multiple of 64: the word's little-endian bytes are those bytes.
    pub fn to_disk_bytes(&self, start: u64, out: &mut [u8]) {
        if !start.is_multiple_of(64) {
            out.fill(0);
            for i in 0..out.len() as u64 * 8 {
                let b = start + i;
                if b >= self.blocks || self.is_used(b) {
                    out[(i / 8) as usize] |= 1 << (i % 8);
                }
            }
            return;
        }
        let w0 = (start / 64) as usize;
        for (k, bytes) in out.chunks_mut(8).enumerate() {
            let w = w0 + k;
            let first = w as u64 * 64;
            let word = match self.words.get(w) {
                Some(&x) if first + 64 > self.blocks => x | (!0u64 << (self.blocks - first)),
                Some(&x) => x,
                None => !0,
            };
            bytes.copy_from_slice(&word.to_le_bytes()[..bytes.len()]);
        }
    }

    /// Marks `[start, start + len)` used; every block must be free.
    pub fn set_used(&mut self, start: u64, len: u64) {
        for b in start..start + len {
            debug_assert!(!self.is_used(b), "block {b} allocated twice");
            self.words[(b / 64) as usize] |= 1 << (b % 64);
        }
        self.used += len;
    }

    /// Marks `[start, start + len)` free; every block must be used.
    pub fn set_free(&mut self, start: u64, len: u64) {
        for b in start..start + len {
            debug_assert!(self.is_used(b), "block {b} freed twice");
            self.words[(b / 64) as usize] &= !(1 << (b % 64));
        }
        self.used -= len;
    }

    /// First free block at or after `from`, not wrapping.
    pub fn next_free(&self, from: u64) -> Option<u64> {
        if from >= self.blocks {
            return None;
        }
        let mut w = (from / 64) as usize;
        let mut word = self.words[w] | ((1u64 << (from % 64)) - 1);
        loop {
            if word != u64::MAX {
                let b = w as u64 * 64 + (!word).trailing_zeros() as u64;
                return (b < self.blocks).then_some(b);
            }
            w += 1;
            if w == self.words.len() {
                return None;
            }
            word = self.words[w];
        }
    }

    /// Length of the free run starting at `start`, up to `max`.
    pub fn free_run_len(&self, start: u64, max: u64) -> u64 {
        let end = start.saturating_add(max).min(self.blocks);
        if start >= end {
            return 0;
        }
        // The first used block at or after `start`, a word at a time.
        let mut w = (start / 64) as usize;
        let mut word = self.words[w] & !((1u64 << (start % 64)) - 1);
        loop {
            if word != 0 {
                let b = w as u64 * 64 + word.trailing_zeros() as u64;
                return b.min(end) - start;
            }
            w += 1;
            if w == self.words.len() || w as u64 * 64 >= end {
                return end - start;
            }
            word = self.words[w];
        }
    }

    /// The first free run at or after `from`, wrapping to the start once: (start, length up
    /// to `max`).
    pub fn next_free_run(&self, from: u64, max: u64) -> Option<(u64, u64)> {
        let start = self.next_free(from).or_else(|| self.next_free(0))?;
        Some((start, self.free_run_len(start, max)))
    }

    /// The length of the longest free run.
    pub fn longest_free_run(&self) -> u64 {
        let mut best = 0;
        let mut b = 0;
        while let Some(s) = self.next_free(b) {
            let n = self.free_run_len(s, self.blocks - s);
            best = best.max(n);
            b = s + n;
        }
        best
    }

    /// The first free run of at least `len` blocks at or after `from` (wrapping once).
    pub fn find_run(&self, from: u64, len: u64) -> Option<u64> {
        for (lo, hi) in [(from, self.blocks), (0, from)] {
            let mut b = lo;
            while let Some(s) = self.next_free(b) {
                if s >= hi {
                    break;
                }
                let n = self.free_run_len(s, len);
                if n >= len {
                    return Some(s);
                }
                b = s + n + 1;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_bytes_match_a_bit_by_bit_encoding() {
        for blocks in [1000u64, 4096, 64 * 7 + 5] {
            let mut b = Bitmap::new(blocks);
            // Disjoint runs (allocating a block twice is a bug the bitmap's debug checks
            // catch): the last one ends the bitmap, the 400 one stops before it.
            for (s, l) in [(3, 5), (64, 1), (100, 130), (400, 30), (blocks - 10, 10)] {
                b.set_used(s, l);
            }
            for start in [0u64, 64, 128, 320, 3, 100, 960, 4096] {
                for len in [8usize, 16, 13, 512] {
                    let mut got = vec![0xAAu8; len];
                    b.to_disk_bytes(start, &mut got);
                    let mut want = vec![0u8; len];
                    for i in 0..len as u64 * 8 {
                        let blk = start + i;
                        if blk >= blocks || b.is_used(blk) {
                            want[(i / 8) as usize] |= 1 << (i % 8);
                        }
                    }
                    assert_eq!(got, want, "blocks {blocks}, start {start}, {len} bytes");
                }
            }
        }
    }

    #[test]
    fn free_run_len_matches_a_block_by_block_count() {
        let mut b = Bitmap::new(1000);
        for (s, l) in [(3, 5), (64, 1), (100, 130), (400, 64), (990, 10)] {
            b.set_used(s, l);
        }
        for start in 0..1000 {
            for max in [0, 1, 7, 64, 65, 500, 2000] {
                let mut n = 0;
                while n < max && start + n < 1000 && !b.is_used(start + n) {
                    n += 1;
                }
                assert_eq!(b.free_run_len(start, max), n, "{start} {max}");
            }
        }
    }

    #[test]
    fn runs_and_wrapping() {
        let mut b = Bitmap::new(200);
        assert_eq!(b.free_blocks(), 200);
        b.set_used(0, 10);
        b.set_used(20, 100);
        assert_eq!(b.next_free(0), Some(10));
        assert_eq!(b.next_free_run(5, 50), Some((10, 10)));
        assert_eq!(b.find_run(0, 15), Some(120));
        assert_eq!(
            b.find_run(150, 60),
            Some(120),
            "wraps and finds the run that straddles the cursor"
        );
        assert_eq!(b.find_run(0, 81), None);
        assert_eq!(b.longest_free_run(), 80);
        assert_eq!(b.next_free_run(199, 8), Some((199, 1)));
        b.set_used(120, 80);
        assert_eq!(b.next_free_run(150, 8), Some((10, 8)), "wraps to the start");
        b.set_free(20, 5);
        assert_eq!(b.free_blocks(), 15);
        assert_eq!(b.next_free(200), None);
    }
}
