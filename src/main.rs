//! The `flashlab` command line: simulate drives, replay traces, reproduce the papers.

mod bench;
mod signals;
mod sweep;
mod units;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use flash::{Device, GcPolicy, Preset};
use indicatif::{ProgressBar, ProgressStyle};
use lab::experiments::{self, Scale};
use lab::sim::{SimSpec, SsdOverrides};
use std::path::PathBuf;
use std::time::Instant;
use trace::formats::Format;
use workloads::synthetic::Pattern;

#[derive(Parser)]
#[command(
    name = "flashlab",
    version,
    about = "A lab for flash-aware data management: SSD/HDD simulation, trace replay, paper reproductions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a drive under a synthetic workload: fill, warm up, measure.
    Sim(SimArgs),
    /// Replay a block trace on a simulated drive.
    Replay(ReplayArgs),
    /// Run the papers' experiments and write the HTML report.
    Reproduce(ReproduceArgs),
    /// simfs on a simulated drive: delete a fragmented file with a discard mode, then read.
    Simfs(SimfsArgs),
    /// Out-of-core hash join of TPC-H ORDERS and LINEITEM on real files or a simulated drive.
    Join(JoinArgs),
    /// B+tree on the AS or in-place store: timed inserts and searches; `btree crash-test`.
    Btree(BtreeArgs),
    /// Record a real file system's block I/O while a command runs (root; loop device).
    Capture(CaptureArgs),
    /// The ForestDB-like key-value store under paper 003's update workload; `kv crash-test`.
    Kv(KvArgs),
    /// List the device presets.
    Presets,
    /// Measure the simulator's own speed and memory.
    Bench(bench::BenchArgs),
    /// `sim` over a grid: any sim flag with comma-separated values, points on all cores.
    Sweep(sweep::SweepArgs),
}

#[derive(clap::Args)]
struct DeviceArgs {
    /// Device preset name (see `flashlab presets`) or a path to a preset TOML file.
    #[arg(long)]
    preset: String,
    /// Logical (user-visible) capacity, e.g. 4GiB; the preset's ratios are kept.
    #[arg(long, value_parser = units::parse_size)]
    capacity: Option<u64>,
    /// Over-provisioning as a fraction: (physical - logical) / logical.
    #[arg(long)]
    op: Option<f64>,
    /// Flash page size, e.g. 16KiB.
    #[arg(long, value_parser = units::parse_size)]
    page_size: Option<u64>,
    /// Pages per erase block.
    #[arg(long)]
    pages_per_block: Option<u32>,
    /// GC victim policy: greedy, cost-benefit or fifo.
    #[arg(long)]
    gc: Option<GcPolicy>,
    /// GC runs when a die's free pool is at or below this many blocks.
    #[arg(long)]
    gc_free_blocks: Option<u32>,
    /// Clean in idle time (after 1 ms without work on a die) up to N free blocks per die.
    #[arg(long, value_name = "N")]
    background_gc: Option<u32>,
    /// DRAM write cache size (0 = none): writes complete once cached.
    #[arg(long, value_parser = units::parse_size)]
    write_cache: Option<u64>,
    /// queued: NCQ TRIM; blocking: TRIM drains the queue and blocks other commands.
    #[arg(long, value_parser = ["queued", "blocking"])]
    trim: Option<String>,
    /// vTrim/fTrim: acknowledge once recorded, do the work in idle time.
    #[arg(long)]
    trim_background: bool,
    /// Background TRIM work pauses when a host command arrives.
    #[arg(long)]
    trim_preemptive: bool,
}

impl DeviceArgs {
    fn preset(&self) -> Result<Preset> {
        let p = Preset::load(&self.preset)?;
        let page_size_bytes = match self.page_size {
            Some(b) => Some(u32::try_from(b).context("--page-size is too large")?),
            None => None,
        };
        let o = SsdOverrides {
            capacity_bytes: self.capacity,
            op: self.op,
            page_size_bytes,
            pages_per_block: self.pages_per_block,
            gc: self.gc,
            gc_free_blocks: self.gc_free_blocks,
            background_gc_free_blocks: self.background_gc,
            write_cache_bytes: self.write_cache,
            trim_queued: self.trim.as_deref().map(|t| t == "queued"),
            trim_background: self.trim_background.then_some(true),
            trim_preemptive: self.trim_preemptive.then_some(true),
        };
        Ok(o.apply(p)?)
    }
}

