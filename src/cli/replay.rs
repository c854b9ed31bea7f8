//! `flashlab replay`: a block trace on a simulated drive.

use super::*;

/// How a trace's requests are issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LoopMode {
    /// Each stream issues its next request when the previous completes.
    Closed,
    /// Requests issue at their timestamps.
    Open,
}

/// How a trace's TRIMs are replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TrimAs {
    /// As captured.
    Trim,
    /// Each run of a stream's consecutive TRIMs as one vectored TRIM.
    Vtrim,
}

#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    /// Trace file.
    pub(crate) trace: PathBuf,
    /// auto (from the first lines), blkparse, tracefs, native, msr (MSR Cambridge),
    /// alibaba (Alibaba 2020), tencent (Tencent CBS 2018), spc (SPC / UMass), fiu (FIU
    /// IODedup), disksim, disksim-mqsim, disksim-ssdsim (DiskSim's ASCII trace as DiskSim,
    /// MQSim or SSDSim read it; auto picks one only where the rows tell) or fio (iolog v2 or
    /// v3). gzip and zstd files are read as they are.
    #[arg(long, default_value = "auto")]
    pub(crate) format: Format,
    /// Replay only this device of a trace that holds several (their blocks would collide
    /// in one address space): an MSR disk (`N` or `HOST:N`), an Alibaba device_id, a
    /// Tencent volume, an SPC ASU, a FIU device (`MAJOR:MINOR`), a DiskSim device number or
    /// a fio filename.
    #[arg(long)]
    pub(crate) disk: Option<String>,
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// closed: each stream issues its next request when the previous completes (plus its
    /// think time); open: requests issue at their timestamps. Default: open for
    /// timestamped traces, closed otherwise.
    #[arg(long, value_enum)]
    pub(crate) mode: Option<LoopMode>,
    /// Open loop: replay the trace this many times as fast (its timestamps divided by X,
    /// as fio's replay_time_scale): 0.5 offers half the load. A replay whose drive cannot
    /// serve what the trace offers says so, with the commands to rerun slower or closed.
    #[arg(long, value_parser = parse_speed)]
    pub(crate) speed: Option<f64>,
    /// Requests in flight per stream in closed-loop mode (at least 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) queue_depth: u32,
    /// trim: replay TRIMs as captured; vtrim: each run of consecutive TRIMs of a stream
    /// (within --coalesce-window) becomes one vectored TRIM, as if sent per unlink.
    #[arg(long, value_enum, default_value = "trim")]
    pub(crate) trim_as: TrimAs,
    /// Largest gap between two TRIMs of one run, for --trim-as vtrim.
    #[arg(long, default_value = "1ms", value_parser = units::parse_duration_ns)]
    pub(crate) coalesce_window: u64,
    /// Before the trace: none (a fresh drive), fill (sequential writes up to
    /// --occupancy), steady[:Nx] (fill, then random 4 KiB writes until WAF is steady by
    /// SNIA PTS's rule, at most N times the filled bytes; default 5x). Not measured.
    /// Several, separated by commas (none,fill,steady), replay the trace after each and
    /// compare them (with several presets: every preset after every one).
    #[arg(long, default_value = "none", value_delimiter = ',')]
    pub(crate) precondition: Vec<lab::precondition::Precondition>,
    /// Share of the logical space preconditioning fills (0 < F <= 1; default 1); only with
    /// --precondition fill or steady.
    #[arg(long)]
    pub(crate) occupancy: Option<f64>,
    /// Seed of preconditioning's random writes and of the error model's draws (--age).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Replay the trace this many times back to back on the same drive (as MQSim's relay
    /// count); each pass starts when the previous one ends.
    #[arg(long, default_value_t = 1)]
    pub(crate) repeat: u32,
    /// Replay only the first N requests of the trace.
    #[arg(long)]
    pub(crate) max_requests: Option<u64>,
    /// Print one JSON object instead of a summary (with a `wear` object when the preset
    /// gives the drive's rated endurance).
    #[arg(long)]
    pub(crate) json: bool,
    /// Print the wear report (as `sim --wear`; days at the trace's write rate).
    #[arg(long)]
    pub(crate) wear: bool,
    /// On an FDP drive (--drive fdp --handles N): the trace's i-th stream (in order of
    /// first appearance: a process, a disk, a generator) writes on placement handle
    /// i mod N. Without it every write is on handle 0 (today's drive), or on the handle a
    /// native trace's `h=N` names. `--placement` is the same flag (the name issue 27
    /// gives it).
    #[arg(long, visible_alias = "placement")]
    pub(crate) stream_handles: bool,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
}

