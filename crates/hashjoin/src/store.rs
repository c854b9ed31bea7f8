//! Where spill files live: the narrow storage interface the join uses, with two
//! backends. [`OsStore`]: real files in a directory (optional O_DIRECT with aligned
//! buffers, real `fallocate`, `unlink`), removed on every exit path, with a cap on the
//! bytes they may hold. [`SimStore`]: the same calls through simfs on a simulated drive,
//! timed in virtual time, so every allocation and discard policy of simfs applies.

use crate::JoinError;
use flash::{AnyDevice, Device};
use simfs::{FsConfig, SimFs, Timed};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;
use trace::Cancel;
use vfs::{Fd, OpenMode, OsVfs, SimVfs, Vfs, VfsError};

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
    /// Preallocates `bytes` for the file (contiguously where the backend can).
    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError>;
    /// Appends `data` at the end of the file.
    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError>;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (0 at the end).
    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError>;
    /// Logical length of the file.
    fn len(&self, f: FileId) -> u64;
    /// Deletes a spill file.
    fn delete(&mut self, f: FileId) -> Result<(), JoinError>;
    /// Time since the store was created: wall clock (os) or virtual (sim).
    fn elapsed_ns(&self) -> u64;
    /// Charges `ns` of computation (virtual time on the simulated backend; nothing on os,
    /// where computation takes real time).
    fn compute(&mut self, ns: u64);
    fn stats(&self) -> StoreStats;
}

// ---------------------------------------------------------------------------------------
// OS backend

const ALIGN: usize = 4096;
const SPILL_PREFIX: &str = "flashlab-spill-";

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

/// One open file of an [`OsStore`].
struct OsFile {
    /// 0: the spill directory; i > 0: the directory of input `i - 1`.
    dir: usize,
    fd: Fd,
    name: String,
    /// Logical length (with O_DIRECT the file's tail is padded to 4 KiB).
    len: u64,
    /// Bytes on disk (written or preallocated).
    disk_bytes: u64,
    spill: bool,
}

/// Real files: spill files in a directory, inputs wherever they are, all through
/// [`vfs::OsVfs`] (O_DIRECT optional).
pub struct OsStore {
    files: HashMap<FileId, OsFile>,
    /// The spill directory, then one file system per input's directory.
    dirs: Vec<OsVfs>,
    /// Released (and its file removed) after `drop` has removed the spill files.
    _lock: RunLock,
    run: String,
    cancel: Cancel,
    dir: PathBuf,
    direct: bool,
    cap_bytes: Option<u64>,
    next: FileId,
    held_bytes: u64,
    started: Instant,
    stats: StoreStats,
    /// Spill files of earlier, killed runs removed at start.
    pub stale_removed: u64,
}

