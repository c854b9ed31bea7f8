//! Where spill files live: the narrow storage interface the join uses ([`Store`]), and
//! its one implementation, [`VfsStore`], on any file system of the `vfs` crate: spill
//! files on one, inputs on it or on others. Named by file system:
//! - [`OsStore`]: real files in a directory (optional O_DIRECT, real `fallocate`,
//!   `unlink`), removed on every exit path, with a lock that tells live runs from killed
//!   ones and a cap on the bytes the spill files may hold;
//! - [`SimStore`]: simfs on a simulated drive behind the host path, in virtual time, so
//!   every allocation and discard policy of simfs applies; several users in threads share
//!   one drive through [`vfs::Turns`] ([`UserStore`]);
//! - [`MemStore`]: files in RAM (tests, and the join's own speed without I/O).

use crate::JoinError;
use flash::{AnyDevice, Device};
use rustc_hash::FxHashMap;
use simfs::{FsConfig, SimFs, Timed};
use slotlist::SlotList;
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use trace::Cancel;
use vfs::{Fd, MemVfs, OpenMode, OsVfs, SimVfs, UserVfs, Vfs, VfsError};

/// A file handle of a store.
pub type FileId = u32;

/// Counters of a store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub spill_files: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub write_calls: u64,
    pub read_calls: u64,
    pub fallocate_calls: u64,
    pub deletes: u64,
}

/// The storage calls of the join.
pub trait Store {
    /// A new, empty spill file.
    fn create(&mut self) -> Result<FileId, JoinError>;
    /// Sets the spill file's write-life hint ([`vfs::Vfs::set_write_hint`]): where its data
    /// goes on a drive with placement. Advice only: nothing else changes. The default
    /// ignores it.
    fn set_hint(&mut self, _f: FileId, _hint: vfs::WriteHint) -> Result<(), JoinError> {
        Ok(())
    }
    /// Preallocates `bytes` for the file (contiguously where the backend can).
    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError>;
    /// Appends `data` at the end of the file.
    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError>;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at the end).
    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError>;
    /// `read_at` for a caller that ignores the bytes (a replay of recorded calls): the
    /// same count, time and state, `buf` left with unspecified bytes ([`Vfs::read_at_unseen`]).
    fn read_at_unseen(
        &mut self,
        f: FileId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, JoinError> {
        self.read_at(f, offset, buf)
    }
    /// Logical length of the file.
    fn len(&self, f: FileId) -> u64;
    /// Deletes a spill file.
    fn delete(&mut self, f: FileId) -> Result<(), JoinError>;
    /// Time since the store's clock started: wall clock (os, mem) or virtual (sim).
    fn elapsed_ns(&self) -> u64;
    /// Charges `ns` of computation (virtual time on a simulated drive; nothing on real
    /// files, where computation takes real time).
    fn compute(&mut self, ns: u64);
    fn stats(&self) -> StoreStats;
    /// Passes spill file `f` to `to`, another handle on the same files (a thread of the
    /// parallel join): `to` opens it, owns it from then on (deletes it, removes it on
    /// drop), and returns its id there.
    fn hand_over(&mut self, f: FileId, to: &mut Self) -> Result<FileId, JoinError>
    where
        Self: Sized;
    /// The thread using this store waits at a barrier: it makes no call until the other
    /// threads' work ends (see [`vfs::Vfs::park`]).
    fn park(&mut self) {}
    /// The thread using this store leaves the barrier (see [`vfs::Vfs::resume`]).
    fn resume(&mut self) {}
    /// Waits until `elapsed_ns` (a barrier's time): virtual clocks move on; real ones
    /// waited already.
    fn wait_until(&mut self, elapsed_ns: u64) {
        let now = self.elapsed_ns();
        if elapsed_ns > now {
            self.idle(elapsed_ns - now);
        }
    }
    /// Waits `ns` without computing (virtual time; nothing on real files). Differs from
    /// [`Store::compute`] only on a host with a core limit, where waiting takes no core.
    fn idle(&mut self, ns: u64) {
        self.compute(ns);
    }
}

