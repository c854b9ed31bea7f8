//! An LRU cache of decoded nodes in front of any store (paper 004's buffer cache):
//! reads of cached nodes cost nothing; writes go through to the store and refresh the
//! cache. Bounded in nodes ([`LruCache::new`]: paper 004 counts its cache in nodes; 0 = no
//! cache; exact LRU) or in bytes ([`LruCache::with_bytes`]: each node charged what it holds
//! in memory, [`memory_bytes`], as other engines size their caches). A byte-bounded cache
//! approximates LRU by second chance (CLOCK, as PostgreSQL's buffer manager does): a hit
//! only marks the node referenced, so reads of cached nodes touch no other entry; a clock
//! hand passes over referenced nodes once, clearing their mark. When it is full, a lookup
//! that misses a leaf searches the leaf's image where the store read it and caches it only
//! if it was read so lately before (2Q's admission, [`GHOST_SHARE`]): a tree larger than
//! the cache is read as LMDB reads, from the OS page cache, without evicting and decoding
//! a leaf per lookup.

use crate::node::{IdMap, Node, NodeId, Step};
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use slotlist::SlotList;
use std::sync::Arc;

const NIL: u32 = u32::MAX;

/// How many leaves read in place a full byte-bounded cache remembers, as a share of the
/// nodes it holds: 2Q's A1out queue (Johnson and Shasha, "2Q: a low overhead high
/// performance buffer management replacement algorithm", VLDB 1994), which they size at
/// half the cache's pages. An eighth here: under uniform reads of a tree larger than the
/// cache, every admission is churn (the hit ratio is the cached share whatever is
/// cached), and at half, 10 M entries read uniformly through a 1 GiB cache admitted about
/// 40% of the leaves read in place, which cost a quarter of the read time
/// (`bench/kvcompare`); an eighth still caches a leaf read twice within an eighth of the
/// cache's turnover.
pub const GHOST_SHARE: (usize, usize) = (1, 8);

/// The default of a cache bounded in bytes: 1 GiB, redb's default cache size (LMDB and
/// fjall use the OS page cache instead, unbounded).
pub const DEFAULT_CACHE_BYTES: usize = 1 << 30;

/// What a decoded node holds in memory, as a byte-bounded cache charges it: its keys' and
/// values' bytes, a 4-byte offset and an 8-byte head per string (`Packed`), 8 bytes per
/// child, and about 120 bytes of fixed parts (the `Arc`, the enum and its vectors'
/// headers) — the encoded image bytes less the per-entry length fields, plus those.
pub fn memory_bytes(node: &Node) -> usize {
    120 + match node {
        Node::Leaf { keys, values, .. } => {
            keys.bytes() + values.bytes() + 12 * (keys.len() + values.len())
        }
        Node::Internal { keys, children } => keys.bytes() + 12 * keys.len() + 8 * children.len(),
    }
}

/// What a lookup's miss found in the store's image of a node ([`LruCache::read_in_place`]).
enum InPlace<R> {
    /// The answer, from the image (the node is not cached).
    Answered(Step<R>),
    /// The node decoded, to be cached.
    Decoded(Node),
    /// The store has no image of it: read it.
    NoImage,
}

/// Cached NodeIDs to their slots: a table indexed by NodeID (stores hand NodeIDs out in
/// order from 0), in pages of [`INDEX_PAGE`] made when a NodeID in them is first cached
/// and dropped when their last one leaves, so memory follows the live NodeIDs. A lookup is
/// two array reads where a hash map probes its control bytes and then its slot: on a path
/// through a tree larger than the CPU's caches, one miss less per node.
#[derive(Default)]
struct SlotIndex {
    pages: Vec<Option<Box<IndexPage>>>,
    len: usize,
}

const INDEX_PAGE: usize = 4096;

struct IndexPage {
    slots: [u32; INDEX_PAGE],
    used: usize,
}

impl SlotIndex {
    fn split(id: NodeId) -> (usize, usize) {
        (
            (id / INDEX_PAGE as u64) as usize,
            (id % INDEX_PAGE as u64) as usize,
        )
    }

    #[inline]
    fn get(&self, id: &NodeId) -> Option<&u32> {
        let (p, i) = Self::split(*id);
        let s = &self.pages.get(p)?.as_ref()?.slots[i];
        (*s != NIL).then_some(s)
    }

