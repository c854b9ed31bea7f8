//! simfs: a small extent-based file system over a block device that records every block
//! request it makes, so its I/O can be replayed on any device model and engines can run
//! on it in simulated time.
//!
//! - [`fs::SimFs`]: an ext4-like on-device layout (superblock, group descriptors, block
//!   groups with bitmaps and inode tables, inodes holding extent trees of 4 in-inode
//!   entries, then 340-entry index and leaf blocks), the ext4-like allocation policy
//!   (per-file goal, next-fit across groups), `fallocate`, and `unlink` with the discard
//!   modes of paper 002 ([`fs::DiscardMode`]).
//!   The file system's code by job: `fs/mkfs.rs`, `fs/alloc.rs` (ext4-like allocation),
//!   `fs/extents.rs` (block maps and extent trees), `fs/meta.rs` (metadata write-back),
//!   `fs/discard.rs`, `fs/log.rs` (the log-structured policy's work), `fs/check.rs`.
//! - [`lfs`]: the log-structured (F2FS-like) policy's segment bookkeeping.
//! - [`types`]: what every part shares: block size, inode numbers, runs, policies,
//!   configuration, counters.
//! - [`device`]: the block devices simfs runs on (a recorder, or a device model in
//!   virtual time).
//! - [`bitmap`]: the free-space bitmap and its searches.

mod allocator;
pub mod bitmap;
pub mod device;
pub mod error;
pub mod freed;
pub mod fs;
pub mod lfs;
pub mod types;

pub use device::{BlockDev, Recorder, Timed};
pub use error::SimfsError;
pub use fs::{
    AllocPolicy, DiscardKernel, DiscardMode, FsConfig, FsStats, HintPlacement, SimFs, WriteHint,
    ZoneLayout,
};
