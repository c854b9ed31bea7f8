//! `flashlab validate`: a held-out set of fio jobs run on a target — a new file on this
//! machine's disk with the real fio (O_DIRECT, libaio), or a simulated drive — and the same
//! jobs on a preset (the model), side by side: per job and direction the IOPS and the
//! mean, median and 99th percentile of the total latency (fio's `lat`: submission to
//! completion), each with the model's error, and a verdict at a stated tolerance.
//!
//! A block device (`--device`, with `--i-understand-this-erases`) is checked as calibrate
//! checks one (not mounted, not swap, no holders) and held exclusively while fio runs.
//!
//! The sequence, the same on both sides: the region is written sequentially (1 MiB, QD8)
//! and left idle for a second; the jobs run one after another (a tenth of a second
//! between them); the region is then written once more at random (4 KiB, QD32), left idle
//! a second, and the jobs run again. Jobs: random 4 KiB reads and writes at QD1 and QD32,
//! a 70/30 random mix at QD8, sequential 128 KiB reads and writes at QD8, sequential
//! 1 MiB reads and writes at QD1. None of them was used to fit a preset (calibrate's
//! probes are its own): they are held out.
//!
//! On a simulated side every job's I/O is what the real fio's null engine writes for it,
//! replayed in virtual time on one drive that keeps its state from job to job; the idle
//! times are virtual too. A file target is created (refused if it exists) and removed at
//! the end, also on an error or Ctrl-C.

use super::fio::jobfile;
use super::fio::latency::Latencies;
use super::*;
use clap::ArgGroup;
use serde::Serialize;
use std::path::Path;

/// The name prefix of validate's fio job directories in the temp directory.
const VALIDATE_DIR_PREFIX: &str = "flashlab-validate-";

/// Idle time after each preconditioning write, and between jobs.
const REST_AFTER_FILL_NS: u64 = 1_000_000_000;
const GAP_BETWEEN_JOBS_NS: u64 = 100_000_000;
const DEFAULT_SIM_CAPACITY: u64 = 4 << 30;
const DEFAULT_SIZE: u64 = 256 << 20;

#[derive(clap::Args)]
#[command(
    group(ArgGroup::new("target").required(true).args(["file", "device", "sim_preset"])),
    after_help = "Jobs (each run after a sequential fill of the region, then again after one random 4 KiB \
pass over it): randread 4 KiB QD1 and QD32, randwrite 4 KiB QD1 and QD32, randrw 70/30 4 KiB QD8, \
read and write 128 KiB QD8, read and write 1 MiB QD1. Needs fio (apt-get install fio). See \
docs/commands/validate.md."
)]
pub(crate) struct ValidateArgs {
    /// The model: a preset name or TOML file (e.g. one `flashlab calibrate` wrote).
    #[arg(long)]
    pub(crate) preset: String,
    /// Run the jobs on a new file at PATH (O_DIRECT, libaio): created by fio, removed at
    /// the end; a PATH that exists is refused.
    #[arg(long, value_name = "PATH")]
    pub(crate) file: Option<PathBuf>,
    /// Run the jobs on a whole block device, ERASING its first --size bytes (needs
    /// --i-understand-this-erases); refused while it or a partition of it is mounted, used
    /// as swap or held by another driver (calibrate's rules), and held exclusively meanwhile.
    #[arg(long, value_name = "DEV", requires = "i_understand_this_erases")]
    pub(crate) device: Option<PathBuf>,
    /// Confirms that --device may be overwritten.
    #[arg(long)]
    pub(crate) i_understand_this_erases: bool,
    /// Run the jobs on a simulated drive (a preset name or TOML file) instead.
    #[arg(long, value_name = "PRESET")]
    pub(crate) sim_preset: Option<String>,
    /// Capacity of the simulated drives (the model, and --sim-preset's) [default: 4GiB].
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) capacity: Option<u64>,
    /// The region the jobs address, from the start of the target [default: 256MiB].
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) size: Option<u64>,
    /// A job holds when its IOPS, mean, p50 and p99 are all within this many percent of
    /// the target's.
    #[arg(long, default_value_t = 15.0)]
    pub(crate) tolerance: f64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
    /// The fio program (the real target's engine, and the simulated side's I/O).
    #[arg(long, default_value = "fio")]
    pub(crate) fio: PathBuf,
}

