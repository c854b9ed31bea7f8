//! Files of simfs on a simulated drive, in virtual time: every open, read, write,
//! preallocation, sync, rename and removal is simfs's (so its allocation policy and
//! discard mode apply) and timed on the drive; the bytes themselves are kept here, since
//! the drive model keeps none.
//!
//! Syncs follow a journaling file system: `fsync` of any file commits everything (all
//! dirty metadata, then a flush), as one ext4 journal commit carries every pending change;
//! so does `sync_dir`, and [`Vfs::sync_files`] does it once for many files.
//!
//! The host path between the engine and simfs ([`HostConfig`]): with the page cache on,
//! buffered writes complete in memory and reach the drive at writeback (blocks are
//! allocated then: delayed allocation, so small appends become few large extents), when
//! the flusher finds pages older than the expiry, when dirty pages pass the background
//! limit (written in the background: the writer does not wait, later requests queue
//! behind them on the drive) or the hard limit (the writer waits), or at `fsync`; reads
//! hit cached pages; a file removed before writeback never reaches the drive; O_DIRECT
//! files bypass the cache. Sequential buffered reads grow a readahead window and request
//! the next one asynchronously ([`crate::readahead`]). Background requests (writeback,
//! readahead, the journal's timed commits and their discards) stay in flight together, up
//! to the drive's queue depth; a request finding the queue full waits for a slot, in
//! order. Without the cache ([`HostConfig::uncached`], what [`SimVfs::new`] gives) every
//! call reaches the drive when it is made. Not modelled: the journal's own blocks (a
//! commit writes the dirty metadata in place, then flushes) and request merging across
//! files in the block layer.

use crate::pagecache::{HostConfig, PageCache, Run, PAGE_BYTES};
use crate::readahead::{Readahead, Window};
use crate::{check_name, Fd, IoTime, OpenMode, Vfs, VfsError};
use flash::Device;
use simfs::fs::Ino;
use simfs::{SimFs, SimfsError, Timed};
use std::collections::{HashMap, HashSet};

/// simfs on a simulated drive, timed.
pub type SimDrive = SimFs<Timed<flash::AnyDevice>>;

/// Files of simfs on a simulated drive.
pub struct SimVfs {
    fs: SimDrive,
    /// Each inode's bytes.
    data: HashMap<Ino, crate::bytes::FileBytes>,
    fds: HashMap<Fd, Ino>,
    /// Open handles per inode (those with any).
    open_handles: HashMap<Ino, u32>,
    /// Handles open for writing, and how many each inode has (those with any): ext4's
    /// allocator asks whether a file is open for writing ([`SimFs::set_host_view`]).
    writer_fds: HashSet<Fd>,
    writers: HashMap<Ino, u32>,
    next_fd: Fd,
    io: IoTime,
    host: HostConfig,
    cache: PageCache,
    /// Handles opened with O_DIRECT (they bypass the cache).
    direct: HashSet<Fd>,
    /// Each buffered handle's readahead state.
    readahead: HashMap<Fd, Readahead>,
    /// The flusher's last wake-up, and the journal's last timed commit.
    flusher_ns: u64,
    journal_ns: u64,
    /// Data requests sent before measuring started, files unlinked since, and how many
    /// scheduled commits have been made since.
    requests_at_start: u64,
    unlinks: u64,
    scheduled_commits_done: usize,
    /// Writeback requests in flight: (completion time, pages), earliest first.
    writeback: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u64)>>,
    writeback_pages: u64,
    /// Background writeback's queues (fs/fs-writeback.c): the files still to be given a
    /// turn in this pass (`b_io`), and those given one that stayed dirty (`b_more_io`,
    /// written again once the pass is done).
    b_io: std::collections::VecDeque<Ino>,
    b_more_io: std::collections::VecDeque<Ino>,
    /// When the flusher's last background batch finished submitting (its last request
    /// in the block layer, [`Timed::submitted_ns`]): it looks at the background limit
    /// again, and starts the next batch, no earlier.
    flusher_free_ns: u64,
    /// Background writeback was started and the background limit has not held since.
    flusher_on: bool,
    /// Background batches run, and the file turns they took, in all.
    batches: u64,
    batch_turns: u64,
}

/// A background writeback batch ends after the first file that takes it past this much
/// time of submitting (fs/fs-writeback.c, `writeback_sb_inodes` and
/// `__writeback_inodes_wb`: `time_is_before_jiffies(start_time + HZ / 10UL)`); the flusher
/// looks at the background limit only between batches (`wb_writeback`).
pub const WRITEBACK_BATCH_NS: u64 = 100_000_000;

