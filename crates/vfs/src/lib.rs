//! One file interface for every engine ([`Vfs`]): a directory of named files with
//! positional reads and writes, preallocation, truncation, renames, removals, per-file and
//! directory syncs, and a clock. The engines (the hash join's spill files, the AS
//! B-tree's segments, the key-value store) are written against it once and run on any
//! implementation:
//! - [`OsVfs`]: real files in a directory (O_DIRECT optional, with aligned bounce buffers;
//!   real `fallocate(2)`; the directory fsynced where durability needs it); wall-clock
//!   time;
//! - [`MemVfs`]: files in RAM with a crash model (live and durable images; a crash keeps a
//!   prefix of the metadata operations and any subset of the writes, torn at sector
//!   granularity; lost and failing fsyncs), for the crash tests;
//! - [`SimVfs`]: files of simfs on a simulated drive, in virtual time ([`Shared`] lets
//!   several users in one thread share one, [`Turns`] several threads, deterministically).
//!
//! Names are plain file names (no `/`), relative to the directory the implementation
//! stands for.

pub mod bytes;
pub mod mem;
pub mod os;
pub mod pagecache;
#[cfg(test)]
mod pagecache_reference;
pub mod readahead;
pub mod shared;
pub mod shelf;
pub mod sim;
pub mod turns;

pub use mem::{CrashModel, CrashPlan, Fate, Image, MemVfs, SECTOR_BYTES};
pub use os::OsVfs;
pub use pagecache::HostConfig;
pub use shared::Shared;
pub use shelf::{FileSource, Shelf, SourceFactory};
pub use sim::{SimDrive, SimVfs};
pub use simfs::WriteHint;
pub use turns::{IoScheduler, Turns, UserVfs, VirtualClock};

use thiserror::Error;

/// A handle to an open file.
pub type Fd = u32;

/// How to open a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenMode {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if it exists (implies `create`).
    pub create_new: bool,
    /// Bypass the page cache (O_DIRECT): writes must be whole 4 KiB blocks at 4 KiB
    /// offsets (reads go through an aligned buffer and may be any size).
    pub direct: bool,
    /// Open for reading only.
    pub read_only: bool,
}

impl OpenMode {
    pub fn existing() -> OpenMode {
        OpenMode::default()
    }
    pub fn read_only() -> OpenMode {
        OpenMode {
            read_only: true,
            ..OpenMode::default()
        }
    }
    pub fn create() -> OpenMode {
        OpenMode {
            create: true,
            ..OpenMode::default()
        }
    }
    pub fn create_new() -> OpenMode {
        OpenMode {
            create: true,
            create_new: true,
            ..OpenMode::default()
        }
    }
    pub fn direct(self, direct: bool) -> OpenMode {
        OpenMode { direct, ..self }
    }
}

/// Time spent in reads, writes and syncs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoTime {
    pub read_ns: u64,
    pub write_ns: u64,
    pub sync_ns: u64,
}

/// Where a call's time goes in [`IoTime`] (for the file systems that share another).
pub(crate) fn read_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.read_ns
}
pub(crate) fn write_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.write_ns
}
pub(crate) fn sync_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.sync_ns
}

#[derive(Debug, Error)]
pub enum VfsError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}: no such file")]
    NotFound(String),
    #[error("{0}: the file exists already")]
    Exists(String),
    #[error("{path}: no space left on the device")]
    DiskFull { path: String },
    #[error("{0}")]
    Invalid(String),
    #[error("interrupted")]
    Interrupted,
}

