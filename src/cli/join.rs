//! `flashlab join`: the out-of-core hash join.

use super::*;

#[derive(clap::Args)]
pub(crate) struct JoinArgs {
    /// TPC-H scale factor (1 = 1.5 M orders, 6 M lineitems).
    #[arg(long)]
    pub(crate) sf: f64,
    /// columns: the join's two columns (16-byte records); fixed128: paper 001's 128-byte records.
    #[arg(long, default_value = "columns")]
    pub(crate) layout: workloads::tpch::Layout,
    /// Memory budget for everything the join holds (tables and buffers), shared by all users.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) memory: u64,
    #[arg(long, default_value = "grace")]
    pub(crate) algorithm: hashjoin::Algorithm,
    /// Size of every read of an input or spill file.
    #[arg(long, default_value = "1MiB", value_parser = units::parse_size)]
    pub(crate) read_buffer: u64,
    /// Output buffer per partition (size of every spill write).
    #[arg(long, default_value = "64KiB", value_parser = units::parse_size)]
    pub(crate) write_buffer: u64,
    /// Force the number of partitions (default: planned from the memory budget).
    #[arg(long)]
    pub(crate) partitions: Option<u32>,
    /// Concurrent joins sharing the memory budget (os backend).
    #[arg(long, default_value_t = 1)]
    pub(crate) users: u32,
    /// Threads per join: partitions read and written, and partition pairs joined, in
    /// parallel within the one budget. Default: the machine's cores on os; 1 on sim, so a
    /// simulated run's numbers do not depend on the machine it runs on.
    #[arg(long)]
    pub(crate) threads: Option<u32>,
    /// sim: the host's CPU cores, shared by every user's threads (their computation,
    /// --cpu-per-row per row, waits for a free core). Default: a core for every thread.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) cores: Option<u32>,
    /// sim: how the host's block layer orders the users' requests: fifo (as issued; what
    /// none and mq-deadline do with one request per user in flight) or cfq (Linux
    /// 2.6–4.x's default: a time slice per thread, idling for its next request; for hard
    /// disks: CFQ never idles on an SSD with command queueing).
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "cfq"])]
    pub(crate) io_scheduler: String,
    #[command(flatten)]
    pub(crate) storage: BackendArgs,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
    /// os: where the input tables are generated and kept (default: --dir).
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// os: most bytes the run's spill files may hold.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) spill_cap: Option<u64>,
    /// sim: simfs allocation policy.
    #[arg(long, default_value = "ext4-like")]
    pub(crate) alloc: ::simfs::AllocPolicy,
    /// sim: discard mode of spill-file deletes (none, online, journal, vtrim, ftrim,
    /// deferred).
    #[arg(long, default_value = "none")]
    pub(crate) discard: ::simfs::DiscardMode,
    /// sim, with --discard journal or --prealloc: which Linux kernel's ext4 to follow.
    /// Its online discard: 3.10 (each freed run discarded exactly at the commit, as paper
    /// 000's kernel), 5.15 (a background worker discards after the commit; blocks reused
    /// first are not discarded), 6.8 (each discard runs to the end of its free run), 6.17
    /// (adjacent freed extents do not always merge). Its allocator's windows: 6.17 keeps a
    /// stream goal per CPU and puts a window in the group whose largest free buddy fits it
    /// best. A kernel between two behaves as the earlier.
    #[arg(long, default_value = "3.10")]
    pub(crate) kernel: ::simfs::DiscardKernel,
    /// sim, with --prealloc: the drive reports itself rotational to ext4, whose allocator
    /// then tries the four groups from its goal in order before choosing one by its free
    /// buddies (a loop device on this machine's disk does; an SSD does not).
    #[arg(long)]
    pub(crate) rotational: bool,
    /// sim: keep the input tables on the simulated drive (reads are timed).
    #[arg(long)]
    pub(crate) inputs_on_device: bool,
    /// sim: generate the input tables' rows as the join reads them instead of holding
    /// them in memory (the same bytes and the same results; for tables larger than
    /// memory, e.g. --sf 30).
    #[arg(long, conflicts_with = "inputs_on_device")]
    pub(crate) stream_inputs: bool,
    /// sim: simfs preallocates for appending files as ext4's mballoc does (small files
    /// share one window, larger ones get growing windows of their own); without it every
    /// write allocates on its own.
    #[arg(long)]
    pub(crate) prealloc: bool,
    /// sim: the path between the join and simfs: linux (page cache, dirty limits and
    /// writeback, delayed allocation, readahead, 5-s journal commits, a 32-deep queue),
    /// direct-io (O_DIRECT: no cache, journal commits), none (every call reaches the
    /// drive when it is made, metadata only at syncs).
    #[arg(long, value_enum, default_value = "linux")]
    pub(crate) host: HostPath,
    /// sim, --host linux: the host's memory (the page cache and its dirty limits).
    #[arg(long, default_value = "1GiB", value_parser = units::parse_size)]
    pub(crate) host_ram: u64,
    /// sim: computation charged per row processed.
    #[arg(long, default_value = "100ns", value_parser = units::parse_duration_ns)]
    pub(crate) cpu_per_row: u64,
    /// Preallocate spill files at their expected size.
    #[arg(long, value_enum, default_value = "off")]
    pub(crate) fallocate: OnOff,
    /// Repetitions (on sim, the drive's state carries over).
    #[arg(long, default_value_t = 1)]
    pub(crate) repeat: u32,
    #[arg(long)]
    pub(crate) json: bool,
}

