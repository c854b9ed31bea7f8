//! `flashlab kv`: the append-only key-value store, and its crash test.

use super::*;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct KvArgs {
    #[command(subcommand)]
    pub(crate) cmd: Option<KvCmd>,
    #[command(flatten)]
    pub(crate) run: KvRunArgs,
}

#[derive(Subcommand)]
pub(crate) enum KvCmd {
    /// Crash a database at random points and check recovery against a reference map.
    CrashTest(CrashTestArgs),
}

#[derive(clap::Args)]
pub(crate) struct KvRunArgs {
    /// Documents over all databases.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) docs: u64,
    #[arg(long, default_value = "1KiB", value_parser = units::parse_size)]
    pub(crate) doc_size: u64,
    /// Updates over all databases.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) ops: u64,
    /// Updates per commit (write batch size).
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: u64,
    /// Databases, one writer thread each.
    #[arg(long, default_value_t = 4)]
    pub(crate) dbs: usize,
    /// Key choice: uniform or zipf:THETA.
    #[arg(long, default_value = "uniform")]
    pub(crate) pattern: workloads::synthetic::Pattern,
    /// (For kv, --dir defaults to FLASHLAB_DIR, as `flashlab capture` sets it.)
    #[command(flatten)]
    pub(crate) storage: BackendArgs,
    #[command(flatten)]
    pub(crate) timeline: super::timeline::TimelineArgs,
    /// Index node size.
    #[arg(long, default_value = "4KiB", value_parser = units::parse_size)]
    pub(crate) node_size: u64,
    /// Log segment file size.
    #[arg(long, default_value = "4MiB", value_parser = units::parse_size)]
    pub(crate) segment_size: u64,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(a: KvArgs) -> Result<()> {
    if let Some(KvCmd::CrashTest(c)) = a.cmd {
        return run_crash_tests("kv", &c, ::kv::crash::crash_test);
    }
    let r = a.run;
    // Checked before any document is made (a 1 GiB document took 5 s and 1 GB first).
    let key_bytes = ::kv::ycsb::key(0).len();
    if !astree::tree::entry_fits(
        usize::try_from(r.node_size).unwrap_or(usize::MAX),
        key_bytes,
        usize::try_from(r.doc_size).unwrap_or(usize::MAX),
    ) {
        bail!(
            "--doc-size {}: a document and its {key_bytes}-byte key must fit half a {} node with its neighbours; give a smaller --doc-size or a larger --node-size",
            flash::bytes::binary(r.doc_size),
            flash::bytes::binary(r.node_size)
        );
    }
    let backend = r.storage.resolve(
        BackendKind::Mem,
        std::env::var_os("FLASHLAB_DIR").map(PathBuf::from),
    )?;
    let spec = lab::kvrun::KvSpec {
        update: ::kv::ycsb::UpdateSpec {
            docs: r.docs,
            doc_bytes: usize::try_from(r.doc_size).context("--doc-size is too large")?,
            ops: r.ops,
            batch: r.batch,
            dbs: r.dbs,
            pattern: r.pattern,
            seed: r.seed,
        },
        cfg: ::kv::KvConfig {
            node_bytes: usize::try_from(r.node_size).context("--node-size is too large")?,
            segment_bytes: r.segment_size,
            ..::kv::KvConfig::default()
        },
        backend,
    };
    let (res, recorded) =
        super::timeline::run_engine(&r.timeline, "kv", spec.backend.virtual_time(), |timeline| {
            lab::kvrun::run_recorded(&spec, timeline)
        })?;
    if r.json {
        let mut v = serde_json::to_value(&res)?;
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
        "flashlab kv: {} database{}, {} documents of {} bytes, {} pattern, backend {}, seed {}",
        res.dbs,
        if res.dbs == 1 { "" } else { "s" },
        res.docs,
        res.doc_bytes,
        res.pattern,
        res.backend,
        res.seed
    );
    // Times on a simulated drive are virtual; on real files and in RAM, wall time.
    let clock = if res.backend.starts_with("sim") {
        "simulated"
    } else {
        "wall"
    };
    println!("  load                   {:.2} s {clock}", res.load_s);
    println!(
        "  {} updates, batch {}   {:.2} s {clock}, {:.0} ops/s, {} commits",
        res.ops, res.batch, res.update_s, res.ops_per_s, res.commits
    );
    println!(
        "  written                {} bytes in {} requests, {} syncs",
        res.bytes_written, res.write_requests, res.syncs
    );
    if res.bytes_zero_filled > 0 {
        println!(
            "  zeros ahead of the log {} bytes (so small commits overwrite written blocks)",
            res.bytes_zero_filled
        );
    }
    println!(
        "  files                  {} bytes; compaction cleaned {} segments, moved {} nodes, removed {} files",
        res.file_bytes, res.segments_cleaned, res.nodes_moved, res.segments_removed
    );
    if r.storage.wear {
        super::wear::print_engine_wear(&spec.backend, res.wear.as_ref());
    }
    for line in &recorded {
        println!("  recorded               {line}");
    }
    Ok(())
}