/// One job of the held-out set.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobSpec {
    pub(crate) name: &'static str,
    rw: &'static str,
    bs_kib: u64,
    iodepth: u32,
    ios: u64,
}

pub(crate) const JOBS: [JobSpec; 9] = [
    JobSpec {
        name: "randread-4k-qd1",
        rw: "randread",
        bs_kib: 4,
        iodepth: 1,
        ios: 2000,
    },
    JobSpec {
        name: "randread-4k-qd32",
        rw: "randread",
        bs_kib: 4,
        iodepth: 32,
        ios: 8000,
    },
    JobSpec {
        name: "randwrite-4k-qd1",
        rw: "randwrite",
        bs_kib: 4,
        iodepth: 1,
        ios: 2000,
    },
    JobSpec {
        name: "randwrite-4k-qd32",
        rw: "randwrite",
        bs_kib: 4,
        iodepth: 32,
        ios: 8000,
    },
    JobSpec {
        name: "randrw70-4k-qd8",
        rw: "randrw",
        bs_kib: 4,
        iodepth: 8,
        ios: 4000,
    },
    JobSpec {
        name: "read-128k-qd8",
        rw: "read",
        bs_kib: 128,
        iodepth: 8,
        ios: 1000,
    },
    JobSpec {
        name: "write-128k-qd8",
        rw: "write",
        bs_kib: 128,
        iodepth: 8,
        ios: 1000,
    },
    JobSpec {
        name: "read-1m-qd1",
        rw: "read",
        bs_kib: 1024,
        iodepth: 1,
        ios: 128,
    },
    JobSpec {
        name: "write-1m-qd1",
        rw: "write",
        bs_kib: 1024,
        iodepth: 1,
        ios: 128,
    },
];

/// The two states the jobs run in.
pub(crate) const PHASES: [&str; 2] = ["after a fill", "after random writes"];

impl JobSpec {
    /// The job's section (without the target's own options).
    fn text(&self, region: u64) -> String {
        let mut t = format!(
            "[{}]\nrw={}\nbs={}k\niodepth={}\nsize={region}\nnumber_ios={}\n",
            self.name, self.rw, self.bs_kib, self.iodepth, self.ios
        );
        if self.rw == "randrw" {
            t.push_str("rwmixread=70\n");
        }
        t
    }
}

/// The preconditioning writes: the region in order, then once at random.
fn fill_text(region: u64) -> String {
    format!("[fill]\nrw=write\nbs=1m\niodepth=8\nsize={region}\n")
}

fn random_pass_text(region: u64) -> String {
    format!("[random-pass]\nrw=randwrite\nbs=4k\niodepth=32\nsize={region}\n")
}

/// What one job did in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Figures {
    pub(crate) iops: f64,
    pub(crate) mean_ns: f64,
    pub(crate) p50_ns: f64,
    pub(crate) p99_ns: f64,
}

impl Figures {
    fn of(lat: &Latencies, runtime_ns: u64) -> Option<Figures> {
        let s = lat.summary();
        if s.n == 0 || runtime_ns == 0 {
            return None;
        }
        let pct = |p: f64| {
            s.percentiles
                .iter()
                .find(|(q, _)| (*q - p).abs() < 1e-9)
                .map_or(0.0, |(_, v)| *v as f64)
        };
        Some(Figures {
            iops: s.n as f64 * 1e9 / runtime_ns as f64,
            mean_ns: s.mean_ns,
            p50_ns: pct(50.0),
            p99_ns: pct(99.0),
        })
    }

    /// Each figure's relative error against `target`'s (NaN where either side has no
    /// figure: such a row does not hold).
    fn error(&self, target: &Figures) -> [f64; 4] {
        let e = |m: f64, t: f64| {
            if t > 0.0 && m > 0.0 {
                m / t - 1.0
            } else {
                f64::NAN
            }
        };
        [
            e(self.iops, target.iops),
            e(self.mean_ns, target.mean_ns),
            e(self.p50_ns, target.p50_ns),
            e(self.p99_ns, target.p99_ns),
        ]
    }
}

/// A job's figures in one phase, per direction present (read, write).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct JobResult {
    pub(crate) job: &'static str,
    pub(crate) phase: &'static str,
    pub(crate) direction: &'static str,
    pub(crate) figures: Figures,
}