// ---------------------------------------------------------------------------------------
// Spill-file names and run locks in a real directory

const ALIGN: u64 = 4096;
const SPILL_PREFIX: &str = "flashlab-spill-";
/// How many reads and writes a store makes between looks at its thread's cancellation
/// token (a thread-local read; thousands of calls are well under a second of a join).
const INTERRUPT_CHECK_CALLS: u64 = 4096;

/// The lock file of a run: `flashlab-spill-<run>.lock`, flock'ed by the run for as long as
/// it lives. Its spill files are `flashlab-spill-<run>-<n>.tmp`.
fn lock_name(run: &str) -> String {
    format!("{SPILL_PREFIX}{run}.lock")
}

/// A name no other run has: process id, clock and a per-process random key, hashed.
fn unique_run_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    format!("{:016x}", h.finish())
}

/// Tries to take the exclusive flock of `file` without waiting: Ok(true) if taken,
/// Ok(false) if another open file (a live run) holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: the descriptor is open for the duration of the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// What a cleaner finds of a run.
enum RunState {
    /// A live run holds its lock.
    Live,
    /// Over: its lock file is gone, or the cleaner now holds its lock (until dropped).
    Over(Option<File>),
}

/// Liveness is the lock, never a process id: ids repeat across PID namespaces and reboots.
fn run_state(dir: &Path, run: &str) -> std::io::Result<RunState> {
    match File::open(dir.join(lock_name(run))) {
        Ok(f) if try_lock(&f)? => Ok(RunState::Over(Some(f))),
        Ok(_) => Ok(RunState::Live),
        // A run makes its lock before its first spill file and removes it after the last:
        // spill files without a lock are a killed run's (or an older version's).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(RunState::Over(None)),
        Err(e) => Err(e),
    }
}

/// Removes spill files left in `dir` by runs that are over (killed before they could
/// clean up; as PostgreSQL clears its temp directory at start); returns how many.
pub fn remove_stale_spill_files(dir: &Path) -> Result<u64, JoinError> {
    let err = |e: std::io::Error| JoinError::Dir {
        dir: dir.display().to_string(),
        msg: e.to_string(),
    };
    let mut runs: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SPILL_PREFIX)) else {
            continue;
        };
        let run = if let Some(r) = rest.strip_suffix(".lock") {
            r
        } else if let Some(r) = rest.strip_suffix(".tmp").and_then(|r| r.rsplit_once('-')) {
            r.0
        } else {
            continue;
        };
        runs.entry(run.to_string()).or_default().push(entry.path());
    }
    let mut removed = 0;
    for (run, paths) in runs {
        // The lock stays held while the run's files go.
        let RunState::Over(_held) = run_state(dir, &run).map_err(err)? else {
            continue;
        };
        for p in paths
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "tmp"))
        {
            if std::fs::remove_file(p).is_ok() {
                removed += 1;
            }
        }
        let _ = std::fs::remove_file(dir.join(lock_name(&run)));
    }
    Ok(removed)
}

/// The lock a live run holds on its lock file (see [`lock_name`]).
struct RunLock {
    path: PathBuf,
    _file: File,
}

