//! A directory opened once and then written inside by name, never through a symlink, a
//! hard link or a FIFO: the report directory and its sections, which a user or another
//! process may have filled with such things since the last run.
//!
//! Every operation is relative to the open directory (`openat`, `renameat`, `unlinkat`,
//! `fstatat` without following), so swapping a name for a symlink between a check and a
//! use cannot redirect it. A file is written to a fresh temporary name (`O_EXCL |
//! O_NOFOLLOW`) and renamed over the target, which replaces whatever was there (a symlink,
//! a hard link, a FIFO) without opening it.

use std::ffi::CString;
use std::io::{Error, ErrorKind, Result, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// What a name in a directory is, not following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// An open directory.
#[derive(Debug)]
pub struct SafeDir(OwnedFd);

fn cname(name: &str) -> Result<CString> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{name:?} is not a name in a directory"),
        ));
    }
    CString::new(name).map_err(|_| Error::new(ErrorKind::InvalidInput, "a NUL in a name"))
}

fn check(rc: libc::c_int) -> Result<libc::c_int> {
    if rc < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl SafeDir {
    /// Opens the directory at `path` (the path itself may be a symlink: it is the user's
    /// choice of directory; names inside are never followed).
    pub fn open(path: &Path) -> Result<SafeDir> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::new(ErrorKind::InvalidInput, "a NUL in a path"))?;
        // SAFETY: open reads a NUL-terminated path; the descriptor is owned below.
        let fd = check(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(SafeDir(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn fd(&self) -> libc::c_int {
        self.0.as_raw_fd()
    }

    /// What `name` is, or None if there is nothing by that name.
    pub fn kind(&self, name: &str) -> Result<Option<Kind>> {
        let c = cname(name)?;
        // SAFETY: an all-zero stat is a valid value; fstatat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat reads a NUL-terminated name relative to an open directory.
        let rc =
            unsafe { libc::fstatat(self.fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if rc < 0 {
            let e = Error::last_os_error();
            return if e.kind() == ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(e)
            };
        }
        Ok(Some(match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        }))
    }

    /// Opens subdirectory `name`, or None if there is none (a symlink is not one).
    pub fn subdir_existing(&self, name: &str) -> Result<Option<SafeDir>> {
        let c = cname(name)?;
        // SAFETY: openat reads a NUL-terminated name relative to an open directory.
        let fd = unsafe {
            libc::openat(
                self.fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(Some(SafeDir(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    /// Opens subdirectory `name`, making it if absent; a file, symlink or other non-directory
    /// by that name is removed first (never followed).
    pub fn subdir(&self, name: &str) -> Result<SafeDir> {
        match self.kind(name)? {
            Some(Kind::Dir) => {}
            Some(_) => {
                self.remove_file(name)?;
                self.mkdir(name)?;
            }
            None => self.mkdir(name)?,
        }
        self.subdir_existing(name)?
            .ok_or_else(|| Error::other(format!("{name} is not a directory")))
    }

    fn mkdir(&self, name: &str) -> Result<()> {
        let c = cname(name)?;
        // SAFETY: mkdirat reads a NUL-terminated name relative to an open directory.
        check(unsafe { libc::mkdirat(self.fd(), c.as_ptr(), 0o755) }).map(|_| ())
    }

    /// Writes `bytes` as file `name`: to a fresh temporary name, then renamed over it.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let target = cname(name)?;
        let tmp_name = format!(".{name}.{}.tmp", std::process::id());
        let tmp = cname(&tmp_name)?;
        // A leftover of a killed run by that name goes first.
        // SAFETY: unlinkat reads a NUL-terminated name relative to an open directory.
        unsafe { libc::unlinkat(self.fd(), tmp.as_ptr(), 0) };
        // SAFETY: openat reads a NUL-terminated name; O_EXCL | O_NOFOLLOW make a new file.
        let fd = check(unsafe {
            libc::openat(
                self.fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o644,
            )
        })?;
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let written = f.write_all(bytes);
        drop(f);
        if let Err(e) = written {
            // SAFETY: as above.
            unsafe { libc::unlinkat(self.fd(), tmp.as_ptr(), 0) };
            return Err(e);
        }
        // SAFETY: renameat reads two NUL-terminated names relative to open directories.
        let rc = unsafe { libc::renameat(self.fd(), tmp.as_ptr(), self.fd(), target.as_ptr()) };
        if rc < 0 {
            let e = Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::unlinkat(self.fd(), tmp.as_ptr(), 0) };
            return Err(e);
        }
        Ok(())
    }

    /// Takes an exclusive advisory lock on the directory (`flock`, held until this
    /// `SafeDir` is dropped); false if another process holds it.
    pub fn try_lock(&self) -> Result<bool> {
        // SAFETY: flock on an open descriptor we own.
        let rc = unsafe { libc::flock(self.fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(false)
        } else {
            Err(e)
        }
    }

    /// The text of regular file `name`, or None if there is none (a symlink, FIFO or
    /// directory by that name is not read: opened without following, without blocking, and
    /// checked to be a regular file before reading).
    pub fn read_text(&self, name: &str) -> Result<Option<String>> {
        use std::io::Read;
        let c = cname(name)?;
        // SAFETY: openat reads a NUL-terminated name relative to an open directory.
        let fd = unsafe {
            libc::openat(
                self.fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT | libc::ELOOP) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        if !f.metadata()?.file_type().is_file() {
            return Ok(None);
        }
        let mut text = String::new();
        f.read_to_string(&mut text)?;
        Ok(Some(text))
    }

    /// Removes the non-directory `name` (a symlink itself, not what it points at).
    pub fn remove_file(&self, name: &str) -> Result<()> {
        let c = cname(name)?;
        // SAFETY: unlinkat reads a NUL-terminated name relative to an open directory.
        check(unsafe { libc::unlinkat(self.fd(), c.as_ptr(), 0) }).map(|_| ())
    }

    /// Removes the empty directory `name`.
    pub fn remove_dir(&self, name: &str) -> Result<()> {
        let c = cname(name)?;
        // SAFETY: as above.
        check(unsafe { libc::unlinkat(self.fd(), c.as_ptr(), libc::AT_REMOVEDIR) }).map(|_| ())
    }

    /// The names in the directory (through the open descriptor, not a path).
    pub fn names(&self) -> Result<Vec<String>> {
        let mut out: Vec<String> = std::fs::read_dir(format!("/proc/self/fd/{}", self.fd()))?
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_regular_files_and_one_lock_holder_at_a_time() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "outside").unwrap();
        let d = t.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("f"), "mine").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("sym")).unwrap();
        let c = CString::new(d.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sd = SafeDir::open(&d).unwrap();
        assert_eq!(sd.read_text("f").unwrap().as_deref(), Some("mine"));
        assert_eq!(sd.read_text("sym").unwrap(), None, "not through a symlink");
        assert_eq!(
            sd.read_text("fifo").unwrap(),
            None,
            "a FIFO is not read (nor waited on)"
        );
        assert_eq!(sd.read_text("absent").unwrap(), None);
        // Two opens of the same directory: the second cannot take the lock the first holds.
        let other = SafeDir::open(&d).unwrap();
        assert!(sd.try_lock().unwrap());
        assert!(!other.try_lock().unwrap());
        drop(sd);
        assert!(
            other.try_lock().unwrap(),
            "released when the holder is dropped"
        );
    }

    #[test]
    fn writes_replace_links_and_fifos_without_touching_what_they_name() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let d = t.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("sym")).unwrap();
        std::fs::hard_link(&victim, d.join("hard")).unwrap();
        let c = CString::new(d.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sd = SafeDir::open(&d).unwrap();
        for name in ["sym", "hard", "fifo", "new"] {
            sd.write(name, b"ours").unwrap();
            assert_eq!(std::fs::read_to_string(d.join(name)).unwrap(), "ours");
            assert_eq!(sd.kind(name).unwrap(), Some(Kind::File));
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(sd.names().unwrap(), ["fifo", "hard", "new", "sym"]);
        // A symlink where a directory should be is replaced, not followed.
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, d.join("sec")).unwrap();
        assert!(sd.subdir_existing("sec").unwrap().is_none());
        sd.subdir("sec").unwrap().write("a.svg", b"x").unwrap();
        assert!(d.join("sec/a.svg").is_file() && !elsewhere.join("a.svg").exists());
        assert!(sd.write("../x", b"no").is_err());
    }
}