/// Runs the sequence on a simulated drive built from `preset`; the results in job order,
/// phase by phase.
pub(crate) fn run_simulated(preset: &Preset, region: u64, fio: &Path) -> Result<Vec<JobResult>> {
    let mut dev = preset.build()?;
    if region > dev.logical_bytes() {
        bail!(
            "--size {region} is larger than the simulated drive's {} bytes (--capacity)",
            dev.logical_bytes()
        );
    }
    let parse = |text: &str| jobfile::parse("validate's job", text);
    let mut out = Vec::new();
    let mut now = 0;
    for (k, phase) in PHASES.iter().enumerate() {
        let pre = if k == 0 {
            fill_text(region)
        } else {
            random_pass_text(region)
        };
        super::fio::replay_jobs(&mut dev, &parse(&pre)?, fio, now, &preset.name)?;
        now = dev.settle() + REST_AFTER_FILL_NS;
        for job in JOBS {
            let (units, _) = super::fio::replay_jobs(
                &mut dev,
                &parse(&job.text(region))?,
                fio,
                now,
                &preset.name,
            )?;
            let u = &units[0];
            let runtime = u.runtime_ns.saturating_sub(now);
            for (d, direction) in [(0, "read"), (1, "write")] {
                if let Some(figures) = Figures::of(&u.dirs[d].clat, runtime) {
                    out.push(JobResult {
                        job: job.name,
                        phase,
                        direction,
                        figures,
                    });
                }
            }
            now = dev.settle() + GAP_BETWEEN_JOBS_NS;
        }
    }
    Ok(out)
}

/// Runs the sequence on a new file at `path` with the real fio; removes the file after.
fn run_on_file(path: &Path, region: u64, fio: &Path) -> Result<Vec<JobResult>> {
    refuse_fio_specials(path)?;
    // Created here (never an existing path, nor a file system in memory), its --size
    // bytes reserved (so a full file system says so now), removed when this returns.
    let cancel = crate::signals::cancel_token();
    let _target = crate::calibrate::os_target::OsTarget::create_file(path, region, cancel)
        .with_context(|| format!("--file {}", path.display()))?;
    run_on_path(path, region, fio)
}

/// fio reads `filename=` its own way: `:` separates files, `${VAR}` expands, a newline
/// starts another option. A path with any of them (or any other control character) is
/// refused rather than handed to fio as something else.
fn refuse_fio_specials(path: &Path) -> Result<()> {
    let text = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8: fio could not be given it", path.display()))?;
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, ':' | '$') || c.is_control())
    {
        bail!(
            "{}: fio would read {c:?} in a file name as its own syntax (':' separates files, '$' expands variables); give a path without it",
            path.display()
        );
    }
    Ok(())
}

/// Runs the sequence on block device `dev` with the real fio, after calibrate's checks
/// (not mounted, not swap, no holders), holding it exclusively meanwhile (fio's own opens
/// are not exclusive).
fn run_on_device(dev: &Path, region: u64, fio: &Path) -> Result<Vec<JobResult>> {
    refuse_fio_specials(dev)?;
    let cancel = crate::signals::cancel_token();
    let _held = crate::calibrate::os_target::OsTarget::open_device(dev, region, cancel)?;
    run_on_path(dev, region, fio)
}

/// The sequence with the real fio on `path` (a file or a device).
fn run_on_path(path: &Path, region: u64, fio: &Path) -> Result<Vec<JobResult>> {
    let cancel = crate::signals::cancel_token();
    let mut out = Vec::new();
    for (k, phase) in PHASES.iter().enumerate() {
        let pre = if k == 0 {
            fill_text(region)
        } else {
            random_pass_text(region)
        };
        real_fio(fio, path, &pre)?;
        std::thread::sleep(std::time::Duration::from_nanos(REST_AFTER_FILL_NS));
        for job in JOBS {
            if cancel.is_cancelled() {
                bail!("interrupted; {} removed", path.display());
            }
            let json = real_fio(fio, path, &job.text(region))?;
            out.extend(figures_of_fio_json(&json, job.name, phase)?);
            std::thread::sleep(std::time::Duration::from_nanos(GAP_BETWEEN_JOBS_NS));
        }
    }
    Ok(out)
}

