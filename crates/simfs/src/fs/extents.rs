//! Files' block maps: extents, holes and their allocation (with mballoc-style
//! preallocation windows), and the extent trees that hold them on disk.

use super::*;

/// Extent-tree blocks needed below the inode for `n` extents.
pub(super) fn tree_blocks_needed(n: usize) -> usize {
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

impl<D: BlockDev> SimFs<D> {
    /// Maps logical blocks `[lblk, lblk + runs total)` of `ino` to the physical `runs`.
    pub(crate) fn add_mapping(&mut self, ino: Ino, mut lblk: u32, runs: &[(u64, u64)]) {
        let mut l = lblk;
        for &(start, len) in runs {
            self.allocator.set_run_owner(start, len, ino, l);
            l += len as u32;
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
        self.dirty_files.insert(ino);
    }

    /// Physical runs backing logical blocks `[first, end)`, and the unmapped holes.
    pub(super) fn map_range(
        &self,
        ino: Ino,
        first: u32,
        end: u32,
    ) -> (Vec<BlockRun>, Vec<(u32, u32)>) {
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

    pub(super) fn goal_of(&self, ino: Ino) -> Option<u64> {
        self.files[&ino]
            .extents
            .last()
            .map(|e| e.start_block + e.len as u64)
    }

    pub(super) fn block_span(offset_bytes: u64, len_bytes: u64) -> Result<(u32, u32), SimfsError> {
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

    /// Allocates the holes of `[first, end)` in `ino` for `fill`; fallocate asks for one
    /// run first.
    pub(super) fn fill_holes(
        &mut self,
        ino: Ino,
        first: u32,
        end: u32,
        fill: Fill,
    ) -> Result<(), SimfsError> {
        let one_run = fill == Fill::Fallocate;
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
            // ext4 flushes its discard work, which skips the discards left while an
            // allocation retries (5036ab8df278): the blocks of the TRIM in flight come back.
            self.drop_discards();
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
            let in_place = !self.allocator.out_of_place();
            // A fallocate that fits one extent is not normalised and uses no
            // preallocation (ext4_alloc_file_blocks: EXT4_GET_BLOCKS_NO_NORMALIZE, so
            // EXT4_MB_HINT_NOPREALLOC): exactly its blocks, at the file's goal.
            let single = if one_run && in_place {
                self.bitmap.find_run(goal.unwrap_or(self.cursor), n)
            } else {
                None
            };
            let runs = match single {
                Some(start) => {
                    self.take(start, n);
                    vec![(start, n)]
                }
                None if self.cfg.prealloc && in_place && !one_run => {
                    self.alloc_preallocated(ino, goal, n, b as u64)?
                }
                None => self.alloc(goal, n)?,
            };
            // ext4 maps these blocks unwritten ([`DiscardKernel::writes_unwritten_extents`]):
            // a writeback always (`EXT4_GET_BLOCKS_IO_CREATE_EXT`, converted when its I/O
            // is done), a direct write only inside the file's size (`ext4_iomap_alloc`:
            // an append gets a written extent, which merges at once), fallocate's are
            // not modelled as unwritten.
            let unwritten = in_place
                && self.cfg.kernel.writes_unwritten_extents()
                && match fill {
                    Fill::Writeback => true,
                    Fill::Write => (a as u64) * BLOCK < self.files[&ino].size_bytes,
                    Fill::Fallocate => false,
                };
            if unwritten {
                if let Err(e) = self.note_unwritten(ino, runs.len()) {
                    for &(s, l) in &runs {
                        self.release(s, l);
                    }
                    return Err(e);
                }
            }
            self.add_mapping(ino, a, &runs);
            if unwritten && fill == Fill::Write {
                // The direct write's I/O is done when the call returns.
                self.convert_unwritten(ino)?;
            }
        }
        Ok(())
    }

    /// `pieces` more unwritten extents of `ino` (one for each allocation: none merges
    /// before the conversion, `EXT4_GET_BLOCKS_PRE_IO`): the tree grows to what the
    /// file's extents and all its unwritten pieces need, its blocks allocated now, as
    /// ext4 does at the insert (`ext4_ext_grow_indepth`; simfs otherwise writes a tree at
    /// the next commit).
    fn note_unwritten(&mut self, ino: Ino, pieces: usize) -> Result<(), SimfsError> {
        let f = self.files.get_mut(&ino).expect("exists");
        let (written, pending) = f.unwritten.get_or_insert((f.extents.len(), 0));
        *pending += pieces;
        let need = tree_blocks_needed(*written + *pending);
        while self.files[&ino].tree_blocks.len() < need {
            let b = self.alloc_tree_block(ino)?;
            self.files
                .get_mut(&ino)
                .expect("exists")
                .tree_blocks
                .push(b);
        }
        Ok(())
    }

    /// One extent-tree block for `ino`: the first free block from the start of the
    /// inode's block group, as ext4 places a new root leaf (`ext4_inode_to_goal_block`;
    /// ext4 would start at the flex group's second group, simfs has no flex groups).
    /// When none is free, the running transaction is committed to get its freed blocks
    /// back first, as for data.
    fn alloc_tree_block(&mut self, ino: Ino) -> Result<u64, SimfsError> {
        if self.bitmap.free_blocks() == 0 && !self.freed_uncommitted.is_empty() && !self.committing
        {
            self.sync()?;
        }
        if self.bitmap.free_blocks() == 0 {
            self.drop_discards();
        }
        let group = (ino - 1) / self.sb.inodes_per_group;
        let goal = group as u64 * self.cfg.blocks_per_group as u64;
        let Some(b) = self.bitmap.find_run(goal, 1) else {
            return Err(SimfsError::NoSpace {
                needed_blocks: 1,
                free_blocks: self.bitmap.free_blocks(),
            });
        };
        self.take(b, 1);
        self.allocator.set_owner(b, ino, crate::lfs::TREE_BLOCK);
        Ok(b)
    }

    /// After a conversion: a tree of one leaf whose extents fit in the inode goes back
    /// into it and the leaf's block is freed (`ext4_ext_try_to_merge_up`; freed as
    /// metadata, so through the commit): one freed extent, discarded as the mode discards
    /// a delete's blocks (after the commit with journal discards; at once online; at the
    /// next fstrim deferred; never by vTrim and fTrim, which name a deleted file's blocks).
    pub(super) fn try_to_merge_up(&mut self, ino: Ino) -> Result<(), SimfsError> {
        let f = &self.files[&ino];
        if f.tree_blocks.len() != 1 || f.extents.len() > EXTENTS_IN_INODE {
            return Ok(());
        }
        let b = self
            .files
            .get_mut(&ino)
            .expect("exists")
            .tree_blocks
            .pop()
            .expect("one block");
        self.stats.freed_extents += 1;
        match self.cfg.discard {
            DiscardMode::Journal => self.freed_uncommitted.push((b, 1)),
            DiscardMode::Online => {
                self.release(b, 1);
                self.stats.trim_commands += 1;
                self.stats.discarded_bytes += BLOCK;
                self.dev.io(Command::trim(b * BLOCK, BLOCK))?;
            }
            DiscardMode::Deferred => {
                self.release(b, 1);
                self.deferred.push((b, 1));
            }
            DiscardMode::None | DiscardMode::VTrim | DiscardMode::FTrim => self.release(b, 1),
        }
        Ok(())
    }

    /// mballoc-style preallocation (fs/ext4/mballoc.c), for `n` blocks ending at logical
    /// block `end`: a file of at most [`STREAM_REQUEST_BLOCKS`] (by the larger of `end` and
    /// its size) takes its blocks from the locality-group window shared by all small files
    /// (`ext4_mb_group_or_file`, [`GROUP_PREALLOC_BLOCKS`]); a larger one from a window of
    /// its own that runs from its end to the end of its size bucket
    /// (`ext4_mb_normalize_request`: 16 KiB, 32 KiB, ... 1 MiB, then 2, 4 or 8 MiB
    /// aligned), so concurrent writers get few, growing extents instead of one per write —
    /// unless no handle has it open for writing and the request runs to its size: then
    /// exactly its blocks, where mballoc's scan puts them ([`SimFs::alloc_unnormalized`],
    /// [`SimFs::set_host_view`]).
    pub(super) fn alloc_preallocated(
        &mut self,
        ino: Ino,
        goal: Option<u64>,
        n: u64,
        end: u64,
    ) -> Result<Vec<(u64, u64)>, SimfsError> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        // Each serving from a window is one allocation, as each is one `ext4_map_blocks`
        // call in ext4 (the pieces are merged when mapped).
        let push = |runs: &mut Vec<(u64, u64)>, s: u64, k: u64| runs.push((s, k));
        let mut remaining = n;
        let file = &self.files[&ino];
        let file_blocks: u64 = file.extents.iter().map(|e| e.len as u64).sum();
        // The size mballoc judges by: with a host view, the larger of the request's end and
        // i_size (ext4_mb_group_or_file); without one, the blocks the file will hold, as
        // simfs always did for its direct callers.
        let (size, isize_blocks, closed_to_end) = match file.host {
            Some(h) => {
                let isize_blocks = h.size_bytes.div_ceil(BLOCK);
                // "No point in using inode preallocation for closed files" (the file
                // system taken as not busy: ext4_fs_is_busy counts lock contention).
                let closed = end == isize_blocks && !h.open_for_write;
                (end.max(isize_blocks), isize_blocks, closed)
            }
            None => (file_blocks + n, 0, false),
        };
        let small = size <= STREAM_REQUEST_BLOCKS;
        if closed_to_end
            && file.pa.is_none()
            && (!small || !self.cfg.kernel.closed_small_files_share_group_window())
        {
            // EXT4_MB_HINT_NOPREALLOC: exactly its blocks, not normalised.
            return self.alloc_unnormalized(ino, goal, n);
        }
        if small {
            // A small file: carved from the locality-group window.
            while remaining > 0 {
                if let Some((s, l)) = self.lg_pa {
                    let k = l.min(remaining);
                    push(&mut runs, s, k);
                    self.lg_pa = (l > k).then_some((s + k, l - k));
                    remaining -= k;
                    continue;
                }
                // A new locality-group window: 512 blocks (a power of two) from the
                // file's goal's group, no exact goal (`ext4_mb_normalize_group_request`).
                let goal_group = self.goal_group(ino, goal);
                match self.place_window(ino, None, GROUP_PREALLOC_BLOCKS, false, goal_group) {
                    Some((start, len)) => {
                        self.take(start, len);
                        self.lg_pa = Some((start, len));
                    }
                    None => {
                        runs.extend(self.alloc(goal, remaining)?);
                        remaining = 0;
                    }
                }
            }
            return Ok(runs);
        }
        while remaining > 0 {
            if let Some((s, l)) = self.files[&ino].pa {
                let k = l.min(remaining);
                push(&mut runs, s, k);
                self.files.get_mut(&ino).expect("exists").pa = (l > k).then_some((s + k, l - k));
                remaining -= k;
                continue;
            }
            if closed_to_end {
                // The window of its own ran out: the rest is a request of a closed file to
                // its end (EXT4_MB_HINT_NOPREALLOC), exactly its blocks.
                let from = runs.last().map(|r| r.0 + r.1).or(goal);
                runs.extend(self.alloc_unnormalized(ino, from, remaining)?);
                break;
            }
            let have: u64 = file_blocks + runs.iter().map(|r| r.1).sum::<u64>();
            // The size bucket is chosen by the larger of the request's end and i_size
            // (ext4_mb_normalize_request); the window runs to that bucket's end.
            let window = normalized_window_sized(have, remaining, isize_blocks);
            // Merged with the file's last block if the whole window is free after it,
            // else where the file's stream goal finds one ([`SimFs::place_window`]).
            let merge_at = runs.last().map(|r| r.0 + r.1).or(goal);
            let goal_group = self.goal_group(ino, merge_at);
            let placed = (window <= self.bitmap.free_blocks())
                .then(|| self.place_window(ino, merge_at, window, true, goal_group))
                .flatten();
            match placed {
                Some((start, len)) => {
                    self.take(start, len);
                    self.files.get_mut(&ino).expect("exists").pa = Some((start, len));
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

    /// Creates a file of `size_bytes` made of `extents` runs with a free block between
    /// neighbours (a fragmented file on purpose, like paper 002's 10 MB file of 160
    /// extents), and writes its data.
    pub fn create_fragmented(
        &mut self,
        name: &str,
        size_bytes: u64,
        extents: u32,
    ) -> Result<Ino, SimfsError> {
        if self.cfg.zoned.is_some() {
            return Err(SimfsError::Invalid(
                "a fragmented file leaves gaps between its extents, which a zoned drive's write pointers cannot: not on a zoned file system".into(),
            ));
        }
        let blocks = size_bytes.div_ceil(BLOCK);
        if blocks == 0 {
            return Err(SimfsError::Invalid(format!(
                "a fragmented file of {size_bytes} bytes has no blocks to spread: give it at least one block ({BLOCK} bytes)"
            )));
        }
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
            let handle = self.handle_of_file(ino);
            self.dev
                .io(Command::write(at * BLOCK, n * BLOCK).on_handle(handle))?;
            lblk += n as u32;
            at += n + 1;
        }
        let f = self.files.get_mut(&ino).expect("just created");
        f.size_bytes = size_bytes;
        Ok(ino)
    }

    /// Builds the extent tree of `extents` over `blocks` (as many as
    /// [`tree_blocks_needed`]): the root for the inode and the nodes to write.
    pub(super) fn build_tree(extents: &[Extent], blocks: &[u64]) -> (Node, Vec<(u64, Node)>) {
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
}

/// What a hole is filled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fill {
    /// A write's own blocks (a direct write, or simfs's callers writing without a host).
    Write,
    /// A writeback's mapping ([`SimFs::map_for_writeback`]), converted later.
    Writeback,
    /// fallocate: one run first, unnormalised.
    Fallocate,
}

/// The window `ext4_mb_normalize_request` reserves for a file of `have` blocks asking for
/// `want` more: from its end to the end of the size bucket its new size falls in (16 KiB
/// up to 1 MiB by powers of two; then 2, 4 or 8 MiB, aligned in the file). A request
/// that runs past the window's end gets the window, and the rest is a request of its own
/// (ext4_mb_normalize_request: "fe_len can be relaxed"; `ext4_mb_use_inode_pa` gives it
/// what the window holds, and ext4's writeback maps the rest with another call); only a
/// request of more than 8 MiB past 8 MiB gets exactly itself (the function's last case).
#[cfg(test)]
fn normalized_window(have: u64, want: u64) -> u64 {
    normalized_window_sized(have, want, 0)
}

/// [`normalized_window`] with the bucket chosen by the larger of the file's new size and
/// `isize` blocks (its `i_size`, which a page cache runs ahead of the blocks allocated):
/// the window still starts at the file's end, and it is not stretched to `isize` beyond
/// the bucket.
pub(super) fn normalized_window_sized(have: u64, want: u64, isize: u64) -> u64 {
    let size = (have + want).max(isize);
    let blocks_per_mib = (1 << 20) / BLOCK;
    if size > 8 * blocks_per_mib && want > PREALLOC_MAX_BLOCKS {
        return want;
    }
    let end = if size <= blocks_per_mib {
        size.next_power_of_two().max(4)
    } else {
        let bucket = if size <= 4 * blocks_per_mib {
            2 * blocks_per_mib
        } else if size <= 8 * blocks_per_mib {
            4 * blocks_per_mib
        } else {
            PREALLOC_MAX_BLOCKS
        };
        // The bucket-aligned stretch of the file that holds its first new block.
        (have / bucket + 1) * bucket
    };
    end - have
}

#[cfg(test)]
mod tests {
    use super::{normalized_window, normalized_window_sized};

    #[test]
    fn i_size_picks_the_bucket_but_does_not_stretch_the_window() {
        // 8 blocks written back of a file whose i_size is 40 blocks: the 64-block bucket.
        assert_eq!(normalized_window_sized(0, 8, 40), 64);
        // 128 blocks of a 64 MiB file: the 8 MiB bucket from the file's end, not 64 MiB.
        assert_eq!(normalized_window_sized(0, 128, 16384), 2048);
        // No i_size ahead of the blocks: as before.
        assert_eq!(normalized_window_sized(20, 2, 0), normalized_window(20, 2));
    }

    #[test]
    fn windows_run_to_the_end_of_ext4_s_size_buckets() {
        // 20 blocks asking for 2: the 128 KiB bucket (32 blocks) ends 10 blocks on.
        assert_eq!(normalized_window(20, 2), 12);
        // 200 blocks + 2: the 1 MiB bucket (256 blocks).
        assert_eq!(normalized_window(200, 2), 56);
        // 300 blocks: past 1 MiB, 2 MiB-aligned stretches (512 blocks).
        assert_eq!(normalized_window(300, 2), 212);
        assert_eq!(normalized_window(600, 2), 424);
        // Past 4 MiB: 4 MiB stretches; past 8 MiB: 8 MiB ones.
        assert_eq!(normalized_window(1100, 2), 2048 - 1100);
        assert_eq!(normalized_window(2100, 2), 4096 - 2100);
        // A request past its bucket's end gets the bucket's window; the rest asks again.
        assert_eq!(normalized_window(0, 854), 512);
        assert_eq!(normalized_window(512, 342), 512);
        // More than 8 MiB asked for past 8 MiB: exactly that.
        assert_eq!(normalized_window(0, 5000), 5000);
    }
}
