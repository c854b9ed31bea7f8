//! The log-structured policy's work on the file system (F2FS-like): allocation at the log
//! head, segments opened and cleaned (live blocks moved and remapped), overwrites moved
//! out of place, freed blocks discarded at the next sync. The segment bookkeeping itself
//! is [`crate::lfs::LogState`].

use super::*;
use crate::lfs::{LogState, META_BLOCK, TREE_BLOCK};

impl<D: BlockDev> SimFs<D> {
    pub(super) fn log(&self) -> &LogState {
        self.allocator.log().expect("log-structured policy")
    }

    pub(super) fn log_mut(&mut self) -> &mut LogState {
        self.allocator.log_mut().expect("log-structured policy")
    }

    /// Opens a clean segment as the head, cleaning first when clean segments run low.
    pub(super) fn open_segment(&mut self) -> Result<(), SimfsError> {
        if !self.log().cleaning {
            let class = self.log().class;
            let mut guard = self.log().used.len();
            while self.log().clean <= self.log().reserve && guard > 0 {
                let cleaned = self.clean_one();
                // (Cleaning's copies go to their own log: come back to this one.)
                self.log_mut().switch_class(class);
                if !cleaned? {
                    break;
                }
                guard -= 1;
            }
            // Zoned: cleaning may have moved the head to a new zone it did not fill;
            // keep writing there rather than leave a zone open (and active) behind.
            let log = self.log();
            if let (true, Some(h)) = (log.zoned(), log.head) {
                if log.head_next < h * log.seg_blocks + log.seg_cap {
                    return Ok(());
                }
            }
        }
        let log = self.log();
        let from = log.head.map_or(0, |h| h + 1);
        let n = log.used.len() as u64;
        let next = (0..n)
            .map(|i| (from + i) % n)
            .find(|&s| !log.pinned[s as usize] && log.used[s as usize] == 0 && !log.is_head(s));
        match next {
            Some(s) => {
                // Zoned: a zone written since its last reset is reset before the head
                // writes it from its start again.
                if self.log().written.as_ref().is_some_and(|w| w[s as usize]) {
                    self.reset_zone(s)?;
                }
                let log = self.log_mut();
                log.head = Some(s);
                log.head_next = s * log.seg_blocks;
                Ok(())
            }
            None => Err(SimfsError::NoSpace {
                needed_blocks: self.log().seg_cap,
                free_blocks: self.bitmap.free_blocks(),
            }),
        }
    }

    /// Allocates `n` blocks at the log head.
    pub(crate) fn alloc_log(&mut self, n: u64) -> Result<Vec<(u64, u64)>, SimfsError> {
        if self.bitmap.free_blocks() < n {
            return Err(SimfsError::NoSpace {
                needed_blocks: n,
                free_blocks: self.bitmap.free_blocks(),
            });
        }
        let mark = self.log().allocating.len();
        let r = self.alloc_log_inner(n);
        self.log_mut().allocating.truncate(mark);
        r
    }

