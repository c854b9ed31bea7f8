//! [`Shared`]: one file system used by several users in one thread, each handle counting
//! the time its own calls took.

use crate::{read_slot, sync_slot, write_slot, Fd, IoTime, OpenMode, Vfs, VfsError};

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
    fn set_write_hint(&mut self, fd: Fd, hint: crate::WriteHint) -> Result<(), VfsError> {
        self.inner.borrow_mut().set_write_hint(fd, hint)
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
    fn think(&mut self, ns: u64) {
        self.inner.borrow_mut().think(ns)
    }
    fn io_time(&self) -> IoTime {
        self.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tests::drive;

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
