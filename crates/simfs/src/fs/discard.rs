//! Discards: the journal-time discard of blocks freed since the last commit (ext4's
//! `-o discard`: at the commit, or by a background worker after it), and fstrim.

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
        if self.cfg.kernel.worker() {
            let freed = std::mem::take(&mut self.freed_uncommitted);
            let runs = if self.cfg.kernel.merges_with_search_parent_only() {
                entries_merged_with_search_parent(freed, bpg)
            } else {
                merge_runs_in_freeing_order(freed, bpg)
            };
            for &(s, l) in &runs {
                self.release(s, l);
            }
            if self.discard_queue.is_empty() && self.discard_in_flight.is_none() {
                self.worker_free_at_ns = self.worker_free_at_ns.max(self.dev.now_ns());
            }
            self.discard_queue.extend(runs);
            self.run_discard_worker()?;
            return Ok(0);
        }
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
                if self.cfg.kernel.to_free_run_end() {
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

    /// The discard worker ([`DiscardKernel::worker`], ext4's `ext4_discard_work`) catches
    /// up with the host's clock: each queued run, in turn, once the TRIM before it has
    /// completed, is trimmed from its first block still free (to the end of that free run
    /// from Linux 6.8, [`DiscardKernel::to_free_run_end`], else to the end of the free part),
    /// its used blocks skipped (`ext4_try_to_trim_range`); the TRIM's blocks are held as
    /// used while it is in flight (`ext4_trim_extent`). A TRIM is issued at the time the
    /// worker would have issued it, in the background: the host's clock does not move.
    pub(crate) fn run_discard_worker(&mut self) -> Result<(), SimfsError> {
        if !self.cfg.kernel.worker() {
            return Ok(());
        }
        let now = self
            .worker_clock_override
            .unwrap_or_else(|| self.dev.now_ns());
        let bpg = self.cfg.blocks_per_group as u64;
        loop {
            if let Some((s, l, done)) = self.discard_in_flight {
                if done > now {
                    return Ok(());
                }
                self.unhold(s, l);
                self.discard_in_flight = None;
                self.worker_free_at_ns = self.worker_free_at_ns.max(done);
            }
            let Some((s, l)) = self.discard_queue.pop_front() else {
                return Ok(());
            };
            let Some(b) = self.bitmap.next_free(s).filter(|&b| b < s + l) else {
                continue; // all of it allocated again before the worker came to it
            };
            let within = self.bitmap.free_run_len(b, s + l - b);
            if b + within < s + l {
                // The rest of the run, past blocks allocated again: trimmed next.
                self.discard_queue
                    .push_front((b + within, s + l - b - within));
            }
            let n = if self.cfg.kernel.to_free_run_end() {
                let group_end = (b / bpg + 1) * bpg;
                self.bitmap.free_run_len(b, group_end - b)
            } else {
                within
            };
            self.hold(b, n);
            self.stats.trim_commands += 1;
            self.stats.discarded_bytes += n * BLOCK;
            let done = self
                .dev
                .io_background(Command::trim(b * BLOCK, n * BLOCK), self.worker_free_at_ns)?;
            self.discard_in_flight = Some((b, n, done));
        }
    }

    /// Runs the discard worker until it has nothing left (a file system that stays
    /// mounted until its discards are done); the host's clock does not move. Returns when
    /// the last TRIM completes (0 if there was none).
    pub fn finish_discards(&mut self) -> Result<u64, SimfsError> {
        let mut last = 0;
        while let Some((s, l, done)) = self.discard_in_flight {
            last = done;
            if self.discard_queue.is_empty() {
                self.unhold(s, l);
                self.discard_in_flight = None;
                self.worker_free_at_ns = self.worker_free_at_ns.max(done);
                break;
            }
            // Let the worker run as if the host's clock were at this TRIM's completion.
            let now = self.dev.now_ns();
            self.worker_clock_override = Some(done.max(now));
            let r = self.run_discard_worker();
            self.worker_clock_override = None;
            r?;
        }
        Ok(last)
    }

    /// Drops the worker's queue and completes its TRIM in flight: ext4 skips online
    /// discards while an allocation waits for free space (`s_retry_alloc_pending`), and
    /// gives the blocks of the TRIM in flight back when it completes.
    pub(crate) fn drop_discards(&mut self) {
        self.discard_queue.clear();
        if let Some((s, l, done)) = self.discard_in_flight.take() {
            self.unhold(s, l);
            self.worker_free_at_ns = self.worker_free_at_ns.max(done);
        }
    }

    /// Marks free blocks used for the worker's TRIM (not an allocation: the on-disk bitmap
    /// and the allocation cursor stay as they are).
    fn hold(&mut self, start: u64, len: u64) {
        self.allocator.on_take(start, len);
        self.set_used(start, len);
    }

    fn unhold(&mut self, start: u64, len: u64) {
        self.allocator.on_release(start, len);
        self.set_free(start, len);
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

/// The runs one commit frees as ext4's discard list holds them: adjacent runs within a
/// block group merged (`ext4_try_merge_freed_extent`), split at group boundaries, in the
/// order they were freed, a merged run at the place of its newest piece.
pub(super) fn merge_runs_in_freeing_order(
    runs: Vec<(u64, u64)>,
    blocks_per_group: u64,
) -> Vec<(u64, u64)> {
    let mut pieces: Vec<(u64, u64, usize)> = Vec::with_capacity(runs.len());
    for (i, (s, l)) in runs.into_iter().enumerate() {
        let mut b = s;
        while b < s + l {
            let end = (s + l).min((b / blocks_per_group + 1) * blocks_per_group);
            pieces.push((b, end - b, i));
            b = end;
        }
    }
    pieces.sort_unstable();
    let mut merged: Vec<(u64, u64, usize)> = Vec::with_capacity(pieces.len());
    for (s, l, i) in pieces {
        match merged.last_mut() {
            Some(last) if last.0 + last.1 == s && s % blocks_per_group != 0 => {
                last.1 += l;
                last.2 = last.2.max(i);
            }
            _ => merged.push((s, l, i)),
        }
    }
    merged.sort_by_key(|&(s, _, i)| (i, s));
    merged.into_iter().map(|(s, l, _)| (s, l)).collect()
}

/// The entries one commit's freed runs make in Linux 6.17 and later, in list order: per
/// block group, each run merged only with the entry its tree search ends at
/// ([`crate::freed::FreedTree`]).
pub(super) fn entries_merged_with_search_parent(
    runs: Vec<(u64, u64)>,
    blocks_per_group: u64,
) -> Vec<(u64, u64)> {
    let mut trees: BTreeMap<u64, crate::freed::FreedTree> = BTreeMap::new();
    let mut seq = 0;
    for (s, l) in runs {
        let mut b = s;
        while b < s + l {
            let end = (s + l).min((b / blocks_per_group + 1) * blocks_per_group);
            trees
                .entry(b / blocks_per_group)
                .or_default()
                .free_merging_with_parent(b, end - b, seq);
            seq += 1;
            b = end;
        }
    }
    let mut entries: Vec<(u64, u64, u64)> = trees.values().flat_map(|t| t.entries()).collect();
    entries.sort_unstable();
    entries.into_iter().map(|(_, s, l)| (s, l)).collect()
}