    fn insert(&mut self, id: NodeId, slot: u32) {
        let (p, i) = Self::split(id);
        if self.pages.len() <= p {
            self.pages.resize_with(p + 1, || None);
        }
        let page = self.pages[p].get_or_insert_with(|| {
            Box::new(IndexPage {
                slots: [NIL; INDEX_PAGE],
                used: 0,
            })
        });
        if page.slots[i] == NIL {
            page.used += 1;
            self.len += 1;
        }
        page.slots[i] = slot;
    }

    fn remove(&mut self, id: &NodeId) -> Option<u32> {
        let (p, i) = Self::split(*id);
        let page = self.pages.get_mut(p)?.as_mut()?;
        let slot = std::mem::replace(&mut page.slots[i], NIL);
        if slot == NIL {
            return None;
        }
        page.used -= 1;
        self.len -= 1;
        if page.used == 0 {
            self.pages[p] = None;
        }
        Some(slot)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A cached node in the recency list (least recent at the front).
#[derive(Default)]
struct Entry {
    id: NodeId,
    /// None once the slot is free.
    node: Option<Arc<Node>>,
    /// Its [`memory_bytes`] (a byte-bounded cache).
    charge: usize,
    /// Read since it was cached or last passed over (second chance; a byte-bounded cache).
    referenced: bool,
}

pub struct LruCache<S: NodeStore> {
    inner: S,
    /// Nodes at most (a cache bounded in nodes).
    capacity: usize,
    /// Bytes at most (a cache bounded in bytes; then `capacity` is unbounded).
    capacity_bytes: Option<usize>,
    /// [`memory_bytes`] of the cached nodes.
    cached_bytes: usize,
    /// Second chance instead of exact LRU (a byte-bounded cache).
    clock: bool,
    /// Cached nodes: NodeID → slot in `entries`.
    index: SlotIndex,
    /// Slots, in recency order (exact LRU; a byte-bounded cache keeps them in the order
    /// they were cached and its clock hand walks them by slot number).
    entries: SlotList<Entry>,
    hits: u64,
    lookups: u64,
    /// Leaves read in place (not cached) lately, with when ([`LruCache::remember`]).
    ghosts: IdMap<u64>,
    ghost_order: std::collections::VecDeque<(NodeId, u64)>,
    ghost_seq: u64,
    /// The clock hand: the slot the next eviction looks at (a byte-bounded cache).
    hand: usize,
}

impl<S: NodeStore> LruCache<S> {
    /// At most `capacity` nodes (0: no cache).
    pub fn new(inner: S, capacity: usize) -> Self {
        LruCache {
            inner,
            capacity,
            capacity_bytes: None,
            cached_bytes: 0,
            clock: false,
            index: SlotIndex::default(),
            entries: SlotList::new(),
            hits: 0,
            lookups: 0,
            ghosts: IdMap::default(),
            ghost_order: std::collections::VecDeque::new(),
            ghost_seq: 0,
            hand: 0,
        }
    }

    /// At most `bytes` of decoded nodes (each charged its [`memory_bytes`]; 0: no cache).
    pub fn with_bytes(inner: S, bytes: usize) -> Self {
        LruCache {
            capacity: if bytes == 0 { 0 } else { usize::MAX },
            capacity_bytes: Some(bytes),
            clock: true,
            ..LruCache::new(inner, 0)
        }
    }

    /// [`memory_bytes`] of the nodes cached now.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Nodes cached now.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Caches `node` as the most recently used, evicting the least recently used.
    fn put(&mut self, id: NodeId, node: Arc<Node>) {
        if self.capacity == 0 {
            return;
        }
        let charge = if self.capacity_bytes.is_some() {
            memory_bytes(&node)
        } else {
            0
        };
        if let Some(&i) = self.index.get(&id) {
            let e = self.entries.get_mut(i);
            self.cached_bytes = self.cached_bytes - e.charge + charge;
            (e.node, e.charge, e.referenced) = (Some(node), charge, true);
            if !self.clock {
                self.entries.move_to_back(i);
            }
        } else {
            if self.index.len() >= self.capacity {
                let lru = self.entries.front().expect("a full cache has entries");
                self.remove(self.entries.get(lru).id);
            }
            let i = self.entries.push_back(Entry {
                id,
                node: Some(node),
                charge,
                referenced: false,
            });
            self.index.insert(id, i);
            self.cached_bytes += charge;
        }
        // A byte bound: the clock hand sweeps the slots, evicting the first node not read
        // since it last passed (never the node just cached); a node read since gets its
        // second chance, its mark cleared. The hand walks the slots in order, touching one
        // entry per step, as PostgreSQL's clock sweep walks its buffer descriptors.
        while self.index.len() > 1 && self.capacity_bytes.is_some_and(|b| self.cached_bytes > b) {
            if self.hand >= self.entries.slots() {
                self.hand = 0;
            }
            let e = self.entries.get_mut(self.hand as u32);
            let evict = e.node.is_some() && !std::mem::take(&mut e.referenced) && e.id != id;
            let victim = e.id;
            self.hand += 1;
            if evict {
                self.remove(victim);
            }
        }
    }

    /// Cached node `id`, counted as a lookup; a hit marks it recently used.
    fn lookup(&mut self, id: NodeId) -> Option<&Arc<Node>> {
        self.lookups += 1;
        let i = *self.index.get(&id)?;
        self.hits += 1;
        if self.clock {
            self.entries.get_mut(i).referenced = true;
        } else {
            self.entries.move_to_back(i);
        }
        self.entries.get(i).node.as_ref()
    }

    /// A lookup's miss in a byte-bounded cache. When full, the cache makes room for a leaf
    /// a lookup reads only at its second read while it is remembered (2Q's admission): the
    /// first read searches the leaf's image where the store read it (the OS page cache
    /// keeps the file's blocks, as it does LMDB's), evicting nothing and decoding nothing.
    /// `f` is called only when the answer is given here.
    fn read_in_place<R>(
        &mut self,
        id: NodeId,
        key: &[u8],
        f: &mut Option<impl FnOnce(&[u8]) -> R>,
    ) -> Result<InPlace<R>, TreeError> {
        let (cached, capacity) = (self.cached_bytes, self.capacity_bytes);
        let seen = self.ghosts.contains_key(&id);
        let answer = self.inner.with_image(id, |img| {
            // Full: the leaf would not fit without evicting (its image's bytes stand for
            // what it would be charged decoded).
            let full = capacity.is_some_and(|b| cached + img.image_bytes() > b);
            Ok(if img.is_leaf() && full && !seen {
                InPlace::Answered(img.step(key)?.map(|v| (f.take().expect("called once"))(v)))
            } else {
                InPlace::Decoded(img.decode()?)
            })
        })?;
        match &answer {
            Some(InPlace::Answered(_)) => self.remember(id),
            // (Only leaves are remembered: one read again is cached now.)
            Some(InPlace::Decoded(_)) if seen => {
                self.ghosts.remove(&id);
            }
            _ => {}
        }
        Ok(answer.unwrap_or(InPlace::NoImage))
    }

    /// Remembers leaf `id`, read in place and not cached, for [`GHOST_SHARE`] of the
    /// cache's node count of such reads: read again in that window, it is cached.
    fn remember(&mut self, id: NodeId) {
        let bound = (self.index.len() * GHOST_SHARE.0 / GHOST_SHARE.1).max(16);
        self.ghost_seq += 1;
        self.ghosts.insert(id, self.ghost_seq);
        self.ghost_order.push_back((id, self.ghost_seq));
        while self.ghost_order.len() > bound {
            let (old, seq) = self.ghost_order.pop_front().expect("not empty");
            // (A leaf cached or remembered again since has a newer entry.)
            if self.ghosts.get(&old) == Some(&seq) {
                self.ghosts.remove(&old);
            }
        }
    }

    /// Drops `id` from the cache, returning its node.
    fn remove(&mut self, id: NodeId) -> Option<Arc<Node>> {
        let i = self.index.remove(&id)?;
        let entry = self.entries.remove(i);
        self.cached_bytes -= entry.charge;
        entry.node
    }
}

impl<S: NodeStore> NodeStore for LruCache<S> {
    fn node_bytes(&self) -> usize {
        self.inner.node_bytes()
    }
    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        if let Some(node) = self.lookup(id) {
            return Ok(Arc::clone(node));
        }
        let node = self.inner.read(id)?;
        self.put(id, Arc::clone(&node));
        Ok(node)
    }
    fn find<R>(
        &mut self,
        id: NodeId,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Step<R>, TreeError> {
        if let Some(node) = self.lookup(id) {
            return Ok(node.step(key).map(f));
        }
        let mut f = Some(f);
        let node = match self.clock {
            true => match self.read_in_place(id, key, &mut f)? {
                InPlace::Answered(step) => return Ok(step),
                InPlace::Decoded(node) => Arc::new(node),
                InPlace::NoImage => self.inner.read(id)?,
            },
            false => self.inner.read(id)?,
        };
        self.put(id, Arc::clone(&node));
        Ok(node.step(key).map(f.take().expect("not called yet")))
    }
    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        self.write_shared(id, Arc::new(node.clone()))
    }
    fn write_shared(&mut self, id: NodeId, node: Arc<Node>) -> Result<(), TreeError> {
        self.inner.write_shared(id, Arc::clone(&node))?;
        if self.capacity > 0 {
            self.put(id, node);
        }
        Ok(())
    }
    fn take(&mut self, id: NodeId, node: Arc<Node>) -> Node {
        self.remove(id);
        self.inner.take(id, node)
    }
    fn write_owned(&mut self, id: NodeId, node: Node) -> Result<(), TreeError> {
        self.write_shared(id, Arc::new(node))
    }
    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.inner.allocate()
    }
    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.remove(id);
        self.inner.free(id)
    }
    fn root(&self) -> Option<NodeId> {
        self.inner.root()
    }
    fn set_root(&mut self, id: NodeId) {
        self.inner.set_root(id)
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        self.inner.sync()
    }
    fn log_insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), TreeError> {
        self.inner.log_insert(key, value)
    }
    fn log_remove(&mut self, key: &[u8]) -> Result<(), TreeError> {
        self.inner.log_remove(key)
    }
    fn commit_nodes_next(&mut self) {
        self.inner.commit_nodes_next()
    }
    fn recovered_ops(&mut self) -> Vec<crate::store::LoggedOp> {
        self.inner.recovered_ops()
    }
    fn logical_commits(&self) -> bool {
        self.inner.logical_commits()
    }
    fn node_commit_forced(&self) -> bool {
        self.inner.node_commit_forced()
    }
    fn commit_ops_only(&mut self) -> Result<(), TreeError> {
        self.inner.commit_ops_only()
    }
    fn stats(&self) -> StoreStats {
        let mut s = self.inner.stats();
        s.cache_hits = self.hits;
        s.cache_lookups = self.lookups;
        s
    }
    fn file_bytes(&self) -> u64 {
        self.inner.file_bytes()
    }
    fn segment_live_nodes(&self) -> Vec<(u64, u64)> {
        self.inner.segment_live_nodes()
    }
    fn io_time(&self) -> crate::storage::IoTime {
        self.inner.io_time()
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inplace::InPlaceStore;
    use crate::storage::MemStorage;

    #[test]
    fn evicts_the_least_recently_used_node() {
        let store = InPlaceStore::open(MemStorage::new(), 1024).unwrap();
        let mut c = LruCache::new(store, 2);
        let ids: Vec<NodeId> = (0..3).map(|_| c.allocate().unwrap()).collect();
        for &id in &ids {
            c.write(id, &Node::empty_leaf()).unwrap(); // cached: [1, 2]
        }
        c.read(ids[1]).unwrap(); // hit; 2 is now the least recent
        c.read(ids[0]).unwrap(); // miss; evicts 2
        let hits = c.stats().cache_hits;
        c.read(ids[1]).unwrap(); // hit
        c.read(ids[0]).unwrap(); // hit
        assert_eq!(c.stats().cache_hits, hits + 2);
        c.read(ids[2]).unwrap(); // miss (evicted); evicts 1
        c.read(ids[1]).unwrap(); // miss
        assert_eq!(c.stats().cache_hits, hits + 2);
        for _ in 0..1000 {
            c.read(ids[0]).unwrap();
        }
        assert_eq!(c.len(), 2);
        assert_eq!(c.entries.slots(), 2, "slots are reused");
    }

    /// A full byte-bounded cache answers a lookup of a leaf it does not hold from the
    /// leaf's image and evicts nothing for it: a scan of every key leaves a leaf read
    /// before it cached (admitting each leaf read would have pushed it out).
    #[test]
    fn a_full_byte_cache_reads_an_uncached_leaf_in_place_and_keeps_what_it_holds() {
        use crate::asstore::{AsConfig, AsStore};
        use crate::segments::MemSegments;
        use crate::BTree;
        let store = AsStore::open_with(MemSegments::new(), AsConfig::new(1024, 8)).unwrap();
        let mut t = BTree::new(LruCache::with_bytes(store, 24 << 10), 16).unwrap();
        let key = |i: u32| format!("key{i:06}").into_bytes();
        for i in 0..3000 {
            t.insert(&key(i), &i.to_le_bytes()).unwrap();
        }
        t.sync().unwrap();
        let bound = 24 << 10;
        assert!(t.store().cached_bytes() <= bound);
        // Two lookups of the hot key: the first may read its leaf (and cache it, if
        // there is room), the second finds every node on its path cached.
        let hot = key(1234);
        t.get(&hot).unwrap();
        t.get(&hot).unwrap();
        let reads =
            |t: &BTree<LruCache<AsStore<MemSegments>>>| t.store().inner().stats().node_reads;
        let before = reads(&t);
        t.get(&hot).unwrap();
        assert_eq!(reads(&t), before, "the hot key's path is cached");
        // One key of each of 30 other leaves (a leaf holds about 45 of these entries):
        // each leaf read in place once, none cached.
        for i in (0..3000).step_by(100) {
            let v = t.get(&key(i)).unwrap().expect("every key is there");
            assert_eq!(v, i.to_le_bytes());
            assert!(t.store().cached_bytes() <= bound);
        }
        assert!(reads(&t) >= before + 25, "the leaves were read, not cached");
        let before = reads(&t);
        t.get(&hot).unwrap();
        assert_eq!(reads(&t), before, "they evicted nothing the hot key needs");
        // A leaf read twice in a row is cached at its second read.
        t.get(&key(2950)).unwrap();
        t.get(&key(2950)).unwrap();
        let before = reads(&t);
        t.get(&key(2950)).unwrap();
        assert_eq!(reads(&t), before, "a leaf read again was cached");
        for i in 0..3000 {
            assert_eq!(t.get(&key(i)).unwrap().unwrap(), i.to_le_bytes());
        }
        assert_eq!(t.get(b"key999999x").unwrap(), None);
    }

    #[test]
    fn a_byte_bound_keeps_the_cached_nodes_within_it() {
        let store = InPlaceStore::open(MemStorage::new(), 1024).unwrap();
        let leaf = |n: u8| Node::Leaf {
            keys: (0..n)
                .map(|i| vec![i; 10])
                .collect::<Vec<_>>()
                .iter()
                .collect(),
            values: (0..n)
                .map(|i| vec![i; 20])
                .collect::<Vec<_>>()
                .iter()
                .collect(),
            next: crate::node::NONE,
        };
        // Each 10-entry leaf holds 300 bytes of keys and values, 80 of offsets, 160 of
        // heads, 120 fixed.
        assert_eq!(memory_bytes(&leaf(10)), 660);
        let mut c = LruCache::with_bytes(store, 1400);
        let ids: Vec<NodeId> = (0..5).map(|_| c.allocate().unwrap()).collect();
        for &id in &ids {
            c.write(id, &leaf(10)).unwrap();
            assert!(c.cached_bytes() <= 1400);
        }
        assert_eq!((c.len(), c.cached_bytes()), (2, 1320));
        // The two most recent stay: reading them hits.
        let hits = c.stats().cache_hits;
        c.read(ids[3]).unwrap();
        c.read(ids[4]).unwrap();
        assert_eq!(c.stats().cache_hits, hits + 2);
        // Second chance: a node read between the writes of others stays while they stream
        // through (first in, first out would evict it at the second write).
        let hot = ids[0];
        c.write(hot, &leaf(10)).unwrap();
        for &cold in &ids[1..] {
            c.write(cold, &leaf(10)).unwrap();
            let hits = c.stats().cache_hits;
            c.read(hot).unwrap();
            assert_eq!(c.stats().cache_hits, hits + 1, "the node read stayed");
        }
        let hits = c.stats().cache_hits;
        c.read(ids[1]).unwrap();
        assert_eq!(
            c.stats().cache_hits,
            hits,
            "an older one not read again was evicted"
        );
        // A node larger than the bound is still cached alone (the newest is never evicted).
        c.write(ids[0], &leaf(25)).unwrap();
        assert_eq!(c.len(), 1);
        c.free(ids[0]).unwrap();
        assert_eq!((c.len(), c.cached_bytes()), (0, 0));
    }
}
