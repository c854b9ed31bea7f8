//! The experiments of `flashlab reproduce`, one module each. Every experiment takes a
//! scale and a seed and returns a report [`Section`] whose numbers and verdicts it
//! computed itself.

pub mod astree;
pub mod gracejoin;
pub mod lifetime;
pub mod nosql;
pub mod placement;
pub mod plan;
pub mod presets;
pub mod tempfiles;
pub mod tempfiles_pg;
pub mod tempfiles_real;
pub mod trim;
pub mod waf;

use crate::report::Section;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use trace::Cancel;

/// A fresh private work directory (mkdtemp: an unpredictable name, mode 0700, never an
/// existing path) under the system's temp directory, removed when dropped.
pub(crate) fn work_dir(prefix: &str) -> Result<tempfile::TempDir, crate::LabError> {
    let base = std::env::temp_dir();
    // A killed run's (SIGKILL, the OOM killer) first, as in `capture_dir`.
    for line in trace::reclaim::reclaim_siblings(&base, prefix) {
        eprintln!("flashlab: a killed run's leftover: {line}");
    }
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|e| crate::LabError::io(&base, e))?;
    trace::reclaim::write_owner(dir.path()).map_err(|e| crate::LabError::io(dir.path(), e))?;
    Ok(dir)
}

/// Where the captures keep their loop devices' images: in memory (`/dev/shm`) when it is
/// a tmpfs with room, so a capture's requests end in RAM instead of this machine's disk.
/// The requests a file system sends do not depend on what is behind its loop device; their
/// wall time does, and with it the capture's: measured at full scale, one repetition of
/// tempfiles-real's join took 13.1 s and 9.5 CPU-s (machine-wide, writeback included)
/// with its image on /tmp (ext4 on this machine's virtual disk), 8.3 s and 6.5 CPU-s in
/// memory; one nosql run at 256 documents per commit 32 s and 35 CPU-s, 20 s and 29. `FLASHLAB_CAPTURE_DIR` names another place.
pub(crate) fn capture_dir(
    prefix: &str,
    image_bytes: u64,
) -> Result<(tempfile::TempDir, String), crate::LabError> {
    let base = match std::env::var_os("FLASHLAB_CAPTURE_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None if memory_has_room_for(image_bytes) => std::path::PathBuf::from(SHM),
        None => std::env::temp_dir(),
    };
    // What a run killed outright (SIGKILL, the OOM killer) left here goes first: its
    // images, their loop devices and mounts (trace::reclaim).
    for line in trace::reclaim::reclaim_siblings(&base, prefix) {
        eprintln!("flashlab: a killed run's leftover: {line}");
    }
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(&base)
        .map_err(|e| crate::LabError::io(&base, e))?;
    trace::reclaim::write_owner(dir.path()).map_err(|e| crate::LabError::io(dir.path(), e))?;
    let place = if base == std::path::Path::new(SHM) {
        format!("in memory ({SHM})")
    } else {
        format!("in {}", base.display())
    };
    Ok((dir, place))
}

const SHM: &str = "/dev/shm";

/// Whether `/dev/shm` is a tmpfs that can hold two images of `image_bytes` (the two
/// capture experiments run side by side, one capture each at a time) and still leave
/// 8 GiB of this machine's available memory to the simulations running beside them.
fn memory_has_room_for(image_bytes: u64) -> bool {
    let need = 2 * image_bytes;
    let Ok(st) = statfs_space(SHM) else {
        return false;
    };
    let available = mem_available_bytes().unwrap_or(0);
    st.is_tmpfs && st.free_bytes >= need && available >= need + (8 << 30)
}

/// The memory the kernel says is available for new work (`MemAvailable` in /proc/meminfo).
fn mem_available_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Gives the memory the allocator holds freed back to the kernel: set by the binary that
/// chose the allocator ([`set_give_back_freed_memory`]); none in tests.
static GIVE_BACK_FREED_MEMORY: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets what gives freed memory back before an experiment that runs alone: `flashlab`'s
/// allocator keeps freed memory for reuse (its purge delay is "never"), so a paper-scale
/// report's other sections left about 9 GB resident, all of it free to the allocator and
/// none to the kernel, and `tempfiles` ran one join at a time (8.9 GB after `gracejoin`
/// alone, 2026-11-30; glibc's `malloc_trim` could not reach mimalloc's memory).
pub fn set_give_back_freed_memory(give_back: fn()) {
    let _ = GIVE_BACK_FREED_MEMORY.set(give_back);
}

/// This process's resident memory (`VmRSS` in /proc/self/status).
fn resident_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = m.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// How many of `e`'s jobs to run at once when it runs alone ([`jobs_that_fit`] with the
/// memory available now), said on stderr.
fn alone_jobs(e: &Experiment) -> usize {
    let job_bytes = e.paper_scale_alone_job_bytes.unwrap_or(0);
    let before = resident_bytes();
    if let Some(give_back) = GIVE_BACK_FREED_MEMORY.get() {
        give_back();
    }
    let (available, held) = (mem_available_bytes(), resident_bytes());
    let n = available.map_or(1, |a| jobs_that_fit(a, job_bytes, threads()));
    let gb = |b: Option<u64>| b.map_or("unknown".into(), |b| format!("{:.1} GB", b as f64 / 1e9));
    eprintln!(
        "flashlab reproduce: {}: {n} job(s) at a time (each needs about {:.1} GB at its peak; {} available; this process resident in {}, {} before freed memory went back)",
        e.id,
        job_bytes as f64 / 1e9,
        gb(available),
        gb(held),
        gb(before),
    );
    n
}

