//! What a run killed outright left behind (SIGKILL, the kernel's OOM killer: no handler
//! runs, so no teardown does), removed at the next run's start.
//!
//! Every directory a capture or an experiment makes for loop-device images gets an
//! [`OWNER_FILE`] first thing: the making process's id and its start time (field 22 of
//! `/proc/PID/stat`, so a recycled process id is not taken for the owner). A directory
//! whose owner is no longer running is a dead run's: [`reclaim_dir`] unmounts what is
//! mounted from its images or under it (newest first), detaches the loop devices its
//! images back (found by the images' device and inode, as the kernel reports them, never
//! by path), removes the capture's tracing instance, and removes the directory.
//! [`reclaim_siblings`] does that for every such directory of one name prefix in a place.
//! Nothing without an owner file, with a live owner, not a directory, or not named with
//! flashlab's prefix is touched; a directory with a mount that would not go is left, said.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The name of the owner file in a work directory.
pub const OWNER_FILE: &str = ".flashlab-owner";

/// This process's start time, in clock ticks after boot (`/proc/self/stat` field 22).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields 3.. follow; the start time is field 22, the 20th of these.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Writes `dir`'s owner file: this process, now.
pub fn write_owner(dir: &Path) -> std::io::Result<()> {
    let pid = std::process::id();
    let ticks = start_ticks(pid).unwrap_or(0);
    std::fs::write(dir.join(OWNER_FILE), format!("{pid} {ticks}\n"))
}

/// Whether the process named in `dir`'s owner file still runs: `None` without a readable
/// owner file (then the directory is not judged).
pub fn owner_alive(dir: &Path) -> Option<bool> {
    let text = std::fs::read_to_string(dir.join(OWNER_FILE)).ok()?;
    let mut f = text.split_whitespace();
    let pid: u32 = f.next()?.parse().ok()?;
    let ticks: u64 = f.next()?.parse().ok()?;
    Some(start_ticks(pid) == Some(ticks))
}

/// Reclaims every directory directly under `base` whose name starts with `prefix` (one of
/// flashlab's, `flashlab-...`) and whose owner is dead; returns what was removed and what
/// could not be, one line each.
pub fn reclaim_siblings(base: &Path, prefix: &str) -> Vec<String> {
    debug_assert!(prefix.starts_with("flashlab-"));
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut dead: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .map(|e| e.path())
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .filter(|p| owner_alive(p) == Some(false))
        .collect();
    dead.sort();
    dead.iter().flat_map(|d| reclaim_dir(d)).collect()
}

/// Reclaims `dir`, a dead run's work directory (see the module's notes), and every dead
/// capture directory (`flashlab-capture-*`) in it; returns what was removed and what could
/// not be.
pub fn reclaim_dir(dir: &Path) -> Vec<String> {
    let mut said = Vec::new();
    // Captures inside an experiment's directory, first.
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut inner: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.starts_with("flashlab-capture-"))
            })
            .map(|e| e.path())
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
            .filter(|p| owner_alive(p) != Some(true))
            .collect();
        inner.sort();
        for d in inner {
            said.extend(release(&d));
        }
    }
    said.extend(release(dir));
    said
}

