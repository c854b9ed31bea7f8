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

use rustc_hash::FxHashMap;
use simfs::fs::Ino;
use slotlist::SlotList;
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
///
/// A run makes millions of calls, each touching a few pages of one file, so a page's
/// state is found without a search: each file's pages are an array indexed by page number
/// (4 bytes a page, up to the highest page cached; dropped with the file), holding
/// whether the page is dirty or, if clean, its place in the least-recently-used list
/// ([`Lru`]: moving a page to its end or taking the least recent is a few stores). Only the
/// dirty pages are kept in order, per file: writeback takes them in offset order.
#[derive(Debug, Clone, Default)]
pub struct PageCache {
    /// Each file's cached pages.
    files: FxHashMap<Ino, FileCache>,
    /// The clean pages, least recently used first.
    lru: Lru,
    dirty_pages: u64,
    /// Each dirty file's oldest dirty time (writeback takes the oldest file first), and
    /// its place in the order files became dirty (files dirtied at the same time keep that
    /// order, as the kernel's `b_dirty` list does; simfs reuses inode numbers).
    file_dirtied: BTreeMap<Ino, (u64, u64)>,
    /// The same, ordered by that time, then that place: the order writeback takes files in.
    files_by_age: BTreeSet<(u64, u64, Ino)>,
    /// The next file to become dirty gets this place.
    next_dirty_seq: u64,
    capacity_pages: u64,
    /// Pages a background read is bringing in, and when they arrive.
    arriving: BTreeMap<(Ino, u64), u64>,
}

/// No page, or no slot.
const NONE: u32 = u32::MAX;
/// A dirty page's state in [`FileCache::pages`].
const DIRTY: u32 = u32::MAX - 1;

/// A file's cached pages.
#[derive(Debug, Clone, Default)]
struct FileCache {
    /// By page number: [`NONE`] (not cached), [`DIRTY`], or a clean page's slot in the
    /// [`Lru`].
    pages: Vec<u32>,
    /// Dirty pages in offset order, with the time each was first dirtied.
    dirty: BTreeMap<u64, u64>,
    /// Clean pages of the file.
    clean: u64,
}

impl FileCache {
    fn state(&self, page: u64) -> u32 {
        self.pages.get(page as usize).copied().unwrap_or(NONE)
    }

    fn set(&mut self, page: u64, state: u32) {
        let i = page as usize;
        if i >= self.pages.len() {
            self.pages.resize(i + 1, NONE);
        }
        self.pages[i] = state;
    }

    fn is_empty(&self) -> bool {
        self.clean == 0 && self.dirty.is_empty()
    }

    /// Page `page` (of file `ino`) was used now: unless dirty, it becomes the most
    /// recently used clean page.
    fn use_page(&mut self, lru: &mut Lru, ino: Ino, page: u64) {
        match self.state(page) {
            DIRTY => {}
            NONE => {
                let s = lru.push_back((ino, page));
                self.set(page, s);
                self.clean += 1;
            }
            s => lru.move_to_back(s),
        }
    }

    /// Forgets clean page `page`, held in slot `s`.
    fn forget_clean(&mut self, lru: &mut Lru, page: u64, s: u32) {
        lru.remove(s);
        self.pages[page as usize] = NONE;
        self.clean -= 1;
    }
}

/// The clean pages, from least to most recently used, each in a slot whose number
/// [`FileCache::pages`] keeps.
type Lru = SlotList<(Ino, u64)>;

impl PageCache {
    pub fn new(capacity_bytes: u64) -> PageCache {
        PageCache {
            capacity_pages: capacity_bytes / PAGE_BYTES,
            ..PageCache::default()
        }
    }

    pub fn dirty_pages(&self) -> u64 {
        self.dirty_pages
    }

    /// Dirty pages of one file.
    pub fn dirty_pages_of(&self, ino: Ino) -> u64 {
        self.files.get(&ino).map_or(0, |f| f.dirty.len() as u64)
    }

