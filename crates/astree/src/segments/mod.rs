//! Where the AS store's log lives: a set of numbered files ("segments") in one place.
//! File 0 holds the store's two superblocks; log segments are numbered 1, 2, … in log
//! order and a number is never reused. Removing a segment deletes its file, which on a
//! file system mounted with `discard` (or simfs with a discard mode) TRIMs its blocks.
//!
//! Segments are files of a [`vfs::Vfs`] ([`VfsSegments`]): [`FileSegments`] (real files in
//! a directory, O_DIRECT optional), [`MemSegments`] (files in RAM with the crash model of
//! [`vfs::MemVfs`]) and [`SimSegments`] (files of simfs on a simulated drive, timed in
//! virtual time; [`SharedSimSegments`] when several stores share the drive).

mod mem;

pub use mem::{MemSegments, SegmentImage};

use crate::storage::{IoTime, Storage};
use crate::TreeError;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use vfs::{Fd, OpenMode, OsVfs, Vfs, VfsError};

/// A directory of numbered files.
pub trait Segments {
    /// Numbers of the files that exist, ascending.
    fn list(&self) -> Vec<u64>;
    /// Length of file `seg` (0 if it does not exist).
    fn len(&self, seg: u64) -> u64;
    fn read_at(&mut self, seg: u64, offset: u64, buf: &mut [u8]) -> Result<(), TreeError>;
    /// Makes file `seg`'s first `end` bytes readable in place through
    /// [`Segments::mapped`] (real files: a memory map; see `vfs::Vfs::map`). False: read
    /// with `read_at`.
    fn map(&mut self, _seg: u64, _end: u64) -> Result<bool, TreeError> {
        Ok(false)
    }
    /// `len` bytes at `offset` of file `seg`, in place (after [`Segments::map`]).
    fn mapped(&self, _seg: u64, _offset: u64, _len: usize) -> Option<&[u8]> {
        None
    }
    /// Writes into file `seg`, creating it if needed.
    fn write_at(&mut self, seg: u64, offset: u64, data: &[u8]) -> Result<(), TreeError>;
    fn truncate(&mut self, seg: u64, len: u64) -> Result<(), TreeError>;
    /// Deletes file `seg` (nothing if it does not exist).
    fn remove(&mut self, seg: u64) -> Result<(), TreeError>;
    /// Renames file `from` to `to` (which must not exist): a dead segment recycled as a
    /// new one keeps its blocks, so writing it needs no allocation.
    fn rename(&mut self, from: u64, to: u64) -> Result<(), TreeError>;
    /// The write-life hint of the writes from now on ([`vfs::Vfs::set_write_hint`]): log
    /// segments get `hint`, file 0 (the superblocks, rewritten in place) MEDIUM, as F2FS
    /// hints its in-place metadata. Advice only; the default ignores it.
    fn set_write_hint(&mut self, _hint: vfs::WriteHint) -> Result<(), TreeError> {
        Ok(())
    }
    /// Makes every write, truncation and removal so far durable.
    fn sync(&mut self) -> Result<(), TreeError>;
    /// How far ahead of a growing log segment's end its blocks are written with zeros
    /// (0: not at all). A small write that appends to a file makes its `fdatasync` commit
    /// the file system's journal (the new blocks and the new length); a write over blocks
    /// already written does not. On this machine's ext4, a 4 KiB write + `fdatasync`
    /// takes 200 µs appended and 125 µs over written blocks (medians of 500;
    /// docs/comparisons.md). PostgreSQL zero-fills each new WAL segment for the same
    /// reason (`wal_init_zero`, on by default; xlog.c). The store writes the zeros when a
    /// write smaller than [`ZERO_FILL_AFTER_WRITES_BELOW_BYTES`] extends a segment, up to
    /// the next multiple of these bytes, so small commits pay the journal once per that
    /// many bytes of log. The zeros are writes of their own (the device writes those
    /// blocks twice), counted in `StoreStats::bytes_zero_filled`; larger writes (bulk
    /// loads, big batches) append without them.
    fn zero_fill_ahead_bytes(&self) -> u64 {
        0
    }
    /// Bytes in all files.
    fn total_bytes(&self) -> u64 {
        self.list().iter().map(|&s| self.len(s)).sum()
    }
    /// Time spent so far in reads, writes and syncs (zero where not measured).
    fn io_time(&self) -> IoTime {
        IoTime::default()
    }
    /// The clock: wall time (files) or virtual time (simulated drive).
    fn now_ns(&self) -> u64 {
        0
    }
}

