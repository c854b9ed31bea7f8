//! Experiment `tempfiles-real` (paper 000 on a real kernel): the `tempfiles` experiment's
//! join (PostgreSQL 12's hash join at work_mem 64 kB, 128-byte rows, 8 KiB BufFile
//! writes, each batch file deleted once read back) run for real with flashlab's `os`
//! backend (O_DIRECT) inside ext4 on a loop device, mounted with and without `discard`,
//! fallocate on and off; each run is captured (`flashlab capture`) and replayed on the
//! MX500 preset. The discard requests ext4 really sends stand beside the same join on
//! simfs with this kernel's online discard (`simfs::DiscardKernel::Linux6_17`).
//!
//! The real run is made repeatable: each repetition is one run of the join, committed
//! once at its end (mount option `commit=600`, then the capture's sync) and left to
//! settle (ext4's discard worker done) before the next, on one CPU (ext4's small-file
//! preallocation is per CPU) at real-time priority. Its discards are then the same, or
//! within a few requests, however busy the machine is (measured at quick scale with a
//! CPU hog on each core: TRIM only 11,182 discards as on a quiet machine; fallocate +
//! TRIM 1,325 against 1,331).
//!
//! Needs root, loop devices and tracefs; without them the section says it was skipped
//! and why.

use super::tempfiles::{combo_name, join_spec, COMBOS};
use super::Scale;
use crate::joinrun;
use crate::report::{BarPlot, Plot, Provenance, Role, Section, Table, Verdict, HEADLINE_TOLERANCE};
use serde_json::json;
use trace::capture::{self, CaptureSpec, FsKind};

#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    fallocate: bool,
    discard: bool,
    /// The capture's loop device reported itself rotational (`queue/rotational`): the
    /// model's ext4 allocates as on such a device.
    rotational: bool,
    // Captured on real ext4 and replayed on the MX500 preset.
    discards: u64,
    discard_bytes: u64,
    write_requests: u64,
    write_bytes: u64,
    flushes: u64,
    /// ext4's journal commits (jbd2's events, or the flushes without them).
    commits: u64,
    replayed_s: f64,
    replayed_waf: Option<f64>,
    /// The replayed drive's WAF in parts (after its last repetition settled).
    replayed_parts: WafParts,
    /// The same trace replayed with the host's think times scaled ([`THINK_SCALES`]).
    think_replays: Vec<ThinkReplay>,
    /// Bytes the replayed drive holds data for at the end (`flash::DeviceStats::
    /// mapped_bytes`): without discard, every address ext4 ever wrote.
    replayed_mapped_bytes: u64,
    // The same join on simfs over the simulated MX500 (journal-time discards), and the
    // TRIMs the older model (one per extent at each unlink) sends.
    sim_trim_commands: u64,
    sim_trim_bytes: u64,
    /// Per repetition: ext4's discards and bytes, and simfs's.
    ext4_rep_discards: Vec<u64>,
    ext4_rep_discard_bytes: Vec<u64>,
    sim_rep_trim_commands: Vec<u64>,
    sim_rep_trim_bytes: Vec<u64>,
    sim_trims_per_unlink: u64,
    sim_s: f64,
    sim_waf: Option<f64>,
    /// simfs's drive's WAF in parts (its repetitions' sums).
    sim_parts: WafParts,
    /// The same for simfs's drive, after its last repetition.
    sim_mapped_bytes: u64,
}

/// Where a drive's flash writes went, in pages: WAF = (host programs + GC copies + SLC-mode
/// programs) / host pages (the MX500 keeps its map in DRAM: no translation pages).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
struct WafParts {
    host_pages: u64,
    host_program_pages: u64,
    gc_copied_pages: u64,
    slc_program_pages: u64,
}

impl WafParts {
    fn of(s: &flash::DeviceStats) -> WafParts {
        WafParts {
            host_pages: s.host_write_pages,
            host_program_pages: s.host_program_pages,
            gc_copied_pages: s.gc_copied_pages,
            slc_program_pages: s.slc_program_pages,
        }
    }

    fn of_repetitions(reps: &[joinrun::Repetition]) -> WafParts {
        reps.iter().fold(WafParts::default(), |p, r| WafParts {
            host_pages: p.host_pages + r.host_write_pages,
            host_program_pages: p.host_program_pages + r.host_program_pages,
            gc_copied_pages: p.gc_copied_pages + r.gc_copied_pages,
            slc_program_pages: p.slc_program_pages + r.slc_program_pages,
        })
    }

    /// "host programs + GC + SLC", each per host page ("—" without host writes).
    fn text(&self) -> String {
        if self.host_pages == 0 {
            return "—".into();
        }
        let per = |n: u64| n as f64 / self.host_pages as f64;
        format!(
            "{:.2} + {:.2} + {:.2}",
            per(self.host_program_pages),
            per(self.gc_copied_pages),
            per(self.slc_program_pages)
        )
    }
}

