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
        self.make_room(n)?;
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

    /// Frees room for `n` blocks if the free space lacks it (a commit gives freed blocks
    /// back, as ext4's `ext4_should_retry_alloc`; then pending discards are dropped), or
    /// says there is none.
    fn make_room(&mut self, n: u64) -> Result<(), SimfsError> {
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
        Ok(())
    }

    /// Allocates `n` blocks of `ino` as ext4 does a request it neither normalises nor
    /// preallocates for (`EXT4_MB_HINT_NOPREALLOC`: a closed file written back to its
    /// size): no exact goal is tried (`EXT4_MB_HINT_TRY_GOAL` is set only by the
    /// normalisation this request skips); mballoc's regular allocator scans from the goal's
    /// group ([`SimFs::mballoc_scan`]) and takes the whole request from the start of the
    /// extent it chose, or that extent's length if it is shorter, then asks again for the
    /// rest. The goal's group: the group after the last extent, or for an empty file the
    /// second group of its inode's flex group (`ext4_inode_to_goal_block` under
    /// delalloc: `block_group &= ~(flex_size-1); if (S_ISREG(inode->i_mode))
    /// block_group++;`, flex groups of [`FLEX_BG_GROUPS`]). Log-structured: at the log head.
    pub(crate) fn alloc_unnormalized(
        &mut self,
        ino: Ino,
        goal: Option<u64>,
        n: u64,
    ) -> Result<Vec<(u64, u64)>, SimfsError> {
        if self.allocator.out_of_place() {
            return self.alloc_log(n);
        }
        self.make_room(n)?;
        let groups = self
            .bitmap
            .blocks()
            .div_ceil(self.cfg.blocks_per_group as u64) as u32;
        let goal_group = self.goal_group(ino, goal);
        let mut out = Vec::new();
        let mut remaining = n;
        while remaining > 0 {
            let (start, len) = self
                .mballoc_scan(goal_group, groups, remaining)
                .expect("free blocks were counted");
            let len = len.min(remaining);
            self.take(start, len);
            out.push((start, len));
            remaining -= len;
        }
        Ok(out)
    }

    /// The group of `ino`'s allocation goal: the group of `goal` (the block after its last
    /// extent), or for an empty file the second group of its inode's flex group
    /// (`ext4_inode_to_goal_block` under delalloc: `block_group &= ~(flex_size-1); if
    /// (S_ISREG(inode->i_mode)) block_group++;`, flex groups of [`FLEX_BG_GROUPS`]).
    pub(crate) fn goal_group(&self, ino: Ino, goal: Option<u64>) -> u32 {
        let groups = self.group_free.len() as u32;
        match goal {
            Some(b) => self.group_of_block(b),
            None => {
                let inode_group = (ino - 1) / self.sb.inodes_per_group;
                (inode_group & !(FLEX_BG_GROUPS - 1)) + 1
            }
        }
        .min(groups - 1)
    }

    /// mballoc's regular allocator for a request of `n` blocks that is not a power of two
    /// (fs/ext4/mballoc.c, `ext4_mb_regular_allocator` from criterion 1): for each
    /// criterion in turn the groups from `goal_group` on, wrapping, that it finds good
    /// (`ext4_mb_good_group`: 1, the group's free blocks over its free fragments at least
    /// `n`; 2, at least `n` free; 3, any free), each scanned from its first free block
    /// (`ext4_mb_complex_scan_group`) in the extents the buddy cuts its free runs into
    /// (`mb_find_extent`, [`buddy_extent_len`]). Each extent seen is measured
    /// (`ext4_mb_measure_extent`): one of exactly `n` is taken at once; else the best so
    /// far is the longest while none holds `n`, then the shortest that does; once one
    /// holds `n`, the best is taken after [`MB_MIN_TO_SCAN`] extents seen or at the end of
    /// the group; after [`MB_MAX_TO_SCAN`] the best is taken whatever it is
    /// (`ext4_mb_check_limits`). The count runs over groups and criteria. Not modelled:
    /// `mb_optimize_scan`'s order of groups by fragment size (on from 16 groups; the goal
    /// group is still scanned first), and buddies not yet loaded. Returns (start, length
    /// of the extent chosen); `None` only if nothing is free.
    fn mballoc_scan(&self, goal_group: u32, groups: u32, n: u64) -> Option<(u64, u64)> {
        let bpg = self.cfg.blocks_per_group as u64;
        let blocks = self.bitmap.blocks();
        let mut found = 0u32;
        let mut best: Option<(u64, u64)> = None;
        for criterion in 1..=3 {
            for k in 0..groups {
                let g = (goal_group + k) % groups;
                let (lo, hi) = (g as u64 * bpg, ((g as u64 + 1) * bpg).min(blocks));
                let (free, fragments) = self.group_free[g as usize];
                let good = match criterion {
                    1 => fragments > 0 && free / fragments >= n,
                    2 => free >= n,
                    _ => free > 0,
                };
                if !good {
                    continue;
                }
                let mut b = lo;
                while let Some(s) = self.bitmap.next_free(b).filter(|&s| s < hi) {
                    let end = s + self.bitmap.free_run_len(s, hi - s);
                    let mut at = s;
                    while at < end {
                        let len = buddy_extent_len(at - lo, s - lo, end - lo, n);
                        found += 1;
                        if len == n {
                            return Some((at, len));
                        }
                        let better = match best {
                            None => true,
                            Some((_, b_len)) if b_len < n => len > b_len,
                            Some((_, b_len)) => len > n && len < b_len,
                        };
                        if better {
                            best = Some((at, len));
                        }
                        if found > MB_MAX_TO_SCAN {
                            return best;
                        }
                        if best.is_some_and(|(_, l)| l >= n) && found > MB_MIN_TO_SCAN {
                            return best;
                        }
                        at += len;
                    }
                    b = end;
                }
                if best.is_some_and(|(_, l)| l >= n) {
                    return best;
                }
            }
        }
        best
    }

    /// Where mballoc puts a preallocation window of `window` blocks for `ino`
    /// (`ext4_mb_regular_allocator` for a normalised request): at `merge_at` if the whole
    /// window is free there (the block after the file's last one: `ext4_mb_normalize_request`
    /// sets `EXT4_MB_HINT_TRY_GOAL` to merge left, and `ext4_mb_find_by_goal` takes the goal
    /// only if all of the window fits); else, for a `stream` file (one of more than
    /// [`STREAM_REQUEST_BLOCKS`]), from the group its stream goal last allocated in
    /// (`s_mb_last_groups[ino % n]`), for a small file's locality-group window from
    /// `goal_group`: a window of a power of two blocks the first buddy of the lowest order
    /// that holds it in the first group that has one ([`SimFs::p2_aligned_scan`],
    /// `CR_POWER2_ALIGNED`), else (or any other length) the regular scan's extent
    /// ([`SimFs::mballoc_scan`]), which may be shorter than the window. A stream
    /// allocation moves its goal to the group it allocated in (`ext4_mb_use_best_found`).
    /// Not modelled: `CR_BEST_AVAIL_LEN`'s trimmed lengths (6.5 on) and 6.17's choice of
    /// groups by fragment size for the regular scan. `None` only if nothing is free.
    pub(crate) fn place_window(
        &mut self,
        ino: Ino,
        merge_at: Option<u64>,
        window: u64,
        stream: bool,
        goal_group: u32,
    ) -> Option<(u64, u64)> {
        let groups = self.group_free.len() as u32;
        let at_goal = merge_at.filter(|&m| {
            m < self.bitmap.blocks()
                && !self.bitmap.is_used(m)
                && self.bitmap.free_run_len(m, window) >= window
        });
        let hash = (ino as usize) % self.stream_goals.len();
        let found = match at_goal {
            Some(m) => Some((m, window)),
            None => {
                let from = if stream {
                    self.stream_goals[hash]
                } else {
                    goal_group
                };
                let p2 = window.is_power_of_two() && window >= 1 << (ORDER2_REQS - 1);
                let order = window.trailing_zeros();
                match (p2 && order <= MAX_BUDDY_ORDER)
                    .then(|| self.p2_aligned_scan(from, window, order))
                    .flatten()
                {
                    Some(b) => Some((b, window)),
                    None => self
                        .mballoc_scan(from, groups, window)
                        .map(|(b, len)| (b, len.min(window))),
                }
            }
        };
        if let (true, Some((b, _))) = (stream, found) {
            self.stream_goals[hash] = self.group_of_block(b);
        }
        found
    }

    /// `CR_POWER2_ALIGNED`: the first block of a free buddy of order `order` or more (the
    /// lowest order the group has, the lowest such buddy: `ext4_mb_simple_scan_group`) for
    /// a window of `window` = 2^`order` blocks, in the first group that passes
    /// `ext4_mb_good_group`'s test for it ([`SimFs::p2_good_group`]). The groups' order:
    /// from `goal_group` on, wrapping; under Linux 6.17's rules on a file system of 16
    /// groups or more (`mb_optimize_scan`'s default, `MB_DEFAULT_LINEAR_SCAN_THRESHOLD`),
    /// after the first four groups in order on a rotational device
    /// (`s_mb_max_linear_groups`), the group whose largest free buddy is the smallest that
    /// holds the window, the first such from where the scan stands, then wrapping
    /// (`ext4_mb_scan_groups_p2_aligned` over the `s_mb_largest_free_orders` xarrays).
    /// Kernels 5.13 to 6.16 keep those lists in the order groups joined them; they are
    /// taken as in order from the goal here.
    fn p2_aligned_scan(&mut self, goal_group: u32, window: u64, order: u32) -> Option<u64> {
        let groups = self.group_free.len() as u32;
        let by_order =
            self.cfg.kernel.chooses_groups_by_free_order() && groups >= OPTIMIZE_SCAN_GROUPS;
        let linear = if !by_order {
            groups
        } else if self.cfg.rotational {
            ROTATIONAL_LINEAR_GROUPS.min(groups)
        } else {
            0
        };
        for k in 0..linear {
            let g = (goal_group + k) % groups;
            if self.p2_good_group(g, window, order) {
                return self.simple_scan_group(g, order);
            }
        }
        if !by_order {
            return None;
        }
        let start = (goal_group + linear) % groups;
        for range in [start..groups, 0..start] {
            let mut best: Option<(u8, u32)> = None;
            for g in range {
                if self.p2_good_group(g, window, order) {
                    let o = self.largest_free_order(g);
                    if best.is_none_or(|(b, _)| o < b) {
                        best = Some((o, g));
                    }
                }
            }
            if let Some((_, g)) = best {
                return self.simple_scan_group(g, order);
            }
        }
        None
    }

    /// `ext4_mb_good_group` for `CR_POWER2_ALIGNED`: the group has free blocks, at least
    /// the window's, a free buddy of the window's order or more, and is not the first of
    /// its flex group ("avoid using the first bg of a flexgroup for data files": flex
    /// groups of [`FLEX_BG_GROUPS`], at least `EXT4_FLEX_SIZE_DIR_ALLOC_SCHEME`, 4).
    fn p2_good_group(&mut self, g: u32, window: u64, order: u32) -> bool {
        let (free, runs) = self.group_free[g as usize];
        if free == 0 || runs == 0 || g.is_multiple_of(FLEX_BG_GROUPS) || free < window {
            return false;
        }
        let largest = self.largest_free_order(g);
        largest != NO_FREE_ORDER && largest as u32 >= order
    }

    /// Group `g`'s largest free buddy order (`NO_FREE_ORDER` if it has no free block),
    /// worked out again only after the group changed.
    fn largest_free_order(&mut self, g: u32) -> u8 {
        let cached = self.largest_order[g as usize];
        if cached != STALE_ORDER {
            return cached;
        }
        let largest = self.largest_free_order_afresh(g);
        self.largest_order[g as usize] = largest;
        largest
    }

    /// Group `g`'s largest free buddy order from its bitmap (`NO_FREE_ORDER` if none).
    pub(crate) fn largest_free_order_afresh(&self, g: u32) -> u8 {
        let mut largest = NO_FREE_ORDER;
        self.for_each_buddy(g, |_, o| {
            if largest == NO_FREE_ORDER || o as u8 > largest {
                largest = o as u8;
            }
            false
        });
        largest
    }

    /// `ext4_mb_simple_scan_group`: the first block of the lowest-addressed free buddy of
    /// the lowest order at or above `order` that group `g` has.
    fn simple_scan_group(&self, g: u32, order: u32) -> Option<u64> {
        let mut best: Option<(u32, u64)> = None;
        self.for_each_buddy(g, |b, o| {
            if o >= order && best.is_none_or(|(bo, _)| o < bo) {
                best = Some((o, b));
            }
            o == order // none lower to find
        });
        best.map(|(_, b)| b)
    }

    /// Calls `f(first block, order)` for group `g`'s free buddies in block order (its free
    /// runs cut into the largest chunks aligned to their size from the group's start, up
    /// to 2^[`MAX_BUDDY_ORDER`] blocks: what mballoc's buddy bitmaps hold) until it
    /// returns true.
    fn for_each_buddy(&self, g: u32, mut f: impl FnMut(u64, u32) -> bool) {
        let bpg = self.cfg.blocks_per_group as u64;
        let (lo, hi) = (
            g as u64 * bpg,
            ((g as u64 + 1) * bpg).min(self.bitmap.blocks()),
        );
        let mut b = lo;
        while let Some(s) = self.bitmap.next_free(b).filter(|&s| s < hi) {
            let end = s + self.bitmap.free_run_len(s, hi - s);
            let mut at = s;
            while at < end {
                let off = at - lo;
                let aligned = if off == 0 {
                    MAX_BUDDY_ORDER
                } else {
                    off.trailing_zeros()
                };
                let fits = 63 - (end - at).leading_zeros();
                let o = aligned.min(fits).min(MAX_BUDDY_ORDER);
                if f(at, o) {
                    return;
                }
                at += 1 << o;
            }
            b = end;
        }
    }

    /// Marks `[start, start + len)` used (free before), keeping each group's counts: in
    /// each group it lies in, the free run it came from loses those blocks and is cut in
    /// up to two.
    pub(crate) fn set_used(&mut self, start: u64, len: u64) {
        self.bitmap.set_used(start, len);
        self.recount(start, len, false);
    }

    /// Marks `[start, start + len)` free (used before), keeping each group's counts.
    pub(crate) fn set_free(&mut self, start: u64, len: u64) {
        self.bitmap.set_free(start, len);
        self.recount(start, len, true);
    }

    /// The group counts after `[start, start + len)` changed (to free if `freed`): per
    /// group piece, its blocks, and the runs it joined (free neighbours inside the group).
    fn recount(&mut self, start: u64, len: u64, freed: bool) {
        let bpg = self.cfg.blocks_per_group as u64;
        let mut s = start;
        while s < start + len {
            let g = s / bpg;
            let (lo, hi) = (g * bpg, ((g + 1) * bpg).min(self.bitmap.blocks()));
            let e = (start + len).min(hi);
            let left = s > lo && !self.bitmap.is_used(s - 1);
            let right = e < hi && !self.bitmap.is_used(e);
            self.largest_order[g as usize] = STALE_ORDER;
            let (free, runs) = &mut self.group_free[g as usize];
            // Freed: one run more, less each free neighbour it joins. Taken: the reverse.
            let joined = left as u64 + right as u64;
            if freed {
                *free += e - s;
                *runs = *runs + 1 - joined;
            } else {
                *free -= e - s;
                *runs = *runs + joined - 1;
            }
            s = e;
        }
    }

    pub(crate) fn take(&mut self, start: u64, len: u64) {
        self.allocator.on_take(start, len);
        self.set_used(start, len);
        self.cursor = start + len;
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }

    pub(crate) fn release(&mut self, start: u64, len: u64) {
        self.allocator.on_release(start, len);
        self.set_free(start, len);
        for g in self.group_of_block(start)..=self.group_of_block(start + len - 1) {
            self.dirty_groups.insert(g);
        }
    }
}

