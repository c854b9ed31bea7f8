//! The tempfiles section's tables and plots, from its runs ([`super::Done`]).

use super::analyse::*;
use super::*;
use crate::rows::{Cell, Row};

/// The Linux host path's run of drive `di`.
fn get(done: &Done, di: usize, f: bool, t: bool) -> &JoinRunResult {
    find(done, Path::Host, di, f, t)
}

/// Per drive: join time and WAF per repetition, each combination a line.
pub(super) fn repetition_plots(s: &Setup, done: &Done) -> Vec<Plot> {
    let mut plots = Vec::new();
    for (di, d) in s.drives.iter().enumerate() {
        let series = |metric: &dyn Fn(&joinrun::Repetition) -> f64| -> Vec<Series> {
            COMBOS
                .iter()
                .map(|&(f, t)| Series {
                    name: combo_name(f, t).into(),
                    points: get(done, di, f, t)
                        .repetitions
                        .iter()
                        .enumerate()
                        .map(|(i, r)| ((i + 1) as f64, metric(r)))
                        .collect(),
                    reference: false,
                })
                .collect()
        };
        plots.push(
            LinePlot {
                file_stem: format!("time_{}", d.preset),
                title: format!("{}: join time per repetition", d.label),
                x_label: "repetition".into(),
                y_label: "simulated time (s)".into(),
                series: series(&|r| secs(r.total_ns)),
            }
            .into(),
        );
        plots.push(
            LinePlot {
                file_stem: format!("waf_{}", d.preset),
                title: format!("{}: WAF per repetition", d.label),
                x_label: "repetition".into(),
                y_label: "write amplification".into(),
                series: series(&|r| r.waf.unwrap_or(0.0)),
            }
            .into(),
        );
    }
    plots
}

/// A row of table `repetitions`.
struct RepetitionRow<'a> {
    preset: &'static str,
    combination: &'static str,
    number: usize,
    rep: &'a joinrun::Repetition,
    capacity_bytes: u64,
}

impl Row for RepetitionRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "drive",
        "combination",
        "repetition",
        "time s",
        "partition s",
        "join s",
        "TRIM commands",
        "WAF",
        "data on drive %",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.rep;
        let mapped_percent = 100.0 * r.mapped_bytes as f64 / self.capacity_bytes.max(1) as f64;
        vec![
            self.preset.into(),
            self.combination.into(),
            Cell::Count(self.number as u64),
            Cell::Fixed(secs(r.total_ns), 3),
            Cell::Fixed(secs(r.partition_ns), 3),
            Cell::Fixed(secs(r.join_ns), 3),
            Cell::Count(r.trim_commands),
            Cell::Fixed(r.waf.unwrap_or(0.0), 3),
            Cell::Fixed(mapped_percent, 1),
        ]
    }
}

/// Table `repetitions`: every repetition of every drive and combination.
pub(super) fn repetitions_table(s: &Setup, done: &Done) -> Table {
    let mut rows = Vec::new();
    for (di, d) in s.drives.iter().enumerate() {
        for &(f, t) in &COMBOS {
            for (i, rep) in get(done, di, f, t).repetitions.iter().enumerate() {
                rows.push(RepetitionRow {
                    preset: d.preset,
                    combination: combo_name(f, t),
                    number: i + 1,
                    rep,
                    capacity_bytes: d.capacity_bytes,
                });
            }
        }
    }
    Table::of(
        "repetitions",
        "Time, WAF and the drive's logical space holding data (without TRIM: every address written so far) per repetition",
        rows,
    )
}

/// A row of table `summary`: one drive and combination.
struct SummaryRow<'a> {
    preset: &'static str,
    combination: &'static str,
    reps: &'a [joinrun::Repetition],
}

impl Row for SummaryRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "drive",
        "combination",
        "time first 3 s",
        "time last 3 s",
        "WAF last",
        "TRIM commands / rep",
        "join phase s / rep",
        "SLC cache share of writes, last 3 %",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.reps;
        let n = r.len();
        vec![
            self.preset.into(),
            self.combination.into(),
            Cell::Fixed(mean(r[..3].iter().map(|x| secs(x.total_ns))), 3),
            Cell::Fixed(mean(r[n - 3..].iter().map(|x| secs(x.total_ns))), 3),
            Cell::Fixed(r[n - 1].waf.unwrap_or(0.0), 3),
            Cell::Fixed(mean(r.iter().map(|x| x.trim_commands as f64)), 0),
            Cell::Fixed(mean(r.iter().map(|x| secs(x.join_ns))), 3),
            slc_share(&r[n - 3..]).into(),
        ]
    }
}