impl OsStore {
    /// Opens the spill directory `dir` (it must exist), removing stale spill files of runs
    /// that are over. `direct` uses O_DIRECT; `cap_bytes` limits the bytes spill files
    /// hold; once `cancel` is cancelled every call fails with [`JoinError::Interrupted`]
    /// (and dropping the store removes its files).
    pub fn new(
        dir: &Path,
        direct: bool,
        cap_bytes: Option<u64>,
        cancel: Cancel,
    ) -> Result<OsStore, JoinError> {
        let meta = std::fs::metadata(dir).map_err(|e| JoinError::Dir {
            dir: dir.display().to_string(),
            msg: if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist (create it first)".into()
            } else {
                e.to_string()
            },
        })?;
        if !meta.is_dir() {
            return Err(JoinError::Dir {
                dir: dir.display().to_string(),
                msg: "is not a directory".into(),
            });
        }
        let stale_removed = remove_stale_spill_files(dir)?;
        let run = unique_run_name();
        let lock = RunLock::take(dir, &run).map_err(|e| JoinError::Dir {
            dir: dir.display().to_string(),
            msg: format!("cannot make the run's lock file: {e}"),
        })?;
        let spill = OsVfs::new(dir)
            .map_err(|e| JoinError::Dir {
                dir: dir.display().to_string(),
                msg: e.to_string(),
            })?
            .with_cancel(cancel.clone());
        Ok(OsStore {
            files: HashMap::new(),
            dirs: vec![spill],
            _lock: lock,
            run,
            cancel,
            dir: dir.to_path_buf(),
            direct,
            cap_bytes,
            next: 0,
            held_bytes: 0,
            started: Instant::now(),
            stats: StoreStats::default(),
            stale_removed,
        })
    }

    /// Opens an existing file read-only as an input (not a spill file: never deleted).
    pub fn open_input(&mut self, path: &Path) -> Result<FileId, JoinError> {
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
            .ok_or_else(|| io(&"not a file name"))?
            .to_string();
        let mut fs = OsVfs::new(parent)
            .map_err(|e| io(&e))?
            .with_cancel(self.cancel.clone());
        let fd = fs
            .open(&name, OpenMode::read_only().direct(self.direct))
            .map_err(|e| self.vfs_error(e))?;
        let len = fs.len(fd);
        self.dirs.push(fs);
        let id = self.next;
        self.next += 1;
        self.files.insert(
            id,
            OsFile {
                dir: self.dirs.len() - 1,
                fd,
                name,
                len,
                disk_bytes: len,
                spill: false,
            },
        );
        Ok(id)
    }

    fn file(&self, f: FileId) -> &OsFile {
        self.files
            .get(&f)
            .expect("a file id handed out by this store")
    }

    fn vfs_error(&self, e: VfsError) -> JoinError {
        match e {
            VfsError::Interrupted => JoinError::Interrupted,
            VfsError::DiskFull { path } => JoinError::DiskFull {
                dir: self.dir.display().to_string(),
                path,
            },
            VfsError::Io { path, source } => JoinError::Io { path, source },
            other => JoinError::Io {
                path: self.dir.display().to_string(),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }

    fn charge(&mut self, more: u64) -> Result<(), JoinError> {
        if let Some(cap) = self.cap_bytes {
            if self.held_bytes + more > cap {
                return Err(JoinError::DiskCap {
                    needed_bytes: self.held_bytes + more,
                    cap_bytes: cap,
                });
            }
        }
        self.held_bytes += more;
        Ok(())
    }
}

impl Store for OsStore {
    fn create(&mut self) -> Result<FileId, JoinError> {
        let id = self.next;
        self.next += 1;
        let name = format!("{SPILL_PREFIX}{}-{id}.tmp", self.run);
        let fd = self.dirs[0]
            .open(&name, OpenMode::create_new().direct(self.direct))
            .map_err(|e| self.vfs_error(e))?;
        self.files.insert(
            id,
            OsFile {
                dir: 0,
                fd,
                name,
                len: 0,
                disk_bytes: 0,
                spill: true,
            },
        );
        self.stats.spill_files += 1;
        Ok(id)
    }

    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        let (dir, fd, disk) = (self.file(f).dir, self.file(f).fd, self.file(f).disk_bytes);
        let more = bytes.saturating_sub(disk);
        self.charge(more)?;
        if let Err(e) = self.dirs[dir].fallocate(fd, 0, bytes) {
            self.held_bytes -= more;
            return Err(self.vfs_error(e));
        }
        let file = self.files.get_mut(&f).expect("checked");
        file.disk_bytes = file.disk_bytes.max(bytes);
        self.stats.fallocate_calls += 1;
        Ok(())
    }

    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        let (dir, fd, len, disk) = {
            let file = self.file(f);
            (file.dir, file.fd, file.len, file.disk_bytes)
        };
        let align = ALIGN as u64;
        if self.direct && !len.is_multiple_of(align) {
            return Err(JoinError::Config(
                "with O_DIRECT, only a file's last append may be shorter than a multiple of 4 KiB"
                    .into(),
            ));
        }
        let end = len + data.len() as u64;
        let end_on_disk = if self.direct {
            end.div_ceil(align) * align
        } else {
            end
        };
        self.charge(end_on_disk.saturating_sub(disk))?;
        let res = if self.direct && end_on_disk > end {
            // The last block, padded with zeros (O_DIRECT writes whole blocks).
            let mut padded = data.to_vec();
            padded.resize((end_on_disk - len) as usize, 0);
            self.dirs[dir].write_at(fd, len, &padded)
        } else {
            self.dirs[dir].write_at(fd, len, data)
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
        let (dir, fd, len) = {
            let file = self.file(f);
            (file.dir, file.fd, file.len)
        };
        if offset >= len {
            return Ok(0);
        }
        let n = (len - offset).min(buf.len() as u64) as usize;
        let got = self.dirs[dir]
            .read_at(fd, offset, &mut buf[..n])
            .map_err(|e| self.vfs_error(e))?;
        self.stats.bytes_read += got as u64;
        self.stats.read_calls += 1;
        Ok(got)
    }

    fn len(&self, f: FileId) -> u64 {
        self.file(f).len
    }

    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        let file = self
            .files
            .remove(&f)
            .expect("a file id handed out by this store");
        if !file.spill {
            return Err(JoinError::Config(format!(
                "{} is an input, not a spill file",
                file.name
            )));
        }
        self.dirs[file.dir].close(file.fd);
        self.held_bytes -= file.disk_bytes;
        self.stats.deletes += 1;
        let r = self.dirs[file.dir].unlink(&file.name);
        r.map_err(|e| self.vfs_error(e))
    }

    fn elapsed_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn compute(&mut self, _ns: u64) {}

    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }
}