/// The think-time scales the trace is replayed at again (1 is the replay itself): how the
/// SLC cache's share of the WAF moves with the host's idle time.
const THINK_SCALES: [f64; 2] = [0.5, 2.0];

/// A replay with every think time and pause multiplied by `think_scale`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct ThinkReplay {
    think_scale: f64,
    time_s: f64,
    waf: Option<f64>,
    parts: WafParts,
}

const ID: &str = "tempfiles-real";
const TITLE: &str = "Hash-join temp files on real ext4: discard and fallocate (paper 000)";
/// What the experiment needs, said when it is skipped.
const NEEDS: &str = "This experiment runs the join inside ext4 on a loop device, captures its block I/O and needs root, loop devices and tracefs.";

/// The run's sizes: scale factor, repetitions, file system (and drive) bytes.
fn sizes(scale: Scale) -> (f64, u32, u64) {
    match scale {
        Scale::Quick => (0.2, 3u32, 1u64 << 30),
        Scale::Full | Scale::Paper => (0.5, 20, 4 << 30),
    }
}

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    if let Err(e) = capture::check_support(FsKind::Ext4) {
        return Ok(Section::skipped(ID, TITLE, &e.to_string(), NEEDS, seed));
    }
    let (sf, repeat, capacity) = sizes(scale);
    let work_dir = super::work_dir("flashlab-tempfiles-real-")?;
    let data = work_dir.path().join("data");
    let (images_dir, images_at) = super::capture_dir("flashlab-tempfiles-real-", capacity)?;
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let result = measure(scale, ctx, &data, images_dir.path());
    drop(images_dir);
    drop(work_dir);
    let runs = result?;
    Ok(Section {
        id: ID.into(),
        title: TITLE.into(),
        question: question(scale, &images_at),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots: plots(&runs),
        tables: vec![runs_table(scale, &runs), think_table(&runs)],
        verdicts: analyse(&runs, repeat, capacity),
        provenance: provenance(),
        results: json!({"sf": sf, "repeat": repeat, "capacity_bytes": capacity, "images": images_at, "runs": runs}),
    })
}

/// The four captured runs (tables generated into `data`, images in `work`), each with its
/// model runs beside it.
fn measure(
    scale: Scale,
    ctx: &super::RunCtx,
    data: &std::path::Path,
    work: &std::path::Path,
) -> Result<Vec<Run>, crate::LabError> {
    let cancel = &ctx.cancel;
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the flashlab binary: {e}"))?;
    let (sf, repeat, capacity) = sizes(scale);
    // The input tables, generated once outside the captured file system (as the
    // simulated experiment keeps them off its drive).
    let gen = std::process::Command::new(&exe)
        .args([
            "join",
            "--sf",
            &sf.to_string(),
            "--layout",
            "fixed128",
            "--memory",
            "64MiB",
        ])
        .arg("--dir")
        .arg(data)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !gen.status.success() {
        return Err(format!(
            "generating the tables failed: {}",
            String::from_utf8_lossy(&gen.stderr)
        )
        .into());
    }
    // The captures one at a time, each on a settled file system of its own; then the
    // model runs, pure simulation, on the cores.
    let mut runs = Vec::new();
    for &(fallocate, discard) in &COMBOS {
        runs.push(ctx.capture_step(|| {
            one_run(
                &exe, work, cancel, data, sf, repeat, capacity, fallocate, discard,
            )
        })?);
    }
    let models: Vec<(usize, bool)> = (0..runs.len())
        .flat_map(|i| [(i, false), (i, true)])
        .collect();
    let modelled = ctx.map(&models, |&(i, journal)| {
        model_run(
            sf,
            repeat,
            capacity,
            runs[i].fallocate,
            runs[i].discard,
            journal,
            runs[i].rotational,
        )
    })?;
    for (&(i, journal), m) in models.iter().zip(modelled) {
        let r = &mut runs[i];
        if journal {
            r.sim_rep_trim_commands = m.repetitions.iter().map(|r| r.trim_commands).collect();
            r.sim_rep_trim_bytes = m.repetitions.iter().map(|r| r.trim_bytes).collect();
            r.sim_trim_commands = m.repetitions.iter().map(|r| r.trim_commands).sum();
            r.sim_trim_bytes = m.repetitions.iter().map(|r| r.trim_bytes).sum();
            r.sim_s = m.repetitions.iter().map(|r| r.total_ns).sum::<u64>() as f64 / 1e9;
            r.sim_mapped_bytes = m.repetitions.last().map_or(0, |r| r.mapped_bytes);
            r.sim_parts = WafParts::of_repetitions(&m.repetitions);
            r.sim_waf = {
                let (h, f) = m.repetitions.iter().fold((0, 0), |(h, f), r| {
                    (h + r.host_write_pages, f + r.flash_write_pages)
                });
                (h > 0).then(|| f as f64 / h as f64)
            };
        } else {
            r.sim_trims_per_unlink = m.repetitions.iter().map(|r| r.trim_commands).sum();
        }
    }
    Ok(runs)
}

