//! The allocation policy behind a file system, as a trait with two implementations:
//! [`Ext4Like`] (blocks stay where they were allocated; a file's goal, else next-fit) and
//! the log-structured [`LogState`] (every write appends at the log head; segments are
//! cleaned). What the file system asks a policy: whether writes go out of place, and to
//! hear every block taken, released or assigned to a file, and to check its own counts.
//!
//! The policies' work that needs the whole file system stays in its methods, chosen by
//! [`Allocator::out_of_place`]: ext4-like next-fit in `fs/alloc.rs`, the log's allocation,
//! cleaning and discards in `fs/log.rs` (which reach the segment state through
//! [`Allocator::log`]).

use crate::bitmap::Bitmap;
use crate::lfs::LogState;
use crate::types::{AllocPolicy, Ino};

pub(crate) trait Allocator: std::fmt::Debug + Send {
    fn policy(&self) -> AllocPolicy;
    /// Writes go out of place: an overwrite moves its blocks to the log head, freed blocks
    /// are discarded at the next sync (checkpoint), and ext4's extras (mballoc windows,
    /// single-run placement, journal-time discards) do not apply.
    fn out_of_place(&self) -> bool;
    /// Blocks `[start, start + len)` became used.
    fn on_take(&mut self, _start: u64, _len: u64) {}
    /// Blocks `[start, start + len)` became free.
    fn on_release(&mut self, _start: u64, _len: u64) {}
    /// Block `block` now holds logical block `lblk` of `ino` (or one of its tree blocks).
    fn set_owner(&mut self, _block: u64, _ino: Ino, _lblk: u32) {}
    /// Blocks `[start, start + len)` now hold logical blocks from `lblk` of `ino`.
    fn set_run_owner(&mut self, _start: u64, _len: u64, _ino: Ino, _lblk: u32) {}
    /// The policy's own counts agree with the bitmap.
    fn check(&self, _bitmap: &Bitmap) -> Result<(), String> {
        Ok(())
    }
    /// The segment state of the log-structured policy.
    fn log(&self) -> Option<&LogState> {
        None
    }
    fn log_mut(&mut self) -> Option<&mut LogState> {
        None
    }
}

/// ext4-like allocation: nothing to track beyond the bitmap and the file system's cursor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ext4Like;

impl Allocator for Ext4Like {
    fn policy(&self) -> AllocPolicy {
        AllocPolicy::Ext4Like
    }
    fn out_of_place(&self) -> bool {
        false
    }
}

impl Allocator for LogState {
    fn policy(&self) -> AllocPolicy {
        AllocPolicy::LogStructured
    }
    fn out_of_place(&self) -> bool {
        true
    }
    fn on_take(&mut self, start: u64, len: u64) {
        LogState::on_take(self, start, len)
    }
    fn on_release(&mut self, start: u64, len: u64) {
        LogState::on_release(self, start, len)
    }
    fn set_owner(&mut self, block: u64, ino: Ino, lblk: u32) {
        LogState::set_owner(self, block, ino, lblk)
    }
    fn set_run_owner(&mut self, start: u64, len: u64, ino: Ino, lblk: u32) {
        for (i, b) in (start..start + len).enumerate() {
            LogState::set_owner(self, b, ino, lblk + i as u32);
        }
    }
    fn check(&self, bitmap: &Bitmap) -> Result<(), String> {
        LogState::check(self, bitmap)
    }
    fn log(&self) -> Option<&LogState> {
        Some(self)
    }
    fn log_mut(&mut self) -> Option<&mut LogState> {
        Some(self)
    }
}

/// The allocator for `policy`, over a fresh file system's `bitmap`.
/// With `zoned`, the log's segments are the zones.
pub(crate) fn for_policy(
    policy: AllocPolicy,
    bitmap: &Bitmap,
    zoned: Option<crate::types::ZoneLayout>,
) -> Box<dyn Allocator> {
    match (policy, zoned) {
        (AllocPolicy::Ext4Like, _) => Box::new(Ext4Like),
        (AllocPolicy::LogStructured, None) => Box::new(LogState::new(bitmap)),
        (AllocPolicy::LogStructured, Some(z)) => Box::new(LogState::with_segments(
            bitmap,
            z.zone_bytes / crate::types::BLOCK,
            z.zone_capacity_bytes / crate::types::BLOCK,
            Some(z.zones as u64),
        )),
    }
}