impl Drop for OsStore {
    /// Every exit path (an error or an interrupt included) removes the run's spill files;
    /// its lock file goes after them, when `_lock` drops.
    fn drop(&mut self) {
        for (_, f) in self.files.drain() {
            if f.spill {
                self.dirs[f.dir].close(f.fd);
                let _ = std::fs::remove_file(self.dir.join(&f.name));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Simulated backend

/// Spill files on simfs over a simulated drive, through [`vfs::SimVfs`]: every call is
/// timed on the drive in virtual time (the bytes are kept in memory; the device model
/// keeps none).
pub struct SimStore {
    pub vfs: SimVfs,
    files: HashMap<FileId, SimFile>,
    next: FileId,
    start_ns: u64,
    stats: StoreStats,
}

struct SimFile {
    name: String,
    /// None: an input off the drive (its bytes here; reading costs no drive time).
    fd: Option<Fd>,
    offdevice: Vec<u8>,
    /// Logical length (a preallocated file is longer on the drive).
    len: u64,
    input: bool,
}

impl SimStore {
    /// simfs of `fs_cfg.size_bytes` on `dev`, every call reaching the drive when made.
    pub fn new(dev: AnyDevice, fs_cfg: FsConfig) -> Result<SimStore, JoinError> {
        Self::with_host(dev, fs_cfg, vfs::HostConfig::uncached())
    }

    /// simfs of `fs_cfg.size_bytes` on `dev`, behind the host path `host`.
    pub fn with_host(
        dev: AnyDevice,
        fs_cfg: FsConfig,
        host: vfs::HostConfig,
    ) -> Result<SimStore, JoinError> {
        let fs = SimFs::mkfs(Timed::new(dev), fs_cfg)?;
        Ok(SimStore {
            vfs: SimVfs::with_host(fs, host),
            files: HashMap::new(),
            next: 0,
            start_ns: 0,
            stats: StoreStats::default(),
        })
    }

    fn add(&mut self, file: SimFile) -> FileId {
        let id = self.next;
        self.next += 1;
        self.files.insert(id, file);
        id
    }

    /// Adds an input file holding `bytes`, written to the simulated drive (the write is
    /// timed, so call [`SimStore::start_clock`] afterwards).
    pub fn add_input(&mut self, name: &str, bytes: Vec<u8>) -> Result<FileId, JoinError> {
        let fd = self
            .vfs
            .open(name, OpenMode::create_new())
            .map_err(sim_error)?;
        self.vfs.write_at(fd, 0, &bytes).map_err(sim_error)?;
        self.vfs.sync_dir().map_err(sim_error)?;
        Ok(self.add(SimFile {
            name: name.to_string(),
            fd: Some(fd),
            offdevice: Vec::new(),
            len: bytes.len() as u64,
            input: true,
        }))
    }

    /// Adds an input that lives off the simulated drive (reading it costs no drive time),
    /// as a database on another device would.
    pub fn add_offdevice_input(&mut self, name: &str, bytes: Vec<u8>) -> FileId {
        self.add(SimFile {
            name: name.to_string(),
            fd: None,
            len: bytes.len() as u64,
            offdevice: bytes,
            input: true,
        })
    }

    /// Starts measuring from now, once the drive is idle.
    pub fn start_clock(&mut self) {
        let dev = self.vfs.fs_mut().device_mut();
        dev.now_ns = dev.now_ns.max(dev.dev.settle());
        self.start_ns = dev.now_ns;
        dev.dev.reset_stats();
    }

    pub fn device_stats(&self) -> flash::DeviceStats {
        self.vfs.fs().device().dev.stats()
    }

    /// Finishes deferred discards (`fstrim` for the deferred mode) and background work;
    /// returns the virtual time since the clock started at which the drive is idle.
    pub fn finish(&mut self) -> Result<u64, JoinError> {
        self.vfs.fs_mut().fstrim()?;
        let dev = self.vfs.fs_mut().device_mut();
        let idle = dev.dev.settle().max(dev.now_ns);
        Ok(idle - self.start_ns)
    }

    fn file(&self, f: FileId) -> &SimFile {
        self.files
            .get(&f)
            .expect("a file id handed out by this store")
    }

    /// The drive's file descriptor of spill file `f` (an input is an error).
    fn spill_fd(&self, f: FileId, what: &str) -> Result<Fd, JoinError> {
        match self.file(f) {
            SimFile {
                fd: Some(fd),
                input: false,
                ..
            } => Ok(*fd),
            _ => Err(JoinError::Config(format!("cannot {what} an input"))),
        }
    }
}

fn sim_error(e: VfsError) -> JoinError {
    match e {
        VfsError::DiskFull { path } => JoinError::DiskFull {
            dir: "the simulated drive".into(),
            path,
        },
        VfsError::Io { path, source } => JoinError::Io { path, source },
        other => JoinError::Io {
            path: "simfs".into(),
            source: std::io::Error::other(other.to_string()),
        },
    }
}

impl Store for SimStore {
    fn create(&mut self) -> Result<FileId, JoinError> {
        let name = format!("{SPILL_PREFIX}{}", self.next);
        let fd = self
            .vfs
            .open(&name, OpenMode::create_new())
            .map_err(sim_error)?;
        self.stats.spill_files += 1;
        Ok(self.add(SimFile {
            name,
            fd: Some(fd),
            offdevice: Vec::new(),
            len: 0,
            input: false,
        }))
    }

    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        let fd = self.spill_fd(f, "fallocate")?;
        self.vfs.fallocate(fd, 0, bytes).map_err(sim_error)?;
        self.stats.fallocate_calls += 1;
        Ok(())
    }

    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        let fd = self.spill_fd(f, "append to")?;
        let len = self.file(f).len;
        self.vfs.write_at(fd, len, data).map_err(sim_error)?;
        self.files.get_mut(&f).expect("checked").len += data.len() as u64;
        self.stats.bytes_written += data.len() as u64;
        self.stats.write_calls += 1;
        Ok(())
    }

    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError> {
        let file = self.file(f);
        if offset >= file.len {
            return Ok(0);
        }
        let n = (file.len - offset).min(buf.len() as u64) as usize;
        match file.fd {
            Some(fd) => {
                self.vfs
                    .read_at(fd, offset, &mut buf[..n])
                    .map_err(sim_error)?;
            }
            None => buf[..n].copy_from_slice(&file.offdevice[offset as usize..offset as usize + n]),
        }
        self.stats.bytes_read += n as u64;
        self.stats.read_calls += 1;
        Ok(n)
    }

    fn len(&self, f: FileId) -> u64 {
        self.file(f).len
    }

    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        if self.file(f).input {
            return Err(JoinError::Config("an input is not a spill file".into()));
        }
        let file = self.files.remove(&f).expect("checked");
        if let Some(fd) = file.fd {
            self.vfs.close(fd);
        }
        self.vfs.unlink(&file.name).map_err(sim_error)?;
        self.stats.deletes += 1;
        Ok(())
    }

    fn elapsed_ns(&self) -> u64 {
        self.vfs.now_ns() - self.start_ns
    }

    fn compute(&mut self, ns: u64) {
        self.vfs.think(ns);
    }

    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }
}