/// How many jobs of `job_bytes` each to run at once: as many as `available_bytes` holds
/// with [`MEMORY_HEADROOM_BYTES`] to spare, at most one a core, at least one (a job that
/// does not fit still runs, alone).
pub fn jobs_that_fit(available_bytes: u64, job_bytes: u64, cores: usize) -> usize {
    let usable = available_bytes.saturating_sub(MEMORY_HEADROOM_BYTES);
    ((usable / job_bytes.max(1)) as usize).clamp(1, cores.max(1))
}

/// Uncompressed file bytes the process keeps while an experiment runs alone at paper
/// scale ([`vfs::bytes::set_pack_above_bytes`]; 1 GiB, the default's floor): its runs are
/// larger than memory, and bytes kept raw only cost memory. One SF 30 join of `tempfiles`
/// (`/usr/bin/time -v flashlab join --backend sim --preset mx500 --host linux --host-ram
/// 1GiB --algorithm postgres --memory 4MiB --sf 30 --layout fixed128 --prealloc --discard
/// journal --stream-inputs --repeat 2`, 2026-11-30, one run each in turn, JSON equal but
/// for wall times): 5.7 GB peak and 139 s with it, 11.9 GB and 148 s with the default's
/// 8.2 GB (less memory to fault in made up for the compression).
pub const ALONE_PACK_ABOVE_BYTES: u64 = 1 << 30;

/// Memory [`jobs_that_fit`] leaves to the rest of the machine (the report's own work, the
/// shell, a page cache for the tables): 1 GiB.
pub const MEMORY_HEADROOM_BYTES: u64 = 1 << 30;

struct FsSpace {
    is_tmpfs: bool,
    free_bytes: u64,
}

fn statfs_space(path: &str) -> std::io::Result<FsSpace> {
    let c = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    Ok(FsSpace {
        is_tmpfs: st.f_type as i64 == TMPFS_MAGIC,
        free_bytes: st.f_bavail as u64 * st.f_bsize as u64,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Minutes for the whole report on a 2-core machine.
    Quick,
    /// Larger drives and longer runs, closer to the papers.
    Full,
    /// Each paper at its own size where that differs from full (paper 000's 40 GB query on
    /// 250 GB drives; paper 004's uncleaned log to 500,000 inserts); the others as full,
    /// each saying why ([`Experiment::paper`]).
    Paper,
}

impl FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "quick" => Ok(Scale::Quick),
            "full" => Ok(Scale::Full),
            "paper" => Ok(Scale::Paper),
            _ => Err(format!(
                "unknown scale {s:?}: expected quick, full or paper"
            )),
        }
    }
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scale::Quick => "quick",
            Scale::Full => "full",
            Scale::Paper => "paper",
        })
    }
}

/// An experiment: its id (for `--only`), a one-line description and its runner.
pub struct Experiment {
    pub id: &'static str,
    pub about: &'static str,
    /// What `--scale paper` runs: the paper's own size, or why it runs as full.
    pub paper: &'static str,
    /// Runs it at a scale with a seed; stops early (with an error) once the context's
    /// token is cancelled, and counts its jobs in the context's progress.
    pub run: fn(Scale, u64, &RunCtx) -> Result<Section, crate::LabError>,
    /// How it shares the machine with the others in `reproduce`.
    pub kind: Kind,
    /// `Some(bytes)`: at `--scale paper` it runs after every other experiment has ended,
    /// by itself, each of its jobs needing about `bytes` of memory at its peak: as many
    /// jobs at a time as the memory available then holds, at least one
    /// ([`jobs_that_fit`]), keeping at most [`ALONE_PACK_ABOVE_BYTES`] of file bytes
    /// uncompressed. Its runs at the paper's size need much of the machine's memory
    /// (`tempfiles`: two SF 30 joins at once peaked at 21.4 GB of 24 before the file bytes
    /// were packed past 1 GiB), which the others' beside it would push over.
    pub paper_scale_alone_job_bytes: Option<u64>,
}

/// How an experiment shares the machine in `reproduce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// It only simulates: its jobs share one slot per core with the other experiments'.
    Simulated,
    /// It runs workloads on this machine's real file systems and captures their block I/O
    /// ([`RunCtx::capture_step`]). What its verdicts rest on does not depend on how busy the
    /// machine is (tests/capture.rs runs its captures with every core busy and gets the
    /// same requests and verdicts), so it runs beside the others: its captures hold no slot
    /// (they wait on the disk most of the time), its simulation jobs hold one.
    Captures,
}

/// Job slots shared by experiments that run at the same time: a job holds one while it
/// runs, so the machine runs at most as many jobs as it has cores, whichever experiment
/// they come from.
#[derive(Debug)]
pub struct Slots {
    free: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots {
            free: std::sync::Mutex::new(n.max(1)),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Runs `f` holding a slot.
    fn with<R>(&self, f: impl FnOnce() -> R) -> R {
        {
            let mut free = self.free.lock().expect("slots lock");
            while *free == 0 {
                free = self.freed.wait(free).expect("slots lock");
            }
            *free -= 1;
        }
        struct Release<'a>(&'a Slots);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                *self.0.free.lock().expect("slots lock") += 1;
                self.0.freed.notify_one();
            }
        }
        let _release = Release(self);
        f()
    }
}

