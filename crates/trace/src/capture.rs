//! Capture of a real file system's block I/O: a sparse image file on a loop device, made
//! and mounted as ext4, XFS or btrfs; a command runs with its working directory on it
//! while the kernel's `block_rq_issue` and `block_rq_complete` tracepoints record that
//! loop device's requests (reads, writes, flushes, discards, with timestamps and the
//! issuing task) into a private tracefs instance, read in the kernel's binary page format
//! ([`crate::ring_buffer`], decoded by `capture_events`); then the file system is synced,
//! tracing stops, and everything is unmounted, detached and deleted — also when the
//! command fails or the user presses Ctrl-C. Only the loop device this capture attached
//! is ever detached.
//!
//! Safety as root: the work directory is made fresh with an unpredictable name and mode
//! 0700 (mkdtemp), so nobody else can plant a file, directory or symlink in it; the image
//! is created exclusively inside it; mkfs options pass an allow-list per mkfs
//! ([`crate::mkfs_opts`]), so none can name another device or file; the command runs in a
//! cgroup of its own (`command_group`; where there is none, flashlab follows its
//! descendants), which is ended before unmounting so a background child cannot hold the
//! mount, and no process the command did not start is ever signalled (a mount something
//! else holds is unmounted lazily, naming the holder); loop devices the command made of
//! files on the captured file system are detached; an
//! interrupt (SIGINT, SIGTERM or SIGHUP, reported through [`Cancel`]) stops the command
//! and cleans up like an error; the trace is written before the teardown, so a teardown
//! that fails loses nothing.
//!
//! Needs root, loop devices and tracefs; [`check_support`] says what is missing.

use crate::capture_events::{self, Decoder, Enabled, Record, Timed};
use crate::command_group::CommandGroup;
pub use crate::fs_kind::FsKind;
use crate::host::{mounts_to_undo, unmount, which, TRACEFS};
use crate::{Cancel, Trace, TraceError};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to capture.
#[derive(Debug, Clone)]
pub struct CaptureSpec {
    pub fs: FsKind,
    /// Size of the image (it is sparse: only what the file system writes takes space).
    pub size_bytes: u64,
    /// Mount with `-o discard` (online TRIM).
    pub discard: bool,
    pub mkfs_opts: Vec<String>,
    pub mount_opts: Vec<String>,
    /// The command and its arguments; `{}` in an argument is replaced by the mounted
    /// directory, which is also in `FLASHLAB_DIR`.
    pub command: Vec<String>,
    /// Where the image and the mount point go (a fresh directory is made inside; this
    /// one must exist).
    pub work_dir: PathBuf,
    /// Where the command's standard output goes (None: inherited).
    pub stdout: Option<PathBuf>,
    /// Where the trace is written in the native format, before the teardown (None: only
    /// returned). It is opened before anything is set up, so a path that cannot be
    /// written fails first.
    pub out: Option<PathBuf>,
    /// Set when the user interrupts: the command is stopped and everything cleaned up.
    pub cancel: Cancel,
    /// How many times the command runs, one after another on the same file system; after
    /// each run the file system is synced and left to settle (no block request for
    /// 300 ms and, on ext4 with discard, its discard worker done; at most a minute). A
    /// failed run ends the capture. 0 counts as 1.
    pub runs: u32,
    /// Run the command on this CPU only (None: wherever the kernel puts it).
    pub cpu: Option<usize>,
    /// Also record the scheduler's wake-ups and switches, so that a think time is the time
    /// the issuing task ran (every context switch of the machine is traced).
    pub think_on_cpu: bool,
    /// Run the command at real-time priority (SCHED_FIFO, priority [`REALTIME_PRIORITY`]),
    /// so that other work on the machine cannot take its CPU: its think times are then
    /// what the machine's CPU needs, not how busy the machine was. The command's own
    /// scheduling only; the host's settings are untouched (the kernel's real-time
    /// throttling still leaves others 5% of each second).
    pub realtime: bool,
    /// Limit the loop device's dirty page cache to this many bytes (its bdi's
    /// `strict_limit` with `min_bytes` = `max_bytes`, [`crate::dirty_limit`]), so that its
    /// writeback behaves as on a host with less memory; the device's settings are put
    /// back before it is detached. None: the machine's own limits.
    pub dirty_limit_bytes: Option<u64>,
    /// Let other users reach the mount point: the capture's work directory gets mode 0711
    /// (others may pass through it, not list or change it), for a command whose work is
    /// done by a server running as another user (PostgreSQL refuses root).
    pub others_traverse: bool,
}

/// The SCHED_FIFO priority of a `realtime` command: low among real-time tasks (1-99), so
/// the kernel's own real-time threads (migration, watchdogs) still come first.
pub const REALTIME_PRIORITY: i32 = 10;

