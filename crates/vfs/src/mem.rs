//! Files in RAM with a crash model, for the crash tests.
//!
//! The engine sees *live* files; a crash leaves a *durable* image plus some of the
//! operations issued since. The model follows what a Linux file system may leave behind
//! after power loss:
//! - files are inodes; names point at them. Creating, renaming and removing names and
//!   changing a file's length (truncate, fallocate) are metadata operations: a journaling
//!   file system commits them in order, so after a crash a *prefix* of them has happened;
//! - data writes are independent of each other and of the metadata: any subset of them
//!   may have reached the medium, each whole, not at all, or in part at 512-byte sector
//!   granularity (a sector is written atomically, a larger write is not). A write reaches
//!   its inode whatever its name is by then; a write into a file whose creation did not
//!   survive, or that was removed, is gone;
//! - `fsync(fd)` makes that file's writes durable, and with them every metadata operation
//!   so far (it commits the journal, as ext4 does); `sync_dir` makes the metadata
//!   operations durable;
//! - a sync can be *lost* ([`MemVfs::sync_is_lost`]: the power went while it ran, so
//!   nothing the engine issued after it ever happened) or *fail* with EIO
//!   ([`MemVfs::fail_next_sync`]): then a random part of the pending operations becomes
//!   durable and the rest is forgotten, as Linux marks the pages of a failed writeback
//!   clean, so a later sync that succeeds does not write them again.
//!
//! [`CrashPlan`] says which pending operations survive; [`MemVfs::crash_with`] builds the
//! image it leaves, and [`MemVfs::from_image`] reopens it.

use crate::{check_name, Fd, OpenMode, Vfs, VfsError};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The files after a crash: name → bytes.
pub type Image = BTreeMap<String, Vec<u8>>;

/// The atomic unit of a write on the medium.
pub const SECTOR_BYTES: usize = 512;

type Ino = u64;

/// SplitMix64: the crash tests' small seeded generator.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Name now points at the new, empty inode.
    Create(String, Ino),
    Write(Ino, u64, Vec<u8>),
    /// The file's length becomes this (truncate, or fallocate growing it).
    SetLen(Ino, u64),
    Remove(String),
    Rename(String, String),
}

impl Op {
    fn is_metadata(&self) -> bool {
        !matches!(self, Op::Write(..))
    }
}

/// Names and inodes.
#[derive(Debug, Clone, Default)]
struct Files {
    names: BTreeMap<String, Ino>,
    data: HashMap<Ino, Vec<u8>>,
    /// Inodes held open (live files only): kept when their last name goes.
    open: HashSet<Ino>,
}