impl RunLock {
    /// Makes and locks the run's lock file: created and locked under a temporary name,
    /// then renamed, so a cleaner never sees it unlocked.
    fn take(dir: &Path, run: &str) -> std::io::Result<RunLock> {
        let path = dir.join(lock_name(run));
        let fresh = dir.join(format!(".{}.new", lock_name(run)));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&fresh)?;
        if !try_lock(&file)? {
            return Err(std::io::Error::other("a fresh lock file is locked already"));
        }
        std::fs::rename(&fresh, &path)?;
        Ok(RunLock { path, _file: file })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One open file of a [`VfsStore`].
struct StoreFile {
    /// None: on the spill file system; Some(i): on input file system `i`.
    input_fs: Option<usize>,
    fd: Fd,
    name: String,
    /// Logical length (with O_DIRECT the file's tail is padded to 4 KiB).
    len: u64,
    /// Bytes on disk (written or preallocated).
    disk_bytes: u64,
    spill: bool,
    /// Whether `fd` is open (a spill file closed by [`KernelFds`] is reopened by name
    /// when next used).
    open: bool,
}

/// PostgreSQL's virtual file descriptors (src/backend/storage/file/fd.c): a backend keeps
/// at most `max_safe_fds` kernel descriptors open (`max_files_per_process` less those
/// already open and `NUM_RESERVED_FDS`), closing the least recently used file's when it
/// needs another (`ReleaseLruFile`) and reopening a closed file by name when it is next
/// read or written (`FileAccess`). A join with more batch files than that closes and
/// reopens them all the time, and ext4 allocates for a file nobody has open differently
/// (`vfs::SimVfs` tells simfs). Spill files only: the inputs are not the join's files.
#[derive(Debug, Clone)]
struct KernelFds {
    /// Spill files open at once.
    limit: usize,
    /// The open spill files, the least recently used first.
    lru: SlotList<FileId>,
    /// Each open spill file's slot in `lru`.
    slot_of: FxHashMap<FileId, u32>,
    /// Closes made to stay within the limit (PostgreSQL's `LruDelete`).
    closes: u64,
}

/// Spill files on the file system `V`; inputs on it or on other file systems.
pub struct VfsStore<V: Vfs> {
    /// The spill files' file system.
    pub vfs: V,
    /// File systems holding inputs elsewhere (another directory, or bytes off the drive).
    inputs: Vec<Box<dyn Vfs + Send>>,
    files: FxHashMap<FileId, StoreFile>,
    /// Spill files are `<prefix><n>.tmp`.
    prefix: String,
    /// Where the spill files are, for messages.
    place: String,
    /// O_DIRECT: spill files opened with it, appends padded to whole blocks.
    direct: bool,
    cap_bytes: Option<u64>,
    /// When the cap is a thread's share: the run's cap and its threads (for messages).
    cap_share: Option<(u64, usize)>,
    held_bytes: u64,
    /// Real directories: the spill directory (drop removes the files by path, even after
    /// an interrupt) and the run's lock, released after them.
    os_dir: Option<PathBuf>,
    _lock: Option<RunLock>,
    next: FileId,
    start_ns: u64,
    stats: StoreStats,
    /// Spill files of earlier, killed runs removed at start.
    pub stale_removed: u64,
    /// At most this many spill files open at once (None: all stay open).
    kernel_fds: Option<KernelFds>,
}

/// Real files in a directory.
pub type OsStore = VfsStore<OsVfs>;
/// simfs on a simulated drive.
pub type SimStore = VfsStore<SimVfs>;
/// One user's store on a simulated drive shared by several threads.
pub type UserStore = VfsStore<UserVfs<SimVfs>>;
/// Files in RAM.
pub type MemStore = VfsStore<MemVfs>;

impl<V: Vfs> VfsStore<V> {
    /// `read_at`; `seen`: the caller looks at the bytes (false: a replay, which lets a
    /// generated input skip making them).
    fn read(
        &mut self,
        f: FileId,
        offset: u64,
        buf: &mut [u8],
        seen: bool,
    ) -> Result<usize, JoinError> {
        let (input_fs, spill, len) = {
            let file = self.file(f);
            (file.input_fs, file.spill, file.len)
        };
        if offset >= len {
            return Ok(0);
        }
        self.check_interrupt()?;
        let fd = if spill {
            self.access(f)?
        } else {
            self.file(f).fd
        };
        let n = (len - offset).min(buf.len() as u64) as usize;
        let fs = self.fs_of(input_fs);
        let got = if seen {
            fs.read_at(fd, offset, &mut buf[..n])
        } else {
            fs.read_at_unseen(fd, offset, &mut buf[..n])
        }
        .map_err(|e| self.vfs_error(e))?;
        self.stats.bytes_read += got as u64;
        self.stats.read_calls += 1;
        Ok(got)
    }

