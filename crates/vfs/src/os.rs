//! Real files in one directory. With O_DIRECT every read and write goes through a 4 KiB-
//! aligned bounce buffer (the caller's buffers need no alignment); `fallocate` is the real
//! system call; `sync_dir` fsyncs the directory, which makes creations, renames and
//! removals durable. A cancelled [`Cancel`] token makes every later call fail with
//! [`VfsError::Interrupted`], so a run stops at its next I/O and its owner cleans up.

use crate::{check_name, Fd, IoTime, OpenMode, Vfs, VfsError};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;
use trace::Cancel;

/// `F_LINUX_SPECIFIC_BASE + 11` and `+ 12` (include/uapi/linux/fcntl.h; the base is 1024,
/// include/uapi/asm-generic/fcntl.h): get and set an inode's write-life hint. The libc
/// crate does not define them.
pub const F_GET_RW_HINT: libc::c_int = 1024 + 11;
pub const F_SET_RW_HINT: libc::c_int = 1024 + 12;

/// O_DIRECT's alignment (the logical block size of every device here).
const ALIGN: u64 = 4096;

struct OpenFile {
    file: File,
    name: String,
    len: u64,
    direct: bool,
    /// A read-only map of the file ([`Vfs::map`]), which may run past its end: only bytes
    /// below `len` are ever read through it (a page past the end would fault).
    map: Option<memmap2::Mmap>,
}

/// The smallest map made: a file that grows is mapped again at twice its length, so a
/// file read while it is appended to is mapped a few times, not at every read.
const MIN_MAP: u64 = 1 << 20;

/// Real files in a directory.
pub struct OsVfs {
    dir: PathBuf,
    files: HashMap<Fd, OpenFile>,
    next_fd: Fd,
    started: Instant,
    io: IoTime,
    cancel: Option<Cancel>,
}

/// A zeroed buffer with a 4 KiB-aligned window of `len` bytes: (buffer, window start).
fn aligned(len: usize) -> (Vec<u8>, usize) {
    let v = vec![0u8; len + ALIGN as usize];
    let start = v.as_ptr().align_offset(ALIGN as usize);
    (v, start)
}

