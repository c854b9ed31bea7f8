//! `flashlab simfs`: deleting a fragmented file on a simulated drive.

use super::*;

#[derive(clap::Args)]
pub(crate) struct SimfsArgs {
    #[command(flatten)]
    pub(crate) device: DeviceArgs,
    /// Size of the file system (at the start of the drive).
    #[arg(long, default_value = "16GiB", value_parser = units::parse_size)]
    pub(crate) fs_size: u64,
    /// Size of the file to delete.
    #[arg(long, default_value = "10MiB", value_parser = units::parse_size)]
    pub(crate) file_size: u64,
    /// Extents of the file to delete (separated by free blocks).
    #[arg(long, default_value_t = 160)]
    pub(crate) extents: u32,
    /// none, online (one TRIM per extent), vtrim, ftrim or deferred (fstrim after the delete).
    #[arg(long, default_value = "online")]
    pub(crate) discard: ::simfs::DiscardMode,
    /// ext4-like or log-structured allocation.
    #[arg(long, default_value = "ext4-like")]
    pub(crate) alloc: ::simfs::AllocPolicy,
    /// Random 4 KiB reads of a 64 MiB data file after the delete.
    #[arg(long, default_value_t = 0)]
    pub(crate) reads: u32,
    /// Host time between two reads.
    #[arg(long, default_value = "20us", value_parser = units::parse_duration_ns)]
    pub(crate) read_think: u64,
    /// Write every request the file system issued to this file (native format, open loop).
    #[arg(long)]
    pub(crate) trace_out: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) fn run(a: SimfsArgs) -> Result<()> {
    let sc = lab::deleterun::DeleteScenario {
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
    let r = lab::deleterun::run_scenario(&sc)?;
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
        super::emit::json(&v)?;
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