// ---------------------------------------------------------------------------------------
// Memory backend

/// Spill files in RAM, untimed apart from the wall clock: for tests and for measuring the
/// join's own speed without I/O.
pub struct MemStore {
    files: HashMap<FileId, (bool, Vec<u8>)>,
    next: FileId,
    started: Instant,
    stats: StoreStats,
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore {
            files: HashMap::new(),
            next: 0,
            started: Instant::now(),
            stats: StoreStats::default(),
        }
    }
}

impl MemStore {
    /// Adds an input file.
    pub fn add_input(&mut self, bytes: Vec<u8>) -> FileId {
        let id = self.next;
        self.next += 1;
        self.files.insert(id, (false, bytes));
        id
    }

    /// Spill files that still exist.
    pub fn live_spill_files(&self) -> usize {
        self.files.values().filter(|(spill, _)| *spill).count()
    }
}

impl Store for MemStore {
    fn create(&mut self) -> Result<FileId, JoinError> {
        let id = self.next;
        self.next += 1;
        self.files.insert(id, (true, Vec::new()));
        self.stats.spill_files += 1;
        Ok(id)
    }
    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        let v = &mut self.files.get_mut(&f).expect("known file").1;
        v.reserve(bytes as usize);
        self.stats.fallocate_calls += 1;
        Ok(())
    }
    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        self.files
            .get_mut(&f)
            .expect("known file")
            .1
            .extend_from_slice(data);
        self.stats.bytes_written += data.len() as u64;
        self.stats.write_calls += 1;
        Ok(())
    }
    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError> {
        let v = &self.files.get(&f).expect("known file").1;
        if offset >= v.len() as u64 {
            return Ok(0);
        }
        let n = (v.len() - offset as usize).min(buf.len());
        buf[..n].copy_from_slice(&v[offset as usize..offset as usize + n]);
        self.stats.bytes_read += n as u64;
        self.stats.read_calls += 1;
        Ok(n)
    }
    fn len(&self, f: FileId) -> u64 {
        self.files.get(&f).expect("known file").1.len() as u64
    }
    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        match self.files.remove(&f) {
            Some((true, _)) => {
                self.stats.deletes += 1;
                Ok(())
            }
            _ => Err(JoinError::Config(format!(
                "file {f} is not a live spill file"
            ))),
        }
    }
    fn elapsed_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }
    fn compute(&mut self, _ns: u64) {}
    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }
}