impl Files {
    fn image(&self) -> Image {
        self.names
            .iter()
            .map(|(name, ino)| {
                (
                    name.clone(),
                    self.data.get(ino).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn get(&self, name: &str) -> Option<&Vec<u8>> {
        self.data.get(self.names.get(name)?)
    }

    /// Drops an inode no name points at and nobody holds open.
    fn release(&mut self, ino: Ino) {
        if !self.open.contains(&ino) && !self.names.values().any(|&i| i == ino) {
            self.data.remove(&ino);
        }
    }

    /// Applies `op`; for a write, only the byte ranges in `parts` (None: all of it).
    fn apply(&mut self, op: &Op, parts: Option<&[(usize, usize)]>) {
        match op {
            Op::Create(name, ino) => {
                if let Some(old) = self.names.insert(name.clone(), *ino) {
                    self.release(old);
                }
                self.data.insert(*ino, Vec::new());
            }
            Op::Write(ino, off, bytes) => {
                let Some(f) = self.data.get_mut(ino) else {
                    return; // its file was never created here, or is gone
                };
                let whole = [(0, bytes.len())];
                for &(a, b) in parts.unwrap_or(&whole) {
                    let (start, end) = (*off as usize + a, *off as usize + b);
                    if f.len() < end {
                        f.resize(end, 0);
                    }
                    f[start..end].copy_from_slice(&bytes[a..b]);
                }
            }
            Op::SetLen(ino, len) => {
                if let Some(f) = self.data.get_mut(ino) {
                    f.resize(*len as usize, 0);
                }
            }
            Op::Remove(name) => {
                if let Some(ino) = self.names.remove(name) {
                    self.release(ino);
                }
            }
            Op::Rename(from, to) => {
                if let Some(ino) = self.names.remove(from) {
                    if let Some(old) = self.names.insert(to.clone(), ino) {
                        self.release(old);
                    }
                }
            }
        }
    }
}

/// What became of one pending operation at a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    Lost,
    Whole,
    /// A write of which only these byte ranges (whole sectors, or a torn prefix in the
    /// in-order model) reached the medium.
    Parts(Vec<(usize, usize)>),
}

/// The fate of every pending operation, in issue order (missing ones are lost).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashPlan {
    pub fates: Vec<Fate>,
}

impl CrashPlan {
    /// Writes that reached the medium in part.
    pub fn partial(&self) -> usize {
        self.fates
            .iter()
            .filter(|f| matches!(f, Fate::Parts(_)))
            .count()
    }
}

/// How [`MemVfs::random_plan`] draws a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashModel {
    /// Operations land in issue order: a prefix of them, then part of the next write
    /// (torn at a sector boundary).
    Prefix,
    /// A prefix of the metadata operations and any subset of the writes, each whole,
    /// lost, or any subset of its sectors.
    Reordered,
}

/// Files in RAM with the crash model of the module docs.
#[derive(Debug, Clone, Default)]
pub struct MemVfs {
    live: Files,
    durable: Files,
    pending: Vec<Op>,
    next_ino: Ino,
    fds: HashMap<Fd, Ino>,
    next_fd: Fd,
    /// Tests: syncs return success without making anything durable: the machine lost
    /// power while the first of them ran. Its caller never learns, so whatever the engine
    /// issues after that sync never happened: a crash keeps none of it.
    pub sync_is_lost: bool,
    /// Pending operations issued before the first lost sync (None: all of them).
    lost_sync_at: Option<usize>,
    /// Tests: the next sync fails with EIO after making some pending operations durable
    /// (drawn with this model and seed).
    failing_sync: Option<(CrashModel, u64)>,
    /// Syncs that failed.
    pub failed_syncs: u64,
    /// Writes successful syncs made durable since [`MemVfs::clear_synced_writes`]:
    /// (file, offset, bytes).
    synced: Vec<(String, u64, u64)>,
    /// No crash model ([`MemVfs::volatile`]): when it was made.
    volatile: Option<std::time::Instant>,
}

impl MemVfs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Files in RAM without the crash model: nothing is kept for durability, so each byte
    /// is held once and syncs do nothing (a crash cannot be asked for); the clock is the
    /// wall clock since now.
    pub fn volatile() -> Self {
        MemVfs {
            volatile: Some(std::time::Instant::now()),
            ..Self::default()
        }
    }

    /// Files holding exactly `image`, all durable.
    pub fn from_image(image: Image) -> Self {
        let mut files = Files::default();
        let mut next_ino = 0;
        for (name, bytes) in image {
            next_ino += 1;
            files.names.insert(name, next_ino);
            files.data.insert(next_ino, bytes);
        }
        MemVfs {
            live: files.clone(),
            durable: files,
            next_ino,
            ..Self::default()
        }
    }

    /// Makes the next sync fail with EIO: a random crash plan (drawn with `model` from
    /// `seed` over the operations pending then) says which become durable; the others are
    /// forgotten (the live files keep them, but no later sync writes them).
    pub fn fail_next_sync(&mut self, model: CrashModel, seed: u64) {
        self.failing_sync = Some((model, seed));
    }

    /// The writes successful syncs made durable since the last
    /// [`MemVfs::clear_synced_writes`]: (file, offset, bytes).
    pub fn synced_writes(&self) -> &[(String, u64, u64)] {
        &self.synced
    }

    pub fn clear_synced_writes(&mut self) {
        self.synced.clear();
    }

    /// Operations not yet durable.
    pub fn pending_ops(&self) -> usize {
        self.pending.len()
    }

    /// Pending operations issued before the power went (at the first lost sync): a crash
    /// can keep only these.
    pub fn issued_ops(&self) -> usize {
        self.lost_sync_at.unwrap_or(self.pending.len())
    }

    /// Bytes of pending operation `i` (0 for a metadata operation).
    pub fn pending_len(&self, i: usize) -> usize {
        match &self.pending[i] {
            Op::Write(_, _, d) => d.len(),
            _ => 0,
        }
    }

