//! `flashlab btree`: B+trees on the AS or in-place store, and their crash test.

use super::*;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct BtreeArgs {
    #[command(subcommand)]
    pub(crate) cmd: Option<BtreeCmd>,
    #[command(flatten)]
    pub(crate) run: BtreeRunArgs,
}

#[derive(Subcommand)]
pub(crate) enum BtreeCmd {
    /// Crash the AS store at random points and check recovery against a reference map.
    CrashTest(CrashTestArgs),
}

#[derive(clap::Args)]
pub(crate) struct BtreeRunArgs {
    /// as (always sequential), inplace or bftl.
    #[arg(long, default_value = "as")]
    pub(crate) store: lab::btreerun::StoreKind,
    /// Keys per node at most.
    #[arg(long, default_value_t = 64)]
    pub(crate) fanout: usize,
    #[arg(long, default_value = "8KiB", value_parser = units::parse_size)]
    pub(crate) node_size: u64,
    /// AS store: nodes in the write buffer (BFTL: its reservation buffer holds as many bytes).
    #[arg(long, default_value_t = 1)]
    pub(crate) write_buffer: usize,
    /// BFTL: sectors on a node's list before it is compacted (C).
    #[arg(long, default_value_t = 3)]
    pub(crate) bftl_list: usize,
    /// BFTL: the reservation buffer is also written out when it holds this many index
    /// units (paper 004 keeps it at the fanout F); without it, only its bytes count.
    #[arg(long, value_name = "IUS")]
    pub(crate) bftl_reservation: Option<usize>,
    /// LRU cache of this many nodes (0 = none).
    #[arg(long, default_value_t = 0)]
    pub(crate) cache: usize,
    /// Entries inserted before measuring.
    #[arg(long, default_value_t = 400_000)]
    pub(crate) preload: u64,
    /// Inserts, then searches, measured.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) ops: u64,
    #[command(flatten)]
    pub(crate) storage: BackendArgs,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// AS store: size of each log segment file.
    #[arg(long, default_value = "128MiB", value_parser = units::parse_size)]
    pub(crate) segment_size: u64,
    /// AS store: cleaning policy (off, oldest = the paper's sliding window, cost-benefit).
    #[arg(long, default_value = "cost-benefit")]
    pub(crate) cleaning: astree::asstore::Cleaning,
    /// AS store: cleaning keeps file bytes at most this many times the live node bytes.
    #[arg(long, default_value_t = astree::asstore::DEFAULT_MAX_SPACE_AMP)]
    pub(crate) max_space_amp: f64,
    /// Commit (sync) every N inserts; 0 = only after the preload and the timed inserts.
    /// The AS store cleans at commits.
    #[arg(long, default_value_t = 0)]
    pub(crate) commit_every: u64,
    /// AS store: commit by logging the operations; dirty nodes are written when the write
    /// buffer fills (recovery replays the operations).
    #[arg(long)]
    pub(crate) logical_commits: bool,
    /// AS store: packed records in units of this many bytes (64 to 4096, a power of two):
    /// a node takes the log bytes it holds instead of a whole node slot (off by default:
    /// the paper's fixed slots).
    #[arg(long, value_name = "BYTES")]
    pub(crate) packed_unit: Option<usize>,
    /// AS store with --logical-commits: committed changes wait in memory, up to this many
    /// bytes, and are made to the nodes in key order later (their logged operations make
    /// them durable; see docs/safety.md). Off by default.
    #[arg(long, value_name = "BYTES", value_parser = units::parse_size)]
    pub(crate) defer: Option<u64>,
    #[arg(long)]
    pub(crate) json: bool,
}

/// Refuses flags of one store given with another (they would do nothing).
fn check_store_flags(store: lab::btreerun::StoreKind) -> Result<()> {
    use lab::btreerun::StoreKind;
    let name = match store {
        StoreKind::As => "as",
        StoreKind::InPlace => "inplace",
        StoreKind::Bftl => "bftl",
    };
    let only = |ids: &[&str], of: &str, given_store: bool| -> Result<()> {
        match given::first_given(ids) {
            Some(f) if !given_store => {
                bail!("{f} applies to {of}; with --store {name} it would do nothing")
            }
            _ => Ok(()),
        }
    };
    only(
        &[
            "segment_size",
            "cleaning",
            "max_space_amp",
            "logical_commits",
            "packed_unit",
            "defer",
        ],
        "the AS store (--store as)",
        store == StoreKind::As,
    )?;
    only(
        &["bftl_list", "bftl_reservation"],
        "BFTL (--store bftl)",
        store == StoreKind::Bftl,
    )?;
    only(
        &["write_buffer"],
        "the AS store's and BFTL's write buffers",
        store != StoreKind::InPlace,
    )
}