/// How far an experiment is: jobs done of jobs planned (shared with whoever draws a
/// progress bar).
#[derive(Debug, Clone, Default)]
pub struct Progress(std::sync::Arc<(AtomicU64, AtomicU64)>);

impl Progress {
    /// More jobs planned.
    pub fn plan(&self, jobs: u64) {
        self.0 .1.fetch_add(jobs, Ordering::Relaxed);
    }

    /// One job done.
    pub fn done(&self) {
        self.0 .0.fetch_add(1, Ordering::Relaxed);
    }

    /// (done, planned).
    pub fn get(&self) -> (u64, u64) {
        (
            self.0 .0.load(Ordering::Relaxed),
            self.0 .1.load(Ordering::Relaxed),
        )
    }
}

/// What an experiment gets besides its scale and seed.
#[derive(Debug, Clone, Default)]
pub struct RunCtx {
    /// Stops the run: jobs not started yet are not run.
    pub cancel: Cancel,
    pub progress: Progress,
    /// Wall seconds of every job `map` and `step` ran, in job order (call after call):
    /// where an experiment's time goes, in its results (`job_wall_s`).
    pub job_wall_s: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
    /// Shared with the experiments that run beside this one (none: a job runs as soon as
    /// a worker takes it).
    pub slots: Option<std::sync::Arc<Slots>>,
}

impl RunCtx {
    pub fn new(cancel: Cancel) -> RunCtx {
        RunCtx {
            cancel,
            ..RunCtx::default()
        }
    }

    /// Runs `f` on every job on all cores, counting them in the progress; results in job
    /// order (deterministic whatever the scheduling). The first error is returned; once
    /// cancelled, jobs not yet started fail with "interrupted".
    pub fn map<J: Sync, R: Send>(
        &self,
        jobs: &[J],
        f: impl Fn(&J) -> Result<R, crate::LabError> + Sync,
    ) -> Result<Vec<R>, crate::LabError> {
        self.progress.plan(jobs.len() as u64);
        let timed = parallel_map(jobs, threads(), |j| {
            if self.cancel.is_cancelled() {
                return (Err("interrupted".into()), 0.0);
            }
            let run = || {
                let started = std::time::Instant::now();
                let r = trace::cancel::with_token(&self.cancel, || f(j));
                (r, started.elapsed().as_secs_f64())
            };
            let (r, secs) = match &self.slots {
                Some(slots) => slots.with(run),
                None => run(),
            };
            self.progress.done();
            (r, secs)
        });
        self.job_wall_s
            .lock()
            .expect("no job panicked while holding the lock")
            .extend(timed.iter().map(|(_, s)| *s));
        timed.into_iter().map(|(r, _)| r).collect()
    }

    /// Runs one step of a sequential experiment, counted as one job.
    pub fn step<R>(
        &self,
        f: impl FnOnce() -> Result<R, crate::LabError>,
    ) -> Result<R, crate::LabError> {
        self.step_in(true, f)
    }

    /// Runs one capture of a real workload (an experiment of [`Kind::Captures`]), counted
    /// as one job; it holds no job slot: it mostly waits on the disk, and what it records
    /// does not depend on the machine's load.
    pub fn capture_step<R>(
        &self,
        f: impl FnOnce() -> Result<R, crate::LabError>,
    ) -> Result<R, crate::LabError> {
        self.step_in(false, f)
    }

    fn step_in<R>(
        &self,
        slot: bool,
        f: impl FnOnce() -> Result<R, crate::LabError>,
    ) -> Result<R, crate::LabError> {
        if self.cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        self.progress.plan(1);
        let run = || {
            let started = std::time::Instant::now();
            let r = trace::cancel::with_token(&self.cancel, f);
            (r, started.elapsed().as_secs_f64())
        };
        let (r, secs) = match &self.slots {
            Some(slots) if slot => slots.with(run),
            _ => run(),
        };
        self.job_wall_s
            .lock()
            .expect("no job panicked while holding the lock")
            .push(secs);
        self.progress.done();
        r
    }
}

/// Runs experiment `e`; an error or a panic becomes a section that says it failed (so the
/// rest of the report is still written).
pub fn run_experiment(e: &Experiment, scale: Scale, seed: u64, ctx: &RunCtx) -> Section {
    let started = std::time::Instant::now();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (e.run)(scale, seed, ctx)));
    let error = match r {
        Ok(Ok(mut section)) => {
            if scale == Scale::Paper {
                section.provenance.push(crate::report::Provenance {
                    number: "--scale paper".into(),
                    role: e.paper.into(),
                });
            }
            let wall = ctx.job_wall_s.lock().map(|w| w.clone()).unwrap_or_default();
            if let Some(results) = section.results.as_object_mut() {
                results.insert(
                    "job_wall_s".into(),
                    wall.iter().map(|s| (s * 10.0).round() / 10.0).collect(),
                );
            }
            return section;
        }
        Ok(Err(e)) => e.to_string(),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            format!("panicked: {what}")
        }
    };
    let mut s = Section::failed(e.id, e.about, &error, seed);
    s.runtime_s = started.elapsed().as_secs_f64();
    s
}