    /// Spill files on `vfs`, at most `cap_bytes` of them (None: no cap); `place` names
    /// where they are in messages. The clock starts now.
    pub fn on(vfs: V, place: &str, cap_bytes: Option<u64>) -> VfsStore<V> {
        let start_ns = vfs.now_ns();
        VfsStore {
            vfs,
            inputs: Vec::new(),
            files: FxHashMap::default(),
            prefix: SPILL_PREFIX.into(),
            place: place.into(),
            direct: false,
            cap_bytes,
            cap_share: None,
            held_bytes: 0,
            os_dir: None,
            _lock: None,
            next: 0,
            start_ns,
            stats: StoreStats::default(),
            stale_removed: 0,
            kernel_fds: None,
        }
    }

    /// Keeps at most `limit` spill files open at once, as PostgreSQL's virtual file
    /// descriptors do ([`KernelFds`]): the least recently used one is closed when another
    /// is needed and reopened when next used.
    pub fn with_open_file_limit(mut self, limit: usize) -> VfsStore<V> {
        self.kernel_fds = Some(KernelFds {
            limit: limit.max(1),
            lru: SlotList::new(),
            slot_of: FxHashMap::default(),
            closes: 0,
        });
        self
    }

    /// Spill files open now.
    pub fn open_spill_files(&self) -> usize {
        self.files.values().filter(|f| f.spill && f.open).count()
    }

    /// Closes made to keep within [`VfsStore::with_open_file_limit`]'s limit so far.
    pub fn limit_closes(&self) -> u64 {
        self.kernel_fds.as_ref().map_or(0, |k| k.closes)
    }

    /// Spill file `f`'s descriptor for a call on it: reopened if the limit closed it, made
    /// the most recently used, and the least recently used others closed past the limit.
    fn access(&mut self, f: FileId) -> Result<Fd, JoinError> {
        if self.kernel_fds.is_none() {
            return Ok(self.file(f).fd);
        }
        let file = self
            .files
            .get(&f)
            .expect("a file id handed out by this store");
        if !file.open {
            let name = file.name.clone();
            let fd = self
                .vfs
                .open(&name, OpenMode::existing().direct(self.direct))
                .map_err(|e| self.vfs_error(e))?;
            let file = self.files.get_mut(&f).expect("checked");
            file.fd = fd;
            file.open = true;
        }
        // Open: now the most recently used (a file that failed to reopen stays out).
        let k = self.kernel_fds.as_mut().expect("checked");
        match k.slot_of.get(&f) {
            // (Already the most recently used: a file read or written call after call.)
            Some(&slot) if k.lru.back() == Some(slot) => return Ok(self.file(f).fd),
            Some(&slot) => k.lru.move_to_back(slot),
            None => {
                let slot = k.lru.push_back(f);
                k.slot_of.insert(f, slot);
                self.release_lru();
            }
        }
        Ok(self.file(f).fd)
    }

    /// Closes the least recently used open spill files until at most the limit are open.
    fn release_lru(&mut self) {
        let Some(k) = self.kernel_fds.as_mut() else {
            return;
        };
        while k.lru.len() > k.limit {
            let (_, victim) = k.lru.pop_front().expect("more than the limit");
            k.slot_of.remove(&victim);
            k.closes += 1;
            if let Some(file) = self.files.get_mut(&victim) {
                self.vfs.close(file.fd);
                file.open = false;
            }
        }
    }

    /// Forgets spill file `f` in the open-file limit's order (it is being removed).
    fn forget(&mut self, f: FileId) {
        if let Some(k) = self.kernel_fds.as_mut() {
            if let Some(slot) = k.slot_of.remove(&f) {
                k.lru.remove(slot);
            }
        }
    }

    /// Names spill files `<prefix><n>.tmp` (several stores sharing one file system need
    /// different prefixes).
    pub fn with_prefix(mut self, prefix: &str) -> VfsStore<V> {
        self.prefix = prefix.into();
        self
    }

    /// Says that this store's cap is one of `threads` equal shares of a run's cap of
    /// `total_bytes` (its error then says so).
    pub fn with_cap_share(mut self, total_bytes: u64, threads: usize) -> VfsStore<V> {
        if threads > 1 {
            self.cap_share = Some((total_bytes, threads));
        }
        self
    }