pub(crate) fn run(a: BtreeArgs) -> Result<()> {
    if let Some(BtreeCmd::CrashTest(c)) = a.cmd {
        return run_crash_tests("btree", &c, |seed| {
            astree::crash::crash_test(seed, &astree::crash::CrashShape::varied(seed))
        });
    }
    let r = a.run;
    check_store_flags(r.store)?;
    if r.bftl_reservation == Some(0) {
        bail!(
            "--bftl-reservation must be at least 1: the reservation buffer's room in index units"
        );
    }
    if r.defer.is_some() && !(r.logical_commits && r.store == lab::btreerun::StoreKind::As) {
        bail!(
            "--defer needs the AS store with --logical-commits: deferred changes are made \
             durable by the store's operation log"
        );
    }
    let backend = r.storage.resolve(BackendKind::Mem, None)?;
    let spec = lab::btreerun::BtreeSpec {
        fanout: r.fanout,
        node_bytes: usize::try_from(r.node_size).context("--node-size is too large")?,
        write_buffer_nodes: r.write_buffer,
        cache_nodes: r.cache,
        bftl_max_list: r.bftl_list,
        bftl_reservation_ius: r.bftl_reservation,
        preload: r.preload,
        ops: r.ops,
        seed: r.seed,
        segment_bytes: r.segment_size,
        cleaning: r.cleaning,
        max_space_amp: r.max_space_amp,
        commit_every: r.commit_every,
        logical_commits: r.logical_commits,
        packed_unit_bytes: r.packed_unit,
        deferred_bytes: match r.defer {
            Some(b) => usize::try_from(b).context("--defer is too large")?,
            None => 0,
        },
        ..lab::btreerun::BtreeSpec::new(r.store, backend)
    };
    let started = Instant::now();
    let (res, recorded) = super::timeline::run_engine(
        &r.timeline,
        "btree",
        spec.backend.virtual_time(),
        |timeline| lab::btreerun::run_recorded(&spec, timeline),
    )?;
    if r.json {
        let mut v = serde_json::to_value(&res)?;
        v["wall_s"] = serde_json::json!(started.elapsed().as_secs_f64());
        if r.store == lab::btreerun::StoreKind::Bftl {
            v["bftl_list"] = serde_json::json!(r.bftl_list);
            v["bftl_reservation_ius"] = serde_json::json!(r.bftl_reservation);
        }
        if r.storage.wear {
            super::wear::add_wear_json(&mut v, res.wear.as_ref())?;
        }
        if !recorded.is_empty() {
            v["recorded"] = serde_json::json!(recorded);
        }
        super::emit::json(&v)?;
        return Ok(());
    }
    println!(
        "flashlab btree: {} store, fanout {}, {} byte nodes, write buffer {}, cache {}, backend {}, seed {}",
        res.store, res.fanout, res.node_bytes, res.write_buffer_nodes, res.cache_nodes, res.backend, res.seed
    );
    if r.store == lab::btreerun::StoreKind::Bftl {
        println!(
            "  BFTL                   list limit C = {}, reservation buffer {}",
            r.bftl_list,
            match r.bftl_reservation {
                Some(n) => format!("{n} index units (or its bytes, whichever fills first)"),
                None => "counted in bytes only".into(),
            }
        );
    }
    // Times on a simulated drive are virtual; on real files and in RAM, wall time.
    let clock = if spec.backend.virtual_time() {
        "simulated"
    } else {
        "wall"
    };
    println!("  preload                {} entries", res.preload);
    println!(
        "  {} inserts           {:.3} s {clock} (reads {:.3} s, writes {:.3} s), {} node reads, {} node writes in {} write requests",
        res.ops, res.insert_s, res.insert_read_s, res.insert_write_s, res.insert_node_reads, res.insert_node_writes, res.insert_write_requests
    );
    println!(
        "  {} searches          {:.3} s {clock}, {} node reads in {} read requests",
        res.ops, res.search_s, res.search_node_reads, res.search_read_requests
    );
    println!(
        "  write-buffer hits      reads {:.1}%, writes {:.1}%; cache hits {:.1}%",
        res.write_buffer_read_hit_ratio * 100.0,
        res.write_buffer_write_hit_ratio * 100.0,
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
    if r.storage.wear {
        super::wear::print_engine_wear(&spec.backend, res.wear.as_ref());
    }
    for line in &recorded {
        println!("  recorded               {line}");
    }
    Ok(())
}