#[derive(clap::Args)]
struct SimArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// uniform, sequential, hotcold:R/F (R of writes to F of the space) or zipf:THETA.
    #[arg(long)]
    workload: Pattern,
    /// Size of every request.
    #[arg(long, default_value = "4KiB", value_parser = units::parse_size)]
    request_size: u64,
    /// Fraction of requests that are reads.
    #[arg(long, default_value_t = 0.0)]
    read_fraction: f64,
    /// Requests in flight (closed loop).
    #[arg(long, default_value_t = 1)]
    queue_depth: u32,
    /// Measured write volume as a multiple of the capacity, e.g. 2x.
    #[arg(long, value_parser = units::parse_multiple)]
    writes: f64,
    /// Warm-up write volume before measuring, e.g. 1x.
    #[arg(long, default_value = "1x", value_parser = units::parse_multiple)]
    warmup: f64,
    /// on: full timing model; off: the WAF-only fast path.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    timing: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instead of the sequential fill and --warmup: fill (sequential writes up to
    /// --occupancy) or steady[:Nx] (then random 4 KiB writes until WAF is steady by SNIA
    /// PTS's rule, at most N times the filled bytes); the workload then addresses the
    /// filled space only. Not measured.
    #[arg(long)]
    precondition: Option<lab::precondition::Precondition>,
    /// Share of the logical space --precondition fills (0 < F <= 1).
    #[arg(long, default_value_t = 1.0, requires = "precondition")]
    occupancy: f64,
    /// Print one JSON object instead of a summary.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// Trace file.
    trace: PathBuf,
    /// auto, blkparse, tracefs, msr or native.
    #[arg(long, default_value = "auto")]
    format: Format,
    /// MSR Cambridge traces: replay only this disk (`N`, or `HOST:N`); a trace of several
    /// disks needs one (their blocks would collide in one address space).
    #[arg(long)]
    disk: Option<String>,
    #[command(flatten)]
    device: DeviceArgs,
    /// closed: each stream issues its next request when the previous completes (plus its
    /// think time); open: requests issue at their timestamps. Default: open for
    /// timestamped traces, closed otherwise.
    #[arg(long, value_parser = ["closed", "open"])]
    mode: Option<String>,
    /// Requests in flight per stream in closed-loop mode.
    #[arg(long, default_value_t = 1)]
    queue_depth: u32,
    /// trim: replay TRIMs as captured; vtrim: each run of consecutive TRIMs of a stream
    /// (within --coalesce-window) becomes one vectored TRIM, as if sent per unlink.
    #[arg(long, default_value = "trim", value_parser = ["trim", "vtrim"])]
    trim_as: String,
    /// Largest gap between two TRIMs of one run, for --trim-as vtrim.
    #[arg(long, default_value = "1ms", value_parser = units::parse_duration_ns)]
    coalesce_window: u64,
    /// Before the trace: none (a fresh drive), fill (sequential writes up to
    /// --occupancy), steady[:Nx] (fill, then random 4 KiB writes until WAF is steady by
    /// SNIA PTS's rule, at most N times the filled bytes; default 5x). Not measured.
    #[arg(long, default_value = "none")]
    precondition: lab::precondition::Precondition,
    /// Share of the logical space preconditioning fills (0 < F <= 1).
    #[arg(long, default_value_t = 1.0)]
    occupancy: f64,
    /// Seed of preconditioning's random writes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replay the trace this many times back to back on the same drive (as MQSim's relay
    /// count); each pass starts when the previous one ends.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Replay only the first N requests of the trace.
    #[arg(long)]
    max_requests: Option<u64>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct KvArgs {
    #[command(subcommand)]
    cmd: Option<KvCmd>,
    #[command(flatten)]
    run: KvRunArgs,
}

#[derive(Subcommand)]
enum KvCmd {
    /// Crash a database at random points and check recovery against a reference map.
    CrashTest(CrashTestArgs),
}

