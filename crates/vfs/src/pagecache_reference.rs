//! The page cache as first written, on ordered maps keyed by (file, page): slow (a search
//! or two per page) but plain, kept for the tests as the reference the page cache must
//! agree with, call for call.

use crate::pagecache::{Run, PAGE_BYTES};
use simfs::fs::Ino;
use std::collections::{BTreeMap, BTreeSet};

/// Cached pages of the files.
#[derive(Debug, Clone, Default)]
pub(super) struct PageCache {
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