    fn add(&mut self, file: StoreFile) -> FileId {
        let id = self.next;
        self.next += 1;
        self.files.insert(id, file);
        id
    }

    /// Opens file `name` of `fs` read-only as an input (never deleted).
    pub fn add_input_on(
        &mut self,
        mut fs: Box<dyn Vfs + Send>,
        name: &str,
    ) -> Result<FileId, JoinError> {
        let fd = fs
            .open(name, OpenMode::read_only().direct(self.direct))
            .map_err(|e| self.vfs_error(e))?;
        let len = fs.len(fd);
        self.inputs.push(fs);
        Ok(self.add(StoreFile {
            input_fs: Some(self.inputs.len() - 1),
            fd,
            name: name.into(),
            len,
            disk_bytes: len,
            spill: false,
            open: true,
        }))
    }

    /// Opens file `name` of the spill file system read-only as an input.
    pub fn open_input(&mut self, name: &str) -> Result<FileId, JoinError> {
        let fd = self
            .vfs
            .open(name, OpenMode::read_only().direct(self.direct))
            .map_err(|e| self.vfs_error(e))?;
        let len = self.vfs.len(fd);
        Ok(self.add(StoreFile {
            input_fs: None,
            fd,
            name: name.into(),
            len,
            disk_bytes: len,
            spill: false,
            open: true,
        }))
    }

    /// Writes `bytes` as file `name` of the spill file system (timed there: start the
    /// clock afterwards) and opens it as an input.
    pub fn add_input(&mut self, name: &str, bytes: &[u8]) -> Result<FileId, JoinError> {
        let fd = self
            .vfs
            .open(name, OpenMode::create_new())
            .map_err(|e| self.vfs_error(e))?;
        self.vfs
            .write_at(fd, 0, bytes)
            .and_then(|_| self.vfs.sync_files(&[fd], true))
            .map_err(|e| self.vfs_error(e))?;
        self.vfs.close(fd);
        self.open_input(name)
    }

    /// Adds an input holding `bytes` off the spill file system, in memory and shared (no
    /// copy): reading it costs no drive time, as a database on another device would.
    pub fn add_memory_input(
        &mut self,
        name: &str,
        bytes: std::sync::Arc<Vec<u8>>,
    ) -> Result<FileId, JoinError> {
        let mut shelf = vfs::Shelf::new();
        shelf.insert(name, bytes);
        self.add_input_on(Box::new(shelf), name)
    }

    /// Adds an input whose bytes are made as they are read (`factory` gives each open its
    /// own [`vfs::FileSource`]), off the spill file system: for inputs larger than memory.
    pub fn add_generated_input(
        &mut self,
        name: &str,
        factory: vfs::SourceFactory,
    ) -> Result<FileId, JoinError> {
        let mut shelf = vfs::Shelf::new();
        shelf.insert_source(name, factory);
        self.add_input_on(Box::new(shelf), name)
    }

    /// Measures from now on.
    pub fn restart_clock(&mut self) {
        self.start_ns = self.vfs.now_ns();
    }

    /// Spill files that still exist.
    pub fn live_spill_files(&self) -> usize {
        self.files.values().filter(|f| f.spill).count()
    }

    fn file(&self, f: FileId) -> &StoreFile {
        self.files
            .get(&f)
            .expect("a file id handed out by this store")
    }

    fn fs_of(&mut self, input_fs: Option<usize>) -> &mut dyn Vfs {
        match input_fs {
            None => &mut self.vfs,
            Some(i) => self.inputs[i].as_mut(),
        }
    }

    /// The file of spill file `f` (an input is an error).
    fn spill_file(&self, f: FileId, what: &str) -> Result<&StoreFile, JoinError> {
        let file = self.file(f);
        if file.spill {
            Ok(file)
        } else {
            Err(JoinError::Config(format!(
                "cannot {what} {}: an input, not a spill file",
                file.name
            )))
        }
    }