/// A finished capture.
#[derive(Debug)]
pub struct Captured {
    pub trace: Trace,
    /// Block events read (issues and completions of the loop device).
    pub event_lines: u64,
    /// Events the kernel dropped because its buffer was full (0 when all were kept).
    pub lost_events: u64,
    /// The command's exit code (None: ended by a signal).
    pub exit_code: Option<i32>,
    pub loop_device: String,
    /// The loop device reported itself rotational (`queue/rotational`: a loop device takes
    /// its backing file's disk's); ext4's allocator scans differently on one. None if the
    /// flag could not be read.
    pub rotational: Option<bool>,
    pub elapsed: Duration,
    /// The tracing clock (CLOCK_MONOTONIC) at the trace's first request, in ns: a
    /// request's `at_ns` plus this is when it was issued.
    pub start_ns: u64,
    /// ext4: the journal commits jbd2 completed on the device during the command
    /// (`jbd2:jbd2_end_commit` events); None for other file systems or a kernel without
    /// the event.
    pub journal_commits: Option<u64>,
    /// ext4: when each of those commits ended, in the trace's time (ns after its first
    /// request, as the requests' `at_ns`).
    pub journal_commit_at_ns: Vec<u64>,
    /// ext4, where the kernel has the events: when each file of the file system was
    /// unlinked (`ext4:ext4_unlink_enter`), and when each journal commit closed its
    /// transaction to new work (`jbd2:jbd2_commit_locking`: what is freed after it waits
    /// for the next commit), in the trace's time (0 for those before its first request);
    /// None for other file systems or a kernel without them. Which deletes each commit
    /// discards: [`commits_after_unlinks`].
    pub unlinks: Option<Unlinks>,
    /// ext4: when it freed each extent of a deleted or truncated file, a block group's
    /// piece at a time (`ext4:ext4_mballoc_free`), in the trace's time (0 for those before
    /// its first request); None for other file systems or a kernel without the event.
    pub freed_extent_at_ns: Option<Vec<u64>>,
    /// When each run of the command ended, the file system settled, in the trace's time
    /// ([`CaptureSpec::runs`]): the requests of run `i` are those issued before
    /// `run_ends_ns[i]` and not before `run_ends_ns[i - 1]`.
    pub run_ends_ns: Vec<u64>,
}

/// A capture's unlinks and its commits' closings ([`Captured::unlinks`]).
#[derive(Debug, Clone, Default)]
pub struct Unlinks {
    pub unlink_at_ns: Vec<u64>,
    pub commit_locked_at_ns: Vec<u64>,
}

/// For each journal commit closed at `commit_at_ns` (in order), how many of the unlinks at
/// `unlink_at_ns` (in order) came before it: a capture's commits as points in its deletes,
/// for a model to commit at the same points whatever its own pace (vfs's
/// `HostConfig::journal_commit_after_unlinks`).
pub fn commits_after_unlinks(commit_at_ns: &[u64], unlink_at_ns: &[u64]) -> Vec<u64> {
    commit_at_ns
        .iter()
        .map(|&c| unlink_at_ns.partition_point(|&u| u < c) as u64)
        .collect()
}

/// The function of ext4's discard worker (fs/ext4/mballoc.c, Linux 5.15 and later).
const EXT4_DISCARD_WORK: &str = "ext4_discard_work";

/// The jbd2 event counted for ext4 captures.
const JBD2_END_COMMIT: &str = "jbd2_end_commit";

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("flashlab capture cannot run here: {0}")]
    Unsupported(String),
    #[error("{step}: {msg}")]
    Step { step: String, msg: String },
    #[error("interrupted; the file system was unmounted and its loop device and image removed")]
    Interrupted,
    #[error("{msg} (the trace was written to {out} first)")]
    Cleanup { msg: String, out: String },
    #[error(transparent)]
    Trace(#[from] TraceError),
}

/// Runs a program to completion; an error names the step and carries its stderr.
pub(crate) fn run(what: &str, prog: &str, args: &[&str]) -> Result<String, CaptureError> {
    crate::host::run_program(prog, args).map_err(|msg| step(what, msg))
}

fn step(step: &str, msg: impl std::fmt::Display) -> CaptureError {
    CaptureError::Step {
        step: step.to_string(),
        msg: msg.to_string(),
    }
}

/// Why a capture of `fs` cannot run on this machine, if it cannot.
pub fn check_support(fs: FsKind) -> Result<(), CaptureError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(CaptureError::Unsupported(
            "it needs root (it attaches a loop device, mounts a file system and enables block tracepoints); run it as root".into(),
        ));
    }
    if !Path::new("/dev/loop-control").exists() {
        return Err(CaptureError::Unsupported(
            "this kernel offers no loop devices (/dev/loop-control is missing)".into(),
        ));
    }
    for prog in ["losetup", "mount", "umount"] {
        if which(prog).is_none() {
            return Err(CaptureError::Unsupported(format!(
                "{prog} is not installed (Debian package util-linux / mount)"
            )));
        }
    }
    let (mkfs, package) = fs.mkfs();
    if which(mkfs).is_none() {
        return Err(CaptureError::Unsupported(format!(
            "{mkfs} is not installed (Debian package {package})"
        )));
    }
    ensure_tracefs()?;
    Ok(())
}

/// Mounts tracefs if it is absent and checks the block tracepoints exist.
fn ensure_tracefs() -> Result<(), CaptureError> {
    let events = Path::new(TRACEFS).join("events/block/block_rq_issue");
    if events.exists() {
        return Ok(());
    }
    if !Path::new(TRACEFS).join("instances").exists() {
        let _ = run(
            "mount tracefs",
            "mount",
            &["-t", "tracefs", "nodev", TRACEFS],
        );
    }
    if events.exists() {
        Ok(())
    } else {
        Err(CaptureError::Unsupported(format!(
            "the block tracepoints are missing ({} does not exist)",
            events.display()
        )))
    }
}

/// Everything a capture set up, undone in reverse order when dropped.
#[derive(Default)]
struct Setup {
    dir: Option<PathBuf>,
    loop_device: Option<String>,
    mount_point: Option<PathBuf>,
    /// The mounted file system's `st_dev`.
    fs_dev: Option<u64>,
    /// The work directory's real path and (device, inode), recorded when it was made: the
    /// command may move it or put a symlink in its place, and teardown never goes by a
    /// path it resolves again.
    dir_real: Option<PathBuf>,
    dir_id: Option<(u64, u64)>,
    /// The loop device's device number.
    loop_rdev: Option<u64>,
    instance: Option<PathBuf>,
    /// The command's processes.
    group: Option<CommandGroup>,
    /// The loop device's dirty limit while it is set.
    dirty_limit: Option<crate::dirty_limit::DirtyLimit>,
    /// What an exit before teardown would leave behind, by step ("dir", "loop", ...).
    held: std::collections::HashMap<&'static str, crate::leftovers::Held>,
}