/// Flex groups of 16 block groups: mke2fs's default `flex_bg` size (mke2fs.conf(5)).
const FLEX_BG_GROUPS: u32 = 16;

/// [`SimFs::largest_order`] of a group not asked since it changed, and of one with no
/// free block.
pub(crate) const STALE_ORDER: u8 = u8::MAX;
const NO_FREE_ORDER: u8 = u8::MAX - 1;

/// `mb_optimize_scan` is on by default from this many groups
/// (`MB_DEFAULT_LINEAR_SCAN_THRESHOLD`, fs/ext4/mballoc.h).
const OPTIMIZE_SCAN_GROUPS: u32 = 16;

/// Groups scanned in order from the goal first on a rotational device
/// (`MB_DEFAULT_LINEAR_LIMIT`; 0 on a non-rotational one).
const ROTATIONAL_LINEAR_GROUPS: u32 = 4;

/// mballoc serves a power-of-two request from its buddies when `fls(len)` is at least
/// this (`MB_DEFAULT_ORDER2_REQS`): windows of 2 blocks or more.
const ORDER2_REQS: u32 = 2;

/// How many stream goals mballoc keeps: under Linux 6.17's rules one per CPU up to one
/// per four groups (`s_mb_nr_global_goals = umin(num_possible_cpus(),
/// DIV_ROUND_UP(s_groups_count, 4))`), before them one.
pub(crate) fn stream_goal_count(cfg: &FsConfig, groups: u32) -> u32 {
    if cfg.kernel.stream_goal_per_cpu() {
        cfg.host_cpus.min(groups.div_ceil(4)).max(1)
    } else {
        1
    }
}