    /// Every [`INTERRUPT_CHECK_CALLS`] reads and writes: whether this thread's token
    /// ([`trace::cancel::requested`]) has been cancelled. Real files check theirs on every
    /// call ([`vfs::OsVfs::with_cancel`]); this is how a join on a simulated drive, which
    /// makes no system call, stops within a moment of an interrupt.
    fn check_interrupt(&self) -> Result<(), JoinError> {
        let calls = self.stats.read_calls + self.stats.write_calls;
        if calls.is_multiple_of(INTERRUPT_CHECK_CALLS) && trace::cancel::requested() {
            return Err(JoinError::Interrupted);
        }
        Ok(())
    }

    fn vfs_error(&self, e: VfsError) -> JoinError {
        match e {
            VfsError::Interrupted => JoinError::Interrupted,
            VfsError::DiskFull { path } => JoinError::DiskFull {
                dir: self.place.clone(),
                path,
            },
            VfsError::Io { path, source } => JoinError::Io { path, source },
            other => JoinError::Io {
                path: self.place.clone(),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }

    fn charge(&mut self, more: u64) -> Result<(), JoinError> {
        if let Some(cap) = self.cap_bytes {
            if self.held_bytes + more > cap {
                return Err(JoinError::DiskCap {
                    who: if self.cap_share.is_some() {
                        "this thread"
                    } else {
                        "the run"
                    },
                    needed_bytes: self.held_bytes + more,
                    cap_bytes: cap,
                    share: self.cap_share.map_or(String::new(), |(total, threads)| {
                        format!(" (its share: the run's cap of {total} bytes split among {threads} threads)")
                    }),
                });
            }
        }
        self.held_bytes += more;
        Ok(())
    }
}

impl VfsStore<OsVfs> {
    /// Spill files in the directory `dir` (it must exist), named for a fresh run under
    /// its lock; stale spill files of runs that are over are removed first. `direct` uses
    /// O_DIRECT; `cap_bytes` limits the bytes spill files hold; once `cancel` is
    /// cancelled every call fails with [`JoinError::Interrupted`] (and dropping the store
    /// removes its files).
    pub fn in_dir(
        dir: &Path,
        direct: bool,
        cap_bytes: Option<u64>,
        cancel: Cancel,
    ) -> Result<OsStore, JoinError> {
        let dir_error = |msg: String| JoinError::Dir {
            dir: dir.display().to_string(),
            msg,
        };
        let meta = std::fs::metadata(dir).map_err(|e| {
            dir_error(if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist (create it first)".into()
            } else {
                e.to_string()
            })
        })?;
        if !meta.is_dir() {
            return Err(dir_error("is not a directory".into()));
        }
        let stale_removed = remove_stale_spill_files(dir)?;
        let run = unique_run_name();
        let lock = RunLock::take(dir, &run)
            .map_err(|e| dir_error(format!("cannot make the run's lock file: {e}")))?;
        let spill = OsVfs::new(dir)
            .map_err(|e| dir_error(e.to_string()))?
            .with_cancel(cancel);
        let mut store = VfsStore::on(spill, &dir.display().to_string(), cap_bytes);
        store.prefix = format!("{SPILL_PREFIX}{run}-");
        store.direct = direct;
        store.os_dir = Some(dir.to_path_buf());
        store._lock = Some(lock);
        store.stale_removed = stale_removed;
        Ok(store)
    }

    /// Opens the real file at `path` read-only as an input.
    pub fn open_input_path(&mut self, path: &Path) -> Result<FileId, JoinError> {
        let io = |e: &dyn std::fmt::Display| JoinError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e.to_string()),
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| io(&"not a file name"))?;
        let mut fs = OsVfs::new(parent).map_err(|e| io(&e))?;
        if let Some(c) = self.vfs.cancel() {
            fs = fs.with_cancel(c.clone());
        }
        self.add_input_on(Box::new(fs), name)
    }
}

impl VfsStore<SimVfs> {
    /// simfs of `fs_cfg.size_bytes` on `dev`, behind the host path `host`.
    pub fn simulated(
        dev: AnyDevice,
        fs_cfg: FsConfig,
        host: vfs::HostConfig,
    ) -> Result<SimStore, JoinError> {
        let fs = SimFs::mkfs(Timed::new(dev), fs_cfg)?;
        Ok(VfsStore::on(
            SimVfs::with_host(fs, host),
            "the simulated drive",
            None,
        ))
    }

