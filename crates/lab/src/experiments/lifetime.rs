//! Experiment `lifetime`: what the papers' engines cost a drive's life. Paper 000's four
//! combinations (fallocate off/on × TRIM off/on, the hash join's batch files exactly as
//! `tempfiles` runs them) on the MX500, and paper 004's three stores (AS B-tree, in-place
//! B-tree, BFTL) on the 2011 drive, each run on a used drive (preconditioned to steady
//! state) to the same host bytes as the others of its paper, then the drive's wear report
//! ([`flash::WearReport`]): NAND bytes, WAF, erase counts, life used against the rated P/E
//! cycles, projected TBW and days. "Exactly as `tempfiles`": its judged runs' join and host
//! path, at half its quick SF (a minute for the whole experiment); the drive is
//! preconditioned here, new there.
//!
//! A null model — life used ∝ host bytes at WAF 1 — says every combination of a paper
//! wears the drive alike (they write the same host bytes). What it fails to predict is
//! shown as a *prediction* (a ratio beside the null model's). No source gives a life used
//! for these workloads, so the only verdicts are the design's own checks (equal host
//! bytes); the MX500's datasheet TBW stands beside the projections in the table, not as a
//! verdict: a rating holds for the vendor's workload (JESD219), not for these.

use super::plan::Plan;
use super::{derive_seed, Scale};
use crate::backend::Backend;
use crate::btreerun::{self, BtreeSpec, StoreKind};
use crate::joinrun;
use crate::precondition::Precondition;
use crate::report::{BarPlot, Plot, Provenance, Role, Section, Table, Verdict};
use astree::asstore::Cleaning;
use flash::{Preset, WearReport};
use serde_json::json;

/// A paper's group of runs: one drive, the same host bytes for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Group {
    /// Paper 000: the hash join's batch files on the MX500.
    Join,
    /// Paper 004: B+trees on the 2011 drive.
    Btree,
}

impl Group {
    fn drive(self) -> &'static str {
        match self {
            Group::Join => "Crucial MX500 (mx500)",
            Group::Btree => "2011 SATA MLC (ssd2011)",
        }
    }
}

/// The experiment's sizes.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// Paper 000's join: TPC-H scale factor; the drive is scaled with it as `tempfiles`
    /// scales it ([`super::tempfiles::drive_bytes`]).
    pub sf: f64,
    /// Host bytes every join combination writes at least: this many drive capacities.
    pub join_drive_writes: f64,
    /// The most repetitions of a join combination (a bound; the byte target ends them).
    pub join_max_repeat: u32,
    /// Paper 004's trees: the 2011 drive's capacity, keys preloaded, and the host bytes
    /// (since the drive was new, the preload included) every store writes at least.
    pub btree_capacity_bytes: u64,
    pub btree_preload: u64,
    pub btree_target_bytes: u64,
}

impl Setup {
    pub fn for_scale(scale: Scale) -> Setup {
        match scale {
            // SF 0.1 (half of `tempfiles`' quick SF 0.2) keeps the whole experiment under a
            // minute on two cores; three drive writes cycle the temp data through the
            // drive as `tempfiles`' repetitions do.
            Scale::Quick => Setup {
                sf: 0.1,
                join_drive_writes: 3.0,
                join_max_repeat: 200,
                btree_capacity_bytes: 8 << 30,
                btree_preload: 10_000,
                btree_target_bytes: 256 << 20,
            },
            Scale::Full | Scale::Paper => Setup {
                sf: 0.2,
                join_drive_writes: 3.0,
                join_max_repeat: 200,
                btree_capacity_bytes: 8 << 30,
                btree_preload: 20_000,
                btree_target_bytes: 1 << 30,
            },
        }
    }

    fn join_capacity_bytes(&self) -> u64 {
        super::tempfiles::drive_bytes(self.sf)
    }

    fn join_target_bytes(&self) -> u64 {
        (self.join_capacity_bytes() as f64 * self.join_drive_writes) as u64
    }
}

/// One combination's run: what it did and the drive's wear at its end.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub group: Group,
    pub combo: &'static str,
    /// Join repetitions or timed B-tree inserts.
    pub rounds: u64,
    /// Inserts the run made (B-trees: the preload and the timed ones; 0 for the joins).
    pub inserts: u64,
    /// The drive's wear at the end of the run: host and NAND bytes of the run, erase
    /// counts since new, and the run's own erases (`phase_*`).
    pub wear: WearReport,
}

