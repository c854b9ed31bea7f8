//! Experiment `trim` (paper 002, seeds/002): deleting a fragmented file with TRIM, vTrim,
//! fTrim and fTrim with preemption on an OpenSSD-like drive.
//!
//! simfs (ext4-like, 16 GB) on the `openssd` preset (8 KiB pages, 16 KiB superpages, 4 KiB
//! mapping, 32 GB) holds a 64 MiB data file and a 10 MB file of 160 extents; the latter
//! is deleted with each discard mode. Part 1 reports the delete time, split into interface
//! time (command round trips and payloads) and in-drive time (mapping-table work, metadata
//! reads and parsing, recording). Part 2 times the delete followed by 20, 100 and 1000
//! random 4 KiB reads of the data file, normalised to TRIM.
//!
//! Three paper numbers calibrate three drive parameters ([`calibrate`]): the 43%/57%
//! interface/in-drive split of TRIM sets the command round trip, vTrim's −63% the
//! firmware cost per TRIM command, fTrim's −42% the parsing cost per metadata block. The
//! mixed-workload numbers are then predictions of the model.
//!
//! Those predictions rest on four assumed costs ([`Assumption`]): the host's time between
//! reads and the firmware's per-range, per-unit and recording costs. Table `assumptions`
//! scales each alone to ¼× and 4×, re-calibrates the three costs under it (so the three
//! calibrated numbers still hold) and judges every prediction again ([`sensitivity`]).

use super::plan::{Done, Plan};
use super::{derive_seed, Scale};
use crate::deleterun::{run_scenario, DeleteScenario, ScenarioResult};
use crate::report::{BarPlot, Provenance, Role, Score, Section, Table, Verdict};
use crate::rows::{Cell, Row};
use flash::{Preset, SsdConfig};
use serde_json::json;
use simfs::{DiscardMode, FsConfig, SimFs};

/// Paper 002, Fig. 2: TRIM's interface share of the delete time.
pub const PAPER_TRIM_INTERFACE_SHARE: f64 = 0.43;
/// Paper 002, Fig. 2: delete time of vTrim and fTrim relative to TRIM (−63%, −42%).
pub const PAPER_VTRIM_DELETE: f64 = 0.37;
pub const PAPER_FTRIM_DELETE: f64 = 0.58;
/// Paper 002, Fig. 3: delete + N reads, total time relative to TRIM (None: not reported).
pub struct PaperMixed {
    pub reads: u32,
    pub vtrim: Option<f64>,
    pub ftrim: Option<f64>,
    pub ftrim_pre: Option<f64>,
}
pub const PAPER_MIXED: &[PaperMixed] = &[
    PaperMixed {
        reads: 20,
        vtrim: Some(0.64),
        ftrim: Some(0.93),
        ftrim_pre: Some(0.71),
    },
    PaperMixed {
        reads: 100,
        vtrim: None,
        ftrim: Some(0.999),
        ftrim_pre: None,
    },
    PaperMixed {
        reads: 1000,
        vtrim: Some(0.88),
        ftrim: None,
        ftrim_pre: None,
    },
];
/// Under additive timing, one read's cost in TRIM's delete time, set by the paper's vTrim
/// delete (0.37) and vTrim delete + 20 reads (0.64): (d + R) / (1 + R) = p, so
/// R = (p - d) / (1 - p) for 20 reads.
fn additive_read_cost() -> f64 {
    let vtrim20 = PAPER_MIXED[0].vtrim.expect("the paper's vTrim at 20 reads");
    (vtrim20 - PAPER_VTRIM_DELETE) / (1.0 - vtrim20) / 20.0
}

/// Under additive timing, the total time of a delete of `delete` (TRIM's = 1) followed by
/// `reads` reads, over TRIM's.
fn additive_total(delete: f64, reads: f64) -> f64 {
    let r = additive_read_cost() * reads;
    (delete + r) / (1.0 + r)
}

/// What a model without contention between the reads and a mode's deletion work gives for
/// the delete of `m` and `n` reads (additive timing on the paper's own delete times; fTrim
/// with preemption at best the reads alone); `None` for vTrim at 20 reads, which sets the
/// reads' cost.
fn without_contention(n: u32, m: Mode) -> Option<f64> {
    let delete = match m {
        Mode::Trim => 1.0,
        Mode::VTrim if n == 20 => return None,
        Mode::VTrim => PAPER_VTRIM_DELETE,
        Mode::FTrim => PAPER_FTRIM_DELETE,
        Mode::FTrimPre => 0.0,
    };
    Some(additive_total(delete, f64::from(n)))
}

/// The reads' time a paper number `p` (total over TRIM's) implies after a delete of
/// `delete`, against additive timing's: p (1 + R) - d over R, R the `reads` reads' cost.
fn implied_read_time(p: f64, delete: f64, reads: f64) -> f64 {
    let r = additive_read_cost() * reads;
    (p * (1.0 + r) - delete) / r
}

/// What a mixed-workload miss believes missing: how much slower or faster the paper's
/// number needs the reads after mode `m` to be than after a TRIM (additive timing on the
/// paper's own deletes, table `additive`).
fn mixed_miss(n: u32, m: Mode, paper: f64, ours: f64) -> String {
    let delete = match m {
        Mode::Trim => 1.0,
        Mode::VTrim => PAPER_VTRIM_DELETE,
        Mode::FTrim => PAPER_FTRIM_DELETE,
        Mode::FTrimPre => 0.0,
    };
    let x = implied_read_time(paper, delete, f64::from(n));
    let ours_vs_additive = format!(
        "ours ({}) lies {} additive timing's {}",
        pct(ours),
        if (ours - additive_total(delete, f64::from(n))).abs() < 0.1 {
            "near"
        } else {
            "away from"
        },
        pct(additive_total(delete, f64::from(n)))
    );
    if x >= 1.0 {
        format!(
            "contention between the reads and the deletion's work. On the paper's own delete times \
             (table `additive`), its {} needs the {n} reads after {} to take {x:.2}× what they take after \
             a TRIM: deletion work still running in the drive that the reads wait for{}; {ours_vs_additive}",
            pct(paper),
            m.name(),
            if m == Mode::FTrimPre {
                " although it is preemptible (its delete counted as free)"
            } else {
                ""
            },
        )
    } else {
        format!(
            "work that TRIM leaves behind. On the paper's own delete times (table `additive`), its {} \
             needs the {n} reads after a TRIM to take {:.2}× what they take after {}: TRIM's deletion \
             work still running in the drive when the reads come; {ours_vs_additive}",
            pct(paper),
            1.0 / x,
            m.name()
        )
    }
}

/// What additive timing (a delete, then reads that cost what they cost after any delete)
/// makes of the paper's own numbers: the reads' cost follows from vTrim's delete (0.37)
/// and vTrim's delete + 20 reads (0.64); every other mixed number then follows, and the
/// paper's differ. Computed from the constants above, not from our model.
fn additive_table() -> Table {
    let vtrim20 = PAPER_MIXED[0].vtrim.expect("the paper's vTrim at 20 reads");
    let per_read = additive_read_cost();
    let r20 = per_read * 20.0;
    let additive = additive_total;
    let implied = implied_read_time;
    let mut t = Table {
        file_stem: "additive".into(),
        caption: format!(
            "The paper's numbers under additive timing: vTrim's delete ({PAPER_VTRIM_DELETE}) and delete + 20 reads ({vtrim20}) \
             make 20 reads cost {r20:.2}× TRIM's delete; the rest then follows — and the paper's differ. Its fTrim numbers \
             need reads after an fTrim to take longer than after a TRIM (last column): background metadata work that \
             contends with the reads"
        ),
        headers: ["mode, reads", "paper (total / TRIM)", "additive timing", "reads' time the paper's number implies (× additive)"]
            .map(String::from)
            .to_vec(),
        rows: vec![],
    };
    for m in PAPER_MIXED {
        let n = f64::from(m.reads);
        for (name, delete, paper) in [
            ("vTrim", PAPER_VTRIM_DELETE, m.vtrim),
            ("fTrim", PAPER_FTRIM_DELETE, m.ftrim),
        ] {
            if let Some(p) = paper {
                t.rows.push(vec![
                    format!("{name}, {}", m.reads),
                    format!("{p:.3}"),
                    format!("{:.3}", additive(delete, n)),
                    format!("{:.2}×", implied(p, delete, n)),
                ]);
            }
        }
        if let Some(p) = m.ftrim_pre {
            // fTrim_pre's delete runs in the background: at best the reads alone.
            t.rows.push(vec![
                format!("fTrim_pre, {}", m.reads),
                format!("{p:.3}"),
                format!("≥ {:.3} (the reads alone)", additive(0.0, n)),
                "—".into(),
            ]);
        }
    }
    t
}