/// One file of a set of segments, as [`Storage`] for the stores that keep a single file
/// (in-place, BFTL): e.g. a simfs file on a simulated drive via [`SimSegments`].
pub struct SingleFile<G: Segments>(pub G);

/// The file number [`SingleFile`] uses.
const SINGLE: u64 = 1;

impl<G: Segments> Storage for SingleFile<G> {
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), TreeError> {
        self.0.read_at(SINGLE, offset, buf)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        self.0.write_at(SINGLE, offset, data)
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        self.0.sync()
    }
    fn len(&self) -> u64 {
        self.0.len(SINGLE)
    }
    fn truncate(&mut self, len: u64) -> Result<(), TreeError> {
        self.0.truncate(SINGLE, len)
    }
    fn io_time(&self) -> IoTime {
        self.0.io_time()
    }
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }
}

/// Segments as files `<prefix>-<number>.seg` of any [`Vfs`]: real files ([`FileSegments`])
/// or files in RAM with a crash model ([`MemSegments`]). Each segment keeps its file open;
/// `sync` fsyncs the files written since the last sync, then the directory if files were
/// created, renamed or removed.
pub struct VfsSegments<V: Vfs> {
    vfs: V,
    prefix: String,
    direct: bool,
    files: BTreeMap<u64, Fd>,
    dirty: BTreeSet<u64>,
    dir_dirty: bool,
    /// The hint of log-segment writes ([`Segments::set_write_hint`]; None: never set, so
    /// no hint is ever passed on), and the hint each open segment file has.
    hint: Option<vfs::WriteHint>,
    applied: BTreeMap<u64, vfs::WriteHint>,
    /// [`Segments::zero_fill_ahead_bytes`]: [`ZERO_FILL_AHEAD_BYTES`] on real files, 0
    /// elsewhere (a simulated drive's experiments write what the paper's store writes).
    zero_fill_ahead: u64,
}

/// Real files' [`Segments::zero_fill_ahead_bytes`]: 1 MiB, so a commit of one 4 KiB
/// block pays for the journal once in 256 commits (PostgreSQL fills a whole 16 MiB WAL
/// segment at once; our segments are 128 MiB, and a bulk load writes whole ones that
/// need no zeros).
pub const ZERO_FILL_AHEAD_BYTES: u64 = 1 << 20;

/// Only a write smaller than this zero-fills ahead. The zeros double the bytes the device
/// writes for those blocks, to save the journal commit an append adds to `fdatasync`:
/// measured on this machine's ext4 (write + `fdatasync`, medians of 300, appended vs over
/// written blocks) 248 vs 124 µs at 4 KiB, 257 vs 120 at 16 KiB, 225 vs 152 at 64 KiB,
/// 322 vs 212 at 256 KiB. Below 64 KiB the journal is half a commit's time; from 64 KiB
/// on, a third or less, and bulk loads and big batches (the store's large writes) sync
/// once for many of them.
pub const ZERO_FILL_AFTER_WRITES_BELOW_BYTES: u64 = 64 << 10;

/// Segments as real files in a directory (O_DIRECT optional).
pub type FileSegments = VfsSegments<OsVfs>;

fn vfs_error(e: VfsError) -> TreeError {
    let io = |path: String, kind: std::io::ErrorKind, msg: &str| TreeError::Io {
        path,
        source: std::io::Error::new(kind, msg.to_string()),
    };
    match e {
        VfsError::Interrupted => TreeError::Interrupted,
        VfsError::Io { path, source } => TreeError::Io { path, source },
        VfsError::Invalid(msg) => TreeError::Config(msg),
        VfsError::NotFound(path) => io(path, std::io::ErrorKind::NotFound, "no such file"),
        VfsError::Exists(path) => io(path, std::io::ErrorKind::AlreadyExists, "exists already"),
        VfsError::DiskFull { path } => TreeError::DiskFull { path },
    }
}

