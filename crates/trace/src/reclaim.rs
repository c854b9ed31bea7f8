//! What a run killed outright left behind (SIGKILL, the kernel's OOM killer: no handler
//! runs, so no teardown does), removed at the next run's start.
//!
//! Every directory a capture or an experiment makes for loop-device images gets an
//! [`OWNER_FILE`] first thing: the making process's id, its start time (field 22 of
//! `/proc/PID/stat`, so a recycled process id is not taken for the owner), its pid
//! namespace and the boot. A directory whose owner is no longer running is a dead run's:
//! [`reclaim_dir`] ends the capture's command cgroup, removes its tracing instance, unmounts
//! what is mounted from its images or under it (newest first), detaches the loop devices its
//! images back (found by the images' device and inode, as the kernel reports them, never by
//! path) and removes the directory. [`reclaim_siblings`] does that for every such directory
//! of one name prefix in a place.
//!
//! This runs as root in places others can write (/tmp, /dev/shm), so it trusts nothing it
//! did not make: only a real directory (never a symlink) with flashlab's prefix, owned by
//! this user that others may not list or change (mkdtemp's 0700, or 0711), whose owner file is a regular file
//! of this user's (opened without following a symlink or blocking on a FIFO, read to a few
//! hundred bytes); only in a place where others cannot rename entries (not writable by them,
//! or sticky); every step by the directory opened once, checked again by device and inode
//! before anything is removed. A directory with a running capture inside, a mount that will
//! not go or a loop device that will not detach is left, and said. Not reclaimed: a loop
//! device whose image was deleted by hand (nothing ties it to a directory any more), and
//! leftovers in a place the next run does not use.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The name of the owner file in a work directory.
pub const OWNER_FILE: &str = ".flashlab-owner";

/// Most bytes read of an owner file.
const OWNER_MAX_BYTES: u64 = 256;

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Process `pid`'s start time in clock ticks after boot (`/proc/PID/stat` field 22), if it
/// runs: `None` for no such process or a zombie (killed, not yet reaped: state Z or X).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last ')'. Field 3 is the state, field 22 the start time.
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    if matches!(rest.next()?, "Z" | "X" | "x") {
        return None;
    }
    rest.nth(18)?.parse().ok()
}

/// This process's pid namespace (the inode of `/proc/self/ns/pid`) and the kernel's boot
/// id: an owner is judged only by a process that sees the same process ids.
fn namespace_and_boot() -> (u64, String) {
    let ns = std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino());
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().to_string())
        .unwrap_or_default();
    (ns, boot)
}

/// Writes `dir`'s owner file: this process, its start time, pid namespace and boot.
pub fn write_owner(dir: &Path) -> std::io::Result<()> {
    let pid = std::process::id();
    let ticks = start_ticks(pid).unwrap_or(0);
    let (ns, boot) = namespace_and_boot();
    std::fs::write(dir.join(OWNER_FILE), format!("{pid} {ticks} {ns} {boot}\n"))
}

