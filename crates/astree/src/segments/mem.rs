//! Segments in RAM with a crash model, for the crash tests.
//!
//! The store sees *live* files; a crash leaves a *durable* image (as of the last sync)
//! plus some of the operations issued since. The model follows what a Linux file system
//! may leave behind after power loss:
//! - files are inodes; names point at them. Creating, renaming and removing names and
//!   truncating files are metadata operations: a journaling file system commits them in
//!   order, so after a crash a *prefix* of them has happened;
//! - data writes are independent of each other and of the metadata: any subset of them
//!   may have reached the medium, each whole, not at all, or in part at 512-byte sector
//!   granularity (a sector is written atomically, a larger write is not). A write reaches
//!   its inode whatever its name is by then; a write into a file whose creation did not
//!   survive, or that was removed, is gone;
//! - `sync` makes everything durable; a sync that fails (EIO, see
//!   [`MemSegments::fail_next_sync`]) makes some of the writes durable and forgets the
//!   rest, as Linux's page cache marks pages clean after a failed writeback: a later sync
//!   that succeeds does not write them again.
//!
//! [`CrashPlan`] says which pending operations survive; [`MemSegments::crash_with`] builds
//! the image it leaves.

use super::Segments;
use crate::TreeError;
use std::collections::{BTreeMap, HashMap};

/// The files of a [`MemSegments`]: number → bytes.
pub type SegmentImage = BTreeMap<u64, Vec<u8>>;

/// The atomic unit of a write on the medium.
pub const SECTOR_BYTES: usize = 512;

type Ino = u64;

#[derive(Debug, Clone)]
enum SegOp {
    /// Name `seg` now points at the new, empty inode.
    Create(u64, Ino),
    Write(Ino, u64, Vec<u8>),
    Truncate(Ino, u64),
    Remove(u64),
    Rename(u64, u64),
}

impl SegOp {
    fn is_metadata(&self) -> bool {
        !matches!(self, SegOp::Write(..))
    }
}

/// Names and inodes.
#[derive(Debug, Clone, Default)]
struct Files {
    names: BTreeMap<u64, Ino>,
    data: HashMap<Ino, Vec<u8>>,
}

impl Files {
    fn from_image(image: &SegmentImage, next_ino: &mut Ino) -> Files {
        let mut f = Files::default();
        for (&seg, bytes) in image {
            *next_ino += 1;
            f.names.insert(seg, *next_ino);
            f.data.insert(*next_ino, bytes.clone());
        }
        f
    }

    fn image(&self) -> SegmentImage {
        self.names
            .iter()
            .map(|(&seg, ino)| (seg, self.data.get(ino).cloned().unwrap_or_default()))
            .collect()
    }

    fn get(&self, seg: u64) -> Option<&Vec<u8>> {
        self.data.get(self.names.get(&seg)?)
    }

    /// Drops an inode no name points at any more.
    fn release(&mut self, ino: Ino) {
        if !self.names.values().any(|&i| i == ino) {
            self.data.remove(&ino);
        }
    }