    /// Whether pending operation `i` is a metadata operation, which a crash keeps only as
    /// part of a prefix of them.
    pub fn pending_is_metadata(&self, i: usize) -> bool {
        self.pending[i].is_metadata()
    }

    /// Whether pending write `i`'s bytes are all in `image`, in the file that holds its
    /// inode after the crash `plan` (a write whose missing part equals what was there
    /// landed whole).
    pub fn write_landed(&self, i: usize, image: &Image, plan: &CrashPlan) -> bool {
        self.write_landed_through(i, u64::MAX, image, plan)
    }

    /// Whether pending write `i`'s bytes before file offset `end` are all in `image` (as
    /// [`Self::write_landed`]; a record followed by padding in the same write is whole
    /// when its own bytes are).
    pub fn write_landed_through(
        &self,
        i: usize,
        end: u64,
        image: &Image,
        plan: &CrashPlan,
    ) -> bool {
        let Op::Write(ino, off, data) = &self.pending[i] else {
            return false;
        };
        let data = &data[..(end.saturating_sub(*off) as usize).min(data.len())];
        let mut files = self.durable.clone();
        Self::land(&mut files, &self.pending, plan);
        let Some((name, _)) = files.names.iter().find(|(_, &x)| x == *ino) else {
            return false;
        };
        image
            .get(name)
            .and_then(|f| f.get(*off as usize..*off as usize + data.len()))
            .is_some_and(|b| b == data)
    }

    /// One line per pending operation (for failure messages).
    pub fn describe_pending(&self) -> Vec<String> {
        self.pending
            .iter()
            .map(|op| match op {
                Op::Create(n, i) => format!("create {n} (inode {i})"),
                Op::Write(i, o, d) => format!("write inode {i} @{o} +{}", d.len()),
                Op::SetLen(i, l) => format!("set inode {i}'s length to {l}"),
                Op::Remove(n) => format!("remove {n}"),
                Op::Rename(a, b) => format!("rename {a} -> {b}"),
            })
            .collect()
    }

    /// The last pending operation that wrote byte `offset` of the file named `name` when
    /// it wrote it (the name may have been removed or reused since).
    pub fn pending_write_of(&self, name: &str, offset: u64) -> Option<usize> {
        let mut names = self.durable.names.clone();
        let mut found = None;
        for (i, op) in self.pending.iter().enumerate() {
            match op {
                Op::Create(n, ino) => {
                    names.insert(n.clone(), *ino);
                }
                Op::Remove(n) => {
                    names.remove(n);
                }
                Op::Rename(a, b) => {
                    if let Some(ino) = names.remove(a) {
                        names.insert(b.clone(), ino);
                    }
                }
                Op::Write(ino, o, d)
                    if names.get(name) == Some(ino)
                        && *o <= offset
                        && offset < o + d.len() as u64 =>
                {
                    found = Some(i);
                }
                _ => {}
            }
        }
        found
    }

    /// The files after a crash: the durable image plus the first `applied` pending
    /// operations, then `torn_bytes` of the next one if it is a write (the in-order model).
    pub fn crash(&self, applied: usize, torn_bytes: usize) -> Image {
        let fates = (0..self.issued_ops())
            .map(|i| match i.cmp(&applied) {
                std::cmp::Ordering::Less => Fate::Whole,
                std::cmp::Ordering::Equal if torn_bytes > 0 && !self.pending_is_metadata(i) => {
                    Fate::Parts(vec![(0, torn_bytes.min(self.pending_len(i)))])
                }
                _ => Fate::Lost,
            })
            .collect();
        self.crash_with(&CrashPlan { fates })
    }