/// The owner file's text, if it is a regular file this user owns (opened without
/// following a symlink or blocking on a FIFO, and read to at most a few hundred bytes).
fn read_owner(dir: &Path) -> Option<String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(dir.join(OWNER_FILE))
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.uid() != euid() {
        return None;
    }
    let mut text = String::new();
    f.take(OWNER_MAX_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Whether the process named in `dir`'s owner file still runs: `None` without a readable
/// owner file of this user's (then the directory is not judged). An owner in another pid
/// namespace counts as running (its process ids are not this process's to look up); one of
/// an earlier boot is gone.
pub fn owner_alive(dir: &Path) -> Option<bool> {
    let text = read_owner(dir)?;
    let mut f = text.split_whitespace();
    let pid: u32 = f.next()?.parse().ok()?;
    let ticks: u64 = f.next()?.parse().ok()?;
    let ns: u64 = f.next()?.parse().ok()?;
    let boot = f.next()?;
    let (my_ns, my_boot) = namespace_and_boot();
    if boot != my_boot {
        return Some(false);
    }
    if ns != my_ns {
        return Some(true);
    }
    Some(start_ticks(pid) == Some(ticks))
}

/// A directory this user made for itself: a real directory (not a symlink) owned by this
/// user that nobody else may list or change (mkdtemp's 0700, or 0711).
fn private_dir(p: &Path) -> bool {
    // Others may pass through (0711: a capture whose command's server runs as another
    // user), never list it or change its entries.
    std::fs::symlink_metadata(p)
        .is_ok_and(|m| m.is_dir() && m.uid() == euid() && m.mode() & 0o066 == 0)
}

/// Whether others may swap entries in `base`: writable by group or others without the
/// sticky bit (where /tmp and /dev/shm have it, only an entry's owner may rename it).
fn others_may_rename_in(base: &Path) -> bool {
    std::fs::metadata(base).map_or(true, |m| m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0)
}

/// Reclaims every directory directly under `base` whose name starts with `prefix` (one of
/// flashlab's, `flashlab-...`) and whose owner is dead; returns what was removed and what
/// could not be, one line each.
pub fn reclaim_siblings(base: &Path, prefix: &str) -> Vec<String> {
    debug_assert!(prefix.starts_with("flashlab-"));
    if others_may_rename_in(base) {
        // Another user could put a symlink where a checked directory was.
        return Vec::new();
    }
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
        .filter(|p| private_dir(p))
        .filter(|p| owner_alive(p) == Some(false))
        .collect();
    dead.sort();
    dead.iter().flat_map(|d| reclaim_dir(d)).collect()
}

/// Reclaims `dir`, a dead run's work directory (see the module's notes), and every dead
/// capture directory (`flashlab-capture-*`) in it; returns what was removed and what could
/// not be. A capture inside it whose owner runs keeps the whole directory.
pub fn reclaim_dir(dir: &Path) -> Vec<String> {
    let mut said = Vec::new();
    let inner: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|es| {
            es.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with("flashlab-capture-"))
                })
                .map(|e| e.path())
                .filter(|p| private_dir(p))
                .collect()
        })
        .unwrap_or_default();
    if let Some(live) = inner.iter().find(|p| owner_alive(p) == Some(true)) {
        said.push(format!(
            "left {}: a running capture is inside it ({})",
            dir.display(),
            live.display()
        ));
        return said;
    }
    let mut inner = inner;
    inner.sort();
    let mut kept = false;
    for d in inner {
        let (lines, removed) = release(&d);
        said.extend(lines);
        kept |= !removed;
    }
    if kept {
        said.push(format!("left {}: a capture in it was left", dir.display()));
        return said;
    }
    said.extend(release(dir).0);
    said
}