pub(crate) fn run(a: ReplayArgs) -> Result<()> {
    let started = Instant::now();
    if a.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    if a.max_requests == Some(0) {
        bail!("--max-requests must be at least 1");
    }
    if given::given("coalesce_window") && a.trim_as != TrimAs::Vtrim {
        bail!("--coalesce-window groups TRIMs into vectored TRIMs: it needs --trim-as vtrim");
    }
    if given::given("seed")
        && !a
            .precondition
            .iter()
            .any(|p| matches!(p, lab::precondition::Precondition::Steady { .. }))
        && a.device.age.is_none()
    {
        bail!("--seed seeds steady preconditioning's random writes and the error model's draws: without --precondition steady or --age it does nothing (fill writes in order)");
    }
    if let Some(f) = a.occupancy {
        if a.precondition
            .iter()
            .all(|p| *p == lab::precondition::Precondition::None)
        {
            bail!("--occupancy {f} has no effect without --precondition fill or steady");
        }
    }
    // Every preset after every preconditioning asked for: a run each.
    let mut names = Vec::new();
    let mut plan = Vec::new();
    for (name, preset, kind) in a.device.drives() {
        for mode in &a.precondition {
            names.push(if a.precondition.len() > 1 {
                format!("{name}/{mode}")
            } else {
                name.clone()
            });
            plan.push((preset.clone(), kind, *mode));
        }
    }
    let runs = super::compare::run_names(&names);
    if runs.len() > 1 && a.wear {
        bail!("--wear reports one drive's wear: give one --preset and one --precondition");
    }
    let outputs = super::timeline::TimelineOutputs::open(&a.timeline, &runs)?;
    let mut done = Vec::new();
    for ((name, kind, mode), run) in plan.iter().zip(&runs) {
        let preset = a.device.preset_named(name, *kind)?;
        let o = replay_on(&a, preset, *mode, run, &outputs);
        let o = if runs.len() > 1 {
            o.with_context(|| format!("drive {run}"))?
        } else {
            o?
        };
        done.push(o);
    }
    let mut series = Vec::new();
    for (o, run) in done.iter_mut().zip(&runs) {
        if let Some(s) = o.series.take() {
            series.push((run.clone(), s));
        }
    }
    let recorded = if series.is_empty() {
        Vec::new()
    } else {
        outputs.finish(&series)?
    };
    let wall_s = started.elapsed().as_secs_f64();
    if done.len() > 1 {
        return print_compare(&a, &done, &runs, &recorded, wall_s);
    }
    print_one(&a, done.remove(0), &recorded, wall_s)
}

/// One drive's replay of the trace.
struct Outcome {
    preset: flash::Preset,
    mode: lab::precondition::Precondition,
    info: trace::TraceInfo,
    open: bool,
    speed: f64,
    pre: lab::precondition::PreconditionReport,
    summary: trace::ReplaySummary,
    stats: flash::DeviceStats,
    wear: Option<flash::WearReport>,
    load: Option<Load>,
    series: Option<flash::timeline::TimeSeries>,
}

