//! A real PostgreSQL server of flashlab's own, for the experiments that run PostgreSQL
//! itself (paper 000's hash join on the real server). Debian's binaries are found
//! ([`find_install`]); a cluster is made with `initdb` in a directory flashlab chose
//! ([`Cluster::init`]); the server runs as the `postgres` user (PostgreSQL refuses root),
//! listening only on a Unix socket inside the cluster's directory, as a child of a thread
//! that waits for it, with `PR_SET_PDEATHSIG` so that it dies with flashlab even when
//! flashlab is killed outright ([`Cluster::start`]); SQL runs through `psql`
//! ([`Server::sql`]) and tables load with `COPY` ([`Server::copy_in`]). Stopping is
//! PostgreSQL's fast shutdown (SIGINT), then SIGKILL after a grace period, also on drop.
//!
//! Needs root (to run the server as its own user) and the server's package; [`find_install`]
//! and [`os_user`] say what is missing.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PgError {
    #[error("PostgreSQL is not installed: {0}")]
    NotInstalled(String),
    #[error("{0}")]
    Setup(String),
    #[error("the PostgreSQL server failed: {0}")]
    Server(String),
    #[error("psql failed: {0}")]
    Sql(String),
}

/// Where the programs are, and the server's major version.
#[derive(Debug, Clone)]
pub struct Install {
    pub bin_dir: PathBuf,
    pub major: u32,
}

impl Install {
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }
}

/// The programs an [`Install`] must have.
const PROGRAMS: [&str; 3] = ["initdb", "postgres", "psql"];

/// The server's programs: `FLASHLAB_PG_BIN` if set, else the newest
/// `/usr/lib/postgresql/N/bin` (Debian's layout) that has `initdb`, `postgres` and `psql`.
pub fn find_install() -> Result<Install, PgError> {
    let has_all = |d: &Path| PROGRAMS.iter().all(|p| d.join(p).is_file());
    if let Some(d) = std::env::var_os("FLASHLAB_PG_BIN") {
        let d = PathBuf::from(d);
        if !has_all(&d) {
            return Err(PgError::NotInstalled(format!(
                "FLASHLAB_PG_BIN={} lacks one of {}",
                d.display(),
                PROGRAMS.join(", ")
            )));
        }
        let major = version_of(&d.join("postgres"))?;
        return Ok(Install { bin_dir: d, major });
    }
    let base = Path::new("/usr/lib/postgresql");
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(base)
        .map_err(|e| {
            PgError::NotInstalled(format!(
                "{}: {e} (Debian's package: apt-get install postgresql)",
                base.display()
            ))
        })?
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_all(&bin).then_some((major, bin))
        })
        .collect();
    found.sort();
    let (major, bin_dir) = found.pop().ok_or_else(|| {
        PgError::NotInstalled(format!(
            "no {}/N/bin with {} (Debian's package: apt-get install postgresql)",
            base.display(),
            PROGRAMS.join(", ")
        ))
    })?;
    Ok(Install { bin_dir, major })
}

/// The major version `postgres --version` prints ("postgres (PostgreSQL) 15.18" -> 15).
fn version_of(postgres: &Path) -> Result<u32, PgError> {
    let out = Command::new(postgres)
        .arg("--version")
        .output()
        .map_err(|e| PgError::NotInstalled(format!("{}: {e}", postgres.display())))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .last()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| {
            PgError::NotInstalled(format!("{} --version said {text:?}", postgres.display()))
        })
}