/// Host time between two reads of the reading program (a read(2) per 4 KiB): assumed.
pub const READ_THINK_NS: u64 = 20_000;
pub const FILE_BYTES: u64 = 10 << 20;
pub const FILE_EXTENTS: u32 = 160;
const FS_BYTES: u64 = 16 << 30;
const DATA_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Trim,
    VTrim,
    FTrim,
    FTrimPre,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Trim, Mode::VTrim, Mode::FTrim, Mode::FTrimPre];
    pub fn name(self) -> &'static str {
        match self {
            Mode::Trim => "TRIM",
            Mode::VTrim => "vTrim",
            Mode::FTrim => "fTrim",
            Mode::FTrimPre => "fTrim_pre",
        }
    }
    fn discard(self) -> DiscardMode {
        match self {
            Mode::Trim => DiscardMode::Online,
            Mode::VTrim => DiscardMode::VTrim,
            Mode::FTrim | Mode::FTrimPre => DiscardMode::FTrim,
        }
    }
}

/// The three calibrated parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Host-interface round trip of every command (`timing.command_overhead_ns`).
    pub interface_ns: u64,
    /// Firmware work per TRIM-family command (`trim.command_overhead_ns`).
    pub command_ns: u64,
    /// Firmware parsing per fTrim metadata block (`trim.metadata_parse_ns`).
    pub parse_ns: u64,
}

fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / bytes_per_s as u128) as u64
}

/// Solves for the interface round trip I, the per-command firmware cost C and the
/// per-metadata-block parse cost P so that deleting a file of `ranges` extents (`units`
/// mapping units, `metadata_blocks` blocks for fTrim to read) reproduces the paper's three
/// delete-time numbers, with the drive's other (assumed) costs as they are:
///
/// - TRIM: `T = n·(I + C) + a`, with `a = n·per_range + u·per_page`, and `n·I = 0.43·T`;
/// - vTrim: `I + X₄ₖ + record + C + a = 0.37·T` (X = payload transfer);
/// - fTrim: `I + X₅₁₂ + record + C + m·(tR + transfer + P) + a = 0.58·T`.
pub fn calibrate(
    cfg: &SsdConfig,
    ranges: u64,
    units: u64,
    metadata_blocks: u64,
) -> Result<Calibration, crate::LabError> {
    let (t, tm) = (&cfg.trim, &cfg.timing);
    let n = ranges as f64;
    let a = (ranges * t.per_range_ns + units * t.per_page_ns) as f64;
    let x4k = transfer_ns(4096, tm.host_bytes_per_s) as f64;
    let x512 = transfer_ns(512, tm.host_bytes_per_s) as f64;
    let rec = t.record_ns as f64;
    let total = (x4k + rec + a * (1.0 - 1.0 / n)) / (PAPER_VTRIM_DELETE - 1.0 / n);
    let i = PAPER_TRIM_INTERFACE_SHARE * total / n;
    let c = ((1.0 - PAPER_TRIM_INTERFACE_SHARE) * total - a) / n;
    let unit_xfer = transfer_ns(
        cfg.geometry.mapping_unit_bytes as u64,
        tm.channel_bytes_per_s,
    ) as f64;
    let p = (PAPER_FTRIM_DELETE * total - i - x512 - rec - c - a) / metadata_blocks as f64
        - tm.read_ns as f64
        - unit_xfer;
    if !(total > 0.0 && c >= 0.0 && p >= 0.0) {
        return Err(format!(
            "cannot calibrate: with the assumed per-range/per-page/record costs the paper's numbers need negative costs (C {c:.0} ns, P {p:.0} ns)"
        ).into());
    }
    Ok(Calibration {
        interface_ns: i.round() as u64,
        command_ns: c.round() as u64,
        parse_ns: p.round() as u64,
    })
}

/// What the section's runs depend on: the drive and the host's time between reads.
#[derive(Debug, Clone)]
pub struct Model {
    pub preset: Preset,
    pub read_think_ns: u64,
}

impl Model {
    /// Paper 002's: the openssd preset as it is, [`READ_THINK_NS`] between reads.
    pub fn paper() -> Result<Model, crate::LabError> {
        Ok(Model {
            preset: Preset::load("openssd")?,
            read_think_ns: READ_THINK_NS,
        })
    }

    fn ssd(&self) -> Result<&SsdConfig, crate::LabError> {
        match &self.preset.device {
            flash::DeviceConfig::Ssd(cfg) => Ok(cfg),
            flash::DeviceConfig::Hdd(_) => {
                Err(format!("{} is not an SSD", self.preset.name).into())
            }
        }
    }

    fn ssd_mut(&mut self) -> Result<&mut SsdConfig, crate::LabError> {
        let name = self.preset.name.clone();
        self.preset
            .ssd_config_mut()
            .ok_or_else(|| format!("{name} is not an SSD").into())
    }

    /// The same model with its three calibrated costs solved again by [`calibrate`]
    /// (`shape`: [`deletion_shape`]'s counts), and the solution.
    pub fn recalibrated(
        mut self,
        (ranges, units, metadata_blocks): (u64, u64, u64),
    ) -> Result<(Model, Calibration), crate::LabError> {
        let cfg = self.ssd_mut()?;
        let cal = calibrate(cfg, ranges, units, metadata_blocks)?;
        cfg.timing.command_overhead_ns = cal.interface_ns;
        cfg.trim.command_overhead_ns = cal.command_ns;
        cfg.trim.metadata_parse_ns = cal.parse_ns;
        Ok((self, cal))
    }
}

impl DeleteScenario {
    /// Paper 002's setting for `mode` on the openssd preset.
    pub fn paper(mode: Mode, reads: u32, seed: u64) -> Result<Self, crate::LabError> {
        Ok(Self::of_model(&Model::paper()?, mode, reads, seed))
    }

    /// Paper 002's setting for `mode` on `model`'s drive and host.
    pub fn of_model(model: &Model, mode: Mode, reads: u32, seed: u64) -> Self {
        DeleteScenario {
            preset: model.preset.clone(),
            fs_bytes: FS_BYTES,
            data_file_bytes: DATA_FILE_BYTES,
            file_bytes: FILE_BYTES,
            extents: FILE_EXTENTS,
            discard: mode.discard(),
            alloc: simfs::AllocPolicy::Ext4Like,
            background: Some(mode != Mode::Trim),
            preemptive: Some(mode == Mode::FTrimPre),
            reads,
            read_think_ns: model.read_think_ns,
            seed,
            record: false,
        }
    }
}

/// Paper 002's scenario for `mode`.
pub fn run_once(mode: Mode, reads: u32, seed: u64) -> Result<ScenarioResult, crate::LabError> {
    run_scenario(&DeleteScenario::paper(mode, reads, seed)?)
}

/// The counts calibration needs, from a dry run of the file system: ranges TRIM sends,
/// mapping units they cover, metadata blocks fTrim reads.
pub fn deletion_shape() -> Result<(u64, u64, u64), crate::LabError> {
    let r = run_once(Mode::Trim, 0, 0)?;
    let f = run_once(Mode::FTrim, 0, 0)?;
    let e = |e: simfs::SimfsError| e.to_string();
    let mut fs = SimFs::mkfs(
        simfs::Recorder::new(32_000_000_000),
        FsConfig::new(FS_BYTES),
    )
    .map_err(e)?;
    let ino = fs
        .create_fragmented("f", FILE_BYTES, FILE_EXTENTS)
        .map_err(e)?;
    fs.sync().map_err(e)?;
    let blocks: u64 = fs
        .extents(ino)
        .map_err(e)?
        .iter()
        .map(|x| x.len as u64)
        .sum::<u64>()
        + fs.tree_blocks(ino).map_err(e)?.len() as u64;
    Ok((r.trim_commands, blocks, f.metadata_reads))
}

/// Paper 002, Fig. 3: the total time of a delete with `m` and `n` reads over TRIM's
/// (None: not reported).
fn paper_of(n: u32, m: Mode) -> Option<f64> {
    let row = PAPER_MIXED.iter().find(|r| r.reads == n)?;
    match m {
        Mode::Trim => Some(1.0),
        Mode::VTrim => row.vtrim,
        Mode::FTrim => row.ftrim,
        Mode::FTrimPre => row.ftrim_pre,
    }
}

/// The id of the verdict on the total time of a delete with `m` and `n` reads.
fn mixed_id(n: u32, m: Mode) -> String {
    let slug = m.name().to_lowercase().replace('_', "-");
    format!("trim.{slug}-{n}-reads")
}