pub const ALL: &[Experiment] = &[
    Experiment {
        id: "presets",
        about: "issue 45: each preset that names a product against its drive's datasheet and reviews: calibrated numbers shown, held-out ones predicted within 15%",
        paper: "as full: no paper has these checks (each preset against its own drive's datasheet and reviews)",
        run: presets::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "waf",
        about: "WAF versus over-provisioning for greedy, cost-benefit and FIFO GC, against Desnoyers's analytic FIFO model; hot/cold skew",
        paper: "as full: no paper size (the analytic models it is checked against have none)",
        run: waf::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "tempfiles",
        about: "paper 000: fallocate and TRIM for hash-join temp files, repeated on MX500, 840 Pro and Cosmos+",
        paper: "paper 000's own size: its 40 GB database (TPC-H SF 30, assumed) on the 250 GB MX500 and 840 Pro, its 3 GB one on the 32 GB Cosmos+, work_mem 4 MB (512 KB), 30 and 20 repetitions",
        run: tempfiles::run,
        kind: Kind::Simulated,
        // One SF 30 join peaked at 5.7 GB with the file bytes kept raw up to
        // ALONE_PACK_ABOVE_BYTES (two at once with 8.2 GB kept raw: 21.4 GB,
        // `/usr/bin/time -v flashlab reproduce --scale paper --only tempfiles`, 2026-11-29).
        paper_scale_alone_job_bytes: Some(5_750_000_000),
    },
    Experiment {
        id: "gracejoin",
        about: "paper 001: grace hash join on SSD vs HDD: read buffer, write buffer, concurrent users",
        paper: "as full, which is paper 001's size: TPC-H SF 1 (1.5 M and 6 M rows) in 128-byte records",
        run: gracejoin::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "astree",
        about: "paper 004: AS B-tree vs in-place B+tree vs BFTL on a 2011 drive with a FAST FTL",
        paper: "as full, which is paper 004's size (400,000 keys, 100,000 timed inserts and searches, the cleaning runs to 1,000,000 inserts), and the uncleaned log to Fig. 6's 500,000 inserts (full stops it at 250,000)",
        run: astree::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "nosql",
        about: "paper 003: an append-only key-value store's write batches on real ext4, XFS and btrfs (captured on loop devices, replayed on the 840 Pro; needs root)",
        paper: "as full (400,000 documents of 1 KiB): the paper's 100,000,000 would make each captured database about 100 GB on a loop device, more than this machine's disk has free",
        run: nosql::run,
        kind: Kind::Captures,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "tempfiles-real",
        about: "paper 000 on a real kernel: the hash join's spill files on ext4 with and without discard, fallocate on and off, captured and replayed on the MX500 (needs root)",
        paper: "as full (SF 0.5, 20 repetitions): paper 000's SF 30 writes about 33 GB of batch files a repetition, more than a loop device's image can hold in this machine's memory",
        run: tempfiles_real::run,
        kind: Kind::Captures,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "tempfiles-pg",
        about: "paper 000 on the real PostgreSQL: the server's hash-join temp files on ext4 with and without discard, written back as a 1 GiB host's, captured and replayed on the MX500, 840 Pro and Cosmos+ (needs root and the postgresql package)",
        paper: "the real PostgreSQL at the paper's work_mem (4 MB) and 30 repetitions, at SF 1: the paper's 40 GB database is not loaded (its tables go to the server over a psql pipe)",
        run: tempfiles_pg::run,
        kind: Kind::Captures,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "trim",
        about: "paper 002: deleting a fragmented file with TRIM, vTrim, fTrim and fTrim with preemption",
        paper: "the paper's size at every scale: paper 002's 10 MB file of 160 extents, deleted with 20, 100 and 1,000 reads",
        run: trim::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "lifetime",
        about: "the engines on an aging drive: paper 000's four temp-file combinations on the MX500 and paper 004's three B-tree stores on the 2011 drive, each to the same host bytes: life used, projected TBW and days, against a null model (WAF 1)",
        paper: "as full: a question of this project's, with no paper size",
        run: lifetime::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
    Experiment {
        id: "placement",
        about: "issue 27: the papers' engines on a conventional, an FDP and a zoned drive of the same flash (write-life hints, simfs's zoned mode); hot/cold separation against the analytic model; a CacheLib-like cache on FDP",
        paper: "as full: issue 27's question, with no paper size",
        run: placement::run,
        kind: Kind::Simulated,
        paper_scale_alone_job_bytes: None,
    },
];

/// What a `reproduce` run did.
pub struct Reproduced {
    pub sections: Vec<Section>,
    /// The report's index.html.
    pub index: std::path::PathBuf,
    /// Ids of the experiments that failed.
    pub failed: Vec<String>,
    /// Stopped by `cancel` before every experiment ran.
    pub interrupted: bool,
}

/// Follows a `reproduce` run (a progress display, a log).
pub trait Watcher {
    /// Experiment `e` starts; `progress` counts its jobs.
    fn started(&mut self, _e: &Experiment, _progress: &Progress) {}
    /// An experiment ended with `section` (failed ones included).
    fn finished(&mut self, _section: &Section) {}
}

/// Runs `chosen` and writes the report of what ran to `out` (checked first with
/// [`crate::report::prepare_report_dir`]; an earlier report's other sections there are
/// kept as they were, or removed where they cannot be kept whole), sections in the order
/// of [`ALL`].
/// Every experiment runs at the same time as the others, their jobs sharing one slot per
/// core (so the cores stay busy while one experiment finishes its last long jobs); the
/// captures of [`Kind::Captures`] experiments hold no slot. At [`Scale::Paper`] those
/// with [`Experiment::paper_scale_alone_job_bytes`] run after the others have ended, one
/// at a time, each with as many jobs at once as the available memory holds. An experiment
/// that fails (an
/// error or a panic) gets a section saying so and the others still run; once `cancel` is
/// cancelled no further experiment starts, and the report holds what finished.
pub fn reproduce(
    chosen: &[&Experiment],
    scale: Scale,
    seed: u64,
    cancel: &Cancel,
    out: &std::path::Path,
    mut info: crate::report::RunInfo,
    watcher: &mut (dyn Watcher + Send),
) -> Result<Reproduced, crate::LabError> {
    // Before anything runs: a directory that is not a report of ours is refused, one that
    // cannot be written fails now.
    let earlier = crate::report::prepare_report_dir(out)?;
    // One run writes a report at a time: another one into the same directory would keep
    // sections this one is about to replace, or lose this one's.
    let _lock = crate::safe_dir::SafeDir::open(out)
        .and_then(|d| d.try_lock().map(|held| (d, held)))
        .map_err(|e| format!("--out {}: cannot lock it: {e}", out.display()))
        .and_then(|(d, held)| {
            if held {
                Ok(d)
            } else {
                Err(format!(
                    "--out {}: another flashlab reproduce is writing this report; wait for it or give another --out",
                    out.display()
                ))
            }
        })?;
    let started = std::time::Instant::now();
    let mut done: Vec<Option<Section>> = chosen.iter().map(|_| None).collect();
    let watcher = std::sync::Mutex::new(watcher);
    let slots = std::sync::Arc::new(Slots::new(threads()));
    let run_one = |e: &Experiment, slots: Option<std::sync::Arc<Slots>>| -> Option<Section> {
        if cancel.is_cancelled() {
            return None;
        }
        let ctx = RunCtx {
            slots,
            ..RunCtx::new(cancel.clone())
        };
        watcher.lock().expect("watcher").started(e, &ctx.progress);
        let s = run_experiment(e, scale, seed, &ctx);
        watcher.lock().expect("watcher").finished(&s);
        Some(s)
    };
    // Those that run alone at this scale wait for the others, then run one at a time,
    // each with as many jobs at once as the memory then available holds.
    let alone = |e: &Experiment| scale == Scale::Paper && e.paper_scale_alone_job_bytes.is_some();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chosen
            .iter()
            .enumerate()
            .filter(|(_, e)| !alone(e))
            .map(|(i, e)| {
                let slots = slots.clone();
                let run_one = &run_one;
                (i, scope.spawn(move || run_one(e, Some(slots))))
            })
            .collect();
        for (i, h) in handles {
            done[i] = h.join().expect("run_experiment catches panics");
        }
    });
    for (i, e) in chosen.iter().enumerate().filter(|(_, e)| alone(e)) {
        vfs::bytes::set_pack_above_bytes(ALONE_PACK_ABOVE_BYTES);
        let n = alone_jobs(e);
        done[i] = run_one(e, Some(std::sync::Arc::new(Slots::new(n))));
    }
    let interrupted = done.iter().any(Option::is_none);
    let mut sections: Vec<Section> = done.into_iter().flatten().collect();
    if cancel.is_cancelled() {
        // An experiment the interrupt cut short does not replace what an earlier run made.
        sections.retain(|s| s.failed_with().is_none() || !earlier.earlier_sections.contains(&s.id));
    }
    info.total_runtime_s = started.elapsed().as_secs_f64();
    // An earlier report's sections that this run did not make are kept as they were
    // (each says which run made it), so `--only X` into a report replaces X alone; one
    // that cannot be kept whole (an older report's) would be stale beside the rest: what
    // that report wrote in it goes (only sections its mark lists; anything else there is
    // left, and said).
    let others: Vec<String> = earlier
        .earlier_sections
        .iter()
        .filter(|id| !sections.iter().any(|s| &s.id == *id) && ALL.iter().any(|e| e.id == *id))
        .cloned()
        .collect();
    let kept = crate::report::kept_sections(out, &others);
    for id in others
        .iter()
        .filter(|id| !kept.iter().any(|k| &k.id == *id))
    {
        for p in crate::report::remove_stale_section(out, id) {
            eprintln!(
                "flashlab reproduce: kept {} (not written by flashlab) in the stale section {id}",
                p.display()
            );
        }
    }
    let order: Vec<&str> = ALL.iter().map(|e| e.id).collect();
    let index = crate::report::write_report(out, &info, &sections, &kept, &order)?;
    let failed = sections
        .iter()
        .filter(|s| s.failed_with().is_some())
        .map(|s| s.id.clone())
        .collect();
    Ok(Reproduced {
        sections,
        index,
        failed,
        interrupted: interrupted || cancel.is_cancelled(),
    })
}

