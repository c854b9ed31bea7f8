//! `flashlab reproduce`: every experiment, and the report.

use super::*;

#[derive(clap::Args)]
pub(crate) struct ReproduceArgs {
    /// quick (minutes), full, or paper (paper 000's own size, `--only tempfiles`; about a
    /// day on 2 cores).
    #[arg(long, default_value = "quick")]
    pub(crate) scale: Scale,
    /// Run only these experiments (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub(crate) only: Vec<String>,
    /// Output directory: new, empty, or a report flashlab made [default: report, or
    /// report-ID-ID... with --only].
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
}

/// The one experiment `--scale paper` runs.
const PAPER_SCALE_EXPERIMENT: &str = "tempfiles";

pub(crate) fn run(a: ReproduceArgs) -> Result<()> {
    for id in &a.only {
        if !experiments::ALL.iter().any(|e| e.id == id) {
            bail!(
                "unknown experiment {id:?}; experiments are {}",
                experiments::ALL
                    .iter()
                    .map(|e| e.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let chosen: Vec<_> = experiments::ALL
        .iter()
        .filter(|e| a.only.is_empty() || a.only.iter().any(|o| o == e.id))
        .collect();
    if a.scale == Scale::Paper {
        if let Some(e) = chosen.iter().find(|e| e.id != PAPER_SCALE_EXPERIMENT) {
            bail!(
                "--scale paper is paper 000's own size (a 40 GB query on 250 GB drives, about a day on 2 cores) and is defined for the {PAPER_SCALE_EXPERIMENT} experiment only, not {:?}: run `reproduce --scale paper --only {PAPER_SCALE_EXPERIMENT}`",
                e.id
            );
        }
    }
    // Part of the report never goes over the whole one.
    let out = a.out.clone().unwrap_or_else(|| {
        if a.only.is_empty() {
            PathBuf::from("report")
        } else {
            PathBuf::from(format!(
                "report-{}",
                chosen.iter().map(|e| e.id).collect::<Vec<_>>().join("-")
            ))
        }
    });
    eprintln!(
        "flashlab reproduce: scale {}, seed {}, {} experiment(s), report in {}",
        a.scale,
        a.seed,
        chosen.len(),
        out.display()
    );
    let info = lab::report::RunInfo {
        scale: a.scale.to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        version: env!("CARGO_PKG_VERSION").to_string(),
        total_runtime_s: 0.0,
    };
    let _held = trace::leftovers::hold(format!(
        "report directory {} (its report not written yet)",
        out.display()
    ));
    let mut bars = Bars::new();
    let r = experiments::reproduce(
        &chosen,
        a.scale,
        a.seed,
        &crate::signals::cancel_token(),
        &out,
        info,
        &mut bars,
    );
    bars.stop();
    let r = r?;
    println!("report written to {}", r.index.display());
    if r.interrupted {
        bail!("interrupted; the report holds the experiments that finished");
    }
    if !r.failed.is_empty() {
        bail!(
            "{} experiment(s) failed: {} (their sections say why)",
            r.failed.len(),
            r.failed.join(", ")
        );
    }
    Ok(())
}

/// A progress bar per running experiment (on a terminal): jobs done of jobs planned,
/// redrawn by a ticker thread until the experiment ends. Experiments that run at the same
/// time each have their own line.
pub(crate) struct Bars {
    multi: indicatif::MultiProgress,
    running: std::collections::HashMap<String, Bar>,
}

type Bar = (ProgressBar, std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Bars {
    pub(crate) fn new() -> Bars {
        Bars {
            multi: indicatif::MultiProgress::new(),
            running: Default::default(),
        }
    }

    fn stop_one((pb, stop): Bar) {
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        pb.finish_and_clear();
    }

    fn stop(&mut self) {
        for (_, bar) in self.running.drain() {
            Self::stop_one(bar);
        }
    }
}

impl experiments::Watcher for Bars {
    fn started(&mut self, e: &experiments::Experiment, progress: &experiments::Progress) {
        let pb = self.multi.add(ProgressBar::new(0));
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} jobs, {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb.set_message(format!("{:<14}", e.id));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (pb2, stop2, progress) = (pb.clone(), stop.clone(), progress.clone());
        std::thread::spawn(move || {
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let (done, planned) = progress.get();
                pb2.set_length(planned);
                pb2.set_position(done);
                pb2.tick();
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        });
        if let Some(old) = self.running.insert(e.id.to_string(), (pb, stop)) {
            Self::stop_one(old);
        }
    }

    fn finished(&mut self, s: &lab::report::Section) {
        if let Some(bar) = self.running.remove(&s.id) {
            Self::stop_one(bar);
        }
        self.multi.suspend(|| print_section_summary(s));
    }
}

/// One experiment's outcome, for people: time and claims, or why it failed or was skipped.
pub(crate) fn print_section_summary(s: &lab::report::Section) {
    if let Some(error) = s.failed_with() {
        eprintln!("  {:<14} FAILED: {error}", s.id);
    } else if let Some(why) = s.results.get("skipped").and_then(|w| w.as_str()) {
        eprintln!("  {:<14} skipped: {why}", s.id);
    } else {
        eprintln!(
            "  {:<14} {:>6.1} s  {}",
            s.id,
            s.runtime_s,
            s.claims_summary()
        );
    }
    for v in &s.verdicts {
        eprintln!(
            "      [{}] {}",
            match (&v.preview, v.holds) {
                (Some(_), true) => "preview, holds",
                (Some(_), false) => "preview, FAILS",
                (None, true) => "holds",
                (None, false) => "FAILS",
            },
            v.claim
        );
    }
}
