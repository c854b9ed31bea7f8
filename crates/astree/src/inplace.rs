//! The in-place store: node `id` lives at the fixed address `(id + 1) × node_bytes` and is
//! rewritten there; block 0 holds the superblock (magic, node size, root, next id). Freed
//! nodes are reused. No crash safety beyond what in-place writes give.

use crate::node::{Node, NodeId, NONE};
use crate::storage::Storage;
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"FLABIPT1";

pub struct InPlaceStore<S: Storage> {
    storage: S,
    node_bytes: usize,
    root: Option<NodeId>,
    next_id: NodeId,
    free: Vec<NodeId>,
    buf: Vec<u8>,
    stats: StoreStats,
}

impl<S: Storage> InPlaceStore<S> {
    /// Opens the store on `storage` (formatting empty storage).
    pub fn open(storage: S, node_bytes: usize) -> Result<Self, TreeError> {
        if node_bytes < 256 {
            return Err(TreeError::Config(format!(
                "node size {node_bytes} is below 256 bytes"
            )));
        }
        let mut s = InPlaceStore {
            storage,
            node_bytes,
            root: None,
            next_id: 0,
            free: Vec::new(),
            buf: vec![0; node_bytes],
            stats: StoreStats::default(),
        };
        if s.storage.len() == 0 {
            s.write_super()?;
            return Ok(s);
        }
        let mut sb = vec![0u8; 32];
        s.storage.read_at(0, &mut sb)?;
        if &sb[0..8] != MAGIC {
            return Err(TreeError::Corrupt {
                id: NONE,
                offset: 0,
                msg: "not an in-place B+tree file".into(),
            });
        }
        let nb = u64::from_le_bytes(sb[8..16].try_into().expect("8")) as usize;
        if nb != node_bytes {
            return Err(TreeError::Config(format!(
                "the file holds {nb} byte nodes, not {node_bytes}"
            )));
        }
        let root = u64::from_le_bytes(sb[16..24].try_into().expect("8"));
        s.root = (root != NONE).then_some(root);
        s.next_id = u64::from_le_bytes(sb[24..32].try_into().expect("8"));
        Ok(s)
    }

    fn write_super(&mut self) -> Result<(), TreeError> {
        let mut sb = vec![0u8; self.node_bytes];
        sb[0..8].copy_from_slice(MAGIC);
        sb[8..16].copy_from_slice(&(self.node_bytes as u64).to_le_bytes());
        sb[16..24].copy_from_slice(&self.root.unwrap_or(NONE).to_le_bytes());
        sb[24..32].copy_from_slice(&self.next_id.to_le_bytes());
        self.storage.write_at(0, &sb)?;
        self.stats.write_requests += 1;
        Ok(())
    }

    fn offset(&self, id: NodeId) -> u64 {
        (id + 1) * self.node_bytes as u64
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }
}

impl<S: Storage> NodeStore for InPlaceStore<S> {
    fn node_bytes(&self) -> usize {
        self.node_bytes
    }
    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        if id >= self.next_id {
            return Err(TreeError::MissingNode(id));
        }
        let off = self.offset(id);
        let mut buf = std::mem::take(&mut self.buf);
        let r = self
            .storage
            .read_at(off, &mut buf)
            .and_then(|_| Node::decode(&buf, id, off));
        self.buf = buf;
        self.stats.node_reads += 1;
        self.stats.read_requests += 1;
        self.stats.bytes_read += self.node_bytes as u64;
        r.map(Arc::new)
    }
    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        let off = self.offset(id);
        let mut buf = std::mem::take(&mut self.buf);
        node.encode(&mut buf);
        let r = self.storage.write_at(off, &buf);
        self.buf = buf;
        self.stats.node_writes += 1;
        self.stats.write_requests += 1;
        self.stats.bytes_written += self.node_bytes as u64;
        r
    }
    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        Ok(self.free.pop().unwrap_or_else(|| {
            self.next_id += 1;
            self.next_id - 1
        }))
    }
    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.free.push(id);
        Ok(())
    }
    fn root(&self) -> Option<NodeId> {
        self.root
    }
    fn set_root(&mut self, id: NodeId) {
        self.root = Some(id);
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        self.write_super()?;
        self.stats.syncs += 1;
        self.storage.sync()
    }
    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }
    fn io_time(&self) -> crate::storage::IoTime {
        self.storage.io_time()
    }
    fn now_ns(&self) -> u64 {
        self.storage.now_ns()
    }
    fn file_bytes(&self) -> u64 {
        self.storage.len()
    }
}
