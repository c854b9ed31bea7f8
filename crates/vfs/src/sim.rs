//! Files of simfs on a simulated drive, in virtual time: every open, read, write,
//! preallocation, sync, rename and removal is simfs's (so its allocation policy and
//! discard mode apply) and timed on the drive; the bytes themselves are kept here, since
//! the drive model keeps none.
//!
//! Syncs follow a journaling file system: `fsync` of any file commits everything (all
//! dirty metadata, then a flush), as one ext4 journal commit carries every pending change;
//! so does `sync_dir`, and [`Vfs::sync_files`] does it once for many files.
//!
//! This is the simulated file layer's first form: requests reach the drive one at a time
//! as the engine makes them. The host path (page cache, writeback, readahead, a queue of
//! requests in flight, the journal's own timing) comes between the engine and simfs here.

use crate::{check_name, Fd, IoTime, OpenMode, Vfs, VfsError};
use simfs::fs::Ino;
use simfs::{SimFs, SimfsError, Timed};
use std::collections::HashMap;

/// simfs on a simulated drive, timed.
pub type SimDrive = SimFs<Timed<flash::AnyDevice>>;

/// Files of simfs on a simulated drive.
pub struct SimVfs {
    fs: SimDrive,
    /// Each inode's bytes.
    data: HashMap<Ino, Vec<u8>>,
    fds: HashMap<Fd, Ino>,
    next_fd: Fd,
    io: IoTime,
}

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
    /// The files of `fs` (those it holds now start empty here: simfs keeps no bytes).
    pub fn new(fs: SimDrive) -> SimVfs {
        SimVfs {
            fs,
            data: HashMap::new(),
            fds: HashMap::new(),
            next_fd: 0,
            io: IoTime::default(),
        }
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
        let t0 = self.fs.device().now_ns;
        let r = f(&mut self.fs).map_err(|e| sim_error(name, e))?;
        Ok((r, self.fs.device().now_ns - t0))
    }

    /// [`SimVfs::timed`] for a call on inode `ino` (its name is looked up only for an
    /// error message).
    fn timed_ino<R>(
        &mut self,
        ino: Ino,
        f: impl FnOnce(&mut SimDrive) -> Result<R, SimfsError>,
    ) -> Result<(R, u64), VfsError> {
        let t0 = self.fs.device().now_ns;
        match f(&mut self.fs) {
            Ok(r) => Ok((r, self.fs.device().now_ns - t0)),
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
                self.data.insert(ino, Vec::new());
                ino
            }
            Err(_) => return Err(VfsError::NotFound(format!("simfs:{name}"))),
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, ino);
        Ok(fd)
    }

    fn close(&mut self, fd: Fd) {
        self.fds.remove(&fd);
    }

    fn len(&self, fd: Fd) -> u64 {
        self.data.get(&self.ino(fd)).map_or(0, |d| d.len() as u64)
    }

    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        let ino = self.ino(fd);
        let len = self.len(fd);
        if offset >= len {
            return Ok(0);
        }
        let n = (len - offset).min(buf.len() as u64) as usize;
        let (_, ns) = self.timed_ino(ino, |fs| fs.read_at(ino, offset, n as u64))?;
        self.io.read_ns += ns;
        let d = &self.data[&ino];
        buf[..n].copy_from_slice(&d[offset as usize..offset as usize + n]);
        Ok(n)
    }

    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        let (_, ns) = self.timed_ino(ino, |fs| fs.write_at(ino, offset, data.len() as u64))?;
        self.io.write_ns += ns;
        let f = self.data.entry(ino).or_default();
        let end = offset as usize + data.len();
        if f.len() < end {
            f.resize(end, 0);
        }
        f[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        let (_, ns) = self.timed_ino(ino, |fs| fs.fallocate(ino, offset, len))?;
        self.io.write_ns += ns;
        let f = self.data.entry(ino).or_default();
        let end = (offset + len) as usize;
        if f.len() < end {
            f.resize(end, 0);
        }
        Ok(())
    }

    /// Drops the bytes past `len` (simfs keeps the file's blocks).
    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        let ino = self.ino(fd);
        self.data.entry(ino).or_default().resize(len as usize, 0);
        Ok(())
    }

    fn fsync(&mut self, _fd: Fd) -> Result<(), VfsError> {
        self.commit()
    }

    fn sync_files(&mut self, _fds: &[Fd], _dir: bool) -> Result<(), VfsError> {
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
        let (_, ns) = self.timed(name, |fs| fs.unlink(name))?;
        self.io.write_ns += ns;
        if !self.fds.values().any(|&i| i == ino) {
            self.data.remove(&ino);
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
        self.fs.device().now_ns
    }

    fn io_time(&self) -> IoTime {
        self.io
    }
}