impl Setup {
    fn hold(&mut self, step: &'static str, what: String) {
        self.held.insert(step, crate::leftovers::hold(what));
    }

    /// Whether `dir` still names the work directory this capture made.
    fn dir_intact_at(&self, dir: &Path) -> bool {
        match (std::fs::symlink_metadata(dir), self.dir_id) {
            (Ok(m), Some(id)) => m.file_type().is_dir() && (m.dev(), m.ino()) == id,
            (Ok(m), None) => m.file_type().is_dir(),
            _ => false,
        }
    }
}

impl Setup {
    /// Undoes the setup; returns the first failure (later steps still run).
    fn teardown(&mut self) -> Result<(), CaptureError> {
        let mut first: Option<CaptureError> = None;
        let mut note = |e: CaptureError| {
            if first.is_none() {
                first = Some(e);
            }
        };
        if let Some(inst) = self.instance.take() {
            let _ = std::fs::write(inst.join("tracing_on"), "0");
            for ev in [
                "block/block_rq_issue",
                "block/block_rq_complete",
                "jbd2/jbd2_end_commit",
                "workqueue/workqueue_queue_work",
                "workqueue/workqueue_execute_end",
                "sched/sched_switch",
                "sched/sched_wakeup",
            ] {
                let _ = std::fs::write(inst.join("events").join(ev).join("enable"), "0");
            }
            // The kernel refuses to remove an instance while a reader holds it; the reader
            // has stopped by now, but give it a moment.
            let mut removed = std::fs::remove_dir(&inst);
            for _ in 0..20 {
                if removed.is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
                removed = std::fs::remove_dir(&inst);
            }
            match removed {
                Ok(()) => drop(self.held.remove("instance")),
                Err(e) => note(step(
                    "remove the tracing instance",
                    format!("{}: {e}", inst.display()),
                )),
            }
        }
        // The command's processes first: every one it started, and only those.
        if let Some(mut group) = self.group.take() {
            let ended = group.end();
            if ended.survivors.is_empty() {
                self.held.remove("group");
            }
            if !ended.survivors.is_empty() {
                note(step(
                    "end the command",
                    format!(
                        "processes of {} survived SIGKILL: {:?}",
                        group.how(),
                        ended.survivors
                    ),
                ));
            }
            if !ended.may_have_escaped.is_empty() {
                eprintln!(
                    "flashlab capture: note: the command's processes were followed as {}; these children of flashlab's were not seen to descend from it and were left running: {}",
                    group.how(),
                    ended.may_have_escaped.join(", ")
                );
            }
        }
        if self.mount_point.take().is_some() {
            // The command may have mounted over the mount point or under it, over the work
            // directory (a tmpfs, a bind mount), bound the file system elsewhere, or made
            // loop devices of files on it or of its device (mounted anywhere): those
            // mounts go, newest first, then those loop devices, then ours. Mounts are
            // chosen by device number and mount ids, and by the work directory's real path
            // as it was when this capture made it (mountinfo gives mounts' real paths, so a
            // symlink the command put in its place redirects nothing; the command's
            // processes have ended, so nothing renames while this runs).
            let own = self.loop_device.clone().unwrap_or_default();
            let inner = inner_loops(self.fs_dev, self.loop_rdev, &own);
            let mut devices: Vec<u64> = inner.iter().map(|(_, r)| *r).collect();
            devices.extend(self.loop_rdev);
            let root = self.dir_real.clone();
            let mut failed: Vec<PathBuf> = Vec::new();
            let mut inner_detached = false;
            for _ in 0..MAX_MOUNTS_UNDER {
                let chosen = mounts_to_undo(&devices, self.fs_dev, root.as_deref());
                let Some(top) = chosen.iter().rev().find(|m| !failed.contains(m)).cloned() else {
                    break;
                };
                let ours = chosen.iter().filter(|m| !failed.contains(m)).count() == 1;
                if ours && !inner_detached {
                    // Ours is the last: the loop devices made on it go first.
                    inner_detached = true;
                    for (dev, _) in &inner {
                        match run("detach a loop device the command made", "losetup", &["-d", dev]) {
                            Ok(_) => eprintln!(
                                "flashlab capture: detached {dev}, which the command attached to a file on the captured file system or to its device"
                            ),
                            Err(e) => note(e),
                        }
                    }
                }
                let mut res = unmount(&top, false);
                for _ in 0..10 {
                    if res.is_ok() {
                        break;
                    }
                    // Processes just ended may take a moment to let go.
                    std::thread::sleep(Duration::from_millis(100));
                    res = unmount(&top, false);
                }
                if let Err(e) = res {
                    // Something the command did not start holds it (a shell cd'd into
                    // it): name it, and detach the mount lazily so the loop device can
                    // still go; the file system is freed when they let go.
                    let holders = std::fs::metadata(&top)
                        .map(|md| crate::procs::users(crate::procs::Target::FileSystem(md.dev())))
                        .unwrap_or_default();
                    let lazy = unmount(&top, true);
                    failed.push(top.clone());
                    note(step(
                        "unmount",
                        format!(
                            "{}: {e}; held by {}; {}",
                            top.display(),
                            if holders.is_empty() {
                                "no process found (the kernel: another mount or a loop device)"
                                    .to_string()
                            } else {
                                crate::procs::list(&holders, 8)
                            },
                            if lazy.is_ok() {
                                format!(
                                    "{} was unmounted lazily (it is freed when they let go)",
                                    top.display()
                                )
                            } else {
                                format!("{} is still mounted", top.display())
                            }
                        ),
                    ));
                }
            }
            if !inner_detached {
                for (dev, _) in &inner {
                    if let Err(e) = run(
                        "detach a loop device the command made",
                        "losetup",
                        &["-d", dev],
                    ) {
                        note(e);
                    }
                }
            }
            if failed.is_empty() {
                self.held.remove("mount");
            }
        }
        if let Some(mut limit) = self.dirty_limit.take() {
            match limit.restore() {
                Ok(()) => drop(self.held.remove("dirty")),
                Err(e) => note(step("restore the loop device's dirty limit", e)),
            }
        }
        if let Some(dev) = self.loop_device.take() {
            match run("detach the loop device", "losetup", &["-d", &dev]) {
                // A device still in use is only marked to detach when it is let go.
                Ok(_) if loop_attached(&dev) => note(step(
                    "detach the loop device",
                    format!("{dev} is still in use (it detaches itself when let go)"),
                )),
                Ok(_) => drop(self.held.remove("loop")),
                Err(e) => note(e),
            }
        }
        if let Some(dir) = self.dir.take() {
            if self.dir_intact_at(&dir) {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => drop(self.held.remove("dir")),
                    Err(e) => note(step("remove the image", format!("{}: {e}", dir.display()))),
                }
            } else {
                // Moved within its parent (`mv DIR DIR.old`): found by its identity.
                let moved = dir.parent().and_then(|p| {
                    std::fs::read_dir(p)
                        .ok()?
                        .flatten()
                        .map(|e| e.path())
                        .find(|c| {
                            std::fs::symlink_metadata(c).is_ok_and(|m| {
                                m.file_type().is_dir() && Some((m.dev(), m.ino())) == self.dir_id
                            })
                        })
                });
                match moved {
                    Some(m) => match std::fs::remove_dir_all(&m) {
                        Ok(()) => {
                            self.held.remove("dir");
                            eprintln!(
                                "flashlab capture: the command moved the work directory to {}; removed it there ({} was left as the command made it)",
                                m.display(),
                                dir.display()
                            );
                        }
                        Err(e) => note(step("remove the image", format!("{}: {e}", m.display()))),
                    },
                    None => note(step(
                        "remove the image",
                        format!(
                            "{} is no longer the directory this capture made (the command moved or replaced it) and it was not found beside it: its image is left where the command put it",
                            dir.display()
                        ),
                    )),
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("flashlab capture: cleanup: {e}");
        }
    }
}

/// The most mounts teardown unmounts at or under the mount point.
const MAX_MOUNTS_UNDER: usize = 4096;

/// Loop devices the command made: backed by a file on the captured file system (`fs_dev`)
/// or by its loop device (`loop_rdev`), or stacked on one of those; as the kernel reports
/// their backing, never by a path the command could shadow. (`/dev/loopN`, its device
/// number); `own` (the capture's loop device) is not among them.
fn inner_loops(fs_dev: Option<u64>, loop_rdev: Option<u64>, own: &str) -> Vec<(String, u64)> {
    let all: Vec<(String, crate::loopdev::Backing, u64)> = crate::loopdev::attached()
        .into_iter()
        .filter(|(d, _)| d != own)
        .filter_map(|(d, b)| {
            let rdev = std::fs::metadata(&d).ok()?.rdev();
            Some((d, b, rdev))
        })
        .collect();
    let mut found: Vec<(String, u64)> = Vec::new();
    let mut bases: Vec<u64> = loop_rdev.into_iter().collect();
    loop {
        let before = found.len();
        for (d, b, rdev) in &all {
            let ours = Some(b.dev) == fs_dev || (b.rdev != 0 && bases.contains(&b.rdev));
            if ours && !found.iter().any(|(f, _)| f == d) {
                found.push((d.clone(), *rdev));
                bases.push(*rdev);
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// Whether `/dev/loopN` is still attached.
fn loop_attached(dev: &str) -> bool {
    let name = dev.trim_start_matches("/dev/");
    Path::new(&format!("/sys/block/{name}/loop/backing_file")).exists()
}

/// Checks `opts` against the allow-list of `fs`'s mkfs ([`crate::mkfs_opts`]): no piece
/// can name another file or device for mkfs to write.
pub fn check_mkfs_opts(fs: FsKind, opts: &[String]) -> Result<(), CaptureError> {
    crate::mkfs_opts::check(fs, opts).map_err(|msg| step("check --mkfs-opts", msg))
}

/// The kernel's dev_t (major << 20 | minor) of a block device node.
fn kernel_dev(path: &str) -> Result<u64, CaptureError> {
    let rdev = std::fs::metadata(path)
        .map_err(|e| step("stat the loop device", format!("{path}: {e}")))?
        .rdev();
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    Ok((major << 20) | minor)
}

/// Runs the capture.
pub fn capture(spec: &CaptureSpec) -> Result<Captured, CaptureError> {
    check_mkfs_opts(spec.fs, &spec.mkfs_opts)?;
    check_support(spec.fs)?;
    if spec.command.is_empty() {
        return Err(step(
            "run the command",
            "no command given (put it after --)",
        ));
    }
    if let Some(cpu) = spec.cpu {
        // SAFETY: sysconf has no memory preconditions.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
        if cpu >= cpus {
            return Err(step(
                "pin the command to a CPU",
                format!(
                    "CPU {cpu} is not online: this machine has CPUs 0 to {}",
                    cpus - 1
                ),
            ));
        }
    }
    if spec.size_bytes < 64 << 20 {
        return Err(step(
            "make the image",
            format!(
                "{} bytes is too small: ext4, XFS and btrfs need at least 64 MiB here",
                spec.size_bytes
            ),
        ));
    }
    if !spec.work_dir.is_dir() {
        return Err(step(
            "make the work directory",
            format!(
                "{} does not exist or is not a directory (it is not created for you)",
                spec.work_dir.display()
            ),
        ));
    }
    // The trace's file first: a path that cannot be written fails before anything runs.
    let mut out_file = match &spec.out {
        Some(path) => Some(OutFile::create(path)?),
        None => None,
    };
    let mut setup = Setup::default();

    // What captures killed outright (SIGKILL, the OOM killer) left here goes first.
    for line in crate::reclaim::reclaim_siblings(&spec.work_dir, "flashlab-capture-") {
        eprintln!("flashlab capture: a killed capture's leftover: {line}");
    }
    // A fresh work directory (mkdtemp: unpredictable name, mode 0700, never an existing
    // path), the image inside it, and a loop device.
    let dir = tempfile::Builder::new()
        .prefix("flashlab-capture-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&spec.work_dir)
        .map_err(|e| {
            step(
                "make the work directory",
                format!("in {}: {e}", spec.work_dir.display()),
            )
        })?
        .keep();
    setup.dir = Some(dir.clone());
    if spec.others_traverse {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).map_err(|e| {
            step(
                "make the work directory",
                format!("chmod 0711 {}: {e}", dir.display()),
            )
        })?;
    }
    // Its owner first, so that a run killed from here on is reclaimed by the next.
    crate::reclaim::write_owner(&dir).map_err(|e| {
        step(
            "make the work directory",
            format!("{}: {e}", dir.join(crate::reclaim::OWNER_FILE).display()),
        )
    })?;
    setup.dir_real = std::fs::canonicalize(&dir).ok();
    setup.dir_id = std::fs::symlink_metadata(&dir)
        .ok()
        .map(|m| (m.dev(), m.ino()));
    setup.hold(
        "dir",
        format!("directory {} (the capture's image)", dir.display()),
    );
    // The tracing instance (in root-only tracefs) is named after this process and the
    // work directory's random part, so a leftover can be told from a live capture.
    let tag = format!(
        "flashlab-capture-{}-{}",
        std::process::id(),
        dir.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("flashlab-capture-"))
            .unwrap_or("")
    );
    let image = dir.join(format!("{}.img", spec.fs.name()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&image)
        .and_then(|f| f.set_len(spec.size_bytes))
        .map_err(|e| step("make the image", format!("{}: {e}", image.display())))?;
    let img = image.to_string_lossy().to_string();
    let dev = run(
        "attach a loop device",
        "losetup",
        &["--find", "--show", &img],
    )?;
    setup.loop_device = Some(dev.clone());
    let rotational = std::fs::read_to_string(format!(
        "/sys/block/{}/queue/rotational",
        dev.trim_start_matches("/dev/")
    ))
    .ok()
    .map(|v| v.trim() == "1");
    setup.loop_rdev = std::fs::metadata(&dev).ok().map(|m| m.rdev());
    setup.hold("loop", format!("loop device {dev} (attached to {img})"));
    // A loop device keeps its bdi's settings across attachments: one a killed run left
    // limited is put back to the kernel's defaults before this capture uses it.
    if let Some(rdev) = setup
        .loop_rdev
        .filter(|&r| crate::dirty_limit::is_limited(r))
    {
        crate::dirty_limit::reset_to_defaults(rdev)
            .map_err(|e| step("reset the loop device's dirty limit", e))?;
        eprintln!(
            "flashlab capture: {dev} had a dirty limit set (a killed run's?): reset to the kernel's defaults"
        );
    }
    if let Some(bytes) = spec.dirty_limit_bytes {
        let rdev = setup.loop_rdev.ok_or_else(|| {
            step(
                "limit the loop device's dirty page cache",
                format!("cannot stat {dev} for its device number"),
            )
        })?;
        let limit = crate::dirty_limit::DirtyLimit::set(rdev, bytes)
            .map_err(|e| step("limit the loop device's dirty page cache", e))?;
        setup.hold(
            "dirty",
            format!(
                "dirty limit of {bytes} bytes on {dev} ({}: strict_limit, min_bytes, max_bytes)",
                limit.dir().display()
            ),
        );
        setup.dirty_limit = Some(limit);
    }

    // File system.
    let (mkfs, _) = spec.fs.mkfs();
    let mut args: Vec<&str> = spec.fs.mkfs_flags().to_vec();
    args.extend(spec.mkfs_opts.iter().map(String::as_str));
    args.push(&dev);
    run(&format!("make {}", spec.fs.name()), mkfs, &args)?;
    let mnt = dir.join("mnt");
    std::fs::create_dir(&mnt)
        .map_err(|e| step("make the mount point", format!("{}: {e}", mnt.display())))?;
    let mut opts: Vec<String> = spec.mount_opts.clone();
    if spec.discard {
        opts.push("discard".into());
    }
    let m = mnt.to_string_lossy().to_string();
    let mut margs: Vec<&str> = vec!["-t", spec.fs.name()];
    let joined = opts.join(",");
    if !opts.is_empty() {
        margs.extend(["-o", &joined]);
    }
    margs.extend([dev.as_str(), m.as_str()]);
    run(&format!("mount {}", spec.fs.name()), "mount", &margs)?;
    setup.mount_point = Some(mnt.clone());
    setup.hold(
        "mount",
        format!("{} mounted on {}", spec.fs.name(), mnt.display()),
    );
    setup.fs_dev = std::fs::metadata(&mnt).ok().map(|md| md.dev());
    // Start from a clean slate: mkfs's and mount's own writes are not the command's.
    run("sync the file system", "sync", &["-f", &m])?;

    // Tracing: a private instance, filtered to this loop device.
    let inst = Path::new(TRACEFS).join("instances").join(&tag);
    std::fs::create_dir(&inst).map_err(|e| {
        step(
            "make a tracing instance",
            format!("{}: {e}", inst.display()),
        )
    })?;
    setup.instance = Some(inst.clone());
    setup.hold(
        "instance",
        format!("tracing instance {} (still tracing)", inst.display()),
    );
    let write = |file: &Path, value: &str| {
        std::fs::write(file, value).map_err(|e| {
            step(
                "set up tracing",
                format!("{} <- {value:?}: {e}", file.display()),
            )
        })
    };
    write(&inst.join("buffer_size_kb"), "32768")?;
    // CLOCK_MONOTONIC, so the command can name moments of its run in the trace's time.
    write(&inst.join("trace_clock"), "mono")?;
    let kdev = kernel_dev(&dev)?;
    for ev in ["block_rq_issue", "block_rq_complete"] {
        let d = inst.join("events/block").join(ev);
        write(&d.join("filter"), &format!("dev == {kdev}"))?;
        write(&d.join("enable"), "1")?;
    }
    // On request, the scheduler's wake-ups and switches: a think time is then the time the
    // issuing task ran, so a capture on a busy machine does not replay waits for a CPU as
    // thinking. Every context switch of the machine is traced (paper 003's fsync-heavy
    // workload at 256 documents per commit ran ~5% slower for it here: 33,900 updates/s
    // against 35,600; ~30% when the events were read as text).
    let mut sched = false;
    if spec.think_on_cpu {
        let events = ["sched_switch", "sched_wakeup"].map(|ev| inst.join("events/sched").join(ev));
        if events.iter().all(|d| d.is_dir()) {
            for d in &events {
                write(&d.join("enable"), "1")?;
            }
            sched = true;
        }
    }
    // ext4's journal commits, when the kernel has the event.
    let jbd2 = inst.join("events/jbd2").join(JBD2_END_COMMIT);
    let count_commits = spec.fs == FsKind::Ext4 && jbd2.is_dir();
    if count_commits {
        write(&jbd2.join("filter"), &format!("dev == {kdev}"))?;
        write(&jbd2.join("enable"), "1")?;
    }
    // And its unlinks, with the moments its commits close their transactions: which
    // deletes' freed blocks each commit discards.
    let unlink_events = [
        inst.join("events/ext4/ext4_unlink_enter"),
        inst.join("events/jbd2/jbd2_commit_locking"),
    ];
    let count_unlinks = spec.fs == FsKind::Ext4 && unlink_events.iter().all(|d| d.is_dir());
    if count_unlinks {
        for d in &unlink_events {
            write(&d.join("filter"), &format!("dev == {kdev}"))?;
            write(&d.join("enable"), "1")?;
        }
    }
    // And the extents its deletes free, a block group's piece at a time.
    let freed_event = inst.join("events/ext4/ext4_mballoc_free");
    let count_frees = spec.fs == FsKind::Ext4 && freed_event.is_dir();
    if count_frees {
        write(&freed_event.join("filter"), &format!("dev == {kdev}"))?;
        write(&freed_event.join("enable"), "1")?;
    }
    // ext4 with discard: its discard worker's runs (queued at a commit, ended when it has
    // discarded what the commit freed), so that a run counts as settled only once the
    // worker is done, however long the machine makes it wait.
    // (A kernel that cannot filter on a function's name, or has no such worker, is left
    // to the quiet time alone.)
    let mut discard_work = false;
    if spec.fs == FsKind::Ext4 && spec.discard {
        let filter = format!("function.function == {EXT4_DISCARD_WORK}");
        let events = ["workqueue_queue_work", "workqueue_execute_end"]
            .map(|ev| inst.join("events/workqueue").join(ev));
        if events
            .iter()
            .all(|d| std::fs::write(d.join("filter"), &filter).is_ok())
        {
            for d in &events {
                write(&d.join("enable"), "1")?;
            }
            discard_work = true;
        }
    }
    // The events are read in the ring buffer's binary form, one file per CPU: no text
    // formatting in the kernel, none to parse here.
    let decoder = Decoder::new(
        &inst,
        Enabled {
            sched,
            journal: count_commits,
            unlinks: count_unlinks,
            work: discard_work,
            frees: count_frees,
        },
    )
    .map_err(|e| step("set up tracing", e))?;
    let cpu_files = per_cpu_files(&inst).map_err(|e| step("set up tracing", e))?;
    write(&inst.join("tracing_on"), "1")?;
    let stop = Arc::new(AtomicBool::new(false));
    // Block events read so far (what "quiet" watches: the scheduler's events never stop).
    let block_events = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Discard work queued and not yet ended (queue events minus end events).
    let discard_work_open = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let reader = {
        let stop = Arc::clone(&stop);
        let block_events = Arc::clone(&block_events);
        let discard_work_open = Arc::clone(&discard_work_open);
        std::thread::spawn(move || -> Result<(Vec<Timed>, u64), String> {
            let mut files = Vec::new();
            for (cpu, path) in cpu_files {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                files.push((cpu, path, f));
            }
            let mut records = Vec::new();
            let mut lost = 0;
            let mut page = vec![0u8; decoder.layout.page_bytes];
            loop {
                // Stop only after a pass that found every buffer empty and began after the
                // stop was asked for: nothing written before the stop is left behind.
                let stopping = stop.load(Ordering::SeqCst);
                let mut got = false;
                for (cpu, path, f) in &mut files {
                    loop {
                        match f.read(&mut page) {
                            Ok(0) => break,
                            Ok(n) => {
                                got = true;
                                let from = records.len();
                                lost += decoder
                                    .page(*cpu, &page[..n], &mut records)
                                    .map_err(|e| format!("{}: {e}", path.display()))?;
                                let (mut blocks, mut work) = (0, 0);
                                for r in &records[from..] {
                                    match r.record {
                                        Record::Issue { .. } | Record::Complete { .. } => {
                                            blocks += 1
                                        }
                                        Record::WorkQueued => work += 1,
                                        Record::WorkEnded => work -= 1,
                                        _ => {}
                                    }
                                }
                                block_events.fetch_add(blocks, Ordering::SeqCst);
                                discard_work_open.fetch_add(work, Ordering::SeqCst);
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(format!("{}: {e}", path.display())),
                        }
                    }
                }
                if !got {
                    if stopping {
                        return Ok((records, lost));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };

    // The command, `spec.runs` times: each run followed by a sync and the file system
    // settling (its discards and writeback done) before the next.
    let started = Instant::now();
    let args: Vec<String> = spec.command[1..]
        .iter()
        .map(|a| a.replace("{}", &m))
        .collect();
    // Let the last requests arrive: ext4 (since Linux 5.15), XFS and btrfs send discards
    // from a work queue after their log commits, so they can trail the sync, and extents
    // still busy in one log checkpoint are discarded after the next. So: wait until no
    // block event has come for 300 ms (at most a minute), force the log once more, and wait
    // again.
    let wait_quiet = || {
        let since = Instant::now();
        let (mut last, mut last_change) = (block_events.load(Ordering::SeqCst), Instant::now());
        while (last_change.elapsed() < Duration::from_millis(300)
            || discard_work_open.load(Ordering::SeqCst) > 0)
            && since.elapsed() < SETTLE_MAX
        {
            std::thread::sleep(Duration::from_millis(50));
            let now = block_events.load(Ordering::SeqCst);
            if now != last {
                (last, last_change) = (now, Instant::now());
            }
        }
    };
    let mut status: std::io::Result<std::process::ExitStatus> =
        Err(std::io::Error::other("the command did not run"));
    let mut synced: Result<String, CaptureError> = Ok(String::new());
    let mut run_ends_mono_ns = Vec::new();
    // Every process the command starts stays in this group (a cgroup of its own), and
    // ending the run ends the group: background children, setsid'd ones and daemons, and
    // nothing else.
    let new_group = CommandGroup::new(&tag);
    setup.hold(
        "group",
        format!("the command's processes, in {}", new_group.how()),
    );
    let group = setup.group.insert(new_group);
    for run_index in 0..spec.runs.max(1) {
        let mut command = Command::new(&spec.command[0]);
        // Its own process group too, so a terminal's Ctrl-C reaches flashlab, which ends
        // the command's group itself.
        command.args(&args).env("FLASHLAB_DIR", &m).process_group(0);
        group.prepare(&mut command);
        if let Some(cpu) = spec.cpu {
            pin_to_cpu(&mut command, cpu);
        }
        if spec.realtime {
            run_realtime(&mut command);
        }
        if let Some(path) = &spec.stdout {
            let f = if run_index == 0 {
                std::fs::File::create(path)
            } else {
                std::fs::OpenOptions::new().append(true).open(path)
            }
            .map_err(|e| step("run the command", format!("{}: {e}", path.display())))?;
            command.stdout(f);
        }
        status = command.spawn().and_then(|mut child| {
            group.started(child.id());
            let status = loop {
                if let Some(s) = child.try_wait()? {
                    break Ok(s);
                }
                if spec.cancel.is_cancelled() {
                    group.end();
                    break child.wait();
                }
                group.watch();
                std::thread::sleep(Duration::from_millis(20));
            };
            // Whatever it left running in the background would hold the mount.
            group.end();
            status
        });
        // Whatever the command did, flush the file system's dirty data while tracing.
        synced = run("sync the file system", "sync", &["-f", &m]);
        wait_quiet();
        synced = synced.and_then(|_| run("sync the file system", "sync", &["-f", &m]));
        wait_quiet();
        run_ends_mono_ns.push(monotonic_ns());
        let failed = !matches!(&status, Ok(s) if s.success());
        if failed || synced.is_err() || spec.cancel.is_cancelled() {
            break;
        }
    }
    let elapsed = started.elapsed();
    let _ = std::fs::write(inst.join("tracing_on"), "0");
    stop.store(true, Ordering::SeqCst);
    let read = reader
        .join()
        .map_err(|_| step("read the trace", "the reader thread panicked"))?
        .map_err(|e| step("read the trace", e));
    if spec.cancel.is_cancelled() {
        return Err(CaptureError::Interrupted); // the setup's drop cleans up
    }
    let status =
        status.map_err(|e| step("run the command", format!("{}: {e}", spec.command[0])))?;
    synced?;
    let (records, lost_events) = read?;
    let assembled = capture_events::assemble(&format!("tracefs of {dev}"), records)?;
    let trace = assembled.trace;
    let (event_lines, start_ns) = (assembled.block_events, assembled.start_ns);
    let journal_commit_at_ns = assembled.journal_commit_at_ns;
    let journal_commits = count_commits.then_some(journal_commit_at_ns.len() as u64);
    // The trace is safe on disk before anything can fail in the teardown.
    if let Some(out) = &mut out_file {
        out.write(&trace)?;
    }
    if let Err(e) = setup.teardown() {
        return Err(match &spec.out {
            Some(path) => CaptureError::Cleanup {
                msg: e.to_string(),
                out: path.display().to_string(),
            },
            None => e,
        });
    }
    Ok(Captured {
        trace,
        event_lines,
        lost_events,
        exit_code: status.code(),
        loop_device: dev,
        rotational,
        elapsed,
        start_ns,
        journal_commits,
        journal_commit_at_ns,
        unlinks: count_unlinks.then_some(Unlinks {
            unlink_at_ns: assembled.unlink_at_ns,
            commit_locked_at_ns: assembled.journal_locked_at_ns,
        }),
        freed_extent_at_ns: count_frees.then_some(assembled.freed_at_ns),
        run_ends_ns: run_ends_mono_ns
            .iter()
            .map(|t| t.saturating_sub(start_ns))
            .collect(),
    })
}

/// Each CPU's binary buffer of the tracing instance `inst` (`per_cpu/cpuN/trace_pipe_raw`).
fn per_cpu_files(inst: &Path) -> Result<Vec<(u32, PathBuf)>, String> {
    let dir = inst.join("per_cpu");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name();
        let Some(cpu) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let raw = entry.path().join("trace_pipe_raw");
        if raw.exists() {
            out.push((cpu, raw));
        }
    }
    if out.is_empty() {
        return Err(format!("{} has no cpuN/trace_pipe_raw", dir.display()));
    }
    out.sort();
    Ok(out)
}

/// Longest wait for a file system to settle after a run (its background discards and
/// writeback).
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// CLOCK_MONOTONIC now, in ns (the clock the tracing instance stamps events with).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives on this stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Makes `command` run on CPU `cpu` only (its children too): where the kernel's per-CPU
/// state decides placement (ext4's per-CPU locality-group preallocation), a process that
/// moves between CPUs lays its files out differently run to run.
fn pin_to_cpu(command: &mut Command, cpu: usize) {
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (sched_setaffinity) on a set built on its own stack.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut set);
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes `command` run under SCHED_FIFO at [`REALTIME_PRIORITY`] (its children inherit it).
fn run_realtime(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (sched_setscheduler) on a value on its own stack.
    unsafe {
        command.pre_exec(|| {
            let param = libc::sched_param {
                sched_priority: REALTIME_PRIORITY,
            };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The trace's output file: opened (and so checked) before the capture starts. A file this
/// run created is removed again unless a trace was written to it; a file that was there
/// before is left as it was (opened without truncating; truncated only to write the
/// trace). Only regular files: a device, FIFO or symlink at the path is refused, so a
/// failed capture never removes or writes anything else.
struct OutFile {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// This run made the file (so a failed run removes it).
    created: bool,
    written: bool,
}

impl OutFile {
    fn create(path: &Path) -> Result<OutFile, CaptureError> {
        let fail = |msg: String| {
            step(
                "open the trace's output",
                format!("{}: {msg}", path.display()),
            )
        };
        let (file, created) =
            match std::fs::symlink_metadata(path) {
                Ok(m) if !m.is_file() => return Err(fail(
                    "not a regular file (a device, FIFO, symlink or directory); give a file path"
                        .into(),
                )),
                Ok(_) => (
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(path)
                        .map_err(|e| fail(e.to_string()))?,
                    false,
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(path)
                        .map_err(|e| fail(e.to_string()))?,
                    true,
                ),
                Err(e) => return Err(fail(e.to_string())),
            };
        Ok(OutFile {
            path: path.to_path_buf(),
            file: Some(file),
            created,
            written: false,
        })
    }

    /// Whether the path still names `file`.
    fn names(&self, file: &std::fs::File) -> bool {
        match (file.metadata(), std::fs::symlink_metadata(&self.path)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    }

    /// Writes the trace. The command may have removed the output file (the trace goes to
    /// a new file at the path) or put something else there (that is left alone: the trace
    /// goes to `<path>.<pid>` beside it, and the capture fails saying so).
    fn write(&mut self, trace: &Trace) -> Result<(), CaptureError> {
        let file = self.file.take().expect("written once");
        let now = std::fs::symlink_metadata(&self.path);
        let (file, path, replaced) = if self.names(&file) {
            file.set_len(0)
                .map_err(|e| step("write the trace", format!("{}: {e}", self.path.display())))?;
            (file, self.path.clone(), false)
        } else if matches!(&now, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            (self.create_new(&self.path)?, self.path.clone(), false)
        } else {
            let aside = PathBuf::from(format!("{}.{}", self.path.display(), std::process::id()));
            (self.create_new(&aside)?, aside, true)
        };
        let fail = |e: std::io::Error| step("write the trace", format!("{}: {e}", path.display()));
        let mut w = std::io::BufWriter::new(file);
        crate::formats::write_native(trace, &mut w).map_err(fail)?;
        w.flush().map_err(fail)?;
        self.written = true;
        if replaced {
            return Err(step(
                "write the trace",
                format!(
                    "the command put another file at {} (left as it is); the trace is in {}",
                    self.path.display(),
                    path.display()
                ),
            ));
        }
        Ok(())
    }

    fn create_new(&self, path: &Path) -> Result<std::fs::File, CaptureError> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| step("write the trace", format!("{}: {e}", path.display())))
    }
}

impl Drop for OutFile {
    /// Removes the output file only if this run made it, wrote no trace to it, and the
    /// path still names it.
    fn drop(&mut self) {
        if self.written || !self.created {
            return;
        }
        if let Some(file) = &self.file {
            if self.names(file) {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_system_names_parse() {
        assert_eq!("xfs".parse::<FsKind>().unwrap(), FsKind::Xfs);
        let e = "f2fs".parse::<FsKind>().unwrap_err();
        assert!(e.contains("ext4, xfs or btrfs"), "{e}");
    }

    #[test]
    fn kernel_dev_numbers_match_the_tracepoint_encoding() {
        // /dev/null is 1:3 on Linux.
        assert_eq!(kernel_dev("/dev/null").unwrap(), (1 << 20) | 3);
    }
}
