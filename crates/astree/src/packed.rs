//! A list of byte strings kept in one buffer: a node's keys or values. Lookups compare
//! bytes that lie next to each other in memory, and copying a node copies three buffers,
//! not one allocation per entry.
//!
//! Beside each string its head: its first 8 bytes as a big-endian number, zero-padded. Two
//! strings whose heads differ are ordered as their heads are (the bytes before the first
//! difference are equal, and a string that ends there pads with zeros, below any byte the
//! other may have), so a search compares numbers in one small array and reads a string's
//! bytes only where heads tie: for keys of 8 random bytes or more, once per search.

use std::ops::Index;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packed {
    data: Vec<u8>,
    /// `ends[i]` is where string `i` ends in `data`.
    ends: Vec<u32>,
    /// `heads[i]` is string `i`'s [`head`].
    heads: Vec<u64>,
}

/// A string's first 8 bytes as a big-endian number, zero-padded.
#[inline]
pub fn head(b: &[u8]) -> u64 {
    match b.first_chunk::<8>() {
        // (A fixed-size copy: a copy of a variable length would be a call to memcpy, and
        // a search takes one head per node it passes.)
        Some(h) => u64::from_be_bytes(*h),
        None => {
            let mut h = [0u8; 8];
            h[..b.len()].copy_from_slice(b);
            u64::from_be_bytes(h)
        }
    }
}