/// Replays the trace `a` names on a new `preset` drive, recorded as `outputs` asks under
/// the name `run`.
fn replay_on(
    a: &ReplayArgs,
    preset: flash::Preset,
    mode: lab::precondition::Precondition,
    run: &str,
    outputs: &super::timeline::TimelineOutputs,
) -> Result<Outcome> {
    // One reading to describe and check the trace; each pass reads it again, a request at
    // a time (blkparse and tracefs captures are read whole: see trace::stream).
    let file = trace::TraceFile::open(&a.trace, a.format, a.disk.as_deref(), a.max_requests)?;
    let info = file.info().clone();
    let mut dev = preset.build()?;
    let file = if a.stream_handles {
        let handles = match &dev {
            flash::AnyDevice::Ssd(s) if preset.ssd_config().is_some_and(|c| c.fdp.is_some()) => {
                s.handles()
            }
            _ => bail!(
                "--stream-handles places each stream's writes on a handle of an FDP drive: add --drive fdp (and --handles N)"
            ),
        };
        file.with_stream_handles(handles)
    } else {
        file
    };
    if let flash::AnyDevice::Ssd(s) = &mut dev {
        s.seed_errors(lab::sim::errors_seed(a.seed));
    }
    let end = info.max_end_bytes;
    if end > dev.logical_bytes() {
        bail!(
            "{}: the trace reaches byte {end} ({}) but preset {} holds {}; pass --capacity with at least that (e.g. --capacity {})",
            a.trace.display(),
            flash::bytes::binary(end),
            preset.name,
            flash::bytes::exact(dev.logical_bytes()),
            flash::bytes::whole_gib_at_least(end)
        );
    }
    let open = match a.mode {
        Some(m) => m == LoopMode::Open,
        None => info.timestamped,
    };
    if open && given::given("queue_depth") {
        bail!(
            "--queue-depth is the requests in flight per stream in closed-loop mode; this replay is open loop ({}), where requests issue at their timestamps: add --mode closed",
            if a.mode.is_some() { "--mode open" } else { "the trace is timestamped" }
        );
    }
    if let (Some(x), false) = (a.speed, open) {
        bail!("--speed {x} scales the timestamps of an open-loop replay; this replay is closed loop (requests follow their stream's completions): drop --speed, or add --mode open on a timestamped trace");
    }
    let speed = a.speed.unwrap_or(1.0);
    let pb = progress_bar(0, &format!("replay on {run}"));
    if mode != lab::precondition::Precondition::None {
        pb.set_phase("preconditioning");
    }
    let pre =
        lab::precondition::precondition(&mut dev, mode, a.occupancy.unwrap_or(1.0), 0.0, a.seed)?;
    // --trim-as vtrim rewrites runs of TRIMs across the trace: it holds the trace in memory.
    let coalesced = if a.trim_as == TrimAs::Vtrim {
        let page = dev
            .logical_bytes()
            .saturating_sub(flash::command::TRIM_COMMAND_PAGE_BYTES);
        if end > page {
            bail!("--trim-as vtrim needs the drive's last 4 KiB page free for vTrim commands, but the trace uses it; pass a larger --capacity");
        }
        let requests = file.requests()?.collect::<Result<Vec<_>, _>>()?;
        Some(trace::Trace {
            requests: trace::transform::coalesce_trims(&requests, a.coalesce_window, page),
            timestamped: info.timestamped,
        })
    } else {
        None
    };
    let per_pass = coalesced
        .as_ref()
        .map_or(info.requests, |t| t.requests.len() as u64);
    pb.set_length(per_pass * a.repeat as u64);
    pb.set_phase(&format!(
        "replaying {} loop",
        if open { "open" } else { "closed" }
    ));
    // Open loop: what the trace offers (requests over its timestamps' span, per pass)
    // against what the drive served.
    let mut offered = Offered::default();
    let passes = Passes {
        file: &file,
        coalesced: coalesced.as_ref(),
        open,
        speed,
        queue_depth: a.queue_depth,
        repeat: a.repeat,
        pb: &pb,
    };
    let mut log = |c: &flash::timeline::Completion| outputs.log_request(run, c);
    let (summary, recording) = if a.timeline.wanted() {
        let each: Option<&mut dyn FnMut(&flash::timeline::Completion)> =
            outputs.logs_requests().then_some(&mut log);
        let mut t = flash::timeline::Timeline::new(&mut dev, outputs.interval_ns(), 0, each)?;
        let summary = passes.run(&mut t, &mut offered)?;
        (summary, Some(t.into_recording()))
    } else {
        (passes.run(&mut dev, &mut offered)?, None)
    };
    pb.finish_and_clear();
    // Deferred TRIM work finishes in idle time after the trace; count it.
    dev.settle();
    let stats = dev.stats();
    let series = recording.map(|r| r.finish(&stats)).transpose()?;
    let load = open.then(|| offered.load(summary.requests, summary.end_ns));
    Ok(Outcome {
        wear: dev.wear_report(),
        preset,
        mode,
        info,
        open,
        speed,
        pre,
        summary,
        stats,
        load,
        series,
    })
}

