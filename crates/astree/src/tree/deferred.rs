//! Deferred changes: with logical commits, a committed change is durable once its operation
//! is in the log, and the tree may make it to its nodes later. [`BTree::defer_changes`]
//! keeps such changes in a sorted map (bounded in bytes) instead of changing a leaf per
//! key; lookups and ranges see them first; they are made to the nodes in key order, as one
//! batch, when the map outgrows its budget or before a commit that must write the nodes
//! (the store says when: its operation log would outgrow its bound, a bulk change, or
//! cleaning). The nodes then take many changes per leaf written instead of one.
//!
//! This is an LSM tree's memtable in front of the B-tree (fjall's and RocksDB's write
//! buffer, a Bε-tree's root buffer): the price is memory (the budget) and a lookup in the
//! map before the tree's, which a blocked Bloom filter of key hashes makes one read of a
//! cache line for most keys the map does not hold. Recovery is unchanged: the operations
//! committed since the last node-level commit are replayed into the nodes at open.

use super::BTree;
use crate::store::NodeStore;
use crate::TreeError;
use std::collections::BTreeMap;

/// Bytes a deferred change is charged beyond its key and value (an estimate, from the
/// layouts on 64-bit targets): its slots in the map's B-tree nodes (a key's and a value's
/// vector header, 48 bytes, in leaves of 11 slots about 70% full under random inserts, and
/// the internal nodes above them: about 80 bytes), the allocator's rounding of the key and
/// value buffers (about 10) and the filter's bits (at most 2 × [`FILTER_BITS_PER_KEY`]).
pub const DEFERRED_ENTRY_OVERHEAD_BYTES: usize = 96;

/// The key filter's bits per key at its fullest (it doubles past that): with four bits
/// set per key in one 512-bit block, about 1% of the keys the map does not hold pass it
/// (Putze, Sanders and Singler, "Cache-, Hash- and Space-Efficient Bloom Filters", 2007:
/// a blocked filter costs a little more space than a classic one for the same rate; the
/// test below measures the rate).
pub const FILTER_BITS_PER_KEY: usize = 12;

/// Changes made to the tree's contents but not yet to its nodes: the newest value of each
/// key (`None`: removed).
#[derive(Default)]
pub(super) struct Deferred {
    /// The most bytes the map may hold; 0: nothing is deferred.
    pub(super) budget_bytes: usize,
    pub(super) bytes: usize,
    pub(super) changes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Every key in `changes` passes it: a lookup of a key not there reads one cache line.
    filter: KeyFilter,
}

/// A blocked Bloom filter of key hashes: a key sets four bits in one 64-byte block.
#[derive(Default)]
struct KeyFilter {
    blocks: Vec<[u64; 8]>,
    keys: usize,
}

impl KeyFilter {
    /// The block and the four bits (word, mask) of hash `h`: the block from its high 32
    /// bits (scaled to the block count), each bit from 9 of its low 36.
    fn place(&self, h: u64) -> (usize, [(usize, u64); 4]) {
        let block = (((h >> 32) * self.blocks.len() as u64) >> 32) as usize;
        let bit = |i: u32| {
            let b = (h >> (9 * i)) & 511;
            ((b / 64) as usize, 1u64 << (b % 64))
        };
        (block, [bit(0), bit(1), bit(2), bit(3)])
    }

    fn contains(&self, h: u64) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let (block, bits) = self.place(h);
        let b = &self.blocks[block];
        bits.iter().all(|&(w, m)| b[w] & m != 0)
    }

    /// Adds a hash; false if the filter is full (past [`FILTER_BITS_PER_KEY`] per key) and
    /// must be rebuilt larger.
    fn insert(&mut self, h: u64) -> bool {
        if (self.keys + 1) * FILTER_BITS_PER_KEY > self.blocks.len() * 512 {
            return false;
        }
        let (block, bits) = self.place(h);
        for (w, m) in bits {
            self.blocks[block][w] |= m;
        }
        self.keys += 1;
        true
    }

    /// An empty filter with room for `keys` keys (at least one block; a power of two).
    fn with_room(keys: usize) -> KeyFilter {
        let blocks = (keys * FILTER_BITS_PER_KEY)
            .div_ceil(512)
            .max(1)
            .next_power_of_two();
        KeyFilter {
            blocks: vec![[0; 8]; blocks],
            keys: 0,
        }
    }
}

