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
    #[arg(long, default_value = "none")]
    pub(crate) precondition: lab::precondition::Precondition,
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
        && !matches!(
            a.precondition,
            lab::precondition::Precondition::Steady { .. }
        )
        && a.device.age.is_none()
    {
        bail!("--seed seeds steady preconditioning's random writes and the error model's draws: without --precondition steady or --age it does nothing (fill writes in order)");
    }
    // One reading to describe and check the trace; each pass reads it again, a request at
    // a time (blkparse and tracefs captures are read whole: see trace::stream).
    let file = trace::TraceFile::open(&a.trace, a.format, a.disk.as_deref(), a.max_requests)?;
    let info = file.info().clone();
    let preset = a.device.preset()?;
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
    if let (Some(f), lab::precondition::Precondition::None) = (a.occupancy, a.precondition) {
        bail!("--occupancy {f} has no effect without --precondition fill or steady");
    }
    let pre = lab::precondition::precondition(
        &mut dev,
        a.precondition,
        a.occupancy.unwrap_or(1.0),
        a.seed,
    )?;
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
    let pb = progress_bar(per_pass * a.repeat as u64, "replay");
    let mut summary = trace::ReplaySummary {
        requests: 0,
        end_ns: 0,
    };
    for _ in 0..a.repeat {
        let done_before = summary.requests;
        let mut prog = |n: u64| pb.set_position(done_before + n);
        let pass = match &coalesced {
            None => trace::replay_file(
                &mut dev,
                &file,
                open,
                a.queue_depth,
                summary.end_ns,
                &mut prog,
            )?,
            Some(t) if open => trace::replay_open(
                &mut dev,
                t.requests.iter().cloned().map(Ok),
                summary.end_ns,
                &mut prog,
            )?,
            Some(t) => {
                let streams: Vec<_> = t.by_stream().into_iter().map(|s| s.into_iter()).collect();
                trace::replay_closed(&mut dev, streams, a.queue_depth, summary.end_ns, &mut prog)?
            }
        };
        summary.requests += pass.requests;
        summary.end_ns = summary.end_ns.max(pass.end_ns);
    }
    pb.finish_and_clear();
    // Deferred TRIM work finishes in idle time after the trace; count it.
    dev.settle();
    let stats = dev.stats();
    let wear = dev.wear_report();
    let wall_s = started.elapsed().as_secs_f64();
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
        println!("{}", serde_json::to_string(&v)?);
    } else {
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
        if a.precondition != lab::precondition::Precondition::None {
            print_precondition(&pre);
        }
        print_stats(&stats);
        if a.wear {
            super::wear::print_wear_or_why(wear.as_ref(), &preset);
        }
        println!("  wall time         {wall_s:.2} s");
    }
    Ok(())
}