/// The host path of `join --backend sim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HostPath {
    Linux,
    DirectIo,
    None,
}

/// Flags of the simulated host (`--backend sim`).
const SIM_ONLY: &[&str] = &[
    "timeseries",
    "request_log",
    "timeseries_plot",
    "histograms",
    "cores",
    "io_scheduler",
    "alloc",
    "discard",
    "kernel",
    "rotational",
    "inputs_on_device",
    "stream_inputs",
    "prealloc",
    "host",
    "host_ram",
    "cpu_per_row",
];

/// Flags of real files (`--backend os`).
const OS_ONLY: &[&str] = &["data_dir", "spill_cap"];

/// Refuses flags that would do nothing with the backend and algorithm given.
fn check_flags(a: &JoinArgs, kind: BackendKind) -> Result<()> {
    if kind != BackendKind::Sim {
        if let Some(f) = given::first_given(SIM_ONLY) {
            bail!(
                "{f} applies to the simulated host (--backend sim); with --backend {} it would do nothing",
                kind.name()
            );
        }
    }
    let library = super::emit::wanted();
    if kind != BackendKind::Sim && (library.series || library.requests) {
        bail!(
            "a recording over virtual time (series, requests) is of a simulated drive: it needs --backend sim, not {}",
            kind.name()
        );
    }
    if kind != BackendKind::Os {
        if let Some(f) = given::first_given(OS_ONLY) {
            bail!(
                "{f} applies to real files (--backend os); with --backend {} it would do nothing",
                kind.name()
            );
        }
    }
    if a.algorithm == hashjoin::Algorithm::Postgres && a.partitions.is_some() {
        bail!(
            "--partitions does nothing with --algorithm postgres: PostgreSQL plans its batches from work_mem (--memory) itself"
        );
    }
    if given::given("kernel") && a.discard != ::simfs::DiscardMode::Journal && !a.prealloc {
        bail!("--kernel chooses how ext4's journal discards and preallocation windows work: it needs --discard journal or --prealloc");
    }
    if a.rotational && !a.prealloc {
        bail!("--rotational changes where ext4's preallocation windows go: it needs --prealloc");
    }
    if given::given("host_ram") && a.host != HostPath::Linux {
        bail!(
            "--host-ram sizes the page cache of --host linux; with --host {:?} there is none",
            a.host
        );
    }
    Ok(())
}