/// A 64-bit hash of a key (eight bytes at a time, multiplied and rotated as FxHash does).
fn key_hash(key: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = key.len() as u64;
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8 bytes"))).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(b)).wrapping_mul(K);
    }
    // Mix the high bits down: the hash set uses the low ones.
    h ^ (h >> 29)
}

impl Deferred {
    pub(super) fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The deferred change of `key`, if any: `Some(None)` if it was removed.
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        if self.changes.is_empty() || !self.filter.contains(key_hash(key)) {
            return None;
        }
        self.changes.get(key).map(|v| v.as_deref())
    }

    pub(super) fn cost(key: &[u8], value: Option<&[u8]>) -> usize {
        key.len() + value.map_or(0, <[u8]>::len) + DEFERRED_ENTRY_OVERHEAD_BYTES
    }

    /// Whether changes of `bytes` more (as [`Deferred::cost`] counts them) fit the budget.
    pub(super) fn has_room(&self, bytes: usize) -> bool {
        self.bytes + bytes <= self.budget_bytes
    }

    pub(super) fn put(&mut self, key: &[u8], value: Option<&[u8]>) {
        let new = Self::cost(key, value);
        if let Some(old) = self.changes.get_mut(key) {
            self.bytes -= Self::cost(key, old.as_deref());
            *old = value.map(<[u8]>::to_vec);
        } else {
            self.changes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
            if !self.filter.insert(key_hash(key)) {
                self.rebuild_filter();
            }
        }
        self.bytes += new;
    }

    /// A filter of twice the room, of every key in the map.
    fn rebuild_filter(&mut self) {
        self.filter = KeyFilter::with_room(2 * self.changes.len());
        for k in self.changes.keys() {
            let fits = self.filter.insert(key_hash(k));
            debug_assert!(fits, "sized for twice the keys");
        }
    }

    /// Puts a batch's changes (the last change of a key wins). A batch of at least an
    /// eighth of the map's entries is sorted on its own and merged with the map in one
    /// pass (each change put one by one would search the map at random).
    pub(super) fn put_batch(&mut self, ops: &[super::BatchOp]) {
        if ops.len() < 64 || ops.len() < self.changes.len() / 8 {
            for &(k, v) in ops {
                self.put(k, v);
            }
            return;
        }
        // `collect` sorts stably and keeps the last value of equal keys; `append` keeps
        // the batch's value of a key both hold.
        let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = ops
            .iter()
            .map(|&(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        self.changes.append(&mut batch);
        self.rebuild_filter();
        self.bytes = self
            .changes
            .iter()
            .map(|(k, v)| Self::cost(k, v.as_deref()))
            .sum();
    }

    /// Empties the map, handing its changes over in key order.
    pub(super) fn take(&mut self) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        self.filter = KeyFilter::default();
        self.bytes = 0;
        std::mem::take(&mut self.changes)
    }

    /// Bytes the changes of a batch would be charged.
    pub(super) fn batch_cost(ops: &[super::BatchOp]) -> usize {
        ops.iter().map(|&(k, v)| Self::cost(k, v)).sum()
    }
}

impl<S: NodeStore> BTree<S> {
    /// Defers changes to the nodes (see the module's note), holding at most `budget_bytes`
    /// of them in memory (0: none, the default). The store must commit by logging
    /// operations; a change of the budget first makes the changes already deferred.
    pub fn defer_changes(&mut self, budget_bytes: usize) -> Result<(), TreeError> {
        if budget_bytes > 0 && !self.store.logical_commits() {
            return Err(TreeError::Config(
                "deferred changes need a store with logical commits (the log makes them \
                 durable before the nodes hold them)"
                    .into(),
            ));
        }
        self.make_deferred()?;
        self.deferred.budget_bytes = budget_bytes;
        Ok(())
    }

    /// Bytes of deferred changes held now (as the budget counts them).
    pub fn deferred_bytes(&self) -> usize {
        self.deferred.bytes
    }