/// Undoes what `dir`'s images are attached and mounted as, then removes `dir`.
fn release(dir: &Path) -> Vec<String> {
    let mut said = Vec::new();
    let Ok(real) = std::fs::canonicalize(dir) else {
        return said;
    };
    // The images here, by (device, inode).
    let images: Vec<(u64, u64)> = std::fs::read_dir(&real)
        .map(|es| {
            es.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| (m.dev(), m.ino()))
                .collect()
        })
        .unwrap_or_default();
    let loops: Vec<(String, u64)> = crate::loopdev::attached()
        .into_iter()
        .filter(|(_, b)| images.contains(&(b.dev, b.ino)))
        .filter_map(|(d, _)| Some((d.clone(), std::fs::metadata(&d).ok()?.rdev())))
        .collect();
    let devices: Vec<u64> = loops.iter().map(|(_, r)| *r).collect();
    // Mounts of those devices, or under the directory, newest first.
    let mut stuck = false;
    for point in crate::capture::mounts_to_undo(&devices, None, Some(&real))
        .into_iter()
        .rev()
    {
        match crate::capture::unmount(&point, false)
            .or_else(|_| crate::capture::unmount(&point, true))
        {
            Ok(()) => said.push(format!("unmounted {}", point.display())),
            Err(e) => {
                stuck = true;
                said.push(format!("could not unmount {}: {e}", point.display()));
            }
        }
    }
    for (dev, _) in &loops {
        match crate::capture::run("detach a loop device", "losetup", &["-d", dev]) {
            Ok(_) => said.push(format!("detached loop device {dev}")),
            Err(e) => said.push(format!("could not detach {dev}: {e}")),
        }
    }
    // The capture's tracing instance: flashlab-capture-PID-RAND, RAND the directory's.
    if let Some(rand) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("flashlab-capture-"))
    {
        let pid = std::fs::read_to_string(dir.join(OWNER_FILE))
            .ok()
            .and_then(|t| t.split_whitespace().next().map(str::to_string));
        if let Some(pid) = pid {
            let inst = Path::new(crate::capture::TRACEFS)
                .join("instances")
                .join(format!("flashlab-capture-{pid}-{rand}"));
            if inst.is_dir() {
                let _ = std::fs::write(inst.join("tracing_on"), "0");
                match std::fs::remove_dir(&inst) {
                    Ok(()) => said.push(format!("removed tracing instance {}", inst.display())),
                    Err(e) => said.push(format!("could not remove {}: {e}", inst.display())),
                }
            }
        }
    }
    // Never remove through a mount that stayed.
    if stuck || !crate::capture::mounts_to_undo(&[], None, Some(&real)).is_empty() {
        said.push(format!(
            "left {}: something is still mounted under it",
            real.display()
        ));
        return said;
    }
    match std::fs::remove_dir_all(&real) {
        Ok(()) => said.push(format!("removed {}", real.display())),
        Err(e) => said.push(format!("could not remove {}: {e}", real.display())),
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_finished_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        write_owner(dir.path()).unwrap();
        assert_eq!(owner_alive(dir.path()), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        std::fs::write(dir.path().join(OWNER_FILE), format!("{pid} 1\n")).unwrap();
        assert_eq!(owner_alive(dir.path()), Some(false));
        // This process's id with another start time: a recycled id, not the owner.
        let me = std::process::id();
        let ticks = start_ticks(me).unwrap();
        std::fs::write(dir.path().join(OWNER_FILE), format!("{me} {}\n", ticks + 1)).unwrap();
        assert_eq!(owner_alive(dir.path()), Some(false));
        std::fs::remove_file(dir.path().join(OWNER_FILE)).unwrap();
        assert_eq!(owner_alive(dir.path()), None, "no owner file: not judged");
    }

    #[test]
    fn only_dead_owners_directories_with_the_prefix_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let mk = |name: &str, owner: Option<&str>| {
            let d = base.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("data"), "x").unwrap();
            if let Some(o) = owner {
                std::fs::write(d.join(OWNER_FILE), o).unwrap();
            }
            d
        };
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = format!("{} 1\n", child.id());
        child.wait().unwrap();
        let gone = mk("flashlab-test-dead", Some(&dead));
        let live = mk("flashlab-test-live", None);
        write_owner(&live).unwrap();
        let unowned = mk("flashlab-test-unowned", None);
        let other = mk("someone-else-dead", Some(&dead));
        // A symlink with the prefix, to a dead owner's directory elsewhere: not followed.
        let target = mk("elsewhere", Some(&dead));
        std::os::unix::fs::symlink(&target, base.path().join("flashlab-test-link")).unwrap();
        let said = reclaim_siblings(base.path(), "flashlab-test-");
        assert!(!gone.exists(), "{said:?}");
        assert!(live.exists() && unowned.exists() && other.exists() && target.exists());
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("removed "), "{said:?}");
    }
}

#[cfg(test)]
mod root_tests {
    use super::*;

    fn can_attach() -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        root && std::process::Command::new("losetup")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    #[test]
    fn a_killed_capture_s_mount_loop_device_instance_and_image_are_reclaimed() {
        if !can_attach() {
            eprintln!(
                "skipped: needs root and losetup (a loop device, a mount, a tracing instance)"
            );
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("flashlab-capture-rtest1");
        std::fs::create_dir(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(dir.join(OWNER_FILE), format!("{dead} 1\n")).unwrap();
        let img = dir.join("ext4.img");
        std::fs::File::create(&img)
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
        let sh = |prog: &str, args: &[&str]| {
            let o = std::process::Command::new(prog)
                .args(args)
                .output()
                .unwrap();
            assert!(o.status.success(), "{prog} {args:?}: {o:?}");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let dev = sh("losetup", &["--find", "--show", img.to_str().unwrap()]);
        sh("mkfs.ext4", &["-q", &dev]);
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        sh("mount", &[&dev, mnt.to_str().unwrap()]);
        let inst = Path::new(crate::capture::TRACEFS)
            .join("instances")
            .join(format!("flashlab-capture-{dead}-rtest1"));
        let traced = std::fs::create_dir(&inst).is_ok();
        // A live capture beside it is left alone.
        let live = base.path().join("flashlab-capture-rtest2");
        std::fs::create_dir(&live).unwrap();
        write_owner(&live).unwrap();

        let said = reclaim_siblings(base.path(), "flashlab-capture-");
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .contains(mnt.to_str().unwrap());
        let attached = crate::loopdev::attached().iter().any(|(d, _)| *d == dev);
        if mounted || attached {
            // Clean up by hand before failing.
            let _ = crate::capture::unmount(&mnt, true);
            let _ = std::process::Command::new("losetup")
                .args(["-d", &dev])
                .status();
        }
        assert!(!mounted, "still mounted: {said:?}");
        assert!(!attached, "{dev} still attached: {said:?}");
        assert!(!dir.exists(), "{said:?}");
        assert!(live.exists());
        if traced {
            assert!(!inst.exists(), "{said:?}");
        }
        assert!(said.iter().any(|l| l.starts_with("unmounted ")), "{said:?}");
        assert!(
            said.iter()
                .any(|l| l == &format!("detached loop device {dev}")),
            "{said:?}"
        );
    }
}
