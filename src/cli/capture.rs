//! `flashlab capture`: a real file system's block I/O while a command runs.

use super::*;

#[derive(clap::Args)]
pub(crate) struct CaptureArgs {
    /// ext4, xfs or btrfs.
    #[arg(long)]
    pub(crate) fs: trace::capture::FsKind,
    /// Size of the (sparse) image.
    #[arg(long, default_value = "1GiB", value_parser = units::parse_size)]
    pub(crate) size: u64,
    /// Mount with -o discard (online TRIM).
    #[arg(long)]
    pub(crate) discard: bool,
    /// Extra mkfs options, as one string: "-b 4096" (ext4), "-b size=4096" (xfs),
    /// "--nodesize 16384" (btrfs). Only options that cannot name a file or device pass
    /// (an allow-list per mkfs; docs/commands/capture.md lists what is refused).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub(crate) mkfs_opts: String,
    /// Extra mount options, comma-separated (e.g. "noatime").
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub(crate) mount_opts: String,
    /// Where the trace goes (flashlab's native format; replay it with `flashlab replay`).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Where the image and mount point are made (a fresh directory inside, removed after).
    #[arg(long, default_value = "/tmp")]
    pub(crate) image_dir: PathBuf,
    /// Run the command this many times in a row on the same file system, each run
    /// followed by a sync and the file system settling (its background discards and
    /// writeback done, at most a minute).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) runs: u32,
    /// Run the command on this CPU only (ext4 lays small files out by per-CPU
    /// preallocation, so a pinned command lays them out the same way every time).
    #[arg(long)]
    pub(crate) cpu: Option<usize>,
    /// Also trace the scheduler's wake-ups and switches, so that a think time is the time
    /// the issuing task spent on a CPU (waits for a CPU and sleeps left out; what it slept
    /// for is another task's request, kept as a dependency): think times that do not
    /// depend on how busy the machine was. Every context switch of the machine is traced
    /// (paper 003's fsync-heavy workload at 256 documents per commit ran ~5% slower for it
    /// here).
    #[arg(long)]
    pub(crate) think_on_cpu: bool,
    /// Run the command at real-time priority (SCHED_FIFO 10), so that other work on the
    /// machine cannot take its CPU and its think times stay what they are on a quiet
    /// machine; the host's settings are untouched.
    #[arg(long)]
    pub(crate) realtime: bool,
    /// Write back to the loop device as a host with this much memory would: its dirty
    /// page cache limited to 20% of it (Linux's default `dirty_ratio`), background
    /// writeback from half of that (the device's bdi `strict_limit` with `min_bytes` =
    /// `max_bytes`; Linux 6.2+), put back afterwards. The limits `join --host-ram`
    /// simulates. Default: the machine's own.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) host_ram: Option<u64>,
    /// The command, after `--`; `{}` in an argument becomes the mounted directory, which
    /// is also in FLASHLAB_DIR.
    #[arg(last = true, required = true)]
    pub(crate) command: Vec<String>,
}

pub(crate) fn run(a: CaptureArgs) -> Result<()> {
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
        cancel: crate::signals::cancel_token(),
        runs: a.runs,
        cpu: a.cpu,
        think_on_cpu: a.think_on_cpu,
        realtime: a.realtime,
        dirty_limit_bytes: a.host_ram.map(trace::dirty_limit::host_dirty_bytes),
        others_traverse: false,
    };
    let c = match trace::capture::capture(&spec) {
        Err(trace::capture::CaptureError::Interrupted) => {
            eprintln!(
                "flashlab capture: {}",
                trace::capture::CaptureError::Interrupted
            );
            std::process::exit(crate::signals::EXIT_INTERRUPTED);
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
    if let Some(n) = c.journal_commits {
        println!("  {n} journal commits (jbd2)");
    }
    if let Some(freed) = &c.freed_extent_at_ns {
        println!(
            "  {} extents freed (ext4, a block group's piece each)",
            freed.len()
        );
    }
    if a.runs > 1 {
        // Where each run ends in the trace's time (its requests come before).
        for (i, end) in c.run_ends_ns.iter().enumerate() {
            println!("  run {} ended at {:.6} s", i + 1, *end as f64 / 1e9);
        }
    }
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
