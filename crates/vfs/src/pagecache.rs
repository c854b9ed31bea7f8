//! The host's page cache in virtual time: which 4 KiB pages of which file are cached,
//! which are dirty and since when, and which runs of dirty pages writeback sends next.
//! Pure bookkeeping: [`crate::SimVfs`] issues the I/O it decides.
//!
//! Defaults are Linux's (Documentation/admin-guide/sysctl/vm.rst): background writeback
//! starts when dirty pages pass `dirty_background_ratio` (10%) of memory, writers are
//! throttled past `dirty_ratio` (20%), the flusher wakes every
//! `dirty_writeback_centisecs` (5 s) and writes back pages dirty for longer than
//! `dirty_expire_centisecs` (30 s). Writeback goes file by file in ascending offset,
//! merging adjacent pages into requests of at most 1,280 KiB (block/blk-settings.c:
//! BLK_DEF_MAX_SECTORS_CAP, 2,560 sectors).

use simfs::fs::Ino;
use std::collections::{BTreeMap, BTreeSet};

/// The page size.
pub const PAGE_BYTES: u64 = 4096;

/// The host path's settings; [`HostConfig::linux`] gives Linux's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// Buffered I/O goes through the page cache (off: every call reaches the drive at
    /// once, as with O_DIRECT).
    pub page_cache: bool,
    /// Memory the dirty limits are a share of, and the most the cache holds.
    pub ram_bytes: u64,
    /// Background writeback starts above this share of `ram_bytes` (percent).
    pub dirty_background_ratio: u64,
    /// Writers are throttled above this share (percent).
    pub dirty_ratio: u64,
    /// Pages dirty for longer than this are written back by the flusher.
    pub dirty_expire_ns: u64,
    /// The flusher wakes this often.
    pub writeback_interval_ns: u64,
    /// The largest request writeback sends.
    pub max_request_bytes: u64,
    /// The most a readahead window grows to, in pages (`read_ahead_kb`, 128 KiB:
    /// mm/readahead.c, VM_READAHEAD_PAGES); 0: no readahead.
    pub read_ahead_pages: u64,
    /// The journal commits this often (ext4's `commit=`, 5 s: Documentation/admin-guide/
    /// ext4.rst); with journal discards, freed extents are discarded after it. 0: only
    /// at syncs.
    pub journal_commit_ns: u64,
    /// When not empty, the journal commits once the file system has sent this many data
    /// requests (reads and writes, counted from when measuring starts), instead of every
    /// `journal_commit_ns`: a real run's commits replayed at the same progress (a
    /// capture's `jbd2_end_commit` events against its requests).
    pub journal_commit_after_requests: Vec<u64>,
    /// When not empty, the journal commits once this many files have been unlinked
    /// (counted from when measuring starts), instead of on a timer or after requests: a
    /// real run's commits replayed at the same points among its deletes (a capture's
    /// `jbd2_commit_locking` events, where each commit closes its transaction, against its
    /// `ext4_unlink_enter` events), so that each commit discards what the same deletes
    /// freed whatever the model's pace. Counted over the whole run, not per repetition:
    /// the model must delete the files the real run did.
    pub journal_commit_after_unlinks: Vec<u64>,
    /// The most requests in flight on the drive (32: SATA NCQ, `ATA_MAX_QUEUE` in
    /// include/linux/libata.h; NVMe queues are deeper); 0: no limit.
    pub queue_depth: usize,
    /// The device's own dirty limits (the bdi's `strict_limit`, as `capture --host-ram`
    /// runs the real captures on a machine larger than the host modelled): the writer
    /// starts background writeback only once the dirty pages pass the free-run ceiling,
    /// halfway between the background and the hard limit (mm/page-writeback.c,
    /// `balance_dirty_pages` under `strictlimit`: the wb's counts against
    /// `dirty_freerun_ceiling`; its closing check against the global background limit
    /// never fires on the larger machine), or the flusher's periodic wake-up finds the
    /// background limit passed (`wb_check_background_flush`); off, the background limit
    /// starts it (a host of this memory, its global limits). Once started it goes on
    /// while the background limit is passed (`wb_over_bg_thresh`). As in 6.18's source
    /// (Jan Kara's ea6813be07dc moved the background kick, against the global counts,
    /// into the throttling loop; under `strictlimit` the free-run test uses the wb's
    /// dirty and writeback pages).
    pub strict_limit: bool,
    /// The flusher's own time per page it writes back (the kernel's work of mapping the
    /// pages, allocating their blocks and building the requests, and on a loop device its
    /// worker's copying): a background batch ends once this time or the drive's taking of
    /// its requests passes 100 ms, so it bounds the pages a batch writes however fast the
    /// drive is. 0 (the default): only the drive's queue bounds a batch. tempfiles-pg sets
    /// it from its capture: 100 ms over the most pages the real kernel wrote back in any
    /// 100 ms.
    pub flusher_ns_per_page: u64,
}

