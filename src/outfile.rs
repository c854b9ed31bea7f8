//! Output files a command writes whole (a calibrated preset): checked before any work
//! starts, then written to a temporary name beside the target and renamed onto it, so a
//! reader or an interrupt never sees half a file and nothing is ever written through a
//! symlink, into a device or into a FIFO.
//!
//! The rule: the path is a regular file or nothing; a symlink, device, FIFO, socket or
//! directory there is refused; an existing file is replaced only when the user asked
//! (`--replace`); the directory must exist.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;

/// Checks that `path` may be written (see the module's rule); `flag` names the option
/// for messages (`--out`).
pub fn check(flag: &str, path: &Path, replace: bool) -> Result<()> {
    let dir = parent(path);
    if !dir.is_dir() {
        bail!(
            "{flag} {}: not a file in an existing directory",
            path.display()
        );
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => bail!(
            "{flag} {}: a symlink; give the path of a regular file (nothing is written through a symlink)",
            path.display()
        ),
        Ok(m) if !m.is_file() => bail!(
            "{flag} {}: not a regular file (a device, FIFO, socket or directory); give a file path",
            path.display()
        ),
        Ok(_) if !replace => bail!(
            "{flag} {}: exists; pass --replace to replace it",
            path.display()
        ),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => bail!("{flag} {}: {e}", path.display()),
    }
}

/// Writes `text` to `path` by a temporary file in its directory renamed onto it (the
/// rename replaces a symlink put there since [`check`], never its target). Without
/// `replace`, a file that appeared at `path` meanwhile is kept and this fails.
pub fn write(flag: &str, path: &Path, text: &str, replace: bool) -> Result<()> {
    check(flag, path, replace)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".flashlab-")
        .suffix(".tmp")
        // As a plain create would make it (the umask applies), not tempfile's 0600.
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(parent(path))
        .with_context(|| {
            format!(
                "{flag} {}: cannot make a temporary file beside it",
                path.display()
            )
        })?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    if replace {
        tmp.persist(path)
            .map_err(|e| anyhow::anyhow!("{flag} {}: {}", path.display(), e.error))?;
    } else {
        tmp.persist_noclobber(path).map_err(|e| {
            anyhow::anyhow!(
                "{flag} {}: {} (something made it while this ran; pass --replace to replace it)",
                path.display(),
                e.error
            )
        })?;
    }
    Ok(())
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_new_regular_file_or_one_asked_for_is_written() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.toml");
        write("--out", &p, "a", false).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a");
        let e = write("--out", &p, "b", false).unwrap_err().to_string();
        assert!(e.contains("exists; pass --replace"), "{e}");
        write("--out", &p, "b", true).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "b");

        let target = d.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("link.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for replace in [false, true] {
            let e = write("--out", &link, "x", replace).unwrap_err().to_string();
            assert!(e.contains("a symlink"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

        let fifo = d.path().join("f.toml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = check("--out", &fifo, true).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = check("--out", &d.path().join("no/p.toml"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("existing directory"), "{e}");
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
