//! The ext4-like block allocation (a file's goal, else next-fit from a cursor) and the
//! bookkeeping every allocation and release goes through.

use super::*;

impl<D: BlockDev> SimFs<D> {
    /// Allocates `n` blocks: ext4-like, continuing at `goal` where it is free, else
    /// next-fit; log-structured, at the log head.
    pub(crate) fn alloc(
        &mut self,
        goal: Option<u64>,
        n: u64,
    ) -> Result<Vec<(u64, u64)>, SimfsError> {
        if self.allocator.out_of_place() {
            return self.alloc_log(n);
        }
        if self.bitmap.free_blocks() < n && !self.freed_uncommitted.is_empty() && !self.committing {
            self.sync()?; // as in fill_holes: the commit gives freed blocks back
        }
        if self.bitmap.free_blocks() < n {
            self.drop_discards(); // as in fill_holes
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
        self.allocator.on_take(start, len);
        self.bitmap.set_used(start, len);
        self.cursor = start + len;
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }

    pub(crate) fn release(&mut self, start: u64, len: u64) {
        self.allocator.on_release(start, len);
        self.bitmap.set_free(start, len);
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }
}