    /// Starts measuring from now, once the drive is idle.
    pub fn start_clock(&mut self) {
        self.vfs.start_measuring();
        self.restart_clock();
    }

    pub fn device_stats(&self) -> flash::DeviceStats {
        self.vfs.fs().device().dev.stats()
    }

    /// Finishes deferred discards (`fstrim` for the deferred mode) and background work;
    /// returns the virtual time since the clock started at which the drive is idle.
    pub fn finish(&mut self) -> Result<u64, JoinError> {
        self.vfs.fs_mut().fstrim()?;
        let dev = self.vfs.fs_mut().device_mut();
        let idle = dev.dev.settle().max(dev.now_ns());
        Ok(idle - self.start_ns)
    }
}

impl Default for VfsStore<MemVfs> {
    fn default() -> Self {
        VfsStore::on(MemVfs::volatile(), "memory", None)
    }
}

impl<V: Vfs> Store for VfsStore<V> {
    fn create(&mut self) -> Result<FileId, JoinError> {
        let name = format!("{}{}.tmp", self.prefix, self.next);
        let fd = self
            .vfs
            .open(&name, OpenMode::create_new().direct(self.direct))
            .map_err(|e| self.vfs_error(e))?;
        self.stats.spill_files += 1;
        let id = self.add(StoreFile {
            input_fs: None,
            fd,
            name,
            len: 0,
            disk_bytes: 0,
            spill: true,
            open: true,
        });
        if self.kernel_fds.is_some() {
            self.access(id)?;
        }
        Ok(id)
    }

    fn set_hint(&mut self, f: FileId, hint: vfs::WriteHint) -> Result<(), JoinError> {
        self.spill_file(f, "set_hint")?;
        let fd = self.access(f)?;
        self.vfs
            .set_write_hint(fd, hint)
            .map_err(|e| self.vfs_error(e))
    }

    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        let disk = self.spill_file(f, "fallocate")?.disk_bytes;
        let fd = self.access(f)?;
        let more = bytes.saturating_sub(disk);
        self.charge(more)?;
        if let Err(e) = self.vfs.fallocate(fd, 0, bytes) {
            self.held_bytes -= more;
            return Err(self.vfs_error(e));
        }
        let file = self.files.get_mut(&f).expect("checked");
        file.disk_bytes = file.disk_bytes.max(bytes);
        self.stats.fallocate_calls += 1;
        Ok(())
    }

    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        self.check_interrupt()?;
        let file = self.spill_file(f, "append to")?;
        let (len, disk) = (file.len, file.disk_bytes);
        let fd = self.access(f)?;
        if self.direct && !len.is_multiple_of(ALIGN) {
            return Err(JoinError::Config(
                "with O_DIRECT, only a file's last append may be shorter than a multiple of 4 KiB"
                    .into(),
            ));
        }
        let end = len + data.len() as u64;
        let end_on_disk = if self.direct {
            end.div_ceil(ALIGN) * ALIGN
        } else {
            end
        };
        self.charge(end_on_disk.saturating_sub(disk))?;
        let res = if end_on_disk > end {
            // The last block, padded with zeros (O_DIRECT writes whole blocks).
            let mut padded = data.to_vec();
            padded.resize((end_on_disk - len) as usize, 0);
            self.vfs.write_at(fd, len, &padded)
        } else {
            self.vfs.write_at(fd, len, data)
        };
        res.map_err(|e| self.vfs_error(e))?;
        let file = self.files.get_mut(&f).expect("checked");
        file.len = end;
        file.disk_bytes = file.disk_bytes.max(end_on_disk);
        self.stats.bytes_written += data.len() as u64;
        self.stats.write_calls += 1;
        Ok(())
    }

    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError> {
        self.read(f, offset, buf, true)
    }

    fn read_at_unseen(
        &mut self,
        f: FileId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, JoinError> {
        self.read(f, offset, buf, false)
    }

    fn len(&self, f: FileId) -> u64 {
        self.file(f).len
    }

    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        let file = self.spill_file(f, "delete")?;
        let (name, fd, open) = (file.name.clone(), file.fd, file.open);
        if open {
            self.vfs.close(fd);
            self.files.get_mut(&f).expect("checked").open = false;
        }
        self.forget(f);
        // The file leaves the table only once it is gone: if the unlink fails, dropping
        // the store removes it (closing again is harmless).
        self.vfs.unlink(&name).map_err(|e| self.vfs_error(e))?;
        let file = self.files.remove(&f).expect("checked");
        self.held_bytes -= file.disk_bytes;
        self.stats.deletes += 1;
        Ok(())
    }

    fn elapsed_ns(&self) -> u64 {
        self.vfs.now_ns() - self.start_ns
    }

    fn compute(&mut self, ns: u64) {
        self.vfs.think(ns);
    }

    fn idle(&mut self, ns: u64) {
        self.vfs.idle(ns);
    }

    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }

    fn hand_over(&mut self, f: FileId, to: &mut Self) -> Result<FileId, JoinError> {
        let file = self.spill_file(f, "hand over")?;
        if self.os_dir != to.os_dir || self.direct != to.direct {
            return Err(JoinError::Config(format!(
                "cannot hand {} over: the other store is in another directory or mode",
                file.name
            )));
        }
        let fd = to
            .vfs
            .open(&file.name, OpenMode::existing().direct(self.direct))
            .map_err(|e| to.vfs_error(e))?;
        let file = self.files.remove(&f).expect("checked");
        if file.open {
            self.vfs.close(file.fd);
        }
        self.forget(f);
        self.held_bytes -= file.disk_bytes;
        // The files were charged when written; the receiving store holds them beyond its
        // own cap share rather than refusing what exists already.
        to.held_bytes += file.disk_bytes;
        let id = to.add(StoreFile {
            fd,
            open: true,
            ..file
        });
        if to.kernel_fds.is_some() {
            to.access(id)?;
        }
        Ok(id)
    }

    fn park(&mut self) {
        self.vfs.park();
    }

    fn resume(&mut self) {
        self.vfs.resume();
    }
}