/// One file system shared by several users in one thread (e.g. several databases on one
/// simulated drive, taking turns): each handle counts the time its own calls took.
pub struct Shared<V: Vfs> {
    inner: std::rc::Rc<std::cell::RefCell<V>>,
    io: IoTime,
}

impl<V: Vfs> Shared<V> {
    pub fn new(vfs: V) -> Shared<V> {
        Shared {
            inner: std::rc::Rc::new(std::cell::RefCell::new(vfs)),
            io: IoTime::default(),
        }
    }

    /// Another handle on the same file system.
    pub fn handle(&self) -> Shared<V> {
        Shared {
            inner: self.inner.clone(),
            io: IoTime::default(),
        }
    }

    pub fn borrow(&self) -> std::cell::Ref<'_, V> {
        self.inner.borrow()
    }

    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, V> {
        self.inner.borrow_mut()
    }

    /// Runs `f` on the file system, adding the time it took (by the file system's clock)
    /// to `slot` of this handle's I/O time.
    fn timed<R>(&mut self, slot: fn(&mut IoTime) -> &mut u64, f: impl FnOnce(&mut V) -> R) -> R {
        let mut v = self.inner.borrow_mut();
        let t0 = v.now_ns();
        let r = f(&mut v);
        *slot(&mut self.io) += v.now_ns().saturating_sub(t0);
        r
    }
}

fn read_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.read_ns
}
fn write_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.write_ns
}
fn sync_slot(t: &mut IoTime) -> &mut u64 {
    &mut t.sync_ns
}

impl<V: Vfs> Vfs for Shared<V> {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        self.inner.borrow_mut().open(name, mode)
    }
    fn close(&mut self, fd: Fd) {
        self.inner.borrow_mut().close(fd)
    }
    fn len(&self, fd: Fd) -> u64 {
        self.inner.borrow().len(fd)
    }
    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        self.timed(read_slot, |v| v.read_at(fd, offset, buf))
    }
    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        self.timed(write_slot, |v| v.write_at(fd, offset, data))
    }
    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        self.timed(write_slot, |v| v.fallocate(fd, offset, len))
    }
    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        self.timed(write_slot, |v| v.truncate(fd, len))
    }
    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError> {
        self.timed(sync_slot, |v| v.fsync(fd))
    }
    fn sync_files(&mut self, fds: &[Fd], dir: bool) -> Result<(), VfsError> {
        self.timed(sync_slot, |v| v.sync_files(fds, dir))
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError> {
        self.timed(write_slot, |v| v.rename(from, to))
    }
    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        self.timed(write_slot, |v| v.unlink(name))
    }
    fn sync_dir(&mut self) -> Result<(), VfsError> {
        self.timed(sync_slot, |v| v.sync_dir())
    }
    fn list(&self) -> Vec<String> {
        self.inner.borrow().list()
    }
    fn exists(&self, name: &str) -> bool {
        self.inner.borrow().exists(name)
    }
    fn now_ns(&self) -> u64 {
        self.inner.borrow().now_ns()
    }
    fn io_time(&self) -> IoTime {
        self.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::{Device, Preset};

    fn drive() -> SimVfs {
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
    fn shared_handles_count_their_own_time() {
        let shared = Shared::new(drive());
        let (mut a, mut b) = (shared.handle(), shared.handle());
        let fa = a.open("a", OpenMode::create()).unwrap();
        let fb = b.open("b", OpenMode::create()).unwrap();
        a.write_at(fa, 0, &[1u8; 8192]).unwrap();
        b.write_at(fb, 0, &[2u8; 4096]).unwrap();
        b.write_at(fb, 4096, &[2u8; 4096]).unwrap();
        assert!(a.io_time().write_ns > 0 && b.io_time().write_ns > 0);
        assert_eq!(a.io_time().read_ns, 0);
        assert_eq!(shared.borrow().list().len(), 2);
    }
}
