//! Metadata write-back: extent-tree blocks, inode-table blocks and bitmaps written as
//! 4 KiB blocks whose bytes the drive keeps, at a file's sync or the journal-like commit.

use super::*;

impl<D: BlockDev> SimFs<D> {
    /// Writes metadata block `block`; `tree`: an extent-tree block (else an inode-table or
    /// bitmap block), for the placement handle it carries ([`HintPlacement`]).
    pub(super) fn write_meta(
        &mut self,
        block: u64,
        bytes: Vec<u8>,
        tree: bool,
    ) -> Result<u64, SimfsError> {
        self.stats.meta_write_requests += 1;
        let handle = match self.cfg.placement {
            Some(p) if tree => self.handle_of_hint(p.tree_hint),
            Some(p) => self.handle_of_hint(p.meta_hint),
            None => 0,
        };
        let mut at = block;
        if self.cfg.zoned.is_some() && !tree {
            // Zoned: copy on write into the log; the previous copy dies.
            self.alloc_class = self
                .cfg
                .placement
                .map_or(0, |p| self.log_of_hint(p.meta_hint));
            let runs = self.alloc_log(1);
            self.alloc_class = 0;
            let runs = runs?;
            at = runs[0].0;
            self.allocator
                .set_owner(at, block as Ino, crate::lfs::META_BLOCK);
            if let Some(old) = self.meta_copies.insert(block, at) {
                self.release(old, 1);
            }
        }
        self.dev
            .io(Command::write_data(at * BLOCK, Arc::from(bytes)).on_handle(handle))
    }

    /// Writes one file's extent tree (reusing its tree blocks where it can) and marks its
    /// inode-table block for write-back.
    pub(super) fn write_file_meta(&mut self, ino: Ino) -> Result<(), SimfsError> {
        let (n, mut blocks) = {
            let f = &self.files[&ino];
            (tree_blocks_needed(f.extents.len()), f.tree_blocks.clone())
        };
        if self.cfg.zoned.is_some() {
            // Zoned: the tree is written anew at the head (copy on write), never over
            // its old blocks.
            for b in blocks.drain(..) {
                self.release(b, 1);
            }
        }
        while blocks.len() > n {
            let b = blocks.pop().expect("longer than n");
            self.release(b, 1);
        }
        if blocks.len() < n {
            self.alloc_class = self
                .cfg
                .placement
                .map_or(0, |p| self.log_of_hint(p.tree_hint));
            let runs = self.alloc(None, (n - blocks.len()) as u64);
            self.alloc_class = 0;
            let runs = runs?;
            blocks.extend(runs.iter().flat_map(|&(s, l)| s..s + l));
        }
        for &b in &blocks {
            self.allocator.set_owner(b, ino, crate::lfs::TREE_BLOCK);
        }
        let (root, nodes) = Self::build_tree(&self.files[&ino].extents, &blocks);
        for (b, node) in nodes {
            let mut bytes = vec![0u8; BLOCK_BYTES];
            encode_node(&node, &mut bytes);
            self.write_meta(b, bytes, true)?;
        }
        let f = self.files.get_mut(&ino).expect("exists");
        f.tree_blocks = blocks;
        f.written_root = root;
        f.dirty = false;
        self.dirty_itable.insert(self.itable_block_of(ino));
        Ok(())
    }

    /// Encodes the inode-table block `block` from the in-memory inodes.
    pub(super) fn itable_bytes(&self, block: u64) -> Vec<u8> {
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

    pub(super) fn bitmap_bytes(&self, g: u32) -> (Vec<u8>, Vec<u8>) {
        let mut blocks = vec![0u8; BLOCK_BYTES];
        let bpg = self.cfg.blocks_per_group as u64;
        let start = g as u64 * bpg;
        // Whole bytes from the bitmap's words; a last partial byte bit by bit.
        let whole = (bpg / 8) as usize;
        self.bitmap.to_disk_bytes(start, &mut blocks[..whole]);
        for i in whole as u64 * 8..bpg {
            let b = start + i;
            if b >= self.bitmap.blocks() || self.bitmap.is_used(b) {
                blocks[(i / 8) as usize] |= 1 << (i % 8);
            }
        }
        let mut inodes = vec![0u8; BLOCK_BYTES];
        let ipg = self.sb.inodes_per_group as usize;
        let used = &self.inode_used[g as usize * ipg..(g as usize + 1) * ipg];
        for (byte, bits) in inodes.iter_mut().zip(used.chunks(8)) {
            *byte = bits
                .iter()
                .enumerate()
                .fold(0u8, |a, (k, &u)| a | (u8::from(u) << k));
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
            self.write_meta(b, bytes, false)?;
        }
        Ok(())
    }

    /// Writes back all dirty metadata (extent trees, inode tables, bitmaps), then flushes:
    /// a journal commit (in journal discard mode, the extents freed since the last commit
    /// are then freed and discarded).
    pub fn sync(&mut self) -> Result<u64, SimfsError> {
        self.run_discard_worker()?;
        self.committing = true;
        let done = self.commit_metadata();
        self.committing = false;
        let done = done?;
        if self.freed_uncommitted.is_empty() {
            return Ok(done);
        }
        Ok(done.max(self.discard_committed()?))
    }

    pub(super) fn commit_metadata(&mut self) -> Result<u64, SimfsError> {
        // The files marked dirty that still exist (a removed one may be in the set).
        // (Each leaves the set once written: after an error the rest are still in it.)
        let dirty: Vec<Ino> = self.dirty_files.iter().copied().collect();
        debug_assert_eq!(
            dirty
                .iter()
                .filter(|i| self.files.get(i).is_some_and(|f| f.dirty))
                .count(),
            self.files.values().filter(|f| f.dirty).count(),
            "every dirty file is in dirty_files"
        );
        for ino in dirty {
            if self.files.get(&ino).is_some_and(|f| f.dirty) {
                self.write_file_meta(ino)?;
            }
            self.dirty_files.remove(&ino);
        }
        for b in std::mem::take(&mut self.dirty_itable) {
            let bytes = self.itable_bytes(b);
            self.write_meta(b, bytes, false)?;
        }
        if self.allocator.out_of_place() {
            self.send_log_discards()?;
        }
        for g in std::mem::take(&mut self.dirty_groups) {
            let (blocks, inodes) = self.bitmap_bytes(g);
            let d = self.descs[g as usize];
            self.write_meta(d.block_bitmap as u64, blocks, false)?;
            self.write_meta(d.inode_bitmap as u64, inodes, false)?;
        }
        self.stats.flushes += 1;
        self.dev.io(Command::flush())
    }
}