/// Replays `trace` closed loop (one stream per issuing task, one request in flight each,
/// with its think times) on a fresh `preset` drive of `capacity_bytes`; returns the
/// drive's statistics after deferred work has settled.
pub(crate) fn replay_captured(
    preset: &str,
    capacity_bytes: u64,
    trace: &trace::Trace,
) -> Result<flash::DeviceStats, crate::LabError> {
    use flash::Device;
    let mut dev = flash::Preset::load(preset)?
        .with_capacity(capacity_bytes)
        .build()?;
    let streams: Vec<_> = trace
        .by_stream()
        .into_iter()
        .map(|s| s.into_iter())
        .collect();
    let summary = trace::replay_closed(&mut dev, streams, 1, 0, &mut |_| {})
        .map_err(|e| format!("replay on {preset}: {e}"))?;
    dev.settle();
    let mut stats = dev.stats();
    stats.simulated_ns = stats.simulated_ns.max(summary.end_ns);
    Ok(stats)
}

/// One repetition of a capture replayed ([`replay_repetitions`]).
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct RepReplay {
    /// Simulated seconds from the repetition's start to its last completion.
    pub time_s: f64,
    /// Flash pages written over host pages written in the repetition.
    pub waf: Option<f64>,
    pub trims: u64,
}