/// Paper 004's AS B-tree takes 100,000 inserts in 61 s (Table 3, F=256, buffer 32): the
/// B-tree rows' fixed rate for projected days.
pub(crate) const PAPER_004_INSERTS_PER_S: f64 = 100_000.0 / 61.0;

impl Run {
    /// The simulated drive's raw bytes.
    fn raw_bytes(&self) -> f64 {
        self.wear.rated_raw_bytes as f64 / self.wear.capacity_scale
    }

    /// Life used by the run, counted in bytes as WAF counts them: NAND bytes programmed
    /// / (rated P/E × the simulated drive's raw bytes). Projected TBW is the same count's
    /// other face (host bytes / life used, for the rated drive), so the two agree; an
    /// SLC-mode program wears the bytes it writes.
    pub fn life_used(&self) -> f64 {
        self.wear.flash_write_bytes as f64 / (self.wear.rated_pe_cycles as f64 * self.raw_bytes())
    }

    /// The null model's life used: host bytes at WAF 1 spread over the simulated drive's
    /// raw flash, against its rated cycles.
    fn null_life_used(&self) -> f64 {
        self.wear.host_write_bytes as f64 / (self.wear.rated_pe_cycles as f64 * self.raw_bytes())
    }

    /// The host bytes the rated drive takes a day at the group's fixed rate, and that
    /// rate in words: the MX500's rated writes (datasheet TBW over the warranty), paper
    /// 004's insert rate at the run's host bytes per insert.
    fn fixed_rate(&self) -> Option<(f64, String)> {
        let w = &self.wear;
        match self.group {
            Group::Join => {
                let days = w.warranty_years? * 365.25;
                let per_day = w.rated_tbw_bytes? as f64 / days;
                Some((
                    per_day,
                    format!(
                        "its rated {:.1} GB a day (datasheet TBW over the warranty)",
                        per_day / 1e9
                    ),
                ))
            }
            Group::Btree => {
                let per_insert = w.host_write_bytes as f64 / self.inserts.max(1) as f64;
                Some((
                    per_insert * PAPER_004_INSERTS_PER_S * 86_400.0,
                    format!(
                        "paper 004's {PAPER_004_INSERTS_PER_S:.0} inserts a second (AS, F=256) at the run's {per_insert:.0} host bytes an insert"
                    ),
                ))
            }
        }
    }

    /// Days the rated drive lasts at the group's fixed rate ([`Run::fixed_rate`]).
    fn projected_days(&self) -> Option<f64> {
        Some(self.wear.projected_tbw_bytes? / self.fixed_rate()?.0)
    }
}

/// B-tree stores: (name, store, AS write buffer in nodes). The AS store cleans by
/// cost-benefit over 256 KiB segments, not paper 004's sliding window (its name says so).
const STORES: [(&str, StoreKind, usize); 3] = [
    ("AS B-tree (cost-benefit cleaning)", StoreKind::As, 32),
    ("in-place B-tree", StoreKind::InPlace, 1),
    ("BFTL", StoreKind::Bftl, 1),
];

/// Inserts between commits (as `astree`'s file-size runs: the AS store cleans at commits).
const COMMIT_EVERY: u64 = 1_000;
/// The B-trees' fanout (paper 004's largest, `astree`'s cache and file-size runs).
const FANOUT: usize = 256;
/// Searches after the inserts (reads wear nothing; a few keep the run's shape).
const SEARCHES: u64 = 1_000;
/// The AS store's cleaning: cost-benefit over 256 KiB segments (`astree`'s run "AS,
/// cost-benefit ≤1.5×").
const SEGMENT_BYTES: u64 = 256 << 10;

/// Host bytes of a paper's runs are "the same" within this (relative to the smallest):
/// a join stops after the repetition that reaches the target, so it may pass it by most
/// of a repetition (4–7% of the target at quick scale).
pub(crate) const EQUAL_BYTES_TOLERANCE: f64 = 0.10;
/// A measured life-used ratio differs from the null model's when further than this
/// (relative) from it.
pub(crate) const NULL_TOLERANCE: f64 = 0.10;

