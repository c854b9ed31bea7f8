//! Experiment `tempfiles-real` (paper 000 on a real kernel): the `tempfiles` experiment's
//! hash join (grace, 128-byte rows, 2 MiB of memory, 8 KiB spill writes, each spill file
//! deleted once read back) run for real with flashlab's `os` backend inside ext4 on a
//! loop device, mounted with and without `discard`, fallocate on and off; each run is
//! captured (`flashlab capture`) and replayed on the MX500 preset. The discard requests
//! ext4 really sends and what they cost on the simulated drive stand beside the same
//! join on simfs over the simulated MX500 (the `tempfiles` experiment's model).
//!
//! Needs root, loop devices and tracefs; without them the section says it was skipped
//! and why.

use super::tempfiles::{combo_name, join_spec, COMBOS};
use super::Scale;
use crate::joinrun;
use crate::report::{
    BarPlot, Plot, Provenance, Role, Score, Section, Table, Verdict, HEADLINE_TOLERANCE,
};
use serde_json::json;
use trace::capture::{self, CaptureSpec, FsKind};

#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    fallocate: bool,
    discard: bool,
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
    // The same join on simfs over the simulated MX500 (journal-time discards), and the
    // TRIMs the older model (one per extent at each unlink) sends.
    sim_trim_commands: u64,
    sim_trim_bytes: u64,
    sim_trims_per_unlink: u64,
    sim_s: f64,
    sim_waf: Option<f64>,
}