fn sim_error(name: &str, e: SimfsError) -> VfsError {
    match e {
        SimfsError::NoSpace { .. }
        | SimfsError::NoContiguousRun { .. }
        | SimfsError::NoInodes { .. } => VfsError::DiskFull {
            path: format!("simfs:{name} ({e})"),
        },
        SimfsError::NotFound(n) => VfsError::NotFound(format!("simfs:{n}")),
        SimfsError::Exists(n) => VfsError::Exists(format!("simfs:{n}")),
        other => VfsError::Io {
            path: format!("simfs:{name}"),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

impl SimVfs {
    /// The files of `fs` (those it holds now start empty here: simfs keeps no bytes),
    /// without a page cache: every call reaches the drive when it is made.
    pub fn new(fs: SimDrive) -> SimVfs {
        Self::with_host(fs, HostConfig::uncached())
    }

    /// The files of `fs` behind the host path `host`.
    pub fn with_host(mut fs: SimDrive, host: HostConfig) -> SimVfs {
        fs.device_mut().queue_depth = host.queue_depth;
        let flusher_ns = fs.device().now_ns();
        SimVfs {
            fs,
            data: HashMap::new(),
            fds: HashMap::new(),
            open_handles: HashMap::new(),
            writer_fds: HashSet::new(),
            writers: HashMap::new(),
            next_fd: 0,
            io: IoTime::default(),
            cache: PageCache::new(host.ram_bytes),
            host,
            direct: HashSet::new(),
            readahead: HashMap::new(),
            flusher_ns,
            journal_ns: flusher_ns,
            requests_at_start: 0,
            unlinks: 0,
            scheduled_commits_done: 0,
            writeback: std::collections::BinaryHeap::new(),
            writeback_pages: 0,
            b_io: Default::default(),
            b_more_io: Default::default(),
            flusher_free_ns: 0,
            batches: 0,
            batch_turns: 0,
            flusher_on: false,
        }
    }

    /// Waits until the drive is idle and clears its counters: measuring starts now.
    pub fn start_measuring(&mut self) {
        let dev = self.fs.device_mut();
        let idle = dev.dev.settle();
        if idle > dev.now_ns() {
            dev.think(idle - dev.now_ns());
        }
        dev.dev.reset_stats();
        self.requests_at_start = self.data_requests();
        self.unlinks = 0;
        self.scheduled_commits_done = 0;
    }

    /// Data requests (reads and writes) the file system has sent.
    fn data_requests(&self) -> u64 {
        let st = self.fs.stats();
        st.data_write_requests + st.data_read_requests
    }

    /// Dirty pages in the page cache.
    pub fn dirty_pages(&self) -> u64 {
        self.cache.dirty_pages()
    }

    fn buffered(&self, fd: Fd) -> bool {
        self.host.page_cache && !self.direct.contains(&fd)
    }

    fn max_request_pages(&self) -> u64 {
        (self.host.max_request_bytes / PAGE_BYTES).max(1)
    }

    /// Tells simfs what the host knows of `ino` (its size, whether a handle writes to it,
    /// whether it has dirty pages), as ext4's allocator sees the inode.
    fn tell_host_view(&mut self, ino: Ino) -> Result<(), SimfsError> {
        let size = self.data.get(&ino).map_or(0, |d| d.len());
        let open = self.writers.contains_key(&ino);
        // Delayed-allocation blocks wait (ext4's i_reserved_data_blocks): dirty pages over
        // blocks not yet allocated. Taken as dirty pages while the file has fewer blocks
        // than its size needs (exact for a file written without holes, as every file the
        // engines write is; a dirty overwrite of allocated blocks reserves nothing).
        let delalloc = self.cache.dirty_pages_of(ino) > 0
            && self.fs.mapped_blocks(ino)? < size.div_ceil(PAGE_BYTES);
        self.fs.set_host_view(ino, size, open, delalloc)
    }

    /// Writes `runs` back to the drive. With `wait` the caller waits for them; without,
    /// they run in the background: the host clock stays, and later requests queue behind
    /// them in the drive.
    /// All requests are issued at once (the block layer keeps them in flight together);
    /// until they complete their pages count as under writeback.
    fn write_back(&mut self, runs: Vec<Run>, wait: bool) -> Result<(), VfsError> {
        let t0 = self.fs.device().now_ns();
        let last = self.in_background(true, |v| {
            // Each file's contiguous dirty pages are mapped (allocated) in one request,
            // then sent in requests of the device's size, as ext4's writeback does; the
            // unwritten extents it mapped are converted once their I/O is done.
            let (mut mapped, mut seen): (Vec<Ino>, HashSet<Ino>) = Default::default();
            for (ino, page, pages) in mapping_extents(&runs) {
                let len = v.data.get(&ino).map_or(0, |d| d.len());
                let offset = page * PAGE_BYTES;
                if offset >= len {
                    continue;
                }
                v.tell_host_view(ino)
                    .map_err(|e| sim_error("writeback", e))?;
                let n = (pages * PAGE_BYTES).min(len - offset);
                v.timed_ino(ino, |fs| fs.map_for_writeback(ino, offset, n))?;
                if seen.insert(ino) {
                    mapped.push(ino);
                }
            }
            let mut last = t0;
            for (ino, page, pages) in runs {
                let len = v.data.get(&ino).map_or(0, |d| d.len());
                let offset = page * PAGE_BYTES;
                if offset >= len {
                    continue;
                }
                let n = (pages * PAGE_BYTES).min(len - offset);
                v.tell_host_view(ino)
                    .map_err(|e| sim_error("writeback", e))?;
                let (done, _) = v.timed_ino(ino, |fs| fs.write_at(ino, offset, n))?;
                v.writeback.push(std::cmp::Reverse((done, pages)));
                v.writeback_pages += pages;
                last = last.max(done);
            }
            for ino in mapped {
                v.timed_ino(ino, |fs| fs.convert_unwritten(ino))?;
            }
            Ok(last)
        })?;
        if wait {
            self.wait_until(last);
        }
        self.io.write_ns += self.fs.device().now_ns() - t0;
        Ok(())
    }

    /// Host time moves on to `t` (if later), waiting for I/O.
    fn wait_until(&mut self, t: u64) {
        let now = self.fs.device().now_ns();
        if t > now {
            self.fs.device_mut().think(t - now);
        }
        self.retire_writeback();
    }

    /// Forgets writeback requests complete by now.
    fn retire_writeback(&mut self) {
        let now = self.fs.device().now_ns();
        while let Some(&std::cmp::Reverse((done, pages))) = self.writeback.peek() {
            if done > now {
                break;
            }
            self.writeback.pop();
            self.writeback_pages -= pages;
        }
    }

    /// Dirty pages plus pages under writeback: what the dirty limits throttle writers on
    /// (mm/page-writeback.c, balance_dirty_pages: NR_FILE_DIRTY + NR_WRITEBACK).
    fn dirty_and_writeback_pages(&mut self) -> u64 {
        self.retire_writeback();
        self.cache.dirty_pages() + self.writeback_pages
    }

    /// A writer past the hard limit: dirty pages go to writeback, and the writer waits
    /// until dirty and writeback pages together are back to halfway between the two
    /// limits (Linux's free-run ceiling).
    fn throttle(&mut self) -> Result<(), VfsError> {
        let (background, hard) = (
            self.host.background_limit_pages(),
            self.host.hard_limit_pages(),
        );
        if self.dirty_and_writeback_pages() <= hard {
            return Ok(());
        }
        let target = (background + hard) / 2;
        let t0 = self.fs.device().now_ns();
        // The writer sleeps; the flusher's batches follow one another until the
        // background limit holds (their requests queue in order behind each other).
        while self.cache.dirty_pages() > background && self.background_batch()? {}
        while self.dirty_and_writeback_pages() > target {
            let Some(&std::cmp::Reverse((done, _))) = self.writeback.peek() else {
                break;
            };
            self.wait_until(done);
        }
        self.io.write_ns += self.fs.device().now_ns() - t0;
        Ok(())
    }

    /// Runs `f` with the drive's requests issued in the background when `background`:
    /// all at the current time, the host clock staying where it is.
    fn in_background<R>(
        &mut self,
        background: bool,
        f: impl FnOnce(&mut Self) -> Result<R, VfsError>,
    ) -> Result<R, VfsError> {
        let held = self.fs.device().hold_clock;
        self.fs.device_mut().hold_clock = held || background;
        let r = f(self);
        self.fs.device_mut().hold_clock = held;
        r
    }

    /// The flusher, caught up to now: at each wake-up since the last, pages past the
    /// expiry go back; above the background limit, batches of background writeback
    /// ([`SimVfs::background_batch`]) while it is passed. All in the background.
    fn flush_due(&mut self) -> Result<(), VfsError> {
        let now = self.fs.device().now_ns();
        // The journal's timed commits, in the background: metadata, then the discards of
        // the extents freed before it (journal discard mode).
        let interval = self.host.journal_commit_ns;
        // A scheduled commit is due once the run has come as far (in unlinks, or in data
        // requests) as the real one had at its commit.
        let (schedule, done_so_far) = if self.host.journal_commit_after_unlinks.is_empty() {
            (
                &self.host.journal_commit_after_requests,
                self.data_requests() - self.requests_at_start,
            )
        } else {
            (&self.host.journal_commit_after_unlinks, self.unlinks)
        };
        if !schedule.is_empty() {
            let mut due = false;
            while let Some(&after) = schedule.get(self.scheduled_commits_done) {
                if after > done_so_far {
                    break;
                }
                self.scheduled_commits_done += 1;
                due = true;
            }
            if due {
                self.journal_ns = now;
                self.in_background(true, |v| v.timed("journal commit", |fs| fs.sync()))?;
            }
        } else if interval > 0 && self.journal_ns + interval <= now {
            self.journal_ns = now - (now - self.journal_ns) % interval;
            self.in_background(true, |v| v.timed("journal commit", |fs| fs.sync()))?;
        }
        if !self.host.page_cache {
            return Ok(());
        }
        let max = self.max_request_pages();
        let background = self.host.background_limit_pages();
        while self.flusher_ns + self.host.writeback_interval_ns <= now {
            self.flusher_ns += self.host.writeback_interval_ns;
            // The wake-up looks at the background limit too.
            self.flusher_on |= self.cache.dirty_pages() > background;
            let cutoff = self.flusher_ns.saturating_sub(self.host.dirty_expire_ns);
            if self.cache.dirty_pages() > 0 {
                // The periodic flush works through what background writeback queued and
                // has not reached (`b_io`, then `b_more_io`: `queue_io` refills only an
                // empty `b_io`), whatever its age, then through the expired files.
                let first: Vec<Ino> = self
                    .b_io
                    .drain(..)
                    .chain(self.b_more_io.drain(..))
                    .collect();
                let chunk = self.host.writeback_chunk_pages();
                let runs = self.cache.take_files(&first, cutoff, chunk, max);
                self.write_back(runs, false)?;
            }
        }
        // Background writeback: started once the dirty pages pass where a writer starts
        // it, then a batch whenever the flusher has finished submitting the last one and
        // the background limit is still passed.
        // (Under the device's own limits the writer compares its dirty pages and those
        // under writeback: `wb_dirty`.)
        let counted = match self.host.strict_limit {
            true => self.dirty_and_writeback_pages(),
            false => self.cache.dirty_pages(),
        };
        self.flusher_on |= counted > self.host.background_start_pages();
        while self.flusher_on
            && self.cache.dirty_pages() > background
            && self.fs.device().now_ns() >= self.flusher_free_ns
            && self.background_batch()?
        {}
        if self.cache.dirty_pages() <= background {
            self.flusher_on = false;
        }
        Ok(())
    }

    /// One batch of background writeback, as Linux's flusher runs it (`wb_writeback` for
    /// background work, `__writeback_inodes_wb`, `writeback_sb_inodes`): the files of the
    /// pass in order, each written up to a chunk (`writeback_chunk_size`) before the next;
    /// a file still dirty after its turn waits for the next pass (`requeue_io`). A new pass
    /// (`queue_io`, when the last is done) queues the files requeued, then every other
    /// dirty file oldest first. The batch starts when the flusher has finished submitting
    /// the last one, and ends after the first file that takes its submitting past
    /// [`WRITEBACK_BATCH_NS`] (the flusher blocks only when the block layer's requests are
    /// all taken: [`Timed::submitted_ns`]), or when the pass is done. Its requests go in the
    /// background, dispatched as the drive's queue takes them. Whether it wrote anything.
    fn background_batch(&mut self) -> Result<bool, VfsError> {
        let start = self.fs.device().now_ns().max(self.flusher_free_ns);
        let (chunk, max) = (self.host.writeback_chunk_pages(), self.max_request_pages());
        let (mut wrote, mut queued) = (false, false);
        // The flusher's own time so far ([`HostConfig::flusher_ns_per_page`]).
        let mut own_ns = 0u64;
        loop {
            if self.b_io.is_empty() {
                // A pass that found only files cleaned since they were queued (by a
                // sync, the periodic flush, a truncate) made progress in the kernel's
                // count (`wrote++` for an inode left clean): it queues the next at once.
                if wrote || queued {
                    break;
                }
                self.queue_io();
                queued = true;
                if self.b_io.is_empty() {
                    break;
                }
            }
            let ino = self.b_io.pop_front().expect("not empty");
            let runs = self.cache.take_file_chunk(ino, chunk, max);
            if runs.is_empty() {
                continue;
            }
            let pages: u64 = runs.iter().map(|r| r.2).sum();
            own_ns += pages * self.host.flusher_ns_per_page;
            self.write_back(runs, false)?;
            wrote = true;
            self.batch_turns += 1;
            if self.cache.dirty_pages_of(ino) > 0 {
                self.b_more_io.push_back(ino);
            }
            let busy_to = self.fs.device().submitted_ns(start).max(start + own_ns);
            if busy_to > start + WRITEBACK_BATCH_NS {
                break;
            }
        }
        self.flusher_free_ns = self.fs.device().submitted_ns(start).max(start + own_ns);
        self.batches += wrote as u64;
        Ok(wrote)
    }

    /// A new pass of writeback (`queue_io`): the files requeued in the last one first, then
    /// every other dirty file oldest first.
    fn queue_io(&mut self) {
        let mut queued: Vec<Ino> = self.b_more_io.drain(..).collect();
        let more: HashSet<Ino> = queued.iter().copied().collect();
        queued.extend(
            self.cache
                .dirty_files_by_age()
                .into_iter()
                .filter(|i| !more.contains(i)),
        );
        self.b_io = queued.into();
    }

    /// Reads the pages of `first..end` of `ino` that are not cached, merged into
    /// requests; `background: Some(now)` issues them without waiting (they arrive later),
    /// `None` waits for them.
    fn read_pages(
        &mut self,
        ino: Ino,
        first: u64,
        end: u64,
        background: Option<u64>,
    ) -> Result<(), VfsError> {
        if first >= end {
            return Ok(());
        }
        let len = self.data.get(&ino).map_or(0, |d| d.len());
        for (page, pages) in self.cache.missing(ino, first, end) {
            let at = page * PAGE_BYTES;
            if at >= len {
                continue;
            }
            let k = (pages * PAGE_BYTES).min(len - at);
            let (done, ns) = self.in_background(background.is_some(), |v| {
                v.timed_ino(ino, |fs| fs.read_at(ino, at, k))
            })?;
            match background {
                Some(_) => {
                    self.cache.arriving(ino, page, page + pages, done);
                }
                None => {
                    self.io.read_ns += ns;
                    self.cache.cached(ino, page, page + pages);
                }
            }
        }
        self.cache.cached(ino, first, end);
        Ok(())
    }

    /// Writes back one file's dirty pages and waits for them.
    fn write_back_file(&mut self, ino: Ino) -> Result<(), VfsError> {
        let runs = self.cache.take_file(ino, self.max_request_pages());
        self.write_back(runs, true)
    }

    pub fn fs(&self) -> &SimDrive {
        &self.fs
    }

    pub fn fs_mut(&mut self) -> &mut SimDrive {
        &mut self.fs
    }

    pub fn into_fs(self) -> SimDrive {
        self.fs
    }

    fn ino(&self, fd: Fd) -> Ino {
        *self
            .fds
            .get(&fd)
            .expect("a handle this file system gave out")
    }

    fn name_of(&self, ino: Ino) -> String {
        self.fs
            .names()
            .find(|n| self.fs.lookup(n).ok() == Some(ino))
            .unwrap_or("(removed)")
            .to_string()
    }

    /// Runs `f` on simfs; returns its result and the virtual time it took.
    fn timed<R>(
        &mut self,
        name: &str,
        f: impl FnOnce(&mut SimDrive) -> Result<R, SimfsError>,
    ) -> Result<(R, u64), VfsError> {
        let t0 = self.fs.device().now_ns();
        let r = f(&mut self.fs).map_err(|e| sim_error(name, e))?;
        Ok((r, self.fs.device().now_ns() - t0))
    }

    /// [`SimVfs::timed`] for a call on inode `ino` (its name is looked up only for an
    /// error message).
    fn timed_ino<R>(
        &mut self,
        ino: Ino,
        f: impl FnOnce(&mut SimDrive) -> Result<R, SimfsError>,
    ) -> Result<(R, u64), VfsError> {
        let t0 = self.fs.device().now_ns();
        match f(&mut self.fs) {
            Ok(r) => Ok((r, self.fs.device().now_ns() - t0)),
            Err(e) => Err(sim_error(&self.name_of(ino), e)),
        }
    }

    fn commit(&mut self) -> Result<(), VfsError> {
        let (_, ns) = self.timed("sync", |fs| fs.sync())?;
        self.io.sync_ns += ns;
        Ok(())
    }
}

impl Vfs for SimVfs {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        check_name(name)?;
        let ino = match self.fs.lookup(name) {
            Ok(_) if mode.create_new => return Err(VfsError::Exists(format!("simfs:{name}"))),
            Ok(ino) => ino,
            Err(_) if mode.create || mode.create_new => {
                let (ino, _) = self.timed(name, |fs| fs.create(name))?;
                self.data.insert(ino, Default::default());
                ino
            }
            Err(_) => return Err(VfsError::NotFound(format!("simfs:{name}"))),
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, ino);
        *self.open_handles.entry(ino).or_default() += 1;
        if !mode.read_only {
            self.writer_fds.insert(fd);
            let w = self.writers.entry(ino).or_default();
            *w += 1;
            if *w == 1 {
                self.tell_host_view(ino).map_err(|e| sim_error(name, e))?;
            }
        }
        if mode.direct {
            self.direct.insert(fd);
        }
        Ok(fd)
    }

    fn close(&mut self, fd: Fd) {
        if let Some(ino) = self.fds.remove(&fd) {
            if let std::collections::hash_map::Entry::Occupied(mut e) = self.open_handles.entry(ino)
            {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
            if self.writer_fds.remove(&fd) {
                if let std::collections::hash_map::Entry::Occupied(mut e) = self.writers.entry(ino)
                {
                    *e.get_mut() -= 1;
                    if *e.get() == 0 {
                        e.remove();
                        // The last writer's close (ext4_release_file). close() cannot fail;
                        // a file simfs no longer has needs nothing.
                        let _ = self.tell_host_view(ino);
                    }
                }
            }
        }
        self.direct.remove(&fd);
        self.readahead.remove(&fd);
    }

    fn len(&self, fd: Fd) -> u64 {
        self.data.get(&self.ino(fd)).map_or(0, |d| d.len())
    }

    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        let ino = self.ino(fd);
        let len = self.len(fd);
        if offset >= len {
            return Ok(0);
        }
        let n = (len - offset).min(buf.len() as u64) as usize;
        self.flush_due()?;
        if self.buffered(fd) {
            // Only the pages not in the cache come from the drive.
            let (first, end) = (
                offset / PAGE_BYTES,
                (offset + n as u64).div_ceil(PAGE_BYTES),
            );
            let file_pages = len.div_ceil(PAGE_BYTES);
            let missing_first = !self.cache.missing(ino, first, first + 1).is_empty();
            let windows = self.readahead.entry(fd).or_default().on_read(
                first,
                end,
                missing_first,
                self.host.read_ahead_pages,
            );
            for w in windows {
                match w {
                    Window::Sync { first: f, pages } => {
                        self.read_pages(ino, f, (f + pages).min(file_pages), None)?;
                    }
                    Window::Async { first: f, pages } => {
                        let now = self.fs.device().now_ns();
                        self.read_pages(ino, f, (f + pages).min(file_pages), Some(now))?;
                    }
                }
            }
            self.read_pages(ino, first, end, None)?;
            // Pages a background read is still bringing in: wait for them.
            let ready = self.cache.ready_at(ino, first, end);
            let now = self.fs.device().now_ns();
            if ready > now {
                self.io.read_ns += ready - now;
                self.fs.device_mut().advance_to(ready);
            }
        } else {
            let (_, ns) = self.timed_ino(ino, |fs| fs.read_at(ino, offset, n as u64))?;
            self.io.read_ns += ns;
        }
        self.data
            .get_mut(&ino)
            .expect("an open file has its bytes")
            .read(offset, &mut buf[..n]);
        Ok(n)
    }

    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        let buffered = self.buffered(fd);
        if !buffered {
            self.flush_due()?;
            let (_, ns) = self.timed_ino(ino, |fs| fs.write_at(ino, offset, data.len() as u64))?;
            self.io.write_ns += ns;
        }
        self.data.entry(ino).or_default().write(offset, data);
        if buffered && !data.is_empty() {
            let now = self.fs.device().now_ns();
            let (first, end) = (
                offset / PAGE_BYTES,
                (offset + data.len() as u64).div_ceil(PAGE_BYTES),
            );
            self.cache.write(ino, first, end, now);
            self.throttle()?;
            self.flush_due()?;
        }
        Ok(())
    }

    /// The hint goes on the inode (no I/O): the file's writes from now on, writeback's
    /// included, carry the handle simfs maps it to.
    fn set_write_hint(&mut self, fd: Fd, hint: crate::WriteHint) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.fs
            .set_write_hint(ino, hint)
            .map_err(|e| sim_error("set_write_hint", e))
    }
    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        let (_, ns) = self.timed_ino(ino, |fs| fs.fallocate(ino, offset, len))?;
        self.io.write_ns += ns;
        let f = self.data.entry(ino).or_default();
        if f.len() < offset + len {
            f.set_len(offset + len);
        }
        Ok(())
    }

    /// Drops the bytes past `len` (simfs keeps the file's blocks).
    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.data.entry(ino).or_default().set_len(len);
        self.cache.truncate(ino, len.div_ceil(PAGE_BYTES));
        Ok(())
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.write_back_file(ino)?;
        self.commit()
    }

    fn sync_files(&mut self, fds: &[Fd], _dir: bool) -> Result<(), VfsError> {
        for &fd in fds {
            let ino = self.ino(fd);
            self.write_back_file(ino)?;
        }
        self.commit()
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError> {
        check_name(from)?;
        check_name(to)?;
        self.timed(from, |fs| fs.rename(from, to))?;
        Ok(())
    }

    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        check_name(name)?;
        let ino = self
            .fs
            .lookup(name)
            .map_err(|_| VfsError::NotFound(format!("simfs:{name}")))?;
        self.flush_due()?;
        // Pages of a removed file never reach the drive, and writeback's queues forget it
        // (simfs may give its number to a new file).
        self.cache.drop_file(ino);
        self.b_io.retain(|&i| i != ino);
        self.b_more_io.retain(|&i| i != ino);
        let (_, ns) = self.timed(name, |fs| fs.unlink(name))?;
        self.io.write_ns += ns;
        self.unlinks += 1;
        if !self.open_handles.contains_key(&ino) {
            self.data.remove(&ino);
        }
        // simfs frees the inode number at once (the kernel keeps an open one until its
        // last close): its handles stop counting as writers, so a file that reuses the
        // number starts with none.
        if self.writers.remove(&ino).is_some() {
            let fds = &self.fds;
            self.writer_fds.retain(|fd| fds.get(fd) != Some(&ino));
        }
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<(), VfsError> {
        self.commit()
    }

    fn list(&self) -> Vec<String> {
        let mut v: Vec<String> = self.fs.names().map(String::from).collect();
        v.sort();
        v
    }

    fn exists(&self, name: &str) -> bool {
        self.fs.lookup(name).is_ok()
    }

    fn now_ns(&self) -> u64 {
        self.fs.device().now_ns()
    }

    /// Host time passes without I/O; the flusher keeps its schedule.
    fn think(&mut self, ns: u64) {
        self.fs.device_mut().think(ns);
    }

    fn io_time(&self) -> IoTime {
        self.io
    }
}