    /// Applies `op`; for a write, only the byte ranges in `parts` (None: all of it).
    fn apply(&mut self, op: &SegOp, parts: Option<&[(usize, usize)]>) {
        match op {
            SegOp::Create(seg, ino) => {
                if let Some(old) = self.names.insert(*seg, *ino) {
                    self.release(old);
                }
                self.data.insert(*ino, Vec::new());
            }
            SegOp::Write(ino, off, bytes) => {
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
            SegOp::Truncate(ino, len) => {
                if let Some(f) = self.data.get_mut(ino) {
                    f.resize(*len as usize, 0);
                }
            }
            SegOp::Remove(seg) => {
                if let Some(ino) = self.names.remove(seg) {
                    self.release(ino);
                }
            }
            SegOp::Rename(from, to) => {
                if let Some(ino) = self.names.remove(from) {
                    if let Some(old) = self.names.insert(*to, ino) {
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
    /// older prefix model) reached the medium.
    Parts(Vec<(usize, usize)>),
}

/// The fate of every pending operation, in issue order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashPlan {
    pub fates: Vec<Fate>,
}

impl CrashPlan {
    /// Operations that reached the medium whole.
    pub fn whole(&self) -> usize {
        self.fates.iter().filter(|f| **f == Fate::Whole).count()
    }

    /// Writes that reached it in part.
    pub fn partial(&self) -> usize {
        self.fates
            .iter()
            .filter(|f| matches!(f, Fate::Parts(_)))
            .count()
    }
}

/// How [`MemSegments::random_plan`] draws a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashModel {
    /// Operations land in issue order: a prefix of them, then part of the next write
    /// (torn at a sector boundary).
    Prefix,
    /// A prefix of the metadata operations and any subset of the writes, each whole,
    /// lost, or any subset of its sectors.
    Reordered,
}

/// RAM segments with the crash model of the module docs.
#[derive(Debug, Clone, Default)]
pub struct MemSegments {
    live: Files,
    durable: Files,
    pending: Vec<SegOp>,
    next_ino: Ino,
    /// Tests: `sync` returns success without making anything durable: the machine lost
    /// power while the fsync ran. Its caller never learns, so whatever the store issues
    /// after that sync never happened: a crash keeps none of it.
    pub sync_is_lost: bool,
    /// Pending operations issued before the first lost sync (None: all of them).
    lost_sync_at: Option<usize>,
    /// Tests: the next `sync` fails with EIO after making some pending operations durable
    /// (drawn with this model and seed; see [`MemSegments::fail_next_sync`]).
    failing_sync: Option<(CrashModel, u64)>,
    /// Syncs that failed.
    pub failed_syncs: u64,
    /// The writes successful syncs made durable since [`MemSegments::clear_synced_writes`]:
    /// (file, offset, bytes).
    synced: Vec<(u64, u64, u64)>,
}

impl MemSegments {
    pub fn new() -> Self {
        Self::default()
    }

    /// Segments holding exactly `image`, all durable.
    pub fn from_image(image: SegmentImage) -> Self {
        let mut next_ino = 0;
        let files = Files::from_image(&image, &mut next_ino);
        MemSegments {
            live: files.clone(),
            durable: files,
            next_ino,
            ..Self::default()
        }
    }

    /// Makes the next `sync` fail with EIO: a random crash plan (drawn with `model` from
    /// `seed` over the operations pending then) says which become durable; the others are
    /// forgotten (the live files keep them, but no later sync writes them).
    pub fn fail_next_sync(&mut self, model: CrashModel, seed: u64) {
        self.failing_sync = Some((model, seed));
    }

    /// The writes successful syncs made durable since the last
    /// [`MemSegments::clear_synced_writes`]: (file, offset, bytes).
    pub fn synced_writes(&self) -> &[(u64, u64, u64)] {
        &self.synced
    }

    pub fn clear_synced_writes(&mut self) {
        self.synced.clear();
    }

    /// Operations (writes, creations, truncations, removals, renames) not yet synced.
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
            SegOp::Write(_, _, d) => d.len(),
            _ => 0,
        }
    }

    /// Whether pending operation `i` is a metadata operation (creation, truncation,
    /// removal, rename), which a crash keeps only as part of a prefix of them.
    pub fn pending_is_metadata(&self, i: usize) -> bool {
        self.pending[i].is_metadata()
    }

    /// Whether pending write `i`'s bytes are all in `image`, in the file that holds its
    /// inode there (a write whose missing part equals what was there landed whole).
    pub fn write_landed(&self, i: usize, image: &SegmentImage, plan: &CrashPlan) -> bool {
        let SegOp::Write(ino, off, data) = &self.pending[i] else {
            return false;
        };
        let mut files = self.durable.clone();
        Self::land(&mut files, &self.pending, plan);
        let Some((&seg, _)) = files.names.iter().find(|(_, &x)| x == *ino) else {
            return false;
        };
        image
            .get(&seg)
            .and_then(|f| f.get(*off as usize..*off as usize + data.len()))
            .is_some_and(|b| b == data.as_slice())
    }

    /// One line per pending operation (for failure messages).
    pub fn describe_pending(&self) -> Vec<String> {
        self.pending
            .iter()
            .map(|op| match op {
                SegOp::Create(s, i) => format!("create seg {s} (inode {i})"),
                SegOp::Write(i, o, d) => format!("write inode {i} @{o} +{}", d.len()),
                SegOp::Truncate(i, l) => format!("truncate inode {i} to {l}"),
                SegOp::Remove(s) => format!("remove seg {s}"),
                SegOp::Rename(a, b) => format!("rename seg {a} -> {b}"),
            })
            .collect()
    }

    /// The last pending operation that wrote byte `offset` of the file named `seg` when
    /// it wrote it (the name may have been removed or reused since).
    pub fn pending_write_of(&self, seg: u64, offset: u64) -> Option<usize> {
        let mut names = self.durable.names.clone();
        let mut found = None;
        for (i, op) in self.pending.iter().enumerate() {
            match op {
                SegOp::Create(s, ino) => {
                    names.insert(*s, *ino);
                }
                SegOp::Remove(s) => {
                    names.remove(s);
                }
                SegOp::Rename(a, b) => {
                    if let Some(ino) = names.remove(a) {
                        names.insert(*b, ino);
                    }
                }
                SegOp::Write(ino, o, d)
                    if names.get(&seg) == Some(ino)
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
    /// operations, then `torn_bytes` of the next one if it is a write (the prefix model).
    pub fn crash(&self, applied: usize, torn_bytes: usize) -> SegmentImage {
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
    pub fn crash_with(&self, plan: &CrashPlan) -> SegmentImage {
        let mut files = self.durable.clone();
        Self::land(&mut files, &self.pending, plan);
        files.image()
    }

    fn land(files: &mut Files, ops: &[SegOp], plan: &CrashPlan) {
        // (Operations past the plan's end, e.g. after a lost sync, never happened.)
        for (i, op) in ops.iter().enumerate() {
            match plan.fates.get(i).unwrap_or(&Fate::Lost) {
                Fate::Lost => {}
                Fate::Whole => files.apply(op, None),
                Fate::Parts(parts) => files.apply(op, Some(parts)),
            }
        }
    }

    fn issue(&mut self, op: SegOp) {
        self.live.apply(&op, None);
        self.pending.push(op);
    }

    fn ino(&self, seg: u64) -> Option<Ino> {
        self.live.names.get(&seg).copied()
    }
}

impl Segments for MemSegments {
    fn list(&self) -> Vec<u64> {
        self.live.names.keys().copied().collect()
    }
    fn len(&self, seg: u64) -> u64 {
        self.live.get(seg).map_or(0, |f| f.len() as u64)
    }
    fn read_at(&mut self, seg: u64, offset: u64, buf: &mut [u8]) -> Result<(), TreeError> {
        let f = self.live.get(seg).map(|f| f.as_slice()).unwrap_or(&[]);
        let end = offset as usize + buf.len();
        if end > f.len() {
            return Err(TreeError::Io {
                path: format!("memory segment {seg}"),
                source: std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("read of {end} past {}", f.len()),
                ),
            });
        }
        buf.copy_from_slice(&f[offset as usize..end]);
        Ok(())
    }
    fn write_at(&mut self, seg: u64, offset: u64, data: &[u8]) -> Result<(), TreeError> {
        let ino = match self.ino(seg) {
            Some(i) => i,
            None => {
                self.next_ino += 1;
                self.issue(SegOp::Create(seg, self.next_ino));
                self.next_ino
            }
        };
        self.issue(SegOp::Write(ino, offset, data.to_vec()));
        Ok(())
    }
    fn truncate(&mut self, seg: u64, len: u64) -> Result<(), TreeError> {
        if let Some(ino) = self.ino(seg) {
            self.issue(SegOp::Truncate(ino, len));
        }
        Ok(())
    }
    fn remove(&mut self, seg: u64) -> Result<(), TreeError> {
        if self.ino(seg).is_some() {
            self.issue(SegOp::Remove(seg));
        }
        Ok(())
    }
    fn rename(&mut self, from: u64, to: u64) -> Result<(), TreeError> {
        self.issue(SegOp::Rename(from, to));
        Ok(())
    }
    fn sync(&mut self) -> Result<(), TreeError> {
        if let Some((model, seed)) = self.failing_sync.take() {
            let mut rng = crate::crash::Rng(seed);
            let plan = self.random_plan(model, &mut |n| rng.below(n));
            Self::land(&mut self.durable, &self.pending, &plan);
            self.pending.clear();
            self.failed_syncs += 1;
            return Err(TreeError::Io {
                path: "memory segments".into(),
                source: std::io::Error::from_raw_os_error(5), // EIO
            });
        }
        if self.sync_is_lost {
            self.lost_sync_at.get_or_insert(self.pending.len());
        } else {
            // The pending operations, not the live files: writes a failed sync forgot
            // stay off the medium.
            for op in std::mem::take(&mut self.pending) {
                if let SegOp::Write(ino, off, data) = &op {
                    if let Some((&seg, _)) = self.live.names.iter().find(|(_, &i)| i == *ino) {
                        self.synced.push((seg, *off, data.len() as u64));
                    }
                }
                self.durable.apply(&op, None);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(v: &[(u64, &[u8])]) -> SegmentImage {
        v.iter().map(|(k, d)| (*k, d.to_vec())).collect()
    }

    #[test]
    fn crash_images_apply_a_prefix_of_the_operations() {
        let mut s = MemSegments::new();
        s.write_at(1, 0, b"aaaa").unwrap();
        s.sync().unwrap();
        // Pending: create 2, write 2, remove 1, write 2.
        s.write_at(2, 0, b"bbbb").unwrap();
        s.remove(1).unwrap();
        s.write_at(2, 4, b"cc").unwrap();
        assert_eq!(s.list(), vec![2]);
        assert_eq!(s.crash(0, 0), img(&[(1, b"aaaa")]));
        assert_eq!(s.crash(1, 0), img(&[(1, b"aaaa"), (2, b"")]));
        assert_eq!(s.crash(1, 2), img(&[(1, b"aaaa"), (2, b"bb")]));
        assert_eq!(s.crash(2, 1), img(&[(1, b"aaaa"), (2, b"bbbb")]));
        assert_eq!(s.crash(3, 1), img(&[(2, b"bbbbc")]));
        assert_eq!(s.crash(4, 0), img(&[(2, b"bbbbcc")]));
    }

    #[test]
    fn writes_reach_their_inode_whatever_its_name_and_in_any_subset() {
        let mut s = MemSegments::new();
        s.write_at(1, 0, &[1u8; 1024]).unwrap();
        s.sync().unwrap();
        // Pending: write 1 (sector 0 and 1), rename 1 -> 5, write 5 (the same inode).
        s.write_at(1, 0, &[2u8; 1024]).unwrap();
        s.rename(1, 5).unwrap();
        s.write_at(5, 1024, &[3u8; 512]).unwrap();
        // The rename lost, the later write kept: it lands in the file still named 1.
        let plan = CrashPlan {
            fates: vec![Fate::Lost, Fate::Lost, Fate::Whole],
        };
        let mut want = vec![1u8; 1024];
        want.extend([3u8; 512]);
        assert_eq!(s.crash_with(&plan), img(&[(1, &want)]));
        // Only the second sector of the first write, and the rename.
        let plan = CrashPlan {
            fates: vec![Fate::Parts(vec![(512, 1024)]), Fate::Whole, Fate::Lost],
        };
        let mut want = vec![1u8; 512];
        want.extend([2u8; 512]);
        assert_eq!(s.crash_with(&plan), img(&[(5, &want)]));
    }

    #[test]
    fn a_failed_sync_keeps_some_writes_and_forgets_the_rest() {
        let mut s = MemSegments::new();
        s.write_at(1, 0, b"aaaa").unwrap();
        s.sync().unwrap();
        s.write_at(1, 0, b"bb").unwrap();
        s.write_at(1, 2, b"cc").unwrap();
        // Draw the failing sync's plan until it keeps the second write and not the first.
        let mut seed = 0;
        loop {
            let mut rng = crate::crash::Rng(seed);
            let plan = s.random_plan(CrashModel::Reordered, &mut |n| rng.below(n));
            if plan.fates == vec![Fate::Lost, Fate::Whole] {
                break;
            }
            seed += 1;
        }
        s.fail_next_sync(CrashModel::Reordered, seed);
        assert!(s.sync().is_err());
        assert_eq!(s.pending_ops(), 0);
        // The live file shows both writes, but a later successful sync does not bring the
        // forgotten one to the medium.
        let mut b = [0u8; 4];
        s.read_at(1, 0, &mut b).unwrap();
        assert_eq!(&b, b"bbcc");
        s.write_at(2, 0, b"x").unwrap();
        s.sync().unwrap();
        assert_eq!(s.durable.image()[&1], b"aacc");
    }
}
