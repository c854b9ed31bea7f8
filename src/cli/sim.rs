//! `flashlab sim`: a drive under a synthetic workload.

use super::*;

#[derive(clap::Args)]
pub(crate) struct SimArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// uniform, sequential, hotcold:R/F (R of writes to F of the space), zipf:THETA or
    /// jesd219 (JEDEC JESD219's enterprise endurance workload: its transfer sizes from
    /// 512 B to 64 KiB, 50% of accesses to the first 5% of the space, 30% to the next 15%;
    /// --request-size then only sets the address granularity).
    #[arg(long)]
    pub(crate) workload: Pattern,
    /// Size of every request.
    #[arg(long, default_value = "4KiB", value_parser = units::parse_size)]
    pub(crate) request_size: u64,
    /// Fraction of requests that are reads.
    #[arg(long, default_value_t = 0.0)]
    pub(crate) read_fraction: f64,
    /// Requests in flight (closed loop; at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) queue_depth: u32,
    /// Measured write volume: a multiple of the capacity (2x) or a size (1GiB).
    #[arg(long, default_value = "1x", value_parser = units::parse_volume)]
    pub(crate) writes: units::Volume,
    /// Warm-up write volume before measuring: a multiple of the capacity (1x) or a size.
    #[arg(long, default_value = "1x", value_parser = units::parse_volume)]
    pub(crate) warmup: units::Volume,
    /// After --precondition: run the workload, timed but not measured, for this write
    /// volume (a multiple of the capacity or a size), so what idle time changes (the SLC
    /// cache's folds) reaches the workload's steady state before measuring.
    #[arg(long, value_parser = units::parse_volume, value_name = "VOLUME")]
    pub(crate) timed_warmup: Option<units::Volume>,
    /// After --precondition: leave the drive idle until its deferred and idle-time work
    /// (an SLC cache's folds, deferred TRIM work; not background GC) is done, as a drive
    /// tested after a rest; before --timed-warmup if both are given.
    #[arg(long, requires = "precondition")]
    pub(crate) rest: bool,
    /// on: full timing model; off: the WAF-only fast path.
    #[arg(long, value_enum, default_value = "on")]
    pub(crate) timing: OnOff,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Instead of the sequential fill and --warmup: fill (sequential writes up to
    /// --occupancy) or steady[:Nx] (then random 4 KiB writes until WAF is steady by SNIA
    /// PTS's rule, at most N times the filled bytes); the workload then addresses the
    /// filled space only. Not measured.
    #[arg(long)]
    pub(crate) precondition: Option<lab::precondition::Precondition>,
    /// Share of the logical space --precondition fills (0 < F <= 1).
    #[arg(long, default_value_t = 1.0, requires = "precondition")]
    pub(crate) occupancy: f64,
    /// Hot/cold separation by placement handle: with --workload hotcold:R/F on an FDP
    /// drive (--drive fdp), writes to the hot region carry handle 1 and the rest handle 0,
    /// as a host that knows its hot data would place it.
    #[arg(long)]
    pub(crate) separate: bool,
    /// Print one JSON object instead of a summary (with a `wear` object when the preset
    /// gives the drive's rated endurance).
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the wear report: erase-count distribution, life used, projected TBW beside
    /// the datasheet's, projected days at the measured write rate.
    #[arg(long)]
    pub(crate) wear: bool,
    /// Draw the erase-count distribution into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) wear_plot: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
}

/// What `sim`'s flags ask for.
pub(crate) fn sim_spec(a: &SimArgs) -> Result<SimSpec> {
    sim_spec_on(a, a.device.preset()?)
}

/// What `sim`'s flags ask for, on `preset`.
fn sim_spec_on(a: &SimArgs, preset: Preset) -> Result<SimSpec> {
    let capacity = preset.logical_bytes();
    Ok(SimSpec {
        preset,
        pattern: a.workload,
        request_bytes: a.request_size,
        read_fraction: a.read_fraction,
        queue_depth: a.queue_depth,
        writes_x: a.writes.multiple_of(capacity),
        warmup_x: a.warmup.multiple_of(capacity),
        timed_warmup_x: a.timed_warmup.map_or(0.0, |v| v.multiple_of(capacity)),
        timing: a.timing.on(),
        seed: a.seed,
        precondition: a.precondition.map(|p| (p, a.occupancy)),
        separate: a.separate,
        idle_after_precondition: a.rest,
    })
}