/// Table `tempfiles_real`: each combination's real discards and writes, replayed, beside
/// simfs's.
fn runs_table(scale: Scale, runs: &[Run]) -> Table {
    let (sf, repeat, capacity) = sizes(scale);
    let mut table = Table {
        file_stem: "tempfiles_real".into(),
        caption: format!(
            "SF {sf}, {repeat} repetitions on a {} MiB ext4: the discard requests ext4 sent and the run replayed on the MX500 preset, beside the same join on simfs over the simulated MX500",
            capacity >> 20
        ),
        headers: [
            "combination",
            "ext4 discards",
            "MB discarded",
            "write requests",
            "MB written",
            "replayed s (MX500)",
            "replayed WAF",
            "replayed WAF: host + GC + SLC",
            "replayed data on drive %",
            "simfs TRIM commands",
            "simfs MB discarded",
            "simfs TRIMs, one per extent at unlink",
            "simfs s (MX500)",
            "simfs WAF",
            "simfs WAF: host + GC + SLC",
            "simfs data on drive %",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    let share = |b: u64| format!("{:.0}", percent_of(b, capacity));
    for r in runs {
        table.rows.push(vec![
            combo_name(r.fallocate, r.discard).into(),
            r.discards.to_string(),
            format!("{:.1}", r.discard_bytes as f64 / 1e6),
            r.write_requests.to_string(),
            format!("{:.1}", r.write_bytes as f64 / 1e6),
            format!("{:.2}", r.replayed_s),
            fmt_waf(r.replayed_waf),
            r.replayed_parts.text(),
            share(r.replayed_mapped_bytes),
            r.sim_trim_commands.to_string(),
            format!("{:.1}", r.sim_trim_bytes as f64 / 1e6),
            r.sim_trims_per_unlink.to_string(),
            format!("{:.2}", r.sim_s),
            fmt_waf(r.sim_waf),
            r.sim_parts.text(),
            share(r.sim_mapped_bytes),
        ]);
    }
    table
}

/// Table `tempfiles_real_think`: each capture replayed with the host's think times scaled,
/// beside the replay as captured and simfs: where the SLC cache's share of WAF comes from.
fn think_table(runs: &[Run]) -> Table {
    let mut table = Table {
        file_stem: "tempfiles_real_think".into(),
        caption: "Each capture replayed on the MX500 preset again with every think time and pause between repetitions scaled (× 1: as captured), beside simfs: the WAF's parts (host pages' programs + GC's copies + SLC-mode programs, per host page) against the host's idle time".into(),
        headers: [
            "combination",
            "host",
            "think times ×",
            "s (MX500)",
            "WAF",
            "WAF: host + GC + SLC",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    for r in runs {
        let name = combo_name(r.fallocate, r.discard);
        let as_captured = ThinkReplay {
            think_scale: 1.0,
            time_s: r.replayed_s,
            waf: r.replayed_waf,
            parts: r.replayed_parts,
        };
        let mut replays: Vec<&ThinkReplay> = r.think_replays.iter().collect();
        replays.push(&as_captured);
        replays.sort_by(|a, b| a.think_scale.total_cmp(&b.think_scale));
        for t in replays {
            table.rows.push(vec![
                name.into(),
                "ext4, replayed".into(),
                format!("{}", t.think_scale),
                format!("{:.2}", t.time_s),
                fmt_waf(t.waf),
                t.parts.text(),
            ]);
        }
        table.rows.push(vec![
            name.into(),
            "simfs".into(),
            "—".into(),
            format!("{:.2}", r.sim_s),
            fmt_waf(r.sim_waf),
            r.sim_parts.text(),
        ]);
    }
    table
}

/// The join's time on the MX500: real ext4 replayed against simfs simulated.
fn plots(runs: &[Run]) -> Vec<Plot> {
    vec![BarPlot {
        file_stem: "tempfiles_real".into(),
        title: "Join time on the MX500: real ext4 replayed vs simfs simulated".into(),
        y_label: "simulated s".into(),
        categories: runs
            .iter()
            .map(|r| combo_name(r.fallocate, r.discard).to_string())
            .collect(),
        series: vec![
            (
                "ext4 (captured, replayed)".into(),
                runs.iter().map(|r| Some(r.replayed_s)).collect(),
            ),
            (
                "simfs (simulated)".into(),
                runs.iter().map(|r| Some(r.sim_s)).collect(),
            ),
        ],
    }
    .into()]
}

/// What the section asks, at its scale, with the images `images_at`.
fn question(scale: Scale, images_at: &str) -> String {
    let (sf, repeat, capacity) = sizes(scale);
    format!(
            "Does a real kernel's ext4 send the TRIMs the simulated experiment assumes, and what do they cost? \
             PostgreSQL 12's hash join of SF {sf} (128-byte rows, work_mem 64 kB, 8 KiB BufFile writes) runs \
             {repeat} times with flashlab's os backend (O_DIRECT, or the page cache would absorb the batch \
             files) inside a {} MiB ext4 on a loop device (its image {images_at}), mounted with \
             and without discard, fallocate on and off, each repetition committed once at its end and left \
             to settle, on one CPU; its block I/O is captured and replayed on a fresh MX500 preset \
             of the same size, the repetitions one after another (closed loop per issuing task); and again \
             with the host's think times halved and doubled (table `tempfiles_real_think`), since an SLC \
             cache that folds in idle time takes more of a host's pages the more that host idles.",
            capacity >> 20
        )
}

/// Where the section's numbers come from.
fn provenance() -> Vec<Provenance> {
    vec![
            Provenance {
                number: "discard requests, bytes written".into(),
                role: "measured on this machine's kernel (ext4 on a loop device). Since Linux 6.8 (and the 2024 stable kernels; commit 68da4c44b994) ext4's online discard trims from each freed extent to the end of the free space it lies in, within its group, once for every extent a commit freed: far more bytes are discarded than were written, the same free space again and again".into(),
            },
            Provenance {
                number: "simfs TRIM commands and bytes".into(),
                role: "predicted by simfs with ext4's online discard as this machine's kernel does it (fs/ext4/mballoc.c, docs/simfs.md): the extents a transaction frees kept per group in a red-black tree where, since Linux 6.17 (Baokun Li's 2025 series), a freed extent merges only with the entry its search ends at, so adjacent extents can stay separate entries; after the commit a worker discards each entry from its first free block to the end of its free run within the group (Linux 6.8); mballoc's preallocation (small files share the locality-group window, larger ones get windows to the end of their size bucket); O_DIRECT batch files; one commit per repetition, as the real runs are made to commit. Found by tracing ext4:ext4_mballoc_free against ext4:ext4_trim_extent: for one repetition ext4 freed 18,260 extents (1,019 runs once merged) and sent 3,708 discards; the tree gives exactly 3,708 entries for the same extents in the same order. The file system laid out as mke2fs 1.47 lays it out (flex_bg metadata packed in the flex group's first group, backup superblocks, the journal's blocks), so free runs end where the real one's do; the column beside it is one TRIM per extent at each unlink (the `tempfiles` experiment's `no host path` row)".into(),
            },
            Provenance {
                number: "replayed times and WAF".into(),
                role: "predicted by the MX500 preset's model (TRIM cost an assumption, see `tempfiles`); think times are this machine's".into(),
            },
        ]
}

/// The verdicts of the four runs (`repeat` repetitions each).
fn analyse(runs: &[Run], repeat: u32, capacity_bytes: u64) -> Vec<Verdict> {
    let get = |f: bool, d: bool| {
        runs.iter()
            .find(|r| r.fallocate == f && r.discard == d)
            .expect("every combination ran")
    };
    let (trim_only, both) = (get(false, true), get(true, true));
    let without = get(false, false).discards + get(true, false).discards;
    let ext4_ratio = trim_only.discards as f64 / both.discards.max(1) as f64;
    let verdicts = vec![
        Verdict::ordering(
            "tempfiles-real.discard-mount-only",
            "Only a discard mount makes ext4 send TRIMs for deleted temp files (a check of the capture)",
            "paper 000: TRIM on vs off",
            without as f64,
            without == 0 && trim_only.discards > 0 && both.discards > 0,
            format!(
                "discards without the mount option: {} and {}; with it: {} and {}",
                get(false, false).discards,
                get(true, false).discards,
                trim_only.discards,
                both.discards
            ),
        )
        .with_role(Role::Check),
        Verdict::numeric(
            "tempfiles-real.ext4-trim-count-ratio",
            "On real ext4, fallocate makes ~16× fewer TRIM commands",
            "paper 000: 16× fewer TRIM commands with fallocate",
            ext4_ratio,
            16.0,
            0.3,
            format!(
                "ext4 {} vs {} discards ({ext4_ratio:.1}×); simfs {} vs {} TRIM commands",
                trim_only.discards, both.discards, trim_only.sim_trim_commands, both.sim_trim_commands
            ),
        )
        .if_missed(
            "the paper's file sizes, not ext4's behaviour: the real kernel and simfs give about the same \
             ratio on this join (the model checks below), and both fall as the batch files multiply and \
             shrink (`tempfiles`, table `batch_files`); this scale's files are far smaller than the \
             paper's 40 GB query made",
        ),
    ];
    let mut verdicts = verdicts;
    // simfs against real ext4, per repetition: TRIM commands and bytes discarded, for each
    // combination with the discard mount (ours = simfs / ext4; 1 = the same).
    let per_rep = |n: u64| n as f64 / repeat as f64;
    let spread = |v: &[u64]| match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) => format!("{lo} to {hi}"),
        _ => "-".into(),
    };
    for (what, r) in [("trim-only", trim_only), ("fallocate-trim", both)] {
        for (measure, ext4, sim) in [
            ("count", r.discards, r.sim_trim_commands),
            ("bytes", r.discard_bytes, r.sim_trim_bytes),
        ] {
            let ratio = sim as f64 / ext4.max(1) as f64;
            verdicts.push(simfs_check(
                format!("simfs-vs-ext4-{measure}-{what}"),
                ratio,
                format!(
                    "simfs sends as many TRIM {} per repetition as real ext4 ({}), within ±30%",
                    if measure == "count" { "commands" } else { "bytes" },
                    combo_name(r.fallocate, r.discard)
                ),
                "real ext4 on this machine's kernel, captured (one commit and a settled file system per repetition); simfs with Linux 6.17's online discard (worker, to the end of each free run, freed extents merged with their search parent only), mballoc's preallocation and O_DIRECT batch files, one commit per repetition; ours = simfs / ext4",
                format!(
                    "per repetition: ext4 {:.0}, simfs {:.0} ({ratio:.2}×); ext4's repetitions {}, simfs's {}; jbd2 committed {} times in {repeat} repetitions (the mount and each repetition's end commit; more means something forced commits mid-run, such as another process's sync(2), and ext4's freed extents then merge less)",
                    per_rep(ext4),
                    per_rep(sim),
                    spread(if measure == "count" { &r.ext4_rep_discards } else { &r.ext4_rep_discard_bytes }),
                    spread(if measure == "count" { &r.sim_rep_trim_commands } else { &r.sim_rep_trim_bytes }),
                    r.commits
                ),
            ));
        }
    }
    // Where the data went without a discard mount: how much of the drive holds data at the
    // end. Without TRIM every address ever written does, so this is the file system's
    // footprint: the `tempfiles` section explains a WAF that stays flat without TRIM by
    // simfs putting each repetition's files back into the holes the last one left.
    let percent = |b: u64| percent_of(b, capacity_bytes);
    for (what, r) in [
        ("neither", get(false, false)),
        ("fallocate-only", get(true, false)),
    ] {
        let ratio = r.sim_mapped_bytes as f64 / r.replayed_mapped_bytes.max(1) as f64;
        verdicts.push(simfs_check(
            format!("simfs-vs-ext4-data-on-drive-{what}"),
            ratio,
            format!(
                "Without TRIM, simfs leaves as much of the drive holding data after {repeat} repetitions as real ext4 ({}), within ±30%: both put later files back where deleted ones were",
                combo_name(r.fallocate, r.discard)
            ),
            "real ext4 on this machine's kernel, captured and replayed on the MX500 preset (no discard mount); simfs over the simulated MX500; ours = simfs / ext4 of the bytes the drive holds data for at the end (`mapped_bytes`)",
            format!(
                "data on the {} MiB drive: ext4 {:.0}%, simfs {:.0}% ({ratio:.2}×), after {:.0} MB written (every write to a new address: {:.0}%); WAF replayed from ext4 {}, simfs {}",
                capacity_bytes >> 20,
                percent(r.replayed_mapped_bytes),
                percent(r.sim_mapped_bytes),
                r.write_bytes as f64 / 1e6,
                percent(r.write_bytes.min(capacity_bytes)),
                fmt_waf(r.replayed_waf),
                fmt_waf(r.sim_waf),
            ),
        ));
    }
    verdicts
}

/// `bytes` as a percentage of the drive's `capacity_bytes`.
fn percent_of(bytes: u64, capacity_bytes: u64) -> f64 {
    100.0 * bytes as f64 / capacity_bytes.max(1) as f64
}

/// A WAF to two places, or a dash when the run has none.
fn fmt_waf(waf: Option<f64>) -> String {
    waf.map_or("—".into(), |w| format!("{w:.2}"))
}

/// A model check of simfs against this machine's kernel (not a paper's number): `ratio`
/// is simfs / ext4, held within ±30% of 1.
fn simfs_check(
    id: String,
    ratio: f64,
    claim: String,
    reference: &str,
    measured: String,
) -> Verdict {
    Verdict::numeric(
        &format!("tempfiles-real.{id}"),
        &claim,
        reference,
        ratio,
        1.0,
        HEADLINE_TOLERANCE,
        measured,
    )
    .with_role(Role::Check)
}

/// ext4's journal commit interval in the real runs (mount option `commit=`) and in the
/// model: longer than a run, so each repetition commits once, at its end.
const COMMIT_INTERVAL_S: u64 = 600;

/// The PostgreSQL join's work_mem, as in `tempfiles` (PostgreSQL's 64 kB minimum).
const WORK_MEM_BYTES: u64 = hashjoin::postgres::MIN_WORK_MEM_BYTES;

#[allow(clippy::too_many_arguments)]
fn one_run(
    exe: &std::path::Path,
    work: &std::path::Path,
    cancel: &trace::Cancel,
    data: &std::path::Path,
    sf: f64,
    repeat: u32,
    capacity: u64,
    fallocate: bool,
    discard: bool,
) -> Result<Run, crate::LabError> {
    let name = combo_name(fallocate, discard);
    let cmd = vec![
        exe.display().to_string(),
        "join".into(),
        "--sf".into(),
        sf.to_string(),
        "--layout".into(),
        "fixed128".into(),
        "--algorithm".into(),
        "postgres".into(),
        "--memory".into(),
        format!("{}", WORK_MEM_BYTES),
        "--read-buffer".into(),
        "256KiB".into(),
        "--fallocate".into(),
        if fallocate { "on" } else { "off" }.into(),
        "--repeat".into(),
        "1".into(),
        "--dir".into(),
        "{}".into(),
        "--data-dir".into(),
        data.display().to_string(),
        // O_DIRECT: this machine's page cache would otherwise hold the spill files until
        // they are deleted, and the drive would never see them.
        "--direct-io".into(),
        "--json".into(),
    ];
    let spec = CaptureSpec {
        fs: FsKind::Ext4,
        size_bytes: capacity,
        discard,
        mkfs_opts: vec![],
        // No timed commits: each repetition commits once, at its end (the capture's
        // sync), as the model does.
        mount_opts: vec![format!("commit={COMMIT_INTERVAL_S}")],
        command: cmd,
        work_dir: work.to_path_buf(),
        stdout: Some(work.join(format!("{name}.json"))),
        out: None,
        cancel: cancel.clone(),
        // One run per repetition, each followed by a sync and ext4's discard worker
        // finishing, on one CPU (ext4's small-file preallocation is per CPU): the same
        // requests every time, however busy the machine. At real-time priority, so that
        // the simulations running beside it in `reproduce` do not halve its share of that
        // CPU (its requests do not change; its wall time does).
        runs: repeat,
        cpu: Some(0),
        think_on_cpu: false,
        realtime: true,
        dirty_limit_bytes: None,
        others_traverse: false,
    };
    let c = capture::capture(&spec).map_err(|e| format!("{name}: {e}"))?;
    if c.exit_code != Some(0) {
        return Err(format!("{name}: the join failed ({:?})", c.exit_code).into());
    }
    let t = &c.trace;
    // The repetitions one after another (each is a new process: one closed-loop replay
    // of the whole trace would start them all at once).
    let (reps, stats) = super::replay_repetitions("mx500", capacity, t, &c.run_ends_ns)
        .map_err(|e| format!("{name}: {e}"))?;
    let think_replays =
        think_replays(capacity, t, &c.run_ends_ns).map_err(|e| format!("{name}: {e}"))?;
    let commits = c
        .journal_commits
        .unwrap_or_else(|| t.count(flash::Op::Flush));
    // ext4's discards of each repetition (the requests before its run's end).
    let mut ext4_rep_discards = Vec::new();
    let mut ext4_rep_discard_bytes = Vec::new();
    let mut from = 0;
    for &end in &c.run_ends_ns {
        let rep = t
            .requests
            .iter()
            .filter(|r| r.at_ns >= from && r.at_ns < end && r.cmd.op == flash::Op::Trim);
        ext4_rep_discards.push(rep.clone().count() as u64);
        ext4_rep_discard_bytes.push(rep.map(|r| r.cmd.len_bytes).sum());
        from = end;
    }
    Ok(Run {
        ext4_rep_discards,
        ext4_rep_discard_bytes,
        fallocate,
        discard,
        rotational: c.rotational.unwrap_or(false),
        discards: t.count(flash::Op::Trim),
        discard_bytes: t.bytes(flash::Op::Trim),
        write_requests: t.count(flash::Op::Write),
        write_bytes: t.bytes(flash::Op::Write),
        flushes: t.count(flash::Op::Flush),
        commits,
        replayed_s: reps.iter().map(|r| r.time_s).sum(),
        replayed_waf: stats.waf,
        replayed_parts: WafParts::of(&stats),
        think_replays,
        replayed_mapped_bytes: stats.mapped_bytes,
        // Filled in by the model runs (`model_run`).
        sim_rep_trim_commands: vec![],
        sim_rep_trim_bytes: vec![],
        sim_trim_commands: 0,
        sim_trim_bytes: 0,
        sim_trims_per_unlink: 0,
        sim_s: 0.0,
        sim_waf: None,
        sim_parts: WafParts::default(),
        sim_mapped_bytes: 0,
    })
}

/// The capture replayed on the MX500 again at each of [`THINK_SCALES`].
fn think_replays(
    capacity: u64,
    t: &trace::Trace,
    run_ends_ns: &[u64],
) -> Result<Vec<ThinkReplay>, crate::LabError> {
    THINK_SCALES
        .iter()
        .map(|&k| {
            let (reps, stats) =
                super::replay_repetitions_thinking("mx500", capacity, t, run_ends_ns, k)?;
            Ok(ThinkReplay {
                think_scale: k,
                time_s: reps.iter().map(|r| r.time_s).sum(),
                waf: stats.waf,
                parts: WafParts::of(&stats),
            })
        })
        .collect()
}

/// The model of a run: simfs over the simulated MX500 with the spill files' O_DIRECT (no
/// page cache). With `journal`, ext4's discard as this machine's kernel does it: a commit
/// at the end of each repetition, its freed extents then discarded by the background
/// worker (Linux >= 5.15), each to the end of its free run (Linux >= 6.8), the worker
/// done before the next repetition. Without, the older model: a TRIM per extent at each
/// unlink. ext4's allocator scans as on the capture's loop device (`rotational`).
fn model_run(
    sf: f64,
    repeat: u32,
    capacity: u64,
    fallocate: bool,
    discard: bool,
    journal: bool,
    rotational: bool,
) -> Result<joinrun::JoinRunResult, crate::LabError> {
    let mut spec = join_spec("mx500", sf, capacity, repeat, fallocate, discard)?;
    spec.storage.rotational = rotational;
    spec.join.algorithm = hashjoin::Algorithm::Postgres;
    spec.memory_bytes = WORK_MEM_BYTES;
    if journal {
        let host = vfs::HostConfig {
            journal_commit_ns: COMMIT_INTERVAL_S * 1_000_000_000,
            ..vfs::HostConfig::direct_io()
        };
        super::tempfiles::set_host(&mut spec, host, discard);
        spec.storage.kernel = simfs::DiscardKernel::Linux6_17;
        spec.storage.commit_each_repetition = true;
    }
    joinrun::run(&spec, &mut |_| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose repetitions each discard `discards` requests of `bytes`, and whose simfs
    /// model sends `sim` TRIM commands of `sim_bytes` per repetition.
    fn run(fallocate: bool, discard: bool, per_rep: (u64, u64), sim: (u64, u64)) -> Run {
        let repeat = 4;
        Run {
            fallocate,
            discard,
            discards: per_rep.0 * repeat,
            discard_bytes: per_rep.1 * repeat,
            write_requests: 1000,
            write_bytes: 1 << 30,
            flushes: 10,
            commits: repeat + 1,
            replayed_s: 10.0,
            replayed_waf: Some(1.0),
            replayed_parts: WafParts::default(),
            think_replays: vec![],
            replayed_mapped_bytes: 1 << 29,
            sim_trim_commands: sim.0 * repeat,
            sim_trim_bytes: sim.1 * repeat,
            ext4_rep_discards: vec![per_rep.0; repeat as usize],
            ext4_rep_discard_bytes: vec![per_rep.1; repeat as usize],
            sim_rep_trim_commands: vec![sim.0; repeat as usize],
            sim_rep_trim_bytes: vec![sim.1; repeat as usize],
            sim_trims_per_unlink: 0,
            sim_s: 10.0,
            sim_waf: Some(1.0),
            sim_parts: WafParts::default(),
            sim_mapped_bytes: 1 << 29,
            rotational: false,
        }
    }

    fn runs(
        trim_only: (u64, u64),
        both: (u64, u64),
        sim_trim_only: (u64, u64),
        sim_both: (u64, u64),
    ) -> Vec<Run> {
        vec![
            run(false, false, (0, 0), (0, 0)),
            run(true, false, (0, 0), (0, 0)),
            run(false, true, trim_only, sim_trim_only),
            run(true, true, both, sim_both),
        ]
    }

    fn holding(v: &[Verdict]) -> Vec<&str> {
        v.iter().filter(|v| v.holds).map(|v| v.id()).collect()
    }

    #[test]
    fn the_papers_shape_holds_every_claim() {
        // ext4 16x fewer discards with fallocate; simfs sends what ext4 sends.
        let v = analyse(
            &runs(
                (3200, 9 << 30),
                (200, 6 << 30),
                (3200, 9 << 30),
                (200, 6 << 30),
            ),
            4,
            4 << 30,
        );
        assert_eq!(holding(&v).len(), v.len(), "{:?}", holding(&v));
    }

    #[test]
    fn a_null_model_fails_every_prediction() {
        // fallocate changes nothing on ext4, and simfs has no discard mechanism.
        let v = analyse(
            &runs((1000, 1 << 30), (1000, 1 << 30), (0, 0), (0, 0)),
            4,
            4 << 30,
        );
        Verdict::assert_no_prediction_holds(&v);
        // simfs as one TRIM per extent at unlink would be a model without ext4's journal
        // and merging: far more commands than ext4 sends.
        let v = analyse(
            &runs(
                (3200, 9 << 30),
                (200, 6 << 30),
                (18_000, 2 << 30),
                (1_000, 2 << 30),
            ),
            4,
            4 << 30,
        );
        let simfs: Vec<&str> = holding(&v)
            .into_iter()
            .filter(|id| id.contains("simfs-vs-ext4") && !id.contains("data-on-drive"))
            .collect();
        assert!(simfs.is_empty(), "{simfs:?}");
    }

    #[test]
    fn the_waf_parts_add_up_to_the_mx500s_waf() {
        use flash::Device;
        let mut dev = flash::Preset::load("mx500")
            .unwrap()
            .with_capacity(256 << 20)
            .build()
            .unwrap();
        // Overwrite the drive twice at random 64 KiB offsets: SLC-mode programs, folds and GC.
        let mut now = 0;
        let mut x: u64 = 7;
        for _ in 0..2 * 4096 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 33) % 4096 * 65536;
            now = dev.submit(&flash::Command::write(off, 65536), now).unwrap();
        }
        dev.settle();
        let stats = dev.stats();
        let parts = WafParts::of(&stats);
        assert!(
            parts.gc_copied_pages > 0 && parts.slc_program_pages > 0,
            "{parts:?}"
        );
        let sum: f64 = parts
            .text()
            .split(" + ")
            .map(|x| x.parse::<f64>().unwrap())
            .sum();
        let waf = stats.waf.unwrap();
        assert!(
            (sum - waf).abs() < 0.015,
            "{} = {sum} against WAF {waf}",
            parts.text()
        );
    }

    #[test]
    fn a_host_that_idles_longer_sends_more_of_its_pages_through_the_slc_cache() {
        // One task writes 512 MiB in 64 KiB requests, pausing 0.2 ms before each, on a 1 GiB
        // MX500: with its pauses doubled, its SLC cache folds more between writes and takes
        // more of them; halved, fewer. GC copies nothing either way (the drive is half full).
        let requests = (0..8192u64)
            .map(|i| trace::Request {
                stream: 1,
                cmd: flash::Command::write(i * 65536, 65536),
                think_ns: 200_000,
                at_ns: i * 300_000,
                after: None,
            })
            .collect();
        let t = trace::Trace {
            requests,
            timestamped: true,
        };
        let replay = |k: f64| {
            let (reps, stats) = crate::experiments::replay_repetitions_thinking(
                "mx500",
                1 << 30,
                &t,
                &[u64::MAX],
                k,
            )
            .unwrap();
            (reps[0].time_s, WafParts::of(&stats))
        };
        let (fast_s, fast) = replay(0.5);
        let (slow_s, slow) = replay(2.0);
        assert!(slow_s > fast_s + 1.0, "{fast_s} s, then {slow_s} s");
        let slc = |p: &WafParts| p.slc_program_pages as f64 / p.host_pages as f64;
        assert!(
            slc(&slow) > slc(&fast) + 0.1,
            "SLC share {} with pauses halved, {} doubled",
            slc(&fast),
            slc(&slow)
        );
        assert_eq!(fast.gc_copied_pages + slow.gc_copied_pages, 0);
    }

    #[test]
    fn a_file_system_that_never_reuses_holes_fails_the_footprint_check() {
        // ext4 leaves an eighth of the drive holding data; a file system that wrote each
        // repetition's files to new addresses would leave four times as much.
        let mut rs = runs(
            (3200, 9 << 30),
            (200, 6 << 30),
            (3200, 9 << 30),
            (200, 6 << 30),
        );
        for r in rs.iter_mut().filter(|r| !r.discard) {
            r.replayed_mapped_bytes = 1 << 29;
            r.sim_mapped_bytes = 1 << 31;
        }
        let v = analyse(&rs, 4, 4 << 30);
        let footprint: Vec<&Verdict> = v
            .iter()
            .filter(|v| v.id().contains("data-on-drive"))
            .collect();
        assert_eq!(footprint.len(), 2);
        assert!(footprint.iter().all(|v| !v.holds));
        assert!(
            footprint[0]
                .measured
                .contains("ext4 12%, simfs 50% (4.00×)"),
            "{}",
            footprint[0].measured
        );
    }
}
