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
use trace::Cancel;

/// A fresh private work directory (mkdtemp: an unpredictable name, mode 0700, never an
/// existing path) under the system's temp directory, removed when dropped.
pub(crate) fn work_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            format!(
                "cannot make a work directory in {}: {e}",
                std::env::temp_dir().display()
            )
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Minutes for the whole report on a 2-core machine.
    Quick,
    /// Larger drives and longer runs, closer to the papers.
    Full,
}

impl FromStr for Scale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "quick" => Ok(Scale::Quick),
            "full" => Ok(Scale::Full),
            _ => Err(format!("unknown scale {s:?}: expected quick or full")),
        }
    }
}

impl std::fmt::Display for Scale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Scale::Quick => "quick",
            Scale::Full => "full",
        })
    }
}

/// An experiment: its id (for `--only`), a one-line description and its runner.
pub struct Experiment {
    pub id: &'static str,
    pub about: &'static str,
    /// Runs it at a scale with a seed; stops early (with an error) once the token is
    /// cancelled.
    pub run: fn(Scale, u64, &Cancel) -> Result<Section, String>,
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

/// Replays `trace` closed loop (one stream per issuing task, one request in flight each,
/// with its think times) on a fresh `preset` drive of `capacity_bytes`; returns the
/// drive's statistics after deferred work has settled.
pub(crate) fn replay_captured(
    preset: &str,
    capacity_bytes: u64,
    trace: &trace::Trace,
) -> Result<flash::DeviceStats, String> {
    use flash::Device;
    let mut dev = flash::Preset::load(preset)
        .map_err(|e| e.to_string())?
        .with_capacity(capacity_bytes)
        .build()
        .map_err(|e| e.to_string())?;
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

    #[test]
    fn derived_seeds_differ() {
        assert_ne!(derive_seed(1, 0), derive_seed(1, 1));
        assert_eq!(derive_seed(1, 5), derive_seed(1, 5));
    }
}