/// Runs one job section on `path` with the real fio (libaio, O_DIRECT, latency
/// percentiles of the total latency); returns fio's JSON.
fn real_fio(fio: &Path, path: &Path, job: &str) -> Result<serde_json::Value> {
    let text = format!(
        "[global]\nioengine=libaio\ndirect=1\nfilename={}\nlat_percentiles=1\nrandrepeat=1\n{job}",
        path.display()
    );
    crate::scratch::remove_stale_dirs(&std::env::temp_dir(), VALIDATE_DIR_PREFIX);
    let dir = tempfile::Builder::new()
        .prefix(&crate::scratch::own_prefix(VALIDATE_DIR_PREFIX))
        .tempdir()
        .context("creating a directory for fio's job file")?;
    let _held_dir = trace::leftovers::hold(format!(
        "directory {} (validate's fio job; the next flashlab validate removes it)",
        dir.path().display()
    ));
    let job_path = dir.path().join("validate.fio");
    std::fs::write(&job_path, text).context("writing fio's job file")?;
    let (out_path, err_path) = (dir.path().join("fio.json"), dir.path().join("fio.err"));
    let mut command = std::process::Command::new(fio);
    // fio dies with flashlab (it would otherwise go on writing the target).
    crate::signals::dies_with_flashlab(&mut command);
    let mut child = command
        .arg("--output-format=json")
        .arg(format!("--output={}", out_path.display()))
        .arg(&job_path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path)?)
        .spawn()
        .with_context(|| {
            format!(
                "starting {} (install it with apt-get install fio)",
                fio.display()
            )
        })?;
    let _held = trace::leftovers::hold(format!("process {} (fio)", child.id()));
    let cancel = crate::signals::cancel_token();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if cancel.is_cancelled() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("interrupted while fio ran on {}", path.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    if !status.success() {
        bail!(
            "fio failed on {} ({status}): {}",
            path.display(),
            std::fs::read_to_string(&err_path)
                .unwrap_or_default()
                .trim()
        );
    }
    // fio may print notes before its JSON.
    let text = std::fs::read_to_string(&out_path).context("reading fio's output")?;
    let start = text.find('{').context("fio printed no JSON")?;
    serde_json::from_str(&text[start..]).context("reading fio's JSON")
}

/// The figures of fio's JSON for its first job, per direction with requests.
pub(crate) fn figures_of_fio_json(
    v: &serde_json::Value,
    job: &'static str,
    phase: &'static str,
) -> Result<Vec<JobResult>> {
    let j = v
        .get("jobs")
        .and_then(|j| j.get(0))
        .context("fio's JSON has no job")?;
    let mut out = Vec::new();
    for direction in ["read", "write"] {
        let d = &j[direction];
        let n = d["total_ios"].as_u64().unwrap_or(0);
        if n == 0 {
            continue;
        }
        let lat = &d["lat_ns"];
        let pct = |p: &str| {
            lat["percentile"][p]
                .as_f64()
                .or_else(|| d["clat_ns"]["percentile"][p].as_f64())
                .unwrap_or(0.0)
        };
        out.push(JobResult {
            job,
            phase,
            direction,
            figures: Figures {
                iops: d["iops"].as_f64().unwrap_or(0.0),
                mean_ns: lat["mean"].as_f64().unwrap_or(0.0),
                p50_ns: pct("50.000000"),
                p99_ns: pct("99.000000"),
            },
        });
    }
    Ok(out)
}

/// A row of the comparison: the target's figures, the model's, the errors, the verdict.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Compared {
    pub(crate) job: &'static str,
    pub(crate) phase: &'static str,
    pub(crate) direction: &'static str,
    pub(crate) target: Figures,
    pub(crate) model: Figures,
    /// IOPS, mean, p50, p99: model / target - 1.
    pub(crate) error: [f64; 4],
    pub(crate) holds: bool,
}

pub(crate) fn compare(target: &[JobResult], model: &[JobResult], tolerance: f64) -> Vec<Compared> {
    target
        .iter()
        .filter_map(|t| {
            let m = model
                .iter()
                .find(|m| m.job == t.job && m.phase == t.phase && m.direction == t.direction)?;
            let error = m.figures.error(&t.figures);
            Some(Compared {
                job: t.job,
                phase: t.phase,
                direction: t.direction,
                target: t.figures,
                model: m.figures,
                error,
                holds: error.iter().all(|e| e.abs() <= tolerance), // NaN never holds
            })
        })
        .collect()
}

