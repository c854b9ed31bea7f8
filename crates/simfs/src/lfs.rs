//! The log-structured allocation policy's segment bookkeeping (F2FS-like): the block space
//! is cut into 2 MiB segments; [`LogState`] counts each segment's live blocks, knows the
//! head, the clean segments and the reserve, and which file block each block holds (so
//! cleaning can remap it). Segments that hold file-system metadata (bitmaps, inode tables)
//! are pinned: never a head, never cleaned. The policy's work on the file system
//! (allocation at the head, cleaning, out-of-place overwrites, discards at the next sync)
//! is in `fs/log.rs`.
//!
//! On a zoned drive ([`crate::types::ZoneLayout`]) a segment is a zone: its blocks up to
//! the zone capacity are the log's (the rest are never written), a segment is written
//! only from its start, in order, after a reset, and the file system's metadata is
//! written into the log too (copy on write, as btrfs does on zoned devices).

use crate::bitmap::Bitmap;
use crate::types::Ino;

pub const SEGMENT_BLOCKS: u64 = 512;
/// `owner_lblk` of an extent-tree block.
pub const TREE_BLOCK: u32 = u32::MAX;
/// `owner_lblk` of the copy of a metadata block (zoned: `owner_ino` is its home block).
pub const META_BLOCK: u32 = u32::MAX - 1;
pub(crate) const NO_OWNER: u32 = 0;

/// Calls `f(segment, blocks)` for each segment of `seg_blocks` blocks that
/// `[start, start + len)` touches.
fn walk_segments(seg_blocks: u64, start: u64, len: u64, mut f: impl FnMut(usize, u32)) {
    let mut b = start;
    while b < start + len {
        let seg = b / seg_blocks;
        let end = ((seg + 1) * seg_blocks).min(start + len);
        f(seg as usize, (end - b) as u32);
        b = end;
    }
}

#[derive(Debug, Clone)]
pub struct LogState {
    pub(crate) used: Vec<u32>,
    pub(crate) pinned: Vec<bool>,
    pub(crate) clean: u64,
    pub(crate) reserve: u64,
    pub(crate) head: Option<u64>,
    pub(crate) head_next: u64,
    pub(crate) owner_ino: Vec<u32>,
    pub(crate) owner_lblk: Vec<u32>,
    /// Blocks freed by overwrites and cleaning, discarded at the next sync.
    pub(crate) pending_discard: Vec<(u64, u64)>,
    pub(crate) cleaning: bool,
    /// Blocks per segment (512, or a zone's), and how many of them the log writes (all,
    /// or the zone capacity's).
    pub(crate) seg_blocks: u64,
    pub(crate) seg_cap: u64,
    /// Zoned: segments written since their last reset (a write pointer past the start).
    pub(crate) written: Option<Vec<bool>>,
    /// Segments holding blocks of allocations still in progress (taken, not yet owned):
    /// never a cleaning victim.
    pub(crate) allocating: Vec<u64>,
    /// Zoned with several logs (F2FS's hot, warm and cold logs): the log `head` and
    /// `head_next` belong to, and every log's head while another is current. Empty (one
    /// log) otherwise.
    pub(crate) class: usize,
    pub(crate) parked: Vec<(Option<u64>, u64)>,
}

impl LogState {
    /// Segment state from the bitmap after mkfs: segments with any used block are pinned.
    pub fn new(bitmap: &Bitmap) -> Self {
        Self::with_segments(bitmap, SEGMENT_BLOCKS, SEGMENT_BLOCKS, None)
    }