/// An operating-system user the server runs as.
#[derive(Debug, Clone)]
pub struct OsUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// The user `name` (`postgres`: Debian's package makes it).
pub fn os_user(name: &str) -> Result<OsUser, PgError> {
    let c = CString::new(name).map_err(|_| PgError::Setup(format!("bad user name {name:?}")))?;
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0u8; 16 << 10];
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call; `buf` outlives the use of `pw`'s fields
    // (only the numbers are read).
    let rc = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        )
    };
    if rc != 0 || out.is_null() {
        return Err(PgError::NotInstalled(format!(
            "no user {name:?} to run the server as (Debian's postgresql package makes it)"
        )));
    }
    Ok(OsUser {
        name: name.to_string(),
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Makes `command`'s child get SIGKILL when the thread that spawns it ends, flashlab's
/// death included (`PR_SET_PDEATHSIG`; a child whose parent died before the call exits at
/// once). The signal follows the spawning thread, not the process: spawn from a thread
/// that lives as long as the child should.
pub fn dies_with_parent(command: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, _exit).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Whether this process runs as root (the server is run as another user).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn chown(path: &Path, user: &OsUser) -> Result<(), PgError> {
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
        .map_err(|e| PgError::Setup(format!("chown {} to {}: {e}", path.display(), user.name)))
}

/// A directory owned by `user` with mode 0700 (the cluster's, the socket's).
fn user_dir(path: &Path, user: &OsUser) -> Result<(), PgError> {
    std::fs::create_dir(path)
        .map_err(|e| PgError::Setup(format!("mkdir {}: {e}", path.display())))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| PgError::Setup(format!("chmod {}: {e}", path.display())))?;
    chown(path, user)
}

/// Runs `cmd` as `user`, capturing its output; an error names what it printed.
fn run_as(mut cmd: Command, user: &OsUser, what: &str) -> Result<String, PgError> {
    cmd.uid(user.uid).gid(user.gid).stdin(Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| PgError::Setup(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(PgError::Setup(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A cluster (data directory and socket directory) in a directory of flashlab's.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub install: Install,
    pub user: OsUser,
    /// The data directory (`initdb -D`).
    pub data_dir: PathBuf,
    /// Where the server's socket is (and its log).
    pub socket_dir: PathBuf,
}

/// The port in the socket's name (`.s.PGSQL.PORT`); the socket is in the cluster's own
/// directory, so another server's port does not matter.
pub const PORT: u16 = 5432;

impl Cluster {
    /// Makes a cluster in `dir` (which must exist, be reachable by `user`, and hold
    /// nothing named `data` or `socket`): `initdb` with trust authentication for local
    /// connections, UTF-8 and the C locale, without syncing (a scratch cluster).
    pub fn init(install: &Install, user: &OsUser, dir: &Path) -> Result<Cluster, PgError> {
        let data_dir = dir.join("data");
        let socket_dir = dir.join("socket");
        user_dir(&data_dir, user)?;
        user_dir(&socket_dir, user)?;
        let mut cmd = Command::new(install.program("initdb"));
        cmd.arg("-D")
            .arg(&data_dir)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .current_dir(dir);
        run_as(cmd, user, "initdb")?;
        Ok(Cluster {
            install: install.clone(),
            user: user.clone(),
            data_dir,
            socket_dir,
        })
    }

    /// The server's log (its standard error), beside the data and socket directories in
    /// the cluster's own directory: made there by this process, never in a directory the
    /// server's user owns (where it could put a symlink in its place).
    pub fn log_path(&self) -> PathBuf {
        self.data_dir.with_file_name("server.log")
    }

    /// Starts the server with `settings` (`-c name=value` each) and waits until it
    /// answers (at most a minute).
    pub fn start(&self, settings: &[(&str, String)]) -> Result<Server, PgError> {
        // Appended to by every start of this cluster; never through a symlink.
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.log_path())
            .map_err(|e| PgError::Setup(format!("{}: {e}", self.log_path().display())))?;
        let mut cmd = Command::new(self.install.program("postgres"));
        cmd.arg("-D").arg(&self.data_dir);
        cmd.arg("-k").arg(&self.socket_dir);
        cmd.args(["-p", &PORT.to_string(), "-c", "listen_addresses="]);
        // Dynamic shared memory in files under the data directory (not /dev/shm), so a
        // server killed outright leaves nothing outside the cluster's directory.
        cmd.args(["-c", "dynamic_shared_memory_type=mmap"]);
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.uid(self.user.uid)
            .gid(self.user.gid)
            .current_dir(&self.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // Set after the uid change (std runs pre_exec closures after it), which would
        // clear it.
        dies_with_parent(&mut cmd);
        // The parent-death signal follows the thread that forked: a thread that lives
        // exactly as long as the server forks it and waits for it.
        let (tx, rx) = std::sync::mpsc::channel();
        let keeper = std::thread::spawn(move || -> Option<ExitStatus> {
            match cmd.spawn() {
                Ok(mut child) => {
                    let _ = tx.send(Ok(child.id()));
                    child.wait().ok()
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    None
                }
            }
        });
        let pid = match rx.recv() {
            Ok(Ok(pid)) => pid,
            Ok(Err(e)) => return Err(PgError::Server(format!("cannot start postgres: {e}"))),
            Err(_) => return Err(PgError::Server("the server's thread ended".into())),
        };
        let server = Server {
            pid,
            keeper: Some(keeper),
            psql: self.install.program("psql"),
            socket_dir: self.socket_dir.clone(),
            log: self.log_path(),
        };
        server.wait_ready(Duration::from_secs(60))?;
        Ok(server)
    }
}

/// A running server; stopped when dropped.
#[derive(Debug)]
pub struct Server {
    pid: u32,
    keeper: Option<JoinHandle<Option<ExitStatus>>>,
    psql: PathBuf,
    socket_dir: PathBuf,
    log: PathBuf,
}

impl Server {
    /// The last lines of the server's log, for an error.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    fn running(&self) -> bool {
        self.keeper.as_ref().is_some_and(|k| !k.is_finished())
    }

    fn wait_ready(&self, within: Duration) -> Result<(), PgError> {
        let start = Instant::now();
        loop {
            if !self.running() {
                return Err(PgError::Server(format!(
                    "it exited while starting: {}",
                    self.log_tail()
                )));
            }
            if self.sql("SELECT 1").is_ok() {
                return Ok(());
            }
            if start.elapsed() > within {
                return Err(PgError::Server(format!(
                    "not answering after {} s: {}",
                    within.as_secs(),
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The psql command line (program and arguments) that connects to this server as
    /// `postgres`, without reading ~/.psqlrc, stopping at the first error, printing bare
    /// rows: what a captured command runs.
    pub fn psql_command(&self) -> Vec<String> {
        vec![
            self.psql.display().to_string(),
            "-X".into(),
            "-q".into(),
            "-A".into(),
            "-t".into(),
            "-v".into(),
            "ON_ERROR_STOP=1".into(),
            "-h".into(),
            self.socket_dir.display().to_string(),
            "-p".into(),
            PORT.to_string(),
            "-U".into(),
            "postgres".into(),
            "-d".into(),
            "postgres".into(),
        ]
    }

    fn psql(&self) -> Command {
        let argv = self.psql_command();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// Runs `sql` (one or more statements) and returns what it printed.
    pub fn sql(&self, sql: &str) -> Result<String, PgError> {
        self.sql_with_input(sql, |_| Ok(()))
    }

    /// Loads `table` with `COPY ... FROM STDIN (FORMAT csv)`, the rows written by `rows`.
    pub fn copy_in(
        &self,
        table: &str,
        rows: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), PgError> {
        self.sql_with_input(&format!("COPY {table} FROM STDIN (FORMAT csv)"), rows)
            .map(drop)
    }

    fn sql_with_input(
        &self,
        sql: &str,
        input: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<String, PgError> {
        let mut child = self
            .psql()
            .arg("-c")
            .arg(sql)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| PgError::Sql(format!("{}: {e}", self.psql.display())))?;
        let mut stdin = child.stdin.take().expect("piped");
        let fed = {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut stdin);
            input(&mut w).and_then(|()| w.flush())
        };
        drop(stdin);
        let out = child
            .wait_with_output()
            .map_err(|e| PgError::Sql(format!("{}: {e}", self.psql.display())))?;
        if !out.status.success() {
            return Err(PgError::Sql(format!(
                "{sql:.120}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        fed.map_err(|e| PgError::Sql(format!("{sql:.120}: writing its input: {e}")))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Stops the server: fast shutdown (SIGINT: running queries cancelled, a checkpoint),
    /// SIGKILL if it has not ended within a minute.
    pub fn stop(&mut self) -> Result<(), PgError> {
        let Some(keeper) = self.keeper.take() else {
            return Ok(());
        };
        let pid = self.pid as libc::pid_t;
        // SAFETY: kill has no memory preconditions; the pid is our child's, which the
        // keeper thread has not reaped while it is running.
        if !keeper.is_finished() {
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let start = Instant::now();
        while !keeper.is_finished() {
            if start.elapsed() > Duration::from_secs(60) {
                // Its backends and workers first (each leads a process group of its own,
                // so they are found by their parent), then the postmaster.
                for child in children_of(self.pid) {
                    unsafe { libc::kill(child as libc::pid_t, libc::SIGKILL) };
                }
                unsafe { libc::kill(pid, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        match keeper.join() {
            Ok(Some(status)) if status.success() => Ok(()),
            Ok(status) => Err(PgError::Server(format!(
                "it ended with {status:?}: {}",
                self.log_tail()
            ))),
            Err(_) => Err(PgError::Server("its thread panicked".into())),
        }
    }
}

/// The processes whose parent is `pid` (from /proc/PID/stat: the field after the state).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|st| {
                st.rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().nth(1))
                    .and_then(|pp| pp.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("flashlab: stopping PostgreSQL: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server and its user, or why a test cannot run (it then passes, saying so).
    fn setup(test: &str) -> Option<(Install, OsUser)> {
        if !is_root() {
            eprintln!("SKIPPED {test}: needs root (the server runs as the postgres user)");
            return None;
        }
        match find_install().and_then(|i| Ok((i, os_user("postgres")?))) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("SKIPPED {test}: {e}");
                None
            }
        }
    }

    /// A directory the postgres user can reach (0711: traverse, not list).
    fn reachable_dir() -> tempfile::TempDir {
        let d = tempfile::Builder::new()
            .prefix("pgserver-test-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        d
    }

    #[test]
    fn a_cluster_starts_answers_loads_and_stops_leaving_no_process() {
        let Some((install, user)) = setup("a_cluster_starts_answers_loads_and_stops") else {
            return;
        };
        let dir = reachable_dir();
        let cluster = Cluster::init(&install, &user, dir.path()).unwrap();
        let mut server = cluster.start(&[("shared_buffers", "16MB".into())]).unwrap();
        assert_eq!(server.sql("SHOW shared_buffers").unwrap().trim(), "16MB");
        assert_eq!(
            server
                .sql("SHOW dynamic_shared_memory_type")
                .unwrap()
                .trim(),
            "mmap"
        );
        server.sql("CREATE TABLE t (k int8, v int8)").unwrap();
        server
            .copy_in("t", |w| {
                for k in 0..1000 {
                    writeln!(w, "{k},{}", 2 * k)?;
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(
            server.sql("SELECT count(*), sum(v) FROM t").unwrap().trim(),
            "1000|999000"
        );
        // A bad statement is an error naming PostgreSQL's message.
        let e = server.sql("SELECT nope FROM t").unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        // The server's processes (the postmaster, its background workers and backends)
        // are all gone once it has stopped.
        let pid = server.pid;
        let mut group = children_of(pid);
        assert!(!group.is_empty(), "the server's workers");
        group.push(pid);
        server.stop().unwrap();
        let left: Vec<u32> = group
            .into_iter()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .collect();
        assert!(left.is_empty(), "left running: {left:?}");
    }

    #[test]
    fn a_server_that_cannot_start_says_why() {
        let Some((install, user)) = setup("a_server_that_cannot_start_says_why") else {
            return;
        };
        let dir = reachable_dir();
        let cluster = Cluster::init(&install, &user, dir.path()).unwrap();
        let e = cluster
            .start(&[("shared_buffers", "not-a-size".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("shared_buffers"), "{e}");
    }
}