// ---------------------------------------------------------------------------------------
// Several users on one simulated drive

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UserState {
    /// Computing: its next I/O time is not known yet.
    Running,
    /// Blocked at an I/O it wants to issue at its clock.
    Waiting,
    Done,
}

struct Coordinator {
    store: SimStore,
    clock_ns: Vec<u64>,
    state: Vec<UserState>,
}

/// One simulated drive (and its simfs) shared by several joins running in threads, in
/// deterministic virtual time: a user issues its next I/O only when every other user is
/// either finished or blocked at an I/O of its own, and the earliest (time, user) goes
/// first. The drive thus sees submissions in time order, and a run depends only on its
/// inputs, never on thread scheduling. (One file-system call's I/Os are issued back to back:
/// another user's call that would fall between them waits for the last of them.)
pub struct SharedSim {
    inner: Mutex<Coordinator>,
    turn: std::sync::Condvar,
}

impl SharedSim {
    /// Shares `store` (whose clock has started) among `users`.
    pub fn new(store: SimStore, users: usize) -> std::sync::Arc<SharedSim> {
        let now = store.vfs.now_ns();
        std::sync::Arc::new(SharedSim {
            inner: Mutex::new(Coordinator {
                store,
                clock_ns: vec![now; users],
                state: vec![UserState::Running; users],
            }),
            turn: std::sync::Condvar::new(),
        })
    }

    /// The handle of user `user`.
    pub fn user(self: &std::sync::Arc<Self>, user: usize) -> UserStore {
        let g = self.inner.lock().expect("not poisoned");
        UserStore {
            shared: self.clone(),
            user,
            clock_ns: g.clock_ns[user],
            start_ns: g.clock_ns[user],
            stats: StoreStats::default(),
        }
    }