    /// Evicts the least recently used clean pages while the cache is over capacity.
    fn evict(&mut self) {
        while self.dirty_pages + self.lru.len() as u64 > self.capacity_pages {
            let Some(s) = self.lru.front() else { break };
            let (ino, page) = *self.lru.get(s);
            match self.files.get_mut(&ino) {
                Some(file) => {
                    file.forget_clean(&mut self.lru, page, s);
                    if file.is_empty() {
                        self.files.remove(&ino);
                    }
                }
                None => {
                    self.lru.remove(s);
                }
            }
        }
    }

    /// Pages `first..end` of `ino` were written at `now_ns`.
    pub fn write(&mut self, ino: Ino, first: u64, end: u64, now_ns: u64) {
        if first < end {
            let file = self.files.entry(ino).or_default();
            for p in first..end {
                match file.state(p) {
                    DIRTY => continue,
                    NONE => {}
                    s => file.forget_clean(&mut self.lru, p, s),
                }
                file.set(p, DIRTY);
                file.dirty.insert(p, now_ns);
                self.dirty_pages += 1;
            }
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
        let file = self.files.get(&ino);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for p in first..end {
            if file.is_some_and(|f| f.state(p) != NONE) {
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
        if first < end {
            let file = self.files.entry(ino).or_default();
            for p in first..end {
                file.use_page(&mut self.lru, ino, p);
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
            let file = self.files.entry(ino).or_default();
            if file.dirty.remove(&p).is_some() {
                file.pages[p as usize] = NONE;
                self.dirty_pages -= 1;
            }
            file.use_page(&mut self.lru, ino, p);
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
            .files
            .get(&ino)
            .map(|f| f.dirty.keys().map(|&p| (ino, p)).collect())
            .unwrap_or_default();
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
        // Where each entry of `files` goes on from: the page after the last it took.
        let mut from = vec![0u64; files.len()];
        let mut pages = Vec::new();
        let mut progress = true;
        while progress && (pages.len() as u64) < wanted {
            progress = false;
            for (k, &ino) in files.iter().enumerate() {
                if pages.len() as u64 >= wanted {
                    break;
                }
                let Some(file) = self.files.get(&ino) else {
                    continue;
                };
                let before = pages.len();
                let dirty = file.dirty.range(from[k]..).take(chunk);
                pages.extend(dirty.map(|(&p, _)| (ino, p)));
                if pages.len() > before {
                    from[k] = pages[pages.len() - 1].1 + 1;
                    progress = true;
                }
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
        if let Some(file) = self.files.get_mut(&ino) {
            self.dirty_pages -= file.dirty.split_off(&first_page).len() as u64;
            let from = (first_page as usize).min(file.pages.len());
            for p in from..file.pages.len() {
                let s = file.pages[p];
                if s != NONE && s != DIRTY {
                    file.forget_clean(&mut self.lru, p as u64, s);
                    self.arriving.remove(&(ino, p as u64));
                }
            }
            file.pages.truncate(from);
            if file.is_empty() {
                self.files.remove(&ino);
            }
        }
        self.refresh_file(ino);
    }

    /// Recomputes `ino`'s oldest dirty time after pages left its dirty set.
    fn refresh_file(&mut self, ino: Ino) {
        let oldest = self
            .files
            .get(&ino)
            .and_then(|f| f.dirty.values().copied().min());
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

    use crate::pagecache_reference as reference;

    /// One call to the page cache, on a few files and pages so that calls meet.
    #[derive(Debug, Clone)]
    enum Op {
        Write(Ino, u64, u64),
        Cached(Ino, u64, u64),
        Arriving(Ino, u64, u64),
        ReadyAt(Ino, u64, u64),
        Missing(Ino, u64, u64),
        TakeFile(Ino, u64),
        TakeFileChunk(Ino, u64, u64),
        TakeFiles(Vec<Ino>, u64, u64, u64),
        TakeExpiredFiles(u64, u64, u64),
        Truncate(Ino, u64),
        DropFile(Ino),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let ino = 1..5u32;
        let pages = (0..40u64, 0..12u64).prop_map(|(first, n)| (first, first + n));
        prop_oneof![
            4 => (ino.clone(), pages.clone()).prop_map(|(i, (f, e))| Op::Write(i, f, e)),
            3 => (ino.clone(), pages.clone()).prop_map(|(i, (f, e))| Op::Cached(i, f, e)),
            1 => (ino.clone(), pages.clone()).prop_map(|(i, (f, e))| Op::Arriving(i, f, e)),
            1 => (ino.clone(), pages.clone()).prop_map(|(i, (f, e))| Op::ReadyAt(i, f, e)),
            2 => (ino.clone(), pages.clone()).prop_map(|(i, (f, e))| Op::Missing(i, f, e)),
            1 => (ino.clone(), 1..8u64).prop_map(|(i, m)| Op::TakeFile(i, m)),
            2 => (ino.clone(), 1..10u64, 1..8u64).prop_map(|(i, c, m)| Op::TakeFileChunk(i, c, m)),
            1 => (proptest::collection::vec(ino.clone(), 0..4), 0..400u64, 1..10u64, 1..8u64)
                .prop_map(|(f, t, c, m)| Op::TakeFiles(f, t, c, m)),
            1 => (0..400u64, 1..10u64, 1..8u64).prop_map(|(t, c, m)| Op::TakeExpiredFiles(t, c, m)),
            1 => (ino.clone(), 0..40u64).prop_map(|(i, p)| Op::Truncate(i, p)),
            1 => ino.prop_map(Op::DropFile),
        ]
    }

    proptest::proptest! {
        /// Any sequence of calls gives the same answers, dirty counts and writeback order
        /// as the reference, on a cache small enough to evict.
        #[test]
        fn agrees_with_the_reference_call_for_call(
            ops in proptest::collection::vec(op(), 1..200),
            capacity_pages in 8..64u64,
        ) {
            let mut fast = PageCache::new(capacity_pages * PAGE_BYTES);
            let mut slow = reference::PageCache::new(capacity_pages * PAGE_BYTES);
            for (now, op) in ops.into_iter().enumerate() {
                let now = now as u64 * 10;
                match op {
                    Op::Write(i, f, e) => {
                        fast.write(i, f, e, now);
                        slow.write(i, f, e, now);
                    }
                    Op::Cached(i, f, e) => {
                        fast.cached(i, f, e);
                        slow.cached(i, f, e);
                    }
                    Op::Arriving(i, f, e) => {
                        fast.arriving(i, f, e, now);
                        slow.arriving(i, f, e, now);
                    }
                    Op::ReadyAt(i, f, e) => {
                        proptest::prop_assert_eq!(fast.ready_at(i, f, e), slow.ready_at(i, f, e));
                    }
                    Op::Missing(i, f, e) => {
                        proptest::prop_assert_eq!(fast.missing(i, f, e), slow.missing(i, f, e));
                    }
                    Op::TakeFile(i, m) => {
                        proptest::prop_assert_eq!(fast.take_file(i, m), slow.take_file(i, m));
                    }
                    Op::TakeFileChunk(i, c, m) => {
                        proptest::prop_assert_eq!(
                            fast.take_file_chunk(i, c, m),
                            slow.take_file_chunk(i, c, m)
                        );
                    }
                    Op::TakeFiles(first, t, c, m) => {
                        proptest::prop_assert_eq!(
                            fast.take_files(&first, t, c, m),
                            slow.take_files(&first, t, c, m)
                        );
                    }
                    Op::TakeExpiredFiles(t, c, m) => {
                        proptest::prop_assert_eq!(
                            fast.take_expired_files(t, c, m),
                            slow.take_expired_files(t, c, m)
                        );
                    }
                    Op::Truncate(i, p) => {
                        fast.truncate(i, p);
                        slow.truncate(i, p);
                    }
                    Op::DropFile(i) => {
                        fast.drop_file(i);
                        slow.drop_file(i);
                    }
                }
                proptest::prop_assert_eq!(fast.dirty_pages(), slow.dirty_pages());
                proptest::prop_assert_eq!(fast.dirty_files_by_age(), slow.dirty_files_by_age());
                for i in 1..5u32 {
                    proptest::prop_assert_eq!(fast.dirty_pages_of(i), slow.dirty_pages_of(i));
                    // Which pages are cached (eviction's choice included).
                    proptest::prop_assert_eq!(fast.missing(i, 0, 60), slow.missing(i, 0, 60));
                }
            }
        }
    }
}
