//! The node store interface the tree runs on, and its counters.

use crate::node::{Node, NodeId, NodeImage, Step};
use crate::TreeError;
use std::sync::Arc;

/// I/O and buffer counters of a store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub node_reads: u64,
    pub node_writes: u64,
    /// Device write requests (a write-buffer flush is one).
    pub write_requests: u64,
    pub read_requests: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Reads answered by the write buffer (AS) or the cache.
    pub buffer_hits: u64,
    pub buffer_lookups: u64,
    /// AS store: node writes into the write buffer, and those that replaced a node
    /// already there (the buffer absorbing a write).
    pub buffer_writes: u64,
    pub buffer_rewrites: u64,
    pub cache_hits: u64,
    pub cache_lookups: u64,
    pub syncs: u64,
    /// AS store: segments whose live nodes cleaning moved to the log's head.
    pub segments_cleaned: u64,
    /// AS store: nodes cleaning moved.
    pub nodes_moved: u64,
    /// AS store: segment files removed (after a checkpoint stopped needing them).
    pub segments_removed: u64,
    /// AS store: dead segment files renamed into new segments instead of created anew.
    pub segments_recycled: u64,
    /// AS store on real files: zeros written ahead of a growing segment's end (see
    /// [`crate::segments::Segments::zero_fill_ahead_bytes`]), beside `bytes_written`.
    pub bytes_zero_filled: u64,
}

/// A tree operation a store logs at commit instead of the nodes it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoggedOp {
    Insert(Vec<u8>, Vec<u8>),
    Remove(Vec<u8>),
}

/// Where the tree's nodes live.
pub trait NodeStore {
    /// The largest encoded node the store accepts.
    fn node_bytes(&self) -> usize;
    /// The node (shared: a cache hands out its copy without cloning it).
    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError>;
    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError>;
    /// One step of a lookup of `key` in node `id`: the child to follow, or the leaf's
    /// value handed to `f`. A cache answers from its copy without handing it out.
    fn find<R>(
        &mut self,
        id: NodeId,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Step<R>, TreeError> {
        Ok(self.read(id)?.step(key).map(f))
    }
    /// Hands node `id`'s image, as read from storage, to `f` undecoded. None: this store
    /// cannot (it keeps no images, or the node's newest version is not one yet); `read`
    /// it instead.
    fn with_image<R>(
        &mut self,
        _id: NodeId,
        _f: impl FnOnce(NodeImage<'_>) -> Result<R, TreeError>,
    ) -> Result<Option<R>, TreeError> {
        Ok(None)
    }
    /// Turns node `id`, just read as `node`, into one to modify and write back: a cache
    /// lets go of its copy so no clone is made (the caller must write the node back or
    /// free it).
    fn take(&mut self, _id: NodeId, node: Arc<Node>) -> Node {
        Arc::unwrap_or_clone(node)
    }
    /// `write` of a shared node (a store that keeps nodes decoded keeps this one).
    fn write_shared(&mut self, id: NodeId, node: Arc<Node>) -> Result<(), TreeError> {
        self.write(id, &node)
    }
    /// `write` for a node the caller no longer needs (a cache keeps it without a copy).
    fn write_owned(&mut self, id: NodeId, node: Node) -> Result<(), TreeError> {
        self.write(id, &node)
    }
    /// A new, unused NodeID.
    fn allocate(&mut self) -> Result<NodeId, TreeError>;
    fn free(&mut self, id: NodeId) -> Result<(), TreeError>;
    fn root(&self) -> Option<NodeId>;
    fn set_root(&mut self, id: NodeId);
    /// Commit point: everything written so far survives a crash.
    fn sync(&mut self) -> Result<(), TreeError>;
    /// Records an insert the tree made (stores with logical commits log it; others
    /// ignore it).
    fn log_insert(&mut self, _key: &[u8], _value: &[u8]) -> Result<(), TreeError> {
        Ok(())
    }
    /// Records a removal the tree made.
    fn log_remove(&mut self, _key: &[u8]) -> Result<(), TreeError> {
        Ok(())
    }
    /// The changes since the last commit are to be committed as nodes, not as logged
    /// operations (a bulk change whose operations would be larger than its nodes): what
    /// was logged since is dropped and nothing more is logged until that commit.
    fn commit_nodes_next(&mut self) {}
    /// Whether the store commits by logging operations ([`NodeStore::log_insert`]): only
    /// then may the tree defer changes to its nodes ([`crate::tree::BTree::defer_changes`]).
    fn logical_commits(&self) -> bool {
        false
    }
    /// Logical commits: whether the next commit must write the nodes (a bulk change asked
    /// for it, the operation log since the last node-level commit would outgrow its bound,
    /// or cleaning needs one). A tree with deferred changes makes them before such a
    /// commit. Stores without logical commits always write nodes.
    fn node_commit_forced(&self) -> bool {
        true
    }
    /// Commits the operations logged since the last commit, and only them: the nodes lack
    /// changes the tree has deferred, so this commit must not write them as a node-level
    /// commit. An error if the store cannot (no logical commits, or a node commit is
    /// forced).
    fn commit_ops_only(&mut self) -> Result<(), TreeError> {
        Err(TreeError::Config(
            "this store has no logical commits: a tree over it cannot defer changes".into(),
        ))
    }
    /// Operations committed after the store's last node-level commit, found at open; the
    /// tree replays them.
    fn recovered_ops(&mut self) -> Vec<LoggedOp> {
        Vec::new()
    }
    fn stats(&self) -> StoreStats;
    /// Bytes the store occupies on its device.
    fn file_bytes(&self) -> u64;
    /// Time its storage spent reading, writing and syncing.
    fn io_time(&self) -> crate::storage::IoTime;
    /// Its storage's clock (wall or virtual).
    fn now_ns(&self) -> u64;
    /// A log-structured store's segments in log order, with their live node counts
    /// (empty for a store that writes in place).
    fn segment_live_nodes(&self) -> Vec<(u64, u64)> {
        Vec::new()
    }
}
