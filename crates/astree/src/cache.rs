//! An LRU cache of decoded nodes in front of any store (paper 004's buffer cache):
//! reads of cached nodes cost nothing; writes go through to the store and refresh the
//! cache; `capacity` nodes at most (0 = no cache).

use crate::node::{Node, NodeId};
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub struct LruCache<S: NodeStore> {
    inner: S,
    capacity: usize,
    nodes: HashMap<NodeId, (Arc<Node>, u64)>,
    by_age: BTreeMap<u64, NodeId>,
    tick: u64,
    hits: u64,
    lookups: u64,
}

impl<S: NodeStore> LruCache<S> {
    pub fn new(inner: S, capacity: usize) -> Self {
        LruCache {
            inner,
            capacity,
            nodes: HashMap::new(),
            by_age: BTreeMap::new(),
            tick: 0,
            hits: 0,
            lookups: 0,
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn into_inner(self) -> S {
        self.inner
    }

    fn put(&mut self, id: NodeId, node: Arc<Node>) {
        if self.capacity == 0 {
            return;
        }
        self.tick += 1;
        if let Some((_, old)) = self.nodes.insert(id, (node, self.tick)) {
            self.by_age.remove(&old);
        }
        self.by_age.insert(self.tick, id);
        while self.nodes.len() > self.capacity {
            let (&age, &victim) = self.by_age.iter().next().expect("cache holds nodes");
            self.by_age.remove(&age);
            self.nodes.remove(&victim);
        }
    }
}

impl<S: NodeStore> NodeStore for LruCache<S> {
    fn node_bytes(&self) -> usize {
        self.inner.node_bytes()
    }
    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        self.lookups += 1;
        if let Some((node, _)) = self.nodes.get(&id) {
            self.hits += 1;
            let node = Arc::clone(node);
            self.put(id, Arc::clone(&node));
            return Ok(node);
        }
        let node = self.inner.read(id)?;
        self.put(id, Arc::clone(&node));
        Ok(node)
    }
    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        self.inner.write(id, node)?;
        if self.capacity > 0 {
            self.put(id, Arc::new(node.clone()));
        }
        Ok(())
    }
    fn write_owned(&mut self, id: NodeId, node: Node) -> Result<(), TreeError> {
        self.inner.write(id, &node)?;
        if self.capacity > 0 {
            self.put(id, Arc::new(node));
        }
        Ok(())
    }
    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.inner.allocate()
    }
    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        if let Some((_, age)) = self.nodes.remove(&id) {
            self.by_age.remove(&age);
        }
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