/// One drive's replay, as text or JSON.
fn print_one(a: &ReplayArgs, o: Outcome, recorded: &[String], wall_s: f64) -> Result<()> {
    let Outcome {
        preset,
        mode,
        info,
        open,
        speed,
        pre,
        summary,
        stats,
        wear,
        load,
        ..
    } = o;
    if a.json {
        let mut v = serde_json::to_value(&stats)?;
        if let Some(w) = &wear {
            v["wear"] = serde_json::to_value(w)?;
        }
        v["trace"] = serde_json::json!(a.trace.display().to_string());
        v["preset"] = serde_json::json!(preset.name);
        v["mode"] = serde_json::json!(if open { "open" } else { "closed" });
        v["requests"] = serde_json::json!(summary.requests);
        v["preset_notes"] = serde_json::json!(preset.notes);
        v["precondition"] = serde_json::to_value(&pre)?;
        v["repeat"] = serde_json::json!(a.repeat);
        v["seed"] = serde_json::json!(a.seed);
        v["wall_s"] = serde_json::json!(wall_s);
        v["streams"] = serde_json::json!(info.streams.len());
        v["peak_rss_bytes"] = serde_json::json!(peak_rss_bytes());
        if !recorded.is_empty() {
            v["recorded"] = serde_json::json!(recorded);
        }
        if let Some(l) = &load {
            v["speed"] = serde_json::json!(speed);
            v["offered_iops"] = serde_json::json!(l.offered_iops);
            v["served_iops"] = serde_json::json!(l.served_iops);
            v["saturated"] = serde_json::json!(l.saturated());
            v["backlog_by_tenth"] = serde_json::json!(l.backlog);
            v["backlog_grows"] = serde_json::json!(backlog_grows(&l.backlog));
        }
        super::emit::json(&v)?;
        return Ok(());
    }
    println!(
        "flashlab replay: {} ({} requests, {} streams, {} loop) on {}",
        a.trace.display(),
        summary.requests,
        info.streams.len(),
        if open { "open" } else { "closed" },
        preset.name
    );
    for n in &preset.notes {
        println!("  note              {n}");
    }
    if mode != lab::precondition::Precondition::None {
        print_precondition(&pre);
    }
    print_stats(&stats);
    if let Some(l) = &load {
        print_load(l, speed);
    }
    if a.wear {
        super::wear::print_wear_or_why(wear.as_ref(), &preset);
    }
    for r in recorded {
        println!("  recorded          {r}");
    }
    println!("  wall time         {wall_s:.2} s");
    Ok(())
}

/// Several drives' replays of the trace in one table (`--preset a,b,...`).
fn print_compare(
    a: &ReplayArgs,
    done: &[Outcome],
    runs: &[String],
    recorded: &[String],
    wall_s: f64,
) -> Result<()> {
    let cols: Vec<super::compare::Column> = done
        .iter()
        .zip(runs)
        .map(|(o, run)| super::compare::Column {
            name: run.clone(),
            stats: o.stats.clone(),
            load: o.load.as_ref().map(|l| (l.offered_iops, l.served_iops)),
        })
        .collect();
    let first = &done[0];
    if a.json {
        let mut each = Vec::new();
        for (o, run) in done.iter().zip(runs) {
            let mut v = serde_json::to_value(&o.stats)?;
            v["run"] = serde_json::json!(run);
            v["preset"] = serde_json::json!(o.preset.name);
            v["preset_notes"] = serde_json::json!(o.preset.notes);
            v["precondition"] = serde_json::to_value(&o.pre)?;
            v["requests"] = serde_json::json!(o.summary.requests);
            if let Some(l) = &o.load {
                v["offered_iops"] = serde_json::json!(l.offered_iops);
                v["served_iops"] = serde_json::json!(l.served_iops);
                v["saturated"] = serde_json::json!(l.saturated());
                v["backlog_by_tenth"] = serde_json::json!(l.backlog);
            }
            each.push(v);
        }
        let v = serde_json::json!({
            "trace": a.trace.display().to_string(),
            "mode": if first.open { "open" } else { "closed" },
            "runs": each,
            "compare": super::compare::json(&cols),
            "recorded": recorded,
            "wall_s": wall_s,
        });
        super::emit::json(&v)?;
        return Ok(());
    }
    println!(
        "flashlab replay: {} ({} requests, {} streams, {} loop) on {} drives side by side",
        a.trace.display(),
        first.summary.requests,
        first.info.streams.len(),
        if first.open { "open" } else { "closed" },
        done.len()
    );
    for (o, run) in done.iter().zip(runs) {
        println!(
            "  {run}: {} ({} bytes logical)",
            o.preset.description,
            o.stats_logical()
        );
        for n in &o.preset.notes {
            println!("    note            {n}");
        }
        if o.mode != lab::precondition::Precondition::None {
            println!("    preconditioned  {}", precondition_line(&o.pre));
        }
        let s = &o.stats;
        if s.host_read_bytes > 0 && s.unwritten_read_bytes * 100 > s.host_read_bytes {
            println!(
                "    warning         {:.1}% of the bytes read were never written: they read as zeros, without flash (--precondition, --unwritten-reads flash)",
                100.0 * s.unwritten_read_bytes as f64 / s.host_read_bytes as f64
            );
        }
        if let Some(l) = o.load.as_ref().filter(|l| l.saturated()) {
            println!(
                "    warning         saturated: served {:.0} of the {:.0} IOPS the trace offers (rerun it alone for the commands to go slower or closed loop)",
                l.served_iops, l.offered_iops
            );
        }
    }
    println!();
    print!("{}", super::compare::table(&cols));
    for r in recorded {
        println!("  recorded          {r}");
    }
    println!("  wall time         {wall_s:.2} s");
    Ok(())
}