/// The file interface. Every implementation keeps file lengths itself, so `len` is cheap.
pub trait Vfs {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError>;
    /// Closes `fd` (the file stays).
    fn close(&mut self, fd: Fd);
    fn len(&self, fd: Fd) -> u64;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many (fewer only at the end
    /// of the file).
    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError>;
    /// `read_at` for a caller that will not look at the bytes (a replay of recorded
    /// calls): the same count and the same effect on time and state, but `buf` is left
    /// with unspecified bytes, so a file whose bytes are made as they are read (a
    /// generated table on a [`Shelf`]) need not make them.
    fn read_at_unseen(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        self.read_at(fd, offset, buf)
    }
    /// Makes the file's first `end` bytes readable in place through [`Vfs::mapped`]
    /// (real files: a memory map, so a read costs no system call and no copy, as LMDB
    /// reads its pages). False: this file system or file cannot (files in RAM or on the
    /// simulated drive, O_DIRECT files, `end` past the file's length, no map to be had);
    /// read with `read_at` instead.
    fn map(&mut self, _fd: Fd, _end: u64) -> Result<bool, VfsError> {
        Ok(false)
    }
    /// `len` bytes at `offset` of a file [`Vfs::map`] made readable in place (None: not
    /// mapped that far).
    fn mapped(&self, _fd: Fd, _offset: u64, _len: usize) -> Option<&[u8]> {
        None
    }
    /// Writes all of `data` at `offset`, growing the file as needed.
    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError>;
    /// Sets the file's write-life hint, as Linux's `fcntl(fd, F_SET_RW_HINT, &hint)` does
    /// (include/uapi/linux/fcntl.h): how long its data will live, for the drive's
    /// placement. Advice only, never an answer: reads and lengths stay the same. The
    /// default accepts and ignores it, as a file system on a drive without placement does
    /// (files in RAM); simfs maps it onto a placement handle (see `simfs::HintPlacement`),
    /// real files pass it to the kernel.
    fn set_write_hint(&mut self, _fd: Fd, _hint: WriteHint) -> Result<(), VfsError> {
        Ok(())
    }
    /// Allocates `len` bytes at `offset` (the file's length grows to cover them).
    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError>;
    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError>;
    /// Makes the file's data and length durable (fsync).
    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError>;
    /// Renames a file (replacing `to` if it exists); open handles follow it.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError>;
    /// Removes a file's name (open handles keep working until closed).
    fn unlink(&mut self, name: &str) -> Result<(), VfsError>;
    /// Makes creations, renames and removals so far durable (fsync of the directory).
    fn sync_dir(&mut self) -> Result<(), VfsError>;
    /// Syncs `fds`, then the directory if `dir`: one commit's worth (a journaling file
    /// system may do it all at once).
    fn sync_files(&mut self, fds: &[Fd], dir: bool) -> Result<(), VfsError> {
        for &fd in fds {
            self.fsync(fd)?;
        }
        if dir {
            self.sync_dir()?;
        }
        Ok(())
    }
    /// The files' names, sorted.
    fn list(&self) -> Vec<String>;
    fn exists(&self, name: &str) -> bool {
        self.list().iter().any(|n| n == name)
    }
    /// The clock: wall time since the file system was opened, or virtual time.
    fn now_ns(&self) -> u64;
    /// Host time passes without I/O (computation): virtual clocks move on by `ns`; real
    /// ones need nothing (the computation took real time).
    fn think(&mut self, _ns: u64) {}
    /// Host time passes with the caller waiting, not computing (a thread waiting for its
    /// siblings at a barrier): as [`Vfs::think`] except on a host with a limited number of
    /// cores ([`Turns::on_cores`]), where only computation needs a core.
    fn idle(&mut self, ns: u64) {
        self.think(ns)
    }
    /// The caller waits at a barrier of its group (a thread of a parallel join whose work
    /// is done): users taking turns in virtual time ([`UserVfs`]) of its group stop
    /// waiting for it. Nothing for everyone else.
    fn park(&mut self) {}
    /// The caller leaves the barrier and computes again (a coordinator resumes every
    /// member of its group before their threads start). Nothing for everyone else.
    fn resume(&mut self) {}
    /// Time spent in I/O so far (zero where not measured).
    fn io_time(&self) -> IoTime {
        IoTime::default()
    }
}

/// Checks that `name` names a file in the directory: not empty, no `/`, not `.` or `..`.
pub fn check_name(name: &str) -> Result<(), VfsError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." || name.contains('\0') {
        return Err(VfsError::Invalid(format!(
            "{name:?} is not a file name (no '/', '.' or '..')"
        )));
    }
    Ok(())
}