pub(crate) fn run(a: JoinArgs) -> Result<()> {
    let started = Instant::now();
    check_flags(&a, a.storage.backend.unwrap_or(BackendKind::Os))?;
    let storage = a.storage.resolve(BackendKind::Os, None)?;
    let backend = storage.clone();
    let simulated = storage.virtual_time();
    let join_storage = lab::joinrun::JoinStorage {
        data_dir: a.data_dir.clone(),
        spill_cap_bytes: a.spill_cap,
        fs_bytes: None,
        alloc: a.alloc,
        discard: a.discard,
        kernel: a.kernel,
        rotational: a.rotational,
        commit_each_repetition: true,
        prealloc: a.prealloc,
        inputs_on_device: a.inputs_on_device,
        stream_inputs: a.stream_inputs,
        host: match a.host {
            HostPath::Linux => vfs::HostConfig::linux(a.host_ram),
            HostPath::DirectIo => vfs::HostConfig::direct_io(),
            HostPath::None => vfs::HostConfig::uncached(),
        },
        replay_repetitions: true,
        host_write_target_bytes: None,
        precondition: lab::precondition::Precondition::None,
        precondition_seed: 0,
        timeline: None,
    };
    let spec = lab::joinrun::JoinRunSpec {
        sf: a.sf,
        layout: a.layout,
        memory_bytes: a.memory,
        join: hashjoin::JoinSpec {
            algorithm: a.algorithm,
            read_buffer_bytes: a.read_buffer,
            write_buffer_bytes: a.write_buffer,
            fallocate: a.fallocate.on(),
            partitions: a.partitions,
            cpu_ns_per_row: if simulated { a.cpu_per_row } else { 0 },
            concurrent_users: a.users,
        },
        users: a.users,
        threads: a.threads.unwrap_or(if simulated {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
        }),
        host_cores: a.cores,
        io_scheduler: if a.io_scheduler == "cfq" {
            vfs::IoScheduler::CFQ
        } else {
            vfs::IoScheduler::Fifo
        },
        repeat: a.repeat,
        backend: storage,
        storage: join_storage,
    };
    // Real files: said if the user insists on exiting before the join removes them.
    let _held = match &backend {
        lab::backend::Backend::Os { dir, .. } => Some(trace::leftovers::hold(format!(
            "the join's spill files and a private directory in {} (the next join there removes them)",
            dir.display()
        ))),
        _ => None,
    };
    let outputs = super::timeline::TimelineOutputs::open(&a.timeline, &["join".to_string()])?;
    let mut spec = spec;
    spec.storage.timeline = outputs.engine_spec();
    let pb = progress_bar(a.repeat as u64, "join");
    pb.set_phase("repetitions");
    let r = lab::joinrun::run(&spec, &mut |n| pb.set_position(n as u64));
    pb.finish_and_clear();
    let mut r = r?;
    let recorded = match r.timeseries.take() {
        Some(ts) => outputs.finish_engine("join", ts)?,
        None => Vec::new(),
    };
    let wall_s = started.elapsed().as_secs_f64();
    if a.json {
        let mut v = serde_json::to_value(&r)?;
        v["wall_s"] = serde_json::json!(wall_s);
        if a.storage.wear {
            super::wear::add_wear_json(&mut v, r.wear.as_ref())?;
        }
        if !recorded.is_empty() {
            v["recorded"] = serde_json::json!(recorded);
        }
        super::emit::json(&v)?;
        return Ok(());
    }
    let time_kind = if simulated { "simulated" } else { "wall" };
    println!(
        "flashlab join: SF {} ({}), {} join, memory {} bytes, {} user(s) x {} thread(s), backend {}",
        r.sf, r.layout, r.algorithm, r.memory_bytes, r.users, r.threads, r.backend
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
    if r.initial_batches > 0 {
        // PostgreSQL's join: batches, not partitions.
        println!(
            "  batches                  {} (planned {}, doubled {} times at run time; batch 0 in memory)",
            r.partitions, r.initial_batches, r.nbatch_doublings
        );
    } else {
        println!(
            "  partitions               {} ({} in memory), {} repartitioned pairs, {} nested-loop pairs",
            r.partitions, r.resident_partitions, r.repartitioned_pairs, r.nested_loop_pairs
        );
    }
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
    if a.storage.wear {
        super::wear::print_engine_wear(&backend, r.wear.as_ref());
    }
    for line in &recorded {
        println!("  recorded                 {line}");
    }
    println!("  wall time                {wall_s:.2} s");
    Ok(())
}
