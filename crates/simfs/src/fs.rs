//! The file system: layout, allocation, files, metadata write-back and discard.
//!
//! Metadata is cached in memory (as a warm page cache would) and written back by
//! [`SimFs::sync`]: extent-tree blocks, inode-table blocks and bitmaps, each a 4 KiB write
//! whose bytes the drive keeps (so fTrim can read them), then a flush. File data is
//! written as plain block writes without content. There is no journal and no directory
//! blocks: names live in memory. Simplifications are listed in docs/simfs.md.

use crate::bitmap::Bitmap;
use crate::device::BlockDev;
use crate::SimfsError;
use flash::fslayout::{
    encode_node, group_desc_location, Extent, ExtentIndex, GroupDesc, Inode, Node, Superblock,
    BLOCK_BYTES, EXTENTS_FL, EXTENTS_IN_INODE, EXTENTS_PER_BLOCK, INODE_BYTES, MAX_EXTENT_BLOCKS,
};
use flash::{ByteRange, Command};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub const BLOCK: u64 = BLOCK_BYTES as u64;
/// First inode number handed to files (ext4 reserves 1–10 and uses 11 for lost+found).
pub const FIRST_INODE: u32 = 12;
/// Ranges one vTrim command carries: a 4-byte count, then 8-byte (start block, blocks)
/// entries in a 4 KiB payload.
pub const VTRIM_MAX_RANGES: usize = (BLOCK_BYTES - 4) / 8;
/// Largest mballoc-style preallocation window: 8 MiB.
pub const PREALLOC_MAX_BLOCKS: u64 = 2048;

/// Where new blocks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocPolicy {
    /// ext4-like: continue at the file's goal (the block after its last extent); when that
    /// block is taken, take the next free run after a global next-fit cursor. Files written
    /// concurrently therefore interleave and fragment.
    Ext4Like,
    /// F2FS-like: every write, overwrites included, appends at the head of the current
    /// 2 MiB segment; a new head is always a clean segment; when clean segments run low,
    /// the segment with the fewest live blocks is cleaned (its live blocks read and
    /// appended at the head). Freed blocks are discarded at the next sync (checkpoint).
    LogStructured,
}

impl fmt::Display for AllocPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AllocPolicy::Ext4Like => "ext4-like",
            AllocPolicy::LogStructured => "log-structured",
        })
    }
}

impl FromStr for AllocPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ext4" | "ext4-like" => Ok(AllocPolicy::Ext4Like),
            "log" | "log-structured" | "lfs" => Ok(AllocPolicy::LogStructured),
            _ => Err(format!(
                "unknown allocation policy {s:?}: expected ext4-like or log-structured"
            )),
        }
    }
}

/// What `unlink` tells the drive about the freed blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscardMode {
    /// Nothing: the drive keeps the dead data valid.
    None,
    /// One TRIM per freed extent, at once (ext4 `-o discard`).
    Online,
    /// All ranges of the delete in one vectored TRIM (4 KiB payload, up to 511 ranges).
    VTrim,
    /// Only the inode number; the drive walks the metadata itself.
    FTrim,
    /// Ranges collected and sent later by [`SimFs::fstrim`], merged, one TRIM per range.
    Deferred,
    /// ext4 `-o discard` as Linux does it: freed extents wait for the next journal commit
    /// ([`SimFs::sync`]), are not reused before it, and are then discarded merged within
    /// their block group, one TRIM per run (fs/ext4/mballoc.c:
    /// ext4_free_data_in_buddy and ext4_try_merge_freed_extent).
    Journal,
}

impl FromStr for DiscardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "none" => DiscardMode::None,
            "online" | "trim" => DiscardMode::Online,
            "vtrim" => DiscardMode::VTrim,
            "ftrim" => DiscardMode::FTrim,
            "deferred" => DiscardMode::Deferred,
            "journal" => DiscardMode::Journal,
            _ => {
                return Err(format!(
                    "unknown discard mode {s:?}: expected none, online, journal, vtrim, ftrim or deferred"
                ))
            }
        })
    }
}

impl fmt::Display for DiscardMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiscardMode::None => "none",
            DiscardMode::Online => "online",
            DiscardMode::VTrim => "vtrim",
            DiscardMode::FTrim => "ftrim",
            DiscardMode::Deferred => "deferred",
            DiscardMode::Journal => "journal",
        })
    }
}

#[derive(Debug, Clone)]
pub struct FsConfig {
    pub size_bytes: u64,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    pub alloc: AllocPolicy,
    pub discard: DiscardMode,
    /// ext4-like: mballoc-style per-file preallocation windows for appends (as ext4's
    /// buffered writes get); off, every write allocates on its own (as under O_DIRECT).
    pub prealloc: bool,
}

impl FsConfig {
    /// ext4's defaults for 4 KiB blocks: 32,768 blocks (128 MiB) per group; 512 inodes per
    /// group.
    pub fn new(size_bytes: u64) -> Self {
        FsConfig {
            size_bytes,
            blocks_per_group: 32768,
            inodes_per_group: 512,
            alloc: AllocPolicy::Ext4Like,
            discard: DiscardMode::None,
            prealloc: false,
        }
    }

    /// A file system on 90% of a `device_bytes` device (whole blocks, leaving the last
    /// 4 KiB page free for vTrim/fTrim commands); a device too small for any block gives
    /// 0 bytes, which mkfs refuses with a clear error.
    pub fn for_device(device_bytes: u64) -> Self {
        FsConfig::new(device_bytes.saturating_sub(BLOCK) / BLOCK * BLOCK * 9 / 10)
    }
}