    /// A random crash of the pending operations under `model`; `below(n)` draws
    /// uniformly from 0..n.
    pub fn random_plan(&self, model: CrashModel, below: &mut dyn FnMut(u64) -> u64) -> CrashPlan {
        let n = self.issued_ops();
        let sectors = |i: usize| self.pending_len(i).div_ceil(SECTOR_BYTES);
        let sector_range = |i: usize, k: usize| {
            (
                k * SECTOR_BYTES,
                ((k + 1) * SECTOR_BYTES).min(self.pending_len(i)),
            )
        };
        let fates = match model {
            CrashModel::Prefix => {
                let applied = below(n as u64 + 1) as usize;
                (0..n)
                    .map(|i| match i.cmp(&applied) {
                        std::cmp::Ordering::Less => Fate::Whole,
                        std::cmp::Ordering::Equal if !self.pending_is_metadata(i) => {
                            let kept = below(sectors(i) as u64) as usize;
                            if kept == 0 {
                                Fate::Lost
                            } else {
                                Fate::Parts(vec![(0, sector_range(i, kept - 1).1)])
                            }
                        }
                        _ => Fate::Lost,
                    })
                    .collect()
            }
            CrashModel::Reordered => {
                let metadata = (0..n).filter(|&i| self.pending_is_metadata(i)).count();
                let mut prefix = below(metadata as u64 + 1) as usize;
                (0..n)
                    .map(|i| {
                        if self.pending_is_metadata(i) {
                            if prefix > 0 {
                                prefix -= 1;
                                return Fate::Whole;
                            }
                            return Fate::Lost;
                        }
                        match below(4) {
                            0 => Fate::Lost,
                            3 if sectors(i) > 1 => {
                                let parts: Vec<(usize, usize)> = (0..sectors(i))
                                    .filter(|_| below(2) == 0)
                                    .map(|k| sector_range(i, k))
                                    .collect();
                                if parts.is_empty() {
                                    Fate::Lost
                                } else {
                                    Fate::Parts(parts)
                                }
                            }
                            _ => Fate::Whole,
                        }
                    })
                    .collect()
            }
        };
        CrashPlan { fates }
    }

    /// The files after a crash that `plan` describes.
    pub fn crash_with(&self, plan: &CrashPlan) -> Image {
        let mut files = self.durable.clone();
        Self::land(&mut files, &self.pending, plan);
        files.image()
    }

    fn land(files: &mut Files, ops: &[Op], plan: &CrashPlan) {
        for (i, op) in ops.iter().enumerate() {
            match plan.fates.get(i).unwrap_or(&Fate::Lost) {
                Fate::Lost => {}
                Fate::Whole => files.apply(op, None),
                Fate::Parts(parts) => files.apply(op, Some(parts)),
            }
        }
    }

    fn issue(&mut self, op: Op) {
        self.live.apply(&op, None);
        if self.volatile.is_none() {
            self.pending.push(op);
        }
    }

    fn ino(&self, fd: Fd) -> Ino {
        *self
            .fds
            .get(&fd)
            .expect("a handle this file system gave out")
    }

    fn name_of(&self, ino: Ino) -> Option<&String> {
        self.live
            .names
            .iter()
            .find(|(_, &i)| i == ino)
            .map(|(n, _)| n)
    }

    /// Makes the pending operations `durable(op)` selects durable, in order (a lost or
    /// failing sync does what the test asked of it instead).
    fn sync_where(&mut self, durable: impl Fn(&Op) -> bool) -> Result<(), VfsError> {
        if let Some((model, seed)) = self.failing_sync.take() {
            let mut rng = Rng(seed);
            let plan = self.random_plan(model, &mut |n| rng.below(n));
            Self::land(&mut self.durable, &self.pending, &plan);
            self.pending.clear();
            self.lost_sync_at = None;
            self.failed_syncs += 1;
            return Err(VfsError::Io {
                path: "memory files".into(),
                source: std::io::Error::from_raw_os_error(libc::EIO),
            });
        }
        if self.sync_is_lost {
            self.lost_sync_at.get_or_insert(self.pending.len());
            return Ok(());
        }
        let mut kept = Vec::with_capacity(self.pending.len());
        for op in std::mem::take(&mut self.pending) {
            if !durable(&op) {
                kept.push(op);
                continue;
            }
            if let Op::Write(ino, off, data) = &op {
                if let Some(name) = self.name_of(*ino) {
                    self.synced.push((name.clone(), *off, data.len() as u64));
                }
            }
            self.durable.apply(&op, None);
        }
        self.pending = kept;
        Ok(())
    }
}