enum Job {
    Join {
        combo: &'static str,
        spec: Box<joinrun::JoinRunSpec>,
    },
    Btree {
        combo: &'static str,
        spec: Box<BtreeSpec>,
    },
}

/// Runs the seven combinations on all cores.
pub(crate) fn measure(
    s: &Setup,
    seed: u64,
    ctx: &super::RunCtx,
) -> Result<Vec<Run>, crate::LabError> {
    // Each run by its group and combination; the B-trees first: BFTL's run is the longest.
    let mut plan = Plan::new();
    let preset = Preset::load("ssd2011")?.with_capacity(s.btree_capacity_bytes);
    for (name, store, buffer) in STORES {
        let spec = BtreeSpec {
            fanout: FANOUT,
            write_buffer_nodes: buffer,
            preload: s.btree_preload,
            ops: SEARCHES,
            seed: derive_seed(seed, 0),
            segment_bytes: SEGMENT_BYTES,
            cleaning: Cleaning::CostBenefit,
            commit_every: COMMIT_EVERY,
            // BFTL as paper 004 sets it (astree's runs too): a reservation buffer of F IUs.
            bftl_reservation_ius: (store == StoreKind::Bftl).then_some(FANOUT),
            host_write_target_bytes: Some(s.btree_target_bytes),
            precondition: Precondition::Steady {
                max_x: crate::precondition::DEFAULT_STEADY_MAX_X,
            },
            ..BtreeSpec::new(
                store,
                Backend::Sim {
                    preset: Box::new(preset.clone()),
                },
            )
        };
        let job = Job::Btree {
            combo: name,
            spec: Box::new(spec),
        };
        plan.add((Group::Btree, name), job);
    }
    for &(f, t) in &super::tempfiles::COMBOS {
        let mut spec = super::tempfiles::host_path_spec(
            "mx500",
            s.sf,
            s.join_capacity_bytes(),
            s.join_max_repeat,
            f,
            t,
        )?;
        spec.storage.host_write_target_bytes = Some(s.join_target_bytes());
        spec.storage.precondition = Precondition::Steady {
            max_x: crate::precondition::DEFAULT_STEADY_MAX_X,
        };
        spec.storage.precondition_seed = derive_seed(seed, 1);
        let combo = super::tempfiles::combo_name(f, t);
        let job = Job::Join {
            combo,
            spec: Box::new(spec),
        };
        plan.add((Group::Join, combo), job);
    }
    let done = ctx.run_plan(plan, |j| -> Result<Run, crate::LabError> {
        let no_wear = |what: &str| format!("lifetime: {what}: the drive gave no wear report");
        Ok(match j {
            Job::Join { combo, spec } => {
                let r = joinrun::run(spec, &mut |_| {})?;
                Run {
                    group: Group::Join,
                    combo,
                    rounds: r.repetitions.len() as u64,
                    inserts: 0,
                    wear: r.wear.ok_or_else(|| no_wear(combo))?,
                }
            }
            Job::Btree { combo, spec } => {
                let preload = spec.preload;
                let r = btreerun::run(spec)?;
                let rounds = r.timed_inserts.unwrap_or(0);
                Run {
                    group: Group::Btree,
                    combo,
                    rounds,
                    inserts: preload + rounds,
                    wear: r.wear.ok_or_else(|| no_wear(combo))?,
                }
            }
        })
    })?;
    Ok(done.iter().map(|(_, r)| r.clone()).collect())
}

/// A prediction: one run's life used against another's, beside the null model's ratio.
#[derive(Debug, Clone)]
pub(crate) struct Prediction {
    pub group: Group,
    pub what: String,
    pub ratio: f64,
    pub null_ratio: f64,
    /// The null model fails it: the measured ratio is further than [`NULL_TOLERANCE`] from
    /// the null model's.
    pub beyond_null: bool,
}

/// The pairs compared: (group, numerator, denominator).
const PAIRS: [(Group, &str, &str); 6] = [
    (Group::Join, "neither", "fallocate + TRIM"),
    (Group::Join, "TRIM only", "fallocate + TRIM"),
    (Group::Join, "fallocate only", "fallocate + TRIM"),
    (Group::Join, "neither", "TRIM only"),
    (
        Group::Btree,
        "in-place B-tree",
        "AS B-tree (cost-benefit cleaning)",
    ),
    (Group::Btree, "BFTL", "AS B-tree (cost-benefit cleaning)"),
];