impl OsVfs {
    /// The files of directory `dir`, which must exist.
    pub fn new(dir: &Path) -> Result<OsVfs, VfsError> {
        let meta = std::fs::metadata(dir).map_err(|e| VfsError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        if !meta.is_dir() {
            return Err(VfsError::Invalid(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(OsVfs {
            dir: dir.to_path_buf(),
            files: HashMap::new(),
            next_fd: 0,
            started: Instant::now(),
            io: IoTime::default(),
            cancel: None,
        })
    }

    /// The token that stops this file system's calls, if any.
    pub fn cancel(&self) -> Option<&Cancel> {
        self.cancel.as_ref()
    }

    /// Every later call fails with [`VfsError::Interrupted`] once `cancel` is cancelled.
    pub fn with_cancel(mut self, cancel: Cancel) -> OsVfs {
        self.cancel = Some(cancel);
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of file `name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn check_cancel(&self) -> Result<(), VfsError> {
        match &self.cancel {
            Some(c) if c.is_cancelled() => Err(VfsError::Interrupted),
            _ => Ok(()),
        }
    }

    fn error(&self, name: &str, source: std::io::Error) -> VfsError {
        let path = self.path(name).display().to_string();
        match source.raw_os_error() {
            Some(libc::ENOSPC) => VfsError::DiskFull { path },
            _ if source.kind() == std::io::ErrorKind::NotFound => VfsError::NotFound(path),
            _ if source.kind() == std::io::ErrorKind::AlreadyExists => VfsError::Exists(path),
            _ => VfsError::Io { path, source },
        }
    }

    fn file(&self, fd: Fd) -> &OpenFile {
        self.files
            .get(&fd)
            .expect("a handle this file system gave out")
    }
}

impl Vfs for OsVfs {
    fn open(&mut self, name: &str, mode: OpenMode) -> Result<Fd, VfsError> {
        self.check_cancel()?;
        check_name(name)?;
        let mut o = OpenOptions::new();
        o.read(true).write(!mode.read_only);
        if mode.create_new {
            o.create_new(true);
        } else if mode.create {
            o.create(true);
        }
        if mode.direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(self.path(name)).map_err(|e| self.error(name, e))?;
        let len = file.metadata().map_err(|e| self.error(name, e))?.len();
        let fd = self.next_fd;
        self.next_fd += 1;
        self.files.insert(
            fd,
            OpenFile {
                file,
                name: name.to_string(),
                len,
                direct: mode.direct,
                map: None,
            },
        );
        Ok(fd)
    }

    fn close(&mut self, fd: Fd) {
        self.files.remove(&fd);
    }

    fn len(&self, fd: Fd) -> u64 {
        self.file(fd).len
    }

    fn read_at(&mut self, fd: Fd, offset: u64, buf: &mut [u8]) -> Result<usize, VfsError> {
        self.check_cancel()?;
        let t = Instant::now();
        let f = self.file(fd);
        if offset >= f.len {
            return Ok(0);
        }
        let n = (f.len - offset).min(buf.len() as u64) as usize;
        let r = if f.direct {
            let lo = offset / ALIGN * ALIGN;
            let hi = (offset + n as u64).div_ceil(ALIGN) * ALIGN;
            let span = (hi - lo) as usize;
            let (mut v, at) = aligned(span);
            let window = &mut v[at..at + span];
            let mut got = 0;
            let mut r = Ok(());
            while got < span {
                match f.file.read_at(&mut window[got..], lo + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            let skip = (offset - lo) as usize;
            r.and_then(|()| {
                if got < skip + n {
                    Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "short read",
                    ))
                } else {
                    buf[..n].copy_from_slice(&window[skip..skip + n]);
                    Ok(())
                }
            })
        } else {
            f.file.read_exact_at(&mut buf[..n], offset)
        };
        if let Err(e) = r {
            let name = f.name.clone();
            return Err(self.error(&name, e));
        }
        self.io.read_ns += t.elapsed().as_nanos() as u64;
        Ok(n)
    }

    fn map(&mut self, fd: Fd, end: u64) -> Result<bool, VfsError> {
        self.check_cancel()?;
        let f = self.files.get_mut(&fd).expect("an open file");
        if f.direct || end > f.len {
            return Ok(false);
        }
        if f.map.as_ref().is_some_and(|m| m.len() as u64 >= end) {
            return Ok(true);
        }
        f.map = None;
        let len = f.len.next_power_of_two().max(MIN_MAP);
        // SAFETY: the map is read only below the file's length as this Vfs keeps it
        // (`mapped`), and the files are this process's own: one that another process
        // truncates under it would fault, as an LMDB file would. A map that cannot be
        // made (the process's map count, address space) is no error: reads go through
        // `read_at`.
        let Ok(len) = usize::try_from(len) else {
            return Ok(false);
        };
        f.map = unsafe { memmap2::MmapOptions::new().len(len).map(&f.file) }.ok();
        Ok(f.map.is_some())
    }

    fn mapped(&self, fd: Fd, offset: u64, len: usize) -> Option<&[u8]> {
        let f = self.file(fd);
        let end = offset.checked_add(len as u64)?;
        let m = f.map.as_ref()?;
        if end > f.len || end > m.len() as u64 {
            return None;
        }
        Some(&m[offset as usize..end as usize])
    }

    fn write_at(&mut self, fd: Fd, offset: u64, data: &[u8]) -> Result<(), VfsError> {
        self.check_cancel()?;
        let t = Instant::now();
        let f = self.file(fd);
        let r = if f.direct {
            if !offset.is_multiple_of(ALIGN) || !(data.len() as u64).is_multiple_of(ALIGN) {
                return Err(VfsError::Invalid(format!(
                    "{}: with O_DIRECT, writes must be whole 4 KiB blocks at 4 KiB offsets (offset {offset}, {} bytes)",
                    f.name,
                    data.len()
                )));
            }
            let (mut v, at) = aligned(data.len());
            v[at..at + data.len()].copy_from_slice(data);
            f.file.write_all_at(&v[at..at + data.len()], offset)
        } else {
            f.file.write_all_at(data, offset)
        };
        let name = f.name.clone();
        r.map_err(|e| self.error(&name, e))?;
        let f = self.files.get_mut(&fd).expect("checked");
        f.len = f.len.max(offset + data.len() as u64);
        self.io.write_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    /// The real `fcntl(fd, F_SET_RW_HINT, &hint)` on the open file (Linux 4.13 and later
    /// take it on any file; what reaches the device depends on the kernel and file
    /// system: since Linux 5.18 the NVMe driver no longer turns hints into streams). A
    /// kernel that refuses it is an error naming the file.
    fn set_write_hint(&mut self, fd: Fd, hint: crate::WriteHint) -> Result<(), VfsError> {
        self.check_cancel()?;
        let f = self.file(fd);
        let value: u64 = hint.value();
        // SAFETY: the descriptor is open for the call; the kernel reads one u64 from
        // `&value`, which lives across it.
        let rc = unsafe { libc::fcntl(f.file.as_raw_fd(), F_SET_RW_HINT, &value as *const u64) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            let name = f.name.clone();
            return Err(self.error(&name, e));
        }
        Ok(())
    }
    fn fallocate(&mut self, fd: Fd, offset: u64, len: u64) -> Result<(), VfsError> {
        self.check_cancel()?;
        let f = self.file(fd);
        let (Ok(off), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Err(VfsError::Invalid(format!(
                "{}: fallocate of {len} bytes at {offset} is out of range",
                f.name
            )));
        };
        // SAFETY: the descriptor is open for the duration of the call.
        let rc = unsafe { libc::fallocate(f.file.as_raw_fd(), 0, off, l) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            let name = f.name.clone();
            return Err(self.error(&name, e));
        }
        let f = self.files.get_mut(&fd).expect("checked");
        f.len = f.len.max(offset + len);
        Ok(())
    }

    fn truncate(&mut self, fd: Fd, len: u64) -> Result<(), VfsError> {
        self.check_cancel()?;
        let f = self.files.get_mut(&fd).expect("an open file");
        // A map must not outlive the bytes it covers.
        f.map = None;
        let name = f.name.clone();
        let f = self.file(fd);
        f.file.set_len(len).map_err(|e| self.error(&name, e))?;
        self.files.get_mut(&fd).expect("checked").len = len;
        Ok(())
    }

    fn fsync(&mut self, fd: Fd) -> Result<(), VfsError> {
        self.check_cancel()?;
        let t = Instant::now();
        let f = self.file(fd);
        let name = f.name.clone();
        f.file.sync_data().map_err(|e| self.error(&name, e))?;
        self.io.sync_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), VfsError> {
        self.check_cancel()?;
        check_name(from)?;
        check_name(to)?;
        std::fs::rename(self.path(from), self.path(to)).map_err(|e| self.error(from, e))?;
        for f in self.files.values_mut().filter(|f| f.name == from) {
            f.name = to.to_string();
        }
        Ok(())
    }

    /// Not cancellable: removing files is what a cancelled run does on its way out.
    fn unlink(&mut self, name: &str) -> Result<(), VfsError> {
        check_name(name)?;
        std::fs::remove_file(self.path(name)).map_err(|e| self.error(name, e))
    }

    fn sync_dir(&mut self) -> Result<(), VfsError> {
        self.check_cancel()?;
        let t = Instant::now();
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| VfsError::Io {
                path: self.dir.display().to_string(),
                source: e,
            })?;
        self.io.sync_ns += t.elapsed().as_nanos() as u64;
        Ok(())
    }

    fn list(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    }

    fn exists(&self, name: &str) -> bool {
        check_name(name).is_ok() && self.path(name).is_file()
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn io_time(&self) -> IoTime {
        self.io
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_hints_reach_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = OsVfs::new(dir.path()).unwrap();
        let fd = fs.open("h", OpenMode::create_new()).unwrap();
        for hint in crate::WriteHint::ALL.into_iter().rev() {
            fs.set_write_hint(fd, hint).unwrap();
            // Read it back from the inode with the kernel's F_GET_RW_HINT.
            let mut got: u64 = 99;
            // SAFETY: open descriptor; the kernel writes one u64 into `got`.
            let rc = unsafe {
                libc::fcntl(
                    fs.file(fd).file.as_raw_fd(),
                    F_GET_RW_HINT,
                    &mut got as *mut u64,
                )
            };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            assert_eq!(got, hint.value(), "{hint}");
        }
    }

    #[test]
    fn files_are_written_read_renamed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        for direct in [false, true] {
            let mut fs = OsVfs::new(dir.path()).unwrap();
            let fd = match fs.open("a", OpenMode::create_new().direct(direct)) {
                Ok(fd) => fd,
                // tmpfs and some others refuse O_DIRECT: nothing to test there.
                Err(e) if direct => {
                    eprintln!("SKIPPED the O_DIRECT half: {e}");
                    break;
                }
                Err(e) => panic!("{e}"),
            };
            let block: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
            fs.write_at(fd, 4096, &block).unwrap();
            assert_eq!(fs.len(fd), 12288);
            let mut buf = vec![0u8; 100];
            assert_eq!(fs.read_at(fd, 4096 + 10, &mut buf).unwrap(), 100);
            assert_eq!(&buf[..], &block[10..110]);
            // A read past the end returns what is there.
            assert_eq!(fs.read_at(fd, 12288 - 50, &mut buf).unwrap(), 50);
            if direct {
                let e = fs.write_at(fd, 100, b"x").unwrap_err().to_string();
                assert!(e.contains("4 KiB"), "{e}");
            }
            fs.fallocate(fd, 0, 1 << 20).unwrap();
            assert_eq!(fs.len(fd), 1 << 20);
            fs.fsync(fd).unwrap();
            fs.rename("a", "b").unwrap();
            fs.sync_dir().unwrap();
            assert_eq!(fs.list(), vec!["b".to_string()]);
            assert!(matches!(
                fs.open("b", OpenMode::create_new()),
                Err(VfsError::Exists(_))
            ));
            fs.unlink("b").unwrap();
            assert!(matches!(
                fs.open("b", OpenMode::existing()),
                Err(VfsError::NotFound(_))
            ));
            assert!(fs.list().is_empty());
        }
    }

    /// A map reads what was written, grows with the file when asked again, and never
    /// reaches past the file's end (after a truncation, nothing is read through it).
    #[test]
    fn a_map_reads_what_was_written_and_stops_at_the_files_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = OsVfs::new(dir.path()).unwrap();
        let fd = fs.open("m", OpenMode::create_new()).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        fs.write_at(fd, 0, &data).unwrap();
        assert!(!fs.map(fd, 10_001).unwrap(), "not past the end");
        assert!(fs.map(fd, 10_000).unwrap());
        assert_eq!(fs.mapped(fd, 100, 900).unwrap(), &data[100..1000]);
        assert_eq!(fs.mapped(fd, 9_000, 1_001), None, "past the end");
        // Grown past the first map (1 MiB): mapped again at the new length.
        let more = vec![9u8; 2 << 20];
        fs.write_at(fd, 10_000, &more).unwrap();
        let end = 10_000 + more.len() as u64;
        assert_eq!(fs.mapped(fd, end - 10, 10), None, "past the old map");
        assert!(fs.map(fd, end).unwrap());
        assert_eq!(fs.mapped(fd, end - 10, 10).unwrap(), &[9u8; 10]);
        assert_eq!(fs.mapped(fd, 0, 10).unwrap(), &data[..10]);
        // A write below the end is seen through the map (one page cache).
        fs.write_at(fd, 5, b"xyz").unwrap();
        assert_eq!(fs.mapped(fd, 5, 3).unwrap(), b"xyz");
        fs.truncate(fd, 4096).unwrap();
        assert_eq!(fs.mapped(fd, 0, 10), None, "a truncation drops the map");
        assert!(fs.map(fd, 4096).unwrap());
        assert_eq!(fs.mapped(fd, 4000, 97), None);
        assert_eq!(fs.mapped(fd, 4000, 96).unwrap().len(), 96);
        fs.close(fd);
    }

    #[test]
    fn bad_names_and_cancellation_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = Cancel::new();
        let mut fs = OsVfs::new(dir.path()).unwrap().with_cancel(cancel.clone());
        for bad in ["", "a/b", "..", "."] {
            assert!(matches!(
                fs.open(bad, OpenMode::create()),
                Err(VfsError::Invalid(_))
            ));
        }
        let fd = fs.open("x", OpenMode::create()).unwrap();
        cancel.cancel();
        assert!(matches!(
            fs.write_at(fd, 0, b"x"),
            Err(VfsError::Interrupted)
        ));
        assert!(OsVfs::new(&dir.path().join("missing")).is_err());
    }
}