/// Requests simfs issued, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsStats {
    pub data_write_requests: u64,
    pub data_write_bytes: u64,
    pub data_read_requests: u64,
    pub data_read_bytes: u64,
    pub meta_write_requests: u64,
    pub trim_commands: u64,
    /// Log-structured policy: segments cleaned and live blocks they moved.
    pub cleaned_segments: u64,
    pub cleaned_blocks: u64,
    pub vtrim_commands: u64,
    pub ftrim_commands: u64,
    /// Bytes named by TRIM-family commands (for fTrim: the file's blocks).
    pub discarded_bytes: u64,
    pub flushes: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct FileState {
    pub(crate) size_bytes: u64,
    /// Sorted by logical block, non-overlapping.
    pub(crate) extents: Vec<Extent>,
    /// Extent-tree blocks on disk (index and leaf), in tree order.
    pub(crate) tree_blocks: Vec<u64>,
    /// The inode's extent root as last written with its tree blocks: an inode-table
    /// block written for another file carries this, never a root whose tree blocks are
    /// not allocated or written yet.
    pub(crate) written_root: Node,
    pub(crate) dirty: bool,
    /// Blocks preallocated for the file's next appends (mballoc-style), held as used.
    pub(crate) pa: Option<(u64, u64)>,
}

/// A file's inode number.
pub type Ino = u32;
/// A run of physical blocks: (first block, blocks).
type BlockRun = (u64, u64);

pub struct SimFs<D: BlockDev> {
    pub(crate) dev: D,
    pub(crate) cfg: FsConfig,
    pub(crate) sb: Superblock,
    pub(crate) descs: Vec<GroupDesc>,
    pub(crate) bitmap: Bitmap,
    pub(crate) inode_used: Vec<bool>,
    pub(crate) files: HashMap<Ino, FileState>,
    pub(crate) names: BTreeMap<String, Ino>,
    pub(crate) cursor: u64,
    pub(crate) deferred: Vec<(u64, u64)>,
    /// Journal mode: runs freed since the last commit (still marked used).
    pub(crate) freed_uncommitted: Vec<(u64, u64)>,
    /// A commit is running (an allocation inside it must not start another).
    committing: bool,
    pub(crate) dirty_groups: BTreeSet<u32>,
    pub(crate) dirty_itable: BTreeSet<u64>,
    pub(crate) command_page: u64,
    pub(crate) stats: FsStats,
    /// Segment bookkeeping of the log-structured policy.
    pub(crate) log: Option<crate::lfs::LogState>,
}

fn range_bytes(start: u64, len: u64) -> ByteRange {
    ByteRange {
        offset_bytes: start * BLOCK,
        len_bytes: len * BLOCK,
    }
}

/// Extent-tree blocks needed below the inode for `n` extents.
fn tree_blocks_needed(n: usize) -> usize {
    if n <= EXTENTS_IN_INODE {
        return 0;
    }
    let mut level = n.div_ceil(EXTENTS_PER_BLOCK);
    let mut total = level;
    while level > EXTENTS_IN_INODE {
        level = level.div_ceil(EXTENTS_PER_BLOCK);
        total += level;
    }
    total
}

/// Sorts block runs and merges adjacent ones.
pub(crate) fn merge_runs(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (s, l) in runs {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == s => last.1 += l,
            _ => out.push((s, l)),
        }
    }
    out
}

