//! `flashlab simfs`'s driver: simfs on a simulated drive holds a data file and a
//! fragmented file; the fragmented file is deleted with a discard mode, then random 4 KiB
//! reads of the data file follow, and the delete's TRIM-family commands, interface and
//! in-drive time and the reads' latencies are measured. The `trim` experiment runs it with
//! paper 002's settings ([`DeleteScenario::paper`]).

use flash::{AnyDevice, Device, Preset, Ssd};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use simfs::{DiscardMode, FsConfig, SimFs, Timed};

/// A deletion scenario: the drive, the file system, the two files, the discard mode and
/// the reads that follow.
#[derive(Debug, Clone)]
pub struct DeleteScenario {
    pub preset: Preset,
    pub fs_bytes: u64,
    pub data_file_bytes: u64,
    pub file_bytes: u64,
    pub extents: u32,
    pub discard: DiscardMode,
    pub alloc: simfs::AllocPolicy,
    /// Override the preset's background / preemptive TRIM processing.
    pub background: Option<bool>,
    pub preemptive: Option<bool>,
    pub reads: u32,
    pub read_think_ns: u64,
    pub seed: u64,
    /// Keep every request the file system issued (for `--trace-out`).
    pub record: bool,
}

/// What a scenario measured, from the delete on.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ScenarioResult {
    pub discard: String,
    pub extents: usize,
    pub trim_commands: u64,
    pub trim_ranges: u64,
    pub trimmed_pages: u64,
    pub interface_ns: u64,
    pub in_drive_ns: u64,
    pub metadata_reads: u64,
    /// From the delete until the host's unlink and fstrim returned (the deletion
    /// acknowledged): the time the host waits before its next command.
    pub returned_ns: u64,
    /// From the delete until the last read completed; without reads, until the drive
    /// finished the deletion's work.
    pub total_ns: u64,
    pub read_latency_ns: flash::LatencySummary,
    #[serde(skip)]
    pub trace: Option<trace::Trace>,
}

pub fn run_scenario(sc: &DeleteScenario) -> Result<ScenarioResult, crate::LabError> {
    let e = |e: simfs::SimfsError| e.to_string();
    let mut preset = sc.preset.clone();
    let c = preset
        .ssd_config_mut()
        .ok_or_else(|| format!("preset {} is not an SSD", sc.preset.name))?;
    if let Some(b) = sc.background {
        c.trim.background = b;
    }
    if let Some(p) = sc.preemptive {
        c.trim.preemptive = p;
    }
    let ssd: Ssd = match preset.build()? {
        AnyDevice::Ssd(s) => *s,
        AnyDevice::Hdd(_) => return Err("simfs scenarios need an SSD preset".into()),
        AnyDevice::Zoned(_) => {
            return Err(
                "simfs scenarios need a conventional SSD (simfs has no zoned mode yet)".into(),
            )
        }
    };
    let mut cfg = FsConfig::new(sc.fs_bytes);
    cfg.discard = sc.discard;
    cfg.alloc = sc.alloc;
    let mut dev = Timed::new(ssd);
    dev.record = sc.record;
    let mut fs = SimFs::mkfs(dev, cfg).map_err(e)?;
    let data = fs.create("data").map_err(e)?;
    fs.write_at(data, 0, sc.data_file_bytes).map_err(e)?;
    let victim = fs
        .create_fragmented("fragmented", sc.file_bytes, sc.extents)
        .map_err(e)?;
    let extents = fs.extents(victim).map_err(e)?.len();
    fs.sync().map_err(e)?;
    // Start from an idle drive with fresh counters.
    let dev = fs.device_mut();
    let idle = dev.dev.settle();
    dev.advance_to(idle.max(dev.now_ns()) + 1_000_000);
    dev.dev.reset_stats();
    let t0 = dev.now_ns();
    fs.unlink("fragmented").map_err(e)?;
    fs.fstrim().map_err(e)?;
    let returned = fs.device_mut().now_ns();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sc.seed);
    let data_blocks = (sc.data_file_bytes / 4096).max(1);
    for _ in 0..sc.reads {
        fs.device_mut().think(sc.read_think_ns);
        let block = rng.random_range(0..data_blocks);
        fs.read_at(data, block * 4096, 4096).map_err(e)?;
    }
    let dev = fs.device_mut();
    let settled = dev.dev.settle();
    let end = if sc.reads == 0 { settled } else { dev.now_ns() };
    let s = dev.dev.stats();
    let trace = sc.record.then(|| trace::Trace {
        requests: dev.requests.clone(),
        timestamped: true,
    });
    Ok(ScenarioResult {
        discard: sc.discard.to_string(),
        extents,
        trim_commands: s.trim_commands,
        trim_ranges: s.trim_ranges,
        trimmed_pages: s.trimmed_pages,
        interface_ns: s.trim_interface_ns,
        in_drive_ns: s.trim_busy_ns,
        metadata_reads: s.ftrim_metadata_reads,
        returned_ns: returned - t0,
        total_ns: end - t0,
        read_latency_ns: s.read_latency_ns,
        trace,
    })
}