impl Outcome {
    fn stats_logical(&self) -> u64 {
        self.preset.logical_bytes()
    }
}

/// Requests outstanding over an open-loop replay, kept in 1,024 bins of virtual time that
/// double in width as the run grows (so memory stays fixed): read at the end of each tenth
/// of the span of submissions, it says whether the backlog grew through the run.
#[derive(Debug, Default)]
struct Backlog {
    /// The first submission's time; bins count from it.
    origin: Option<u64>,
    width_ns: u64,
    submitted: Vec<u64>,
    completed: Vec<u64>,
    last_submit_ns: u64,
}

const BACKLOG_BINS: usize = 1024;

impl Backlog {
    fn bin(&mut self, t_ns: u64) -> usize {
        let origin = *self.origin.get_or_insert(t_ns);
        if self.submitted.is_empty() {
            self.width_ns = 1;
            self.submitted = vec![0; BACKLOG_BINS];
            self.completed = vec![0; BACKLOG_BINS];
        }
        loop {
            let i = (t_ns.saturating_sub(origin) / self.width_ns) as usize;
            if i < BACKLOG_BINS {
                return i;
            }
            // Twice as wide: bins 2k and 2k+1 become bin k.
            for v in [&mut self.submitted, &mut self.completed] {
                for k in 0..BACKLOG_BINS / 2 {
                    v[k] = v[2 * k] + v[2 * k + 1];
                }
                v[BACKLOG_BINS / 2..].fill(0);
            }
            self.width_ns *= 2;
        }
    }

    fn note(&mut self, submit_ns: u64, done_ns: u64) {
        let i = self.bin(submit_ns);
        self.submitted[i] += 1;
        let j = self.bin(done_ns);
        self.completed[j] += 1;
        self.last_submit_ns = self.last_submit_ns.max(submit_ns);
    }

    /// Requests outstanding at the end of each tenth of the span of submissions (to a bin's
    /// width: completions in the bin of a tenth's end count as done by then).
    fn by_tenth(&mut self) -> Vec<u64> {
        let Some(origin) = self.origin else {
            return Vec::new();
        };
        let span = self.last_submit_ns - origin;
        (1..=10u64)
            .map(|k| {
                let i = self.bin(origin + span / 10 * k + span % 10 * k / 10);
                let s: u64 = self.submitted[..=i].iter().sum();
                let c: u64 = self.completed[..=i].iter().sum();
                s.saturating_sub(c)
            })
            .collect()
    }
}

/// Whether a backlog read at tenths (see [`Backlog::by_tenth`]) grew through the run: at
/// the end more than twice what it was at half-time and above 16 requests, and it did not
/// shrink from one tenth to the next more than twice.
fn backlog_grows(tenths: &[u64]) -> bool {
    if tenths.len() != 10 {
        return false;
    }
    let shrinks = tenths.windows(2).filter(|w| w[1] < w[0]).count();
    tenths[9] > 2 * tenths[4] && tenths[9] > 16 && shrinks <= 2
}

