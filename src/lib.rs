//! flashlab as a library: the command line's commands (`cli`), and [`api`], which runs
//! one of them from its arguments and hands back what `--json` would print and the
//! recordings (the Python package is built on it). The `flashlab` binary is [`run_cli`].

pub mod api;
mod calibrate;
mod cli;
mod outfile;
mod scratch;
mod signals;
mod units;

use clap::{Parser, Subcommand};
use cli::*;

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
    Sim(sim::SimArgs),
    /// Replay a block trace on a simulated drive.
    Replay(replay::ReplayArgs),
    /// Run a fio job file's I/O on a simulated drive; report as fio does (text or JSON).
    Fio(fio::FioArgs),
    /// Run the papers' experiments and write the HTML report.
    Reproduce(reproduce::ReproduceArgs),
    /// simfs on a simulated drive: delete a fragmented file with a discard mode, then read.
    Simfs(simfs::SimfsArgs),
    /// Out-of-core hash join of TPC-H ORDERS and LINEITEM on real files or a simulated drive.
    Join(join::JoinArgs),
    /// B+tree on the AS or in-place store: timed inserts and searches; `btree crash-test`.
    Btree(btree::BtreeArgs),
    /// Record a real file system's block I/O while a command runs (root; loop device).
    Capture(capture::CaptureArgs),
    /// The ForestDB-like key-value store under paper 003's update workload; `kv crash-test`.
    Kv(kv::KvArgs),
    /// List the device presets.
    Presets(presets::PresetsArgs),
    /// Measure the simulator's own speed and memory.
    Bench(bench::BenchArgs),
    /// `sim` over a grid: any sim flag with comma-separated values, points on all cores;
    /// `--shard K/N` runs one shard of it, `sweep merge DIR... --out DIR` combines shards.
    #[command(
        after_help = "Shards: `flashlab sweep --shard K/N --out DIR -- FLAGS` runs the points whose position in the grid is K modulo N; `flashlab sweep merge DIR... --out DIR` combines the shards' directories into the files the whole grid writes (`flashlab sweep merge --help`)."
    )]
    Sweep(sweep::SweepArgs),
    /// Probe a drive (a new file, a block device, or a simulated drive) and write a preset
    /// fitted to it, every value saying which probe set it.
    Calibrate(cli::calibrate::CalibrateArgs),
    /// Run a held-out set of fio jobs on a target (a new file, or a simulated drive) and on
    /// a preset, side by side: IOPS, mean, p50 and p99 latency, the model's error.
    Validate(cli::validate::ValidateArgs),
}

/// The `flashlab` command line: parses the process's arguments, runs the command and
/// exits with its status.
pub fn run_cli() {
    // Output into a closed pipe (`flashlab ... | head`) ends the process quietly, as it
    // does for other Unix tools, instead of a panic (Rust ignores SIGPIPE by default).
    // SAFETY: restoring a signal's default disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    cli::given::remember(&matches);
    // Commands that hold resources outside the process (loop devices, mounts, spill and
    // store files) stop through the cancellation token and clean up; the others keep the
    // default: an interrupt ends them at once.
    let holds_resources = match &cli.command {
        Command::Capture(_)
        | Command::Join(_)
        | Command::Reproduce(_)
        | Command::Bench(_)
        | Command::Sweep(_)
        | Command::Fio(_)
        | Command::Validate(_) => true,
        Command::Calibrate(a) => a.sim_preset.is_none(),
        Command::Btree(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        Command::Kv(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        _ => false,
    };
    if holds_resources {
        signals::install();
    }
    // The handler's token is this thread's too: long loops that take no token (a
    // simulation's, a simulated join's) check it with `trace::cancel::requested`.
    let r = if holds_resources {
        trace::cancel::with_token(&signals::cancel_token(), || run_command(cli.command))
    } else {
        run_command(cli.command)
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

/// Runs one command (the command line's, or a library call's: [`api::run`]).
fn run_command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Sim(a) => sim::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Fio(a) => fio::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Simfs(a) => simfs::run(a),
        Command::Join(a) => join::run(a),
        Command::Btree(a) => btree::run(a),
        Command::Capture(a) => capture::run(a),
        Command::Kv(a) => kv::run(a),
        Command::Presets(a) => presets::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Calibrate(a) => cli::calibrate::run(a),
        Command::Validate(a) => cli::validate::run(a),
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
