//! `flashlab reproduce`: every experiment, and the report.

use super::*;

#[derive(clap::Args)]
pub(crate) struct ReproduceArgs {
    /// quick (minutes), full, or paper (each paper at its own size where it differs from
    /// full: paper 000's 40 GB query on 250 GB drives takes hours; each other section says
    /// what it ran and why).
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
    /// An earlier report's results.json: after the run, list every verdict of the
    /// experiments run whose outcome (holds, fails or preview) differs from it, or that is
    /// new or gone, and exit non-zero if there is any (for a CI that guards the findings).
    #[arg(long, value_name = "OLD/results.json")]
    pub(crate) baseline: Option<PathBuf>,
}

/// Verdict outcomes by id (`holds`, `fails` or `preview`), of each experiment in a
/// results.json.
type Outcomes = std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>;

/// The verdicts' outcomes in a report's results.json text.
fn outcomes(text: &str) -> std::result::Result<Outcomes, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let experiments = v
        .get("experiments")
        .and_then(|e| e.as_object())
        .ok_or("no \"experiments\" object (not a flashlab report's results.json)")?;
    let mut out = Outcomes::new();
    for (id, e) in experiments {
        let verdicts = out.entry(id.clone()).or_default();
        for v in e
            .get("verdicts")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let (Some(vid), Some(holds)) = (
                v.get("id").and_then(|i| i.as_str()),
                v.get("holds").and_then(|h| h.as_bool()),
            ) else {
                return Err(format!("a verdict of {id} without an id or holds"));
            };
            // Reports before `outcome` was written count a preview's holds as its outcome.
            let outcome = match v.get("outcome").and_then(|o| o.as_str()) {
                Some("preview") => "preview",
                _ if holds => "holds",
                _ => "fails",
            };
            // A verdict that is not a prediction says so: a change of role is a change too.
            let role = match v.get("role").and_then(|r| r.as_str()) {
                None | Some("predicted") => String::new(),
                Some(r) => format!(" ({r})"),
            };
            verdicts.insert(vid.to_string(), format!("{outcome}{role}"));
        }
    }
    Ok(out)
}

