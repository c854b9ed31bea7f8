//! B+trees for flash (paper 004): one B+tree map from byte-string keys to byte-string
//! values over a [`store::NodeStore`], with interchangeable stores.
//!
//! - [`tree::BTree`]: insert/update, point search, range scan, delete with
//!   redistribution and merge; batches of changes applied in key order (a leaf's changes
//!   in one descent), built bottom-up into an empty tree.
//! - [`node`]: the node and its on-disk encoding.
//! - [`inplace::InPlaceStore`]: each node at a fixed address, rewritten there.
//! - [`asstore::AsStore`]: the always-sequential store: nodes addressed by NodeID through a
//!   RAM mapping table, modified nodes appended at the log's end through a write buffer,
//!   checksummed and sequence-numbered, checkpointed, the mapping rebuilt from the last
//!   checkpoint and the log after it at open, segments cleaned to bound space.
//! - [`cache::LruCache`]: a cache of decoded nodes in front of any store, bounded in nodes
//!   (exact LRU) or in bytes (second chance).
//! - [`storage`]: where the in-place and BFTL stores' bytes go (RAM with a crash model,
//!   real files, simfs on a simulated drive); [`segments`]: the AS store's segment files.

pub mod asstore;
pub mod bftl;
pub mod cache;
pub mod crash;
pub mod error;
pub mod inplace;
pub mod node;
pub mod packed;
pub mod segments;
pub mod storage;
pub mod store;
pub mod tree;

pub use error::TreeError;
pub use tree::BTree;