#[derive(clap::Args)]
struct KvRunArgs {
    /// Documents over all databases.
    #[arg(long, default_value_t = 100_000)]
    docs: u64,
    #[arg(long, default_value = "1KiB", value_parser = units::parse_size)]
    doc_size: u64,
    /// Updates over all databases.
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// Updates per commit (write batch size).
    #[arg(long, default_value_t = 1)]
    batch: u64,
    /// Databases, one writer thread each.
    #[arg(long, default_value_t = 4)]
    dbs: usize,
    /// Key choice: uniform or zipf:THETA.
    #[arg(long, default_value = "uniform")]
    pattern: workloads::synthetic::Pattern,
    /// (For kv, --dir defaults to FLASHLAB_DIR, as `flashlab capture` sets it.)
    #[command(flatten)]
    storage: BackendArgs,
    /// Index node size.
    #[arg(long, default_value = "4KiB", value_parser = units::parse_size)]
    node_size: u64,
    /// Log segment file size.
    #[arg(long, default_value = "4MiB", value_parser = units::parse_size)]
    segment_size: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct CaptureArgs {
    /// ext4, xfs or btrfs.
    #[arg(long)]
    fs: trace::capture::FsKind,
    /// Size of the (sparse) image.
    #[arg(long, default_value = "1GiB", value_parser = units::parse_size)]
    size: u64,
    /// Mount with -o discard (online TRIM).
    #[arg(long)]
    discard: bool,
    /// Extra mkfs options, as one string (e.g. "-b 4096").
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    mkfs_opts: String,
    /// Extra mount options, comma-separated (e.g. "noatime").
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    mount_opts: String,
    /// Where the trace goes (flashlab's native format; replay it with `flashlab replay`).
    #[arg(long)]
    out: PathBuf,
    /// Where the image and mount point are made (a fresh directory inside, removed after).
    #[arg(long, default_value = "/tmp")]
    image_dir: PathBuf,
    /// The command, after `--`; `{}` in an argument becomes the mounted directory, which
    /// is also in FLASHLAB_DIR.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(clap::Args)]
struct ReproduceArgs {
    /// quick (minutes) or full.
    #[arg(long, default_value = "quick")]
    scale: Scale,
    /// Run only these experiments (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Output directory.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn progress_bar(total: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

fn print_precondition(pre: &lab::precondition::PreconditionReport) {
    println!(
        "  preconditioned    {}: {} bytes filled, {} bytes of random writes in {} rounds{} (not measured)",
        pre.mode,
        pre.filled_bytes,
        pre.aging_write_bytes,
        pre.rounds,
        match (pre.steady, pre.round_waf.last()) {
            (Some(true), Some(w)) => format!(", steady at WAF {w:.2}"),
            (Some(false), Some(w)) => format!(", not steady at the cap (last WAF {w:.2})"),
            _ => String::new(),
        }
    );
}

fn print_stats(s: &flash::DeviceStats) {
    let ms = |ns: u64| ns as f64 / 1e6;
    println!("  simulated time    {:.3} s", s.simulated_ns as f64 / 1e9);
    println!(
        "  host ops          {} ({:.0} IOPS, read {:.1} MB/s, write {:.1} MB/s)",
        s.host_ops, s.iops, s.read_mb_per_s, s.write_mb_per_s
    );
    for (name, l) in [
        ("read", s.read_latency_ns),
        ("write", s.write_latency_ns),
        ("trim", s.trim_latency_ns),
        ("flush", s.flush_latency_ns),
    ] {
        if l.count > 0 {
            println!(
                "  {name:<5} latency     mean {:.3} ms  p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
                ms(l.mean),
                ms(l.p50),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            );
        }
    }
    if let Some(waf) = s.waf {
        println!(
            "  WAF               {waf:.3} ({} host pages, {} flash pages, {} GC copies, {} erases)",
            s.host_write_pages, s.flash_write_pages, s.gc_copied_pages, s.erases
        );
        println!(
            "  erase counts      min {} max {} mean {:.2} stddev {:.2}",
            s.erase_count_min, s.erase_count_max, s.erase_count_mean, s.erase_count_stddev
        );
    }
    if s.trim_commands > 0 {
        println!(
            "  TRIM              {} commands, {} ranges, {} pages invalidated, {:.3} ms interface, {:.3} ms in the drive",
            s.trim_commands,
            s.trim_ranges,
            s.trimmed_pages,
            ms(s.trim_interface_ns),
            ms(s.trim_busy_ns)
        );
    }
}

/// What `sim`'s flags ask for.
fn sim_spec(a: &SimArgs) -> Result<SimSpec> {
    Ok(SimSpec {
        preset: a.device.preset()?,
        pattern: a.workload,
        request_bytes: a.request_size,
        read_fraction: a.read_fraction,
        queue_depth: a.queue_depth,
        writes_x: a.writes,
        warmup_x: a.warmup,
        timing: a.timing == "on",
        seed: a.seed,
        precondition: a.precondition.map(|p| (p, a.occupancy)),
    })
}

fn cmd_sim(a: SimArgs) -> Result<()> {
    let started = Instant::now();
    let spec = sim_spec(&a)?;
    let pb = progress_bar(0, "sim");
    let result = lab::sim::run(&spec, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    });
    pb.finish_and_clear();
    let result = result.map_err(anyhow::Error::msg)?;
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        let mut v = serde_json::to_value(&result)?;
        v["wall_s"] = serde_json::json!(wall_s);
        v["preset_notes"] = serde_json::json!(spec.preset.notes);
        println!("{}", serde_json::to_string(&v)?);
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
            a.timing
        );
        for n in &spec.preset.notes {
            println!("  note              {n}");
        }
        if let Some(p) = &result.precondition {
            print_precondition(p);
        }
        print_stats(&result.stats);
        println!("  wall time         {wall_s:.2} s");
    }
    Ok(())
}

fn cmd_replay(a: ReplayArgs) -> Result<()> {
    let started = Instant::now();
    if a.repeat == 0 {
        bail!("--repeat must be at least 1");
    }
    let mut t = trace::formats::read_file_disk(&a.trace, a.format, a.disk.as_deref())?;
    if let Some(n) = a.max_requests {
        if n == 0 {
            bail!("--max-requests must be at least 1");
        }
        t.requests.truncate(n.min(usize::MAX as u64) as usize);
    }
    let preset = a.device.preset()?;
    let mut dev = preset.build()?;
    let end = t.max_end_bytes();
    if end > dev.logical_bytes() {
        bail!(
            "{}: the trace reaches byte {end} but preset {} holds {} bytes; pass --capacity with at least {end} bytes",
            a.trace.display(),
            preset.name,
            dev.logical_bytes()
        );
    }
    let open = match a.mode.as_deref() {
        Some("open") => true,
        Some(_) => false,
        None => t.timestamped,
    };
    let pre = lab::precondition::precondition(&mut dev, a.precondition, a.occupancy, a.seed)
        .map_err(anyhow::Error::msg)?;
    if a.trim_as == "vtrim" {
        let page = dev
            .logical_bytes()
            .saturating_sub(flash::command::TRIM_COMMAND_PAGE_BYTES);
        if end > page {
            bail!("--trim-as vtrim needs the drive's last 4 KiB page free for vTrim commands, but the trace uses it; pass a larger --capacity");
        }
        t.requests = trace::transform::coalesce_trims(&t.requests, a.coalesce_window, page);
    }
    let per_pass = t.requests.len() as u64;
    let pb = progress_bar(per_pass * a.repeat as u64, "replay");
    let mut summary = trace::ReplaySummary {
        requests: 0,
        end_ns: 0,
    };
    for _ in 0..a.repeat {
        let done_before = summary.requests;
        let mut prog = |n: u64| pb.set_position(done_before + n);
        let pass = if open {
            trace::replay_open(&mut dev, &t.requests, summary.end_ns, &mut prog)?
        } else {
            let streams: Vec<_> = t.by_stream().into_iter().map(|s| s.into_iter()).collect();
            trace::replay_closed(&mut dev, streams, a.queue_depth, summary.end_ns, &mut prog)?
        };
        summary.requests += pass.requests;
        summary.end_ns = summary.end_ns.max(pass.end_ns);
    }
    pb.finish_and_clear();
    // Deferred TRIM work finishes in idle time after the trace; count it.
    dev.settle();
    let stats = dev.stats();
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        let mut v = serde_json::to_value(&stats)?;
        v["trace"] = serde_json::json!(a.trace.display().to_string());
        v["preset"] = serde_json::json!(preset.name);
        v["mode"] = serde_json::json!(if open { "open" } else { "closed" });
        v["requests"] = serde_json::json!(summary.requests);
        v["preset_notes"] = serde_json::json!(preset.notes);
        v["precondition"] = serde_json::to_value(&pre)?;
        v["repeat"] = serde_json::json!(a.repeat);
        v["seed"] = serde_json::json!(a.seed);
        v["wall_s"] = serde_json::json!(wall_s);
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!(
            "flashlab replay: {} ({} requests, {} streams, {} loop) on {}",
            a.trace.display(),
            summary.requests,
            t.by_stream().len(),
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
        println!("  wall time         {wall_s:.2} s");
    }
    Ok(())
}

