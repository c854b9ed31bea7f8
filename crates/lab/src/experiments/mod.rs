//! The experiments of `flashlab reproduce`, one module each. Every experiment takes a
//! scale and a seed and returns a report [`Section`] whose numbers and verdicts it
//! computed itself.

pub mod astree;
pub mod gracejoin;
pub mod nosql;
pub mod tempfiles;
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
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|e| crate::LabError::io(&std::env::temp_dir(), e))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Minutes for the whole report on a 2-core machine.
    Quick,
    /// Larger drives and longer runs, closer to the papers.
    Full,
    /// Paper 000 at its own size (`tempfiles` only: a 40 GB query on 250 GB drives, the
    /// paper's work_mem and repetitions; about a day on a 2-core machine).
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
    /// Runs it at a scale with a seed; stops early (with an error) once the context's
    /// token is cancelled, and counts its jobs in the context's progress.
    pub run: fn(Scale, u64, &RunCtx) -> Result<Section, crate::LabError>,
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
    /// Wall seconds of every job `map` ran, in job order (map after map): where an
    /// experiment's time goes, in its results (`job_wall_s`).
    pub job_wall_s: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
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
            let started = std::time::Instant::now();
            let r = f(j);
            self.progress.done();
            (r, started.elapsed().as_secs_f64())
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
        if self.cancel.is_cancelled() {
            return Err("interrupted".into());
        }
        self.progress.plan(1);
        let r = f();
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
        id: "waf",
        about: "WAF versus over-provisioning for greedy, cost-benefit and FIFO GC, against Desnoyers's analytic FIFO model; hot/cold skew",
        run: waf::run,
    },
    Experiment {
        id: "tempfiles",
        about: "paper 000: fallocate and TRIM for hash-join temp files, repeated on MX500, 840 Pro and Cosmos+",
        run: tempfiles::run,
    },
    Experiment {
        id: "gracejoin",
        about: "paper 001: grace hash join on SSD vs HDD: read buffer, write buffer, concurrent users",
        run: gracejoin::run,
    },
    Experiment {
        id: "astree",
        about: "paper 004: AS B-tree vs in-place B+tree vs BFTL on a 2011 drive with a FAST FTL",
        run: astree::run,
    },
    Experiment {
        id: "nosql",
        about: "paper 003: an append-only key-value store's write batches on real ext4, XFS and btrfs (captured on loop devices, replayed on the 840 Pro; needs root)",
        run: nosql::run,
    },
    Experiment {
        id: "tempfiles-real",
        about: "paper 000 on a real kernel: the hash join's spill files on ext4 with and without discard, fallocate on and off, captured and replayed on the MX500 (needs root)",
        run: tempfiles_real::run,
    },
    Experiment {
        id: "trim",
        about: "paper 002: deleting a fragmented file with TRIM, vTrim, fTrim and fTrim with preemption",
        run: trim::run,
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

/// Runs `chosen` in order and writes the report of what ran to `out`. An experiment that
/// fails (an error or a panic) gets a section saying so and the others still run; once
/// `cancel` is cancelled no further experiment starts, and the report holds what finished.
pub fn reproduce(
    chosen: &[&Experiment],
    scale: Scale,
    seed: u64,
    cancel: &Cancel,
    out: &std::path::Path,
    mut info: crate::report::RunInfo,
    watcher: &mut dyn Watcher,
) -> Result<Reproduced, crate::LabError> {
    let started = std::time::Instant::now();
    let mut sections = Vec::new();
    let mut interrupted = false;
    for e in chosen {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let ctx = RunCtx::new(cancel.clone());
        watcher.started(e, &ctx.progress);
        let s = run_experiment(e, scale, seed, &ctx);
        watcher.finished(&s);
        sections.push(s);
    }
    info.total_runtime_s = started.elapsed().as_secs_f64();
    let index = crate::report::write_report(out, &info, &sections)?;
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
                run: broken,
            },
            Experiment {
                id: "panicking",
                about: "panics",
                run: panicking,
            },
            Experiment {
                id: "fine",
                about: "works",
                run: fine,
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
        assert_eq!(progress, vec!["broken", "panicking", "fine"]);
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
            run: fine,
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
    }

    #[test]
    fn derived_seeds_differ() {
        assert_ne!(derive_seed(1, 0), derive_seed(1, 1));
        assert_eq!(derive_seed(1, 5), derive_seed(1, 5));
    }
}