impl<V: Vfs> VfsSegments<V> {
    /// The segments `<prefix>-*.seg` already in `vfs` (none for a new store).
    pub fn on(mut vfs: V, prefix: &str, direct: bool) -> Result<Self, TreeError> {
        let mut files = BTreeMap::new();
        for name in vfs.list() {
            let Some(num) = name
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('-'))
                .and_then(|r| r.strip_suffix(".seg"))
            else {
                continue;
            };
            if let Ok(seg) = num.parse::<u64>() {
                let fd = vfs
                    .open(&name, OpenMode::existing().direct(direct))
                    .map_err(vfs_error)?;
                files.insert(seg, fd);
            }
        }
        Ok(VfsSegments {
            vfs,
            prefix: prefix.to_string(),
            direct,
            files,
            dirty: BTreeSet::new(),
            dir_dirty: false,
            hint: None,
            applied: BTreeMap::new(),
            zero_fill_ahead: 0,
        })
    }

    /// The same segments, zero-filling growing segments `bytes` ahead of their end (0:
    /// never; see [`Segments::zero_fill_ahead_bytes`]). Must be a multiple of 4 KiB.
    pub fn with_zero_fill_ahead(mut self, bytes: u64) -> Self {
        assert!(
            bytes.is_multiple_of(4096),
            "zero-fill ahead in whole 4 KiB blocks, not {bytes} bytes"
        );
        self.zero_fill_ahead = bytes;
        self
    }

    /// The file name of segment `seg`.
    pub fn file_name(&self, seg: u64) -> String {
        format!("{}-{seg:08}.seg", self.prefix)
    }

    pub fn vfs(&self) -> &V {
        &self.vfs
    }

    pub fn vfs_mut(&mut self) -> &mut V {
        &mut self.vfs
    }

    /// Deletes every segment file (the store's files are gone afterwards).
    pub fn destroy(mut self) -> Result<(), TreeError> {
        for seg in self.list() {
            self.remove(seg)?;
        }
        Ok(())
    }

    fn missing(&self, seg: u64) -> TreeError {
        TreeError::Io {
            path: self.file_name(seg),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such segment"),
        }
    }
}

impl FileSegments {
    /// Opens the segments `<prefix>-*.seg` already in directory `dir` (none for a new
    /// store).
    pub fn open(dir: &Path, prefix: &str, direct: bool) -> Result<Self, TreeError> {
        Ok(
            Self::on(OsVfs::new(dir).map_err(vfs_error)?, prefix, direct)?
                .with_zero_fill_ahead(ZERO_FILL_AHEAD_BYTES),
        )
    }

    /// The same segments, stopping at their next I/O once `cancel` is cancelled.
    pub fn with_cancel(mut self, cancel: trace::Cancel) -> Self {
        self.vfs = self.vfs.with_cancel(cancel);
        self
    }

    /// The path of segment `seg`.
    pub fn path(&self, seg: u64) -> PathBuf {
        self.vfs.path(&self.file_name(seg))
    }
}