/// What the measured scaling runs say of this run's capacity, for a built-in preset
/// (`--preset NAME`, a conventional drive) whose capacity `--capacity` changed (see
/// [`flash::scaling_limits::notes`]). A run unlike the scaling runs (the drive changed by
/// other options, other requests, reads, preconditioning or no rest) is told their
/// conditions.
fn scaling_notes(name: &str, kind: Option<super::DriveKind>, spec: &SimSpec) -> Vec<String> {
    if kind.is_some_and(|k| k != super::DriveKind::Conventional) {
        return Vec::new();
    }
    let Some((_, text)) = flash::preset::BUILTIN.iter().find(|(n, _)| *n == name) else {
        return Vec::new();
    };
    let Ok(full) = Preset::from_toml(name, text) else {
        return Vec::new();
    };
    let full_bytes = full.logical_bytes();
    let shipped = full.with_capacity(spec.preset.logical_bytes());
    let steady_at_90 = matches!(
        spec.precondition,
        Some((lab::precondition::Precondition::Steady { max_x }, occupancy))
            if occupancy == 0.9 && max_x == lab::precondition::DEFAULT_STEADY_MAX_X
    );
    let as_measured = shipped.ssd_config() == spec.preset.ssd_config()
        && spec.request_bytes == 4096
        && spec.read_fraction == 0.7
        && steady_at_90
        && spec.idle_after_precondition
        && spec.timed_warmup_x == 0.0
        && spec.timing;
    flash::scaling_limits::notes(
        name,
        full_bytes,
        spec.preset.logical_bytes(),
        flash::scaling_limits::Run {
            workload: &spec.pattern.to_string(),
            queue_depth: spec.queue_depth,
            as_measured,
        },
    )
}

pub(crate) fn run(a: SimArgs) -> Result<()> {
    let drives = a.device.drives();
    if drives.len() > 1 {
        return run_compare(&a, &drives);
    }
    let started = Instant::now();
    let spec = sim_spec(&a)?;
    let name = spec.preset.name.clone();
    let outputs = super::timeline::TimelineOutputs::open(&a.timeline, std::slice::from_ref(&name))?;
    let (result, series) = run_one(&a, &spec, &outputs, &name, "sim")?;
    let recorded = match series {
        Some(s) => outputs.finish(&[(name.clone(), s)])?,
        None => Vec::new(),
    };
    let wall_s = started.elapsed().as_secs_f64();
    let kind = drives.first().and_then(|(_, _, k)| *k);
    let scaling = scaling_notes(&a.device.preset, kind, &spec);
    if a.json {
        let mut v = serde_json::to_value(&result)?;
        v["wall_s"] = serde_json::json!(wall_s);
        v["preset_notes"] = serde_json::json!(spec.preset.notes);
        v["scaling_notes"] = serde_json::json!(scaling);
        if !recorded.is_empty() {
            v["recorded"] = serde_json::json!(recorded);
        }
        super::emit::json(&v)?;
    } else {
        println!(
            "flashlab sim: preset {} ({} bytes logical{}), workload {}, seed {}, timing {}",
            result.preset,
            result.logical_bytes,
            result.op.map_or(String::new(), |op| format!(
                ", op {op}, gc {}",
                result.gc.clone().unwrap_or_default()
            )),
            result.workload,
            result.seed,
            if a.timing.on() { "on" } else { "off" }
        );
        for n in &spec.preset.notes {
            println!("  note              {n}");
        }
        for n in &scaling {
            println!("  note              {n}");
        }
        if let (Some(op), Some(eff)) = (result.op, result.effective_op) {
            println!(
                "  effective op      {eff:.4} (op {op} less GC's free blocks and half of each open frontier, per die: the spare space GC works with)"
            );
        }
        if let Some(p) = &result.precondition {
            print_precondition(p);
        }
        print_stats(&result.stats);
        if a.wear {
            super::wear::print_wear_or_why(result.wear.as_ref(), &spec.preset);
        }
        for r in &recorded {
            println!("  recorded          {r}");
        }
        println!("  wall time         {wall_s:.2} s");
    }
    if let Some(path) = &a.wear_plot {
        let w = result.wear.as_ref().with_context(|| {
            format!(
                "--wear-plot: no wear report (preset {} gives no rated endurance)",
                result.preset
            )
        })?;
        super::wear::plot_wear(w, &result.preset, &result.workload, path)?;
    }
    Ok(())
}

