//! The processes a captured command starts, and ending them and only them.
//!
//! The command joins a cgroup (v2) of its own before it runs (the joining is done in the
//! child between fork and exec, so nothing it starts is outside): every process it starts,
//! in the background, in another session (`setsid`) or as a daemon, stays in that cgroup,
//! and ending the command ends the cgroup's processes (`cgroup.kill`) and no others. Where
//! no cgroup v2 hierarchy can be written, flashlab becomes a child subreaper (orphans of
//! the command are reparented to it, not to init) and follows the command's descendants
//! by their parent links while it runs; ending the command ends those, and names what may
//! have escaped (a process reparented to flashlab whose ancestry was not seen).

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long processes get between SIGTERM and SIGKILL.
const TERM_GRACE: Duration = Duration::from_millis(500);

/// How long ending waits for killed processes to be gone.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// A process, told apart from a later one with the same pid by its start time.
type ProcessId = (u32, u64);

enum Kind {
    /// A cgroup v2 directory of this capture's; `procs` is its `cgroup.procs`.
    Cgroup { dir: PathBuf, procs: CString },
    /// Descendants of the command, followed by their parent links and the mark.
    Descendants { known: HashMap<u32, u64> },
}

/// The environment variable whose value marks the command's processes.
pub(crate) const MARK_VAR: &str = "FLASHLAB_CAPTURE_GROUP";

/// Where a captured command's processes are kept (see the module's text).
pub(crate) struct CommandGroup {
    kind: Kind,
    /// `MARK_VAR=name`, as `/proc/PID/environ` holds it.
    mark: String,
    leader: Option<u32>,
    /// The leader's start time (clock ticks since boot).
    leader_start: u64,
}

/// What ending a command group did.
#[derive(Debug, Default)]
pub(crate) struct Ended {
    /// Processes signalled.
    pub(crate) signalled: usize,
    /// Processes that may belong to the command but were not ended (descendant tracking
    /// only): flashlab's adopted children whose ancestry it did not see, `pid (name)`.
    pub(crate) may_have_escaped: Vec<String>,
    /// Processes of the group still alive after the wait.
    pub(crate) survivors: Vec<u32>,
}

impl CommandGroup {
    /// A cgroup named `name` beside this process's own cgroup (v2), or else descendant
    /// tracking.
    pub(crate) fn new(name: &str) -> CommandGroup {
        match make_cgroup(name) {
            Some(dir) => {
                let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
                    .expect("a cgroup path from mountinfo holds no NUL");
                CommandGroup {
                    kind: Kind::Cgroup { dir, procs },
                    mark: format!("{MARK_VAR}={name}"),
                    leader: None,
                    leader_start: 0,
                }
            }
            None => CommandGroup::descendants(name),
        }
    }

    /// Descendant tracking, without a cgroup (also what [`CommandGroup::new`] falls back to).
    pub(crate) fn descendants(name: &str) -> CommandGroup {
        // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer and changes only how
        // this process's orphaned descendants are reparented.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
        CommandGroup {
            kind: Kind::Descendants {
                known: HashMap::new(),
            },
            mark: format!("{MARK_VAR}={name}"),
            leader: None,
            leader_start: 0,
        }
    }

    /// How this group keeps the command's processes, for messages.
    pub(crate) fn how(&self) -> String {
        match &self.kind {
            Kind::Cgroup { dir, .. } => format!("cgroup {}", dir.display()),
            Kind::Descendants { .. } => {
                "its descendants (no cgroup v2 to put it in; flashlab is their subreaper)".into()
            }
        }
    }

    /// Makes `command` join this group before it runs.
    pub(crate) fn prepare(&self, command: &mut Command) {
        let (var, value) = self.mark.split_once('=').expect("the mark is VAR=value");
        command.env(var, value);
        if let Kind::Cgroup { procs, .. } = &self.kind {
            let procs = procs.clone();
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // async-signal-safe functions (open, write, close) on a path built before the
            // fork; writing "0" to cgroup.procs moves the writing process.
            unsafe {
                command.pre_exec(move || {
                    let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                    if fd < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                    let err = std::io::Error::last_os_error();
                    libc::close(fd);
                    if n != 1 {
                        return Err(err);
                    }
                    Ok(())
                });
            }
        }
    }

    /// The command started as `pid`.
    pub(crate) fn started(&mut self, pid: u32) {
        self.leader = Some(pid);
        self.leader_start = start_time(pid).unwrap_or(0);
        if let Kind::Descendants { known } = &mut self.kind {
            known.insert(pid, self.leader_start);
        }
        self.watch();
    }

    /// Follows new descendants (descendant tracking; call it often while the command
    /// runs: a process whose parent exits between two calls is adopted by flashlab
    /// unseen).
    pub(crate) fn watch(&mut self) {
        let Kind::Descendants { known } = &mut self.kind else {
            return;
        };
        let table = process_table();
        let me = std::process::id();
        // Drop processes that are gone (or whose pid was reused).
        known.retain(|pid, start| table.get(pid).is_some_and(|p| p.start == *start));
        loop {
            let before = known.len();
            for (&pid, p) in &table {
                if known.contains_key(&pid) {
                    continue;
                }
                // A child of a known process, or one adopted by flashlab (its parent
                // exited unseen) that carries the command's mark.
                if known.contains_key(&p.ppid)
                    || (p.ppid == me && p.start >= self.leader_start && has_mark(pid, &self.mark))
                {
                    known.insert(pid, p.start);
                }
            }
            if known.len() == before {
                break;
            }
        }
    }