/// The repetitions replayed one after another on one fresh `drive`, as they ran: each
/// repetition's requests closed loop per issuing task, starting after the repetition before
/// has completed and the real pause between them has passed (a new server process serves
/// each query, so the repetitions cannot be one closed-loop replay: a task's first request
/// has nothing to follow and would start with the trace). Each repetition's time is from
/// its start to its last completion; its WAF and TRIMs are what the device counted in it.
/// Also returns the device's counters at the end (settled).
pub(crate) fn replay_repetitions(
    drive: &str,
    capacity_bytes: u64,
    t: &trace::Trace,
    run_ends_ns: &[u64],
) -> Result<(Vec<RepReplay>, flash::DeviceStats), crate::LabError> {
    replay_repetitions_thinking(drive, capacity_bytes, t, run_ends_ns, 1.0)
}

/// [`replay_repetitions`] with every think time, and every pause between repetitions,
/// multiplied by `think_scale` (1: as captured): how the drive's result depends on the
/// host's idle time.
pub(crate) fn replay_repetitions_thinking(
    drive: &str,
    capacity_bytes: u64,
    t: &trace::Trace,
    run_ends_ns: &[u64],
    think_scale: f64,
) -> Result<(Vec<RepReplay>, flash::DeviceStats), crate::LabError> {
    use flash::Device;
    let scaled = |ns: u64| (ns as f64 * think_scale).round() as u64;
    let mut dev = flash::Preset::load(drive)?
        .with_capacity(capacity_bytes)
        .build()?;
    let mut reps = Vec::new();
    let mut now_ns = 0u64;
    let mut from = 0u64;
    // Each stream's requests in the trace before this repetition (to renumber `after`).
    let mut seen: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut last_at_ns: Option<u64> = None;
    for &end in run_ends_ns {
        let mut requests: Vec<trace::Request> = t
            .requests
            .iter()
            .filter(|r| r.at_ns >= from && r.at_ns < end)
            .cloned()
            .collect();
        // Dependencies on a request of an earlier repetition are met already; the others
        // are renumbered within this repetition's streams.
        for r in &mut requests {
            r.after = r.after.and_then(|a| {
                let before = seen.get(&a.stream).copied().unwrap_or(0);
                (a.nth >= before).then(|| trace::request::After {
                    stream: a.stream,
                    nth: a.nth - before,
                })
            });
        }
        // A stream's first request in the repetition issues as long after the
        // repetition's start as it did in the capture: its think time was the pause since
        // the stream's last request (a writeback thread's, a repetition before), which the
        // replay already passed between the repetitions.
        let rep_start_at = requests.first().map_or(0, |r| r.at_ns);
        let mut started = std::collections::HashSet::new();
        for r in &mut requests {
            if started.insert(r.stream) && r.after.is_none() {
                r.think_ns = r.at_ns - rep_start_at;
            }
        }
        for r in &mut requests {
            *seen.entry(r.stream).or_insert(0) += 1;
            r.think_ns = scaled(r.think_ns);
        }
        if let (Some(prev), Some(first)) = (last_at_ns, requests.first()) {
            now_ns += scaled(first.at_ns.saturating_sub(prev));
        }
        last_at_ns = requests.last().map(|r| r.at_ns).or(last_at_ns);
        let before = dev.stats();
        let start = now_ns;
        let sub = trace::Trace {
            requests,
            timestamped: t.timestamped,
        };
        let streams: Vec<_> = sub.by_stream().into_iter().map(|s| s.into_iter()).collect();
        let summary = trace::replay_closed(&mut dev, streams, 1, start, &mut |_| {})
            .map_err(|e| format!("replay on {drive}: {e}"))?;
        now_ns = now_ns.max(summary.end_ns);
        let after = dev.stats();
        let host = after.host_write_pages - before.host_write_pages;
        let flash = after.flash_write_pages - before.flash_write_pages;
        reps.push(RepReplay {
            time_s: (now_ns - start) as f64 / 1e9,
            waf: (host > 0).then(|| flash as f64 / host as f64),
            trims: sub
                .requests
                .iter()
                .filter(|r| r.cmd.op == flash::Op::Trim)
                .count() as u64,
        });
        from = end;
    }
    dev.settle();
    Ok((reps, dev.stats()))
}