    /// Starts a round: every user's clock moves to the latest of them (and past deferred
    /// drive work), all users count as running. Returns the round's start time.
    pub fn start_round(&self) -> u64 {
        let mut g = self.inner.lock().expect("not poisoned");
        let dev_now = g.store.vfs.now_ns();
        let t = g.clock_ns.iter().copied().max().unwrap_or(0).max(dev_now);
        for c in g.clock_ns.iter_mut() {
            *c = t;
        }
        for s in g.state.iter_mut() {
            *s = UserState::Running;
        }
        t
    }

    /// Runs `f` on the shared store (between rounds), with the drive's clock at the
    /// latest user's.
    pub fn with_store<R>(&self, f: impl FnOnce(&mut SimStore) -> R) -> R {
        let mut g = self.inner.lock().expect("not poisoned");
        let latest = g.clock_ns.iter().copied().max().unwrap_or(0);
        let dev = g.store.vfs.fs_mut().device_mut();
        dev.now_ns = dev.now_ns.max(latest);
        f(&mut g.store)
    }
}

/// One user's view of a [`SharedSim`].
pub struct UserStore {
    shared: std::sync::Arc<SharedSim>,
    user: usize,
    clock_ns: u64,
    start_ns: u64,
    stats: StoreStats,
}

impl UserStore {
    fn with_turn<R>(&mut self, f: impl FnOnce(&mut SimStore) -> R) -> R {
        let u = self.user;
        let mut g = self.shared.inner.lock().expect("not poisoned");
        g.clock_ns[u] = self.clock_ns;
        g.state[u] = UserState::Waiting;
        self.shared.turn.notify_all();
        loop {
            let mine = (g.clock_ns[u], u);
            let go = (0..g.state.len()).all(|j| {
                j == u
                    || match g.state[j] {
                        UserState::Running => false,
                        UserState::Waiting => (g.clock_ns[j], j) > mine,
                        UserState::Done => true,
                    }
            });
            if go {
                break;
            }
            g = self.shared.turn.wait(g).expect("not poisoned");
        }
        // A file-system call issues its I/Os back to back; a call of another user that falls
        // between them starts once the last of them is issued.
        let dev = g.store.vfs.fs_mut().device_mut();
        dev.now_ns = self.clock_ns.max(dev.last_issue_ns);
        let r = f(&mut g.store);
        self.clock_ns = g.store.vfs.now_ns();
        g.clock_ns[u] = self.clock_ns;
        g.state[u] = UserState::Running;
        self.shared.turn.notify_all();
        r
    }
}

impl Drop for UserStore {
    fn drop(&mut self) {
        if let Ok(mut g) = self.shared.inner.lock() {
            g.state[self.user] = UserState::Done;
            g.clock_ns[self.user] = self.clock_ns;
        }
        self.shared.turn.notify_all();
    }
}

impl Store for UserStore {
    fn create(&mut self) -> Result<FileId, JoinError> {
        self.stats.spill_files += 1;
        self.with_turn(|s| s.create())
    }
    fn fallocate(&mut self, f: FileId, bytes: u64) -> Result<(), JoinError> {
        self.stats.fallocate_calls += 1;
        self.with_turn(|s| s.fallocate(f, bytes))
    }
    fn append(&mut self, f: FileId, data: &[u8]) -> Result<(), JoinError> {
        self.stats.bytes_written += data.len() as u64;
        self.stats.write_calls += 1;
        self.with_turn(|s| s.append(f, data))
    }
    fn read_at(&mut self, f: FileId, offset: u64, buf: &mut [u8]) -> Result<usize, JoinError> {
        let n = self.with_turn(|s| s.read_at(f, offset, buf))?;
        self.stats.bytes_read += n as u64;
        self.stats.read_calls += 1;
        Ok(n)
    }
    fn len(&self, f: FileId) -> u64 {
        self.shared.inner.lock().expect("not poisoned").store.len(f)
    }
    fn delete(&mut self, f: FileId) -> Result<(), JoinError> {
        self.stats.deletes += 1;
        self.with_turn(|s| s.delete(f))
    }
    fn elapsed_ns(&self) -> u64 {
        self.clock_ns - self.start_ns
    }
    fn compute(&mut self, ns: u64) {
        self.clock_ns += ns;
    }
    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }
}