impl<D: BlockDev> SimFs<D> {
    /// Creates a file system of `cfg.size_bytes` at the start of `dev`, writing its
    /// superblock, group descriptors and bitmaps (inode tables are written lazily, as
    /// ext4's lazy_itable_init does). The device's last 4 KiB page stays free: vTrim and
    /// fTrim commands are addressed to it.
    pub fn mkfs(dev: D, cfg: FsConfig) -> Result<Self, SimfsError> {
        let command_page = (dev.capacity_bytes() / BLOCK).saturating_sub(1) * BLOCK;
        let blocks = cfg.size_bytes / BLOCK;
        if cfg.size_bytes > command_page {
            return Err(SimfsError::Config(format!(
                "a {} byte file system does not fit a {} byte device (its last 4 KiB page is reserved for vTrim/fTrim)",
                cfg.size_bytes,
                dev.capacity_bytes()
            )));
        }
        if cfg.blocks_per_group == 0
            || cfg.blocks_per_group > 32768
            || !cfg.blocks_per_group.is_multiple_of(8)
        {
            return Err(SimfsError::Config(
                "blocks_per_group must be a multiple of 8 up to 32768 (one bitmap block)".into(),
            ));
        }
        let ipg = cfg.inodes_per_group;
        if ipg == 0 || !ipg.is_multiple_of(16) || ipg > 8 * BLOCK_BYTES as u32 {
            return Err(SimfsError::Config(
                "inodes_per_group must be a positive multiple of 16 up to 32768".into(),
            ));
        }
        if blocks > u32::MAX as u64 {
            return Err(SimfsError::Config("more than 2^32 blocks".into()));
        }
        if blocks == 0 {
            return Err(SimfsError::Config(format!(
                "a {} byte file system holds no whole {BLOCK} byte block; use a larger size",
                cfg.size_bytes
            )));
        }
        let groups = blocks.div_ceil(cfg.blocks_per_group as u64) as u32;
        let gdt_blocks = (groups as u64 * 32).div_ceil(BLOCK);
        let itable_blocks = ipg as u64 * INODE_BYTES as u64 / BLOCK;
        let mut bitmap = Bitmap::new(blocks);
        let mut descs = Vec::with_capacity(groups as usize);
        for g in 0..groups as u64 {
            let start = g * cfg.blocks_per_group as u64;
            let meta = if g == 0 { 1 + gdt_blocks } else { start };
            let end = meta + 2 + itable_blocks;
            let group_end = (start + cfg.blocks_per_group as u64).min(blocks);
            if end >= group_end {
                return Err(SimfsError::Config(format!(
                    "{} bytes leave group {g} no room for data after its bitmaps and inode table; use a larger size",
                    cfg.size_bytes
                )));
            }
            bitmap.set_used(start, end - start);
            descs.push(GroupDesc {
                block_bitmap: meta as u32,
                inode_bitmap: meta as u32 + 1,
                inode_table: meta as u32 + 2,
            });
        }
        let sb = Superblock {
            inodes_count: groups * ipg,
            blocks_count: blocks as u32,
            blocks_per_group: cfg.blocks_per_group,
            inodes_per_group: ipg,
        };
        let cursor = bitmap.next_free(0).unwrap_or(0);
        let mut fs = SimFs {
            dev,
            inode_used: vec![false; sb.inodes_count as usize],
            sb,
            descs,
            bitmap,
            files: HashMap::new(),
            names: BTreeMap::new(),
            cursor,
            deferred: Vec::new(),
            freed_uncommitted: Vec::new(),
            committing: false,
            dirty_groups: (0..groups).collect(),
            dirty_itable: BTreeSet::new(),
            command_page,
            stats: FsStats::default(),
            log: None,
            cfg,
        };
        if fs.cfg.alloc == AllocPolicy::LogStructured {
            fs.log = Some(crate::lfs::LogState::new(&fs.bitmap));
        }
        // Reserved inodes 1..FIRST_INODE are in use from the start.
        for i in 0..(FIRST_INODE - 1) as usize {
            fs.inode_used[i] = true;
        }
        let mut b0 = vec![0u8; BLOCK_BYTES];
        fs.sb.encode(&mut b0);
        fs.write_meta(0, b0)?;
        for gb in 0..gdt_blocks {
            let mut b = vec![0u8; BLOCK_BYTES];
            for (g, d) in fs.descs.iter().enumerate() {
                let (blk, off) = group_desc_location(g as u32);
                if blk == 1 + gb {
                    d.encode(&mut b[off..off + 32]);
                }
            }
            fs.write_meta(1 + gb, b)?;
        }
        fs.sync()?;
        Ok(fs)
    }

    pub fn device(&self) -> &D {
        &self.dev
    }

    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    pub fn into_device(self) -> D {
        self.dev
    }

    pub fn stats(&self) -> &FsStats {
        &self.stats
    }

    pub fn config(&self) -> &FsConfig {
        &self.cfg
    }

    pub fn free_bytes(&self) -> u64 {
        self.bitmap.free_blocks() * BLOCK
    }

    /// The byte offset of the reserved page vTrim and fTrim commands are written to.
    pub fn command_page_offset(&self) -> u64 {
        self.command_page
    }

    pub fn set_discard(&mut self, mode: DiscardMode) {
        self.cfg.discard = mode;
    }

    fn write_meta(&mut self, block: u64, bytes: Vec<u8>) -> Result<u64, SimfsError> {
        self.stats.meta_write_requests += 1;
        self.dev
            .io(Command::write_data(block * BLOCK, Arc::from(bytes)))
    }

    pub fn lookup(&self, name: &str) -> Result<Ino, SimfsError> {
        self.names
            .get(name)
            .copied()
            .ok_or_else(|| SimfsError::NotFound(name.to_string()))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(String::as_str)
    }

    pub fn size_of(&self, ino: Ino) -> Result<u64, SimfsError> {
        Ok(self.file(ino)?.size_bytes)
    }

    /// The file's extents (logical block, blocks, physical start block), in order.
    pub fn extents(&self, ino: Ino) -> Result<Vec<Extent>, SimfsError> {
        Ok(self.file(ino)?.extents.clone())
    }

    /// The file's extent-tree blocks on disk.
    pub fn tree_blocks(&self, ino: Ino) -> Result<Vec<u64>, SimfsError> {
        Ok(self.file(ino)?.tree_blocks.clone())
    }

    fn file(&self, ino: Ino) -> Result<&FileState, SimfsError> {
        self.files
            .get(&ino)
            .ok_or_else(|| SimfsError::Invalid(format!("inode {ino} is not an open file")))
    }

    fn group_of_block(&self, b: u64) -> u32 {
        (b / self.cfg.blocks_per_group as u64) as u32
    }

    fn itable_block_of(&self, ino: Ino) -> u64 {
        let g = (ino - 1) / self.sb.inodes_per_group;
        let idx = ((ino - 1) % self.sb.inodes_per_group) as u64;
        self.descs[g as usize].inode_table as u64 + idx * INODE_BYTES as u64 / BLOCK
    }

