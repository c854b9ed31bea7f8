//! `flashlab fio`: a fio job file's I/O on a simulated drive, reported as fio reports it.
//!
//! The real fio defines the I/O: its null engine runs the job file (checked first by
//! [`jobfile`]) and writes each job's I/O log ([`iolog`]). The logs are replayed together
//! on one simulated drive in virtual time, each job (and each numjobs clone) a closed-loop
//! stream keeping its iodepth requests in flight, and every request's latency is kept for
//! the [`report`] ([`latency`]).

mod grammar;
mod iolog;
pub(crate) mod jobfile;
pub(crate) mod latency;
pub(crate) mod report;

use super::*;
use report::Unit;
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// fio's text report.
    Normal,
    /// fio's JSON shape: `jobs[].read.iops`, `jobs[].write.clat_ns.percentile`, ...
    Json,
}

/// What `flashlab fio --help` says of job options (docs/commands/fio.md has the reasons).
const JOB_OPTIONS_HELP: &str = "\
Job options honoured (fio writes them into the I/O log): rw/readwrite (trim, randtrim and
trimwrite as TRIMs), bs/blocksize, bssplit, bsrange/blocksize_range, blockalign/ba, size,
io_size/io_limit, offset, number_ios, loops, rwmixread, rwmixwrite, random_distribution, norandommap, randseed,
randrepeat, fsync, fdatasync; by the replay: iodepth, numjobs; in the report:
group_reporting. Accepted and replaced: name, description, ioengine (the simulated drive),
direct=1 and buffered=0 (no page cache), filename and directory (the drive, as a raw device), thread.
Any other option is refused by name, with the reason.