fn find<'a>(runs: &'a [Run], group: Group, combo: &str) -> Option<&'a Run> {
    runs.iter().find(|r| r.group == group && r.combo == combo)
}

/// The predictions: life used of each pair, measured and by the null model.
pub(crate) fn predictions(runs: &[Run]) -> Vec<Prediction> {
    PAIRS
        .iter()
        .filter_map(|&(group, a, b)| {
            let (ra, rb) = (find(runs, group, a)?, find(runs, group, b)?);
            let ratio = ra.life_used() / rb.life_used().max(f64::MIN_POSITIVE);
            let null_ratio = ra.null_life_used() / rb.null_life_used().max(f64::MIN_POSITIVE);
            Some(Prediction {
                group,
                what: format!("life used, {a} / {b}"),
                ratio,
                null_ratio,
                beyond_null: (ratio / null_ratio - 1.0).abs() > NULL_TOLERANCE,
            })
        })
        .collect()
}

/// Host bytes of `group`'s runs: largest / smallest.
pub(crate) fn host_bytes_spread(runs: &[Run], group: Group) -> f64 {
    let b: Vec<u64> = runs
        .iter()
        .filter(|r| r.group == group)
        .map(|r| r.wear.host_write_bytes)
        .collect();
    let (lo, hi) = (b.iter().min(), b.iter().max());
    match (lo, hi) {
        (Some(&lo), Some(&hi)) if lo > 0 => hi as f64 / lo as f64,
        _ => f64::INFINITY,
    }
}

/// The verdicts: the experiment's own check that each paper's runs wrote the same host
/// bytes. No source gives a life used for these workloads to judge ours against.
pub(crate) fn verdicts(runs: &[Run]) -> Vec<Verdict> {
    let mut v = Vec::new();
    for (group, id) in [
        (Group::Join, "lifetime.equal-host-bytes-join"),
        (Group::Btree, "lifetime.equal-host-bytes-btree"),
    ] {
        let spread = host_bytes_spread(runs, group);
        v.push(
            Verdict::ordering(
                id,
                &format!(
                    "{}: every combination ran to the same host bytes (largest / smallest within {:.0}%)",
                    group.drive(),
                    100.0 * EQUAL_BYTES_TOLERANCE
                ),
                "the experiment's design (a model check)",
                spread,
                spread <= 1.0 + EQUAL_BYTES_TOLERANCE,
                format!("largest / smallest {spread:.4}"),
            )
            .with_role(Role::Check),
        );
    }
    // No verdict on the MX500's datasheet TBW: a rating holds for the vendor's workload
    // (JESD219), not for these, so a projection below it says what this workload costs,
    // not that the model is wrong; the table shows both. (The model's check against the
    // rating, JESD219 on the MX500, is `flashlab sim --preset mx500 --workload jesd219
    // --wear`.)
    v
}

fn pct(x: f64) -> String {
    format!("{:.4}", 100.0 * x)
}