/// `sim --preset a,b,...`: the same workload on each drive in turn, compared in one table
/// (and the figures over time of all of them in one plot).
fn run_compare(a: &SimArgs, drives: &[(String, String, Option<super::DriveKind>)]) -> Result<()> {
    let started = Instant::now();
    if a.wear_plot.is_some() || a.wear {
        bail!("--wear and --wear-plot report one drive's wear: give one --preset");
    }
    let names: Vec<String> = drives.iter().map(|(n, _, _)| n.clone()).collect();
    let runs = super::compare::run_names(&names);
    let outputs = super::timeline::TimelineOutputs::open(&a.timeline, &runs)?;
    let mut done = Vec::new();
    let mut series = Vec::new();
    for ((_, preset, kind), run) in drives.iter().zip(&runs) {
        let spec = sim_spec_on(a, a.device.preset_named(preset, *kind)?)?;
        let (result, s) = run_one(a, &spec, &outputs, run, &format!("sim {run}"))
            .with_context(|| format!("drive {run}"))?;
        if let Some(s) = s {
            series.push((run.clone(), s));
        }
        let scaling = scaling_notes(preset, *kind, &spec);
        done.push((run.clone(), spec, result, scaling));
    }
    let recorded = if series.is_empty() {
        Vec::new()
    } else {
        outputs.finish(&series)?
    };
    let cols: Vec<super::compare::Column> = done
        .iter()
        .map(|(run, _, r, _)| super::compare::Column {
            name: run.clone(),
            stats: r.stats.clone(),
            load: None,
        })
        .collect();
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        let mut each = Vec::new();
        for (run, spec, r, scaling) in &done {
            let mut v = serde_json::to_value(r)?;
            v["run"] = serde_json::json!(run);
            v["preset_notes"] = serde_json::json!(spec.preset.notes);
            v["scaling_notes"] = serde_json::json!(scaling);
            each.push(v);
        }
        let v = serde_json::json!({
            "runs": each,
            "compare": super::compare::json(&cols),
            "recorded": recorded,
            "wall_s": wall_s,
        });
        super::emit::json(&v)?;
        return Ok(());
    }
    let first = &done[0].2;
    println!(
        "flashlab sim: {} drives side by side, workload {}, seed {}, timing {}",
        done.len(),
        first.workload,
        first.seed,
        if a.timing.on() { "on" } else { "off" }
    );
    for (run, spec, r, scaling) in &done {
        println!(
            "  {run}: {} ({} bytes logical)",
            spec.preset.description, r.logical_bytes
        );
        for n in spec.preset.notes.iter().chain(scaling) {
            println!("    note            {n}");
        }
    }
    println!();
    print!("{}", super::compare::table(&cols));
    for r in &recorded {
        println!("  recorded          {r}");
    }
    println!("  wall time         {wall_s:.2} s");
    Ok(())
}

/// Runs `spec` as run `run` with a progress bar named `what`, recorded as `outputs` asks.
fn run_one(
    a: &SimArgs,
    spec: &SimSpec,
    outputs: &super::timeline::TimelineOutputs,
    run: &str,
    what: &str,
) -> Result<(lab::sim::SimResult, Option<flash::timeline::TimeSeries>)> {
    let library = super::emit::wanted();
    if !spec.timing && (library.series || library.requests) {
        bail!("a recording over virtual time (series, requests) needs timing on: the WAF-only path has no time");
    }
    let mut log = |c: &flash::timeline::Completion| outputs.log_request(run, c);
    let record = a.timeline.wanted().then(|| {
        let each: Option<&mut dyn FnMut(&flash::timeline::Completion)> =
            outputs.logs_requests().then_some(&mut log);
        lab::sim::Record::new(outputs.interval_ns(), each)
    });
    let pb = progress_bar(0, what);
    pb.set_phase(phase_of(0));
    let result = lab::sim::run_recorded(
        spec,
        &mut |done, total| {
            pb.set_phase(phase_of(done));
            pb.set_length(total);
            pb.set_position(done);
        },
        record,
    );
    pb.finish_and_clear();
    Ok(result?)
}

/// The phase a sim run is in, from the measured requests done (none yet while the drive is
/// filled, warmed up or preconditioned).
fn phase_of(done: u64) -> &'static str {
    if done == 0 {
        "preparing the drive (fill, warm-up or preconditioning)"
    } else {
        "measuring"
    }
}