impl HostConfig {
    /// Linux's defaults with `ram_bytes` of memory.
    pub fn linux(ram_bytes: u64) -> HostConfig {
        HostConfig {
            page_cache: true,
            ram_bytes,
            dirty_background_ratio: 10,
            dirty_ratio: 20,
            dirty_expire_ns: 30_000_000_000,
            writeback_interval_ns: 5_000_000_000,
            max_request_bytes: 1280 << 10,
            journal_commit_ns: 5_000_000_000,
            journal_commit_after_requests: Vec::new(),
            journal_commit_after_unlinks: Vec::new(),
            read_ahead_pages: crate::readahead::DEFAULT_MAX_PAGES,
            queue_depth: 32,
            strict_limit: false,
            flusher_ns_per_page: 0,
        }
    }

    /// Files opened with O_DIRECT on Linux: no page cache (every call reaches the drive
    /// when made), but the journal still commits every 5 s.
    pub fn direct_io() -> HostConfig {
        HostConfig {
            page_cache: false,
            ..HostConfig::linux(0)
        }
    }

    /// No page cache and no timed journal commits: every call goes to the drive when it
    /// is made, metadata at syncs: O_DIRECT on a raw device (paper 001's path), or simfs
    /// as it was before the host path.
    pub fn uncached() -> HostConfig {
        HostConfig {
            page_cache: false,
            journal_commit_ns: 0,
            ..HostConfig::linux(0)
        }
    }

    pub fn background_limit_pages(&self) -> u64 {
        self.ram_bytes / PAGE_BYTES * self.dirty_background_ratio / 100
    }

    pub fn hard_limit_pages(&self) -> u64 {
        self.ram_bytes / PAGE_BYTES * self.dirty_ratio / 100
    }

    /// Where a writer starts background writeback ([`HostConfig::strict_limit`]).
    pub fn background_start_pages(&self) -> u64 {
        if self.strict_limit {
            (self.background_limit_pages() + self.hard_limit_pages()) / 2
        } else {
            self.background_limit_pages()
        }
    }

    /// The most of one file's dirty pages the flusher writes before it moves on to the
    /// next file (fs/fs-writeback.c, `writeback_chunk_size` for background and periodic
    /// work: the least of half the device's write bandwidth a second and the dirty limit
    /// over `DIRTY_SCOPE`, plus `MIN_WRITEBACK_PAGES`, rounded down to a multiple of it).
    /// Half a second of any drive's writing is more than the dirty limit's share here, so
    /// the limit decides: 28 MiB for a 1 GiB host, 4 MiB for a host of 160 MiB or less.
    pub fn writeback_chunk_pages(&self) -> u64 {
        let pages = self.hard_limit_pages() / DIRTY_SCOPE + MIN_WRITEBACK_PAGES;
        pages / MIN_WRITEBACK_PAGES * MIN_WRITEBACK_PAGES
    }
}

/// A run of pages to write back: (file, first page, pages).
pub type Run = (Ino, u64, u64);

/// Linux's smallest writeback chunk: `MIN_WRITEBACK_PAGES`, 4 MiB (fs/fs-writeback.c).
pub const MIN_WRITEBACK_PAGES: u64 = (4 << 20) / PAGE_BYTES;

/// `DIRTY_SCOPE` (mm/internal.h, 8): the writeback chunk is at most the dirty limit over it.
const DIRTY_SCOPE: u64 = 8;

/// Cached pages of the files.
#[derive(Debug, Clone, Default)]
pub struct PageCache {
    /// Dirty pages in (file, page) order, with the time each was first dirtied.
    dirty: BTreeMap<(Ino, u64), u64>,
    /// Each dirty file's oldest dirty time (writeback takes the oldest file first), and
    /// its place in the order files became dirty (files dirtied at the same time keep that
    /// order, as the kernel's `b_dirty` list does; simfs reuses inode numbers).
    file_dirtied: BTreeMap<Ino, (u64, u64)>,
    /// The same, ordered by that time, then that place: the order writeback takes files in.
    files_by_age: BTreeSet<(u64, u64, Ino)>,
    /// The next file to become dirty gets this place.
    next_dirty_seq: u64,
    /// Clean cached pages, and their last use (for eviction, least recent first).
    clean: BTreeMap<(Ino, u64), u64>,
    by_use: BTreeSet<(u64, Ino, u64)>,
    tick: u64,
    capacity_pages: u64,
    /// Pages a background read is bringing in, and when they arrive.
    arriving: BTreeMap<(Ino, u64), u64>,
}