/// mballoc's `s_mb_min_to_scan` and `s_mb_max_to_scan` defaults (fs/ext4/mballoc.h,
/// `MB_DEFAULT_MIN_TO_SCAN` 10, `MB_DEFAULT_MAX_TO_SCAN` 200).
const MB_MIN_TO_SCAN: u32 = 10;
const MB_MAX_TO_SCAN: u32 = 200;

/// Largest buddy order of a group (chunks of up to 2^13 blocks with 4 KiB blocks:
/// `blocksize_bits + 1`).
const MAX_BUDDY_ORDER: u32 = 13;

/// The length of the free extent `mb_find_extent` finds at group block `at` inside the
/// free run `[run_start, run_end)` for a request of `needed` blocks: the rest of the
/// largest aligned free chunk (buddy) holding `at`, then whole buddies after it while it
/// is shorter than `needed` and the run goes on. Buddies are aligned to their size from
/// the group's start and lie wholly inside the run.
pub(crate) fn buddy_extent_len(at: u64, run_start: u64, run_end: u64, needed: u64) -> u64 {
    // The largest free aligned chunk holding block `b` (which is free).
    let chunk = |b: u64| -> (u64, u64) {
        (0..=MAX_BUDDY_ORDER)
            .rev()
            .map(|k| (b & !((1u64 << k) - 1), 1u64 << k))
            .find(|&(c, size)| c >= run_start && c + size <= run_end)
            .expect("a free block is a chunk of one")
    };
    let (c, size) = chunk(at);
    let mut end = c + size;
    while end - at < needed && end < run_end {
        let (_, next) = chunk(end);
        end += next;
    }
    end - at
}

#[cfg(test)]
mod tests {
    use super::buddy_extent_len;

    #[test]
    fn the_buddy_cuts_free_runs_in_aligned_chunks() {
        // A run of 100 free blocks from the group's start: 64, then 32, then 4.
        assert_eq!(buddy_extent_len(0, 0, 100, 22), 64);
        assert_eq!(buddy_extent_len(64, 0, 100, 22), 32);
        assert_eq!(buddy_extent_len(96, 0, 100, 22), 4);
        // From an unaligned block: 1 (3), 4 (4-7), 8 (8-15), 8 (16-23), 4 (24-27): 25 >= 22.
        assert_eq!(buddy_extent_len(3, 3, 30, 22), 25);
        // Short of the request at the run's end: all that is left.
        assert_eq!(buddy_extent_len(3, 3, 20, 22), 17);
        // An exact hole of 22 at an odd place is 22.
        assert_eq!(buddy_extent_len(101, 101, 123, 22), 22);
        // No chunk beyond 2^13 blocks.
        assert_eq!(buddy_extent_len(0, 0, 32768, 20000), 24576);
    }
}
