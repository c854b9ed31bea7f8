//! An LRU cache of decoded nodes in front of any store (paper 004's buffer cache):
//! reads of cached nodes cost nothing; writes go through to the store and refresh the
//! cache; `capacity` nodes at most (0 = no cache).

use crate::node::{IdMap, Node, NodeId};
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use std::collections::VecDeque;
use std::sync::Arc;

pub struct LruCache<S: NodeStore> {
    inner: S,
    capacity: usize,
    /// Cached nodes with the tick of their last use.
    nodes: IdMap<(Arc<Node>, u64)>,
    /// (tick, node) in order of use; an entry whose tick is no longer the node's is stale
    /// and skipped (so a use costs O(1), not a reordering).
    uses: VecDeque<(u64, NodeId)>,
    tick: u64,
    hits: u64,
    lookups: u64,
}

impl<S: NodeStore> LruCache<S> {
    pub fn new(inner: S, capacity: usize) -> Self {
        LruCache {
            inner,
            capacity,
            nodes: IdMap::default(),
            uses: VecDeque::new(),
            tick: 0,
            hits: 0,
            lookups: 0,
        }
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

    fn put(&mut self, id: NodeId, node: Arc<Node>) {
        if self.capacity == 0 {
            return;
        }
        self.tick += 1;
        self.nodes.insert(id, (node, self.tick));
        self.uses.push_back((self.tick, id));
        while self.nodes.len() > self.capacity {
            let (tick, victim) = self.uses.pop_front().expect("every cached node has a use");
            if self.nodes.get(&victim).is_some_and(|(_, t)| *t == tick) {
                self.nodes.remove(&victim);
            }
        }
        self.drop_stale_uses();
    }

    /// Drops stale uses now and then so the queue stays proportional to the cache.
    fn drop_stale_uses(&mut self) {
        if self.uses.len() > 2 * self.capacity + 64 {
            let nodes = &self.nodes;
            self.uses
                .retain(|(tick, id)| nodes.get(id).is_some_and(|(_, t)| t == tick));
        }
    }
}

impl<S: NodeStore> NodeStore for LruCache<S> {
    fn node_bytes(&self) -> usize {
        self.inner.node_bytes()
    }
    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        self.lookups += 1;
        if let Some((node, used)) = self.nodes.get_mut(&id) {
            self.hits += 1;
            self.tick += 1;
            *used = self.tick;
            let node = Arc::clone(node);
            self.uses.push_back((self.tick, id));
            self.drop_stale_uses();
            return Ok(node);
        }
        let node = self.inner.read(id)?;
        self.put(id, Arc::clone(&node));
        Ok(node)
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
        self.nodes.remove(&id);
        self.inner.take(id, node)
    }
    fn write_owned(&mut self, id: NodeId, node: Node) -> Result<(), TreeError> {
        self.write_shared(id, Arc::new(node))
    }
    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.inner.allocate()
    }
    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.nodes.remove(&id);
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
    fn recovered_ops(&mut self) -> Vec<crate::store::LoggedOp> {
        self.inner.recovered_ops()
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
        assert!(c.uses.len() <= 2 * 2 + 64 + 1, "stale uses are dropped");
    }
}
