//! Discards: the journal-time discard of blocks freed since the last commit (ext4's
//! `-o discard`), and fstrim.

use super::*;

pub(super) fn range_bytes(start: u64, len: u64) -> ByteRange {
    ByteRange {
        offset_bytes: start * BLOCK,
        len_bytes: len * BLOCK,
    }
}

impl<D: BlockDev> SimFs<D> {
    /// Journal mode, after a commit: frees the runs freed since the last one and discards
    /// them, merged within their block group, one TRIM per run. Returns the completion time
    /// of the last TRIM (0 if none).
    pub(super) fn discard_committed(&mut self) -> Result<u64, SimfsError> {
        let bpg = self.cfg.blocks_per_group as u64;
        let mut done = 0;
        let runs = merge_runs(std::mem::take(&mut self.freed_uncommitted));
        // The commit's runs all go back to the free space first, then are discarded
        // (ext4_process_freed_data, then its discard work).
        for &(s, l) in &runs {
            self.release(s, l);
        }
        for (s, l) in runs {
            // Split at group boundaries: freed extents merge within a group only.
            let mut b = s;
            while b < s + l {
                let group_end = (b / bpg + 1) * bpg;
                let mut n = (s + l - b).min(group_end - b);
                if self.cfg.discard_to_free_run_end {
                    // On to the end of the free run, within the group: the same free space
                    // is discarded again for every run of the commit that lies in it.
                    n = self.bitmap.free_run_len(b, group_end - b).max(n);
                }
                self.stats.trim_commands += 1;
                self.stats.discarded_bytes += n * BLOCK;
                done = self.dev.io(Command::trim(b * BLOCK, n * BLOCK))?;
                b = (s + l).min(group_end);
            }
        }
        Ok(done)
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