impl Vfs for MemVfs {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        check_name(name)?;
        let ino = match self.live.names.get(name) {
            Some(_) if mode.create_new => return Err(VfsError::Exists(name.to_string())),
            Some(&ino) => ino,
            None if mode.create || mode.create_new => {
                self.next_ino += 1;
                self.issue(Op::Create(name.to_string(), self.next_ino));
                self.next_ino
            }
            None => return Err(VfsError::NotFound(name.to_string())),
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, ino);
        self.live.open.insert(ino);
        Ok(fd)
    }

    fn close(&mut self, fd: Fd) {
        if let Some(ino) = self.fds.remove(&fd) {
            if !self.fds.values().any(|&i| i == ino) {
                self.live.open.remove(&ino);
                self.live.release(ino);
            }
        }
    }

    fn len(&self, fd: Fd) -> u64 {
        self.live
            .data
            .get(&self.ino(fd))
            .map_or(0, |f| f.len() as u64)
    }

    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        let f = self
            .live
            .data
            .get(&self.ino(fd))
            .map(|f| f.as_slice())
            .unwrap_or(&[]);
        if offset >= f.len() as u64 {
            return Ok(0);
        }
        let n = (f.len() - offset as usize).min(buf.len());
        buf[..n].copy_from_slice(&f[offset as usize..offset as usize + n]);
        Ok(n)
    }

    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.issue(Op::Write(ino, offset, data.to_vec()));
        Ok(())
    }

    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        if offset + len > self.len(fd) {
            self.issue(Op::SetLen(ino, offset + len));
        }
        Ok(())
    }

    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.issue(Op::SetLen(ino, len));
        Ok(())
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        // The file's data, and the journal: every metadata operation so far.
        self.sync_where(|op| match op {
            Op::Write(i, ..) => *i == ino,
            _ => true,
        })
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError> {
        check_name(from)?;
        check_name(to)?;
        if !self.live.names.contains_key(from) {
            return Err(VfsError::NotFound(from.to_string()));
        }
        self.issue(Op::Rename(from.to_string(), to.to_string()));
        Ok(())
    }

    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        check_name(name)?;
        if !self.live.names.contains_key(name) {
            return Err(VfsError::NotFound(name.to_string()));
        }
        self.issue(Op::Remove(name.to_string()));
        Ok(())
    }

    fn sync_dir(&mut self) -> Result<(), VfsError> {
        self.sync_where(Op::is_metadata)
    }

    fn list(&self) -> Vec<String> {
        self.live.names.keys().cloned().collect()
    }

    fn exists(&self, name: &str) -> bool {
        self.live.names.contains_key(name)
    }

    /// Volatile: wall time since it was made; with the crash model: always 0.
    fn now_ns(&self) -> u64 {
        self.volatile.map_or(0, |t| t.elapsed().as_nanos() as u64)
    }
}

impl MemVfs {
    /// The live length of file `name` (0 if it does not exist), without opening it.
    pub fn len_of(&self, name: &str) -> u64 {
        self.live.get(name).map_or(0, |f| f.len() as u64)
    }

