//! [`Shelf`]: read-only files held in memory and shared without copying (each file's bytes
//! behind an `Arc`), e.g. a join's input tables kept off the simulated drive: every
//! repetition and every user reads the same bytes, and none is copied to set it up.

use crate::{Fd, OpenMode, Vfs, VfsError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Read-only in-memory files; writing, resizing, renaming or removing one is an error.
#[derive(Debug, Clone, Default)]
pub struct Shelf {
    files: BTreeMap<String, Arc<Vec<u8>>>,
    fds: HashMap<Fd, Arc<Vec<u8>>>,
    next_fd: Fd,
}

impl Shelf {
    pub fn new() -> Shelf {
        Shelf::default()
    }

    /// Puts `bytes` on the shelf as file `name` (replacing one of that name).
    pub fn insert(&mut self, name: &str, bytes: Arc<Vec<u8>>) {
        self.files.insert(name.to_string(), bytes);
    }

    fn read_only(name: &str) -> VfsError {
        VfsError::Invalid(format!("{name}: a read-only in-memory file"))
    }

    fn file(&self, fd: Fd) -> &Arc<Vec<u8>> {
        self.fds.get(&fd).expect("an open file of this shelf")
    }
}

impl Vfs for Shelf {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        if mode.create_new && self.files.contains_key(name) {
            return Err(VfsError::Exists(name.to_string()));
        }
        let bytes = match self.files.get(name) {
            Some(b) => b.clone(),
            None if mode.create || mode.create_new => return Err(Self::read_only(name)),
            None => return Err(VfsError::NotFound(name.to_string())),
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, bytes);
        Ok(fd)
    }
    fn close(&mut self, fd: Fd) {
        self.fds.remove(&fd);
    }
    fn len(&self, fd: Fd) -> u64 {
        self.file(fd).len() as u64
    }
    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        let data = self.file(fd);
        let start = (offset.min(data.len() as u64)) as usize;
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }
    fn write_at(&mut self, _fd: Fd, _offset: u64, _data: &[u8]) -> Result<(), VfsError> {
        Err(Self::read_only("a shelf file"))
    }
    fn fallocate(&mut self, _fd: Fd, _offset: u64, _len: u64) -> Result<(), VfsError> {
        Err(Self::read_only("a shelf file"))
    }
    fn truncate(&mut self, _fd: Fd, _len: u64) -> Result<(), VfsError> {
        Err(Self::read_only("a shelf file"))
    }
    fn fsync(&mut self, _fd: Fd) -> Result<(), VfsError> {
        Ok(())
    }
    fn rename(&mut self, from: &str, _to: &str) -> Result<(), VfsError> {
        Err(Self::read_only(from))
    }
    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        Err(Self::read_only(name))
    }
    fn sync_dir(&mut self) -> Result<(), VfsError> {
        Ok(())
    }
    fn list(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }
    fn now_ns(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_bytes_and_refuses_changes() {
        let bytes = Arc::new((0..100u8).collect::<Vec<u8>>());
        let mut s = Shelf::new();
        s.insert("t", bytes.clone());
        let fd = s.open("t", OpenMode::read_only()).unwrap();
        assert_eq!(s.len(fd), 100);
        let mut buf = [0u8; 8];
        assert_eq!(s.read_at(fd, 96, &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], &[96, 97, 98, 99]);
        assert_eq!(s.read_at(fd, 500, &mut buf).unwrap(), 0);
        assert_eq!(
            Arc::strong_count(&bytes),
            3,
            "no copy: the shelf and the fd share it"
        );
        assert!(matches!(s.write_at(fd, 0, b"x"), Err(VfsError::Invalid(_))));
        assert!(matches!(s.unlink("t"), Err(VfsError::Invalid(_))));
        assert!(matches!(
            s.open("new", OpenMode::create()),
            Err(VfsError::Invalid(_))
        ));
        assert!(matches!(
            s.open("nope", OpenMode::read_only()),
            Err(VfsError::NotFound(_))
        ));
        assert_eq!(s.list(), vec!["t".to_string()]);
    }
}
