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
use std::sync::Arc;

mod alloc;
mod check;
mod discard;
mod extents;
mod layout;
mod log;
mod meta;
mod mkfs;

pub use crate::types::*;
use discard::range_bytes;
use extents::tree_blocks_needed;
pub(crate) use extents::Fill;

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
    /// The host's view of the file, where a page cache stands in front ([`SimFs::set_host_view`]):
    /// its size (`i_size`, which runs ahead of the blocks written back) and whether any
    /// handle has it open for writing. None: nobody told, so the file counts as open and
    /// its size as what was written (every caller that writes directly).
    pub(crate) host: Option<HostView>,
    /// Its write-life hint (`F_SET_RW_HINT`), in memory only as Linux keeps it.
    pub(crate) hint: WriteHint,
    /// Unwritten extents mapped by a writeback and not converted yet
    /// ([`DiscardKernel::writes_unwritten_extents`]): the file's extent count when the first
    /// was mapped, and how many pieces have been mapped since (none merge before the
    /// conversion, `EXT4_GET_BLOCKS_PRE_IO`).
    pub(crate) unwritten: Option<(usize, usize)>,
}

/// A file as the host sees it ([`SimFs::set_host_view`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostView {
    pub(crate) size_bytes: u64,
    pub(crate) open_for_write: bool,
}

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
    /// Blocks mkfs marked used (superblocks, descriptors, bitmaps, inode tables, the first
    /// files, the journal; on a zoned drive the metadata's home and each zone's tail).
    pub(crate) metadata_blocks: u64,
    /// Each block group's free blocks and free runs (ext4's `bb_free`, `bb_fragments`),
    /// kept as blocks are taken and freed ([`SimFs::set_used`], [`SimFs::set_free`]).
    pub(crate) group_free: Vec<(u64, u64)>,
    /// mballoc's locality-group preallocation (one CPU's): the window small files'
    /// appends are carved from in turn, held as used.
    pub(crate) lg_pa: Option<(u64, u64)>,
    /// mballoc's stream goals: the group each of them last allocated a window in
    /// (`s_mb_last_groups`, one per CPU up to one per four groups, from Linux 6.17;
    /// earlier kernels keep one, `s_mb_last_group`), all 0 at mount.
    pub(crate) stream_goals: Vec<u32>,
    /// Each group's largest free buddy order (`bb_largest_free_order`; `NO_FREE_ORDER`
    /// if it has no free block), or `STALE_ORDER` until asked again after a change.
    pub(crate) largest_order: Vec<u8>,
    pub(crate) deferred: Vec<(u64, u64)>,
    /// Journal mode: runs freed since the last commit (still marked used).
    pub(crate) freed_uncommitted: Vec<(u64, u64)>,
    /// Journal mode with the discard worker: runs committed and still to discard, in
    /// the worker's order.
    pub(crate) discard_queue: std::collections::VecDeque<(u64, u64)>,
    /// The worker's TRIM in flight: its blocks (held as used) and completion time.
    pub(crate) discard_in_flight: Option<(u64, u64, u64)>,
    /// When the worker may issue its next TRIM.
    pub(crate) worker_free_at_ns: u64,
    /// The clock the worker catches up with, when not the host's ([`SimFs::finish_discards`]).
    pub(crate) worker_clock_override: Option<u64>,
    /// A commit is running (an allocation inside it must not start another).
    committing: bool,
    pub(crate) dirty_groups: BTreeSet<u32>,
    /// Files whose inode or extent tree changed since the last commit (`FileState::dirty`
    /// set), in inode order: what a commit writes, without scanning every file.
    pub(crate) dirty_files: BTreeSet<Ino>,
    pub(crate) dirty_itable: BTreeSet<u64>,
    pub(crate) command_page: u64,
    pub(crate) stats: FsStats,
    /// The allocation policy ([`crate::allocator`]).
    pub(crate) allocator: Box<dyn crate::allocator::Allocator>,
    /// Zoned: where the latest copy of each metadata block is in the log (by home block).
    pub(crate) meta_copies: HashMap<u64, u64>,
    /// Zoned with several logs: the log the next allocation goes to.
    pub(crate) alloc_class: usize,
}

impl<D: BlockDev> SimFs<D> {
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