/// Table `summary`: first and last repetitions per drive and combination.
pub(super) fn summary_table(s: &Setup, done: &Done) -> Table {
    let rows = s.drives.iter().enumerate().flat_map(|(di, d)| {
        COMBOS.iter().map(move |&(f, t)| SummaryRow {
            preset: d.preset,
            combination: combo_name(f, t),
            reps: &get(done, di, f, t).repetitions,
        })
    });
    Table::of(
        "summary",
        "Per drive and combination: first and last repetitions",
        rows,
    )
}

/// A row of tables `mechanisms` and `batch_files`: the MX500's numbers on one path.
struct MechanismRow<'a> {
    first: String,
    neither: &'a [joinrun::Repetition],
    trim_only: &'a [joinrun::Repetition],
    both: &'a [joinrun::Repetition],
}

impl<'a> MechanismRow<'a> {
    fn of(done: &'a Done, path: Path, first: String) -> Self {
        let r = |f, t| find(done, path, MX500, f, t).repetitions.as_slice();
        MechanismRow {
            first,
            neither: r(false, false),
            trim_only: r(false, true),
            both: r(true, true),
        }
    }
}

impl Row for MechanismRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "path",
        "join phase s: neither",
        "join phase s: TRIM only",
        "TRIM penalty ×",
        "TRIMs / rep: TRIM only",
        "TRIMs / rep: fallocate + TRIM",
        "TRIM count ratio ×",
        "TRIM work s / rep: TRIM only",
        "TRIMs waiting on earlier TRIMs' settling s / rep (summed): TRIM only",
        "reads and writes waiting on TRIM settling s / rep (summed): TRIM only",
    ];
    fn cells(&self) -> Vec<Cell> {
        let (n, t, ft) = (self.neither, self.trim_only, self.both);
        let join = |r: &[joinrun::Repetition]| mean_of(r, |x| secs(x.join_ns));
        let trims = |r: &[joinrun::Repetition]| mean_of(r, |x| x.trim_commands as f64);
        vec![
            self.first.clone().into(),
            Cell::Fixed(join(n), 3),
            Cell::Fixed(join(t), 3),
            Cell::Fixed(join(t) / join(n), 2),
            Cell::Fixed(trims(t), 0),
            Cell::Fixed(trims(ft), 0),
            Cell::Fixed(trims(t) / trims(ft).max(1.0), 1),
            Cell::Fixed(mean_of(t, |x| secs(x.trim_busy_ns)), 3),
            Cell::Fixed(mean_of(t, |x| secs(x.trim_settle_wait_ns)), 3),
            Cell::Fixed(mean_of(t, |x| secs(x.io_settle_wait_ns)), 3),
        ]
    }
}

/// Table `mechanisms`: what each part of the path does to the MX500's numbers.
pub(super) fn mechanisms_table(done: &Done) -> Table {
    let rows = [Path::Host, Path::QueuedTrim, Path::NoHost]
        .into_iter()
        .map(|path| MechanismRow::of(done, path, path.label().into()));
    Table::of(
        "mechanisms",
        "MX500: the same runs with one part of the host path changed (means over repetitions)",
        rows,
    )
}

/// Table `batch_files`: the MX500's numbers with PostgreSQL's batch files for each work_mem.
pub(super) fn batch_files_table(s: &Setup, done: &Done) -> Table {
    let rows = s.batch_work_mem_kib.iter().map(|&kib| {
        let first = format!("{kib}: {}", postgres_batches(s.sf, kib));
        MechanismRow::of(done, Path::PostgresWorkMem(kib), first)
    });
    let mut t = Table::of(
        "batch_files",
        format!(
            "MX500, host path: the join with PostgreSQL 12's batch files for a given work_mem (its rule in nodeHash.c; each file's 8 KiB buffer beside work_mem; means over {BATCHES_REPEAT} repetitions)"
        ),
        rows,
    );
    t.headers[0] = "work_mem KiB: batch files per side".into();
    t
}

