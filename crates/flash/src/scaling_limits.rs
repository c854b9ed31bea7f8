//! Where a drive scaled by `--capacity` was measured not to keep the full-size drive's
//! latency: `presets/scaling_limits.toml`, written by `bench/scaling.py --limits` from the
//! runs in `bench/results/` (docs/timing.md, "Latency across --capacity"). `sim` prints
//! [`notes`] for a built-in preset run below the capacity that keeps a figure.

use serde::Deserialize;

/// A full-size seeds' spread above this is wider than the ±15% a comparison allows.
const SPREAD_RESOLVED: f64 = 0.15;

/// The measured misses, compiled in.
const LIMITS_TOML: &str = include_str!("../../../presets/scaling_limits.toml");

/// One latency figure a scaled drive did not keep within ±15% of the full-size drive's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingMiss {
    pub preset: String,
    /// As `sim --workload` takes it (`uniform`, `hotcold:0.7/0.3`).
    pub workload: String,
    pub queue_depth: u32,
    /// `read p99.9`, `write p99`, ...
    pub figure: String,
    /// The scaled capacity that missed (`16GiB`).
    pub capacity: String,
    /// Its mean over seeds divided by the full-size drive's.
    pub ratio: f64,
    /// The full-size drive's mean, in milliseconds.
    pub full_ms: f64,
    /// The full-size drive's seeds' spread, (max - min) / mean: above 0.15 one drive's
    /// seeds differ by more than the ±15% a comparison allows (absent in older files).
    #[serde(default)]
    pub full_seed_spread: Option<f64>,
    /// The seeds behind each mean where more than the usual three were run (a
    /// configuration whose full-size seeds spread wider than ±15%; docs/timing.md, "More
    /// seeds where the seeds disagree"); absent means seeds 1-3.
    #[serde(default)]
    pub seeds: Option<u32>,
    /// The smallest measured capacity from which every measured one keeps the figure, or
    /// `full` if none below full does.
    pub keeps_at: String,
    /// The runs behind it (a file under `bench/results/`).
    pub runs: String,
}

/// A preset whose scaled latency was measured.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub preset: String,
    /// The scaled capacities run (`16GiB`, `64GiB`), smallest first.
    pub capacities: Vec<String>,
    /// The workloads run, as `sim --workload` takes them, and the queue depths.
    pub workloads: Vec<String>,
    pub queue_depths: Vec<u32>,
    /// Figures times capacities compared with full size, and how many kept within ±15%.
    pub comparisons: u32,
    pub kept: u32,
    pub runs: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    #[serde(default)]
    measured: Vec<Measured>,
    #[serde(default)]
    miss: Vec<ScalingMiss>,
}

/// The compiled-in file (checked by this module's tests).
fn file() -> LimitsFile {
    toml::from_str(LIMITS_TOML).unwrap_or_default()
}

/// Every measured miss.
pub fn all() -> Vec<ScalingMiss> {
    file().miss
}

/// `16GiB` in bytes; `None` for `full` or anything else.
fn gib_bytes(capacity: &str) -> Option<u64> {
    capacity
        .strip_suffix("GiB")
        .and_then(|n| n.parse::<u64>().ok())
        .map(|n| n << 30)
}

/// A run, as far as the scaling runs' conditions go.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// As `sim --workload` prints it (`uniform`, `hotcold:0.7/0.3`).
    pub workload: &'a str,
    pub queue_depth: u32,
    /// The rest of the run is as the scaling runs were: the preset as shipped but for its
    /// capacity, 4 KiB requests, 70% reads, steady preconditioning at 90% occupancy and a
    /// rest after it, timing on.
    pub as_measured: bool,
}

/// What `sim` says of a run of the built-in `preset` at `logical_bytes` (below its full
/// size of `full_bytes`): one line per latency figure a measured scaled run of the preset
/// missed and that is not known to be kept at this capacity (it is below the smallest
/// capacity measured to keep it). If the run is one that was measured (its workload and
/// queue depth, and otherwise as the runs were), only its figures, and none if it kept
/// them all; otherwise every measured configuration's, each named with its conditions.
/// Empty for a full-size run or a preset never measured.
pub fn notes(preset: &str, full_bytes: u64, logical_bytes: u64, run: Run) -> Vec<String> {
    notes_in(file(), preset, full_bytes, logical_bytes, run)
}