/// Derives an independent seed for job `index` of a run seeded with `seed` (SplitMix64).
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Runs `jobs` on up to `threads` threads; results come back in job order, whatever the
/// scheduling, so parallel runs stay deterministic.
pub fn parallel_map<J: Sync, R: Send>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs.len() {
                    break;
                }
                let r = f(&jobs[i]);
                out.lock()
                    .expect("no worker panicked while holding the lock")[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .expect("workers finished")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// Worker threads for experiments: the machine's cores.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_map_keeps_order() {
        let jobs: Vec<u64> = (0..100).collect();
        let out = parallel_map(&jobs, 4, |&j| j * j);
        assert_eq!(out, jobs.iter().map(|j| j * j).collect::<Vec<_>>());
    }

    struct Quiet;
    impl Watcher for Quiet {}

    fn fine(_: Scale, seed: u64, ctx: &RunCtx) -> Result<Section, crate::LabError> {
        let squares = ctx.map(&[1u64, 2, 3], |&x| Ok(x * x))?;
        let mut s = Section::failed("fine", "", "", seed);
        s.title = "A fine experiment".into();
        s.results = serde_json::json!({ "squares": squares });
        Ok(s)
    }

    fn broken(_: Scale, _: u64, _: &RunCtx) -> Result<Section, crate::LabError> {
        Err("disk on fire".into())
    }

    fn panicking(_: Scale, _: u64, _: &RunCtx) -> Result<Section, crate::LabError> {
        panic!("index out of bounds")
    }

    #[test]
    fn a_failing_experiment_gets_a_failed_section_and_the_others_are_still_written() {
        let exps = [
            Experiment {
                id: "broken",
                about: "fails",
                paper: "as full",
                run: broken,
                kind: Kind::Simulated,
                paper_scale_alone_job_bytes: None,
            },
            Experiment {
                id: "panicking",
                about: "panics",
                paper: "as full",
                run: panicking,
                kind: Kind::Simulated,
                paper_scale_alone_job_bytes: None,
            },
            Experiment {
                id: "fine",
                about: "works",
                paper: "as full",
                run: fine,
                kind: Kind::Captures,
                paper_scale_alone_job_bytes: None,
            },
        ];
        let chosen: Vec<&Experiment> = exps.iter().collect();
        let dir = tempfile::tempdir().unwrap();
        struct Log(Vec<String>);
        impl Watcher for Log {
            fn finished(&mut self, s: &Section) {
                self.0.push(s.id.clone());
            }
        }
        let mut log = Log(Vec::new());
        let r = reproduce(
            &chosen,
            Scale::Quick,
            1,
            &Cancel::new(),
            dir.path(),
            crate::report::RunInfo::default(),
            &mut log,
        )
        .unwrap();
        let progress = log.0;
        assert_eq!(
            r.failed,
            vec!["broken".to_string(), "panicking".to_string()]
        );
        assert!(!r.interrupted);
        // All three ran side by side (any may end first); the report keeps the chosen
        // order.
        assert_eq!(progress.len(), 3);
        let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["broken", "panicking", "fine"]);
        let html = std::fs::read_to_string(&r.index).unwrap();
        assert!(html.contains("disk on fire") && html.contains("index out of bounds"));
        assert!(html.contains("A fine experiment"));
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            json["experiments"]["broken"]["results"]["failed"],
            "disk on fire"
        );
        assert_eq!(
            json["experiments"]["fine"]["results"]["squares"],
            serde_json::json!([1, 4, 9])
        );
    }

    #[test]
    fn at_paper_scale_a_section_says_what_it_ran_and_why() {
        let e = Experiment {
            id: "fine",
            about: "works",
            paper: "as full: no paper size",
            run: fine,
            kind: Kind::Simulated,
            paper_scale_alone_job_bytes: None,
        };
        let says = |scale| {
            run_experiment(&e, scale, 1, &RunCtx::default())
                .provenance
                .iter()
                .any(|p| p.number == "--scale paper" && p.role == "as full: no paper size")
        };
        assert!(says(Scale::Paper));
        assert!(!says(Scale::Full));
        // Every experiment says what `--scale paper` runs for it.
        assert!(ALL.iter().all(|e| !e.paper.is_empty()));
    }

    static RUNNING_JOBS: AtomicU64 = AtomicU64::new(0);
    static MOST_JOBS: AtomicU64 = AtomicU64::new(0);

    fn counting(_: Scale, seed: u64, ctx: &RunCtx) -> Result<Section, crate::LabError> {
        ctx.map(&[0u8; 6], |_| {
            let now = RUNNING_JOBS.fetch_add(1, Ordering::SeqCst) + 1;
            MOST_JOBS.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(5));
            RUNNING_JOBS.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        })?;
        Ok(Section::failed("counting", "", "", seed))
    }

    #[test]
    fn experiments_side_by_side_share_one_slot_per_core() {
        let exps: Vec<Experiment> = (0..4)
            .map(|_| Experiment {
                id: "counting",
                about: "",
                paper: "as full",
                run: counting,
                kind: Kind::Simulated,
                paper_scale_alone_job_bytes: None,
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let r = reproduce(
            &exps.iter().collect::<Vec<_>>(),
            Scale::Quick,
            1,
            &Cancel::new(),
            dir.path(),
            crate::report::RunInfo::default(),
            &mut Quiet,
        )
        .unwrap();
        assert_eq!(r.sections.len(), 4);
        let most = MOST_JOBS.load(Ordering::SeqCst);
        assert!(
            most >= 1 && most as usize <= threads(),
            "{most} jobs at once on {} cores",
            threads()
        );
    }

    fn sleepy(_: Scale, seed: u64, _: &RunCtx) -> Result<Section, crate::LabError> {
        std::thread::sleep(std::time::Duration::from_millis(100));
        Ok(Section::failed("sleepy", "", "", seed))
    }

    #[test]
    fn at_paper_scale_an_experiment_marked_alone_waits_for_the_others() {
        let exp = |id, paper_scale_alone_job_bytes| Experiment {
            id,
            about: "",
            paper: "as full",
            run: sleepy,
            kind: Kind::Simulated,
            paper_scale_alone_job_bytes,
        };
        // Listed first, so the order of the list does not make it wait.
        let exps = [exp("heavy", Some(1 << 30)), exp("light", None)];
        struct Log(Vec<String>);
        impl Watcher for Log {
            fn started(&mut self, e: &Experiment, _: &Progress) {
                self.0.push(format!("start {}", e.id));
            }
            fn finished(&mut self, s: &Section) {
                self.0.push(format!("end {}", s.id));
            }
        }
        let events = |scale| {
            let dir = tempfile::tempdir().unwrap();
            let mut log = Log(Vec::new());
            let r = reproduce(
                &exps.iter().collect::<Vec<_>>(),
                scale,
                1,
                &Cancel::new(),
                dir.path(),
                crate::report::RunInfo::default(),
                &mut log,
            )
            .unwrap();
            assert_eq!(r.sections.len(), 2);
            log.0
        };
        // (A failed section is named by its run function, "sleepy".)
        assert_eq!(
            events(Scale::Paper),
            ["start light", "end sleepy", "start heavy", "end sleepy"]
        );
        // At the other scales both run side by side: both start before either ends.
        let quick = events(Scale::Quick);
        assert!(
            quick[..2].iter().all(|e| e.starts_with("start")),
            "{quick:?}"
        );
    }

    #[test]
    fn jobs_run_at_once_as_memory_allows_at_least_one_at_most_a_core_each() {
        let gb = 1_000_000_000;
        // This machine idle (23.6 GB available): two SF 30 joins; 22 GB leaves too
        // little beside them.
        assert_eq!(jobs_that_fit(23_600_000_000, 10_700_000_000, 2), 2);
        assert_eq!(jobs_that_fit(22 * gb, 10_700_000_000, 2), 1);
        assert_eq!(
            jobs_that_fit(5 * gb, 10_700_000_000, 2),
            1,
            "alone when none fits"
        );
        assert_eq!(jobs_that_fit(100 * gb, gb, 4), 4, "a core each at most");
        assert_eq!(jobs_that_fit(0, gb, 2), 1);
        assert_eq!(jobs_that_fit(100 * gb, 0, 0), 1);
    }

    #[test]
    fn a_capture_runs_while_every_slot_is_taken_and_a_step_waits_for_one() {
        let slots = std::sync::Arc::new(Slots::new(1));
        let ctx = RunCtx {
            slots: Some(slots.clone()),
            ..RunCtx::default()
        };
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            slots.with(|| {
                held_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            })
        });
        held_rx.recv().unwrap();
        // The only slot is held: a capture still runs.
        assert_eq!(ctx.capture_step(|| Ok(7)).unwrap(), 7);
        // A step waits until the slot is free.
        let stepped = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let step = s.spawn(|| {
                ctx.step(|| {
                    stepped.store(true, Ordering::SeqCst);
                    Ok(())
                })
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!stepped.load(Ordering::SeqCst), "a step ran without a slot");
            release_tx.send(()).unwrap();
            step.join().unwrap().unwrap();
        });
        holder.join().unwrap();
        assert!(stepped.load(Ordering::SeqCst));
    }

    #[test]
    fn once_cancelled_no_experiment_starts_and_jobs_stop() {
        let cancel = Cancel::new();
        let ctx = RunCtx::new(cancel.clone());
        cancel.cancel();
        assert_eq!(
            ctx.map(&[1, 2], |&x| Ok(x)).unwrap_err().to_string(),
            "interrupted"
        );
        let exps = [Experiment {
            id: "fine",
            about: "works",
            paper: "as full",
            run: fine,
            kind: Kind::Simulated,
            paper_scale_alone_job_bytes: None,
        }];
        let dir = tempfile::tempdir().unwrap();
        let r = reproduce(
            &exps.iter().collect::<Vec<_>>(),
            Scale::Quick,
            1,
            &cancel,
            dir.path(),
            crate::report::RunInfo::default(),
            &mut Quiet,
        )
        .unwrap();
        assert!(r.interrupted && r.sections.is_empty());
    }

    #[test]
    fn progress_counts_planned_and_done_jobs() {
        let ctx = RunCtx::default();
        ctx.map(&[1, 2, 3, 4], |&x| Ok(x)).unwrap();
        ctx.step(|| Ok(())).unwrap();
        assert_eq!(ctx.progress.get(), (5, 5));
        assert_eq!(
            ctx.job_wall_s.lock().unwrap().len(),
            5,
            "every job's wall time, map's and step's"
        );
    }

    #[test]
    fn derived_seeds_differ() {
        assert_ne!(derive_seed(1, 0), derive_seed(1, 1));
        assert_eq!(derive_seed(1, 5), derive_seed(1, 5));
    }
}