/// A device whose submissions and completions feed a [`Backlog`].
struct Watched<'a, D: Device> {
    dev: &'a mut D,
    backlog: &'a mut Backlog,
}

impl<D: Device> Device for Watched<'_, D> {
    fn submit(&mut self, cmd: &flash::Command, now_ns: u64) -> Result<u64, flash::FlashError> {
        let done = self.dev.submit(cmd, now_ns)?;
        self.backlog.note(now_ns, done);
        Ok(done)
    }
    fn stats(&self) -> flash::DeviceStats {
        self.dev.stats()
    }
    fn reset_stats(&mut self) {
        self.dev.reset_stats()
    }
    fn logical_bytes(&self) -> u64 {
        self.dev.logical_bytes()
    }
    fn prefetch(&self, cmd: &flash::Command) {
        self.dev.prefetch(cmd)
    }
    fn prefetch_mapped(&self, cmd: &flash::Command) {
        self.dev.prefetch_mapped(cmd)
    }
    fn settle(&mut self) -> u64 {
        self.dev.settle()
    }
    fn rested_ns(&mut self) -> u64 {
        self.dev.rested_ns()
    }
}

/// The passes of a replay over the trace (`--repeat`), each starting where the last ended.
struct Passes<'a> {
    file: &'a trace::TraceFile,
    /// The trace with its TRIMs coalesced (`--trim-as vtrim`), held in memory.
    coalesced: Option<&'a trace::Trace>,
    open: bool,
    speed: f64,
    queue_depth: u32,
    repeat: u32,
    pb: &'a super::progress::Progress,
}

impl Passes<'_> {
    fn run<D: Device>(&self, dev: &mut D, offered: &mut Offered) -> Result<trace::ReplaySummary> {
        if !self.open {
            return self.run_passes(dev, offered);
        }
        let mut backlog = Backlog::default();
        let summary = self.run_passes(
            &mut Watched {
                dev,
                backlog: &mut backlog,
            },
            offered,
        )?;
        offered.backlog = backlog.by_tenth();
        Ok(summary)
    }

    fn run_passes<D: Device>(
        &self,
        dev: &mut D,
        offered: &mut Offered,
    ) -> Result<trace::ReplaySummary> {
        let (open, speed) = (self.open, self.speed);
        let mut summary = trace::ReplaySummary {
            requests: 0,
            end_ns: 0,
        };
        for _ in 0..self.repeat {
            let done_before = summary.requests;
            let mut prog = |n: u64| self.pb.set_position(done_before + n);
            let pass = match self.coalesced {
                None if open => trace::replay_open(
                    dev,
                    offered.pass(self.file.requests()?, speed),
                    summary.end_ns,
                    &mut prog,
                )?,
                None => trace::replay_file(
                    dev,
                    self.file,
                    open,
                    self.queue_depth,
                    summary.end_ns,
                    &mut prog,
                )?,
                Some(t) if open => trace::replay_open(
                    dev,
                    offered.pass(t.requests.iter().cloned().map(Ok), speed),
                    summary.end_ns,
                    &mut prog,
                )?,
                Some(t) => {
                    let streams: Vec<_> =
                        t.by_stream().into_iter().map(|s| s.into_iter()).collect();
                    trace::replay_closed(dev, streams, self.queue_depth, summary.end_ns, &mut prog)?
                }
            };
            summary.requests += pass.requests;
            summary.end_ns = summary.end_ns.max(pass.end_ns);
        }
        Ok(summary)
    }
}

fn parse_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!(
            "{s:?} is not a speed: a number above 0 (0.5 replays the trace at half its pace, 2 at twice)"
        )),
    }
}

/// What an open-loop replay's timestamps offered, pass by pass.
#[derive(Debug, Default)]
struct Offered {
    /// The spans (first to last timestamp) of the passes before the current one, ns.
    done_span_ns: u64,
    /// The current pass's first and last timestamps (scaled), ns.
    current: Option<(u64, u64)>,
    /// The replay's first timestamp (scaled), ns.
    first_ns: Option<u64>,
    /// Requests outstanding at the end of each tenth of the replay ([`Backlog`]).
    backlog: Vec<u64>,
}