impl crate::VirtualClock for SimVfs {
    fn issue_at(&mut self, t: u64) {
        self.fs.device_mut().issue_at(t);
    }

    fn track_positions(&mut self) {
        self.fs.device_mut().track_positions = true;
    }

    fn take_positions(&mut self) -> Vec<(u64, u64)> {
        self.fs.device_mut().take_positions()
    }
}

/// The runs of one writeback coalesced into what ext4 maps with one `ext4_map_blocks`
/// call: a file's consecutive pages, at most `simfs::types::MAX_WRITEPAGES_EXTENT_BLOCKS` at a
/// time (fs/ext4/inode.c, `mpage_add_bh_to_extent`).
fn mapping_extents(runs: &[Run]) -> Vec<Run> {
    let most = simfs::types::MAX_WRITEPAGES_EXTENT_BLOCKS;
    let mut out: Vec<Run> = Vec::new();
    for &(ino, mut page, mut pages) in runs {
        while pages > 0 {
            match out.last_mut() {
                Some(last) if last.0 == ino && last.1 + last.2 == page && last.2 < most => {
                    let k = pages.min(most - last.2);
                    last.2 += k;
                    page += k;
                    pages -= k;
                }
                _ => {
                    let k = pages.min(most);
                    out.push((ino, page, k));
                    page += k;
                    pages -= k;
                }
            }
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use flash::{Device, Preset};

    #[test]
    fn writeback_maps_a_file_s_consecutive_runs_together_up_to_ext4_s_limit() {
        let runs: Vec<Run> = vec![
            (7, 0, 320),
            (7, 320, 320),
            (7, 640, 100),
            (8, 740, 10), // another file
            (7, 800, 20), // a gap in file 7
            (9, 0, 320),
        ];
        assert_eq!(
            mapping_extents(&runs),
            [(7, 0, 740), (8, 740, 10), (7, 800, 20), (9, 0, 320)]
        );
        // Eight requests of 320 pages: one map of 2,048, then the rest.
        let long: Vec<Run> = (0..8).map(|i| (3, i * 320, 320)).collect();
        assert_eq!(mapping_extents(&long), [(3, 0, 2048), (3, 2048, 512)]);
    }

    /// simfs (512 MiB) on a 1 GiB x25e, every call reaching the drive when made.
    pub(crate) fn drive() -> SimVfs {
        let dev = Preset::load("x25e")
            .unwrap()
            .with_capacity(1 << 30)
            .build()
            .unwrap();
        let fs = SimFs::mkfs(Timed::new(dev), simfs::FsConfig::new(512 << 20)).unwrap();
        SimVfs::new(fs)
    }

    #[test]
    fn files_keep_their_bytes_and_every_call_takes_drive_time() {
        let mut v = drive();
        let fd = v.open("a", OpenMode::create_new()).unwrap();
        let data: Vec<u8> = (0..65536u32).map(|i| i as u8).collect();
        let t0 = v.now_ns();
        v.write_at(fd, 0, &data).unwrap();
        let t1 = v.now_ns();
        assert!(t1 > t0, "a write takes time on the drive");
        let mut buf = vec![0u8; 1000];
        assert_eq!(v.read_at(fd, 100, &mut buf).unwrap(), 1000);
        assert_eq!(&buf[..], &data[100..1100]);
        assert!(v.now_ns() > t1);
        v.fsync(fd).unwrap();
        assert!(v.io_time().sync_ns > 0);
        v.rename("a", "b").unwrap();
        assert_eq!(v.list(), vec!["b".to_string()]);
        let host = v.fs().device().dev.stats().host_write_pages;
        assert!(host >= 16, "the drive saw the data: {host} pages");
        v.close(fd);
        v.unlink("b").unwrap();
        assert!(v.list().is_empty());
        assert!(matches!(
            v.open("b", OpenMode::existing()),
            Err(VfsError::NotFound(_))
        ));
        // A full file system is a disk-full error.
        let big = v.open("big", OpenMode::create()).unwrap();
        assert!(matches!(
            v.fallocate(big, 0, 1 << 30),
            Err(VfsError::DiskFull { .. })
        ));
    }

    #[test]
    fn write_hints_reach_an_fdp_drive_through_writeback() {
        // The hot file is rewritten; the cold one written once. Through the page cache, the
        // hint set on the open file decides the handle writeback's requests carry.
        let run = |placement: bool| {
            let mut preset = flash::Preset::load("nvme").unwrap().with_capacity(4 << 30);
            preset.ssd_config_mut().unwrap().fdp = Some(Box::new(flash::FdpConfig::new(5)));
            let dev = preset.build().unwrap();
            let mut cfg = simfs::FsConfig::for_device(dev.logical_bytes());
            cfg.placement = placement.then(|| simfs::HintPlacement::linux_streams(5));
            let fs = SimFs::mkfs(Timed::new(dev), cfg).unwrap();
            let mut v = SimVfs::with_host(fs, HostConfig::linux(1 << 30));
            let hot = v.open("hot", OpenMode::create()).unwrap();
            let cold = v.open("cold", OpenMode::create()).unwrap();
            v.set_write_hint(hot, crate::WriteHint::Short).unwrap();
            v.set_write_hint(cold, crate::WriteHint::Extreme).unwrap();
            v.write_at(cold, 0, &vec![1u8; 1 << 20]).unwrap();
            for round in 0..3u8 {
                v.write_at(hot, 0, &vec![round; 1 << 20]).unwrap();
                v.fsync(hot).unwrap();
            }
            v.fsync(cold).unwrap();
            let mut buf = vec![0u8; 4096];
            v.read_at(hot, 4096, &mut buf).unwrap();
            assert!(
                buf.iter().all(|&b| b == 2),
                "the bytes are the last write's"
            );
            let fdp = v.fs().device().dev.stats().fdp.unwrap();
            fdp.per_handle
                .iter()
                .map(|h| h.host_bytes_written)
                .collect::<Vec<u64>>()
        };
        let on = run(true);
        assert_eq!(on[1], 3 << 20, "hot data on SHORT's handle: {on:?}");
        assert_eq!(on[4], 1 << 20, "cold data on EXTREME's handle: {on:?}");
        assert!(on[2] > 0, "metadata on MEDIUM's handle: {on:?}");
        let off = run(false);
        assert_eq!(off.iter().skip(1).sum::<u64>(), 0, "no placement: {off:?}");
        assert_eq!(off[0], on.iter().sum::<u64>(), "the same bytes in all");
    }

    fn cached_drive(ram_bytes: u64) -> SimVfs {
        let fs = drive().into_fs();
        SimVfs::with_host(fs, HostConfig::linux(ram_bytes))
    }

    fn drive_writes(v: &SimVfs) -> (u64, u64) {
        let s = v.fs().stats();
        (s.data_write_requests, s.data_write_bytes)
    }

    #[test]
    fn the_page_cache_serves_reads_it_holds_and_fsync_reaches_the_drive() {
        let mut v = cached_drive(1 << 30);
        let fd = v.open("a", OpenMode::create()).unwrap();
        let t0 = v.now_ns();
        v.write_at(fd, 0, &[7u8; 65536]).unwrap();
        assert_eq!(v.now_ns(), t0, "a buffered write completes in memory");
        assert_eq!(drive_writes(&v), (0, 0));
        let mut buf = vec![0u8; 65536];
        v.read_at(fd, 0, &mut buf).unwrap();
        assert_eq!(v.fs().stats().data_read_requests, 0, "read from the cache");
        assert_eq!(buf, vec![7u8; 65536]);
        v.fsync(fd).unwrap();
        assert!(v.now_ns() > t0, "fsync waits for the drive");
        assert_eq!(drive_writes(&v), (1, 65536), "one merged request");
        assert_eq!(v.dirty_pages(), 0);
        // Cached after writeback too; an uncached range comes from the drive.
        v.read_at(fd, 4096, &mut buf[..4096]).unwrap();
        assert_eq!(v.fs().stats().data_read_requests, 0);
    }

    #[test]
    fn a_writeback_run_converts_its_unwritten_extent_once_however_many_requests_carry_it() {
        // Under a kernel that writes unwritten extents, a file holding four extents grows a
        // leaf for the run written back after them and frees it when the run merges back
        // (simfs's test of it: crates/simfs/tests/discard.rs). ext4 maps the whole run
        // with one request and converts it once: one leaf freed, however many requests of
        // the device's size carry the data.
        let mut cfg = simfs::FsConfig::new(512 << 20);
        cfg.kernel = simfs::DiscardKernel::Linux6_17;
        let mut v = x25e_with(cfg, HostConfig::linux(1 << 30));
        let a = v.open("a", OpenMode::create()).unwrap();
        let b = v.open("b", OpenMode::create()).unwrap();
        // a's first four pages written back between b's: four extents, the last one with
        // free blocks after it.
        for i in 0..4u64 {
            v.write_at(a, i * 4096, &[1u8; 4096]).unwrap();
            v.fsync(a).unwrap();
            if i < 3 {
                v.write_at(b, i * 4096, &[2u8; 4096]).unwrap();
                v.fsync(b).unwrap();
            }
        }
        let ino = v.fs().lookup("a").unwrap();
        assert_eq!(v.fs().extents(ino).unwrap().len(), 4);
        let (freed, requests) = (
            v.fs().stats().freed_extents,
            v.fs().stats().data_write_requests,
        );
        v.write_at(a, 4 * 4096, &vec![3u8; 4 << 20]).unwrap();
        v.fsync(a).unwrap();
        let sent = v.fs().stats().data_write_requests - requests;
        assert!(sent >= 4, "4 MiB in requests of 1,280 KiB: {sent}");
        assert_eq!(v.fs().extents(ino).unwrap().len(), 4, "the run merged back");
        assert_eq!(v.fs().stats().freed_extents - freed, 1, "one leaf, once");
    }

    #[test]
    fn ext4_allocates_for_closed_files_exactly_and_drops_a_window_at_the_last_close() {
        let mut cfg = simfs::FsConfig::new(512 << 20);
        cfg.prealloc = true;
        let mut v = x25e_with(cfg, HostConfig::linux(1 << 30));
        let open = v.open("open", OpenMode::create()).unwrap();
        let closed = v.open("closed", OpenMode::create()).unwrap();
        let reader = v.open("open", OpenMode::read_only()).unwrap();
        for fd in [open, closed] {
            v.write_at(fd, 0, &[1u8; 20 * 4096]).unwrap();
        }
        v.close(closed);
        let free0 = v.fs().free_bytes() / 4096;
        // The flusher writes both back once their pages expire (30 s).
        v.think(31_000_000_000);
        let mut buf = [0u8; 1];
        v.read_at(open, 0, &mut buf).unwrap();
        assert_eq!(v.dirty_pages(), 0);
        let used = free0 - v.fs().free_bytes() / 4096;
        assert_eq!(
            used,
            32 + 20,
            "the open file's window to 32 blocks, the closed file's 20"
        );
        // A reader closing changes nothing; the last writer's close gives the window back.
        v.close(reader);
        assert_eq!(free0 - v.fs().free_bytes() / 4096, 52);
        v.close(open);
        assert_eq!(free0 - v.fs().free_bytes() / 4096, 40);
        v.fs().check_invariants().unwrap();
    }

    #[test]
    fn the_flusher_writes_back_expired_pages_in_the_background() {
        let mut v = cached_drive(1 << 30);
        let fd = v.open("a", OpenMode::create()).unwrap();
        v.write_at(fd, 0, &[1u8; 32768]).unwrap();
        let mut buf = [0u8; 1];
        v.think(29_000_000_000);
        v.read_at(fd, 0, &mut buf).unwrap();
        assert_eq!(drive_writes(&v).0, 0, "not expired at 29 s");
        // The flusher wakes every 5 s: at 35 s the pages are past the 30 s expiry.
        v.think(6_000_000_000);
        let before = v.now_ns();
        v.read_at(fd, 0, &mut buf).unwrap();
        assert_eq!(drive_writes(&v), (1, 32768));
        assert_eq!(v.now_ns(), before, "the reader does not wait for writeback");
    }

    #[test]
    fn under_the_devices_own_limits_writeback_starts_at_the_free_run_ceiling() {
        // 16 MiB: background limit 1.6 MiB (409 pages), hard 3.2 MiB, free-run ceiling
        // halfway, 2.4 MiB (614 pages). 2 MiB dirty starts writeback on a host of 16 MiB,
        // not under the device's own limits; 2.5 MiB does, and it goes on to the
        // background limit.
        let host = HostConfig {
            strict_limit: true,
            ..HostConfig::linux(16 << 20)
        };
        assert_eq!(host.background_start_pages(), (409 + 819) / 2);
        let mut global = cached_drive(16 << 20);
        let mut own = SimVfs::with_host(drive().into_fs(), host.clone());
        for v in [&mut global, &mut own] {
            let fd = v.open("a", OpenMode::create()).unwrap();
            for i in 0..512u64 {
                v.write_at(fd, i * 4096, &[2u8; 4096]).unwrap();
            }
        }
        assert!(drive_writes(&global).0 > 0, "past the background limit");
        assert_eq!(drive_writes(&own).0, 0, "below the free-run ceiling");
        assert_eq!(own.dirty_pages(), 512);
        let fd = own.open("b", OpenMode::create()).unwrap();
        for i in 0..128u64 {
            own.write_at(fd, i * 4096, &[3u8; 4096]).unwrap();
        }
        assert!(drive_writes(&own).0 > 0, "past the free-run ceiling");
        assert!(own.dirty_pages() <= host.background_limit_pages());
    }

    #[test]
    fn the_flushers_own_pace_bounds_a_batch_on_a_fast_drive() {
        // 16 MiB: background limit 409 pages. 512 pages dirtied over 64 files: without a
        // pace of its own the flusher's batch, once the limit is passed, writes every
        // dirty page; at 1 ms a page its 100 ms batch writes about 100, and the next waits
        // for it to end.
        let paced = HostConfig {
            flusher_ns_per_page: 1_000_000,
            ..HostConfig::linux(16 << 20)
        };
        let mut free = cached_drive(16 << 20);
        let mut own = SimVfs::with_host(drive().into_fs(), paced);
        for v in [&mut free, &mut own] {
            let fds: Vec<Fd> = (0..64)
                .map(|i| v.open(&format!("f{i}"), OpenMode::create()).unwrap())
                .collect();
            for i in 0..512u64 {
                v.write_at(fds[(i % 64) as usize], (i / 64) * 4096, &[2u8; 4096])
                    .unwrap();
            }
        }
        assert!(512 - free.dirty_pages() > 300, "{}", free.dirty_pages());
        let written = 512 - own.dirty_pages();
        assert!(
            (1..=110).contains(&written),
            "{written} pages in the first batch"
        );
    }

    #[test]
    fn dirty_limits_start_background_writeback_and_throttle_writers() {
        // 16 MiB of memory: background writeback above 1.6 MiB, throttling above 3.2 MiB.
        let mut v = cached_drive(16 << 20);
        let fd = v.open("a", OpenMode::create()).unwrap();
        let t0 = v.now_ns();
        for i in 0..500u64 {
            v.write_at(fd, i * 4096, &[2u8; 4096]).unwrap();
        }
        assert!(drive_writes(&v).0 > 0, "background writeback started");
        assert_eq!(
            v.now_ns(),
            t0,
            "below the hard limit the writer never waits"
        );
        assert!(v.dirty_pages() <= HostConfig::linux(16 << 20).background_limit_pages() + 1);
        // A burst of dirty pages past the hard limit: the writer waits for writeback.
        let other = v.open("b", OpenMode::create()).unwrap();
        v.write_at(other, 0, &vec![3u8; 4 << 20]).unwrap();
        assert!(v.now_ns() > t0, "past the hard limit the writer waits");
        assert!(v.dirty_pages() <= HostConfig::linux(16 << 20).hard_limit_pages());
    }

    /// Files of `v` (their inode numbers) that have blocks on the drive.
    fn files_with_blocks(v: &SimVfs, names: &[String]) -> usize {
        names
            .iter()
            .filter(|n| {
                let ino = v.fs().lookup(n).unwrap();
                v.fs().mapped_blocks(ino).unwrap() > 0
            })
            .count()
    }

    #[test]
    fn a_background_writeback_batch_gives_every_queued_file_a_turn_before_it_looks_again() {
        // Eight files filled a page each in turn through a 16 MiB host (background limit
        // 409 pages). Linux's flusher looks at the background limit only between batches
        // (fs/fs-writeback.c, wb_writeback), and a batch on a drive this fast writes every
        // queued file's dirty pages: when the limit is first passed, all eight files are
        // written back, about 51 pages each, and the cache is left nearly clean (a flusher
        // that looked after each file wrote the oldest one and stopped).
        let mut v = cached_drive(16 << 20);
        let names: Vec<String> = (0..8).map(|i| format!("f{i}")).collect();
        let fds: Vec<Fd> = names
            .iter()
            .map(|n| v.open(n, OpenMode::create()).unwrap())
            .collect();
        let background = HostConfig::linux(16 << 20).background_limit_pages();
        let mut page = 0u64;
        while drive_writes(&v).0 == 0 {
            for &fd in &fds {
                v.write_at(fd, page * 4096, &[5u8; 4096]).unwrap();
            }
            page += 1;
        }
        assert!(page * 8 > background, "no writeback below the limit");
        assert_eq!(files_with_blocks(&v, &names), 8, "every file had its turn");
        assert!(v.dirty_pages() < 8, "{} pages left dirty", v.dirty_pages());
    }

    /// `n` files on a 1 GiB host's x25e (simfs 512 MiB), filled a page each in turn until
    /// the first background batch is sent: the files, their names and handles, and the
    /// pages written to each.
    fn files_filled_until_the_first_batch(n: usize) -> (SimVfs, Vec<String>, Vec<Fd>, u64) {
        let mut v = x25e_with(simfs::FsConfig::new(512 << 20), HostConfig::linux(1 << 30));
        let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        let fds: Vec<Fd> = names
            .iter()
            .map(|n| v.open(n, OpenMode::create()).unwrap())
            .collect();
        let mut page = 0u64;
        while drive_writes(&v).0 == 0 {
            for &fd in &fds {
                v.write_at(fd, page * 4096, &[6u8; 4096]).unwrap();
            }
            page += 1;
        }
        (v, names, fds, page)
    }

    #[test]
    fn a_background_writeback_batch_ends_after_100_ms_of_submitting() {
        // 40 files filled a page each in turn through a 1 GiB host (background limit
        // 102 MiB). When the limit is passed, each holds about 2.6 MiB; the x25e's queue
        // and flash take about half of them in 100 ms of submitting (21 files), so the
        // first batch ends there, and the flusher takes the rest in later batches,
        // looking at the limit between them.
        let (mut v, names, fds, mut page) = files_filled_until_the_first_batch(40);
        let first = v
            .flusher_free_ns
            .checked_sub(v.now_ns())
            .expect("the batch ends after it starts");
        let written = files_with_blocks(&v, &names);
        assert!(
            (2..40).contains(&written),
            "the first batch wrote {written} files"
        );
        assert!(
            first > WRITEBACK_BATCH_NS,
            "it ended past 100 ms of submitting: {first} ns"
        );
        // The batch took the cache below the limit. The writer goes on; when the limit is
        // passed again the next batch goes on through the files the last one did not reach
        // (`b_io`), not back to the oldest: the first file keeps its new dirty pages.
        let ino = |v: &SimVfs, i: usize| v.fs().lookup(&names[i]).unwrap();
        while files_with_blocks(&v, &names) == written && page < 2048 {
            for &fd in &fds {
                v.write_at(fd, page * 4096, &[6u8; 4096]).unwrap();
            }
            page += 1;
        }
        assert!(v.fs().mapped_blocks(ino(&v, written)).unwrap() > 0);
        let first_file = ino(&v, 0);
        assert!(
            v.cache.dirty_pages_of(first_file) > 0,
            "the oldest file waits for the next pass"
        );
    }

    #[test]
    fn a_throttled_writer_s_batches_each_take_100_ms_of_files() {
        // A writer past the hard limit sleeps while the flusher's batches follow one
        // another, each starting where the last finished submitting: each takes several
        // files (one a batch would be the flusher looking at the limit after each file).
        let mut v = x25e_with(simfs::FsConfig::new(512 << 20), HostConfig::linux(1 << 30));
        let fds: Vec<Fd> = (0..40)
            .map(|i| v.open(&format!("f{i}"), OpenMode::create()).unwrap())
            .collect();
        for page in 0..2000u64 {
            for &fd in &fds {
                v.write_at(fd, page * 4096, &[6u8; 4096]).unwrap();
            }
        }
        let per_batch = v.batch_turns as f64 / v.batches as f64;
        assert!(v.batches > 5, "{} batches", v.batches);
        assert!(per_batch > 3.0, "{per_batch:.1} files a batch");
    }

    #[test]
    fn the_periodic_flush_writes_what_a_background_pass_left_queued() {
        // A batch ends with files still queued; the next periodic wake-up (5 s) works
        // through them whatever their age, as the kernel's kupdate work does.
        let (mut v, names, fds, _) = files_filled_until_the_first_batch(40);
        assert!(files_with_blocks(&v, &names) < 40);
        v.think(6_000_000_000);
        let mut buf = [0u8; 1];
        v.read_at(fds[0], 0, &mut buf).unwrap();
        assert_eq!(
            files_with_blocks(&v, &names),
            40,
            "written at the 5 s wake-up"
        );
        assert!(v.b_io.is_empty() && v.b_more_io.is_empty());
        // What stays dirty is what files the batch had written were given after it, in
        // the writer's last round: not yet expired, so left for later, as the kernel does.
        assert!(v.dirty_pages() < 40, "{} pages", v.dirty_pages());
    }

    #[test]
    fn a_pass_of_files_cleaned_since_they_were_queued_does_not_stop_writeback() {
        // The files a batch left queued are truncated; a writer then passes the hard limit
        // on another file. The flusher finds the queued files clean, queues a new pass at
        // once (the kernel counts a cleaned inode as progress) and the writer never returns
        // above the hard limit.
        let host = HostConfig::linux(1 << 30);
        let (mut v, _, fds, _) = files_filled_until_the_first_batch(40);
        assert!(!v.b_io.is_empty());
        for &fd in &fds {
            v.truncate(fd, 0).unwrap();
        }
        let g = v.open("g", OpenMode::create()).unwrap();
        for p in 0..80_000u64 {
            v.write_at(g, p * 4096, &[1u8; 4096]).unwrap();
            assert!(v.dirty_pages() <= host.hard_limit_pages(), "page {p}");
        }
    }

    #[test]
    fn files_dirtied_at_the_same_time_are_queued_in_the_order_they_became_dirty() {
        // d reuses a's inode number, lower than b's; b was dirtied first.
        let mut v = x25e_with(simfs::FsConfig::new(512 << 20), HostConfig::linux(1 << 30));
        let a = v.open("a", OpenMode::create()).unwrap();
        let b = v.open("b", OpenMode::create()).unwrap();
        v.write_at(a, 0, &[1u8; 4096]).unwrap();
        v.close(a);
        v.unlink("a").unwrap();
        v.write_at(b, 0, &[1u8; 4096]).unwrap();
        let d = v.open("d", OpenMode::create()).unwrap();
        v.write_at(d, 0, &[1u8; 4096]).unwrap();
        let (ib, id) = (v.fs().lookup("b").unwrap(), v.fs().lookup("d").unwrap());
        assert!(id < ib, "d reused a's number");
        assert_eq!(v.cache.dirty_files_by_age(), vec![ib, id]);
    }

    #[test]
    fn pages_under_writeback_count_against_the_limit_so_a_writer_cannot_outrun_the_drive() {
        // 64 MiB written through a 16 MiB page cache (hard limit 3.2 MiB): the writer
        // ends no earlier than the drive could take all but the last hard limit's worth.
        let mut v = cached_drive(16 << 20);
        let fd = v.open("a", OpenMode::create()).unwrap();
        let t0 = v.now_ns();
        for i in 0..256u64 {
            v.write_at(fd, i * (256 << 10), &[4u8; 256 << 10]).unwrap();
        }
        let writer_ns = v.now_ns() - t0;
        v.fsync(fd).unwrap();
        let all_ns = v.now_ns() - t0;
        let hard = HostConfig::linux(16 << 20).hard_limit_pages() * PAGE_BYTES;
        let drained = (64u64 << 20) - hard;
        assert!(
            writer_ns as f64 >= all_ns as f64 * drained as f64 / (64u64 << 20) as f64 * 0.95,
            "the writer ran ahead of the drive: {writer_ns} ns of {all_ns} ns"
        );
        assert_eq!(drive_writes(&v).1, 64 << 20);
    }

    #[test]
    fn delayed_allocation_gives_interleaved_small_appends_few_extents() {
        let extents = |buffered: bool| {
            let mut v = cached_drive(1 << 30);
            let mode = OpenMode::create().direct(!buffered);
            let (a, b) = (v.open("a", mode).unwrap(), v.open("b", mode).unwrap());
            for i in 0..64u64 {
                v.write_at(a, i * 4096, &[1u8; 4096]).unwrap();
                v.write_at(b, i * 4096, &[2u8; 4096]).unwrap();
            }
            v.sync_files(&[a, b], true).unwrap();
            let fs = v.fs();
            let n = |name| fs.extents(fs.lookup(name).unwrap()).unwrap().len();
            (n("a"), n("b"))
        };
        assert_eq!(
            extents(true),
            (1, 1),
            "allocated at writeback, file by file"
        );
        let (a, b) = extents(false);
        assert!(
            a > 30 && b > 30,
            "O_DIRECT appends interleave: {a} and {b} extents"
        );
    }

    #[test]
    fn a_file_removed_before_writeback_never_reaches_the_drive() {
        let mut v = cached_drive(1 << 30);
        let fd = v.open("tmp", OpenMode::create()).unwrap();
        v.write_at(fd, 0, &vec![5u8; 1 << 20]).unwrap();
        v.close(fd);
        v.unlink("tmp").unwrap();
        v.sync_dir().unwrap();
        assert_eq!(drive_writes(&v), (0, 0));
        assert_eq!(v.dirty_pages(), 0);
    }

    /// simfs made with `cfg` on a 1 GiB X25-E, behind `host`.
    fn x25e_with(cfg: simfs::FsConfig, host: HostConfig) -> SimVfs {
        let dev = Preset::load("x25e")
            .unwrap()
            .with_capacity(1 << 30)
            .build()
            .unwrap();
        SimVfs::with_host(SimFs::mkfs(Timed::new(dev), cfg).unwrap(), host)
    }

    /// simfs with ext4's journal-time discard on a 1 GiB X25-E, behind `host`.
    fn journal_drive(host: HostConfig) -> SimVfs {
        let mut cfg = simfs::FsConfig::new(512 << 20);
        cfg.discard = simfs::DiscardMode::Journal;
        x25e_with(cfg, host)
    }

    #[test]
    fn scheduled_commits_come_after_as_many_requests_as_asked() {
        let mut v = journal_drive(HostConfig {
            journal_commit_after_requests: vec![4],
            ..HostConfig::direct_io()
        });
        v.start_measuring();
        let fd = v.open("a", OpenMode::create()).unwrap();
        v.write_at(fd, 0, &[1u8; 8192]).unwrap();
        v.close(fd);
        v.unlink("a").unwrap();
        // However long it waits, no timed commit: only the schedule's.
        v.think(60_000_000_000);
        let g = v.open("b", OpenMode::create()).unwrap();
        for i in 0..2 {
            v.write_at(g, i * 8192, &[2u8; 8192]).unwrap();
        }
        assert_eq!(v.fs().stats().trim_commands, 0, "3 requests: not yet");
        v.write_at(g, 2 * 8192, &[2u8; 8192]).unwrap();
        v.write_at(g, 3 * 8192, &[2u8; 8192]).unwrap();
        assert_eq!(v.fs().stats().trim_commands, 1, "after the 4th: a's blocks");
    }

    #[test]
    fn scheduled_commits_come_after_as_many_unlinks_as_asked() {
        // Commits after the 2nd and the 3rd unlink: the first discards the two files freed
        // before it, the second the third; the fourth file's blocks wait for a sync.
        let mut v = journal_drive(HostConfig {
            journal_commit_after_unlinks: vec![2, 3],
            ..HostConfig::direct_io()
        });
        v.start_measuring();
        let files = ["a", "b", "c", "d"];
        for (i, name) in files.iter().enumerate() {
            let fd = v.open(name, OpenMode::create()).unwrap();
            v.write_at(fd, 0, &vec![1u8; 8192 * (i + 1)]).unwrap();
            v.close(fd);
        }
        let trims = |v: &SimVfs| v.fs().stats().trim_commands;
        v.unlink("a").unwrap();
        v.think(60_000_000_000); // no timed commit
        v.unlink("b").unwrap();
        assert_eq!(
            trims(&v),
            0,
            "the commit comes at the next call after the 2nd unlink"
        );
        v.unlink("c").unwrap();
        let after_two = trims(&v);
        assert!(
            after_two >= 1,
            "a's and b's blocks discarded before c's unlink"
        );
        let probe = v.open("probe", OpenMode::create()).unwrap();
        v.write_at(probe, 0, &[3u8; 8192]).unwrap();
        assert!(
            trims(&v) > after_two,
            "c's blocks at the commit after the 3rd unlink"
        );
        let after_three = trims(&v);
        v.unlink("d").unwrap();
        v.think(60_000_000_000);
        v.write_at(probe, 8192, &[3u8; 8192]).unwrap();
        assert_eq!(trims(&v), after_three, "no commit scheduled after the 4th");
        v.sync_dir().unwrap();
        assert!(trims(&v) > after_three, "d's blocks at the sync");
    }

    #[test]
    fn journal_commits_every_5_s_discard_what_was_freed_in_the_background() {
        let mut v = journal_drive(HostConfig::linux(1 << 30));
        for name in ["a", "b"] {
            let fd = v.open(name, OpenMode::create()).unwrap();
            v.write_at(fd, 0, &[1u8; 1 << 20]).unwrap();
            v.fsync(fd).unwrap();
            v.close(fd);
        }
        v.think(6_000_000_000); // past a timed commit: nothing to discard yet
        v.unlink("a").unwrap();
        v.unlink("b").unwrap();
        assert_eq!(v.fs().stats().trim_commands, 0, "not before the commit");
        v.think(5_000_000_000);
        let before = v.now_ns();
        let fd = v.open("c", OpenMode::create()).unwrap();
        v.write_at(fd, 0, &[2u8; 4096]).unwrap();
        assert_eq!(
            v.fs().stats().trim_commands,
            1,
            "one merged TRIM after the commit"
        );
        assert_eq!(v.now_ns(), before, "the commit ran in the background");
    }

    #[test]
    fn readahead_turns_a_sequential_read_into_ever_larger_requests() {
        let mut v = cached_drive(1 << 30);
        let fd = v.open("f", OpenMode::create().direct(true)).unwrap();
        v.write_at(fd, 0, &vec![9u8; 4 << 20]).unwrap();
        v.close(fd);
        v.fs_mut().device_mut().record = true;
        let fd = v.open("f", OpenMode::existing()).unwrap();
        let mut buf = [0u8; 4096];
        for i in 0..1024u64 {
            assert_eq!(v.read_at(fd, i * 4096, &mut buf).unwrap(), 4096);
        }
        let reads: Vec<u64> = v
            .fs()
            .device()
            .requests
            .iter()
            .filter(|r| r.cmd.op == flash::Op::Read)
            .map(|r| r.cmd.len_bytes)
            .collect();
        // Growing windows (the last one is cut at the end of the file), each page read
        // once.
        let grown = &reads[..reads.len() - 1];
        assert!(grown.windows(2).all(|w| w[1] >= w[0]), "{reads:?}");
        assert_eq!(reads[0], 16384, "the first window: 4 pages");
        assert_eq!(grown.last(), Some(&(128 << 10)), "then read_ahead_kb");
        assert_eq!(reads.iter().sum::<u64>(), 4 << 20, "{reads:?}");
        assert!(reads.len() < 50, "{} requests for 1,024 reads", reads.len());
        // Without the cache every 4 KiB read is a request.
        let mut plain = SimVfs::new(drive().into_fs());
        let fd = plain.open("f", OpenMode::create()).unwrap();
        plain.write_at(fd, 0, &vec![9u8; 1 << 20]).unwrap();
        for i in 0..256u64 {
            plain.read_at(fd, i * 4096, &mut buf).unwrap();
        }
        assert_eq!(plain.fs().stats().data_read_requests, 256);
    }

    #[test]
    fn a_blocking_trim_delays_a_read_behind_it_a_queued_one_does_not() {
        // The journal's commit sends its discards in the background; a read right after
        // waits for them only when TRIM is not queued (SATA before NCQ TRIM, the MX500).
        let read_latency = |queued: bool| {
            let mut p = Preset::load("mx500").unwrap().with_capacity(4 << 30);
            let trim = &mut p.ssd_config_mut().unwrap().trim;
            trim.queued = queued;
            // Only the queue's rule: no settling work that delays any command after a TRIM.
            trim.settle_ns = 0;
            let mut cfg = simfs::FsConfig::new(2 << 30);
            cfg.discard = simfs::DiscardMode::Journal;
            let fs = SimFs::mkfs(Timed::new(p.build().unwrap()), cfg).unwrap();
            let mut v = SimVfs::with_host(fs, HostConfig::linux(1 << 30));
            let keep = v.open("keep", OpenMode::create().direct(true)).unwrap();
            v.write_at(keep, 0, &[1u8; 4096]).unwrap();
            for i in 0..64 {
                let name = format!("f{i}");
                let fd = v.open(&name, OpenMode::create().direct(true)).unwrap();
                v.write_at(fd, 0, &[2u8; 65536]).unwrap();
                v.close(fd);
            }
            v.fsync(keep).unwrap();
            // Every other file: 32 separate extents to discard.
            for i in (0..64).step_by(2) {
                v.unlink(&format!("f{i}")).unwrap();
            }
            v.think(5_000_000_000);
            let t0 = v.now_ns();
            let mut buf = [0u8; 4096];
            v.read_at(keep, 0, &mut buf).unwrap(); // the commit runs first, in the background
            assert!(v.fs().stats().trim_commands > 1);
            v.now_ns() - t0
        };
        let (queued, blocking) = (read_latency(true), read_latency(false));
        assert!(
            blocking > queued + 1_000_000,
            "a read behind blocking TRIMs waits for them: {blocking} ns vs {queued} ns"
        );
    }
}