    /// The group's live processes (in a cgroup, its own and every nested one's: the
    /// command may make cgroups under it).
    fn members(&mut self) -> Vec<ProcessId> {
        match &mut self.kind {
            Kind::Cgroup { dir, .. } => subtree(dir)
                .iter()
                .flat_map(|d| {
                    std::fs::read_to_string(d.join("cgroup.procs"))
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.trim().parse::<u32>().ok())
                        .collect::<Vec<_>>()
                })
                .filter_map(|pid| Some((pid, start_time(pid)?)))
                .collect(),
            Kind::Descendants { .. } => {
                self.watch();
                let Kind::Descendants { known } = &self.kind else {
                    unreachable!()
                };
                known.iter().map(|(&p, &s)| (p, s)).collect()
            }
        }
    }

    /// Ends every process of the group: SIGTERM, a moment, then SIGKILL (a cgroup's
    /// `cgroup.kill` where the kernel has it); waits for them to be gone.
    pub(crate) fn end(&mut self) -> Ended {
        let mut ended = Ended::default();
        let first = self.members();
        if !first.is_empty() {
            ended.signalled = first.len();
            signal(&first, libc::SIGTERM);
            let since = Instant::now();
            while since.elapsed() < TERM_GRACE && !self.members().is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let since = Instant::now();
            loop {
                let left = self.members();
                if left.is_empty() || since.elapsed() > KILL_WAIT {
                    ended.survivors = left.iter().map(|p| p.0).collect();
                    break;
                }
                let killed_by_cgroup = match &self.kind {
                    Kind::Cgroup { dir, .. } => {
                        std::fs::write(dir.join("cgroup.kill"), "1").is_ok()
                    }
                    Kind::Descendants { .. } => false,
                };
                if !killed_by_cgroup {
                    signal(&left, libc::SIGKILL);
                }
                ended.signalled = ended.signalled.max(left.len());
                std::thread::sleep(Duration::from_millis(20));
                self.reap();
            }
        }
        self.reap();
        if let Kind::Descendants { known } = &self.kind {
            let me = std::process::id();
            ended.may_have_escaped = process_table()
                .into_iter()
                .filter(|(pid, p)| {
                    p.ppid == me
                        && p.start >= self.leader_start
                        && Some(*pid) != self.leader
                        && !known.contains_key(pid)
                })
                .map(|(pid, _)| format!("{pid} ({})", crate::procs::name_of(pid)))
                .collect();
        }
        ended
    }

    /// Reaps adopted children of the group that have exited (descendant tracking makes
    /// flashlab their parent); the leader is reaped by whoever waits on it.
    fn reap(&mut self) {
        let Kind::Descendants { known } = &self.kind else {
            return;
        };
        for &pid in known.keys() {
            if Some(pid) == self.leader {
                continue;
            }
            let mut status = 0;
            // SAFETY: waitpid on one pid with WNOHANG writes only `status`; a pid that is
            // not our child gives ECHILD.
            unsafe {
                libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG);
            }
        }
    }
}

impl Drop for CommandGroup {
    fn drop(&mut self) {
        let ended = self.end();
        if let Kind::Cgroup { dir, .. } = &self.kind {
            // Nested cgroups the command made first, deepest first.
            let remove = || {
                let mut r = Ok(());
                for d in subtree(dir).iter().rev() {
                    r = std::fs::remove_dir(d);
                }
                r
            };
            let mut removed = remove();
            for _ in 0..50 {
                if removed.is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
                removed = remove();
            }
            if let Err(e) = removed {
                eprintln!(
                    "flashlab capture: cleanup: could not remove {} ({e}); processes left: {:?}",
                    dir.display(),
                    ended.survivors
                );
            }
        }
    }
}

