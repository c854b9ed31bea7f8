//! The file system's consistency check (tests and every simulation's end).

use super::*;

impl<D: BlockDev> SimFs<D> {
    /// Consistency check (for tests): every file's extents are sorted and disjoint, every
    /// block a file or tree uses is marked used and belongs to one owner only, and the
    /// used count equals the file-system metadata plus all files' blocks.
    pub fn check_invariants(&self) -> Result<(), String> {
        let counted =
            super::layout::group_free_counts(&self.bitmap, self.cfg.blocks_per_group as u64);
        if counted != self.group_free {
            return Err(format!(
                "the groups' free blocks and runs kept ({:?}) are not the bitmap's ({counted:?})",
                self.group_free
            ));
        }
        for (g, &kept) in self.largest_order.iter().enumerate() {
            let now = self.largest_free_order_afresh(g as u32);
            if kept != super::alloc::STALE_ORDER && kept != now {
                return Err(format!(
                    "group {g}'s largest free buddy order kept ({kept}) is not its bitmap's ({now})"
                ));
            }
        }
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
        let in_flight = self.discard_in_flight.map(|(s, l, _)| (s, l));
        for &(s, l) in self
            .freed_uncommitted
            .iter()
            .chain(&self.lg_pa)
            .chain(&in_flight)
        {
            for b in s..s + l {
                claim(b, 0)?;
            }
        }
        // Zoned: the latest copy of each metadata block, and each zone's blocks past its
        // capacity, are used too.
        for (&home, &b) in &self.meta_copies {
            if self.log().owner_lblk[b as usize] != crate::lfs::META_BLOCK
                || self.log().owner_ino[b as usize] as u64 != home
            {
                return Err(format!(
                    "block {b} should hold metadata block {home}, its owner says otherwise"
                ));
            }
            claim(b, 0)?;
        }
        let meta = self.metadata_blocks;
        let used = self.bitmap.blocks() - self.bitmap.free_blocks();
        if used != meta + owner.len() as u64 {
            return Err(format!(
                "{used} blocks used, but metadata ({meta}) and files ({}) account for {}",
                owner.len(),
                meta + owner.len() as u64
            ));
        }
        if self.allocator.policy() != self.cfg.alloc {
            return Err(format!(
                "allocator {} under a file system configured {}",
                self.allocator.policy(),
                self.cfg.alloc
            ));
        }
        self.allocator.check(&self.bitmap)?;
        Ok(())
    }
}