/// The runs the section judges, on one model: each mode's delete alone, then its delete
/// followed by each number of reads.
struct Runs {
    /// The delete alone, in [`Mode::ALL`] order.
    delete: Vec<ScenarioResult>,
    /// (reads, total time of delete + reads per mode in [`Mode::ALL`] order).
    mixed: Vec<(u32, Vec<u64>)>,
}

impl Runs {
    /// The runs of `variant` (None: the section's own model) out of the plan's results.
    fn of(
        done: &Done<RunKey, ScenarioResult>,
        variant: Option<usize>,
        read_counts: &[u32],
    ) -> Runs {
        let key = |mode, reads| RunKey {
            variant,
            mode,
            reads,
            foreground: false,
        };
        Runs {
            delete: Mode::ALL
                .iter()
                .map(|&m| done.get(&key(m, 0)).clone())
                .collect(),
            mixed: read_counts
                .iter()
                .map(|&n| {
                    let totals = Mode::ALL.iter().map(|&m| done.get(&key(m, n)).total_ns);
                    (n, totals.collect())
                })
                .collect(),
        }
    }

    fn trim_delete_ns(&self) -> u64 {
        self.delete[0].interface_ns + self.delete[0].in_drive_ns
    }

    /// Each mode's interface time over TRIM's delete time, in [`Mode::ALL`] order (TRIM's
    /// own is its interface share).
    fn interface(&self) -> Vec<f64> {
        self.delete
            .iter()
            .map(|r| r.interface_ns as f64 / self.trim_delete_ns() as f64)
            .collect()
    }

    /// Each mode's delete time over TRIM's, in [`Mode::ALL`] order.
    fn delete_norm(&self) -> Vec<f64> {
        self.delete
            .iter()
            .map(|r| (r.interface_ns + r.in_drive_ns) as f64 / self.trim_delete_ns() as f64)
            .collect()
    }

    /// The total time of a delete with `m` and `n` reads over TRIM's (as judged).
    fn ours_of(&self, n: u32, m: Mode) -> f64 {
        let (_, totals) = self.mixed.iter().find(|r| r.0 == n).expect("ran");
        let i = Mode::ALL.iter().position(|&x| x == m).expect("a mode");
        totals[i] as f64 / totals[0] as f64
    }

    /// The section's verdicts on these runs.
    fn verdicts(&self) -> Vec<Verdict> {
        let read_counts: Vec<u32> = self.mixed.iter().map(|r| r.0).collect();
        analyse(
            &self.interface(),
            &self.delete_norm(),
            &read_counts,
            &|n, m| self.ours_of(n, m),
            &paper_of,
        )
    }
}

/// The four assumed costs the predictions rest on (the three calibrated ones are solved
/// around them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assumption {
    /// [`READ_THINK_NS`]: host time between reads.
    ReadThink,
    /// `trim.per_range_ns`: locating one range in the mapping table.
    PerRange,
    /// `trim.per_page_ns`: invalidating one 4 KiB unit.
    PerPage,
    /// `trim.record_ns`: recording a vTrim/fTrim before acknowledging it.
    Record,
}

impl Assumption {
    pub const ALL: [Assumption; 4] = [
        Assumption::ReadThink,
        Assumption::PerRange,
        Assumption::PerPage,
        Assumption::Record,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Assumption::ReadThink => "READ_THINK_NS",
            Assumption::PerRange => "trim.per_range_ns",
            Assumption::PerPage => "trim.per_page_ns",
            Assumption::Record => "trim.record_ns",
        }
    }

    pub fn value_ns(self, model: &Model) -> Result<u64, crate::LabError> {
        let t = &model.ssd()?.trim;
        Ok(match self {
            Assumption::ReadThink => model.read_think_ns,
            Assumption::PerRange => t.per_range_ns,
            Assumption::PerPage => t.per_page_ns,
            Assumption::Record => t.record_ns,
        })
    }

    /// `model` with this assumption set to `ns` (the calibrated costs as they were).
    pub fn with_ns(self, mut model: Model, ns: u64) -> Result<Model, crate::LabError> {
        match self {
            Assumption::ReadThink => model.read_think_ns = ns,
            Assumption::PerRange => model.ssd_mut()?.trim.per_range_ns = ns,
            Assumption::PerPage => model.ssd_mut()?.trim.per_page_ns = ns,
            Assumption::Record => model.ssd_mut()?.trim.record_ns = ns,
        }
        Ok(model)
    }
}

/// Each assumption is taken at these multiples of its value (name, factor).
pub const ASSUMPTION_FACTORS: [(&str, f64); 2] = [("¼×", 0.25), ("4×", 4.0)];

/// One assumption scaled, the others as they are, the three calibrated costs solved again.
struct Variant {
    assumption: Assumption,
    factor_name: &'static str,
    value_ns: u64,
    /// The costs solved under it and the runs, or why [`calibrate`] could not solve them.
    outcome: Result<(Calibration, Runs), String>,
}

impl Variant {
    fn label(&self) -> String {
        format!("{} {}", self.assumption.name(), self.factor_name)
    }
}

/// A variant's model before its runs: the model re-calibrated under it, or why it could not be.
struct VariantModel {
    assumption: Assumption,
    factor_name: &'static str,
    value_ns: u64,
    model: Result<(Model, Calibration), String>,
}

/// Every assumption at each of [`ASSUMPTION_FACTORS`], re-calibrated (to be run as the
/// section's own model is: same read counts, same seeds); `shape` is [`deletion_shape`]'s
/// counts.
fn variant_models(
    base: &Model,
    shape: (u64, u64, u64),
) -> Result<Vec<VariantModel>, crate::LabError> {
    let mut variants = Vec::new();
    for a in Assumption::ALL {
        for (factor_name, factor) in ASSUMPTION_FACTORS {
            let value_ns = (a.value_ns(base)? as f64 * factor).round() as u64;
            let model = a.with_ns(base.clone(), value_ns)?;
            variants.push(VariantModel {
                assumption: a,
                factor_name,
                value_ns,
                model: model.recalibrated(shape).map_err(|e| e.to_string()),
            });
        }
    }
    Ok(variants)
}

/// What one run of the section is: the model it runs on (a variant's index in
/// [`Setup::variants`], or None for the section's own), the discard mode, the reads after
/// the delete (0: the delete alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunKey {
    variant: Option<usize>,
    mode: Mode,
    reads: u32,
    /// vTrim or fTrim processed before the command is acknowledged (the paper's starting
    /// point, which §2.3 replaces with background processing).
    foreground: bool,
}

/// What the section runs on, before any run: the deletion's shape, the model and its
/// calibration, the read counts and the assumption variants.
struct Setup {
    shape: (u64, u64, u64),
    model: Model,
    /// The preset's calibrated costs, and what [`calibrate`] solves them to now.
    used: Calibration,
    solved: Calibration,
    read_counts: Vec<u32>,
    variants: Vec<VariantModel>,
}

impl Setup {
    fn new(scale: Scale) -> Result<Setup, crate::LabError> {
        let shape = deletion_shape()?;
        let model = Model::paper()?;
        let cfg = model.ssd()?;
        let solved = calibrate(cfg, shape.0, shape.1, shape.2)?;
        let used = Calibration {
            interface_ns: cfg.timing.command_overhead_ns,
            command_ns: cfg.trim.command_overhead_ns,
            parse_ns: cfg.trim.metadata_parse_ns,
        };
        let read_counts: Vec<u32> = match scale {
            Scale::Quick | Scale::Full | Scale::Paper => vec![20, 100, 1000],
        };
        let variants = variant_models(&model, shape)?;
        Ok(Setup {
            shape,
            model,
            used,
            solved,
            read_counts,
            variants,
        })
    }

    /// Every run: on the section's model and on each variant that calibrates, each mode's
    /// delete alone (`seed`), then its delete and each of the read counts (the k-th with
    /// seed `derive_seed(seed, k)`).
    fn plan(&self, seed: u64) -> Plan<RunKey, DeleteScenario> {
        let mut plan = Plan::new();
        let models = std::iter::once((None, &self.model)).chain(
            self.variants
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.model.as_ref().ok().map(|(m, _)| (Some(i), m))),
        );
        for (variant, model) in models {
            let reads = std::iter::once((0, seed)).chain(
                self.read_counts
                    .iter()
                    .enumerate()
                    .map(|(k, &n)| (n, derive_seed(seed, k as u64))),
            );
            for (n, seed) in reads {
                for mode in Mode::ALL {
                    let key = RunKey {
                        variant,
                        mode,
                        reads: n,
                        foreground: false,
                    };
                    plan.add(key, DeleteScenario::of_model(model, mode, n, seed));
                }
            }
        }
        // vTrim and fTrim in the foreground, with the first read count's reads and seed.
        let n = self.read_counts[0];
        for mode in [Mode::VTrim, Mode::FTrim] {
            let key = RunKey {
                variant: None,
                mode,
                reads: n,
                foreground: true,
            };
            let mut sc = DeleteScenario::of_model(&self.model, mode, n, derive_seed(seed, 0));
            sc.background = Some(false);
            sc.preemptive = Some(false);
            plan.add(key, sc);
        }
        plan
    }

    /// Each variant with its runs (or why it could not be calibrated).
    fn variants(&self, done: &Done<RunKey, ScenarioResult>) -> Vec<Variant> {
        self.variants
            .iter()
            .enumerate()
            .map(|(i, v)| Variant {
                assumption: v.assumption,
                factor_name: v.factor_name,
                value_ns: v.value_ns,
                outcome: match &v.model {
                    Ok((_, cal)) => Ok((*cal, Runs::of(done, Some(i), &self.read_counts))),
                    Err(e) => Err(e.clone()),
                },
            })
            .collect()
    }
}