fn signal(procs: &[ProcessId], sig: libc::c_int) {
    for &(pid, start) in procs {
        // Only the process we saw, not a later one with its pid.
        if start_time(pid) != Some(start) {
            continue;
        }
        // SAFETY: kill has no memory preconditions.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

/// `dir` and every cgroup nested in it, parents before children.
fn subtree(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() && out.len() < 10_000 {
        let children: Vec<PathBuf> = std::fs::read_dir(&out[i])
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        out.extend(children);
        i += 1;
    }
    out
}

/// Where a cgroup v2 directory `name` under this process's own cgroup is (or would be).
pub(crate) fn cgroup_path(name: &str) -> Option<PathBuf> {
    let mount = cgroup2_mount()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    Some(mount.join(own.trim_start_matches('/')).join(name))
}

/// A cgroup v2 directory `name` made under this process's own cgroup, or None where there
/// is no writable cgroup v2 hierarchy.
fn make_cgroup(name: &str) -> Option<PathBuf> {
    let dir = cgroup_path(name)?;
    std::fs::create_dir(&dir).ok()?;
    // A hierarchy where processes cannot be moved (not delegated to us) is no use.
    if !dir.join("cgroup.procs").exists() {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    Some(dir)
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let fstype = l.split(" - ").nth(1)?.split(' ').next()?;
        (fstype == "cgroup2").then(|| PathBuf::from(l.split(' ').nth(4).unwrap_or("")))
    })
}

struct Proc {
    ppid: u32,
    start: u64,
}

/// Fields 4 (ppid) and 22 (start time) of `/proc/PID/stat`, after the command name (which
/// may hold spaces and parentheses: it ends at the last `)`).
fn stat(pid: u32) -> Option<Proc> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(Proc {
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// Whether the process's initial environment holds `mark` (`VAR=value`).
fn has_mark(pid: u32, mark: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == mark.as_bytes()))
}

fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|p| p.start)
}

fn process_table() -> HashMap<u32, Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `pid` is a live process (not a zombie).
    fn alive(pid: u32) -> bool {
        stat(pid).is_some()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
    }

    /// Runs `script` under `group`, then ends the group; returns the pid the script wrote
    /// of the background process it left in a session of its own, and an unrelated
    /// process's pid started beside it.
    fn run_and_end(mut group: CommandGroup, tag: &str) -> (u32, u32, Ended) {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("bg.pid");
        let mut unrelated = Command::new("sleep").arg("60").spawn().unwrap();
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!(
            "(setsid sh -c 'echo $$ > {}; exec sleep 60' &) ; sleep 0.2",
            pidfile.display()
        ));
        group.prepare(&mut command);
        let mut child = command.spawn().unwrap();
        group.started(child.id());
        loop {
            group.watch();
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let bg: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            alive(bg),
            "{tag}: the background process runs after its parent ended"
        );
        let ended = group.end();
        drop(group);
        let unrelated_alive = alive(unrelated.id());
        let _ = unrelated.kill();
        let _ = unrelated.wait();
        assert!(
            unrelated_alive,
            "{tag}: a process the command did not start survives"
        );
        (bg, unrelated.id(), ended)
    }

    #[test]
    fn descendants_that_left_the_session_are_ended_and_nothing_else() {
        let (bg, _, ended) = run_and_end(
            CommandGroup::descendants(&format!("flashlab-test-d-{}", std::process::id())),
            "descendants",
        );
        assert!(!alive(bg), "the setsid child was ended");
        assert!(
            ended.signalled >= 1 && ended.survivors.is_empty(),
            "{ended:?}"
        );
        // Other children of this process (the tests run on threads of one process) may
        // be named as candidates; the ended one is not among them.
        assert!(
            !ended
                .may_have_escaped
                .iter()
                .any(|p| p.starts_with(&format!("{bg} "))),
            "{ended:?}"
        );
    }

    #[test]
    fn a_cgroup_of_its_own_ends_what_the_command_started_and_nothing_else() {
        let group = CommandGroup::new(&format!("flashlab-test-{}", std::process::id()));
        if !matches!(group.kind, Kind::Cgroup { .. }) {
            eprintln!(
                "a_cgroup_of_its_own_ends_what_the_command_started_and_nothing_else: SKIPPED: no writable cgroup v2 hierarchy (needs root)"
            );
            return;
        }
        let dir = match &group.kind {
            Kind::Cgroup { dir, .. } => dir.clone(),
            Kind::Descendants { .. } => unreachable!(),
        };
        let (bg, _, ended) = run_and_end(group, "cgroup");
        assert!(!alive(bg), "the setsid child was ended");
        assert!(ended.survivors.is_empty(), "{ended:?}");
        assert!(!dir.exists(), "the cgroup is removed");
    }

    #[test]
    fn processes_in_a_cgroup_the_command_nested_are_ended_and_the_cgroups_removed() {
        let mut group = CommandGroup::new(&format!("flashlab-test-n-{}", std::process::id()));
        let dir = match &group.kind {
            Kind::Cgroup { dir, .. } => dir.clone(),
            Kind::Descendants { .. } => {
                eprintln!("processes_in_a_cgroup_the_command_nested_...: SKIPPED: no writable cgroup v2 hierarchy (needs root)");
                return;
            }
        };
        let tmp = tempfile::tempdir().unwrap();
        let pidfile = tmp.path().join("bg.pid");
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!(
            "mkdir {d}/sub && (sh -c 'echo 0 > {d}/sub/cgroup.procs; echo $$ > {p}; exec sleep 60' &) ; sleep 0.3",
            d = dir.display(),
            p = pidfile.display()
        ));
        group.prepare(&mut command);
        let mut child = command.spawn().unwrap();
        group.started(child.id());
        child.wait().unwrap();
        let bg: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(alive(bg));
        let ended = group.end();
        drop(group);
        assert!(
            !alive(bg),
            "the process in the nested cgroup was ended: {ended:?}"
        );
        assert!(!dir.exists(), "the cgroups are removed");
    }
}