    fn alloc_log_inner(&mut self, n: u64) -> Result<Vec<(u64, u64)>, SimfsError> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut remaining = n;
        let class = self.alloc_class;
        while remaining > 0 {
            // (Cleaning started below may have made another log current.)
            self.log_mut().switch_class(class);
            let log = self.log();
            let seg_end = log.head.map_or(0, |h| h * log.seg_blocks + log.seg_cap);
            let start = match log.head {
                Some(_) => self
                    .bitmap
                    .next_free(log.head_next)
                    .filter(|&b| b < seg_end),
                None => None,
            };
            let Some(start) = start else {
                if let Err(e) = self.open_segment() {
                    self.log_mut().switch_class(class);
                    self.undo_alloc(&out);
                    return Err(e);
                }
                continue;
            };
            let len = self
                .bitmap
                .free_run_len(start, remaining.min(seg_end - start));
            debug_assert!(
                !self.log().zoned() || start == self.log().head_next,
                "a zone is written at its write pointer"
            );
            self.take(start, len);
            let log = self.log_mut();
            log.head_next = start + len;
            let head = log.head.expect("allocating at the head") as usize;
            if let Some(w) = log.written.as_mut() {
                w[head] = true;
            }
            // Its blocks have no owner until the allocation returns: cleaning, which the
            // rest of this allocation may start, must not take this segment as a victim.
            if log.allocating.last() != Some(&(head as u64)) {
                log.allocating.push(head as u64);
            }
            match out.last_mut() {
                Some(last) if last.0 + last.1 == start => last.1 += len,
                _ => out.push((start, len)),
            }
            remaining -= len;
        }
        Ok(out)
    }

    /// Gives back the blocks an allocation took before it failed (none is written yet):
    /// they would otherwise stay used with no owner. A head whose end was given back
    /// continues where its given-back blocks began, so a zone's next write is still at its
    /// write pointer; a zone left behind keeps its gap until it is cleaned and reset.
    fn undo_alloc(&mut self, runs: &[(u64, u64)]) {
        for &(s, l) in runs {
            self.release(s, l);
        }
        let log = self.log_mut();
        if let Some(h) = log.head {
            let (lo, hi) = (h * log.seg_blocks, h * log.seg_blocks + log.seg_cap);
            if let Some(first) = runs
                .iter()
                .map(|r| r.0)
                .filter(|&b| (lo..hi).contains(&b))
                .min()
            {
                log.head_next = log.head_next.min(first);
            }
        }
    }

    /// Removes the mapping of logical blocks `[first, end)` of `ino`; returns the physical
    /// runs that backed them.
    pub(crate) fn punch(&mut self, ino: Ino, first: u32, end: u32) -> Vec<(u64, u64)> {
        let f = self.files.get_mut(&ino).expect("caller checked the file");
        let mut kept = Vec::with_capacity(f.extents.len() + 1);
        let mut freed = Vec::new();
        for e in f.extents.drain(..) {
            let e_end = e.logical_block + e.len;
            if e_end <= first || e.logical_block >= end {
                kept.push(e);
                continue;
            }
            if e.logical_block < first {
                kept.push(flash::fslayout::Extent {
                    len: first - e.logical_block,
                    ..e
                });
            }
            let lo = e.logical_block.max(first);
            let hi = e_end.min(end);
            freed.push((
                e.start_block + (lo - e.logical_block) as u64,
                (hi - lo) as u64,
            ));
            if e_end > end {
                kept.push(flash::fslayout::Extent {
                    logical_block: end,
                    len: e_end - end,
                    start_block: e.start_block + (end - e.logical_block) as u64,
                });
            }
        }
        f.extents = kept;
        f.dirty = true;
        self.dirty_files.insert(ino);
        freed
    }

    /// Out-of-place overwrite: frees the blocks currently backing `[first, end)`, so the
    /// write allocates them anew at the head.
    pub(crate) fn relocate_on_write(
        &mut self,
        ino: Ino,
        first: u32,
        end: u32,
    ) -> Result<(), SimfsError> {
        for (p, n) in self.punch(ino, first, end) {
            self.release(p, n);
            self.log_mut().pending_discard.push((p, n));
        }
        Ok(())
    }

    /// Cleans the segment with the fewest live blocks; returns whether there was one.
    pub(super) fn clean_one(&mut self) -> Result<bool, SimfsError> {
        let log = self.log();
        let victim = (0..log.used.len())
            .filter(|&s| {
                !log.pinned[s]
                    && log.used[s] > 0
                    && !log.is_head(s as u64)
                    && !log.allocating.contains(&(s as u64))
            })
            .min_by_key(|&s| (log.used[s], s));
        let Some(victim) = victim else {
            return Ok(false);
        };
        let lo = victim as u64 * log.seg_blocks;
        let live: Vec<u64> = (lo..lo + log.seg_cap)
            .filter(|&b| self.bitmap.is_used(b))
            .collect();
        self.log_mut().cleaning = true;
        // Read the live blocks, in runs.
        for (s, n) in merge_runs(live.iter().map(|&b| (b, 1)).collect()) {
            self.stats.data_read_requests += 1;
            self.stats.data_read_bytes += n * BLOCK;
            self.dev.io(Command::read(s * BLOCK, n * BLOCK))?;
        }
        let result = self.move_blocks(&live);
        self.log_mut().cleaning = false;
        result?;
        self.stats.cleaned_segments += 1;
        self.stats.cleaned_blocks += live.len() as u64;
        Ok(true)
    }

    /// Moves `blocks` (live blocks of a victim segment) to the head and remaps their owners.
    pub(super) fn move_blocks(&mut self, blocks: &[u64]) -> Result<(), SimfsError> {
        // With several logs, cleaning's copies go to the coldest, as F2FS's garbage
        // collection moves data blocks to its cold data log (fs/f2fs/gc.c,
        // move_data_block: CURSEG_COLD_DATA).
        let saved = self.alloc_class;
        self.alloc_class = self.log().logs() - 1;
        let runs = self.alloc_log(blocks.len() as u64);
        self.alloc_class = saved;
        let runs = runs?;
        let targets: Vec<u64> = runs.iter().flat_map(|&(s, l)| s..s + l).collect();
        // Each copy keeps its owner's placement handle: (target block, handle).
        let mut copies: Vec<(u64, u16)> = Vec::with_capacity(blocks.len());
        for (&old, &new) in blocks.iter().zip(&targets) {
            let (ino, lblk) = (
                self.log().owner_ino[old as usize],
                self.log().owner_lblk[old as usize],
            );
            let handle = match self.cfg.placement {
                Some(p) if lblk == TREE_BLOCK => self.handle_of_hint(p.tree_hint),
                Some(p) if lblk == META_BLOCK => self.handle_of_hint(p.meta_hint),
                _ => self.handle_of_file(ino),
            };
            copies.push((new, handle));
            if lblk == META_BLOCK {
                // Zoned: the latest copy of a metadata block moves; `ino` is its home.
                self.meta_copies.insert(ino as u64, new);
                self.log_mut().set_owner(new, ino, META_BLOCK);
            } else if lblk == TREE_BLOCK {
                // The tree is rewritten at the next sync from its new place.
                if let Some(f) = self.files.get_mut(&ino) {
                    for b in f.tree_blocks.iter_mut().filter(|b| **b == old) {
                        *b = new;
                    }
                    f.dirty = true;
                    self.dirty_files.insert(ino);
                }
                self.log_mut().set_owner(new, ino, TREE_BLOCK);
            } else {
                self.punch(ino, lblk, lblk + 1);
                self.add_mapping(ino, lblk, &[(new, 1)]);
            }
            self.release(old, 1);
            self.log_mut().pending_discard.push((old, 1));
        }
        // One write per run of adjacent targets on one handle (without placement, the
        // runs the allocation gave).
        let mut writes: Vec<(u64, u64, u16)> = Vec::with_capacity(runs.len());
        for (new, handle) in copies {
            match writes.last_mut() {
                Some(w) if w.0 + w.1 == new && w.2 == handle => w.1 += 1,
                _ => writes.push((new, 1, handle)),
            }
        }
        let writes: Vec<(u64, u64, u16)> = writes
            .into_iter()
            .flat_map(|(s, l, h)| {
                self.split_at_zones(vec![(s, l)])
                    .into_iter()
                    .map(move |(s, l)| (s, l, h))
            })
            .collect();
        for (s, l, handle) in writes {
            self.stats.data_write_requests += 1;
            self.stats.data_write_bytes += l * BLOCK;
            self.dev
                .io(Command::write(s * BLOCK, l * BLOCK).on_handle(handle))?;
        }
        Ok(())
    }

    /// Sends the discards of blocks freed by overwrites and cleaning (those still free),
    /// per the discard mode: vTrim batches, TRIMs, or `fstrim`'s list when deferred.
    pub(crate) fn send_log_discards(&mut self) -> Result<(), SimfsError> {
        let pending = std::mem::take(&mut self.log_mut().pending_discard);
        if self.log().zoned() {
            // Zoned: no TRIMs of freed blocks; every written zone the log emptied is
            // reset now that the checkpoint no longer needs its blocks (F2FS resets a
            // zoned section once a checkpoint frees it).
            let log = self.log();
            let empty: Vec<u64> = (0..log.used.len())
                .filter(|&s| {
                    !log.pinned[s]
                        && log.used[s] == 0
                        && log.written.as_ref().is_some_and(|w| w[s])
                        && !log.is_head(s as u64)
                })
                .map(|s| s as u64)
                .collect();
            for s in empty {
                self.reset_zone(s)?;
            }
            return Ok(());
        }
        let mut runs = Vec::new();
        for (s, l) in merge_runs(pending) {
            let mut b = s;
            while b < s + l {
                if self.bitmap.is_used(b) {
                    b += 1;
                    continue;
                }
                let n = self.bitmap.free_run_len(b, s + l - b);
                runs.push((b, n));
                b += n;
            }
        }
        match self.cfg.discard {
            DiscardMode::None => {}
            DiscardMode::Deferred => self.deferred.extend(runs),
            DiscardMode::VTrim => {
                for chunk in runs.chunks(VTRIM_MAX_RANGES) {
                    let ranges: Vec<ByteRange> = chunk
                        .iter()
                        .map(|&(s, l)| ByteRange {
                            offset_bytes: s * BLOCK,
                            len_bytes: l * BLOCK,
                        })
                        .collect();
                    self.stats.vtrim_commands += 1;
                    self.stats.discarded_bytes += chunk.iter().map(|r| r.1 * BLOCK).sum::<u64>();
                    self.dev.io(Command::vtrim(self.command_page, ranges))?;
                }
            }
            // Log cleaning's frees are already discarded at the checkpoint's commit.
            DiscardMode::Online | DiscardMode::FTrim | DiscardMode::Journal => {
                for (s, l) in runs {
                    self.stats.trim_commands += 1;
                    self.stats.discarded_bytes += l * BLOCK;
                    self.dev.io(Command::trim(s * BLOCK, l * BLOCK))?;
                }
            }
        }
        Ok(())
    }

    /// Zoned: resets zone `s` (a TRIM of the whole zone, which the drive carries out as a
    /// zone reset) so its next write is at its start.
    pub(super) fn reset_zone(&mut self, s: u64) -> Result<(), SimfsError> {
        let zone_bytes = self.log().seg_blocks * BLOCK;
        self.stats.zone_resets += 1;
        self.dev.io(Command::trim(s * zone_bytes, zone_bytes))?;
        if let Some(w) = self.log_mut().written.as_mut() {
            w[s as usize] = false;
        }
        Ok(())
    }
}