    /// Segments of `seg_blocks` blocks of which the log writes the first `seg_cap`; with
    /// `zones`, the first `zones` segments are a zoned drive's zones (the blocks past each
    /// capacity are marked used in the bitmap and counted nowhere here) and the rest
    /// (where the metadata's home blocks lie, never written) are pinned.
    pub(crate) fn with_segments(
        bitmap: &Bitmap,
        seg_blocks: u64,
        seg_cap: u64,
        zones: Option<u64>,
    ) -> Self {
        let blocks = bitmap.blocks();
        let segments = blocks.div_ceil(seg_blocks);
        let mut used = vec![0u32; segments as usize];
        let mut pinned = vec![false; segments as usize];
        for s in 0..segments {
            let lo = s * seg_blocks;
            let hi = (lo + seg_cap).min(blocks);
            let n = (lo..hi).filter(|&b| bitmap.is_used(b)).count() as u32;
            used[s as usize] = n;
            // Partial last segment and metadata segments are never part of the log.
            pinned[s as usize] = n > 0 || hi - lo < seg_cap || zones.is_some_and(|z| s >= z);
        }
        let clean = pinned.iter().filter(|&&p| !p).count() as u64;
        LogState {
            used,
            pinned,
            clean,
            // Zoned: the head's next zone and one to clean into; zones are large.
            reserve: (clean / 50).max(if zones.is_some() { 2 } else { 3 }),
            head: None,
            head_next: 0,
            owner_ino: vec![NO_OWNER; blocks as usize],
            owner_lblk: vec![0; blocks as usize],
            pending_discard: Vec::new(),
            cleaning: false,
            seg_blocks,
            seg_cap,
            written: zones.map(|_| vec![false; segments as usize]),
            allocating: Vec::new(),
            class: 0,
            parked: Vec::new(),
        }
    }

    /// Keeps `logs` logs, each with a head of its own (one: the single log).
    pub(crate) fn set_logs(&mut self, logs: usize) {
        self.parked = if logs > 1 {
            vec![(None, 0); logs]
        } else {
            Vec::new()
        };
        self.class = 0;
    }

    /// Logs kept.
    pub fn logs(&self) -> usize {
        self.parked.len().max(1)
    }

    /// Makes log `c`'s head the current one (`head`, `head_next`).
    pub(crate) fn switch_class(&mut self, c: usize) {
        if c == self.class || c >= self.parked.len() {
            return;
        }
        self.parked[self.class] = (self.head, self.head_next);
        (self.head, self.head_next) = self.parked[c];
        self.class = c;
    }

    /// Whether segment `s` is a log's head (the current one or a parked one).
    pub(crate) fn is_head(&self, s: u64) -> bool {
        self.head == Some(s)
            || self
                .parked
                .iter()
                .enumerate()
                .any(|(i, h)| i != self.class && h.0 == Some(s))
    }

    /// Whether segments are zones of a zoned drive.
    pub fn zoned(&self) -> bool {
        self.written.is_some()
    }

    /// Blocks per segment.
    pub fn segment_blocks(&self) -> u64 {
        self.seg_blocks
    }

    pub(crate) fn on_take(&mut self, start: u64, len: u64) {
        let seg_blocks = self.seg_blocks;
        let (used, pinned, clean) = (&mut self.used, &self.pinned, &mut self.clean);
        walk_segments(seg_blocks, start, len, |s, n| {
            if used[s] == 0 && !pinned[s] {
                *clean -= 1;
            }
            used[s] += n;
        });
    }

    pub(crate) fn on_release(&mut self, start: u64, len: u64) {
        for b in start..start + len {
            self.owner_ino[b as usize] = NO_OWNER;
        }
        let seg_blocks = self.seg_blocks;
        let (used, pinned, clean) = (&mut self.used, &self.pinned, &mut self.clean);
        walk_segments(seg_blocks, start, len, |s, n| {
            used[s] -= n;
            if used[s] == 0 && !pinned[s] {
                *clean += 1;
            }
        });
    }

    pub(crate) fn set_owner(&mut self, block: u64, ino: Ino, lblk: u32) {
        self.owner_ino[block as usize] = ino;
        self.owner_lblk[block as usize] = lblk;
    }

    /// Clean segments not counting the head.
    pub fn clean_segments(&self) -> u64 {
        self.clean
    }

    /// Segment counts agree with the bitmap.
    pub(crate) fn check(&self, bitmap: &Bitmap) -> Result<(), String> {
        let mut clean = 0;
        for (s, &n) in self.used.iter().enumerate() {
            let lo = s as u64 * self.seg_blocks;
            let hi = (lo + self.seg_cap).min(bitmap.blocks());
            let actual = (lo..hi).filter(|&b| bitmap.is_used(b)).count() as u32;
            if actual != n {
                return Err(format!("segment {s}: {actual} blocks used, count says {n}"));
            }
            clean += u64::from(n == 0 && !self.pinned[s]);
        }
        if clean != self.clean {
            return Err(format!("{clean} clean segments, count says {}", self.clean));
        }
        Ok(())
    }
}