impl<V: Vfs> Segments for VfsSegments<V> {
    fn list(&self) -> Vec<u64> {
        self.files.keys().copied().collect()
    }
    fn len(&self, seg: u64) -> u64 {
        self.files.get(&seg).map_or(0, |&fd| self.vfs.len(fd))
    }
    fn read_at(&mut self, seg: u64, offset: u64, buf: &mut [u8]) -> Result<(), TreeError> {
        let Some(&fd) = self.files.get(&seg) else {
            return Err(self.missing(seg));
        };
        let n = self.vfs.read_at(fd, offset, buf).map_err(vfs_error)?;
        if n < buf.len() {
            return Err(TreeError::Io {
                path: self.file_name(seg),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read of {} bytes at {offset} found {n}", buf.len()),
                ),
            });
        }
        Ok(())
    }
    fn map(&mut self, seg: u64, end: u64) -> Result<bool, TreeError> {
        let Some(&fd) = self.files.get(&seg) else {
            return Err(self.missing(seg));
        };
        self.vfs.map(fd, end).map_err(vfs_error)
    }
    fn mapped(&self, seg: u64, offset: u64, len: usize) -> Option<&[u8]> {
        self.vfs.mapped(*self.files.get(&seg)?, offset, len)
    }
    fn write_at(&mut self, seg: u64, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        let fd = match self.files.get(&seg) {
            Some(&fd) => fd,
            None => {
                let name = self.file_name(seg);
                let fd = self
                    .vfs
                    .open(&name, OpenMode::create().direct(self.direct))
                    .map_err(vfs_error)?;
                self.files.insert(seg, fd);
                self.dir_dirty = true;
                fd
            }
        };
        self.dirty.insert(seg);
        if let Some(h) = self.hint {
            let want = if seg == 0 { vfs::WriteHint::Medium } else { h };
            if self.applied.get(&seg) != Some(&want) {
                self.vfs.set_write_hint(fd, want).map_err(vfs_error)?;
                self.applied.insert(seg, want);
            }
        }
        self.vfs.write_at(fd, offset, data).map_err(vfs_error)
    }
    fn set_write_hint(&mut self, hint: vfs::WriteHint) -> Result<(), TreeError> {
        self.hint = Some(hint);
        Ok(())
    }
    fn truncate(&mut self, seg: u64, len: u64) -> Result<(), TreeError> {
        let Some(&fd) = self.files.get(&seg) else {
            return Err(self.missing(seg));
        };
        self.dirty.insert(seg);
        self.vfs.truncate(fd, len).map_err(vfs_error)
    }
    fn remove(&mut self, seg: u64) -> Result<(), TreeError> {
        let Some(fd) = self.files.remove(&seg) else {
            return Ok(());
        };
        self.vfs.close(fd);
        self.dirty.remove(&seg);
        self.applied.remove(&seg);
        self.dir_dirty = true;
        let name = self.file_name(seg);
        self.vfs.unlink(&name).map_err(vfs_error)
    }
    fn rename(&mut self, from: u64, to: u64) -> Result<(), TreeError> {
        let Some(&fd) = self.files.get(&from) else {
            return Err(self.missing(from));
        };
        let (a, b) = (self.file_name(from), self.file_name(to));
        self.vfs.rename(&a, &b).map_err(vfs_error)?;
        // The open handle follows the file.
        self.files.remove(&from);
        self.files.insert(to, fd);
        if self.dirty.remove(&from) {
            self.dirty.insert(to);
        }
        // The hint is the inode's: it goes with the file.
        if let Some(h) = self.applied.remove(&from) {
            self.applied.insert(to, h);
        }
        self.dir_dirty = true;
        Ok(())
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        let fds: Vec<Fd> = std::mem::take(&mut self.dirty)
            .iter()
            .filter_map(|seg| self.files.get(seg).copied())
            .collect();
        self.vfs
            .sync_files(&fds, self.dir_dirty)
            .map_err(vfs_error)?;
        self.dir_dirty = false;
        Ok(())
    }
    fn zero_fill_ahead_bytes(&self) -> u64 {
        self.zero_fill_ahead
    }
    fn io_time(&self) -> IoTime {
        let t = self.vfs.io_time();
        IoTime {
            read_ns: t.read_ns,
            write_ns: t.write_ns,
            sync_ns: t.sync_ns,
        }
    }
    fn now_ns(&self) -> u64 {
        self.vfs.now_ns()
    }
}

/// Segments as files of simfs on a simulated drive, in virtual time.
pub type SimSegments = VfsSegments<vfs::SimVfs>;

/// Segments on a simulated drive that other sets of segments share (several databases).
pub type SharedSimSegments = VfsSegments<vfs::Shared<vfs::SimVfs>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_system_is_a_disk_full_error() {
        let dev = flash::Preset::load("840pro")
            .unwrap()
            .with_capacity(1 << 30)
            .build()
            .unwrap();
        let fs =
            simfs::SimFs::mkfs(simfs::Timed::new(dev), simfs::FsConfig::new(16 << 20)).unwrap();
        let mut s = SimSegments::on(vfs::SimVfs::new(fs), "t", false).unwrap();
        let chunk = vec![7u8; 1 << 20];
        let err = (0..64u64)
            .find_map(|i| s.write_at(1, i << 20, &chunk).err())
            .expect("16 MiB fill up");
        assert!(
            matches!(&err, TreeError::DiskFull { path } if path.contains("t")),
            "{err:?}"
        );
        assert!(err.to_string().contains("no space left"), "{err}");
    }

    #[test]
    fn file_segments_list_write_read_and_remove_real_files() {
        let dir = std::env::temp_dir().join(format!("flashlab-seg-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = FileSegments::open(&dir, "t", false).unwrap();
        s.write_at(3, 0, b"hello").unwrap();
        s.write_at(1, 0, b"x").unwrap();
        s.sync().unwrap();
        assert!(s.path(3).exists());
        let mut again = FileSegments::open(&dir, "t", false).unwrap();
        assert_eq!(again.list(), vec![1, 3]);
        let mut b = [0u8; 5];
        again.read_at(3, 0, &mut b).unwrap();
        assert_eq!(&b, b"hello");
        again.remove(3).unwrap();
        assert!(!s.path(3).exists());
        assert!(again.read_at(3, 0, &mut b).is_err());
        again.destroy().unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
}
