//! The in-memory hash table of the join: chained buckets over flat arrays, keyed by the
//! order key with hash F2 (independent of the partitioning hash F1). Its memory is
//! counted as an engine holding whole records would need: per row the record's bytes and
//! a 4-byte chain link, plus a 4-byte bucket head per bucket.

const EMPTY: u32 = u32::MAX;
const F2_MULT: u64 = 0x9E37_79B9_7F4A_7C15;

pub struct HashTable {
    heads: Vec<u32>,
    next: Vec<u32>,
    keys: Vec<u64>,
    prices: Vec<i64>,
    shift: u32,
}

/// Buckets for `rows` rows: the next power of two (at least 16).
fn buckets_for(rows: u64) -> u64 {
    rows.max(16).next_power_of_two()
}

/// Memory charged for a table of `rows` records of `record_bytes`.
pub fn table_bytes(rows: u64, record_bytes: u64) -> u64 {
    rows * (record_bytes + 4) + buckets_for(rows) * 4
}

/// Rows of `record_bytes` a table may hold within `bytes` (the inverse of [`table_bytes`]).
pub fn rows_fitting(bytes: u64, record_bytes: u64) -> u64 {
    // A power-of-two bucket array costs at most 8 bytes per row.
    bytes / (record_bytes + 12)
}

impl HashTable {
    pub fn with_capacity(rows: u64) -> HashTable {
        let b = buckets_for(rows);
        HashTable {
            heads: vec![EMPTY; b as usize],
            next: Vec::with_capacity(rows as usize),
            keys: Vec::with_capacity(rows as usize),
            prices: Vec::with_capacity(rows as usize),
            shift: 64 - b.trailing_zeros(),
        }
    }

    #[inline]
    fn bucket(&self, key: u64) -> usize {
        (key.wrapping_mul(F2_MULT) >> self.shift) as usize
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    #[inline]
    pub fn insert(&mut self, key: u64, price_cents: i64) {
        let b = self.bucket(key);
        self.next.push(self.heads[b]);
        self.heads[b] = self.keys.len() as u32;
        self.keys.push(key);
        self.prices.push(price_cents);
    }

    /// Calls `f(price)` for every row with `key`.
    #[inline]
    pub fn for_each_match(&self, key: u64, mut f: impl FnMut(i64)) {
        let mut i = self.heads[self.bucket(key)];
        while i != EMPTY {
            if self.keys[i as usize] == key {
                f(self.prices[i as usize]);
            }
            i = self.next[i as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_duplicate() {
        let mut t = HashTable::with_capacity(100);
        for i in 0..100u64 {
            t.insert(i % 10, i as i64);
        }
        let mut got = vec![];
        t.for_each_match(3, |p| got.push(p));
        got.sort();
        assert_eq!(got, (0..10).map(|j| 3 + 10 * j).collect::<Vec<i64>>());
        let mut none = 0;
        t.for_each_match(11, |_| none += 1);
        assert_eq!(none, 0);
        assert!(table_bytes(1000, 16) >= rows_fitting(table_bytes(1000, 16), 16) * 20);
    }
}