    /// Blocks the file's extents map (its preallocation not counted).
    pub fn mapped_blocks(&self, ino: Ino) -> Result<u64, SimfsError> {
        Ok(self.file(ino)?.extents.iter().map(|e| e.len as u64).sum())
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

    /// Sets the file's write-life hint (Linux's `F_SET_RW_HINT` on its inode; no I/O):
    /// with [`FsConfig::placement`], the file's data writes from now on carry the handle
    /// the hint maps to.
    pub fn set_write_hint(&mut self, ino: Ino, hint: WriteHint) -> Result<(), SimfsError> {
        self.file(ino)?;
        self.files.get_mut(&ino).expect("checked").hint = hint;
        Ok(())
    }

    /// What the host knows of a file that a page cache keeps: its size (`i_size`) and
    /// whether a handle has it open for writing. mballoc decides with both
    /// (`ext4_mb_group_or_file`, fs/ext4/mballoc.c, since Jan Kara's "ext4: Use locality
    /// group preallocation for small closed files", Linux 6.0): a file larger than
    /// `s_mb_stream_request` by the larger of the request's end and `i_size` gets no
    /// locality-group window; if the request runs to `i_size` and no handle writes to the
    /// file, no window of its own either (`EXT4_MB_HINT_NOPREALLOC`: exactly its blocks,
    /// at its goal). And when its last writer closes it with no delayed-allocation blocks
    /// left, its preallocation goes back to the free space (`ext4_release_file`, fs/ext4/
    /// file.c: `ext4_discard_preallocations`); `dirty` says whether delayed-allocation blocks
    /// wait (`i_reserved_data_blocks`).
    pub fn set_host_view(
        &mut self,
        ino: Ino,
        size_bytes: u64,
        open_for_write: bool,
        dirty: bool,
    ) -> Result<(), SimfsError> {
        self.file(ino)?;
        let f = self.files.get_mut(&ino).expect("checked");
        let was_open = f.host.is_none_or(|h| h.open_for_write);
        f.host = Some(HostView {
            size_bytes,
            open_for_write,
        });
        if was_open && !open_for_write && !dirty {
            if let Some((s, l)) = f.pa.take() {
                self.release(s, l);
            }
        }
        Ok(())
    }

    /// The file's write-life hint (`F_GET_RW_HINT`).
    pub fn write_hint(&self, ino: Ino) -> Result<WriteHint, SimfsError> {
        Ok(self.file(ino)?.hint)
    }

    /// Zoned: `runs` cut where they cross from one zone into the next (the block layer
    /// splits a zoned device's requests at zone boundaries: `chunk_sectors` is the zone
    /// size); unchanged otherwise.
    pub(crate) fn split_at_zones(&self, runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        let Some(z) = self.cfg.zoned else {
            return runs;
        };
        let zone_blocks = z.zone_bytes / BLOCK;
        let mut out = Vec::with_capacity(runs.len());
        for (mut p, mut n) in runs {
            while n > 0 {
                let room = zone_blocks - p % zone_blocks;
                let k = n.min(room);
                out.push((p, k));
                (p, n) = (p + k, n - k);
            }
        }
        out
    }

    /// The placement handle of writes with `hint` (0 without placement, and on a zoned
    /// drive, where the map picks a log instead: [`SimFs::log_of_hint`]).
    pub(crate) fn handle_of_hint(&self, hint: WriteHint) -> u16 {
        match self.cfg.zoned {
            Some(_) => 0,
            None => self.cfg.placement.map_or(0, |p| p.handle(hint)),
        }
    }

    /// Zoned: the log (open zone) writes with `hint` go to: the placement map's handle,
    /// read as a log number (F2FS keeps hot, warm and cold logs); 0 otherwise.
    pub(crate) fn log_of_hint(&self, hint: WriteHint) -> usize {
        match (self.cfg.zoned, self.cfg.placement) {
            (Some(_), Some(p)) => p.handle(hint) as usize,
            _ => 0,
        }
    }

    /// The placement handle of `ino`'s data writes (0 for a file that no longer exists).
    pub(crate) fn handle_of_file(&self, ino: Ino) -> u16 {
        self.files
            .get(&ino)
            .map_or(0, |f| self.handle_of_hint(f.hint))
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
                host: None,
                hint: WriteHint::NotSet,
                unwritten: None,
            },
        );
        self.dirty_files.insert(ino);
        self.dirty_groups
            .insert((ino - 1) / self.sb.inodes_per_group);
        Ok(ino)
    }

    /// Allocates the blocks of `[offset_bytes, offset_bytes + len_bytes)` that `ino` still
    /// lacks, as one request, without writing them: ext4's writeback maps a file's
    /// contiguous dirty pages with one `ext4_map_blocks` call (up to
    /// [`MAX_WRITEPAGES_EXTENT_BLOCKS`]) before it sends them in requests of the device's
    /// size (fs/ext4/inode.c, `mpage_map_and_submit_extent`), so the allocator sees the
    /// whole run. The writes that follow find their blocks mapped. Under a kernel that
    /// writes unwritten extents the new blocks stay unwritten until
    /// [`SimFs::convert_unwritten`] (the writeback's I/O done). Out-of-place allocation
    /// places blocks as they are written: nothing to do.
    pub fn map_for_writeback(
        &mut self,
        ino: Ino,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(), SimfsError> {
        self.file(ino)?;
        if len_bytes == 0 || self.allocator.out_of_place() {
            return Ok(());
        }
        self.run_discard_worker()?;
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        self.alloc_class = self.log_of_hint(self.files[&ino].hint);
        let filled = self.fill_holes(ino, first, end, Fill::Writeback);
        self.alloc_class = 0;
        filled
    }

    /// The writeback's I/O of `ino` is done: its unwritten extents become written and merge
    /// with their neighbours, and a tree of one leaf that fits back in the inode goes back
    /// into it, its block freed (`ext4_convert_unwritten_extents_endio`,
    /// `ext4_ext_try_to_merge_up`). Nothing to do for a file with none.
    pub fn convert_unwritten(&mut self, ino: Ino) -> Result<(), SimfsError> {
        self.file(ino)?;
        if self.files[&ino].unwritten.is_none() {
            return Ok(());
        }
        self.files.get_mut(&ino).expect("checked").unwritten = None;
        self.try_to_merge_up(ino)
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
        self.run_discard_worker()?;
        if len_bytes == 0 {
            return Ok(0);
        }
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        if self.allocator.out_of_place() {
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
        self.alloc_class = self.log_of_hint(self.files[&ino].hint);
        let filled = self.fill_holes(ino, first, end, Fill::Write);
        self.alloc_class = 0;
        filled?;
        let (runs, _) = self.map_range(ino, first, end);
        let handle = self.handle_of_file(ino);
        let mut done = 0;
        for (p, n) in self.split_at_zones(runs) {
            self.stats.data_write_requests += 1;
            self.stats.data_write_bytes += n * BLOCK;
            done = self
                .dev
                .io(Command::write(p * BLOCK, n * BLOCK).on_handle(handle))?;
        }
        let f = self.files.get_mut(&ino).expect("checked");
        if offset_bytes + len_bytes > f.size_bytes {
            f.size_bytes = offset_bytes + len_bytes;
            f.dirty = true;
            self.dirty_files.insert(ino);
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
        self.run_discard_worker()?;
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
        self.run_discard_worker()?;
        let (first, end) = Self::block_span(offset_bytes, len_bytes)?;
        if self.cfg.zoned.is_none() {
            self.fill_holes(ino, first, end, Fill::Fallocate)?;
        }
        // Zoned: the range is reserved, not allocated (a block allocated ahead of the
        // write pointer could never be written after it): the size grows and writes
        // allocate at the head, as F2FS reserves fallocated blocks (NEW_ADDR,
        // fs/f2fs/file.c: f2fs_expand_inode_data) and places them at writeback.
        let _ = (first, end);
        let f = self.files.get_mut(&ino).expect("checked");
        f.size_bytes = f.size_bytes.max(offset_bytes + len_bytes);
        f.dirty = true;
        self.dirty_files.insert(ino);
        Ok(())
    }

    /// Deletes a file, telling the drive per the discard mode; returns the completion time
    /// of the last command it sent. On a device error the file is left in place.
    pub fn unlink(&mut self, name: &str) -> Result<u64, SimfsError> {
        let ino = self.lookup(name)?;
        self.run_discard_worker()?;
        let f = &self.files[&ino];
        let runs = merge_runs(
            f.extents
                .iter()
                .map(|e| (e.start_block, e.len as u64))
                .chain(f.tree_blocks.iter().map(|&b| (b, 1)))
                .collect(),
        );
        let bytes: u64 = runs.iter().map(|r| r.1 * BLOCK).sum();
        let bpg = self.cfg.blocks_per_group as u64;
        self.stats.freed_extents += f
            .extents
            .iter()
            .map(|e| groups_spanned(e.start_block, e.len as u64, bpg))
            .sum::<u64>()
            // ext4 allocates a tree block when the extent that needs it goes in (at
            // writeback); simfs writes its tree at a commit or sync, so a tree grown since
            // then counts by what it needs.
            + f.tree_blocks.len().max(tree_blocks_needed(f.extents.len())) as u64;
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
        if self.cfg.discard == DiscardMode::Journal && !self.allocator.out_of_place() {
            // Free only at the next commit, and discard then. In ext4's order
            // (ext4_ext_remove_space): the extents from the file's end back to its start,
            // then the tree blocks they emptied.
            let f = &self.files[&ino];
            let freed: Vec<(u64, u64)> = f
                .extents
                .iter()
                .rev()
                .map(|e| (e.start_block, e.len as u64))
                .chain(f.tree_blocks.iter().rev().map(|&b| (b, 1)))
                .collect();
            self.freed_uncommitted.extend(freed);
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
}

/// How many block groups the run `[start, start + len)` lies in: the pieces ext4 frees
/// it in (`ext4_free_blocks` clears an extent a group at a time).
fn groups_spanned(start: u64, len: u64, blocks_per_group: u64) -> u64 {
    if len == 0 {
        0
    } else {
        (start + len - 1) / blocks_per_group - start / blocks_per_group + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_freed_a_block_group_at_a_time() {
        assert_eq!(groups_spanned(0, 0, 8), 0);
        assert_eq!(groups_spanned(0, 8, 8), 1, "a whole group");
        assert_eq!(groups_spanned(7, 2, 8), 2, "across a boundary");
        assert_eq!(groups_spanned(4, 20, 8), 3, "two boundaries");
    }

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
