//! The `flashlab` command line: simulate drives, replay traces, reproduce the papers.

mod cli;
mod signals;
mod units;

use clap::{Parser, Subcommand};
use cli::*;

/// mimalloc keeps freed memory for reuse: the simulated files' bytes and the joins'
/// buffers come and go by the gigabyte, and glibc's allocator handed them back to the
/// kernel and faulted them in again (half of a gracejoin run's time was page faults).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    Presets,
    /// Measure the simulator's own speed and memory.
    Bench(bench::BenchArgs),
    /// `sim` over a grid: any sim flag with comma-separated values, points on all cores.
    Sweep(sweep::SweepArgs),
}

fn main() {
    // Output into a closed pipe (`flashlab ... | head`) ends the process quietly, as it
    // does for other Unix tools, instead of a panic (Rust ignores SIGPIPE by default).
    // SAFETY: restoring a signal's default disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    // Commands that hold resources outside the process (loop devices, mounts, spill and
    // store files) stop through the cancellation token and clean up; the others keep the
    // default: an interrupt ends them at once.
    let holds_resources = match &cli.command {
        Command::Capture(_)
        | Command::Join(_)
        | Command::Reproduce(_)
        | Command::Bench(_)
        | Command::Sweep(_) => true,
        Command::Btree(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        Command::Kv(a) => a.cmd.is_none() && a.run.storage.backend == Some(BackendKind::Os),
        _ => false,
    };
    if holds_resources {
        signals::install();
    }
    let r = match cli.command {
        Command::Sim(a) => sim::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Simfs(a) => simfs::run(a),
        Command::Join(a) => join::run(a),
        Command::Btree(a) => btree::run(a),
        Command::Capture(a) => capture::run(a),
        Command::Kv(a) => kv::run(a),
        Command::Presets => presets::run(),
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