impl<V: Vfs> Drop for VfsStore<V> {
    /// Every exit path (an error or an interrupt included) removes the spill files still
    /// there; a real directory's lock file goes after them, when `_lock` drops.
    fn drop(&mut self) {
        for (_, f) in self.files.drain() {
            if !f.spill {
                continue;
            }
            if f.open {
                self.vfs.close(f.fd);
            }
            match &self.os_dir {
                // By path: the file system refuses calls once interrupted.
                Some(dir) => {
                    let _ = std::fs::remove_file(dir.join(&f.name));
                }
                None => {
                    let _ = self.vfs.unlink(&f.name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_stops_within_a_check_of_its_thread_s_token_being_cancelled() {
        let token = trace::Cancel::new();
        trace::cancel::with_token(&token, || {
            let mut store = MemStore::default();
            let f = store.create().unwrap();
            // Not cancelled: every call goes on.
            for _ in 0..2 * INTERRUPT_CHECK_CALLS {
                store.append(f, &[1; 8]).unwrap();
            }
            token.cancel();
            // The next look at the token stops it: within a check's worth of calls.
            let mut calls = 0;
            let err = loop {
                calls += 1;
                let r = if calls % 2 == 0 {
                    store.append(f, &[1; 8]).map(|_| 0)
                } else {
                    let mut buf = [0u8; 8];
                    store.read_at(f, 0, &mut buf)
                };
                if let Err(e) = r {
                    break e;
                }
                assert!(
                    calls <= INTERRUPT_CHECK_CALLS,
                    "still going after {calls} calls"
                );
            };
            assert!(matches!(err, JoinError::Interrupted), "{err}");
        });
        // A thread without a token never stops.
        let mut store = MemStore::default();
        let f = store.create().unwrap();
        for _ in 0..2 * INTERRUPT_CHECK_CALLS {
            store.append(f, &[1; 8]).unwrap();
        }
    }
}