    /// Renames a file (names live in memory: no I/O); `to` must not exist.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), SimfsError> {
        if to.is_empty() || to.contains('/') || to.len() > 255 {
            return Err(SimfsError::Invalid(format!(
                "file name {to:?} must be 1-255 bytes without '/'"
            )));
        }
        if self.names.contains_key(to) {
            return Err(SimfsError::Exists(to.to_string()));
        }
        let ino = self.lookup(from)?;
        self.names.remove(from);
        self.names.insert(to.to_string(), ino);
        Ok(())
    }

    /// Creates an empty file.
    pub fn create(&mut self, name: &str) -> Result<Ino, SimfsError> {
        if name.is_empty() || name.contains('/') || name.len() > 255 {
            return Err(SimfsError::Invalid(format!(
                "file name {name:?} must be 1-255 bytes without '/'"
            )));
        }
        if self.names.contains_key(name) {
            return Err(SimfsError::Exists(name.to_string()));
        }
        let idx = self
            .inode_used
            .iter()
            .position(|u| !u)
            .ok_or(SimfsError::NoInodes {
                inodes: self.sb.inodes_count,
            })?;
        self.inode_used[idx] = true;
        let ino = idx as Ino + 1;
        self.names.insert(name.to_string(), ino);
        self.files.insert(
            ino,
            FileState {
                size_bytes: 0,
                extents: Vec::new(),
                tree_blocks: Vec::new(),
                written_root: Node::Leaf(Vec::new()),
                dirty: true,
                pa: None,
            },
        );
        self.dirty_groups
            .insert((ino - 1) / self.sb.inodes_per_group);
        Ok(ino)
    }

    /// Allocates `n` blocks: ext4-like, continuing at `goal` where it is free, else
    /// next-fit; log-structured, at the log head.
    pub(crate) fn alloc(
        &mut self,
        goal: Option<u64>,
        n: u64,
    ) -> Result<Vec<(u64, u64)>, SimfsError> {
        if self.log.is_some() {
            return self.alloc_log(n);
        }
        if self.bitmap.free_blocks() < n && !self.freed_uncommitted.is_empty() && !self.committing {
            self.sync()?; // as in fill_holes: the commit gives freed blocks back
        }
        if self.bitmap.free_blocks() < n {
            return Err(SimfsError::NoSpace {
                needed_blocks: n,
                free_blocks: self.bitmap.free_blocks(),
            });
        }
        let mut out = Vec::new();
        let mut remaining = n;
        let mut at = goal;
        while remaining > 0 {
            let (start, len) = match at {
                Some(g) if g < self.bitmap.blocks() && !self.bitmap.is_used(g) => {
                    (g, self.bitmap.free_run_len(g, remaining))
                }
                _ => self
                    .bitmap
                    .next_free_run(self.cursor, remaining)
                    .expect("free blocks were counted"),
            };
            self.take(start, len);
            out.push((start, len));
            remaining -= len;
            at = Some(start + len);
        }
        Ok(out)
    }

    pub(crate) fn take(&mut self, start: u64, len: u64) {
        if let Some(log) = &mut self.log {
            log.on_take(start, len);
        }
        self.bitmap.set_used(start, len);
        self.cursor = start + len;
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }

    pub(crate) fn release(&mut self, start: u64, len: u64) {
        if let Some(log) = &mut self.log {
            log.on_release(start, len);
        }
        self.bitmap.set_free(start, len);
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }

    /// Maps logical blocks `[lblk, lblk + runs total)` of `ino` to the physical `runs`.
    pub(crate) fn add_mapping(&mut self, ino: Ino, mut lblk: u32, runs: &[(u64, u64)]) {
        if let Some(log) = &mut self.log {
            let mut l = lblk;
            for &(start, len) in runs {
                for b in start..start + len {
                    log.set_owner(b, ino, l);
                    l += 1;
                }
            }
        }
        let f = self.files.get_mut(&ino).expect("caller checked the file");
        for &(start, len) in runs {
            let mut done = 0;
            while done < len {
                let piece = (len - done).min(MAX_EXTENT_BLOCKS as u64) as u32;
                let e = Extent {
                    logical_block: lblk,
                    len: piece,
                    start_block: start + done,
                };
                let pos = f.extents.partition_point(|x| x.logical_block < lblk);
                let merged = pos > 0 && {
                    let prev = &mut f.extents[pos - 1];
                    if prev.logical_block + prev.len == lblk
                        && prev.start_block + prev.len as u64 == e.start_block
                        && prev.len + piece <= MAX_EXTENT_BLOCKS
                    {
                        prev.len += piece;
                        true
                    } else {
                        false
                    }
                };
                if !merged {
                    f.extents.insert(pos, e);
                }
                lblk += piece;
                done += piece as u64;
            }
        }
        f.dirty = true;
    }

    /// Physical runs backing logical blocks `[first, end)`, and the unmapped holes.
    fn map_range(&self, ino: Ino, first: u32, end: u32) -> (Vec<BlockRun>, Vec<(u32, u32)>) {
        let f = &self.files[&ino];
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut holes = Vec::new();
        let mut at = first;
        let mut i = f
            .extents
            .partition_point(|e| e.logical_block + e.len <= first);
        while at < end {
            match f.extents.get(i) {
                Some(e) if e.logical_block <= at => {
                    let stop = (e.logical_block + e.len).min(end);
                    let p = e.start_block + (at - e.logical_block) as u64;
                    let n = (stop - at) as u64;
                    match runs.last_mut() {
                        Some(last) if last.0 + last.1 == p => last.1 += n,
                        _ => runs.push((p, n)),
                    }
                    at = stop;
                    i += 1;
                }
                Some(e) => {
                    let stop = e.logical_block.min(end);
                    holes.push((at, stop));
                    at = stop;
                }
                None => {
                    holes.push((at, end));
                    at = end;
                }
            }
        }
        (runs, holes)
    }

    fn goal_of(&self, ino: Ino) -> Option<u64> {
        self.files[&ino]
            .extents
            .last()
            .map(|e| e.start_block + e.len as u64)
    }

    fn block_span(offset_bytes: u64, len_bytes: u64) -> Result<(u32, u32), SimfsError> {
        let first = offset_bytes / BLOCK;
        let end = offset_bytes
            .checked_add(len_bytes)
            .ok_or_else(|| SimfsError::Invalid("offset + length overflows".into()))?
            .div_ceil(BLOCK);
        if end > u32::MAX as u64 {
            return Err(SimfsError::Invalid(format!(
                "offset {} lies past the largest file (2^32 blocks)",
                offset_bytes
            )));
        }
        Ok((first as u32, end as u32))
    }

    /// Allocates the holes of `[first, end)` in `ino`; fallocate asks for one run first.
    fn fill_holes(
        &mut self,
        ino: Ino,
        first: u32,
        end: u32,
        one_run: bool,
    ) -> Result<(), SimfsError> {
        let (_, holes) = self.map_range(ino, first, end);
        let needed: u64 = holes.iter().map(|&(a, b)| (b - a) as u64).sum();
        if needed > self.bitmap.free_blocks()
            && !self.freed_uncommitted.is_empty()
            && !self.committing
        {
            // Blocks freed in the running transaction come back at its commit: force it
            // and try again, as ext4 does on ENOSPC (fs/ext4/balloc.c,
            // ext4_should_retry_alloc).
            self.sync()?;
        }
        if needed > self.bitmap.free_blocks() {
            return Err(SimfsError::NoSpace {
                needed_blocks: needed,
                free_blocks: self.bitmap.free_blocks(),
            });
        }
        for (a, b) in holes {
            let n = (b - a) as u64;
            let goal = self.goal_of(ino);
            let single = if one_run && self.log.is_none() {
                self.bitmap.find_run(goal.unwrap_or(self.cursor), n)
            } else {
                None
            };
            let runs = match single {
                Some(start) => {
                    self.take(start, n);
                    vec![(start, n)]
                }
                None if self.cfg.prealloc && self.log.is_none() && !one_run => {
                    self.alloc_preallocated(ino, goal, n)?
                }
                None => self.alloc(goal, n)?,
            };
            self.add_mapping(ino, a, &runs);
        }
        Ok(())
    }

    /// mballoc-style inode preallocation: a file's appends are served from a window
    /// reserved for it, sized to the next power of two of the file's blocks (16 blocks to
    /// 8 MiB), so concurrent writers get few, growing extents instead of one per write.
    fn alloc_preallocated(
        &mut self,
        ino: Ino,
        goal: Option<u64>,
        n: u64,
    ) -> Result<Vec<(u64, u64)>, SimfsError> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut remaining = n;
        while remaining > 0 {
            if let Some((s, l)) = self.files[&ino].pa {
                let k = l.min(remaining);
                match runs.last_mut() {
                    Some(last) if last.0 + last.1 == s => last.1 += k,
                    _ => runs.push((s, k)),
                }
                self.files.get_mut(&ino).expect("exists").pa = (l > k).then_some((s + k, l - k));
                remaining -= k;
                continue;
            }
            let file_blocks: u64 = self.files[&ino].extents.iter().map(|e| e.len as u64).sum();
            let window = (file_blocks + remaining)
                .next_power_of_two()
                .clamp(16, PREALLOC_MAX_BLOCKS)
                .max(remaining.min(PREALLOC_MAX_BLOCKS));
            let from = runs
                .last()
                .map(|r| r.0 + r.1)
                .or(goal)
                .unwrap_or(self.cursor);
            match self.bitmap.find_run(from, window) {
                Some(start) if window <= self.bitmap.free_blocks() => {
                    self.take(start, window);
                    self.files.get_mut(&ino).expect("exists").pa = Some((start, window));
                }
                _ => {
                    // No window of that size: plain allocation for the rest.
                    let more = self.alloc(goal, remaining)?;
                    runs.extend(more);
                    remaining = 0;
                }
            }
        }
        Ok(runs)
    }

    /// Writes `len_bytes` at `offset_bytes` of the file (whole 4 KiB blocks), allocating
    /// blocks where the file has none; returns the device's completion time.
    pub fn write_at(
        &mut self,
        ino: Ino,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<u64, SimfsError> {
        self.file(ino)?;
        if len_bytes == 0 {
            return Ok(0);
        }
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        if self.log.is_some() {
            // Out of place: the blocks written move to the log head. Refuse up front if
            // the new copies cannot fit, so a failed write loses nothing.
            let needed = (end - first) as u64;
            if needed > self.bitmap.free_blocks() {
                return Err(SimfsError::NoSpace {
                    needed_blocks: needed,
                    free_blocks: self.bitmap.free_blocks(),
                });
            }
            self.relocate_on_write(ino, first, end)?;
        }
        self.fill_holes(ino, first, end, false)?;
        let (runs, _) = self.map_range(ino, first, end);
        let mut done = 0;
        for (p, n) in runs {
            self.stats.data_write_requests += 1;
            self.stats.data_write_bytes += n * BLOCK;
            done = self.dev.io(Command::write(p * BLOCK, n * BLOCK))?;
        }
        let f = self.files.get_mut(&ino).expect("checked");
        if offset_bytes + len_bytes > f.size_bytes {
            f.size_bytes = offset_bytes + len_bytes;
            f.dirty = true;
        }
        Ok(done)
    }

    /// Reads `len_bytes` at `offset_bytes` (holes cost nothing); returns the completion time.
    pub fn read_at(
        &mut self,
        ino: Ino,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<u64, SimfsError> {
        self.file(ino)?;
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        let (runs, _) = self.map_range(ino, first, end);
        let mut done = 0;
        for (p, n) in runs {
            self.stats.data_read_requests += 1;
            self.stats.data_read_bytes += n * BLOCK;
            done = self.dev.io(Command::read(p * BLOCK, n * BLOCK))?;
        }
        Ok(done)
    }

    /// Preallocates `[offset_bytes, offset_bytes + len_bytes)` as one contiguous run if
    /// free space allows (else as few runs as next-fit finds), without writing data; the
    /// file grows to cover the range.
    pub fn fallocate(
        &mut self,
        ino: Ino,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), SimfsError> {
        self.file(ino)?;
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        self.fill_holes(ino, first, end, true)?;
        let f = self.files.get_mut(&ino).expect("checked");
        f.size_bytes = f.size_bytes.max(offset_bytes + len_bytes);
        f.dirty = true;
        Ok(())
    }

    /// Creates a file of `size_bytes` made of `extents` runs with a free block between
    /// neighbours (a fragmented file on purpose, like paper 002's 10 MB file of 160
    /// extents), and writes its data.
    pub fn create_fragmented(
        &mut self,
        name: &str,
        size_bytes: u64,
        extents: u32,
    ) -> Result<Ino, SimfsError> {
        let blocks = size_bytes.div_ceil(BLOCK);
        if extents == 0 || extents as u64 > blocks {
            return Err(SimfsError::Invalid(format!(
                "{extents} extents for {blocks} blocks: need 1..={blocks}"
            )));
        }
        let span = blocks + extents as u64 - 1;
        let start = self.bitmap.find_run(self.cursor, span).ok_or_else(|| {
            let free_blocks = self.bitmap.free_blocks();
            if free_blocks < span {
                SimfsError::NoSpace {
                    needed_blocks: span,
                    free_blocks,
                }
            } else {
                SimfsError::NoContiguousRun {
                    needed_blocks: span,
                    longest_free_run: self.bitmap.longest_free_run(),
                    free_blocks,
                }
            }
        })?;
        let ino = self.create(name)?;
        let (per, extra) = (blocks / extents as u64, blocks % extents as u64);
        let mut at = start;
        let mut lblk = 0u32;
        for i in 0..extents as u64 {
            let n = per + u64::from(i < extra);
            self.take(at, n);
            self.add_mapping(ino, lblk, &[(at, n)]);
            self.stats.data_write_requests += 1;
            self.stats.data_write_bytes += n * BLOCK;
            self.dev.io(Command::write(at * BLOCK, n * BLOCK))?;
            lblk += n as u32;
            at += n + 1;
        }
        let f = self.files.get_mut(&ino).expect("just created");
        f.size_bytes = size_bytes;
        Ok(ino)
    }

    /// Builds the extent tree of `extents` over `blocks` (as many as
    /// [`tree_blocks_needed`]): the root for the inode and the nodes to write.
    fn build_tree(extents: &[Extent], blocks: &[u64]) -> (Node, Vec<(u64, Node)>) {
        if extents.len() <= EXTENTS_IN_INODE {
            return (Node::Leaf(extents.to_vec()), Vec::new());
        }
        let mut next = blocks.iter().copied();
        let mut nodes = Vec::new();
        let mut level: Vec<ExtentIndex> = extents
            .chunks(EXTENTS_PER_BLOCK)
            .map(|c| {
                let b = next.next().expect("enough tree blocks");
                nodes.push((b, Node::Leaf(c.to_vec())));
                ExtentIndex {
                    logical_block: c[0].logical_block,
                    child_block: b,
                }
            })
            .collect();
        let mut depth = 1;
        while level.len() > EXTENTS_IN_INODE {
            level = level
                .chunks(EXTENTS_PER_BLOCK)
                .map(|c| {
                    let b = next.next().expect("enough tree blocks");
                    nodes.push((
                        b,
                        Node::Index {
                            depth,
                            children: c.to_vec(),
                        },
                    ));
                    ExtentIndex {
                        logical_block: c[0].logical_block,
                        child_block: b,
                    }
                })
                .collect();
            depth += 1;
        }
        (
            Node::Index {
                depth,
                children: level,
            },
            nodes,
        )
    }

    /// Writes one file's extent tree (reusing its tree blocks where it can) and marks its
    /// inode-table block for write-back.
    fn write_file_meta(&mut self, ino: Ino) -> Result<(), SimfsError> {
        let (n, mut blocks) = {
            let f = &self.files[&ino];
            (tree_blocks_needed(f.extents.len()), f.tree_blocks.clone())
        };
        while blocks.len() > n {
            let b = blocks.pop().expect("longer than n");
            self.release(b, 1);
        }
        if blocks.len() < n {
            let runs = self.alloc(None, (n - blocks.len()) as u64)?;
            blocks.extend(runs.iter().flat_map(|&(s, l)| s..s + l));
        }
        if let Some(log) = &mut self.log {
            for &b in &blocks {
                log.set_owner(b, ino, crate::lfs::TREE_BLOCK);
            }
        }
        let (root, nodes) = Self::build_tree(&self.files[&ino].extents, &blocks);
        for (b, node) in nodes {
            let mut bytes = vec![0u8; BLOCK_BYTES];
            encode_node(&node, &mut bytes);
            self.write_meta(b, bytes)?;
        }
        let f = self.files.get_mut(&ino).expect("exists");
        f.tree_blocks = blocks;
        f.written_root = root;
        f.dirty = false;
        self.dirty_itable.insert(self.itable_block_of(ino));
        Ok(())
    }

    /// Encodes the inode-table block `block` from the in-memory inodes.
    fn itable_bytes(&self, block: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; BLOCK_BYTES];
        let per_block = (BLOCK as usize / INODE_BYTES) as u32;
        for g in 0..self.descs.len() as u32 {
            let table = self.descs[g as usize].inode_table as u64;
            let table_blocks = self.sb.inodes_per_group as u64 * INODE_BYTES as u64 / BLOCK;
            if !(table..table + table_blocks).contains(&block) {
                continue;
            }
            let first_ino = g * self.sb.inodes_per_group + (block - table) as u32 * per_block + 1;
            for i in 0..per_block {
                let ino = first_ino + i;
                if let Some(f) = self.files.get(&ino) {
                    Inode {
                        mode: 0o100644,
                        links: 1,
                        size_bytes: f.size_bytes,
                        flags: EXTENTS_FL,
                        root: f.written_root.clone(),
                    }
                    .encode(&mut bytes[i as usize * INODE_BYTES..(i as usize + 1) * INODE_BYTES]);
                }
            }
        }
        bytes
    }

    fn bitmap_bytes(&self, g: u32) -> (Vec<u8>, Vec<u8>) {
        let mut blocks = vec![0u8; BLOCK_BYTES];
        let start = g as u64 * self.cfg.blocks_per_group as u64;
        for i in 0..self.cfg.blocks_per_group as u64 {
            let b = start + i;
            if b >= self.bitmap.blocks() || self.bitmap.is_used(b) {
                blocks[(i / 8) as usize] |= 1 << (i % 8);
            }
        }
        let mut inodes = vec![0u8; BLOCK_BYTES];
        let ipg = self.sb.inodes_per_group as usize;
        for i in 0..ipg {
            if self.inode_used[g as usize * ipg + i] {
                inodes[i / 8] |= 1 << (i % 8);
            }
        }
        (blocks, inodes)
    }

    /// Writes one file's metadata now (its tree and inode-table block).
    pub fn sync_file(&mut self, ino: Ino) -> Result<(), SimfsError> {
        self.file(ino)?;
        if self.files[&ino].dirty {
            self.write_file_meta(ino)?;
        }
        let b = self.itable_block_of(ino);
        if self.dirty_itable.remove(&b) {
            let bytes = self.itable_bytes(b);
            self.write_meta(b, bytes)?;
        }
        Ok(())
    }

    /// Journal mode, after a commit: frees the runs freed since the last one and discards
    /// them, merged within their block group, one TRIM per run. Returns the completion time
    /// of the last TRIM (0 if none).
    fn discard_committed(&mut self) -> Result<u64, SimfsError> {
        let bpg = self.cfg.blocks_per_group as u64;
        let mut done = 0;
        for (s, l) in merge_runs(std::mem::take(&mut self.freed_uncommitted)) {
            self.release(s, l);
            // Split at group boundaries: freed extents merge within a group only.
            let mut b = s;
            while b < s + l {
                let n = (s + l - b).min(bpg - b % bpg);
                self.stats.trim_commands += 1;
                self.stats.discarded_bytes += n * BLOCK;
                done = self.dev.io(Command::trim(b * BLOCK, n * BLOCK))?;
                b += n;
            }
        }
        Ok(done)
    }

    /// Writes back all dirty metadata (extent trees, inode tables, bitmaps), then flushes:
    /// a journal commit (in journal discard mode, the extents freed since the last commit
    /// are then freed and discarded).
    pub fn sync(&mut self) -> Result<u64, SimfsError> {
        self.committing = true;
        let done = self.commit_metadata();
        self.committing = false;
        let done = done?;
        if self.freed_uncommitted.is_empty() {
            return Ok(done);
        }
        Ok(done.max(self.discard_committed()?))
    }

    fn commit_metadata(&mut self) -> Result<u64, SimfsError> {
        let dirty: Vec<Ino> = self
            .files
            .iter()
            .filter(|(_, f)| f.dirty)
            .map(|(&i, _)| i)
            .collect();
        let mut dirty = dirty;
        dirty.sort_unstable();
        for ino in dirty {
            self.write_file_meta(ino)?;
        }
        for b in std::mem::take(&mut self.dirty_itable) {
            let bytes = self.itable_bytes(b);
            self.write_meta(b, bytes)?;
        }
        if self.log.is_some() {
            self.send_log_discards()?;
        }
        for g in std::mem::take(&mut self.dirty_groups) {
            let (blocks, inodes) = self.bitmap_bytes(g);
            let d = self.descs[g as usize];
            self.write_meta(d.block_bitmap as u64, blocks)?;
            self.write_meta(d.inode_bitmap as u64, inodes)?;
        }
        self.stats.flushes += 1;
        self.dev.io(Command::flush())
    }

    /// Deletes a file, telling the drive per the discard mode; returns the completion time
    /// of the last command it sent. On a device error the file is left in place.
    pub fn unlink(&mut self, name: &str) -> Result<u64, SimfsError> {
        let ino = self.lookup(name)?;
        let f = &self.files[&ino];
        let runs = merge_runs(
            f.extents
                .iter()
                .map(|e| (e.start_block, e.len as u64))
                .chain(f.tree_blocks.iter().map(|&b| (b, 1)))
                .collect(),
        );
        let bytes: u64 = runs.iter().map(|r| r.1 * BLOCK).sum();
        let mut done = 0;
        match self.cfg.discard {
            DiscardMode::None => {}
            DiscardMode::Online => {
                for &(s, l) in &runs {
                    self.stats.trim_commands += 1;
                    done = self.dev.io(Command::trim(s * BLOCK, l * BLOCK))?;
                }
                self.stats.discarded_bytes += bytes;
            }
            DiscardMode::VTrim => {
                for chunk in runs.chunks(VTRIM_MAX_RANGES) {
                    let ranges = chunk.iter().map(|&(s, l)| range_bytes(s, l)).collect();
                    self.stats.vtrim_commands += 1;
                    done = self.dev.io(Command::vtrim(self.command_page, ranges))?;
                }
                self.stats.discarded_bytes += bytes;
            }
            DiscardMode::FTrim => {
                // The drive reads the inode and its tree: they must be on the device first.
                self.sync_file(ino)?;
                self.stats.ftrim_commands += 1;
                let mut cmd = Command::ftrim(self.command_page, ino);
                cmd.len_bytes = 512; // one sector carries the inode number
                done = self.dev.io(cmd)?;
                self.stats.discarded_bytes += bytes;
            }
            DiscardMode::Deferred => self.deferred.extend(runs.iter().copied()),
            DiscardMode::Journal => {}
        }
        if let Some((s, l)) = self.files[&ino].pa {
            self.release(s, l);
        }
        if self.cfg.discard == DiscardMode::Journal && self.log.is_none() {
            // Free only at the next commit, and discard then.
            self.freed_uncommitted.extend(runs.iter().copied());
        } else {
            for &(s, l) in &runs {
                self.release(s, l);
            }
        }
        self.files.remove(&ino);
        self.names.remove(name);
        self.inode_used[ino as usize - 1] = false;
        self.dirty_groups
            .insert((ino - 1) / self.sb.inodes_per_group);
        self.dirty_itable.insert(self.itable_block_of(ino));
        Ok(done)
    }

    /// Consistency check (for tests): every file's extents are sorted and disjoint, every
    /// block a file or tree uses is marked used and belongs to one owner only, and the
    /// used count equals the file-system metadata plus all files' blocks.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut owner: HashMap<u64, Ino> = HashMap::new();
        let mut claim = |b: u64, ino: Ino| -> Result<(), String> {
            if !self.bitmap.is_used(b) {
                return Err(format!(
                    "inode {ino} uses block {b}, which the bitmap says is free"
                ));
            }
            if let Some(other) = owner.insert(b, ino) {
                return Err(format!("block {b} belongs to inodes {other} and {ino}"));
            }
            Ok(())
        };
        for (&ino, f) in &self.files {
            for w in f.extents.windows(2) {
                if w[0].logical_block + w[0].len > w[1].logical_block {
                    return Err(format!(
                        "inode {ino}: extents overlap or are unsorted: {:?} {:?}",
                        w[0], w[1]
                    ));
                }
            }
            for e in &f.extents {
                for b in e.start_block..e.start_block + e.len as u64 {
                    claim(b, ino)?;
                }
            }
            for &b in &f.tree_blocks {
                claim(b, ino)?;
            }
            if let Some((s, l)) = f.pa {
                for b in s..s + l {
                    claim(b, ino)?;
                }
            }
        }
        for &(s, l) in &self.freed_uncommitted {
            for b in s..s + l {
                claim(b, 0)?;
            }
        }
        let meta = self.descs.len() as u64
            * (2 + self.sb.inodes_per_group as u64 * INODE_BYTES as u64 / BLOCK)
            + 1
            + (self.descs.len() as u64 * 32).div_ceil(BLOCK);
        let used = self.bitmap.blocks() - self.bitmap.free_blocks();
        if used != meta + owner.len() as u64 {
            return Err(format!(
                "{used} blocks used, but metadata ({meta}) and files ({}) account for {}",
                owner.len(),
                meta + owner.len() as u64
            ));
        }
        if let Some(log) = &self.log {
            log.check(&self.bitmap)?;
        }
        Ok(())
    }

    /// Sends the deferred discards (merged, one TRIM per range, skipping blocks allocated
    /// again since), like `fstrim`; returns how many TRIM commands it sent.
    pub fn fstrim(&mut self) -> Result<u64, SimfsError> {
        let runs = merge_runs(std::mem::take(&mut self.deferred));
        let mut sent = 0;
        for (s, l) in runs {
            let mut b = s;
            while b < s + l {
                if self.bitmap.is_used(b) {
                    b += 1;
                    continue;
                }
                let n = self.bitmap.free_run_len(b, s + l - b);
                self.stats.trim_commands += 1;
                self.stats.discarded_bytes += n * BLOCK;
                self.dev.io(Command::trim(b * BLOCK, n * BLOCK))?;
                sent += 1;
                b += n;
            }
        }
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_sizes() {
        assert_eq!(tree_blocks_needed(4), 0);
        assert_eq!(tree_blocks_needed(5), 1);
        assert_eq!(tree_blocks_needed(340), 1);
        assert_eq!(tree_blocks_needed(341), 2);
        assert_eq!(tree_blocks_needed(4 * 340), 4);
        assert_eq!(tree_blocks_needed(4 * 340 + 1), 5 + 1);
    }

    #[test]
    fn merges_runs() {
        assert_eq!(
            merge_runs(vec![(10, 2), (0, 5), (5, 5), (13, 1)]),
            vec![(0, 12), (13, 1)]
        );
    }
}