/// An open-loop replay's load: what it offered and what the drive served.
#[derive(Debug, Clone)]
struct Load {
    offered_iops: f64,
    served_iops: f64,
    /// Requests outstanding at the end of each tenth of the replay.
    backlog: Vec<u64>,
}

/// Below this share of the offered rate the drive is said not to keep up.
const SATURATED_SHARE: f64 = 0.95;

impl Load {
    /// The drive did not keep up: it served less than [`SATURATED_SHARE`] of the offered
    /// rate, or the backlog grew through the run ([`backlog_grows`]).
    fn saturated(&self) -> bool {
        self.served_short() || backlog_grows(&self.backlog)
    }

    fn served_short(&self) -> bool {
        self.offered_iops > 0.0 && self.served_iops < SATURATED_SHARE * self.offered_iops
    }
}

impl Offered {
    /// One pass's requests, their timestamps divided by `speed`, measuring their span.
    fn pass<'a, I>(
        &'a mut self,
        requests: I,
        speed: f64,
    ) -> impl Iterator<Item = Result<trace::Request, trace::TraceError>> + 'a
    where
        I: Iterator<Item = Result<trace::Request, trace::TraceError>> + 'a,
    {
        if let Some((first, last)) = self.current.take() {
            self.done_span_ns += last - first;
        }
        requests.map(move |r| {
            r.map(|mut r| {
                r.at_ns = (r.at_ns as f64 / speed) as u64;
                let (first, last) = self.current.get_or_insert((r.at_ns, r.at_ns));
                *last = (*last).max(r.at_ns);
                let first = *first;
                self.first_ns.get_or_insert(first);
                r
            })
        })
    }

    /// The load of a replay of `requests` that ended at `end_ns`.
    fn load(&self, requests: u64, end_ns: u64) -> Load {
        let span_ns = self.done_span_ns + self.current.map_or(0, |(f, l)| l - f);
        let served_ns = end_ns.saturating_sub(self.first_ns.unwrap_or(0)).max(1);
        Load {
            offered_iops: if span_ns > 0 {
                requests as f64 / (span_ns as f64 / 1e9)
            } else {
                0.0
            },
            served_iops: requests as f64 / (served_ns as f64 / 1e9),
            backlog: self.backlog.clone(),
        }
    }
}

/// This command line again without the options in `drop` (and their values), with `add`.
fn rerun_with(drop: &[&str], add: &[&str]) -> String {
    let mut out = vec!["flashlab".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if drop.contains(&a.as_str()) {
            args.next();
            continue;
        }
        if drop.iter().any(|d| a.starts_with(&format!("{d}="))) {
            continue;
        }
        out.push(a);
    }
    out.extend(add.iter().map(|s| s.to_string()));
    out.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The offered and served rates, and a warning with the commands to rerun when the drive
/// did not keep up.
fn print_load(l: &Load, speed: f64) {
    println!(
        "  load              the trace offers {:.0} IOPS{}; the drive served {:.0} IOPS",
        l.offered_iops,
        if speed == 1.0 {
            String::new()
        } else {
            format!(" at --speed {speed}")
        },
        l.served_iops
    );
    if !l.backlog.is_empty() {
        println!(
            "  backlog           requests outstanding at the end of each tenth of the replay: {}",
            l.backlog
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if l.saturated() {
        // A pace the drive kept up with, with a tenth to spare.
        let slower = (l.served_iops / l.offered_iops * speed * 0.9 * 100.0).floor() / 100.0;
        let slower = format!("{}", slower.min(speed * 0.9).max(0.01));
        let why = if l.served_short() {
            format!(
                "the drive served {:.0}% of what the trace offers",
                l.served_iops / l.offered_iops * 100.0
            )
        } else {
            "the requests outstanding grew through the replay".to_string()
        };
        println!(
            "  warning           saturated: {why}, so requests queued without bound and the latencies above measure that backlog, not the drive. Rerun slower: `{}`; or closed loop (each stream waits for its requests): `{}`",
            rerun_with(&["--speed"], &["--speed", &slower]),
            rerun_with(&["--speed", "--mode"], &["--mode", "closed"])
        );
    }
}
