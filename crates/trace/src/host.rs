//! What the capture and its cleanup ask of this host: its programs (found on `PATH` or in
//! root's sbin), its mount table (/proc/self/mountinfo) and unmounting, and where tracefs
//! is mounted. Shared by [`crate::capture`] and [`crate::reclaim`].

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where tracefs is mounted.
pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";

/// Where `prog` is: on `PATH`, else in /usr/sbin or /sbin (root's tools when `PATH` lacks them).
pub(crate) fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(PathBuf::from))
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

/// Runs a program to completion: its standard output, or what went wrong (its stderr).
pub(crate) fn run_program(prog: &str, args: &[&str]) -> Result<String, String> {
    let exe = which(prog).unwrap_or_else(|| PathBuf::from(prog));
    let out = Command::new(&exe)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{prog} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One line of /proc/self/mountinfo.
struct MountEntry {
    id: u32,
    parent: u32,
    /// The mounted file system's device number (btrfs's is an anonymous one, not its
    /// disk's).
    dev: u64,
    point: PathBuf,
    /// The device number of the mount's source, where the source is a device node.
    source_rdev: Option<u64>,
}

fn mount_table() -> Vec<MountEntry> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (major, minor) = f.get(2)?.split_once(':')?;
            let source = l
                .split(" - ")
                .nth(1)?
                .split(' ')
                .nth(1)
                .map(unescape_mountinfo);
            Some(MountEntry {
                id: f.first()?.parse().ok()?,
                parent: f.get(1)?.parse().ok()?,
                dev: libc::makedev(major.parse().ok()?, minor.parse().ok()?),
                point: PathBuf::from(unescape_mountinfo(f.get(4)?)),
                source_rdev: source
                    .filter(|s| s.starts_with('/'))
                    .and_then(|s| std::fs::metadata(s).ok())
                    .filter(|m| m.file_type().is_block_device())
                    .map(|m| m.rdev()),
            })
        })
        .collect()
}

/// Mount points to undo, oldest first (the order of /proc/self/mountinfo): every mount of
/// one of `devices` (by the mounted file system's device number or its source node's,
/// however the source was named) or of the file system `fs_dev`, every mount stacked on
/// one of those (by parent id), and every mount at or under `root` (the work directory,
/// while it is still the one this capture made).
pub(crate) fn mounts_to_undo(
    devices: &[u64],
    fs_dev: Option<u64>,
    root: Option<&Path>,
) -> Vec<PathBuf> {
    let table = mount_table();
    let mut chosen: Vec<u32> = table
        .iter()
        .filter(|m| {
            devices.contains(&m.dev)
                || Some(m.dev) == fs_dev
                || m.source_rdev.is_some_and(|r| devices.contains(&r))
                || root.is_some_and(|r| m.point.starts_with(r))
        })
        .map(|m| m.id)
        .collect();
    loop {
        let before = chosen.len();
        for m in &table {
            if chosen.contains(&m.parent) && !chosen.contains(&m.id) {
                chosen.push(m.id);
            }
        }
        if chosen.len() == before {
            break;
        }
    }
    table
        .into_iter()
        .filter(|m| chosen.contains(&m.id))
        .map(|m| m.point)
        .collect()
}

/// Unmounts `point`, never following a symlink in its last component (`UMOUNT_NOFOLLOW`);
/// `lazy`: detach it now, free it when its users let go (`MNT_DETACH`).
pub(crate) fn unmount(point: &Path, lazy: bool) -> Result<(), String> {
    let c = std::ffi::CString::new(point.as_os_str().as_encoded_bytes())
        .map_err(|_| "a NUL in a mount point".to_string())?;
    let flags = libc::UMOUNT_NOFOLLOW | if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: umount2 reads a NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// A mountinfo path with its octal escapes (`\040` for a space) undone.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_mountinfo("/tmp/a\\040b/mnt"), "/tmp/a b/mnt");
        assert_eq!(unescape_mountinfo("/x\\134y"), "/x\\y");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        // The root file system is at or under "/".
        assert!(!mounts_to_undo(&[], None, Some(Path::new("/"))).is_empty());
    }
}