/// Whether each predicted verdict holds, in the order of `verdicts` (id, holds).
fn predictions(verdicts: &[Verdict]) -> Vec<(String, bool)> {
    verdicts
        .iter()
        .filter(|v| v.score.as_ref().is_some_and(|s| s.role == Role::Predicted))
        .map(|v| (v.id().to_string(), v.holds))
        .collect()
}

/// Table `assumptions`: the baseline's predictions and each variant's, with the paper's
/// numbers in the headers; and a sentence, computed from it, on which predictions keep
/// their holds/fails under every variant and which flip.
fn assumptions_table(used: &Calibration, baseline: &Runs, variants: &[Variant]) -> (Table, String) {
    let judged = predictions(&baseline.verdicts());
    let mixed_of = |id: &str| mixed_case(baseline, id);
    let mut headers: Vec<String> = [
        "variant",
        "value",
        "calibrated I / C / P ns",
        "calibrated numbers hold",
    ]
    .map(String::from)
    .to_vec();
    for (id, _) in &judged {
        let name = id.trim_start_matches("trim.");
        headers.push(match mixed_of(id).and_then(|(n, m)| paper_of(n, m)) {
            Some(p) => format!("{name} (total / TRIM; paper {p:.3})"),
            None => name.to_string(),
        });
    }
    headers.push("predictions holding".into());
    let mut t = Table {
        file_stem: "assumptions".into(),
        caption: format!(
            "Sensitivity of the predictions to the four assumed costs: each at {} its value, the others as they are, \
             the three calibrated costs (interface round trip I, firmware per command C, parse per metadata block P) \
             solved again for it; each prediction as the verdicts judge it (total time of delete + reads over TRIM's), \
             the paper's value in its header",
            ASSUMPTION_FACTORS.map(|f| f.0).join(" and ")
        ),
        headers,
        rows: vec![],
    };
    let (base_row, base_holds) =
        assumption_row("baseline (as assumed)".into(), "—".into(), used, baseline);
    t.rows.push(base_row);
    // Per prediction, the variants under which it holds/fails otherwise than at baseline.
    let mut flips: Vec<Vec<String>> = vec![vec![]; base_holds.len()];
    let mut uncalibrated = Vec::new();
    for v in variants {
        let value = format!("{} ns", v.value_ns);
        match &v.outcome {
            Ok((cal, runs)) => {
                let (r, holds) = assumption_row(v.label(), value, cal, runs);
                t.rows.push(r);
                for (k, ((_, b), (_, h))) in base_holds.iter().zip(&holds).enumerate() {
                    if b != h {
                        flips[k].push(v.label());
                    }
                }
            }
            Err(e) => {
                let mut r = vec![v.label(), value, e.clone()];
                r.resize(t.headers.len(), "—".into());
                t.rows.push(r);
                uncalibrated.push(v.label());
            }
        }
    }
    let calibrated_count = variants.len() - uncalibrated.len();
    let sentence = sensitivity_sentence(&base_holds, &flips, calibrated_count, &uncalibrated);
    (t, sentence)
}

/// The (reads, mode) a prediction's id judges, or None for an ordering.
fn mixed_case(runs: &Runs, id: &str) -> Option<(u32, Mode)> {
    runs.mixed
        .iter()
        .flat_map(|(n, _)| Mode::ALL[1..].iter().map(move |&m| (*n, m)))
        .find(|&(n, m)| mixed_id(n, m) == id)
}

fn holds_word(holds: bool) -> &'static str {
    if holds {
        "holds"
    } else {
        "fails"
    }
}

/// A row of table `assumptions` for one model's runs, and its predictions (id, holds).
fn assumption_row(
    label: String,
    value: String,
    cal: &Calibration,
    runs: &Runs,
) -> (Vec<String>, Vec<(String, bool)>) {
    let verdicts = runs.verdicts();
    let calibrated = verdicts
        .iter()
        .filter(|v| v.score.as_ref().is_some_and(|s| s.role == Role::Calibrated));
    let (cal_holding, cal_all) = calibrated.fold((0, 0), |(h, n), v| (h + v.holds as usize, n + 1));
    let mut r = vec![
        label,
        value,
        format!(
            "{} / {} / {}",
            cal.interface_ns, cal.command_ns, cal.parse_ns
        ),
        format!("{cal_holding} of {cal_all}"),
    ];
    let these = predictions(&verdicts);
    for (id, holds) in &these {
        r.push(match mixed_case(runs, id) {
            Some((n, m)) => format!("{:.3} {}", runs.ours_of(n, m), holds_word(*holds)),
            None => holds_word(*holds).into(),
        });
    }
    let holding = these.iter().filter(|p| p.1).count();
    r.push(format!("{holding} of {}", these.len()));
    (r, these)
}

/// Which predictions keep holding or failing under every variant that calibrates and which
/// flip (`flips[k]`: the variants under which `base_holds[k]` flips).
fn sensitivity_sentence(
    base_holds: &[(String, bool)],
    flips: &[Vec<String>],
    calibrated_count: usize,
    uncalibrated: &[String],
) -> String {
    let list = |ids: Vec<&str>| {
        if ids.is_empty() {
            "none".to_string()
        } else {
            ids.join(", ")
        }
    };
    let kept = |holds: bool| {
        list(
            base_holds
                .iter()
                .zip(flips)
                .filter(|((_, b), f)| *b == holds && f.is_empty())
                .map(|((id, _), _)| id.as_str())
                .collect(),
        )
    };
    let flipped: Vec<String> = base_holds
        .iter()
        .zip(flips)
        .filter(|(_, f)| !f.is_empty())
        .map(|((id, b), f)| {
            format!(
                "{id} ({} at baseline, {} under {})",
                holds_word(*b),
                holds_word(!*b),
                f.join(", ")
            )
        })
        .collect();
    let mut sentence = format!(
        "Table `assumptions` takes each of the four at {} (re-calibrated each time): across the baseline and \
         the {calibrated_count} variants that calibrate, these keep holding: {}; these keep failing: {}; these flip: {}",
        ASSUMPTION_FACTORS.map(|f| f.0).join(" and "),
        kept(true),
        kept(false),
        if flipped.is_empty() { "none".to_string() } else { flipped.join("; ") }
    );
    if !uncalibrated.is_empty() {
        sentence += &format!(
            ". Cannot be calibrated (the paper's numbers would need negative costs): {}",
            uncalibrated.join(", ")
        );
    }
    sentence
}

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    let setup = Setup::new(scale)?;
    let done = ctx.run_plan(setup.plan(seed), run_scenario)?;
    let runs = Runs::of(&done, None, &setup.read_counts);
    let variants = setup.variants(&done);
    let (t5, sensitivity_sentence) = assumptions_table(&setup.used, &runs, &variants);
    let (ranges, _, metadata_blocks) = setup.shape;
    let processing = processing_rows(&done, setup.read_counts[0]);
    let mut verdicts = runs.verdicts();
    verdicts.push(foreground_verdict(&processing));
    Ok(Section {
        id: "trim".into(),
        title: "TRIM, vTrim and fTrim: deleting a fragmented file (paper 002)".into(),
        question: format!(
            "How much of a file deletion's cost is the host interface, and how much do vectored and file-based TRIM \
             save? simfs (ext4-like, {} GB) on the openssd preset holds a {} MiB data file and a {} MB file of {} extents, \
             which is deleted with one TRIM per extent ({} commands with the extent leaf block), one vTrim, one fTrim \
             (the drive reads {} metadata blocks), or fTrim with preemptive background processing. vTrim and fTrim are \
             acknowledged once recorded and do their mapping work in idle time.",
            FS_BYTES >> 30,
            DATA_FILE_BYTES >> 20,
            FILE_BYTES >> 20,
            FILE_EXTENTS,
            ranges,
            metadata_blocks
        ),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots: plots(&runs, &setup.read_counts),
        tables: vec![
            delete_table(&runs),
            mixed_table(&runs),
            processing_table(processing, setup.read_counts[0]),
            calibration_table(&setup),
            additive_table(),
            t5,
        ],
        verdicts,
        provenance: provenance(&setup, &sensitivity_sentence)?,
        results: results_json(&setup, &runs, &variants),
    })
}

