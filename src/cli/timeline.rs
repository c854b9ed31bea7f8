//! What `sim`, `replay` and `fio` record over virtual time: figures per interval
//! (`--timeseries`, `--timeseries-plot`), whole latency histograms (`--histograms`) and a
//! line per request (`--request-log`). Every path is checked before the run starts, so one
//! that cannot be written fails at once, not after the run; the files are written when it
//! ends (the request log as it goes, removed if the run fails).

use super::*;
use flash::timeline::{hgrm, Completion, TimeSeries};
use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct TimelineArgs {
    /// Write figures per interval of virtual time to FILE: CSV, or JSON if FILE ends in
    /// .json (IOPS, MB/s, read/write/TRIM count, bytes and p50/p99/max latency, mean queue
    /// depth, flash pages, GC copies, erases, pages trimmed, suspensions, WAF in the
    /// interval and so far, SLC cache fill).
    #[arg(long, value_name = "FILE")]
    pub(crate) timeseries: Option<PathBuf>,
    /// Draw the figures over time into FILE.svg (IOPS, read and write p99, queue depth,
    /// WAF, SLC cache fill; several drives overlaid).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) timeseries_plot: Option<PathBuf>,
    /// The interval of --timeseries and --timeseries-plot, in virtual time.
    #[arg(long, default_value = "100ms", value_parser = units::parse_duration_ns)]
    pub(crate) interval: u64,
    /// Write each operation's latency histogram over the whole run in HdrHistogram's
    /// percentile format (microseconds) to PREFIX-read.hgrm, PREFIX-write.hgrm and
    /// PREFIX-trim.hgrm (with several drives, PREFIX-DRIVE-read.hgrm, ...).
    #[arg(long, value_name = "PREFIX")]
    pub(crate) histograms: Option<PathBuf>,
    /// Write a CSV line per request as the drive served it (run, submit_ns, complete_ns,
    /// latency_ns, op, offset_bytes, len_bytes), for btt-style analysis.
    #[arg(long, value_name = "FILE.csv")]
    pub(crate) request_log: Option<PathBuf>,
}

impl TimelineArgs {
    /// Whether any output asks for a recording (or the library caller does).
    pub(crate) fn wanted(&self) -> bool {
        let library = super::emit::wanted();
        library.series
            || library.requests
            || self.timeseries.is_some()
            || self.timeseries_plot.is_some()
            || self.histograms.is_some()
            || self.request_log.is_some()
    }
}

fn create(path: &Path, what: &str) -> Result<File> {
    File::create(path).with_context(|| format!("{what} {}: cannot create it", path.display()))
}

/// Refuses a path that cannot become a file: its directory missing, a directory itself, or
/// not writable (tried: a new file is made and removed again; an existing one is opened
/// for appending, which changes nothing).
fn check_writable(path: &Path, what: &str) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "{what} {}: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        bail!("{what} {}: is a directory; name a file", path.display());
    }
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .with_context(|| format!("{what} {}: cannot write it", path.display()))?;
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("{what} {}: cannot create it", path.display()))?;
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Whether `path` names JSON (by its extension, in any case).
fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}
/// The histogram file of operation `op` for run `run` (named only with several runs).
fn histogram_path(prefix: &Path, run: Option<&str>, op: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    if let Some(r) = run {
        name.push(format!("-{}", file_safe(r)));
    }
    name.push(format!("-{op}.hgrm"));
    PathBuf::from(name)
}