The real fio (its null engine) writes each job's I/O; install it with `apt-get install
fio`. Latencies are the simulated drive's (no host software stack); percentiles are
exact.";

#[derive(clap::Args)]
#[command(after_help = JOB_OPTIONS_HELP)]
pub(crate) struct FioArgs {
    /// fio job file.
    pub(crate) jobfile: PathBuf,
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// normal: fio's text report; json: fio's JSON shape.
    #[arg(long, value_enum, default_value = "normal")]
    pub(crate) output_format: OutputFormat,
    /// The fio program, which writes the jobs' I/O (with its null engine).
    #[arg(long, default_value = "fio")]
    pub(crate) fio: PathBuf,
    /// Before the jobs: none (a fresh drive, whose unwritten blocks read without touching
    /// flash), fill (sequential writes up to --occupancy), steady[:Nx] (fill, then random
    /// 4 KiB writes until WAF is steady by SNIA PTS's rule, at most N times the filled
    /// bytes; default 5x). Not measured.
    #[arg(long, default_value = "none")]
    pub(crate) precondition: lab::precondition::Precondition,
    /// Share of the logical space preconditioning fills (0 < F <= 1; default 1); only with
    /// --precondition fill or steady.
    #[arg(long)]
    pub(crate) occupancy: Option<f64>,
    /// Seed of preconditioning's random writes (fio's own seeds are the job's randseed).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Print the drive's wear report after the jobs, as `sim --wear` does (days at the
    /// jobs' write rate); with --output-format=json, `flashlab.wear`.
    #[arg(long)]
    pub(crate) wear: bool,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
}

/// The installed fio's version (an error naming how to install it if there is none).
pub(crate) fn iolog_version(fio: &Path) -> Result<String> {
    iolog::version(fio)
}

/// The name prefix of fio's scratch directories in the temp directory.
const FIO_DIR_PREFIX: &str = "flashlab-fio-";

pub(crate) fn run(a: FioArgs) -> Result<()> {
    if let (Some(f), lab::precondition::Precondition::None) = (a.occupancy, a.precondition) {
        bail!("--occupancy {f} has no effect without --precondition fill or steady");
    }
    if given::given("seed")
        && !matches!(
            a.precondition,
            lab::precondition::Precondition::Steady { .. }
        )
    {
        bail!("--seed seeds steady preconditioning's random writes: without --precondition steady it does nothing (fill writes in order; fio's own seeds are the job's randseed)");
    }
    let jobs = jobfile::read(&a.jobfile)?;
    let preset = a.device.preset()?;
    let name = preset.name.clone();
    let outputs = super::timeline::TimelineOutputs::open(&a.timeline, std::slice::from_ref(&name))?;
    let mut log = |c: &flash::timeline::Completion| outputs.log_request(&name, c);
    let each: Option<&mut dyn FnMut(&flash::timeline::Completion)> =
        outputs.logs_requests().then_some(&mut log);
    let record = a
        .timeline
        .wanted()
        .then(|| lab::sim::Record::new(outputs.interval_ns(), each));
    let mut run = simulate(
        &jobs,
        &preset,
        &a.fio,
        a.precondition,
        a.occupancy.unwrap_or(1.0),
        a.seed,
        record,
    )?;
    let recorded = match run.series.take() {
        Some(s) => outputs.finish(&[(name.clone(), s)])?,
        None => Vec::new(),
    };
    if a.output_format == OutputFormat::Json {
        let mut v = run.json(&jobs, &preset);
        v["flashlab"]["jobfile"] = serde_json::json!(a.jobfile.display().to_string());
        if a.wear {
            v["flashlab"]["wear"] = serde_json::to_value(&run.wear)?;
        }
        if !recorded.is_empty() {
            v["flashlab"]["recorded"] = serde_json::json!(recorded);
        }
        super::emit::json_pretty(&v)?;
    } else {
        println!(
            "flashlab fio: {} on {} ({} bytes): the I/O {}'s null engine wrote, replayed in virtual time; latencies are the simulated drive's (no host software stack), percentiles exact",
            a.jobfile.display(),
            preset.name,
            run.drive_bytes,
            run.fio_version
        );
        for n in &preset.notes {
            println!("  note              {n}");
        }
        if a.precondition != lab::precondition::Precondition::None {
            print_precondition(&run.precondition);
        }
        println!();
        print!("{}", report::text(&run.units));
        if a.wear {
            println!();
            super::wear::print_wear_or_why(run.wear.as_ref(), &preset);
        }
        for r in &recorded {
            println!("recorded: {r}");
        }
    }
    Ok(())
}

/// A job file's run on a simulated drive: what `flashlab fio` reports.
pub(crate) struct Simulated {
    pub(crate) fio_version: String,
    pub(crate) drive_bytes: u64,
    pub(crate) units: Vec<Unit>,
    pub(crate) summary: trace::ReplaySummary,
    pub(crate) precondition: lab::precondition::PreconditionReport,
    pub(crate) stats: flash::DeviceStats,
    pub(crate) wear: Option<flash::WearReport>,
    /// The run over time, when asked for (`--timeseries` and the rest).
    pub(crate) series: Option<flash::timeline::TimeSeries>,
}

impl Simulated {
    /// fio's JSON shape, with flashlab's own figures under `flashlab`.
    pub(crate) fn json(
        &self,
        jobs: &jobfile::JobFile,
        preset: &flash::Preset,
    ) -> serde_json::Value {
        let global: serde_json::Map<String, serde_json::Value> = jobs
            .global
            .iter()
            .map(|o| {
                (
                    o.key.clone(),
                    serde_json::json!(o.value.clone().unwrap_or_default()),
                )
            })
            .collect();
        serde_json::json!({
            "fio version": self.fio_version,
            "global options": global,
            "jobs": self.units.iter().map(report::job_json).collect::<Vec<_>>(),
            "flashlab": {
                "preset": preset.name,
                "preset_notes": preset.notes,
                "logical_bytes": self.drive_bytes,
                "requests": self.summary.requests,
                "simulated_ns": self.summary.end_ns,
                "precondition": self.precondition,
                "latency": "the simulated drive's, from issue to completion (no host software stack: slat is 0, lat equals clat)",
                "percentiles": "exact, nearest rank over every request (fio estimates them from histogram buckets)",
                "drive": self.stats,
            },
        })
    }
}

/// Runs `jobs` on a new `preset` drive, preconditioned first (not measured): the real
/// `fio` writes the jobs' I/O logs, which are replayed together in virtual time.
pub(crate) fn simulate(
    jobs: &jobfile::JobFile,
    preset: &flash::Preset,
    fio: &Path,
    precondition: lab::precondition::Precondition,
    occupancy: f64,
    seed: u64,
    record: Option<lab::sim::Record>,
) -> Result<Simulated> {
    let mut dev = preset.build()?;
    let drive_bytes = dev.logical_bytes();
    let fio_version = iolog::version(fio)?;
    let pre = lab::precondition::precondition(&mut dev, precondition, occupancy, 0.0, seed)?;
    let (units, summary, recording) = match record {
        None => {
            let (u, s) = replay_jobs(&mut dev, jobs, fio, 0, &preset.name)?;
            (u, s, None)
        }
        Some(r) => {
            let mut t = flash::timeline::Timeline::new(&mut dev, r.interval_ns, 0, r.each)?;
            let (u, s) = replay_jobs(&mut t, jobs, fio, 0, &preset.name)?;
            (u, s, Some(t.into_recording()))
        }
    };
    dev.settle();
    let stats = dev.stats();
    let series = recording.map(|r| r.finish(&stats)).transpose()?;
    Ok(Simulated {
        fio_version,
        drive_bytes,
        units,
        summary,
        precondition: pre,
        stats,
        wear: dev.wear_report(),
        series,
    })
}

/// Replays `jobs` (their I/O as the real `fio`'s null engine writes it) together on `dev`
/// from virtual time `start_ns`, each job (and clone) a closed-loop stream at its iodepth;
/// returns the report's entries (latencies, and the last completion's absolute time as
/// each entry's runtime) and the replay's summary. `drive` names the drive in errors.
pub(crate) fn replay_jobs<D: Device>(
    dev: &mut D,
    jobs: &jobfile::JobFile,
    fio: &Path,
    start_ns: u64,
    drive: &str,
) -> Result<(Vec<Unit>, trace::ReplaySummary)> {
    let drive_bytes = dev.logical_bytes();
    let cancel = crate::signals::cancel_token();
    // fio's job file, its output and the I/O logs: removed when this returns (and, if
    // this process is killed first, by the next run).
    crate::scratch::remove_stale_dirs(&std::env::temp_dir(), FIO_DIR_PREFIX);
    let dir = tempfile::Builder::new()
        .prefix(&crate::scratch::own_prefix(FIO_DIR_PREFIX))
        .tempdir()
        .context("creating a temporary directory for fio's I/O logs")?;
    let _held = trace::leftovers::hold(format!(
        "directory {} (fio's I/O logs; the next flashlab fio removes it)",
        dir.path().display()
    ));
    let pb = progress_bar(0, "fio");
    pb.set_phase("fio writes the jobs' I/O logs");
    let instances = iolog::write_iologs(fio, jobs, dir.path(), drive_bytes, &cancel)?;

    let error = Rc::new(RefCell::new(None));
    let mut streams = Vec::new();
    let mut depths = Vec::new();
    let mut requests = 0u64;
    for (k, inst) in instances.iter().enumerate() {
        let job = &jobs.jobs[inst.job];
        let file = trace::TraceFile::open_cancellable(
            &inst.iolog,
            trace::Format::Fio,
            None,
            None,
            &cancel,
        )
        .with_context(|| format!("reading the I/O log fio wrote for job {}", job.name))?;
        let end = file.info().max_end_bytes;
        if end > drive_bytes {
            bail!(
                "job {} reaches byte {end} ({}) but the drive ({drive}) holds {}: pass --capacity with at least that (e.g. --capacity {}), or give the job a smaller size or offset",
                job.name,
                flash::bytes::binary(end),
                flash::bytes::exact(drive_bytes),
                flash::bytes::whole_gib_at_least(end)
            );
        }
        requests += file.info().requests;
        streams.push(iolog::JobStream::open(
            &file,
            k as u32,
            Rc::clone(&error),
            cancel.clone(),
        )?);
        depths.push(job.iodepth);
    }

    // One report entry per job and clone, or one for all with group_reporting.
    let mut units: Vec<Unit> = Vec::new();
    let mut unit_of: Vec<usize> = Vec::new();
    for inst in &instances {
        let job = &jobs.jobs[inst.job];
        if jobs.group_reporting && !units.is_empty() {
            units[0].jobs += 1;
        } else {
            units.push(Unit::new(&job.name, job.iodepth, job.own.clone()));
        }
        unit_of.push(units.len() - 1);
    }
    pb.set_length(requests);
    pb.set_phase("replaying the jobs");
    let summary = trace::replay_closed_each(
        dev,
        streams,
        &depths,
        start_ns,
        &mut |n| pb.set_position(n),
        &mut |r, issued| {
            let u = &mut units[unit_of[issued.stream]];
            let clat_ns = issued.done_ns - issued.issue_ns;
            u.runtime_ns = u.runtime_ns.max(issued.done_ns);
            let d = match r.cmd.op {
                flash::Op::Read => 0,
                flash::Op::Write => 1,
                flash::Op::Trim => 2,
                flash::Op::Flush => {
                    // fio's sync and datasync.
                    u.sync.push(clat_ns);
                    return;
                }
                other => unreachable!("fio's I/O log holds no {other:?} commands"),
            };
            u.dirs[d].bytes += r.cmd.len_bytes;
            u.dirs[d].clat.push(clat_ns);
        },
    );
    pb.finish_and_clear();
    if let Some(e) = error.borrow_mut().take() {
        return Err(e.context("replaying fio's I/O logs"));
    }
    Ok((units, summary?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn help_names_every_option_taken() {
        let words: Vec<&str> = super::JOB_OPTIONS_HELP
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .collect();
        for o in super::jobfile::HONOURED
            .iter()
            .chain(super::jobfile::ACCEPTED)
        {
            assert!(words.contains(o), "--help does not name {o}");
        }
    }
}