/// Paper 002, Fig. 2's delete times over TRIM's, in [`Mode::ALL`] order (None: not reported).
const PAPER_DELETE: [Option<f64>; 4] = [
    Some(1.0),
    Some(PAPER_VTRIM_DELETE),
    Some(PAPER_FTRIM_DELETE),
    None,
];

/// A row of table `delete`: one mode's delete alone.
struct DeleteRow<'a> {
    mode: Mode,
    result: &'a ScenarioResult,
    /// Its delete time over TRIM's.
    norm: f64,
    paper: Option<f64>,
}

impl Row for DeleteRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "mode",
        "commands",
        "interface ms",
        "in-drive ms",
        "delete ms",
        "ours vs TRIM",
        "paper vs TRIM",
        "metadata reads",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.result;
        vec![
            self.mode.name().into(),
            Cell::Count(r.trim_commands),
            Cell::ms(r.interface_ns, 3),
            Cell::ms(r.in_drive_ns, 3),
            Cell::ms(r.interface_ns + r.in_drive_ns, 3),
            Cell::Fixed(self.norm, 3),
            Cell::opt(self.paper, 2),
            Cell::Count(r.metadata_reads),
        ]
    }
}

/// Table `delete`: part 1, the delete alone.
fn delete_table(runs: &Runs) -> Table {
    let norm = runs.delete_norm();
    let rows = Mode::ALL.iter().enumerate().map(|(i, &mode)| DeleteRow {
        mode,
        result: &runs.delete[i],
        norm: norm[i],
        paper: PAPER_DELETE[i],
    });
    let caption = format!(
        "Deleting a {} MB file of {} extents",
        FILE_BYTES >> 20,
        FILE_EXTENTS
    );
    Table::of("delete", caption, rows)
}

/// A row of table `mixed`: one mode's delete followed by `reads` reads.
struct MixedRow {
    reads: u32,
    mode: Mode,
    total_ns: u64,
    ours: f64,
    paper: Option<f64>,
}

impl Row for MixedRow {
    const COLUMNS: &'static [&'static str] =
        &["reads", "mode", "total ms", "ours vs TRIM", "paper vs TRIM"];
    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::Count(self.reads.into()),
            self.mode.name().into(),
            Cell::ms(self.total_ns, 3),
            Cell::Fixed(self.ours, 3),
            Cell::opt(self.paper, 3),
        ]
    }
}

/// Table `mixed`: part 2, the delete and reads.
fn mixed_table(runs: &Runs) -> Table {
    let rows = runs.mixed.iter().flat_map(|(n, totals)| {
        Mode::ALL
            .iter()
            .enumerate()
            .map(move |(i, &mode)| MixedRow {
                reads: *n,
                mode,
                total_ns: totals[i],
                ours: runs.ours_of(*n, mode),
                paper: paper_of(*n, mode),
            })
    });
    let caption = format!(
        "Delete, then N random 4 KiB reads ({} µs host time between reads): total time",
        READ_THINK_NS / 1000
    );
    Table::of("mixed", caption, rows)
}

/// One delete with the first read count's reads, by how its in-drive work is processed.
struct ProcessingRow<'a> {
    mode: Mode,
    processing: &'static str,
    result: &'a ScenarioResult,
    /// Its total time over TRIM's with the same reads.
    ours: f64,
}

impl Row for ProcessingRow<'_> {
    const COLUMNS: &'static [&'static str] = &[
        "mode",
        "processing",
        "delete returns after ms",
        "in-drive ms",
        "longest read ms",
        "total ms",
        "ours vs TRIM",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self.result;
        vec![
            self.mode.name().into(),
            self.processing.into(),
            Cell::ms(r.returned_ns, 3),
            Cell::ms(r.in_drive_ns, 3),
            Cell::ms(r.read_latency_ns.max, 3),
            Cell::ms(r.total_ns, 3),
            Cell::Fixed(self.ours, 3),
        ]
    }
}

/// vTrim and fTrim processed in the foreground (before the acknowledgement), in the
/// background, and (fTrim) in the background with preemption, each followed by `reads`
/// reads: out of the plan's results.
fn processing_rows(done: &Done<RunKey, ScenarioResult>, reads: u32) -> Vec<ProcessingRow<'_>> {
    let get = |mode, foreground| {
        done.get(&RunKey {
            variant: None,
            mode,
            reads,
            foreground,
        })
    };
    let trim_total = get(Mode::Trim, false).total_ns as f64;
    [
        (Mode::VTrim, "foreground", true),
        (Mode::VTrim, "background", false),
        (Mode::FTrim, "foreground", true),
        (Mode::FTrim, "background", false),
        (Mode::FTrimPre, "background, preemptive", false),
    ]
    .into_iter()
    .map(|(mode, processing, foreground)| {
        let result = get(mode, foreground);
        ProcessingRow {
            mode,
            processing,
            result,
            ours: result.total_ns as f64 / trim_total,
        }
    })
    .collect()
}

/// Table `processing`: why the paper processes vTrim and fTrim in the background (§2.3).
fn processing_table(rows: Vec<ProcessingRow<'_>>, reads: u32) -> Table {
    let caption =
        format!("Foreground, background and preemptive processing: the delete, then {reads} reads");
    Table::of("processing", caption, rows)
}

/// Check: in the foreground vTrim and fTrim hold the host until their in-drive work is
/// done (paper 002 §2.3, its reason for background processing).
fn foreground_verdict(rows: &[ProcessingRow<'_>]) -> Verdict {
    let row = |mode, processing| {
        rows.iter()
            .find(|r| r.mode == mode && r.processing == processing)
            .expect("a processing row")
            .result
    };
    let (vf, vb) = (
        row(Mode::VTrim, "foreground"),
        row(Mode::VTrim, "background"),
    );
    let (ff, fb) = (
        row(Mode::FTrim, "foreground"),
        row(Mode::FTrim, "background"),
    );
    let blocks = |fg: &ScenarioResult, bg: &ScenarioResult| {
        fg.returned_ns >= fg.in_drive_ns && bg.returned_ns < fg.returned_ns
    };
    let ms = |ns: u64| format!("{:.3} ms", ns as f64 / 1e6);
    Verdict::ordering(
        "trim.foreground-blocks-host",
        "Check: processed in the foreground, vTrim and fTrim hold the host until their in-drive work is done; \
         in the background the delete returns once recorded — not a prediction: the paper states it as the \
         reason for background processing (§2.3), and in this model a foreground command returns after its \
         work by definition",
        "vTrim/fTrim block host reads and writes while processing (§2.3)",
        ff.returned_ns as f64 / fb.returned_ns.max(1) as f64,
        blocks(vf, vb) && blocks(ff, fb),
        format!(
            "the delete returns after {} (vTrim) and {} (fTrim) in the foreground, {} and {} in the background; \
             without preemption the first read then waits for the background work (longest read {} and {})",
            ms(vf.returned_ns),
            ms(ff.returned_ns),
            ms(vb.returned_ns),
            ms(fb.returned_ns),
            ms(vb.read_latency_ns.max),
            ms(fb.read_latency_ns.max)
        ),
    )
    .with_role(Role::Check)
}

/// A row of table `calibration`: one calibrated parameter.
struct CalibrationRow {
    parameter: &'static str,
    preset_ns: u64,
    solved_ns: u64,
}

impl Row for CalibrationRow {
    const COLUMNS: &'static [&'static str] = &["parameter", "preset value ns", "solved now ns"];
    fn cells(&self) -> Vec<Cell> {
        vec![
            self.parameter.into(),
            Cell::Count(self.preset_ns),
            Cell::Count(self.solved_ns),
        ]
    }
}

/// Table `calibration`: the three calibrated costs, in the preset and solved now.
fn calibration_table(setup: &Setup) -> Table {
    let (used, cal) = (&setup.used, &setup.solved);
    let row = |parameter, preset_ns, solved_ns| CalibrationRow {
        parameter,
        preset_ns,
        solved_ns,
    };
    Table::of(
        "calibration",
        "Calibrated drive parameters (solved from the paper's three delete-time numbers)",
        [
            row(
                "timing.command_overhead_ns (interface round trip)",
                used.interface_ns,
                cal.interface_ns,
            ),
            row(
                "trim.command_overhead_ns (firmware per command)",
                used.command_ns,
                cal.command_ns,
            ),
            row(
                "trim.metadata_parse_ns (per fTrim metadata block)",
                used.parse_ns,
                cal.parse_ns,
            ),
        ],
    )
}

