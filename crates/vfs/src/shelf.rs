//! [`Shelf`]: read-only files held in memory and shared without copying (each file's bytes
//! behind an `Arc`), e.g. a join's input tables kept off the simulated drive: every
//! repetition and every user reads the same bytes, and none is copied to set it up. A file
//! too large to hold can be a [`FileSource`] instead: its bytes made as they are read.

use crate::{Fd, OpenMode, Vfs, VfsError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A read-only file whose bytes are made when read (a generated table), for files larger
/// than memory. Reads are expected mostly in order; each open gets its own source.
pub trait FileSource: Send {
    /// The file's length.
    fn len_bytes(&self) -> u64;
    /// Fills `buf` from `offset` (up to the end); returns the bytes filled.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> usize;
}

/// Makes a fresh [`FileSource`] for each open.
pub type SourceFactory = Arc<dyn Fn() -> Box<dyn FileSource> + Send + Sync>;

/// A file on the shelf.
#[derive(Clone)]
enum Content {
    Bytes(Arc<Vec<u8>>),
    Source(SourceFactory),
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Content::Bytes(b) => write!(f, "{} bytes", b.len()),
            Content::Source(_) => f.write_str("a generated file"),
        }
    }
}

/// An open file.
enum Open {
    Bytes(Arc<Vec<u8>>),
    Source(Box<dyn FileSource>),
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Open::Bytes(b) => write!(f, "{} bytes", b.len()),
            Open::Source(s) => write!(f, "a generated file of {} bytes", s.len_bytes()),
        }
    }
}

/// Read-only in-memory files; writing, resizing, renaming or removing one is an error.
#[derive(Debug, Default)]
pub struct Shelf {
    files: BTreeMap<String, Content>,
    fds: HashMap<Fd, Open>,
    next_fd: Fd,
}

impl Shelf {
    pub fn new() -> Shelf {
        Shelf::default()
    }

    /// Puts `bytes` on the shelf as file `name` (replacing one of that name).
    pub fn insert(&mut self, name: &str, bytes: Arc<Vec<u8>>) {
        self.files.insert(name.to_string(), Content::Bytes(bytes));
    }

    /// Puts a generated file on the shelf as file `name`: each open reads from a fresh
    /// source made by `factory`.
    pub fn insert_source(&mut self, name: &str, factory: SourceFactory) {
        self.files
            .insert(name.to_string(), Content::Source(factory));
    }

    fn read_only(name: &str) -> VfsError {
        VfsError::Invalid(format!("{name}: a read-only in-memory file"))
    }

    fn file(&self, fd: Fd) -> &Open {
        self.fds.get(&fd).expect("an open file of this shelf")
    }
}

impl Vfs for Shelf {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        if mode.create_new && self.files.contains_key(name) {
            return Err(VfsError::Exists(name.to_string()));
        }
        let open = match self.files.get(name) {
            Some(Content::Bytes(b)) => Open::Bytes(b.clone()),
            Some(Content::Source(factory)) => Open::Source(factory()),
            None if mode.create || mode.create_new => return Err(Self::read_only(name)),
            None => return Err(VfsError::NotFound(name.to_string())),
        };
        let fd = self.next_fd;
        self.next_fd += 1;
        self.fds.insert(fd, open);
        Ok(fd)
    }
    fn close(&mut self, fd: Fd) {
        self.fds.remove(&fd);
    }
    fn len(&self, fd: Fd) -> u64 {
        match self.file(fd) {
            Open::Bytes(b) => b.len() as u64,
            Open::Source(s) => s.len_bytes(),
        }
    }
    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        match self.fds.get_mut(&fd).expect("an open file of this shelf") {
            Open::Bytes(data) => {
                let start = (offset.min(data.len() as u64)) as usize;
                let n = buf.len().min(data.len() - start);
                buf[..n].copy_from_slice(&data[start..start + n]);
                Ok(n)
            }
            Open::Source(s) => {
                let len = s.len_bytes();
                if offset >= len {
                    return Ok(0);
                }
                let n = (buf.len() as u64).min(len - offset) as usize;
                Ok(s.read_at(offset, &mut buf[..n]))
            }
        }
    }
    fn read_at_unseen(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        // Nothing to make or copy: only the count.
        let len = self.len(fd);
        Ok((buf.len() as u64).min(len.saturating_sub(offset)) as usize)
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

    /// A source that counts the bytes it was asked to make.
    struct Counting(Arc<std::sync::atomic::AtomicU64>);
    impl FileSource for Counting {
        fn len_bytes(&self) -> u64 {
            100
        }
        fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> usize {
            let n = buf.len().min(100usize.saturating_sub(offset as usize));
            self.0
                .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            buf[..n].fill(7);
            n
        }
    }

    #[test]
    fn an_unseen_read_counts_as_a_read_and_makes_no_bytes() {
        let made = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let m = made.clone();
        let mut s = Shelf::new();
        s.insert_source(
            "gen",
            Arc::new(move || Box::new(Counting(m.clone())) as Box<dyn FileSource>),
        );
        s.insert("mem", Arc::new(vec![1u8; 100]));
        for name in ["gen", "mem"] {
            let fd = s.open(name, OpenMode::read_only()).unwrap();
            let mut buf = [0u8; 8];
            for offset in [0, 50, 96, 100, 500] {
                let unseen = s.read_at_unseen(fd, offset, &mut buf).unwrap();
                assert_eq!(
                    unseen,
                    s.read_at(fd, offset, &mut buf).unwrap(),
                    "{name} at {offset}"
                );
            }
        }
        // Only the seen reads made bytes: 8 + 8 + 4 + 0 + 0.
        assert_eq!(made.load(std::sync::atomic::Ordering::Relaxed), 20);
    }
}