    /// Makes the deferred changes to the nodes, in key order, as one batch (they were
    /// logged when they were made: not logged again).
    pub(super) fn make_deferred(&mut self) -> Result<(), TreeError> {
        if self.deferred.is_empty() {
            return Ok(());
        }
        let changes = self.deferred.take();
        let ops: Vec<super::BatchOp> = changes
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        let order: Vec<usize> = (0..ops.len()).collect();
        self.apply_in_order(&ops, &order, false)
    }

    /// Commit with deferred changes: the operations alone, unless the store must write its
    /// nodes, when the changes are made first.
    pub(super) fn sync_deferred(&mut self) -> Result<(), TreeError> {
        if self.store.node_commit_forced() {
            self.make_deferred()?;
            return self.store.sync();
        }
        self.store.commit_ops_only()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_see_the_newest_change_and_the_budget_counts_replacements_once() {
        let mut d = Deferred {
            budget_bytes: 1 << 20,
            ..Default::default()
        };
        assert_eq!(d.get(b"a"), None);
        d.put(b"a", Some(b"1"));
        d.put(b"b", None);
        d.put(b"a", Some(b"22"));
        assert_eq!(d.get(b"a"), Some(Some(&b"22"[..])));
        assert_eq!(d.get(b"b"), Some(None));
        assert_eq!(d.get(b"c"), None);
        let o = DEFERRED_ENTRY_OVERHEAD_BYTES;
        assert_eq!(d.bytes, (1 + 2 + o) + (1 + o));
        let all = d.take();
        assert_eq!(all.len(), 2);
        assert!(d.is_empty() && d.bytes == 0 && d.get(b"a").is_none());
    }

    #[test]
    fn a_large_batch_merged_at_once_means_the_same_as_its_changes_one_by_one() {
        let keys: Vec<Vec<u8>> = (0..300u32)
            .map(|i| (i * 7 % 101).to_be_bytes().to_vec())
            .collect();
        let vals: Vec<Vec<u8>> = (0..300u32)
            .map(|i| vec![i as u8; (i % 5) as usize])
            .collect();
        let ops: Vec<crate::tree::BatchOp> = keys
            .iter()
            .zip(&vals)
            .enumerate()
            .map(|(i, (k, v))| (k.as_slice(), (i % 3 != 0).then_some(v.as_slice())))
            .collect();
        let mut one_by_one = Deferred::default();
        let mut merged = Deferred::default();
        for d in [&mut one_by_one, &mut merged] {
            d.put(&3u32.to_be_bytes(), Some(b"before"));
            d.put(&1000u32.to_be_bytes(), None);
        }
        for &(k, v) in &ops {
            one_by_one.put(k, v);
        }
        merged.put_batch(&ops);
        assert_eq!(merged.changes, one_by_one.changes);
        assert_eq!(merged.bytes, one_by_one.bytes);
        for k in &keys {
            assert_eq!(merged.get(k), one_by_one.get(k));
        }
    }

    #[test]
    fn the_filter_passes_every_key_it_holds_and_about_one_percent_of_others() {
        let mut d = Deferred {
            budget_bytes: usize::MAX,
            ..Default::default()
        };
        let key = |i: u64| (i * 0x9E37_79B9_7F4A_7C15).to_le_bytes().repeat(3);
        for i in 0..20_000 {
            d.put(&key(i), None);
        }
        // Every key held is found (no false negatives), after several rebuilds.
        assert!((0..20_000).all(|i| d.get(&key(i)) == Some(None)));
        assert!(d.filter.blocks.len() > 1);
        let passed = (20_000..220_000)
            .filter(|&i| d.filter.contains(key_hash(&key(i))))
            .count();
        let rate = passed as f64 / 200_000.0;
        assert!(
            rate < 0.03,
            "{:.2}% of absent keys pass the filter",
            rate * 100.0
        );
    }

    #[test]
    fn key_hashes_differ_for_keys_that_differ_in_length_or_any_byte() {
        let keys: [&[u8]; 6] = [b"", b"\0", b"\0\0", b"abcdefgh", b"abcdefgi", b"abcdefgh\0"];
        let hashes: std::collections::HashSet<u64> = keys.iter().map(|k| key_hash(k)).collect();
        assert_eq!(hashes.len(), keys.len());
    }
}