/// A run's name as a file-name part: letters, digits, '.', '_' and '-' kept.
fn file_safe(name: &str) -> String {
    let base = Path::new(name)
        .file_stem()
        .map_or(name.to_string(), |s| s.to_string_lossy().into_owned());
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A CSV field, quoted if it needs to be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The outputs of an engine command (`btree`, `kv`; the join checks its own flags): the
/// recording needs the simulated drive, and the engines keep no per-request log.
pub(crate) fn engine_outputs(
    a: &TimelineArgs,
    name: &str,
    simulated: bool,
) -> Result<TimelineOutputs> {
    if a.wanted() && !simulated {
        bail!("--timeseries, --timeseries-plot, --histograms and --request-log record a simulated drive's run: they need --backend sim");
    }
    TimelineOutputs::open(a, &[name.to_string()])
}

/// Runs an engine command (`btree`, `kv`) under a progress bar with its recording: the
/// outputs checked and opened before the run, `run` given what to record, the recording
/// written after it. The run's result, and what was written.
pub(crate) fn run_engine<R>(
    a: &TimelineArgs,
    name: &str,
    simulated: bool,
    run: impl FnOnce(
        Option<lab::backend::TimelineSpec>,
    ) -> std::result::Result<(R, Option<TimeSeries>), lab::LabError>,
) -> Result<(R, Vec<String>)> {
    let outputs = engine_outputs(a, name, simulated)?;
    let pb = super::progress_bar(0, name);
    pb.set_phase("running");
    let result = run(outputs.engine_spec());
    pb.finish_and_clear();
    let (res, series) = result?;
    let recorded = match series {
        Some(ts) => outputs.finish_engine(name, ts)?,
        None => Vec::new(),
    };
    Ok((res, recorded))
}

impl TimelineOutputs {
    /// What an engine's run records, if anything was asked for.
    pub(crate) fn engine_spec(&self) -> Option<lab::backend::TimelineSpec> {
        self.args.wanted().then(|| lab::backend::TimelineSpec {
            interval_ns: self.args.interval,
            requests: self.logs_requests(),
        })
    }

    /// An engine's recording written out: its requests to the request log, then the rest.
    pub(crate) fn finish_engine(self, run: &str, ts: TimeSeries) -> Result<Vec<String>> {
        for c in &ts.requests {
            self.log_request(run, c);
        }
        self.finish(&[(run.to_string(), ts)])
    }
}

/// The open output files of one command.
pub(crate) struct TimelineOutputs {
    args: TimelineArgs,
    requests: Option<RefCell<RequestLog>>,
}

struct RequestLog {
    out: BufWriter<File>,
    path: PathBuf,
    error: Option<std::io::Error>,
    /// Whether this command made the file (only then is it removed if the run fails).
    created: bool,
}

impl TimelineOutputs {
    /// Checks the flags and creates the files `a` names, for runs named `runs` (the
    /// histogram files are named per run when there are several).
    pub(crate) fn open(a: &TimelineArgs, runs: &[String]) -> Result<Self> {
        if a.interval == 0 {
            bail!("--interval must be positive (e.g. 100ms)");
        }
        if given::given("interval")
            && a.timeseries.is_none()
            && a.timeseries_plot.is_none()
            && !super::emit::wanted().series
        {
            if super::emit::is_capturing() {
                bail!("interval sets the interval of the figures over time: it needs series on");
            }
            bail!("--interval sets the interval of --timeseries and --timeseries-plot: add one of them");
        }
        if let Some(p) = &a.timeseries_plot {
            if p.extension().is_none_or(|e| e != "svg") {
                bail!(
                    "--timeseries-plot {}: the plot is SVG, name a file ending in .svg",
                    p.display()
                );
            }
        }
        if let Some(p) = &a.timeseries {
            check_writable(p, "--timeseries")?;
        }
        if let Some(p) = &a.timeseries_plot {
            check_writable(p, "--timeseries-plot")?;
        }
        if let Some(prefix) = &a.histograms {
            for run in runs {
                let name = (runs.len() > 1).then_some(run.as_str());
                for op in ["read", "write", "trim"] {
                    check_writable(&histogram_path(prefix, name, op), "--histograms")?;
                }
            }
        }
        let mut paths: Vec<PathBuf> = [&a.timeseries, &a.timeseries_plot, &a.request_log]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(prefix) = &a.histograms {
            for run in runs {
                let name = (runs.len() > 1).then_some(run.as_str());
                paths.extend(["read", "write", "trim"].map(|op| histogram_path(prefix, name, op)));
            }
        }
        for (i, p) in paths.iter().enumerate() {
            if paths[..i].contains(p) {
                bail!("{} is named by two of --timeseries, --timeseries-plot, --histograms and --request-log (or by two drives' histograms): give each its own file", p.display());
            }
        }
        let requests = match &a.request_log {
            Some(p) => {
                check_writable(p, "--request-log")?;
                let created = !p.exists();
                let mut out = BufWriter::new(create(p, "--request-log")?);
                writeln!(
                    out,
                    "run,submit_ns,complete_ns,latency_ns,op,offset_bytes,len_bytes"
                )
                .with_context(|| format!("--request-log {}", p.display()))?;
                Some(RefCell::new(RequestLog {
                    out,
                    path: p.clone(),
                    error: None,
                    created,
                }))
            }
            None => None,
        };
        Ok(TimelineOutputs {
            args: a.clone(),
            requests,
        })
    }

    pub(crate) fn interval_ns(&self) -> u64 {
        self.args.interval
    }

    /// Writes the request log's line for `c` of run `run` (errors kept for [`Self::finish`]).
    pub(crate) fn log_request(&self, run: &str, c: &Completion) {
        super::emit::request(run, c);
        let Some(log) = &self.requests else {
            return;
        };
        let mut log = log.borrow_mut();
        if log.error.is_some() {
            return;
        }
        let r = writeln!(
            log.out,
            "{},{},{},{},{},{},{}",
            csv_field(run),
            c.submit_ns,
            c.complete_ns,
            c.complete_ns - c.submit_ns,
            c.op.name(),
            c.offset_bytes,
            c.len_bytes
        );
        if let Err(e) = r {
            log.error = Some(e);
        }
    }

    /// Whether requests are logged (a caller passes a callback only then).
    pub(crate) fn logs_requests(&self) -> bool {
        self.requests.is_some() || super::emit::wanted().requests
    }

    /// Writes the recordings of `runs` (name, figures) to the files opened; returns the
    /// lines to print about them.
    pub(crate) fn finish(mut self, runs: &[(String, TimeSeries)]) -> Result<Vec<String>> {
        super::emit::series(runs);
        let mut said = Vec::new();
        if let Some(log) = self.requests.take() {
            let mut log = log.into_inner();
            if let Some(e) = log.error.take() {
                bail!("--request-log {}: {e}", log.path.display());
            }
            log.out
                .flush()
                .with_context(|| format!("--request-log {}", log.path.display()))?;
            said.push(format!(
                "one line per request written to {}",
                log.path.display()
            ));
        }
        let intervals = runs.iter().map(|(_, t)| t.rows.len()).max().unwrap_or(0);
        let ms = self.args.interval as f64 / 1e6;
        if let Some(p) = &self.args.timeseries {
            let text = if is_json(p) {
                let v: Vec<_> = runs
                    .iter()
                    .map(|(name, t)| {
                        serde_json::json!({"run": name, "interval_s": t.interval_ns as f64 / 1e9, "rows": t.rows})
                    })
                    .collect();
                serde_json::to_string_pretty(&v)? + "\n"
            } else {
                let mut out = String::new();
                for (i, (name, t)) in runs.iter().enumerate() {
                    let csv = t.to_csv();
                    for (j, line) in csv.lines().enumerate() {
                        match j {
                            0 if i == 0 => out.push_str(&format!("run,{line}\n")),
                            0 => {}
                            _ => out.push_str(&format!("{},{line}\n", csv_field(name))),
                        }
                    }
                }
                out
            };
            std::fs::write(p, text).with_context(|| format!("--timeseries {}", p.display()))?;
            said.push(format!(
                "{intervals} intervals of {ms} ms written to {}",
                p.display()
            ));
        }
        if let Some(p) = &self.args.timeseries_plot {
            let refs: Vec<(String, &TimeSeries)> =
                runs.iter().map(|(n, t)| (n.clone(), t)).collect();
            let svg = lab::timeplot::timeseries_svg(&refs)
                .map_err(|e| anyhow::anyhow!("--timeseries-plot: {e}"))?;
            std::fs::write(p, svg).with_context(|| format!("--timeseries-plot {}", p.display()))?;
            said.push(format!("figures over time drawn in {}", p.display()));
        }
        if let Some(prefix) = &self.args.histograms {
            for (name, t) in runs {
                let run = (runs.len() > 1).then_some(name.as_str());
                for (op, h) in &t.histograms {
                    let path = histogram_path(prefix, run, op);
                    std::fs::write(&path, hgrm(h))
                        .with_context(|| format!("--histograms {}", path.display()))?;
                }
            }
            let names: Vec<String> = runs
                .iter()
                .map(|(n, _)| {
                    let run = (runs.len() > 1).then_some(n.as_str());
                    histogram_path(prefix, run, "*").display().to_string()
                })
                .collect();
            said.push(format!(
                "latency histograms written to {}",
                names.join(", ")
            ));
        }
        Ok(said)
    }
}

impl Drop for TimelineOutputs {
    /// A run that failed leaves no partial request log: the file is removed if this command
    /// made it and it is still a regular file (never a device node, a symlink or a file
    /// that was there before).
    fn drop(&mut self) {
        if let Some(log) = self.requests.take() {
            let log = log.into_inner();
            let regular =
                std::fs::symlink_metadata(&log.path).is_ok_and(|m| m.file_type().is_file());
            if log.created && regular {
                let _ = std::fs::remove_file(&log.path);
            }
        }
    }
}