const ID: &str = "tempfiles-real";
const TITLE: &str = "Hash-join temp files on real ext4: discard and fallocate (paper 000)";
/// What the experiment needs, said when it is skipped.
const NEEDS: &str = "This experiment runs the join inside ext4 on a loop device, captures its block I/O and needs root, loop devices and tracefs.";

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let cancel = &ctx.cancel;
    let started = std::time::Instant::now();
    if let Err(e) = capture::check_support(FsKind::Ext4) {
        return Ok(Section::skipped(ID, TITLE, &e.to_string(), NEEDS, seed));
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the flashlab binary: {e}"))?;
    let (sf, repeat, capacity) = match scale {
        Scale::Quick => (0.2, 3u32, 1u64 << 30),
        Scale::Full => (0.5, 20, 4 << 30),
    };
    let work_dir = super::work_dir("flashlab-tempfiles-real-")?;
    let work = work_dir.path();
    let data = work.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    let result = (|| -> Result<Vec<Run>, crate::LabError> {
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
            .arg(&data)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        if !gen.status.success() {
            return Err(format!(
                "generating the tables failed: {}",
                String::from_utf8_lossy(&gen.stderr)
            )
            .into());
        }
        let mut runs = Vec::new();
        for &(fallocate, discard) in &COMBOS {
            runs.push(ctx.step(|| {
                one_run(
                    &exe, work, cancel, &data, sf, repeat, capacity, fallocate, discard,
                )
            })?);
        }
        Ok(runs)
    })();
    drop(work_dir);
    let runs = result?;
    let get = |f: bool, d: bool| {
        runs.iter()
            .find(|r| r.fallocate == f && r.discard == d)
            .expect("ran")
    };
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
            "simfs TRIM commands",
            "simfs MB discarded",
            "simfs TRIMs, one per extent at unlink",
            "simfs s (MX500)",
            "simfs WAF",
        ]
        .map(String::from)
        .to_vec(),
        rows: vec![],
    };
    let waf = |w: Option<f64>| w.map_or("—".into(), |w| format!("{w:.2}"));
    for r in &runs {
        table.rows.push(vec![
            combo_name(r.fallocate, r.discard).into(),
            r.discards.to_string(),
            format!("{:.1}", r.discard_bytes as f64 / 1e6),
            r.write_requests.to_string(),
            format!("{:.1}", r.write_bytes as f64 / 1e6),
            format!("{:.2}", r.replayed_s),
            waf(r.replayed_waf),
            r.sim_trim_commands.to_string(),
            format!("{:.1}", r.sim_trim_bytes as f64 / 1e6),
            r.sim_trims_per_unlink.to_string(),
            format!("{:.2}", r.sim_s),
            waf(r.sim_waf),
        ]);
    }
    let plots: Vec<Plot> = vec![BarPlot {
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
    .into()];
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
        ),
    ];
    let mut verdicts = verdicts;
    // simfs against real ext4, per repetition: TRIM commands and bytes discarded, for each
    // combination with the discard mount (ours = simfs / ext4; 1 = the same).
    let per_rep = |n: u64| n as f64 / repeat as f64;
    for (what, r) in [("trim-only", trim_only), ("fallocate-trim", both)] {
        for (measure, ext4, sim) in [
            ("count", r.discards, r.sim_trim_commands),
            ("bytes", r.discard_bytes, r.sim_trim_bytes),
        ] {
            let ratio = sim as f64 / ext4.max(1) as f64;
            let score = Score {
                id: format!("tempfiles-real.simfs-vs-ext4-{measure}-{what}"),
                role: Role::Predicted,
                ours: Some(ratio),
                paper: Some(1.0),
                tolerance: Some(HEADLINE_TOLERANCE),
            };
            verdicts.push(Verdict {
                holds: score.within(),
                score: Some(score),
                claim: format!(
                    "simfs sends as many TRIM {} per repetition as real ext4 ({}), within ±30%",
                    if measure == "count" { "commands" } else { "bytes" },
                    combo_name(r.fallocate, r.discard)
                ),
                reference: "real ext4 on this machine's kernel, captured; simfs with its journal-time discard to the end of each free run (Linux >= 6.8) , mballoc's preallocation, O_DIRECT batch files and as many journal commits as ext4 made; ours = simfs / ext4".into(),
                measured: format!(
                    "per repetition: ext4 {:.0}, simfs {:.0} ({ratio:.2}×); ext4 committed {:.1} times a repetition, and so did the model",
                    per_rep(ext4),
                    per_rep(sim),
                    per_rep(r.commits)
                ),
            });
        }
    }
    Ok(Section {
        id: ID.into(),
        title: TITLE.into(),
        question: format!(
            "Does a real kernel's ext4 send the TRIMs the simulated experiment assumes, and what do they cost? \
             The grace hash join of SF {sf} (128-byte rows, 2 MiB of memory, 8 KiB spill writes) runs \
             {repeat} times with flashlab's os backend (O_DIRECT, or the page cache would absorb the spill \
             files) inside a {} MiB ext4 on a loop device, mounted with \
             and without discard, fallocate on and off; its block I/O is captured and replayed (closed \
             loop per issuing task) on a fresh MX500 preset of the same size.",
            capacity >> 20
        ),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots,
        tables: vec![table],
        verdicts,
        provenance: vec![
            Provenance {
                number: "discard requests, bytes written".into(),
                role: "measured on this machine's kernel (ext4 on a loop device). Since Linux 6.8 (and the 2024 stable kernels; commit 68da4c44b994) ext4's online discard trims from each freed extent to the end of the free space it lies in, within its group, once for every extent a commit freed: far more bytes are discarded than were written, the same free space again and again".into(),
            },
            Provenance {
                number: "simfs TRIM commands and bytes".into(),
                role: "predicted by simfs with ext4's journal-time discard as this kernel does it (fs/ext4/mballoc.c: extents freed in a transaction are discarded after its commit, each to the end of its free run within the group; its commits where ext4 made them in the run's progress: after as many data requests as the capture shows before each jbd2_end_commit event), mballoc's preallocation (small files share the locality-group window, larger ones get windows to the end of their size bucket) and O_DIRECT batch files; the column beside it is one TRIM per extent at each unlink (the `tempfiles` experiment's `no host path` row). ext4 commits every 5 s of wall-clock time, so its number of commits follows the machine's speed; the model is given them at the same point of the run's progress (data requests sent). What the model lacks: given ext4's number of commits, simfs merges the extents one commit freed into far fewer TRIMs than ext4 sends (ext4 sends several per batch file even with one commit a repetition), so ext4's freed extents do not merge as the model's do — the next step is to trace ext4:ext4_mballoc_free against ext4:ext4_trim_extent; and ext4's placement (flex_bg metadata in group 0, files from group 1, the stream allocator's goal) is simplified, which changes where free runs end".into(),
            },
            Provenance {
                number: "replayed times and WAF".into(),
                role: "predicted by the MX500 preset's model (TRIM cost an assumption, see `tempfiles`); think times are this machine's".into(),
            },
        ],
        results: json!({"sf": sf, "repeat": repeat, "capacity_bytes": capacity, "runs": runs}),
    })
}

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
        repeat.to_string(),
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
        mount_opts: vec![],
        command: cmd,
        work_dir: work.to_path_buf(),
        stdout: Some(work.join(format!("{name}.json"))),
        out: None,
        cancel: cancel.clone(),
    };
    let c = capture::capture(&spec).map_err(|e| format!("{name}: {e}"))?;
    if c.exit_code != Some(0) {
        return Err(format!("{name}: the join failed ({:?})", c.exit_code).into());
    }
    let t = &c.trace;
    let stats = super::replay_captured("mx500", capacity, t).map_err(|e| format!("{name}: {e}"))?;
    // The model of this run: simfs over the simulated MX500 with the spill files' O_DIRECT
    // (no page cache) and ext4's discard as Linux does it: extents freed since the last
    // journal commit (every 5 s) discarded after it, merged.
    // The model runs the same join: PostgreSQL's, at the same work_mem.
    let model = || -> Result<joinrun::JoinRunSpec, crate::LabError> {
        let mut spec = join_spec("mx500", sf, capacity, repeat, fallocate, discard)?;
        spec.join.algorithm = hashjoin::Algorithm::Postgres;
        spec.memory_bytes = WORK_MEM_BYTES;
        Ok(spec)
    };
    let per_unlink = joinrun::run(&model()?, &mut |_| {})?;
    let mut spec = model()?;
    super::tempfiles::set_host(&mut spec, vfs::HostConfig::direct_io(), discard);
    // This machine's kernel discards to the end of each free run (Linux >= 6.8 and the
    // 2024 stable kernels).
    spec.storage.discard_to_free_run_end = true;
    // ext4 commits every 5 s of wall-clock time, so how many commits a run makes, and
    // when they fall against its deletions (what a commit's discards can merge), follow
    // how fast this machine ran it. The model commits where ext4 did in the run's
    // progress: after as many data requests as the capture shows before each of jbd2's
    // `jbd2_end_commit` events; only the run's end is a sync, as in the real run.
    spec.storage.commit_each_repetition = false;
    let commits = c
        .journal_commits
        .unwrap_or_else(|| t.count(flash::Op::Flush));
    if !c.journal_commit_at_ns.is_empty() {
        let data = |r: &&trace::Request| matches!(r.cmd.op, flash::Op::Read | flash::Op::Write);
        spec.storage.host.journal_commit_after_requests = c
            .journal_commit_at_ns
            .iter()
            .map(|&at| {
                t.requests
                    .iter()
                    .filter(data)
                    .filter(|r| r.at_ns <= at)
                    .count() as u64
            })
            .collect();
    }
    let sim = joinrun::run(&spec, &mut |_| {})?;
    Ok(Run {
        fallocate,
        discard,
        discards: t.count(flash::Op::Trim),
        discard_bytes: t.bytes(flash::Op::Trim),
        write_requests: t.count(flash::Op::Write),
        write_bytes: t.bytes(flash::Op::Write),
        flushes: t.count(flash::Op::Flush),
        commits,
        replayed_s: stats.simulated_ns as f64 / 1e9,
        replayed_waf: stats.waf,
        sim_trim_commands: sim.repetitions.iter().map(|r| r.trim_commands).sum(),
        sim_trim_bytes: sim.repetitions.iter().map(|r| r.trim_bytes).sum(),
        sim_trims_per_unlink: per_unlink.repetitions.iter().map(|r| r.trim_commands).sum(),
        sim_s: sim.repetitions.iter().map(|r| r.total_ns).sum::<u64>() as f64 / 1e9,
        sim_waf: {
            let (h, f) = sim.repetitions.iter().fold((0, 0), |(h, f), r| {
                (h + r.host_write_pages, f + r.flash_write_pages)
            });
            (h > 0).then(|| f as f64 / h as f64)
        },
    })
}