/// The section's two figures: the delete alone, and delete + reads, each over TRIM's.
fn plots(runs: &Runs, read_counts: &[u32]) -> Vec<crate::report::Plot> {
    let mixed = |n: u32| Mode::ALL[1..].iter().map(move |&m| (n, m));
    let cases: Vec<(u32, Mode)> = read_counts.iter().flat_map(|&n| mixed(n)).collect();
    vec![
        BarPlot {
            file_stem: "delete".into(),
            title: "Delete time of a 10 MB, 160-extent file, normalised to TRIM".into(),
            y_label: "delete time / TRIM".into(),
            categories: Mode::ALL.iter().map(|m| m.name().to_string()).collect(),
            series: vec![
                ("paper 002".into(), PAPER_DELETE.to_vec()),
                (
                    "flashlab".into(),
                    runs.delete_norm().iter().map(|&x| Some(x)).collect(),
                ),
            ],
        }
        .into(),
        BarPlot {
            file_stem: "mixed".into(),
            title: "Delete + N reads, total time normalised to TRIM".into(),
            y_label: "total time / TRIM".into(),
            categories: cases
                .iter()
                .map(|(n, m)| format!("{n}: {}", m.name()))
                .collect(),
            series: vec![
                (
                    "paper 002".into(),
                    cases.iter().map(|&(n, m)| paper_of(n, m)).collect(),
                ),
                (
                    "flashlab".into(),
                    cases
                        .iter()
                        .map(|&(n, m)| Some(runs.ours_of(n, m)))
                        .collect(),
                ),
            ],
        }
        .into(),
    ]
}

/// Where each paper number enters: the three calibrated ones, and the predicted ones with
/// the assumptions they rest on and how they move with them.
fn provenance(
    setup: &Setup,
    sensitivity_sentence: &str,
) -> Result<Vec<Provenance>, crate::LabError> {
    let (used, cfg) = (&setup.used, setup.model.ssd()?);
    Ok(vec![
        Provenance {
            number: "43% / 57% TRIM split".into(),
            role: format!("calibrated: sets the interface round trip of every command ({} ns)", used.interface_ns),
        },
        Provenance {
            number: "vTrim −63%".into(),
            role: format!("calibrated: sets the firmware cost per TRIM-family command ({} ns)", used.command_ns),
        },
        Provenance {
            number: "fTrim −42%".into(),
            role: format!("calibrated: sets the parse cost per fTrim metadata block ({} ns, on top of its flash read)", used.parse_ns),
        },
        Provenance {
            number: "delete + 20 / 100 / 1000 reads (vTrim, fTrim, fTrim_pre)".into(),
            role: format!(
                "predicted by the model; assumptions: {} µs host time between reads, {} µs per range, {} µs per 4 KiB unit, {} µs to record a vTrim/fTrim",
                READ_THINK_NS / 1000,
                cfg.trim.per_range_ns / 1000,
                cfg.trim.per_page_ns / 1000,
                cfg.trim.record_ns / 1000
            ) + ". " + sensitivity_sentence,
        },
    ])
}

/// The section's numbers for scripts (`results.json`).
fn results_json(setup: &Setup, runs: &Runs, variants: &[Variant]) -> serde_json::Value {
    let (ranges, units, metadata_blocks) = setup.shape;
    let (used, cal) = (&setup.used, &setup.solved);
    let normalised = |t: &[u64]| {
        t.iter()
            .map(|&x| x as f64 / t[0] as f64)
            .collect::<Vec<_>>()
    };
    json!({
        "ranges": ranges, "units": units, "metadata_blocks": metadata_blocks,
        "calibration_preset_ns": {"interface": used.interface_ns, "command": used.command_ns, "parse": used.parse_ns},
        "calibration_solved_ns": {"interface": cal.interface_ns, "command": cal.command_ns, "parse": cal.parse_ns},
        "delete": Mode::ALL.iter().zip(&runs.delete).zip(&runs.delete_norm()).map(|((m, r), norm)| json!({"mode": m.name(), "commands": r.trim_commands, "interface_ns": r.interface_ns, "in_drive_ns": r.in_drive_ns, "normalised": norm})).collect::<Vec<_>>(),
        "mixed": runs.mixed.iter().map(|(n, t)| json!({"reads": n, "total_ns": t, "normalised": normalised(t)})).collect::<Vec<_>>(),
        "paper": {"trim_interface_share": PAPER_TRIM_INTERFACE_SHARE, "vtrim_delete": PAPER_VTRIM_DELETE, "ftrim_delete": PAPER_FTRIM_DELETE,
                  "mixed": PAPER_MIXED.iter().map(|r| json!({"reads": r.reads, "vtrim": r.vtrim, "ftrim": r.ftrim, "ftrim_pre": r.ftrim_pre})).collect::<Vec<_>>()},
        "assumptions": variants.iter().map(|v| match &v.outcome {
            Ok((cal, runs)) => json!({"assumption": v.assumption.name(), "factor": v.factor_name, "value_ns": v.value_ns,
                "calibration_ns": {"interface": cal.interface_ns, "command": cal.command_ns, "parse": cal.parse_ns},
                "mixed": runs.mixed.iter().map(|(n, t)| json!({"reads": n, "normalised": normalised(t)})).collect::<Vec<_>>(),
                "predictions": predictions(&runs.verdicts()).into_iter().map(|(id, holds)| json!({"id": id, "holds": holds})).collect::<Vec<_>>()}),
            Err(e) => json!({"assumption": v.assumption.name(), "factor": v.factor_name, "value_ns": v.value_ns, "error": e}),
        }).collect::<Vec<_>>(),
    })
}

/// The verdicts: `interface_share` of TRIM's delete time, each mode's delete time over
/// TRIM's (`delete_norm`, in [`Mode::ALL`] order), and `ours_of(reads, mode)` /
/// `paper_of(reads, mode)` the total time of a delete and `reads` reads over TRIM's.
fn analyse(
    interface: &[f64],
    delete_norm: &[f64],
    read_counts: &[u32],
    ours_of: &dyn Fn(u32, Mode) -> f64,
    paper_of: &dyn Fn(u32, Mode) -> Option<f64>,
) -> Vec<Verdict> {
    let mut v = delete_verdicts(interface, delete_norm);
    v.extend(mixed_verdicts(delete_norm, read_counts, ours_of, paper_of));
    v.extend(ordering_verdicts(ours_of));
    v
}

/// `+12.3%` for 1.123.
fn pct(x: f64) -> String {
    format!("{:+.1}%", (x - 1.0) * 100.0)
}

/// A total time over TRIM's (`x`) as words: "36.0% less time than TRIM",
/// "0.1% more time than TRIM".
fn than_trim(x: f64) -> String {
    let d = (x - 1.0) * 100.0;
    if d.abs() < 0.05 {
        "as long as TRIM".into()
    } else {
        format!(
            "{:.1}% {} time than TRIM",
            d.abs(),
            if d < 0.0 { "less" } else { "more" }
        )
    }
}