/// What changed from `old` to `new` among the verdicts of experiments `new` ran (an
/// experiment that failed or was skipped has none and is not compared), one line each.
fn outcome_changes(old: &Outcomes, new: &Outcomes) -> Vec<String> {
    let mut out = Vec::new();
    for (exp, verdicts) in new.iter().filter(|(_, v)| !v.is_empty()) {
        let before = old.get(exp);
        for (id, now) in verdicts {
            match before.and_then(|b| b.get(id)) {
                Some(was) if was != now => out.push(format!("{id}: {was} -> {now}")),
                Some(_) => {}
                None => out.push(format!("{id}: new, {now}")),
            }
        }
        for (id, was) in before.into_iter().flatten() {
            if !verdicts.contains_key(id) {
                out.push(format!("{id}: gone (was {was})"));
            }
        }
    }
    out
}

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
    // The baseline is read first: a bad one fails before anything runs.
    let baseline = match &a.baseline {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --baseline {}", path.display()))?;
            let o = outcomes(&text).map_err(|e| {
                anyhow::anyhow!(
                    "--baseline {} is not a report's results.json: {e}",
                    path.display()
                )
            })?;
            Some(o)
        }
        None => None,
    };
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
        started_utc: lab::report::utc_minute(std::time::SystemTime::now()),
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
    if let Some(old) = &baseline {
        let results = out.join("results.json");
        let text = std::fs::read_to_string(&results)
            .with_context(|| format!("cannot read {}", results.display()))?;
        let mut new = outcomes(&text).map_err(|e| anyhow::anyhow!("{}: {e}", results.display()))?;
        // Only the experiments this run made: sections kept from earlier runs are not news.
        new.retain(|id, _| r.sections.iter().any(|s| &s.id == id));
        let changes = outcome_changes(old, &new);
        if !changes.is_empty() {
            for c in &changes {
                eprintln!("  changed: {c}");
            }
            bail!(
                "{} verdict(s) changed outcome or role against the baseline {}",
                changes.len(),
                a.baseline.as_ref().expect("a baseline").display()
            );
        }
        eprintln!("every verdict has the baseline's outcome");
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
        // Off a terminal the bar is hidden: a line every 10 s (after 5 s) instead.
        let lines = !std::io::IsTerminal::is_terminal(&std::io::stderr());
        let (first, every) = super::progress::periods();
        let id = e.id.to_string();
        std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let mut next = first;
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let (done, planned) = progress.get();
                pb2.set_length(planned);
                pb2.set_position(done);
                pb2.tick();
                if lines && started.elapsed() >= next {
                    eprintln!(
                        "flashlab reproduce: {id}: {done}/{planned} jobs, {} elapsed",
                        super::progress::duration(started.elapsed().as_secs_f64())
                    );
                    next += every;
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(verdicts: &[(&str, &str, bool)]) -> String {
        let mut exps: std::collections::BTreeMap<&str, Vec<serde_json::Value>> = Default::default();
        for (e, id, holds) in verdicts {
            exps.entry(e)
                .or_default()
                .push(serde_json::json!({"id": id, "holds": holds, "claim": "c"}));
        }
        let experiments: serde_json::Map<String, serde_json::Value> = exps
            .into_iter()
            .map(|(e, v)| (e.to_string(), serde_json::json!({ "verdicts": v })))
            .collect();
        serde_json::json!({ "experiments": experiments, "run": {} }).to_string()
    }

    #[test]
    fn outcome_changes_lists_flips_new_and_gone_verdicts_of_the_experiments_run() {
        let old = outcomes(&report(&[
            ("trim", "trim.a", true),
            ("trim", "trim.b", false),
            ("trim", "trim.gone", true),
            ("waf", "waf.x", true),
        ]))
        .unwrap();
        // waf was not run this time (--only trim): its verdicts are not compared.
        let new = outcomes(&report(&[
            ("trim", "trim.a", false),
            ("trim", "trim.b", false),
            ("trim", "trim.new", true),
        ]))
        .unwrap();
        assert_eq!(
            outcome_changes(&old, &new),
            vec![
                "trim.a: holds -> fails".to_string(),
                "trim.new: new, holds".to_string(),
                "trim.gone: gone (was holds)".to_string(),
            ]
        );
        assert!(outcome_changes(&old, &old).is_empty());
    }

    #[test]
    fn a_verdict_that_becomes_a_preview_is_an_outcome_change() {
        let held =
            outcomes(r#"{"experiments": {"t": {"verdicts": [{"id": "t.a", "holds": true}]}}}"#)
                .unwrap();
        let preview = outcomes(
            r#"{"experiments": {"t": {"verdicts": [{"id": "t.a", "holds": false, "outcome": "preview", "holds_at_this_scale": true}]}}}"#,
        )
        .unwrap();
        assert_eq!(
            outcome_changes(&held, &preview),
            vec!["t.a: holds -> preview".to_string()]
        );
    }

    #[test]
    fn a_prediction_demoted_to_a_check_is_a_change_even_when_it_still_holds() {
        let predicted = outcomes(
            r#"{"experiments": {"t": {"verdicts": [{"id": "t.a", "holds": true, "role": "predicted"}]}}}"#,
        )
        .unwrap();
        let check = outcomes(
            r#"{"experiments": {"t": {"verdicts": [{"id": "t.a", "holds": true, "role": "check"}]}}}"#,
        )
        .unwrap();
        assert_eq!(
            outcome_changes(&predicted, &check),
            vec!["t.a: holds -> holds (check)".to_string()]
        );
    }

    #[test]
    fn a_file_that_is_not_a_report_is_refused_with_the_reason() {
        assert!(outcomes("not json").is_err());
        let e = outcomes("{\"run\": {}}").unwrap_err();
        assert!(e.contains("experiments"), "{e}");
        let e = outcomes(r#"{"experiments": {"trim": {"verdicts": [{"id": "x"}]}}}"#).unwrap_err();
        assert!(e.contains("without an id or holds"), "{e}");
    }
}