/// [`notes`] from the limits file `f`.
fn notes_in(
    f: LimitsFile,
    preset: &str,
    full_bytes: u64,
    logical_bytes: u64,
    run: Run,
) -> Vec<String> {
    let Run {
        workload,
        queue_depth,
        ..
    } = run;
    if logical_bytes >= full_bytes {
        return Vec::new();
    }
    let Some(measured) = f.measured.iter().find(|m| m.preset == preset) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(smallest) = measured.capacities.first().and_then(|c| gib_bytes(c)) {
        if logical_bytes < smallest {
            out.push(format!(
                "latency across --capacity was measured for {preset} from {} up ({} of {} comparisons within ±15% of full size; {}): below it no figure is known to keep the full-size drive's",
                measured.capacities[0].replace("GiB", " GiB"),
                measured.kept,
                measured.comparisons,
                measured.runs
            ));
        }
    }
    let misses: Vec<ScalingMiss> = f.miss.into_iter().filter(|m| m.preset == preset).collect();
    let measured_here = run.as_measured
        && measured.workloads.iter().any(|w| w == workload)
        && measured.queue_depths.contains(&queue_depth);
    // (workload, queue depth, figure) -> the misses, in file order (smallest capacity first).
    let mut groups: Vec<(String, u32, String, Vec<&ScalingMiss>)> = Vec::new();
    for m in &misses {
        if measured_here && (m.workload != workload || m.queue_depth != queue_depth) {
            continue;
        }
        let kept_here = gib_bytes(&m.keeps_at).is_some_and(|k| logical_bytes >= k);
        if kept_here {
            continue;
        }
        match groups
            .iter_mut()
            .find(|(w, q, f, _)| *w == m.workload && *q == m.queue_depth && *f == m.figure)
        {
            Some(g) => g.3.push(m),
            None => groups.push((m.workload.clone(), m.queue_depth, m.figure.clone(), vec![m])),
        }
    }
    out.extend(groups.into_iter().map(|(w, q, f, ms)| {
            let measured = ms
                .iter()
                .map(|m| format!("{:.2}x at {}", m.ratio, m.capacity.replace("GiB", " GiB")))
                .collect::<Vec<_>>()
                .join(", ");
            let config = if measured_here {
                String::new()
            } else {
                format!(" unlike this one (--workload {w} --queue-depth {q}, and the conditions in brackets)")
            };
            let kept = match gib_bytes(&ms[0].keeps_at) {
                Some(_) => format!(
                    "the smallest measured capacity that keeps it is {}",
                    ms[0].keeps_at.replace("GiB", " GiB")
                ),
                None => "no measured capacity below full size keeps it".to_string(),
            };
            let seeds = ms[0].seeds.unwrap_or(3);
            // More seeds than three are run where the seeds disagreed (docs/timing.md,
            // "More seeds where the seeds disagree"): the miss is then judged on them all.
            let noisy = match ms[0].full_seed_spread {
                Some(s) if s > SPREAD_RESOLVED && seeds > 3 => format!(
                    "; the full-size drive's own seeds spread {:.0}% on this figure, so it was judged on {seeds} seeds",
                    s * 100.0
                ),
                Some(s) if s > SPREAD_RESOLVED => format!(
                    "; the full-size drive's own seeds spread {:.0}% on this figure, so the miss may be the seeds'",
                    s * 100.0
                ),
                _ => String::new(),
            };
            format!(
                "scaled runs{config} did not keep the full-size drive's {f} ({:.3} ms): {measured}; {kept}{noisy} ({}, means over {seeds} seeds, the preset as shipped, 4 KiB requests, 70% reads, steady at 90% full, rested; presets/scaling_limits.toml)",
                ms[0].full_ms, ms[0].runs
            )
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run as the scaling runs were, under `workload` at `queue_depth`.
    fn run(workload: &str, queue_depth: u32) -> Run<'_> {
        Run {
            workload,
            queue_depth,
            as_measured: true,
        }
    }

    #[test]
    fn the_compiled_in_limits_parse_and_name_built_in_presets() {
        let parsed: LimitsFile = toml::from_str(LIMITS_TOML).expect("scaling_limits.toml parses");
        assert!(!parsed.miss.is_empty());
        for m in &parsed.measured {
            assert!(!m.capacities.is_empty() && m.kept <= m.comparisons, "{m:?}");
            assert!(m.capacities.iter().all(|c| gib_bytes(c).is_some()), "{m:?}");
        }
        for m in &parsed.miss {
            assert!(
                parsed.measured.iter().any(|p| p.preset == m.preset),
                "a miss of a preset not measured: {m:?}"
            );
        }
        for m in &parsed.miss {
            assert!(
                crate::preset::BUILTIN.iter().any(|(n, _)| *n == m.preset),
                "{m:?}"
            );
            assert!(gib_bytes(&m.capacity).is_some(), "{m:?}");
            assert!(
                m.keeps_at == "full" || gib_bytes(&m.keeps_at).is_some(),
                "{m:?}"
            );
            // Outside ±15%, as far as the file's two decimals tell.
            assert!(
                (m.ratio - 1.0).abs() > 0.15 - 0.005,
                "a miss is outside ±15%: {m:?}"
            );
            assert!(m.runs.starts_with("bench/results/"), "{m:?}");
        }
    }

    #[test]
    fn a_miss_whose_full_size_seeds_spread_wider_than_the_band_says_so() {
        let text = |spread: &str| {
            format!(
                "[[measured]]\npreset = \"840pro\"\ncapacities = [\"16GiB\"]\n\
                 workloads = [\"uniform\"]\nqueue_depths = [1]\ncomparisons = 2\n\
                 kept = 1\nruns = \"bench/results/x.jsonl\"\n\n[[miss]]\npreset = \"840pro\"\n\
                 workload = \"uniform\"\nqueue_depth = 1\nfigure = \"read p99.9\"\n\
                 capacity = \"16GiB\"\nratio = 1.19\nfull_ms = 0.366\n{spread}\
                 keeps_at = \"full\"\nruns = \"bench/results/x.jsonl\"\n"
            )
        };
        let say = |spread: &str| {
            let f: LimitsFile = toml::from_str(&text(spread)).expect("parses");
            notes_in(f, "840pro", 256 << 30, 16 << 30, run("uniform", 1))
        };
        let wide = say("full_seed_spread = 1.07\n");
        assert_eq!(wide.len(), 1, "{wide:?}");
        assert!(wide[0].contains("own seeds spread 107%"), "{wide:?}");
        // Within the band, or a file written before the field: the miss alone.
        for spread in ["full_seed_spread = 0.05\n", ""] {
            let narrow = say(spread);
            assert_eq!(narrow.len(), 1, "{narrow:?}");
            assert!(narrow[0].contains("1.19x at 16 GiB"), "{narrow:?}");
            // A figure no measured capacity below full size keeps.
            assert!(
                narrow[0].contains("no measured capacity below full size keeps it"),
                "{narrow:?}"
            );
            assert!(!narrow[0].contains("own seeds"), "{narrow:?}");
            assert!(narrow[0].contains("means over 3 seeds"), "{narrow:?}");
        }
        // A configuration judged on more seeds says how many.
        let six = say("full_seed_spread = 0.20\nseeds = 6\n");
        assert!(six[0].contains("means over 6 seeds"), "{six:?}");
        assert!(six[0].contains("so it was judged on 6 seeds"), "{six:?}");
        assert!(!six[0].contains("may be the seeds'"), "{six:?}");
    }

    #[test]
    fn a_scaled_run_is_told_which_figures_its_capacity_does_not_keep() {
        let full_of = |p: &str| crate::preset::Preset::load(p).unwrap().logical_bytes();
        let full = full_of("mx500");
        let hotcold = "hotcold:0.7/0.3";
        // The MX500's QD32 hot/cold write p99.9 was missed at 16 GiB and kept from 58 GiB
        // (a quarter of its 250 GB).
        let at16 = notes("mx500", full, 16 << 30, run(hotcold, 32));
        assert!(
            at16.iter()
                .any(|n| n.contains("write p99.9 ") && n.contains("keeps it is 58 GiB")),
            "{at16:?}"
        );
        assert!(
            !at16.iter().any(|n| n.contains("unlike this one")),
            "{at16:?}"
        );
        // A configuration whose runs kept every figure at a measured capacity: nothing.
        assert!(notes("mx500", full, 58 << 30, run(hotcold, 32)).is_empty());
        // A measured configuration that kept every figure at 16 GiB: nothing either, not
        // another configuration's misses.
        let uniform = notes("mx500", full, 16 << 30, run("uniform", 32));
        assert!(uniform.is_empty(), "{uniform:?}");
        // The 980's QD32 hot/cold write p99.9, judged on six seeds, is kept from 128 GiB.
        let full_980 = full_of("980");
        let at64 = notes("980", full_980, 64 << 30, run(hotcold, 32));
        assert!(
            at64.iter().any(|n| n.contains("write p99.9 ")
                && n.contains("keeps it is 128 GiB")
                && n.contains("over 6 seeds")),
            "{at64:?}"
        );
        assert!(notes("980", full_980, 128 << 30, run(hotcold, 32)).is_empty());
        // Below the smallest capacity measured, that is said first.
        let at4 = notes("mx500", full, 4 << 30, run(hotcold, 32));
        assert!(at4[0].contains("from 16 GiB up"), "{at4:?}");
        // Full size, or a preset never measured: nothing.
        assert!(notes("mx500", full, full, run("uniform", 32)).is_empty());
        assert!(notes("x25e", 64 << 30, 4 << 30, run("uniform", 32)).is_empty());
        // A configuration never measured, or a measured one run otherwise than the runs
        // were (other reads, preconditioning or drive settings): every measured
        // configuration's misses, each named as unlike this run.
        let unlike = Run {
            as_measured: false,
            ..run(hotcold, 32)
        };
        for other in [run("zipf:0.9", 4), unlike] {
            let said = notes("mx500", full, 16 << 30, other);
            assert_eq!(said.len(), 3, "{said:?}");
            assert!(
                said.iter()
                    .all(|n| n
                        .contains("unlike this one (--workload hotcold:0.7/0.3 --queue-depth 32,")),
                "{said:?}"
            );
        }
    }
}