/// The delete alone: the three calibrated numbers, and the check that follows from them.
/// The delete alone: `interface` and `delete_norm` each mode's interface time and delete
/// time over TRIM's delete time, in [`Mode::ALL`] order.
fn delete_verdicts(interface: &[f64], delete_norm: &[f64]) -> Vec<Verdict> {
    let (vtrim, ftrim) = (delete_norm[1], delete_norm[2]);
    let interface_share = interface[0];
    // Fig. 2 and section 3: vTrim and fTrim send the whole delete in one command, so their
    // interface time shrinks; fTrim, sending only the inode, "reduces the interface
    // overhead more than vTrim".
    let (if_v, if_f) = (
        interface[1] / interface_share,
        interface[2] / interface_share,
    );
    let one_command = Verdict::ordering(
        "trim.one-command-interface",
        "Check: vTrim and fTrim each spend under a tenth of TRIM's interface time, fTrim no more than vTrim (Fig. 2; \"fTrim reduces the interface overhead more than vTrim\") — not a prediction: one command against one per extent, and both send one write to the reserved last page",
        "one command each; fTrim ≤ vTrim",
        if_v.max(if_f),
        if_v < 0.1 && if_f < 0.1 && if_f <= if_v * (1.0 + 1e-9),
        format!(
            "interface time over TRIM's: vTrim {:.3}, fTrim {:.3}",
            if_v, if_f
        ),
    )
    .with_role(Role::Check);
    vec![
        one_command,
        Verdict::numeric(
            "trim.interface-share",
            "Calibrated: TRIM's delete time splits 43% interface / 57% in the drive",
            "43% / 57% (paper 002, Fig. 2)",
            interface_share,
            PAPER_TRIM_INTERFACE_SHARE,
            0.05,
            format!(
                "{:.1}% / {:.1}%",
                interface_share * 100.0,
                (1.0 - interface_share) * 100.0
            ),
        )
        .with_role(Role::Calibrated),
        Verdict::numeric(
            "trim.vtrim-delete",
            "Calibrated: vTrim deletes the file 63% faster than TRIM",
            "−63%",
            1.0 - vtrim,
            1.0 - PAPER_VTRIM_DELETE,
            0.05,
            pct(vtrim),
        )
        .with_role(Role::Calibrated),
        Verdict::numeric(
            "trim.ftrim-delete",
            "Calibrated: fTrim deletes it 42% faster than TRIM",
            "−42%",
            1.0 - ftrim,
            1.0 - PAPER_FTRIM_DELETE,
            0.05,
            pct(ftrim),
        )
        .with_role(Role::Calibrated),
        Verdict::ordering(
            "trim.ftrim-slower-than-vtrim",
            "Check: fTrim deletes slower than vTrim (its metadata flash reads) — not a prediction: it follows from the two calibrated deletes",
            "−42% vs −63%",
            ftrim / vtrim,
            ftrim > vtrim,
            format!("fTrim {} vs vTrim {}", pct(ftrim), pct(vtrim)),
        )
        .with_role(Role::Check),
    ]
}

/// Each mixed-workload number on its own (see [`analyse`]).
fn mixed_verdicts(
    delete_norm: &[f64],
    read_counts: &[u32],
    ours_of: &dyn Fn(u32, Mode) -> f64,
    paper_of: &dyn Fn(u32, Mode) -> Option<f64>,
) -> Vec<Verdict> {
    let mut v = Vec::new();
    // Each mixed-workload number on its own. The two headline ones as the paper words
    // them (relative reduction of the total time, ±30%); the others as total time over
    // TRIM's, within 10%.
    for &n in read_counts {
        for &m in &Mode::ALL[1..] {
            let Some(paper) = paper_of(n, m) else {
                continue;
            };
            let ours = ours_of(n, m);
            let id = mixed_id(n, m);
            let claim = format!(
                "Predicted: with {n} reads after the delete, {} takes {} (the delete and the reads together), its delete alone being faster than TRIM's",
                m.name(),
                than_trim(paper)
            );
            let measured = format!(
                "{} (its delete alone: {})",
                pct(ours),
                pct(delete_norm[Mode::ALL.iter().position(|&x| x == m).expect("a mode")])
            );
            let headline = n == 20 && matches!(m, Mode::VTrim | Mode::FTrimPre);
            // The mode's delete alone must be faster than TRIM's: a number near TRIM's with
            // reads after it (fTrim's −7%, −0.1%) says something only beside that gain; a
            // model where no mode gains anything would pass it alone.
            let delete_gains =
                delete_norm[Mode::ALL.iter().position(|&x| x == m).expect("a mode")] < 0.9;
            let mut verdict = if headline {
                Verdict::numeric(
                    &id,
                    &claim,
                    &pct(paper),
                    1.0 - ours,
                    1.0 - paper,
                    0.3,
                    measured,
                )
            } else {
                Verdict::numeric(&id, &claim, &pct(paper), ours, paper, 0.1, measured)
            };
            verdict.holds &= delete_gains;
            verdict = verdict.if_missed(if delete_gains {
                mixed_miss(n, m, paper, ours)
            } else {
                format!("{}'s delete alone gains nothing over TRIM's here", m.name())
            });
            // A number a model without contention already reaches is not a prediction.
            let no_contention = without_contention(n, m).filter(|&null| {
                let null_score = Score {
                    ours: Some(if headline { 1.0 - null } else { null }),
                    ..verdict.score.clone().expect("numeric")
                };
                null_score.within()
            });
            if let Some(null) = no_contention {
                verdict = verdict.with_role(Role::Check);
                verdict.claim = format!(
                    "Check: with {n} reads after the delete, {} takes {} (the delete and the reads together) — not a prediction: without contention between the reads and the deletion's work (additive timing on the paper's own delete times) it takes {}, already within its tolerance",
                    m.name(),
                    than_trim(paper),
                    than_trim(null)
                );
            }
            v.push(verdict);
        }
    }
    v
}