impl PageCache {
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache {
            capacity_pages: capacity_bytes / PAGE_BYTES,
            ..PageCache::default()
        }
    }

    pub fn dirty_pages(&self) -> u64 {
        self.dirty.len() as u64
    }

    /// Dirty pages of one file.
    pub fn dirty_pages_of(&self, ino: Ino) -> u64 {
        self.dirty.range((ino, 0)..(ino + 1, 0)).count() as u64
    }

    fn touch(&mut self, ino: Ino, page: u64) {
        self.tick += 1;
        if let Some(old) = self.clean.insert((ino, page), self.tick) {
            self.by_use.remove(&(old, ino, page));
        }
        self.by_use.insert((self.tick, ino, page));
    }

    fn forget_clean(&mut self, ino: Ino, page: u64) {
        if let Some(t) = self.clean.remove(&(ino, page)) {
            self.by_use.remove(&(t, ino, page));
        }
    }

    /// Evicts the least recently used clean pages while the cache is over capacity.
    fn evict(&mut self) {
        while self.dirty.len() as u64 + self.clean.len() as u64 > self.capacity_pages {
            let Some(&(t, ino, page)) = self.by_use.iter().next() else {
                break;
            };
            self.by_use.remove(&(t, ino, page));
            self.clean.remove(&(ino, page));
        }
    }

    /// Pages `first..end` of `ino` were written at `now_ns`.
    pub fn write(&mut self, ino: Ino, first: u64, end: u64, now_ns: u64) {
        for p in first..end {
            self.forget_clean(ino, p);
            self.dirty.entry((ino, p)).or_insert(now_ns);
        }
        if let std::collections::btree_map::Entry::Vacant(e) = self.file_dirtied.entry(ino) {
            let seq = self.next_dirty_seq;
            self.next_dirty_seq += 1;
            e.insert((now_ns, seq));
            self.files_by_age.insert((now_ns, seq, ino));
        }
        self.evict();
    }

    /// The runs of pages of `first..end` that are not cached.
    pub fn missing(&self, ino: Ino, first: u64, end: u64) -> Vec<(u64, u64)> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for p in first..end {
            if self.dirty.contains_key(&(ino, p)) || self.clean.contains_key(&(ino, p)) {
                continue;
            }
            match runs.last_mut() {
                Some((s, n)) if *s + *n == p => *n += 1,
                _ => runs.push((p, 1)),
            }
        }
        runs
    }

    /// Pages `first..end` of `ino` are cached (read from the drive, or hit).
    pub fn cached(&mut self, ino: Ino, first: u64, end: u64) {
        for p in first..end {
            if !self.dirty.contains_key(&(ino, p)) {
                self.touch(ino, p);
            }
        }
        self.evict();
    }

    /// Pages `first..end` of `ino` are being read in the background and arrive at
    /// `ready_ns` (they count as cached; a reader waits for them).
    pub fn arriving(&mut self, ino: Ino, first: u64, end: u64, ready_ns: u64) {
        for p in first..end {
            self.arriving.insert((ino, p), ready_ns);
        }
        self.cached(ino, first, end);
    }

    /// When pages `first..end` of `ino` are all there (0 if none is still arriving);
    /// forgets their arrival times.
    pub fn ready_at(&mut self, ino: Ino, first: u64, end: u64) -> u64 {
        let keys: Vec<(Ino, u64)> = self
            .arriving
            .range((ino, first)..(ino, end))
            .map(|(&k, _)| k)
            .collect();
        keys.iter()
            .filter_map(|k| self.arriving.remove(k))
            .max()
            .unwrap_or(0)
    }

    /// Takes dirty pages `pages` (now being written back) as clean.
    fn clean_pages(&mut self, pages: &[(Ino, u64)]) {
        for &(ino, p) in pages {
            self.dirty.remove(&(ino, p));
            self.touch(ino, p);
        }
        let files: BTreeSet<Ino> = pages.iter().map(|&(i, _)| i).collect();
        for ino in files {
            self.refresh_file(ino);
        }
        self.evict();
    }

    /// Merges (file, page) pairs, each file's in ascending order, into runs of adjacent
    /// pages of one file, of at most `max_pages`.
    fn runs(pages: &[(Ino, u64)], max_pages: u64) -> Vec<Run> {
        let mut out: Vec<Run> = Vec::new();
        for &(ino, p) in pages {
            match out.last_mut() {
                Some((i, s, n)) if *i == ino && *s + *n == p && *n < max_pages => *n += 1,
                _ => out.push((ino, p, 1)),
            }
        }
        out
    }

    /// Every dirty page of `ino`, as runs to write back (they count as clean from now).
    pub fn take_file(&mut self, ino: Ino, max_pages: u64) -> Vec<Run> {
        let pages: Vec<(Ino, u64)> = self
            .dirty
            .range((ino, 0)..(ino + 1, 0))
            .map(|(&k, _)| k)
            .collect();
        self.clean_pages(&pages);
        Self::runs(&pages, max_pages)
    }

    /// The periodic flush as Linux's flusher does it (`wb_check_old_data_flush`,
    /// `move_expired_inodes`): every file first dirtied at `cutoff_ns` or earlier, oldest
    /// first, in chunks of `chunk_pages` a file a pass, until none of them is dirty (the
    /// pages they dirtied later included).
    pub fn take_expired_files(
        &mut self,
        cutoff_ns: u64,
        chunk_pages: u64,
        max_pages: u64,
    ) -> Vec<Run> {
        self.take_files(&[], cutoff_ns, chunk_pages, max_pages)
    }

    /// [`PageCache::take_expired_files`] with `first` before the expired files (the files
    /// a background pass queued and has not reached, and those it requeued: the kernel's
    /// periodic flush works through `b_io` and `b_more_io` first, whatever their age).
    pub fn take_files(
        &mut self,
        first: &[Ino],
        cutoff_ns: u64,
        chunk_pages: u64,
        max_pages: u64,
    ) -> Vec<Run> {
        let mut files: Vec<Ino> = first.to_vec();
        let seen: BTreeSet<Ino> = first.iter().copied().collect();
        files.extend(
            self.files_by_age
                .iter()
                .take_while(|&&(t, _, _)| t <= cutoff_ns)
                .map(|&(_, _, ino)| ino)
                .filter(|ino| !seen.contains(ino)),
        );
        let pages = self.in_chunks(&files, chunk_pages, u64::MAX);
        self.clean_pages(&pages);
        Self::runs(&pages, max_pages)
    }

    /// The dirty files, oldest first dirtied first: the order background writeback
    /// queues them in (`queue_io` with `dirtied_before` = now for background work).
    pub fn dirty_files_by_age(&self) -> Vec<Ino> {
        self.files_by_age.iter().map(|&(_, _, ino)| ino).collect()
    }

    /// Up to `chunk_pages` of `ino`'s dirty pages, in offset order, as runs to write back
    /// (they count as clean from now): one file's turn in a writeback batch
    /// (`writeback_sb_inodes`, `wbc.nr_to_write = writeback_chunk_size(..)`).
    pub fn take_file_chunk(&mut self, ino: Ino, chunk_pages: u64, max_pages: u64) -> Vec<Run> {
        let pages = self.in_chunks(&[ino], chunk_pages, chunk_pages);
        self.clean_pages(&pages);
        Self::runs(&pages, max_pages)
    }

    /// Dirty pages of `files`, in passes over them in order, up to `chunk_pages` of a file
    /// a pass (in offset order), until `wanted` pages are taken (checked after each file)
    /// or none is left.
    fn in_chunks(&self, files: &[Ino], chunk_pages: u64, wanted: u64) -> Vec<(Ino, u64)> {
        let chunk = chunk_pages.max(1) as usize;
        let mut taken = vec![0usize; files.len()];
        let mut pages = Vec::new();
        let mut progress = true;
        while progress && (pages.len() as u64) < wanted {
            progress = false;
            for (k, &ino) in files.iter().enumerate() {
                if pages.len() as u64 >= wanted {
                    break;
                }
                let before = pages.len();
                let dirty = self.dirty.range((ino, 0)..(ino + 1, 0)).skip(taken[k]);
                pages.extend(dirty.take(chunk).map(|(&k, _)| k));
                taken[k] += pages.len() - before;
                progress |= pages.len() > before;
            }
        }
        pages
    }

    /// Forgets every page of `ino` (the file is gone: dirty pages are never written).
    pub fn drop_file(&mut self, ino: Ino) {
        self.truncate(ino, 0);
    }

    /// Forgets the pages of `ino` from `first_page` on.
    pub fn truncate(&mut self, ino: Ino, first_page: u64) {
        let dirty: Vec<(Ino, u64)> = self
            .dirty
            .range((ino, first_page)..(ino + 1, 0))
            .map(|(&k, _)| k)
            .collect();
        for k in dirty {
            self.dirty.remove(&k);
        }
        let clean: Vec<(Ino, u64)> = self
            .clean
            .range((ino, first_page)..(ino + 1, 0))
            .map(|(&k, _)| k)
            .collect();
        for (i, p) in clean {
            self.forget_clean(i, p);
            self.arriving.remove(&(i, p));
        }
        self.refresh_file(ino);
    }

    /// Recomputes `ino`'s oldest dirty time after pages left its dirty set.
    fn refresh_file(&mut self, ino: Ino) {
        let oldest = self
            .dirty
            .range((ino, 0)..(ino + 1, 0))
            .map(|(_, &t)| t)
            .min();
        let before = self.file_dirtied.remove(&ino);
        if let Some((t, seq)) = before {
            self.files_by_age.remove(&(t, seq, ino));
        }
        if let Some(t) = oldest {
            // A file still dirty keeps its place; one dirty again takes a new one.
            let seq = before.map_or_else(
                || {
                    self.next_dirty_seq += 1;
                    self.next_dirty_seq - 1
                },
                |(_, seq)| seq,
            );
            self.file_dirtied.insert(ino, (t, seq));
            self.files_by_age.insert((t, seq, ino));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writeback_merges_runs_oldest_file_first() {
        let mut c = PageCache::new(1 << 30);
        c.write(2, 0, 4, 100);
        c.write(1, 10, 12, 200);
        c.write(1, 12, 13, 300);
        c.write(2, 8, 9, 400);
        assert_eq!(c.dirty_pages(), 8);
        // File 2 was dirtied first: background writeback queues it first.
        assert_eq!(c.dirty_files_by_age(), vec![2, 1]);
        // Files dirtied at the same time keep the order they became dirty in.
        let mut tie = PageCache::new(1 << 30);
        tie.write(9, 0, 1, 500);
        tie.write(3, 0, 1, 500);
        assert_eq!(tie.dirty_files_by_age(), vec![9, 3]);
        // Its turn: its dirty pages in offset order, merged into runs.
        assert_eq!(c.take_file_chunk(2, 1024, 1024), vec![(2, 0, 4), (2, 8, 1)]);
        // Files first dirtied by 250: file 1, with the page it dirtied at 300.
        assert_eq!(
            c.take_expired_files(250, 1024, 2),
            vec![(1, 10, 2), (1, 12, 1)]
        );
        assert_eq!(c.dirty_pages(), 0);
        // Written-back pages stay cached.
        assert!(c.missing(2, 0, 4).is_empty());
        assert_eq!(c.missing(2, 3, 7), vec![(4, 3)]);
    }

    #[test]
    fn a_file_is_written_back_a_chunk_at_a_time() {
        let mut c = PageCache::new(1 << 30);
        c.write(1, 0, 10, 100);
        c.write(2, 0, 10, 200);
        // A turn takes at most a chunk of the file, from its first dirty page on.
        assert_eq!(c.take_file_chunk(1, 4, 1024), vec![(1, 0, 4)]);
        assert_eq!(c.take_file_chunk(1, 4, 2), vec![(1, 4, 2), (1, 6, 2)]);
        assert_eq!(c.take_file_chunk(1, 4, 1024), vec![(1, 8, 2)]);
        assert_eq!(c.take_file_chunk(1, 4, 1024), vec![]);
        assert_eq!(c.dirty_pages(), 10, "file 2 untouched");
        assert_eq!(c.dirty_files_by_age(), vec![2]);
        let mut big = PageCache::new(1 << 30);
        // An expired file goes whole, whatever its size.
        big.write(2, 0, 4096, 200);
        big.take_expired_files(1000, 1024, 1024);
        assert_eq!(big.dirty_pages(), 0);
    }

    #[test]
    fn the_writeback_chunk_follows_the_dirty_limit() {
        let gib = HostConfig::linux(1 << 30);
        assert_eq!(gib.writeback_chunk_pages() * PAGE_BYTES, 28 << 20);
        let small = HostConfig::linux(64 << 20);
        assert_eq!(small.writeback_chunk_pages(), MIN_WRITEBACK_PAGES);
    }

    #[test]
    fn clean_pages_are_evicted_least_recent_first_dirty_ones_never() {
        let mut c = PageCache::new(4 * PAGE_BYTES);
        c.cached(1, 0, 3);
        c.write(2, 0, 2, 0);
        assert_eq!(
            c.missing(1, 0, 3),
            vec![(0, 1)],
            "the least recent page went"
        );
        c.drop_file(2);
        assert_eq!(c.dirty_pages(), 0);
        assert_eq!(c.missing(2, 0, 2), vec![(0, 2)]);
    }
}