fn cmd_reproduce(a: ReproduceArgs) -> Result<()> {
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
    eprintln!(
        "flashlab reproduce: scale {}, seed {}, {} experiment(s), report in {}",
        a.scale,
        a.seed,
        chosen.len(),
        a.out.display()
    );
    let info = lab::report::RunInfo {
        scale: a.scale.to_string(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        version: env!("CARGO_PKG_VERSION").to_string(),
        total_runtime_s: 0.0,
    };
    let mut bars = Bars(None);
    let r = experiments::reproduce(
        &chosen,
        a.scale,
        a.seed,
        &signals::cancel_token(),
        &a.out,
        info,
        &mut bars,
    );
    bars.stop();
    let r = r.map_err(anyhow::Error::msg)?;
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

/// A progress bar per experiment (on a terminal): jobs done of jobs planned, redrawn by a
/// ticker thread until the experiment ends.
struct Bars(Option<(ProgressBar, std::sync::Arc<std::sync::atomic::AtomicBool>)>);

impl Bars {
    fn stop(&mut self) {
        if let Some((pb, stop)) = self.0.take() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            pb.finish_and_clear();
        }
    }
}

impl experiments::Watcher for Bars {
    fn started(&mut self, e: &experiments::Experiment, progress: &experiments::Progress) {
        let pb = ProgressBar::new(0);
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} jobs, {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        pb.set_message(e.id.to_string());
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
        self.0 = Some((pb, stop));
    }

    fn finished(&mut self, s: &lab::report::Section) {
        self.stop();
        print_section_summary(s);
    }
}

/// One experiment's outcome, for people: time and claims, or why it failed or was skipped.
fn print_section_summary(s: &lab::report::Section) {
    let held = s.verdicts.iter().filter(|v| v.holds).count();
    if let Some(error) = s.failed_with() {
        eprintln!("  {:<14} FAILED: {error}", s.id);
    } else if let Some(why) = s.results.get("skipped").and_then(|w| w.as_str()) {
        eprintln!("  {:<14} skipped: {why}", s.id);
    } else {
        eprintln!(
            "  {:<14} {:>6.1} s  {held}/{} claims hold",
            s.id,
            s.runtime_s,
            s.verdicts.len()
        );
    }
    for v in &s.verdicts {
        eprintln!(
            "      [{}] {}",
            if v.holds { "holds" } else { "FAILS" },
            v.claim
        );
    }
}

#[derive(clap::Args)]
struct SimfsArgs {
    #[command(flatten)]
    device: DeviceArgs,
    /// Size of the file system (at the start of the drive).
    #[arg(long, default_value = "16GiB", value_parser = units::parse_size)]
    fs_size: u64,
    /// Size of the file to delete.
    #[arg(long, default_value = "10MiB", value_parser = units::parse_size)]
    file_size: u64,
    /// Extents of the file to delete (separated by free blocks).
    #[arg(long, default_value_t = 160)]
    extents: u32,
    /// none, online (one TRIM per extent), vtrim, ftrim or deferred (fstrim after the delete).
    #[arg(long, default_value = "online")]
    discard: simfs::DiscardMode,
    /// ext4-like or log-structured allocation.
    #[arg(long, default_value = "ext4-like")]
    alloc: simfs::AllocPolicy,
    /// Random 4 KiB reads of a 64 MiB data file after the delete.
    #[arg(long, default_value_t = 0)]
    reads: u32,
    /// Host time between two reads.
    #[arg(long, default_value = "20us", value_parser = units::parse_duration_ns)]
    read_think: u64,
    /// Write every request the file system issued to this file (native format, open loop).
    #[arg(long)]
    trace_out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

fn cmd_simfs(a: SimfsArgs) -> Result<()> {
    let sc = lab::experiments::trim::DeleteScenario {
        preset: a.device.preset()?,
        fs_bytes: a.fs_size,
        data_file_bytes: 64 << 20,
        file_bytes: a.file_size,
        extents: a.extents,
        discard: a.discard,
        alloc: a.alloc,
        background: None,
        preemptive: None,
        reads: a.reads,
        read_think_ns: a.read_think,
        seed: a.seed,
        record: a.trace_out.is_some(),
    };
    let r = lab::experiments::trim::run_scenario(&sc).map_err(anyhow::Error::msg)?;
    if let (Some(path), Some(t)) = (&a.trace_out, &r.trace) {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        trace::formats::write_native(t, std::io::BufWriter::new(f))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["preset"] = serde_json::json!(sc.preset.name);
        v["seed"] = serde_json::json!(a.seed);
        println!("{}", serde_json::to_string(&v)?);
        return Ok(());
    }
    let ms = |ns: u64| ns as f64 / 1e6;
    println!(
        "flashlab simfs: {} GiB {} simfs on {}, delete a {} byte file of {} extents with discard {}, then {} reads",
        a.fs_size >> 30,
        a.alloc,
        sc.preset.name,
        a.file_size,
        r.extents,
        r.discard,
        a.reads
    );
    println!(
        "  TRIM-family commands  {} ({} ranges, {} pages invalidated)",
        r.trim_commands, r.trim_ranges, r.trimmed_pages
    );
    println!("  interface time        {:.3} ms", ms(r.interface_ns));
    println!(
        "  in-drive time         {:.3} ms ({} metadata blocks read)",
        ms(r.in_drive_ns),
        r.metadata_reads
    );
    println!("  total time            {:.3} ms", ms(r.total_ns));
    if a.reads > 0 {
        let l = r.read_latency_ns;
        println!(
            "  read latency          mean {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            ms(l.mean),
            ms(l.p99),
            ms(l.max)
        );
    }
    if let Some(p) = &a.trace_out {
        println!("  trace written to      {}", p.display());
    }
    Ok(())
}

/// Where an engine's files live: one flag group for `join`, `btree` and `kv`.
#[derive(clap::Args)]
struct BackendArgs {
    /// mem: files in RAM; os: real files in --dir; sim: simfs on a simulated drive
    /// (--preset) [default: os for join, mem for btree and kv].
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// os: the directory for the run's files (it must exist).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// os: open the files with O_DIRECT.
    #[arg(long)]
    direct_io: bool,
    /// sim: the drive (a preset name, see `flashlab presets`, or a TOML file).
    #[arg(long)]
    preset: Option<String>,
    /// sim: logical capacity of the drive, e.g. 4GiB.
    #[arg(long, value_parser = units::parse_size)]
    capacity: Option<u64>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendKind {
    Mem,
    Os,
    Sim,
}

impl BackendArgs {
    /// The backend these flags describe (`default` when --backend is absent; `dir` when
    /// --dir is).
    fn resolve(&self, default: BackendKind, dir: Option<PathBuf>) -> Result<lab::backend::Backend> {
        Ok(match self.backend.unwrap_or(default) {
            BackendKind::Mem => lab::backend::Backend::Mem,
            BackendKind::Os => lab::backend::Backend::Os {
                dir: self
                    .dir
                    .clone()
                    .or(dir)
                    .context("--backend os needs --dir DIR")?,
                direct_io: self.direct_io,
                cancel: signals::cancel_token(),
            },
            BackendKind::Sim => {
                let name = self
                    .preset
                    .clone()
                    .context("--backend sim needs --preset NAME")?;
                let mut p = Preset::load(&name)?;
                if let Some(c) = self.capacity {
                    p = p.with_capacity(c);
                }
                lab::backend::Backend::Sim {
                    preset: Box::new(p),
                }
            }
        })
    }
}

#[derive(clap::Args)]
struct JoinArgs {
    /// TPC-H scale factor (1 = 1.5 M orders, 6 M lineitems).
    #[arg(long)]
    sf: f64,
    /// columns: the join's two columns (16-byte records); fixed128: paper 001's 128-byte records.
    #[arg(long, default_value = "columns")]
    layout: workloads::tpch::Layout,
    /// Memory budget for everything the join holds (tables and buffers), shared by all users.
    #[arg(long, value_parser = units::parse_size)]
    memory: u64,
    #[arg(long, default_value = "grace")]
    algorithm: hashjoin::Algorithm,
    /// Size of every read of an input or spill file.
    #[arg(long, default_value = "1MiB", value_parser = units::parse_size)]
    read_buffer: u64,
    /// Output buffer per partition (size of every spill write).
    #[arg(long, default_value = "64KiB", value_parser = units::parse_size)]
    write_buffer: u64,
    /// Force the number of partitions (default: planned from the memory budget).
    #[arg(long)]
    partitions: Option<u32>,
    /// Concurrent joins sharing the memory budget (os backend).
    #[arg(long, default_value_t = 1)]
    users: u32,
    #[command(flatten)]
    storage: BackendArgs,
    /// os: where the input tables are generated and kept (default: --dir).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// os: most bytes the run's spill files may hold.
    #[arg(long, value_parser = units::parse_size)]
    spill_cap: Option<u64>,
    /// sim: simfs allocation policy.
    #[arg(long, default_value = "ext4-like")]
    alloc: simfs::AllocPolicy,
    /// sim: discard mode of spill-file deletes (none, online, journal, vtrim, ftrim,
    /// deferred).
    #[arg(long, default_value = "none")]
    discard: simfs::DiscardMode,
    /// sim: keep the input tables on the simulated drive (reads are timed).
    #[arg(long)]
    inputs_on_device: bool,
    /// sim: simfs preallocates growing windows for appending files (ext4 mballoc, as with
    /// buffered writes); without it every write allocates on its own (as under O_DIRECT).
    #[arg(long)]
    prealloc: bool,
    /// sim: the path between the join and simfs: linux (page cache, dirty limits and
    /// writeback, delayed allocation, readahead, 5-s journal commits, a 32-deep queue),
    /// direct-io (O_DIRECT: no cache, journal commits), none (every call reaches the
    /// drive when it is made, metadata only at syncs).
    #[arg(long, value_enum, default_value = "linux")]
    host: HostPath,
    /// sim, --host linux: the host's memory (the page cache and its dirty limits).
    #[arg(long, default_value = "1GiB", value_parser = units::parse_size)]
    host_ram: u64,
    /// sim: computation charged per row processed.
    #[arg(long, default_value = "100ns", value_parser = units::parse_duration_ns)]
    cpu_per_row: u64,
    /// Preallocate spill files at their expected size.
    #[arg(long, default_value = "off", value_parser = ["on", "off"])]
    fallocate: String,
    /// Repetitions (on sim, the drive's state carries over).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    #[arg(long)]
    json: bool,
}

/// The host path of `join --backend sim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HostPath {
    Linux,
    DirectIo,
    None,
}

fn cmd_join(a: JoinArgs) -> Result<()> {
    let started = Instant::now();
    let storage = a.storage.resolve(BackendKind::Os, None)?;
    let simulated = storage.virtual_time();
    let join_storage = lab::joinrun::JoinStorage {
        data_dir: a.data_dir.clone(),
        spill_cap_bytes: a.spill_cap,
        fs_bytes: None,
        alloc: a.alloc,
        discard: a.discard,
        prealloc: a.prealloc,
        inputs_on_device: a.inputs_on_device,
        host: match a.host {
            HostPath::Linux => vfs::HostConfig::linux(a.host_ram),
            HostPath::DirectIo => vfs::HostConfig::direct_io(),
            HostPath::None => vfs::HostConfig::uncached(),
        },
    };
    let spec = lab::joinrun::JoinRunSpec {
        sf: a.sf,
        layout: a.layout,
        memory_bytes: a.memory,
        join: hashjoin::JoinSpec {
            algorithm: a.algorithm,
            read_buffer_bytes: a.read_buffer,
            write_buffer_bytes: a.write_buffer,
            fallocate: a.fallocate == "on",
            partitions: a.partitions,
            cpu_ns_per_row: if simulated { a.cpu_per_row } else { 0 },
            concurrent_users: a.users,
        },
        users: a.users,
        repeat: a.repeat,
        backend: storage,
        storage: join_storage,
    };
    let pb = progress_bar(a.repeat as u64, "join");
    let r = lab::joinrun::run(&spec, &mut |n| pb.set_position(n as u64));
    pb.finish_and_clear();
    let r = r.map_err(anyhow::Error::msg)?;
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["wall_s"] = serde_json::json!(wall_s);
        println!("{}", serde_json::to_string(&v)?);
        return Ok(());
    }
    let time_kind = if simulated { "simulated" } else { "wall" };
    println!(
        "flashlab join: SF {} ({}), {} join, memory {} bytes, {} user(s), backend {}",
        r.sf, r.layout, r.algorithm, r.memory_bytes, r.users, r.backend
    );
    println!("  result rows              {}", r.rows);
    println!(
        "  sum_l_extendedprice      {} cents",
        r.sum_l_extendedprice_cents
    );
    println!(
        "  sum_o_totalprice         {} cents",
        r.sum_o_totalprice_cents
    );
    println!(
        "  partitions               {} ({} in memory), {} repartitioned pairs, {} nested-loop pairs",
        r.partitions, r.resident_partitions, r.repartitioned_pairs, r.nested_loop_pairs
    );
    println!(
        "  spilled / read back      {} / {} bytes ({:.2}x the {} input bytes), {} spill files",
        r.bytes_spilled, r.bytes_read_back, r.spill_ratio, r.input_bytes, r.spill_files
    );
    println!("  peak memory              {} bytes", r.peak_memory_bytes);
    if r.stale_spill_files_removed > 0 {
        println!(
            "  stale spill files        {} removed (left by a killed run)",
            r.stale_spill_files_removed
        );
    }
    for (i, rep) in r.repetitions.iter().enumerate() {
        println!(
            "  repetition {:>3}          {:.3} s {time_kind} (partition {:.3} s, join {:.3} s){}{}",
            i + 1,
            rep.total_ns as f64 / 1e9,
            rep.partition_ns as f64 / 1e9,
            rep.join_ns as f64 / 1e9,
            if simulated {
                format!(", {} TRIM commands", rep.trim_commands)
            } else {
                String::new()
            },
            rep.waf.map_or(String::new(), |w| format!(", WAF {w:.2}"))
        );
    }
    println!("  wall time                {wall_s:.2} s");
    Ok(())
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct BtreeArgs {
    #[command(subcommand)]
    cmd: Option<BtreeCmd>,
    #[command(flatten)]
    run: BtreeRunArgs,
}

#[derive(Subcommand)]
enum BtreeCmd {
    /// Crash the AS store at random points and check recovery against a reference map.
    CrashTest(CrashTestArgs),
}

#[derive(clap::Args)]
struct CrashTestArgs {
    /// Seeded crash tests to run (each draws its geometry and 1-4 crash/recover cycles
    /// from its seed).
    #[arg(long, default_value_t = 1000)]
    iterations: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// Runs `iterations` seeded crash tests of `what` and says what they covered; the first
/// failure names its seed.
fn run_crash_tests(
    what: &str,
    c: &CrashTestArgs,
    test: impl Fn(u64) -> Result<astree::crash::Coverage, String>,
) -> Result<()> {
    let pb = progress_bar(c.iterations, "crash-test");
    let mut total = astree::crash::Coverage::default();
    for i in 0..c.iterations {
        total.add(&test(c.seed + i).map_err(anyhow::Error::msg)?);
        pb.set_position(i + 1);
    }
    pb.finish_and_clear();
    println!(
        "flashlab {what} crash-test: {} seeded tests (seeds {}..{}) recovered the last durable commit every time: {}",
        c.iterations,
        c.seed,
        c.seed + c.iterations,
        total.summary()
    );
    Ok(())
}

#[derive(clap::Args)]
struct BtreeRunArgs {
    /// as (always sequential), inplace or bftl.
    #[arg(long, default_value = "as")]
    store: lab::btreerun::StoreKind,
    /// Keys per node at most.
    #[arg(long, default_value_t = 64)]
    fanout: usize,
    #[arg(long, default_value = "8KiB", value_parser = units::parse_size)]
    node_size: u64,
    /// AS store: nodes in the write buffer (BFTL: its reservation buffer holds as many bytes).
    #[arg(long, default_value_t = 1)]
    write_buffer: usize,
    /// BFTL: sectors on a node's list before it is compacted (C).
    #[arg(long, default_value_t = 3)]
    bftl_list: usize,
    /// LRU cache of this many nodes (0 = none).
    #[arg(long, default_value_t = 0)]
    cache: usize,
    /// Entries inserted before measuring.
    #[arg(long, default_value_t = 400_000)]
    preload: u64,
    /// Inserts, then searches, measured.
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    #[command(flatten)]
    storage: BackendArgs,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// AS store: size of each log segment file.
    #[arg(long, default_value = "128MiB", value_parser = units::parse_size)]
    segment_size: u64,
    /// AS store: cleaning policy (off, oldest = the paper's sliding window, cost-benefit).
    #[arg(long, default_value = "cost-benefit")]
    cleaning: astree::asstore::Cleaning,
    /// AS store: cleaning keeps file bytes at most this many times the live node bytes.
    #[arg(long, default_value_t = astree::asstore::DEFAULT_MAX_SPACE_AMP)]
    max_space_amp: f64,
    /// Commit (sync) every N inserts; 0 = only after the preload and the timed inserts.
    /// The AS store cleans at commits.
    #[arg(long, default_value_t = 0)]
    commit_every: u64,
    /// AS store: commit by logging the operations; dirty nodes are written when the write
    /// buffer fills (recovery replays the operations).
    #[arg(long)]
    logical_commits: bool,
    #[arg(long)]
    json: bool,
}

fn cmd_btree(a: BtreeArgs) -> Result<()> {
    if let Some(BtreeCmd::CrashTest(c)) = a.cmd {
        return run_crash_tests("btree", &c, |seed| {
            astree::crash::crash_test(seed, &astree::crash::CrashShape::varied(seed))
        });
    }
    let r = a.run;
    let backend = r.storage.resolve(BackendKind::Mem, None)?;
    let spec = lab::btreerun::BtreeSpec {
        fanout: r.fanout,
        node_bytes: usize::try_from(r.node_size).context("--node-size is too large")?,
        write_buffer_nodes: r.write_buffer,
        cache_nodes: r.cache,
        bftl_max_list: r.bftl_list,
        preload: r.preload,
        ops: r.ops,
        seed: r.seed,
        segment_bytes: r.segment_size,
        cleaning: r.cleaning,
        max_space_amp: r.max_space_amp,
        commit_every: r.commit_every,
        logical_commits: r.logical_commits,
        ..lab::btreerun::BtreeSpec::new(r.store, backend)
    };
    let started = Instant::now();
    let res = lab::btreerun::run(&spec).map_err(anyhow::Error::msg)?;
    if r.json {
        let mut v = serde_json::to_value(&res)?;
        v["wall_s"] = serde_json::json!(started.elapsed().as_secs_f64());
        println!("{}", serde_json::to_string(&v)?);
        return Ok(());
    }
    println!(
        "flashlab btree: {} store, fanout {}, {} byte nodes, write buffer {}, cache {}, backend {}, seed {}",
        res.store, res.fanout, res.node_bytes, res.write_buffer_nodes, res.cache_nodes, res.backend, res.seed
    );
    println!("  preload                {} entries", res.preload);
    println!(
        "  {} inserts           {:.3} s (reads {:.3} s, writes {:.3} s), {} node reads, {} node writes in {} write requests",
        res.ops, res.insert_s, res.insert_read_s, res.insert_write_s, res.insert_node_reads, res.insert_node_writes, res.insert_write_requests
    );
    println!(
        "  {} searches          {:.3} s, {} node reads",
        res.ops, res.search_s, res.search_node_reads
    );
    println!(
        "  write-buffer hits      {:.1}%, cache hits {:.1}%",
        res.write_buffer_hit_ratio * 100.0,
        res.cache_hit_ratio * 100.0
    );
    println!(
        "  file size              {} bytes for {} bytes of live nodes ({:.2}x), {} entries",
        res.file_bytes, res.live_node_bytes, res.space_amplification, res.entries
    );
    if res.store == "as" {
        println!(
            "  cleaning               {} segments cleaned, {} nodes moved, {} segment files removed",
            res.segments_cleaned, res.nodes_moved, res.segments_removed
        );
    }
    Ok(())
}

fn cmd_kv(a: KvArgs) -> Result<()> {
    if let Some(KvCmd::CrashTest(c)) = a.cmd {
        return run_crash_tests("kv", &c, kv::crash::crash_test);
    }
    let r = a.run;
    let backend = r.storage.resolve(
        BackendKind::Mem,
        std::env::var_os("FLASHLAB_DIR").map(PathBuf::from),
    )?;
    let spec = lab::kvrun::KvSpec {
        update: kv::ycsb::UpdateSpec {
            docs: r.docs,
            doc_bytes: usize::try_from(r.doc_size).context("--doc-size is too large")?,
            ops: r.ops,
            batch: r.batch,
            dbs: r.dbs,
            pattern: r.pattern,
            seed: r.seed,
        },
        cfg: kv::KvConfig {
            node_bytes: usize::try_from(r.node_size).context("--node-size is too large")?,
            segment_bytes: r.segment_size,
            ..kv::KvConfig::default()
        },
        backend,
    };
    let res = lab::kvrun::run(&spec).map_err(anyhow::Error::msg)?;
    if r.json {
        println!("{}", serde_json::to_string(&res)?);
        return Ok(());
    }
    println!(
        "flashlab kv: {} databases, {} documents of {} bytes, {} pattern, backend {}, seed {}",
        res.dbs, res.docs, res.doc_bytes, res.pattern, res.backend, res.seed
    );
    println!("  load                   {:.2} s", res.load_s);
    println!(
        "  {} updates, batch {}   {:.2} s, {:.0} ops/s, {} commits",
        res.ops, res.batch, res.update_s, res.ops_per_s, res.commits
    );
    println!(
        "  written                {} bytes in {} requests, {} syncs",
        res.bytes_written, res.write_requests, res.syncs
    );
    println!(
        "  files                  {} bytes; compaction cleaned {} segments, moved {} nodes, removed {} files",
        res.file_bytes, res.segments_cleaned, res.nodes_moved, res.segments_removed
    );
    Ok(())
}

fn cmd_capture(a: CaptureArgs) -> Result<()> {
    let spec = trace::capture::CaptureSpec {
        fs: a.fs,
        size_bytes: a.size,
        discard: a.discard,
        mkfs_opts: a.mkfs_opts.split_whitespace().map(String::from).collect(),
        mount_opts: a
            .mount_opts
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        command: a.command.clone(),
        work_dir: a.image_dir.clone(),
        stdout: None,
        out: Some(a.out.clone()),
        cancel: signals::cancel_token(),
    };
    let c = match trace::capture::capture(&spec) {
        Err(trace::capture::CaptureError::Interrupted) => {
            eprintln!(
                "flashlab capture: {}",
                trace::capture::CaptureError::Interrupted
            );
            std::process::exit(signals::EXIT_INTERRUPTED);
        }
        r => r?,
    };
    println!(
        "flashlab capture: {} on {} ({} MiB image{}), command ran {:.2} s",
        a.fs.name(),
        c.loop_device,
        a.size >> 20,
        if a.discard {
            ", mounted with discard"
        } else {
            ""
        },
        c.elapsed.as_secs_f64()
    );
    println!(
        "  {} requests: {} reads ({} bytes), {} writes ({} bytes), {} discards ({} bytes), {} flushes",
        c.trace.requests.len(),
        c.trace.count(flash::Op::Read),
        c.trace.bytes(flash::Op::Read),
        c.trace.count(flash::Op::Write),
        c.trace.bytes(flash::Op::Write),
        c.trace.count(flash::Op::Trim),
        c.trace.bytes(flash::Op::Trim),
        c.trace.count(flash::Op::Flush)
    );
    if c.lost_events > 0 {
        println!(
            "  warning: the kernel dropped {} events (its trace buffer overflowed)",
            c.lost_events
        );
    }
    println!("  trace written to {}", a.out.display());
    match c.exit_code {
        Some(0) => Ok(()),
        Some(code) => anyhow::bail!(
            "the command exited with status {code}; the trace of its I/O was written to {}",
            a.out.display()
        ),
        None => anyhow::bail!(
            "the command was ended by a signal; the trace of its I/O was written to {}",
            a.out.display()
        ),
    }
}

fn cmd_presets() -> Result<()> {
    for (name, _) in flash::preset::BUILTIN {
        let p = Preset::load(name)?;
        let kind = match &p.device {
            flash::DeviceConfig::Ssd(c) => format!(
                "SSD {} GB, op {:.1}%, {} dies, {} KiB pages, {} pages/block, {} GC",
                c.geometry.logical_bytes / 1_000_000_000,
                c.geometry.op * 100.0,
                c.geometry.dies(),
                c.geometry.page_size_bytes / 1024,
                c.geometry.pages_per_block,
                c.gc.policy
            ),
            flash::DeviceConfig::Hdd(c) => format!(
                "HDD {} GB, {} rpm, {:.1} ms average seek",
                c.logical_bytes / 1_000_000_000,
                c.rpm,
                c.average_seek_ns as f64 / 1e6
            ),
        };
        println!("{name:<8} {}\n         {kind}", p.description);
    }
    Ok(())
}

fn main() {
    let cli = Cli::parse();
    // Commands that hold resources outside the process (loop devices, mounts, spill and
    // store files) stop through the cancellation token and clean up; the others keep the
    // default: an interrupt ends them at once.
    let holds_resources = match &cli.command {
        Command::Capture(_) | Command::Join(_) | Command::Reproduce(_) => true,
        Command::Btree(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        Command::Kv(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        _ => false,
    };
    if holds_resources {
        signals::install();
    }
    let r = match cli.command {
        Command::Sim(a) => cmd_sim(a),
        Command::Replay(a) => cmd_replay(a),
        Command::Reproduce(a) => cmd_reproduce(a),
        Command::Simfs(a) => cmd_simfs(a),
        Command::Join(a) => cmd_join(a),
        Command::Btree(a) => cmd_btree(a),
        Command::Capture(a) => cmd_capture(a),
        Command::Kv(a) => cmd_kv(a),
        Command::Presets => cmd_presets(),
        Command::Bench(a) => bench::run(a),
        Command::Sweep(a) => sweep::run(a),
    };
    if let Err(e) = r {
        if signals::cancel_token().is_cancelled() {
            eprintln!(
                "flashlab: interrupted; what the run made was removed ({})",
                error_chain(&e)
            );
            std::process::exit(signals::EXIT_INTERRUPTED);
        }
        eprintln!("flashlab: error: {}", error_chain(&e));
        std::process::exit(1);
    }
}

/// The error and its causes, each said once: library errors often put their source's text
/// in their own message as well as returning it as the source.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}
