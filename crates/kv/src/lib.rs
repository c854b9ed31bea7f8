//! An append-only key-value store in the manner of ForestDB (paper 003): every update
//! appends — the document and the index nodes it changes go to the end of the database's
//! log, never over older data; a commit writes a batch of B updates, a commit record
//! naming the index root and an fsync; stale data is reclaimed by compaction.
//!
//! The log is the AS B-tree's ([`astree::asstore`]): segment files of checksummed,
//! sequence-numbered slots, the last slot of a commit marking it, checkpointed mapping
//! tables behind two alternating superblocks (the crash-safe header), and compaction by
//! cleaning: once stale bytes pass the limit, the live nodes of the emptiest segments are
//! copied into new segment files and the old files are deleted. Documents live in the
//! index's leaves (a 1 KiB document and its key fit a 4 KiB node several times).
//!
//! - [`Db`]: one database file set: get, update, commit.
//! - [`ycsb`]: the update workload (pick a key uniformly or by Zipf, read its document,
//!   change a field, write it back) over several databases used by concurrent writers.
//! - [`crash`]: seeded crash tests of a database.

pub mod crash;
pub mod ycsb;

use astree::asstore::{AsConfig, AsStore, Cleaning};
use astree::cache::LruCache;
use astree::segments::Segments;
use astree::store::{NodeStore, StoreStats};
use astree::{BTree, TreeError};

/// Settings of a database.
#[derive(Debug, Clone)]
pub struct KvConfig {
    /// Index node (and log slot) size.
    pub node_bytes: usize,
    /// Nodes buffered before they are written (a commit writes them anyway).
    pub write_buffer_nodes: usize,
    /// Decoded nodes kept in memory.
    pub cache_nodes: usize,
    /// Keys per index node at most.
    pub fanout: usize,
    /// Size of each log segment file.
    pub segment_bytes: u64,
    /// Compaction keeps the files at most this many times the live node bytes.
    pub max_space_amp: f64,
}

impl Default for KvConfig {
    fn default() -> Self {
        KvConfig {
            node_bytes: 4096,
            write_buffer_nodes: 256,
            cache_nodes: 4096,
            fanout: 64,
            segment_bytes: 4 << 20,
            max_space_amp: 1.5,
        }
    }
}

impl KvConfig {
    fn as_config(&self) -> AsConfig {
        AsConfig {
            segment_bytes: self.segment_bytes,
            max_space_amp: self.max_space_amp,
            cleaning: Cleaning::CostBenefit,
            ..AsConfig::new(self.node_bytes, self.write_buffer_nodes)
        }
    }
}

/// One database: its log's segment files on `S`.
pub struct Db<S: Segments> {
    tree: BTree<LruCache<AsStore<S>>>,
    /// Updates since the last commit.
    uncommitted: u64,
    commits: u64,
}

impl<S: Segments> Db<S> {
    /// Opens (recovering if the files hold a database) or creates a database.
    pub fn open(segments: S, cfg: &KvConfig) -> Result<Self, TreeError> {
        let store = AsStore::open_with(segments, cfg.as_config())?;
        let tree = BTree::new(LruCache::new(store, cfg.cache_nodes), cfg.fanout)?;
        Ok(Db {
            tree,
            uncommitted: 0,
            commits: 0,
        })
    }

    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        self.tree.get(key)
    }

    /// Inserts or replaces a document (durable at the next commit).
    pub fn update(&mut self, key: &[u8], doc: &[u8]) -> Result<(), TreeError> {
        self.tree.insert(key, doc)?;
        self.uncommitted += 1;
        Ok(())
    }

    pub fn delete(&mut self, key: &[u8]) -> Result<bool, TreeError> {
        let old = self.tree.remove(key)?;
        self.uncommitted += old.is_some() as u64;
        Ok(old.is_some())
    }

    /// Makes every update so far durable: the batch, then the commit record, then fsync.
    pub fn commit(&mut self) -> Result<(), TreeError> {
        self.tree.sync()?;
        self.uncommitted = 0;
        self.commits += 1;
        Ok(())
    }

    /// Updates since the last commit.
    pub fn uncommitted(&self) -> u64 {
        self.uncommitted
    }

    pub fn commits(&self) -> u64 {
        self.commits
    }

    /// Every document in key order.
    pub fn scan(&mut self) -> Result<astree::tree::Entries, TreeError> {
        self.tree.range(&[], None)
    }

    pub fn stats(&self) -> StoreStats {
        self.tree.store().stats()
    }

    /// Bytes of the database's files.
    pub fn file_bytes(&self) -> u64 {
        self.tree.store().file_bytes()
    }

    /// The log's storage (its segment files).
    pub fn segments(&self) -> &S {
        self.tree.store().inner().storage()
    }

    pub fn segments_mut(&mut self) -> &mut S {
        self.tree.store_mut().inner_mut().storage_mut()
    }

    /// Checks the index's structure; returns the number of documents.
    pub fn check(&mut self) -> Result<u64, String> {
        self.tree.check()
    }

    /// Gives back the log's storage.
    pub fn into_segments(self) -> S {
        self.tree.into_store().into_inner().into_storage()
    }
}