/// The per-combination table.
fn wear_table(runs: &[Run]) -> Table {
    let rates: Vec<String> = [Group::Join, Group::Btree]
        .iter()
        .filter_map(|&g| {
            let r = runs.iter().find(|r| r.group == g)?;
            let rate = match g {
                Group::Join => r.fixed_rate()?.1,
                Group::Btree => format!(
                    "paper 004's {PAPER_004_INSERTS_PER_S:.0} inserts a second (AS, F=256) at each run's host bytes an insert"
                ),
            };
            Some(format!("{}: {rate}", g.drive()))
        })
        .collect();
    let mut t = Table {
        file_stem: "lifetime".into(),
        caption: format!(
            "Each combination on a used drive (preconditioned to steady state) to the same host bytes as the others of its paper. \
             Life used by the run is counted in bytes as WAF is (NAND bytes programmed / (rated P/E × raw bytes)), so it and the \
             projected TBW are one answer: life used × projected TBW = the run's host bytes on the rated drive. Erase counts are \
             since the drive was new; the worst block is the one the run itself erased most. Projected days at a fixed rate, \
             not the run's own speed: {}",
            rates.join("; ")
        ),
        headers: [
            "drive",
            "combination",
            "rounds",
            "host bytes",
            "NAND bytes",
            "WAF",
            "erases min",
            "erases max",
            "erases mean",
            "max / mean",
            "life used by the run %",
            "worst block in the run %",
            "null model life %",
            "projected TBW (TB)",
            "projected days at the fixed rate",
            "datasheet TBW (TB)",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for r in runs {
        let w = &r.wear;
        t.rows.push(vec![
            r.group.drive().into(),
            r.combo.into(),
            format!(
                "{} {}",
                r.rounds,
                match r.group {
                    Group::Join => "repetitions",
                    Group::Btree => "inserts",
                }
            ),
            w.host_write_bytes.to_string(),
            w.flash_write_bytes.to_string(),
            w.waf_bytes.map_or("-".into(), |x| format!("{x:.3}")),
            w.erase_count_min.to_string(),
            w.erase_count_max.to_string(),
            format!("{:.3}", w.erase_count_mean),
            if w.erase_count_mean > 0.0 {
                format!("{:.2}", w.erase_count_max as f64 / w.erase_count_mean)
            } else {
                "-".into()
            },
            pct(r.life_used()),
            pct(w.phase_life_used_worst_block),
            pct(r.null_life_used()),
            w.projected_tbw_bytes
                .map_or("-".into(), |b| format!("{:.0}", b / 1e12)),
            r.projected_days().map_or("-".into(), |d| format!("{d:.0}")),
            w.rated_tbw_bytes
                .map_or("none given".into(), |b| format!("{:.0}", b as f64 / 1e12)),
        ]);
    }
    t
}

fn prediction_table(p: &[Prediction]) -> Table {
    Table {
        file_stem: "predictions".into(),
        caption: format!(
            "Predictions (no source gives these numbers): life used of one combination over another's, beside the null model's (life used ∝ host bytes at WAF 1); the null model fails a ratio further than {:.0}% from its own",
            100.0 * NULL_TOLERANCE
        ),
        headers: ["drive", "ratio", "measured", "null model", "the null model fails it"]
            .map(String::from)
            .to_vec(),
        rows: p
            .iter()
            .map(|p| {
                vec![
                    p.group.drive().into(),
                    p.what.clone(),
                    format!("{:.2}", p.ratio),
                    format!("{:.2}", p.null_ratio),
                    if p.beyond_null { "yes" } else { "no" }.into(),
                ]
            })
            .collect(),
    }
}

fn life_plot(runs: &[Run], group: Group, file_stem: &str) -> Plot {
    let g: Vec<&Run> = runs.iter().filter(|r| r.group == group).collect();
    BarPlot {
        file_stem: file_stem.into(),
        title: format!(
            "Life used at equal host bytes, % of rated P/E cycles: {}",
            group.drive()
        ),
        y_label: "life used %".into(),
        categories: g.iter().map(|r| r.combo.to_string()).collect(),
        series: vec![
            (
                "flashlab".into(),
                g.iter().map(|r| Some(100.0 * r.life_used())).collect(),
            ),
            (
                "null model (WAF 1)".into(),
                g.iter().map(|r| Some(100.0 * r.null_life_used())).collect(),
            ),
        ],
    }
    .into()
}

/// The section from the runs (a pure function of them).
pub(crate) fn section(s: &Setup, runs: &[Run], seed: u64, runtime_s: f64) -> Section {
    let preds = predictions(runs);
    let verdicts = verdicts(runs);
    let provenance = vec![
        Provenance {
            number: "rated P/E cycles, datasheet TBW, warranty".into(),
            role: "from each preset's [ssd.endurance] and its cited source (presets/mx500.toml: TLC 1,500 P/E assumed, 100 TBW and 5 years from Crucial's datasheet; presets/ssd2011.toml: MLC 3,000 P/E, 3 years, no TBW given)".into(),
        },
        Provenance {
            number: "the join's runs".into(),
            role: format!(
                "as experiment tempfiles runs its judged combinations (PostgreSQL 12's hash join at work_mem 64 kB through the paper's host scaled with the query, ext4's journal discards for TRIM), at SF {} on a {} MiB MX500 scaled with the query; each repeated until it has written {:.0}× the drive's capacity ({} bytes; whole repetitions, so the last one may pass it)",
                s.sf,
                s.join_capacity_bytes() >> 20,
                s.join_drive_writes,
                s.join_target_bytes()
            ),
        },
        Provenance {
            number: "the B-trees' runs".into(),
            role: format!(
                "astree's setup (8 KiB nodes, F={FANOUT}, random 8-byte keys; the AS store's 32-node write buffer, cost-benefit cleaning of 256 KiB segments within 1.5× the live bytes; a commit every {COMMIT_EVERY} inserts) on a {} GiB ssd2011: {} keys preloaded, then inserts until the drive has taken {} host bytes since new (checked after each insert), then {SEARCHES} searches",
                s.btree_capacity_bytes >> 30,
                s.btree_preload,
                s.btree_target_bytes
            ),
        },
        Provenance {
            number: "the drives".into(),
            role: "each run's drive is used, not new: preconditioned before simfs is made on it as SNIA's PTS does it (`--precondition steady`: its whole logical space written sequentially, then random 4 KiB writes until WAF is steady, at most 5× the drive; counters cleared), so the run meets garbage collection in steady state from its first write, as a drive in service does. The worst block is the run's own (its erases since the run started); the erase counts shown are since new".into(),
        },
        Provenance {
            number: "equal host bytes".into(),
            role: "each paper's combinations run to the same host-byte target (the workload repeated until it is reached), not scaled afterwards; the two papers' targets differ (their drives, workloads and run times differ), so life used is compared within a paper, never across".into(),
        },
        Provenance {
            number: "life used, projected TBW and days".into(),
            role: format!(
                "life used by the run = NAND bytes programmed / (rated P/E × raw bytes): wear counted in bytes as WAF counts them, so an SLC-mode program of the MX500's cache wears the bytes it writes (no source gives the MX500's SLC-mode endurance; industrial drives rate pSLC cycles several times TLC ones, so this may overstate the cache's wear); {}; days at a fixed rate (the MX500's rated TBW over its warranty; for the 2011 drive, which gives no TBW, paper 004's {PAPER_004_INSERTS_PER_S:.0} inserts a second at each run's host bytes per insert), not each run's own speed",
                flash::wear::TBW_FORMULA
            ),
        },
        Provenance {
            number: "the null model".into(),
            role: "life used = host bytes / (rated P/E × the simulated drive's raw bytes): WAF 1 and even wear, so combinations at equal host bytes wear alike; a ratio it fails to reproduce is a prediction of the model (shown, not judged: no source gives it)".into(),
        },
    ];
    let results = json!({
        "sf": s.sf,
        "join_capacity_bytes": s.join_capacity_bytes(),
        "join_target_bytes": s.join_target_bytes(),
        "btree_capacity_bytes": s.btree_capacity_bytes,
        "btree_preload": s.btree_preload,
        "btree_target_bytes": s.btree_target_bytes,
        "runs": runs.iter().map(|r| json!({
            "drive": r.group.drive(),
            "combination": r.combo,
            "rounds": r.rounds,
            "life_used": r.life_used(),
            "life_used_worst_block_in_run": r.wear.phase_life_used_worst_block,
            "null_life_used": r.null_life_used(),
            "projected_days_at_fixed_rate": r.projected_days(),
            "fixed_rate_bytes_per_day": r.fixed_rate().map(|f| f.0),
            "wear": r.wear,
        })).collect::<Vec<_>>(),
        "predictions": preds.iter().map(|p| json!({
            "drive": p.group.drive(),
            "what": p.what,
            "measured": p.ratio,
            "null_model": p.null_ratio,
            "beyond_null": p.beyond_null,
        })).collect::<Vec<_>>(),
    });
    Section {
        id: "lifetime".into(),
        title: "The engines on an aging drive: life used at equal host bytes".into(),
        question: "How much of a drive's rated life do the papers' engines use for the same host bytes? \
            Paper 000's hash join (fallocate off/on × TRIM off/on) on the MX500 and paper 004's AS B-tree, \
            in-place B-tree and BFTL on the 2011 drive, each on a used drive (preconditioned to steady state) run to the same host bytes as the \
            others of its paper; the NAND bytes it programs give life used against the rated P/E cycles and, as one answer, a \
            projected TBW beside the datasheet's. A null model (WAF 1) says equal host bytes wear alike: the \
            ratios it fails are the model's predictions."
            .into(),
        seed,
        runtime_s,
        plots: vec![
            life_plot(runs, Group::Join, "life_join"),
            life_plot(runs, Group::Btree, "life_btree"),
        ],
        tables: vec![wear_table(runs), prediction_table(&preds)],
        verdicts,
        provenance,
        results,
    }
}

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    let s = Setup::for_scale(scale);
    let runs = measure(&s, seed, ctx)?;
    Ok(section(&s, &runs, seed, started.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny setup: seconds, not a minute.
    fn tiny() -> Setup {
        Setup {
            sf: 0.05,
            join_drive_writes: 2.5,
            join_max_repeat: 100,
            btree_capacity_bytes: 1 << 30,
            btree_preload: 2_000,
            btree_target_bytes: 24 << 20,
        }
    }

    #[test]
    fn tiny_runs_reach_equal_bytes_trim_lowers_waf_and_the_same_seed_gives_the_same_numbers() {
        let s = tiny();
        let ctx = super::super::RunCtx::default();
        let runs = measure(&s, 7, &ctx).unwrap();
        assert_eq!(runs.len(), 7);
        for g in [Group::Join, Group::Btree] {
            let spread = host_bytes_spread(&runs, g);
            assert!(spread <= 1.0 + EQUAL_BYTES_TOLERANCE, "{g:?}: {spread}");
        }
        for r in &runs {
            let target = match r.group {
                Group::Join => s.join_target_bytes(),
                Group::Btree => s.btree_target_bytes,
            };
            assert!(
                r.wear.host_write_bytes >= target,
                "{}: {:?}",
                r.combo,
                r.wear
            );
            assert!(r.rounds > 0 && r.wear.life_used > 0.0, "{}", r.combo);
            // One answer: life used and the projected TBW give the run's host bytes back
            // (on the rated drive), and the worst block is the run's own.
            let tbw = r.wear.projected_tbw_bytes.unwrap();
            let back =
                r.life_used() * tbw / (r.wear.host_write_bytes as f64 * r.wear.capacity_scale);
            assert!((back - 1.0).abs() < 0.01, "{}: {back}", r.combo);
            assert!(r.wear.phase_life_used_worst_block <= r.wear.life_used_worst_block);
            assert!(r.wear.phase_life_used_worst_block > 0.0, "{}", r.combo);
            // Days at a fixed rate: the MX500's rated writes, paper 004's insert rate.
            assert!(r.projected_days().is_some_and(|d| d > 0.0), "{}", r.combo);
        }
        // As the experiment measures it: with TRIM the drive copies less (fallocate off and
        // on), so TRIM's WAF is at most that without.
        let waf = |c: &str| find(&runs, Group::Join, c).unwrap().wear.waf_bytes.unwrap();
        assert!(
            waf("TRIM only") <= waf("neither"),
            "{} {}",
            waf("TRIM only"),
            waf("neither")
        );
        assert!(waf("fallocate + TRIM") <= waf("fallocate only"));
        let again = measure(&s, 7, &ctx).unwrap();
        for (a, b) in runs.iter().zip(&again) {
            assert_eq!((a.combo, a.rounds), (b.combo, b.rounds));
            assert_eq!(a.wear, b.wear, "{}", a.combo);
        }
        let section = section(&s, &runs, 7, 0.0);
        assert_eq!(section.tables[0].rows.len(), 7);
        assert!(crate::report::Verdict::holds_in(
            &section.verdicts,
            "lifetime.equal-host-bytes-join"
        ));
    }

    /// Runs whose drives behave as the null model: WAF 1, even wear, equal host bytes.
    fn null_runs() -> Vec<Run> {
        let combos = [
            (Group::Join, "neither"),
            (Group::Join, "fallocate only"),
            (Group::Join, "TRIM only"),
            (Group::Join, "fallocate + TRIM"),
            (Group::Btree, "AS B-tree (cost-benefit cleaning)"),
            (Group::Btree, "in-place B-tree"),
            (Group::Btree, "BFTL"),
        ];
        let endurance = flash::EnduranceConfig {
            rated_pe_cycles: 1500,
            rated_tbw_bytes: Some(100_000_000_000_000),
            warranty_years: Some(5.0),
            rated_logical_bytes: Some(250_000_000_000),
        };
        combos
            .iter()
            .map(|&(group, combo)| {
                // 1 GiB raw, 3 GiB written at WAF 1: every block erased 3 times.
                let counts = vec![3u32; 1024];
                let wear = WearReport::new(flash::wear::WearInputs {
                    endurance: &endurance,
                    erase_counts: &counts,
                    phase_start_counts: &[],
                    slc_mode_erases: 0,
                    slc_erase_weight: 1.0,
                    simulated_logical_bytes: 900 << 20,
                    simulated_raw_bytes: 1 << 30,
                    host_write_bytes: 3 << 30,
                    flash_write_bytes: 3 << 30,
                    simulated_ns: 1_000_000_000,
                });
                Run {
                    group,
                    combo,
                    rounds: 10,
                    inserts: 1000,
                    wear,
                }
            })
            .collect()
    }

    #[test]
    fn the_null_model_s_runs_give_no_prediction_and_judge_nothing_as_predicted() {
        let runs = null_runs();
        let p = predictions(&runs);
        assert_eq!(p.len(), PAIRS.len());
        for x in &p {
            assert!((x.ratio - 1.0).abs() < 1e-12 && !x.beyond_null, "{x:?}");
        }
        let v = verdicts(&runs);
        crate::report::Verdict::assert_no_prediction_holds(&v);
        // Its own life used is what it predicts.
        for r in &runs {
            assert!((r.life_used() - r.null_life_used()).abs() < 1e-12);
        }
    }

    #[test]
    fn projected_days_do_not_depend_on_how_fast_the_run_went() {
        let runs = null_runs();
        let mut slow = runs[0].clone();
        let w = &mut slow.wear;
        w.host_write_bytes_per_s = w.host_write_bytes_per_s.map(|r| r / 10.0);
        w.projected_days = w.projected_days.map(|d| d * 10.0);
        assert_eq!(slow.projected_days(), runs[0].projected_days());
        // The MX500's rated rate: 100 TB over 5 years.
        let per_day = runs[0].fixed_rate().unwrap().0;
        assert!((per_day - 100e12 / (5.0 * 365.25)).abs() < 1.0);
        // A B-tree run: paper 004's insert rate at its own bytes per insert.
        let b = &runs[4];
        let per_insert = b.wear.host_write_bytes as f64 / b.inserts as f64;
        let expect = per_insert * PAPER_004_INSERTS_PER_S * 86_400.0;
        assert!((b.fixed_rate().unwrap().0 - expect).abs() < 1e-6);
    }

    #[test]
    fn a_combination_that_copies_more_is_a_prediction_beyond_the_null_model() {
        let mut runs = null_runs();
        // "neither" erased every block twice as often for the same host bytes.
        let endurance = flash::EnduranceConfig {
            rated_pe_cycles: 1500,
            rated_tbw_bytes: Some(100_000_000_000_000),
            warranty_years: Some(5.0),
            rated_logical_bytes: Some(250_000_000_000),
        };
        runs[0].wear = WearReport::new(flash::wear::WearInputs {
            endurance: &endurance,
            erase_counts: &[6u32; 1024],
            phase_start_counts: &[],
            slc_mode_erases: 0,
            slc_erase_weight: 1.0,
            simulated_logical_bytes: 900 << 20,
            simulated_raw_bytes: 1 << 30,
            host_write_bytes: 3 << 30,
            flash_write_bytes: 6 << 30,
            simulated_ns: 1_000_000_000,
        });
        let p = predictions(&runs);
        let first = &p[0];
        assert!(first.what.contains("neither / fallocate + TRIM"));
        assert!((first.ratio - 2.0).abs() < 1e-12 && first.beyond_null);
        assert!((first.null_ratio - 1.0).abs() < 1e-12);
        // No verdict on the datasheet TBW: only the equal-host-bytes checks.
        let v = verdicts(&runs);
        assert!(v
            .iter()
            .all(|v| v.id().starts_with("lifetime.equal-host-bytes")));
    }
}