/// Ends the command processes of the capture `tag` (`flashlab-capture-PID-RAND`): its
/// cgroup, if one was made, is killed and removed (they would keep the mount busy).
fn end_command_group(tag: &str, said: &mut Vec<String>) {
    let Some(cg) = crate::command_group::cgroup_path(tag) else {
        return;
    };
    if !cg.join("cgroup.procs").exists() {
        return;
    }
    let _ = std::fs::write(cg.join("cgroup.kill"), "1");
    for _ in 0..50 {
        let empty = std::fs::read_to_string(cg.join("cgroup.procs"))
            .map(|p| p.trim().is_empty())
            .unwrap_or(true);
        if empty {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    match std::fs::remove_dir(&cg) {
        Ok(()) => said.push(format!("ended the command's cgroup {}", cg.display())),
        Err(e) => said.push(format!("could not remove cgroup {}: {e}", cg.display())),
    }
}

/// Undoes what `dir`'s images are attached and mounted as, then removes `dir`; returns
/// what it said and whether `dir` was removed. Every step goes by the directory opened once
/// (never following a symlink) and checked again by device and inode before anything is
/// removed.
fn release(dir: &Path) -> (Vec<String>, bool) {
    let mut said = Vec::new();
    let Ok(handle) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
    else {
        return (said, false);
    };
    let Ok(meta) = handle.metadata() else {
        return (said, false);
    };
    if meta.uid() != euid() || meta.mode() & 0o066 != 0 {
        return (said, false);
    }
    let id = (meta.dev(), meta.ino());
    // The directory's path as the kernel has it for the open handle.
    use std::os::unix::io::AsRawFd;
    let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", handle.as_raw_fd())) else {
        return (said, false);
    };
    let same = |p: &Path| {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir() && (m.dev(), m.ino()) == id)
    };
    if !same(&real) {
        return (said, false);
    }
    // The capture's command processes, then its tracing instance.
    let tag = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("flashlab-capture-"))
        .and_then(|rand| {
            let pid = read_owner(&real)?
                .split_whitespace()
                .next()?
                .parse::<u32>()
                .ok()?;
            Some(format!("flashlab-capture-{pid}-{rand}"))
        });
    if let Some(tag) = &tag {
        end_command_group(tag, &mut said);
        let inst = Path::new(crate::host::TRACEFS).join("instances").join(tag);
        if inst.is_dir() {
            let _ = std::fs::write(inst.join("tracing_on"), "0");
            match std::fs::remove_dir(&inst) {
                Ok(()) => said.push(format!("removed tracing instance {}", inst.display())),
                Err(e) => said.push(format!("could not remove {}: {e}", inst.display())),
            }
        }
    }
    // The images here, by (device, inode), and the loop devices they back.
    let images: Vec<(u64, u64)> = std::fs::read_dir(&real)
        .map(|es| {
            es.flatten()
                .filter_map(|e| std::fs::symlink_metadata(e.path()).ok())
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
    if same(&real) {
        for point in crate::host::mounts_to_undo(&devices, None, Some(&real))
            .into_iter()
            .rev()
        {
            match crate::host::unmount(&point, false)
                .or_else(|_| crate::host::unmount(&point, true))
            {
                Ok(()) => said.push(format!("unmounted {}", point.display())),
                Err(e) => {
                    stuck = true;
                    said.push(format!("could not unmount {}: {e}", point.display()));
                }
            }
        }
    }
    for (dev, rdev) in &loops {
        // A dirty limit the killed capture set stays with the device, not its image.
        if crate::dirty_limit::is_limited(*rdev) {
            match crate::dirty_limit::reset_to_defaults(*rdev) {
                Ok(()) => said.push(format!(
                    "reset {dev}'s dirty limit to the kernel's defaults"
                )),
                Err(e) => said.push(format!("could not reset {dev}'s dirty limit: {e}")),
            }
        }
        match crate::host::run_program("losetup", &["-d", dev]) {
            Ok(_) => said.push(format!("detached loop device {dev}")),
            Err(e) => {
                stuck = true;
                said.push(format!("could not detach {dev}: {e}"));
            }
        }
    }
    // Never remove through a mount that stayed, nor a directory that is not the one opened.
    if stuck || !crate::host::mounts_to_undo(&[], None, Some(&real)).is_empty() || !same(&real) {
        said.push(format!(
            "left {}: something is still mounted or attached there",
            real.display()
        ));
        return (said, false);
    }
    match std::fs::remove_dir_all(&real) {
        Ok(()) => {
            said.push(format!("removed {}", real.display()));
            (said, true)
        }
        Err(e) => {
            said.push(format!("could not remove {}: {e}", real.display()));
            (said, false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An owner file's text for a process that has ended.
    pub(super) fn dead_owner() -> String {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let (ns, boot) = namespace_and_boot();
        format!("{pid} 1 {ns} {boot}\n")
    }

    /// A private directory (0700) `name` in `base`, with a file, and an owner file.
    pub(super) fn mk(base: &Path, name: &str, owner: Option<&str>) -> PathBuf {
        let d = base.join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(d.join("data"), "x").unwrap();
        if let Some(o) = owner {
            std::fs::write(d.join(OWNER_FILE), o).unwrap();
        }
        d
    }

    #[test]
    fn this_process_is_alive_and_a_finished_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        write_owner(dir.path()).unwrap();
        assert_eq!(owner_alive(dir.path()), Some(true));
        std::fs::write(dir.path().join(OWNER_FILE), dead_owner()).unwrap();
        assert_eq!(owner_alive(dir.path()), Some(false));
        // This process's id with another start time: a recycled id, not the owner.
        let (me, ticks) = (std::process::id(), start_ticks(std::process::id()).unwrap());
        let (ns, boot) = namespace_and_boot();
        let write = |text: String| std::fs::write(dir.path().join(OWNER_FILE), text).unwrap();
        write(format!("{me} {} {ns} {boot}\n", ticks + 1));
        assert_eq!(owner_alive(dir.path()), Some(false));
        // Another pid namespace: not this process's to judge, so counted as running.
        write(format!("{me} {} {} {boot}\n", ticks + 1, ns + 1));
        assert_eq!(owner_alive(dir.path()), Some(true));
        // An earlier boot: gone.
        write(format!("{me} {ticks} {ns} another-boot\n"));
        assert_eq!(owner_alive(dir.path()), Some(false));
        std::fs::remove_file(dir.path().join(OWNER_FILE)).unwrap();
        assert_eq!(owner_alive(dir.path()), None, "no owner file: not judged");
    }

    #[test]
    fn a_killed_owner_not_yet_reaped_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let ticks = start_ticks(pid).unwrap();
        let (ns, boot) = namespace_and_boot();
        std::fs::write(
            dir.path().join(OWNER_FILE),
            format!("{pid} {ticks} {ns} {boot}\n"),
        )
        .unwrap();
        assert_eq!(owner_alive(dir.path()), Some(true));
        child.kill().unwrap();
        // A zombie until waited for.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let judged = owner_alive(dir.path());
        child.wait().unwrap();
        assert_eq!(judged, Some(false));
    }

    #[test]
    fn only_dead_owners_private_directories_with_the_prefix_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let dead = dead_owner();
        let gone = mk(base.path(), "flashlab-test-dead", Some(&dead));
        let live = mk(base.path(), "flashlab-test-live", None);
        write_owner(&live).unwrap();
        let unowned = mk(base.path(), "flashlab-test-unowned", None);
        let other = mk(base.path(), "someone-else-dead", Some(&dead));
        // Readable by others: not one flashlab made for itself.
        let open = mk(base.path(), "flashlab-test-open", Some(&dead));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A symlink with the prefix, to a dead owner's directory elsewhere: not followed.
        let target = mk(base.path(), "elsewhere", Some(&dead));
        std::os::unix::fs::symlink(&target, base.path().join("flashlab-test-link")).unwrap();
        let said = reclaim_siblings(base.path(), "flashlab-test-");
        assert!(!gone.exists(), "{said:?}");
        assert!(live.exists() && unowned.exists() && other.exists());
        assert!(open.exists() && target.exists());
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("removed "), "{said:?}");
    }

    #[test]
    fn an_owner_file_that_is_a_fifo_or_a_symlink_is_not_read() {
        // Anyone could leave these where flashlab looks; reading a FIFO would block, a
        // symlink to /dev/zero would never end.
        let base = tempfile::tempdir().unwrap();
        let fifo_dir = mk(base.path(), "flashlab-test-fifo", None);
        let fifo = fifo_dir.join(OWNER_FILE);
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link_dir = mk(base.path(), "flashlab-test-zero", None);
        std::os::unix::fs::symlink("/dev/zero", link_dir.join(OWNER_FILE)).unwrap();
        let b = base.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(reclaim_siblings(&b, "flashlab-test-"));
        });
        let said = rx.recv_timeout(std::time::Duration::from_secs(10));
        if said.is_err() {
            // Unblock a reader stuck on the FIFO before failing.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
        }
        assert_eq!(said.expect("reclaim returned"), Vec::<String>::new());
        assert!(fifo_dir.exists() && link_dir.exists());
    }

    #[test]
    fn a_running_capture_keeps_its_dead_parent_directory() {
        let base = tempfile::tempdir().unwrap();
        let outer = mk(base.path(), "flashlab-test-outer", Some(&dead_owner()));
        let inner = mk(&outer, "flashlab-capture-live", None);
        write_owner(&inner).unwrap();
        let said = reclaim_siblings(base.path(), "flashlab-test-");
        assert!(inner.exists(), "{said:?}");
        assert!(said[0].starts_with("left "), "{said:?}");
    }

    #[test]
    fn nothing_is_reclaimed_where_others_could_swap_entries() {
        // A directory writable by others without the sticky bit: a checked directory
        // could be renamed away and a symlink put in its place.
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let d = mk(base.path(), "flashlab-test-dead", Some(&dead_owner()));
        assert!(reclaim_siblings(base.path(), "flashlab-test-").is_empty());
        assert!(d.exists());
        // With the sticky bit (as /tmp and /dev/shm), only an entry's owner may rename it.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        reclaim_siblings(base.path(), "flashlab-test-");
        assert!(!d.exists());
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
        let owner = super::tests::dead_owner();
        let dead: u32 = owner.split(' ').next().unwrap().parse().unwrap();
        std::fs::write(dir.join(OWNER_FILE), &owner).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
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
        let inst = Path::new(crate::host::TRACEFS)
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
            let _ = crate::host::unmount(&mnt, true);
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