impl Packed {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        Packed {
            data: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(strings),
            heads: Vec::with_capacity(strings),
        }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes of all strings together.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| &self.data[self.start(i)..self.ends[i] as usize])
    }

    pub fn push(&mut self, b: &[u8]) {
        self.data.extend_from_slice(b);
        self.ends.push(self.data.len() as u32);
        self.heads.push(head(b));
    }

    pub fn insert(&mut self, i: usize, b: &[u8]) {
        let at = self.start(i);
        let old_len = self.data.len();
        self.data.resize(old_len + b.len(), 0);
        self.data.copy_within(at..old_len, at + b.len());
        self.data[at..at + b.len()].copy_from_slice(b);
        for e in &mut self.ends[i..] {
            *e += b.len() as u32;
        }
        self.ends.insert(i, (at + b.len()) as u32);
        self.heads.insert(i, head(b));
    }

    pub fn remove(&mut self, i: usize) -> Vec<u8> {
        let (s, e) = (self.start(i), self.ends[i] as usize);
        let old = self.data[s..e].to_vec();
        self.data.copy_within(e.., s);
        self.data.truncate(self.data.len() - old.len());
        self.ends.remove(i);
        self.heads.remove(i);
        for x in &mut self.ends[i..] {
            *x -= old.len() as u32;
        }
        old
    }

    /// Replaces string `i`; returns the old one.
    pub fn replace(&mut self, i: usize, b: &[u8]) -> Vec<u8> {
        let (s, e) = (self.start(i), self.ends[i] as usize);
        let old = self.data[s..e].to_vec();
        if b.len() != old.len() {
            let old_len = self.data.len();
            if b.len() > old.len() {
                self.data.resize(old_len + b.len() - old.len(), 0);
            }
            self.data.copy_within(e..old_len, s + b.len());
            self.data.truncate(old_len + b.len() - old.len());
        }
        self.data[s..s + b.len()].copy_from_slice(b);
        let delta = b.len() as i64 - old.len() as i64;
        for x in &mut self.ends[i..] {
            *x = (*x as i64 + delta) as u32;
        }
        self.heads[i] = head(b);
        old
    }

    /// Splits off strings `i..` into a new list.
    pub fn split_off(&mut self, i: usize) -> Packed {
        let at = self.start(i);
        let data = self.data.split_off(at);
        let ends = self
            .ends
            .split_off(i)
            .into_iter()
            .map(|e| e - at as u32)
            .collect();
        let heads = self.heads.split_off(i);
        Packed { data, ends, heads }
    }

    /// Appends all of `other`'s strings.
    pub fn extend_from(&mut self, other: &Packed) {
        let base = self.data.len() as u32;
        self.data.extend_from_slice(&other.data);
        self.ends.extend(other.ends.iter().map(|e| e + base));
        self.heads.extend_from_slice(&other.heads);
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator + '_ {
        (0..self.len()).map(|i| &self[i])
    }

    /// String `i` against `key` (whose head is `key_head`): by heads, by bytes on a tie.
    fn cmp_at(&self, i: usize, key: &[u8], key_head: u64) -> std::cmp::Ordering {
        self.heads[i].cmp(&key_head).then_with(|| self[i].cmp(key))
    }

    /// Binary search of a sorted list.
    pub fn binary_search(&self, key: &[u8]) -> Result<usize, usize> {
        let key_head = head(key);
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.cmp_at(mid, key, key_head) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The first index whose string is greater than `key` (of a sorted list):
    /// `partition_point(|s| s <= key)`, comparing heads first.
    pub fn upper_bound(&self, key: &[u8]) -> usize {
        let key_head = head(key);
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_at(mid, key, key_head) != std::cmp::Ordering::Greater {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The first index whose string fails `pred` (the list is partitioned by it).
    pub fn partition_point(&self, mut pred: impl FnMut(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if pred(&self[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl Index<usize> for Packed {
    type Output = [u8];
    fn index(&self, i: usize) -> &[u8] {
        &self.data[self.start(i)..self.ends[i] as usize]
    }
}

impl<B: AsRef<[u8]>> FromIterator<B> for Packed {
    fn from_iter<I: IntoIterator<Item = B>>(it: I) -> Self {
        let mut p = Packed::new();
        for b in it {
            p.push(b.as_ref());
        }
        p
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_vec_of_byte_strings() {
        let mut p: Packed = ["b", "d"].iter().collect();
        let mut v: Vec<Vec<u8>> = vec![b"b".to_vec(), b"d".to_vec()];
        p.insert(0, b"a");
        v.insert(0, b"a".to_vec());
        p.insert(2, b"cc");
        v.insert(2, b"cc".to_vec());
        p.push(b"");
        v.push(vec![]);
        assert_eq!(p.iter().collect::<Vec<_>>(), v);
        assert_eq!(p.replace(1, b"bbb"), b"b");
        v[1] = b"bbb".to_vec();
        assert_eq!(p.remove(2), b"cc");
        v.remove(2);
        assert_eq!(p.iter().collect::<Vec<_>>(), v);
        assert_eq!(p.binary_search(b"bbb"), Ok(1));
        assert_eq!(p.binary_search(b"c"), Err(2));
        assert_eq!(p.partition_point(|k| k <= &b"bbb"[..]), 2);
        assert_eq!(p.upper_bound(b"bbb"), 2);
        let tail = p.split_off(1);
        assert_eq!(
            tail.iter().collect::<Vec<_>>(),
            vec![&b"bbb"[..], b"d", b""]
        );
        p.extend_from(&tail);
        assert_eq!(p.iter().collect::<Vec<_>>(), v);
        assert_eq!(p.bytes(), 5);
        assert_eq!(p.get(9), None);
    }

    #[test]
    fn searches_by_heads_agree_with_byte_order() {
        // Short strings, zero bytes and shared 8-byte prefixes: where heads tie or pad.
        let mut x = 12345u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for _ in 0..200 {
            let mut strings: Vec<Vec<u8>> = (0..(next() % 40))
                .map(|_| {
                    let len = (next() % 12) as usize;
                    let prefix = next() % 3 == 0;
                    (0..len)
                        .map(|i| {
                            if prefix && i < 8 {
                                1
                            } else {
                                (next() % 3) as u8
                            }
                        })
                        .collect()
                })
                .collect();
            strings.sort();
            strings.dedup();
            let p: Packed = strings.iter().collect();
            for _ in 0..30 {
                let key: Vec<u8> = (0..next() % 12).map(|_| (next() % 3) as u8).collect();
                assert_eq!(
                    p.binary_search(&key),
                    strings.binary_search(&key),
                    "{key:?} in {strings:?}"
                );
                assert_eq!(p.upper_bound(&key), strings.partition_point(|s| s <= &key));
            }
            for (i, s) in strings.iter().enumerate() {
                assert_eq!(p.binary_search(s), Ok(i));
            }
        }
    }
}