    /// Syncs every file and the directory: everything issued so far becomes durable.
    pub fn sync_all(&mut self) -> Result<(), VfsError> {
        self.sync_where(|_| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(v: &[(&str, &[u8])]) -> Image {
        v.iter().map(|(k, d)| (k.to_string(), d.to_vec())).collect()
    }

    fn write(fs: &mut MemVfs, name: &str, off: u64, data: &[u8]) -> Fd {
        let fd = fs.open(name, OpenMode::create()).unwrap();
        fs.write_at(fd, off, data).unwrap();
        fd
    }

    #[test]
    fn crash_images_apply_a_prefix_of_the_operations() {
        let mut s = MemVfs::new();
        write(&mut s, "1", 0, b"aaaa");
        s.sync_all().unwrap();
        // Pending: create 2, write 2, remove 1, write 2.
        let f2 = write(&mut s, "2", 0, b"bbbb");
        s.unlink("1").unwrap();
        s.write_at(f2, 4, b"cc").unwrap();
        assert_eq!(s.list(), vec!["2".to_string()]);
        assert_eq!(s.crash(0, 0), img(&[("1", b"aaaa")]));
        assert_eq!(s.crash(1, 0), img(&[("1", b"aaaa"), ("2", b"")]));
        assert_eq!(s.crash(1, 2), img(&[("1", b"aaaa"), ("2", b"bb")]));
        assert_eq!(s.crash(2, 1), img(&[("1", b"aaaa"), ("2", b"bbbb")]));
        assert_eq!(s.crash(3, 1), img(&[("2", b"bbbbc")]));
        assert_eq!(s.crash(4, 0), img(&[("2", b"bbbbcc")]));
    }

    #[test]
    fn writes_reach_their_inode_whatever_its_name_and_in_any_subset() {
        let mut s = MemVfs::new();
        let fd = write(&mut s, "1", 0, &[1u8; 1024]);
        s.sync_all().unwrap();
        // Pending: write (sectors 0 and 1), rename 1 -> 5, write (the same inode).
        s.write_at(fd, 0, &[2u8; 1024]).unwrap();
        s.rename("1", "5").unwrap();
        s.write_at(fd, 1024, &[3u8; 512]).unwrap();
        // The rename lost, the later write kept: it lands in the file still named 1.
        let plan = CrashPlan {
            fates: vec![Fate::Lost, Fate::Lost, Fate::Whole],
        };
        let mut want = vec![1u8; 1024];
        want.extend([3u8; 512]);
        assert_eq!(s.crash_with(&plan), img(&[("1", &want)]));
        // Only the second sector of the first write, and the rename.
        let plan = CrashPlan {
            fates: vec![Fate::Parts(vec![(512, 1024)]), Fate::Whole, Fate::Lost],
        };
        let mut want = vec![1u8; 512];
        want.extend([2u8; 512]);
        assert_eq!(s.crash_with(&plan), img(&[("5", &want)]));
    }

    #[test]
    fn fsync_makes_one_file_and_the_journal_durable() {
        let mut s = MemVfs::new();
        let a = write(&mut s, "a", 0, b"aa");
        let b = write(&mut s, "b", 0, b"bb");
        s.fsync(a).unwrap();
        // a's data and both creations are durable; b's data is not.
        assert_eq!(s.crash(0, 0), img(&[("a", b"aa"), ("b", b"")]));
        s.fsync(b).unwrap();
        assert_eq!(s.crash(0, 0), img(&[("a", b"aa"), ("b", b"bb")]));
        // A removed file stays readable through its open handle.
        s.unlink("a").unwrap();
        let mut buf = [0u8; 2];
        assert_eq!(s.read_at(a, 0, &mut buf).unwrap(), 2);
        s.close(a);
        s.sync_dir().unwrap();
        assert_eq!(s.crash(0, 0), img(&[("b", b"bb")]));
        assert!(matches!(
            s.open("a", OpenMode::existing()),
            Err(VfsError::NotFound(_))
        ));
    }

    #[test]
    fn a_failed_sync_keeps_some_writes_and_forgets_the_rest() {
        let mut s = MemVfs::new();
        let fd = write(&mut s, "1", 0, b"aaaa");
        s.sync_all().unwrap();
        s.write_at(fd, 0, b"bb").unwrap();
        s.write_at(fd, 2, b"cc").unwrap();
        // Draw the failing sync's plan until it keeps the second write and not the first.
        let mut seed = 0;
        loop {
            let mut rng = Rng(seed);
            let plan = s.random_plan(CrashModel::Reordered, &mut |n| rng.below(n));
            if plan.fates == vec![Fate::Lost, Fate::Whole] {
                break;
            }
            seed += 1;
        }
        s.fail_next_sync(CrashModel::Reordered, seed);
        assert!(s.fsync(fd).is_err());
        assert_eq!(s.pending_ops(), 0);
        // The live file shows both writes, but a later successful sync does not bring the
        // forgotten one to the medium.
        let mut b = [0u8; 4];
        s.read_at(fd, 0, &mut b).unwrap();
        assert_eq!(&b, b"bbcc");
        write(&mut s, "2", 0, b"x");
        s.sync_all().unwrap();
        assert_eq!(s.crash(0, 0)["1"], b"aacc");
    }

    #[test]
    fn after_a_lost_sync_nothing_more_happened() {
        let mut s = MemVfs::new();
        let fd = write(&mut s, "1", 0, b"a");
        s.sync_is_lost = true;
        s.fsync(fd).unwrap();
        s.write_at(fd, 1, b"b").unwrap();
        assert_eq!(s.issued_ops(), 2);
        assert_eq!(s.crash(3, 0), img(&[("1", b"a")]));
    }
}