/// The batch-file runs as a plot, against the paper's two headline values.
pub(super) fn batch_files_plot(s: &Setup, done: &Done) -> Plot {
    let x = |kib: u64| (postgres_batches(s.sf, kib) as f64).log2();
    let curve = |of: &ThreeRuns| {
        s.batch_work_mem_kib
            .iter()
            .map(|&kib| {
                let path = Path::PostgresWorkMem(kib);
                let r = |f, t| find(done, path, MX500, f, t).repetitions.as_slice();
                (x(kib), of(r(false, false), r(false, true), r(true, true)))
            })
            .collect::<Vec<_>>()
    };
    let flat = |y: f64| {
        s.batch_work_mem_kib
            .iter()
            .map(|&kib| (x(kib), y))
            .collect::<Vec<_>>()
    };
    let line = |name: &str, points, reference| Series {
        name: name.into(),
        points,
        reference,
    };
    LinePlot {
        file_stem: "batch_files".into(),
        title: "MX500: TRIM count ratio and join-phase penalty vs PostgreSQL's batch files".into(),
        x_label: "log2(batch files per side)".into(),
        y_label: "ratio (×)".into(),
        series: vec![
            line(
                "TRIM count ratio, fallocate off / on",
                curve(&|_, t, ft| trim_count_ratio(t, ft)),
                false,
            ),
            line(
                "join-phase penalty, TRIM only / neither",
                curve(&|n, t, _| trim_penalty(t, n)),
                false,
            ),
            line(
                "paper 000: ~16× more TRIMs",
                flat(paper::TRIM_COUNT_RATIO),
                true,
            ),
            line(
                "paper 000: ~2.7× join phase",
                flat(paper::JOIN_TRIM_PENALTY),
                true,
            ),
        ],
    }
    .into()
}

/// A row of table `small_work_mem`: the judged work_mem against `factor` times more.
struct SmallWorkMemRow {
    factor: u64,
    more_kib: u64,
    more_files: u64,
    worst: f64,
    worst_rep: usize,
    mean_ratio: f64,
}

impl Row for SmallWorkMemRow {
    const COLUMNS: &'static [&'static str] = &[
        "factor",
        "more work_mem kB: batch files per side",
        "up to × (repetition)",
        "mean time ×",
        "paper",
    ];
    fn cells(&self) -> Vec<Cell> {
        let judged = if self.factor == JUDGED_WORK_MEM_FACTOR {
            " (judged)"
        } else {
            ""
        };
        vec![
            format!("{}{judged}", self.factor).into(),
            format!("{}: {}", self.more_kib, self.more_files).into(),
            format!("{:.2} ({})", self.worst, self.worst_rep).into(),
            Cell::Fixed(self.mean_ratio, 2),
            format!("{}", paper::SMALL_WORK_MEM).into(),
        ]
    }
}

/// Table `small_work_mem`: Fig. 5's "too small", the judged work_mem against each factor more.
pub(super) fn small_work_mem_table(s: &Setup, done: &Done) -> Table {
    let judged_kib = s.work_mem_bytes >> 10;
    let neither = &get(done, MX500, false, false).repetitions;
    let rows = WORK_MEM_FACTORS.iter().map(|&k| {
        let ample = &find(done, Path::AmpleWorkMem(k), MX500, false, false).repetitions;
        let (worst, worst_rep) = small_work_mem_cost(neither, ample);
        let n = ample.len().min(neither.len());
        SmallWorkMemRow {
            factor: k,
            more_kib: judged_kib * k,
            more_files: postgres_batches(s.sf, judged_kib * k),
            worst,
            worst_rep,
            mean_ratio: mean_of(&neither[..n], |x| secs(x.total_ns))
                / mean_of(ample, |x| secs(x.total_ns)),
        }
    });
    Table::of(
        "small_work_mem",
        format!(
            "MX500, neither option: the judged work_mem ({judged_kib} kB, {} batch files per side) against more, 10 repetitions (Fig. 5; the paper's values are not in its text, a factor of {JUDGED_WORK_MEM_FACTOR} is judged)",
            postgres_batches(s.sf, judged_kib)
        ),
        rows,
    )
}

/// The TRIM count ratio and the join-phase penalty per drive, beside the paper's.
pub(super) fn ratio_plots(s: &Setup, done: &Done) -> Vec<Plot> {
    let reps = |di: usize, f: bool, t: bool| get(done, di, f, t).repetitions.as_slice();
    let penalty = |di: usize| trim_penalty(reps(di, false, true), reps(di, false, false));
    let trim_ratio = |di: usize| trim_count_ratio(reps(di, false, true), reps(di, true, true));
    let categories: Vec<String> = s.drives.iter().map(|d| d.label.to_string()).collect();
    vec![
        BarPlot {
            file_stem: "trim_commands".into(),
            title: "TRIM commands per repetition: fallocate off / on (TRIM on)".into(),
            y_label: "ratio".into(),
            categories: categories.clone(),
            series: vec![
                ("paper 000 (~16×)".into(), vec![Some(16.0), None, None]),
                (
                    "flashlab".into(),
                    (0..3).map(|di| Some(trim_ratio(di))).collect(),
                ),
            ],
        }
        .into(),
        BarPlot {
            file_stem: "join_phase".into(),
            title: "Join-phase time with TRIM / without (fallocate off)".into(),
            y_label: "ratio".into(),
            categories,
            series: vec![
                (
                    "paper 000 (MX500 ~2.7×)".into(),
                    vec![Some(2.7), None, None],
                ),
                (
                    "flashlab".into(),
                    (0..3).map(|di| Some(penalty(di))).collect(),
                ),
            ],
        }
        .into(),
    ]
}