/// The orderings of the delete + reads totals.
fn ordering_verdicts(ours_of: &dyn Fn(u32, Mode) -> f64) -> Vec<Verdict> {
    let mut v = Vec::new();
    let (v20, v1000) = (ours_of(20, Mode::VTrim), ours_of(1000, Mode::VTrim));
    let (f20, p20) = (ours_of(20, Mode::FTrim), ours_of(20, Mode::FTrimPre));
    v.push(
        Verdict::ordering(
            "trim.vtrim-gain-shrinks",
            "Check: vTrim's gain shrinks as reads follow (20 → 1000 reads) — not a prediction: with the delete's gain fixed, more reads after it shrink its share in any additive model",
            "−36% → −12%",
            v1000 / v20,
            v1000 > v20,
            format!("{} → {}", pct(v20), pct(v1000)),
        )
        .with_role(Role::Check),
    );
    v.push(
        Verdict::ordering(
            "trim.ftrim-gains-less-than-vtrim",
            "Check: without preemption fTrim gains less than vTrim (20 reads) — not a prediction: with the same reads after each, it follows from the two calibrated deletes (fTrim's −42% against vTrim's −63%) under any additive timing",
            "fTrim −7% vs vTrim −36%",
            f20 / v20,
            f20 > v20,
            format!("fTrim {} vs vTrim {}", pct(f20), pct(v20)),
        )
        .with_role(Role::Check),
    );
    v.push(Verdict::ordering(
        "trim.vtrim-beats-ftrim-pre-20",
        "Delete + 20 reads: vTrim gains more than fTrim with background processing and preemption (fTrim_pre): an ordering",
        "vTrim −36% vs fTrim_pre −29%",
        v20 / p20,
        v20 < p20,
        format!(
            "vTrim {} vs fTrim_pre {}. In this model fTrim_pre's background work yields to every read, so only the \
             metadata reads it could not hide cost anything",
            pct(v20),
            pct(p20)
        ),
    )
    .if_missed(
        "work the preemption does not hide: the paper's numbers need the reads after an fTrim to be ~1.4× \
         slower than after a TRIM (table `additive`), background metadata work that contends with them, which \
         this model does not have",
    ));
    v.push(
        Verdict::ordering(
            "trim.preemption-helps",
            "Check: preemption lets reads pass fTrim's background work (20 reads) — not a prediction: in this model a read never waits for preemptible work, so it holds by construction",
            "fTrim_pre −29% vs fTrim −7%",
            p20 / f20,
            p20 < f20,
            format!("fTrim_pre {} vs fTrim {}", pct(p20), pct(f20)),
        )
        .with_role(Role::Check),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreground_processing_holds_the_host_and_background_alone_does_not_free_the_reads() {
        let run = |background: bool, preemptive: bool| {
            let mut sc = DeleteScenario::paper(Mode::FTrim, 20, 7).unwrap();
            sc.background = Some(background);
            sc.preemptive = Some(preemptive);
            run_scenario(&sc).unwrap()
        };
        let (fg, bg, pre) = (run(false, false), run(true, false), run(true, true));
        // In the foreground the unlink returns only after the drive's work.
        assert!(fg.returned_ns >= fg.in_drive_ns, "{fg:?}");
        // In the background it returns once recorded, far sooner.
        assert!(bg.returned_ns * 10 < fg.returned_ns, "{bg:?} vs {fg:?}");
        // Without preemption the first read waits for the work in progress ...
        assert!(bg.read_latency_ns.max >= bg.in_drive_ns, "{bg:?}");
        // ... with it, no read waits for more than a slice of it.
        assert!(
            pre.read_latency_ns.max * 4 < bg.read_latency_ns.max,
            "{pre:?}"
        );
        assert!(pre.total_ns < bg.total_ns);
    }

    #[test]
    fn additive_timing_cannot_give_the_papers_five_numbers() {
        let t = additive_table();
        let row = |name: &str| t.rows.iter().find(|r| r[0] == name).unwrap().clone();
        let num = |s: &str| s.trim_end_matches('×').parse::<f64>().unwrap();
        // 20 reads = 0.75 TRIM deletes: vTrim at 1,000 reads then gains 1.6%, not 12%.
        assert!((num(&row("vTrim, 1000")[2]) - 0.984).abs() < 0.001);
        // fTrim at 20 reads would gain 24%, not 7%: its reads must be ~1.4x slower.
        assert!((num(&row("fTrim, 20")[2]) - 0.760).abs() < 0.001);
        assert!((num(&row("fTrim, 20")[3]) - 1.40).abs() < 0.01);
        assert!((num(&row("fTrim, 100")[2]) - 0.912).abs() < 0.001);
        // vTrim at 20 reads is the number the reads' cost came from: it matches itself.
        assert_eq!(row("vTrim, 20")[1], row("vTrim, 20")[2]);
    }

    #[test]
    fn preset_holds_the_calibrated_values() {
        let (ranges, units, metadata_blocks) = deletion_shape().unwrap();
        assert_eq!(
            (ranges, units, metadata_blocks),
            (160, 2561, 4),
            "160 TRIMs: the extent leaf block merges with the last extent"
        );
        let p = Preset::load("openssd").unwrap();
        let flash::DeviceConfig::Ssd(cfg) = &p.device else {
            panic!("openssd is an SSD")
        };
        let cal = calibrate(cfg, ranges, units, metadata_blocks).unwrap();
        let close = |a: u64, b: u64| a.abs_diff(b) <= 1_000;
        assert!(
            close(cfg.timing.command_overhead_ns, cal.interface_ns)
                && close(cfg.trim.command_overhead_ns, cal.command_ns)
                && close(cfg.trim.metadata_parse_ns, cal.parse_ns),
            "presets/openssd.toml is out of date: the calibration now gives {cal:?}"
        );
    }

    #[test]
    fn assumptions_table_has_a_row_per_variant_and_the_think_time_matters() {
        let ctx = super::super::RunCtx::default();
        let setup = Setup::new(Scale::Quick).unwrap();
        let (shape, model) = (setup.shape, setup.model.clone());
        let (_, used) = model.clone().recalibrated(shape).unwrap();
        let reads = [20, 100, 1000];
        assert_eq!(setup.read_counts, reads);
        let done = ctx.run_plan(setup.plan(7), run_scenario).unwrap();
        let baseline = Runs::of(&done, None, &reads);
        let mut variants = setup.variants(&done);
        assert_eq!(
            variants.len(),
            Assumption::ALL.len() * ASSUMPTION_FACTORS.len()
        );
        let (t, sentence) = assumptions_table(&used, &baseline, &variants);
        assert_eq!(
            t.rows.len(),
            variants.len() + 1,
            "one row per variant and the baseline"
        );
        assert!(t.rows.iter().all(|r| r.len() == t.headers.len()));
        // Re-calibrated, every variant still gives the paper's three delete-time numbers.
        for r in &t.rows {
            assert_eq!(r[3], "3 of 3", "{}: calibrated numbers", r[0]);
        }
        // 4x the host's time between reads: the reads weigh more against the delete.
        let think = variants
            .iter()
            .find(|v| v.assumption == Assumption::ReadThink && v.value_ns == 4 * READ_THINK_NS)
            .unwrap();
        let (cal, runs) = think.outcome.as_ref().unwrap();
        assert_eq!(*cal, used, "the think time does not enter the calibration");
        let moved = reads.iter().any(|&n| {
            Mode::ALL[1..].iter().any(|&m| {
                paper_of(n, m).is_some()
                    && (runs.ours_of(n, m) - baseline.ours_of(n, m)).abs() > 1e-3
            })
        });
        assert!(moved, "4x READ_THINK_NS changes no predicted number");
        assert!(sentence.starts_with("Table `assumptions`"), "{sentence}");
        // A variant calibrate() cannot solve is a row saying so, not an error.
        let free = [
            Assumption::PerRange,
            Assumption::PerPage,
            Assumption::Record,
        ]
        .iter()
        .fold(model.clone(), |m, a| a.with_ns(m, 0).unwrap());
        let err = free.recalibrated(shape).unwrap_err().to_string();
        assert!(err.contains("cannot calibrate"), "{err}");
        variants.push(Variant {
            assumption: Assumption::Record,
            factor_name: "0×",
            value_ns: 0,
            outcome: Err(err),
        });
        let (t, sentence) = assumptions_table(&used, &baseline, &variants);
        let last = t.rows.last().unwrap();
        assert!(last[2].contains("cannot calibrate") && last.len() == t.headers.len());
        assert!(
            sentence.contains("Cannot be calibrated") && sentence.contains("trim.record_ns 0×")
        );
    }

    #[test]
    fn a_number_a_model_without_contention_reaches_is_a_check_not_a_prediction() {
        // Additive timing on the paper's deletes: fTrim at 100 reads comes to 0.912, inside
        // ±10% of the paper's 0.999; the others miss by more than their tolerance.
        assert!((without_contention(100, Mode::FTrim).unwrap() - 0.912).abs() < 0.001);
        assert_eq!(without_contention(20, Mode::VTrim), None);
        let deletes = [
            1.0,
            PAPER_VTRIM_DELETE,
            PAPER_FTRIM_DELETE,
            PAPER_FTRIM_DELETE,
        ];
        let v = analyse(
            &paper_interface(PAPER_TRIM_INTERFACE_SHARE),
            &deletes,
            &[20, 100, 1000],
            &|n, m| paper_of(n, m).unwrap_or(1.0),
            &paper_of,
        );
        let role = |id: &str| {
            v.iter()
                .find(|x| x.id() == id)
                .and_then(|x| x.score.as_ref())
                .map(|s| s.role)
                .unwrap_or_else(|| panic!("no verdict {id}"))
        };
        assert_eq!(role("trim.ftrim-100-reads"), Role::Check);
        for id in [
            "trim.vtrim-20-reads",
            "trim.ftrim-20-reads",
            "trim.ftrim-pre-20-reads",
            "trim.vtrim-1000-reads",
        ] {
            assert_eq!(role(id), Role::Predicted, "{id}");
        }
    }

    /// Interface times shaped as the paper's: TRIM's share `share`, vTrim's and fTrim's one
    /// command each.
    fn paper_interface(share: f64) -> [f64; 4] {
        [share, share / 160.0, share / 160.0, share / 160.0]
    }

    #[test]
    fn the_papers_own_numbers_hold_every_claim_and_other_numbers_fail() {
        let deletes = [
            1.0,
            PAPER_VTRIM_DELETE,
            PAPER_FTRIM_DELETE,
            PAPER_FTRIM_DELETE,
        ];
        let reads = [20, 100, 1000];
        let v = analyse(
            &paper_interface(PAPER_TRIM_INTERFACE_SHARE),
            &deletes,
            &reads,
            &|n, m| paper_of(n, m).unwrap_or(1.0),
            &paper_of,
        );
        assert!(v.len() >= 10, "{} verdicts", v.len());
        let ids = Verdict::all_hold_with_unique_ids(&v);
        assert!(ids.contains("trim.vtrim-20-reads") && ids.contains("trim.ftrim-pre-20-reads"));
        assert!(ids.contains("trim.vtrim-beats-ftrim-pre-20"));
        // Every mode as slow as TRIM: every claim of a gain fails (numbers near 1, like
        // fTrim's −7% and −0.1%, may still hold).
        let flat = analyse(
            &[PAPER_TRIM_INTERFACE_SHARE; 4],
            &[1.0; 4],
            &reads,
            &|_, _| 1.0,
            &paper_of,
        );
        let holds = |id: &str| Verdict::holds_in(&flat, id);
        // The null model fails every prediction (fTrim's −7% and −0.1% included: they need
        // fTrim's delete alone to gain).
        Verdict::assert_no_prediction_holds(&flat);
        for id in [
            "trim.vtrim-delete",
            "trim.ftrim-delete",
            "trim.ftrim-slower-than-vtrim",
            "trim.vtrim-20-reads",
            "trim.ftrim-pre-20-reads",
            "trim.vtrim-1000-reads",
            "trim.vtrim-gain-shrinks",
            "trim.ftrim-gains-less-than-vtrim",
            "trim.preemption-helps",
            "trim.vtrim-beats-ftrim-pre-20",
        ] {
            assert!(!holds(id), "{id} should fail");
        }
        let off_split = analyse(
            &paper_interface(0.6),
            &deletes,
            &reads,
            &|n, m| paper_of(n, m).unwrap_or(1.0),
            &paper_of,
        );
        assert!(
            !Verdict::holds_in(&off_split, "trim.interface-share"),
            "a 60/40 split is not the paper's 43/57"
        );
        // Every mode sending as many commands as TRIM fails the one-command check.
        assert!(!holds("trim.one-command-interface"));
    }
}