pub(crate) fn run(a: ValidateArgs) -> Result<()> {
    if !(a.tolerance > 0.0 && a.tolerance < 1000.0) {
        bail!(
            "--tolerance {} must be a percentage above 0 and below 1000",
            a.tolerance
        );
    }
    let real = a.file.is_some() || a.device.is_some();
    if real && a.capacity.is_some() {
        bail!("--capacity sizes the simulated drives; with --file or --device the model runs at its preset's own capacity (drop --capacity)");
    }
    let region = a.size.unwrap_or(DEFAULT_SIZE);
    if region < 64 << 20 || !region.is_multiple_of(1 << 20) {
        bail!("--size {region}: give at least 64MiB, a whole number of MiB");
    }
    super::fio::iolog_version(&a.fio)?;
    let capacity = a.capacity.unwrap_or(DEFAULT_SIM_CAPACITY);
    let sized = |name: &str| -> Result<Preset> {
        let p = Preset::load(name)?;
        Ok(if real { p } else { p.with_capacity(capacity) })
    };
    let model = sized(&a.preset)?;
    // Everything that would stop the model's run is checked before the target's.
    check_drive("--preset", &model, region, real)?;
    if let Some(name) = &a.sim_preset {
        check_drive("--sim-preset", &sized(name)?, region, real)?;
    }
    let (what, target) = match (&a.file, &a.device, &a.sim_preset) {
        (Some(path), _, _) => (
            format!("file {} (fio, libaio, O_DIRECT)", path.display()),
            run_on_file(path, region, &a.fio)?,
        ),
        (None, Some(dev), _) => (
            format!(
                "device {} (fio, libaio, O_DIRECT; its first {} MiB overwritten)",
                dev.display(),
                region >> 20
            ),
            run_on_device(dev, region, &a.fio)?,
        ),
        (None, None, Some(name)) => {
            let p = sized(name)?;
            (
                format!("simulated drive {} ({} bytes)", p.name, capacity),
                run_simulated(&p, region, &a.fio)?,
            )
        }
        (None, None, None) => unreachable!("clap requires a target"),
    };
    let modelled = run_simulated(&model, region, &a.fio)?;
    let rows = compare(&target, &modelled, a.tolerance / 100.0);
    let holding = rows.iter().filter(|r| r.holds).count();
    if a.json {
        let v = serde_json::json!({
            "target": what,
            "model": model.name,
            "region_bytes": region,
            "tolerance_percent": a.tolerance,
            "rows": rows,
            "holding": holding,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "flashlab validate: {what} against the model {} ({} bytes), {} MiB region; latency is fio's lat (submission to completion); a row holds when IOPS, mean, p50 and p99 are all within {}%",
        model.name,
        model_bytes(&model),
        region >> 20,
        a.tolerance
    );
    print_table(&rows);
    println!(
        "{holding} of {} rows within {}% ({} jobs x {} phases, a row per direction)",
        rows.len(),
        a.tolerance,
        JOBS.len(),
        PHASES.len()
    );
    Ok(())
}

/// A drive the jobs can run on: not zoned (they write anywhere), at least `region` bytes.
fn check_drive(flag: &str, p: &Preset, region: u64, real: bool) -> Result<()> {
    if p.ssd_config().is_some_and(|c| c.zoned.is_some()) {
        bail!(
            "{flag} {}: a zoned drive takes writes only at its zones' write pointers, and the jobs write anywhere (use a conventional preset)",
            p.name
        );
    }
    let bytes = model_bytes(p);
    if region > bytes {
        bail!(
            "--size {region} is larger than {flag} {}'s {bytes} bytes{}",
            p.name,
            if real {
                " (a preset calibrate wrote has the capacity it probed: calibrate again with --size at least this, or give a smaller --size)"
            } else {
                " (--capacity)"
            }
        );
    }
    Ok(())
}

fn model_bytes(p: &Preset) -> u64 {
    match &p.device {
        flash::DeviceConfig::Ssd(c) => c.geometry.logical_bytes,
        flash::DeviceConfig::Hdd(h) => h.logical_bytes,
    }
}

fn print_table(rows: &[Compared]) {
    println!(
        "  {:<18} {:<20} {:<5} {:>21} {:>23} {:>23} {:>23}  verdict",
        "job",
        "phase",
        "dir",
        "IOPS target/model",
        "mean µs target/model",
        "p50 µs target/model",
        "p99 µs target/model"
    );
    let us = |ns: f64| ns / 1e3;
    for r in rows {
        let cell = |t: f64, m: f64, e: f64| format!("{t:.0}/{m:.0} {:+.0}%", e * 100.0);
        println!(
            "  {:<18} {:<20} {:<5} {:>21} {:>23} {:>23} {:>23}  {}",
            r.job,
            r.phase,
            r.direction,
            cell(r.target.iops, r.model.iops, r.error[0]),
            cell(us(r.target.mean_ns), us(r.model.mean_ns), r.error[1]),
            cell(us(r.target.p50_ns), us(r.model.p50_ns), r.error[2]),
            cell(us(r.target.p99_ns), us(r.model.p99_ns), r.error[3]),
            if r.holds { "holds" } else { "off" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::{fit, probe, sim_target::SimTarget};

    const REGION: u64 = 64 << 20;

    /// fio writes the simulated side's I/O: without it these tests cannot run.
    fn fio() -> Option<PathBuf> {
        let fio = PathBuf::from("fio");
        match super::super::fio::iolog_version(&fio) {
            Ok(_) => Some(fio),
            Err(e) => {
                eprintln!("SKIPPED: validate's tests need fio ({e})");
                None
            }
        }
    }

    #[test]
    fn a_drive_against_itself_gives_the_same_numbers_and_every_row_holds() {
        let Some(fio) = fio() else { return };
        let p = Preset::load("mx500").unwrap().with_capacity(1 << 30);
        let a = run_simulated(&p, REGION, &fio).unwrap();
        let b = run_simulated(&p, REGION, &fio).unwrap();
        assert_eq!(a, b, "same preset, same numbers");
        // 9 jobs in 2 phases, the 70/30 mix twice (a row per direction).
        assert_eq!(a.len(), (JOBS.len() + 1) * PHASES.len());
        let rows = compare(&a, &b, 1e-9);
        assert!(rows.iter().all(|r| r.holds && r.error == [0.0; 4]));
        // The mix reads 70% of its requests.
        let mix = |d: &str| {
            a.iter()
                .find(|r| r.job == "randrw70-4k-qd8" && r.direction == d)
                .unwrap()
                .figures
                .iops
        };
        let share = mix("read") / (mix("read") + mix("write"));
        assert!((share - 0.7).abs() < 0.03, "read share {share}");
    }

    #[test]
    fn a_preset_calibrate_fits_to_a_drive_gives_its_numbers_within_5_percent() {
        let Some(fio) = fio() else { return };
        let drive = Preset::load("840pro").unwrap().with_capacity(1 << 30);
        let mut t = SimTarget::new(&drive, 1 << 30).unwrap();
        let m = probe::run(&mut t, 1, &mut |_| {}).unwrap();
        let fitted = fit::fit(&m).preset("fitted", "fitted to the 840pro");
        let target = run_simulated(&drive, REGION, &fio).unwrap();
        let model = run_simulated(&fitted, REGION, &fio).unwrap();
        let rows = compare(&target, &model, 0.05);
        assert_eq!(rows.len(), target.len());
        let off: Vec<String> = rows
            .iter()
            .filter(|r| !r.holds)
            .map(|r| format!("{} {} {}: {:?}", r.job, r.phase, r.direction, r.error))
            .collect();
        // Every row, 1 MiB QD1 reads too: the fit finds the 840 Pro's 32 dies on 8
        // channels from its large reads.
        assert!(off.is_empty(), "off by more than 5%: {off:#?}");
    }

    #[test]
    fn fios_json_gives_each_directions_iops_and_total_latency() {
        let v = serde_json::json!({"jobs": [{
            "read": {"total_ios": 10, "iops": 1000.5, "lat_ns": {"mean": 900.0,
                "percentile": {"50.000000": 800, "99.000000": 2000}}},
            "write": {"total_ios": 0, "iops": 0.0, "lat_ns": {"mean": 0.0}},
        }]});
        let r = figures_of_fio_json(&v, "j", PHASES[0]).unwrap();
        assert_eq!(r.len(), 1, "a direction without requests is left out");
        assert_eq!(r[0].direction, "read");
        assert_eq!(
            r[0].figures,
            Figures {
                iops: 1000.5,
                mean_ns: 900.0,
                p50_ns: 800.0,
                p99_ns: 2000.0
            }
        );
        assert!(figures_of_fio_json(&serde_json::json!({}), "j", PHASES[0]).is_err());
    }
}