/// The MX500's headlines of table `trim_cost`: (name, values by settling cost, paper).
fn headlines(sens: &Sensitivity) -> [(&'static str, &Vec<f64>, f64); 4] {
    [
        (
            "join-phase penalty ×",
            &sens.penalty,
            paper::JOIN_TRIM_PENALTY,
        ),
        (
            "fallocate + TRIM vs neither × (best)",
            &sens.ft_vs_neither,
            paper::FT_VS_NEITHER,
        ),
        (
            "fallocate + TRIM vs TRIM only × (best)",
            &sens.ft_vs_trim_only,
            paper::FT_VS_TRIM_ONLY,
        ),
        (
            "TRIM count ratio ×",
            &sens.count_ratio,
            paper::TRIM_COUNT_RATIO,
        ),
    ]
}

/// Table `trim_cost`: each headline against the TRIM settling cost, the paper's value and
/// the cost that would reach it.
pub(super) fn trim_cost_table(sens: &Sensitivity, trim_ms: f64, settle_ms: f64) -> Table {
    let headlines = headlines(sens);
    let mut t = Table {
        file_stem: "trim_cost".into(),
        caption: format!(
            "MX500, host path: each headline against the work a TRIM leaves that the drive's next command waits for (settling; the preset's {settle_ms} ms and {trim_ms} ms of command work are assumed by docs/sources.md's rule, none measured on the drive), and the settling cost at which the paper's number would be reached"
        ),
        headers: std::iter::once("settling ms".to_string())
            .chain(headlines.iter().map(|h| h.0.to_string()))
            .collect(),
        rows: sens
            .costs_ms
            .iter()
            .enumerate()
            .map(|(i, c)| {
                std::iter::once(format!("{c}"))
                    .chain(headlines.iter().map(|h| format!("{:.2}", h.1[i])))
                    .collect()
            })
            .collect(),
    };
    t.rows.push(
        std::iter::once("paper".to_string())
            .chain(headlines.iter().map(|h| format!("{}", h.2)))
            .collect(),
    );
    t.rows.push(
        std::iter::once("reached at (ms)".to_string())
            .chain(headlines.iter().map(|h| {
                cost_reaching(&sens.costs_ms, h.1, h.2)
                    .map_or("not in this range".to_string(), |ms| format!("{ms:.2}"))
            }))
            .collect(),
    );
    t
}

/// Two plots of table `trim_cost`: the penalty grows far beyond the speed-ups' scale.
pub(super) fn trim_cost_plots(sens: &Sensitivity) -> Vec<Plot> {
    let headlines = headlines(sens);
    let mut plots = Vec::new();
    for (stem, title, which) in [
        (
            "trim_cost_penalty",
            "MX500: join-phase TRIM penalty against the assumed TRIM settling cost",
            &headlines[..1],
        ),
        (
            "trim_cost_speedups",
            "MX500: fallocate + TRIM speed-ups against the assumed TRIM settling cost",
            &headlines[1..3],
        ),
    ] {
        plots.push(
            LinePlot {
                file_stem: stem.into(),
                title: title.into(),
                x_label: "TRIM settling cost, ms (log scale)".into(),
                y_label: "ratio (×)".into(),
                series: which
                    .iter()
                    .map(|h| Series {
                        name: h.0.into(),
                        points: sens
                            .costs_ms
                            .iter()
                            .zip(h.1.iter())
                            .map(|(c, v)| (*c, *v))
                            .collect(),
                        reference: false,
                    })
                    .chain(which.iter().map(|h| Series {
                        name: format!("paper 000: {} {}", h.0, h.2),
                        points: sens.costs_ms.iter().map(|c| (*c, h.2)).collect(),
                        reference: true,
                    }))
                    .collect(),
            }
            .into(),
        );
    }
    plots
}
