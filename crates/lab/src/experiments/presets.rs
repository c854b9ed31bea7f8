//! Experiment `presets`: every preset that names a product, run through the measurements its
//! drive is published with — the datasheet (sequential MB/s, 4 KiB random IOPS at queue
//! depth 1 and 32, latency) and reviews (a whole-drive fill, the write rate after the SLC
//! cache, a used drive's sequential writes, a disk's random access time).
//!
//! Each published number is either **calibrated** (a preset parameter was set from it, as
//! the preset's TOML says: shown, holding by construction) or **held out** (predicted,
//! judged within ±15%). The section counts, per drive, how many are held out. Sources are
//! in [`PUBLISHED`] (and docs/sources.md, "Presets against their drives"); a number whose
//! model misses says what is believed missing.
//!
//! Runs on a scaled drive (the preset's dies, planes and timing; `--capacity`), which keeps
//! every rate but the SLC cache's size, measured as a share of the capacity. Reads run on
//! a drive filled first (never-written data is not read from flash); writes on a fresh one
//! unless the source measured a used drive.

use super::plan::Plan;
use super::{derive_seed, Scale};
use crate::report::{Provenance, Role, Section, Table, Verdict};
use crate::rows::{Cell, Row};
use crate::sim::{SimSpec, SsdOverrides};
use flash::Preset;
use serde_json::json;
use workloads::synthetic::Pattern;

/// A held-out number holds within this share of the published one.
pub const TOLERANCE: f64 = 0.15;

/// What is measured, on what run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// MB/s of sequential reads of `kib` KiB at queue depth `qd`, on a filled drive.
    SeqRead { kib: u64, qd: u32 },
    /// MB/s of sequential writes of `kib` KiB at `qd`: on a fresh drive, or `used` (filled
    /// first, every block written once).
    SeqWrite { kib: u64, qd: u32, used: bool },
    /// IOPS of uniform random 4 KiB reads at `qd` over a filled drive.
    RandRead { qd: u32 },
    /// IOPS of uniform random 4 KiB writes at `qd` over a fresh drive.
    RandWrite { qd: u32 },
    /// IOPS of uniform random 4 KiB writes at `qd` in steady state: the drive filled, then
    /// written at random until its WAF is steady (SNIA PTS's rule), then measured.
    RandWriteSteady { qd: u32 },
    /// Mean latency (µs) of random 4 KiB reads at queue depth 1 on a filled drive.
    ReadLatency,
    /// Mean latency (µs) of random 4 KiB writes at queue depth 1 on a fresh drive.
    WriteLatency,
    /// MB/s averaged over sequential 1 MiB writes of the whole fresh drive.
    FillAverage,
    /// MB/s of sequential 1 MiB writes past the SLC cache: the second half of a
    /// whole-drive fill.
    PostCacheWrite,
    /// Mean time (ms) of random 4 KiB reads at queue depth 1 over the whole disk.
    RandomAccess,
}

impl Measure {
    pub fn unit(self) -> &'static str {
        match self {
            Measure::SeqRead { .. }
            | Measure::SeqWrite { .. }
            | Measure::FillAverage
            | Measure::PostCacheWrite => "MB/s",
            Measure::RandRead { .. }
            | Measure::RandWrite { .. }
            | Measure::RandWriteSteady { .. } => "IOPS",
            Measure::ReadLatency | Measure::WriteLatency => "µs",
            Measure::RandomAccess => "ms",
        }
    }

    pub fn describe(self) -> String {
        match self {
            Measure::SeqRead { kib, qd } => format!("sequential read, {kib} KiB, QD{qd}"),
            Measure::SeqWrite { kib, qd, used } => format!(
                "sequential write, {kib} KiB, QD{qd}{}",
                if used { ", used drive" } else { "" }
            ),
            Measure::RandRead { qd } => format!("random 4 KiB read, QD{qd}"),
            Measure::RandWrite { qd } => format!("random 4 KiB write, QD{qd}"),
            Measure::RandWriteSteady { qd } => {
                format!("random 4 KiB write, QD{qd}, steady state")
            }
            Measure::ReadLatency => "4 KiB read latency, QD1".into(),
            Measure::WriteLatency => "4 KiB write latency, QD1".into(),
            Measure::FillAverage => "whole-drive fill, average".into(),
            Measure::PostCacheWrite => "sequential write after the SLC cache".into(),
            Measure::RandomAccess => "random access time".into(),
        }
    }

    /// The runs it is computed from.
    fn runs(self) -> Vec<RunKind> {
        match self {
            Measure::SeqRead { kib, qd } => vec![RunKind::SeqRead { kib, qd }],
            Measure::SeqWrite { kib, qd, used } => vec![RunKind::SeqWrite { kib, qd, used }],
            Measure::RandRead { qd } => vec![RunKind::RandRead { qd }],
            Measure::RandWrite { qd } => vec![RunKind::RandWrite { qd }],
            Measure::RandWriteSteady { qd } => vec![RunKind::RandWriteSteady { qd }],
            Measure::ReadLatency | Measure::RandomAccess => vec![RunKind::RandRead { qd: 1 }],
            Measure::WriteLatency => vec![RunKind::RandWrite { qd: 1 }],
            Measure::FillAverage => vec![RunKind::Fill { half: false }],
            Measure::PostCacheWrite => {
                vec![RunKind::Fill { half: true }, RunKind::Fill { half: false }]
            }
        }
    }

    /// The measured value out of its runs' results (in [`Measure::runs`] order).
    fn value(self, r: &[&RunOut]) -> f64 {
        match self {
            Measure::SeqRead { .. } => r[0].read_mb_per_s,
            Measure::SeqWrite { .. } | Measure::FillAverage => r[0].write_mb_per_s,
            Measure::RandRead { .. }
            | Measure::RandWrite { .. }
            | Measure::RandWriteSteady { .. } => r[0].iops,
            Measure::ReadLatency => r[0].read_mean_ns / 1e3,
            Measure::WriteLatency => r[0].write_mean_ns / 1e3,
            Measure::RandomAccess => r[0].read_mean_ns / 1e6,
            Measure::PostCacheWrite => {
                let bytes = r[1].write_bytes.saturating_sub(r[0].write_bytes) as f64;
                let ns = r[1].simulated_ns.saturating_sub(r[0].simulated_ns) as f64;
                if ns > 0.0 {
                    bytes / ns * 1e3
                } else {
                    0.0
                }
            }
        }
    }
}

/// Whether a published number set a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Predicted: no parameter was set from it.
    HeldOut,
    /// Held out, but bound by the host interface: a drive of the interface alone gets it
    /// too, so it is a check of the model, not a prediction.
    InterfaceBound,
    /// It set this parameter (the preset's TOML says so).
    Calibrated(&'static str),
}

/// A number a drive is published with.
#[derive(Debug, Clone, Copy)]
pub struct Published {
    /// The verdict's id, after `presets.`.
    pub id: &'static str,
    pub preset: &'static str,
    pub measure: Measure,
    pub value: f64,
    /// `spec` (the maker's) or `review` (an independent measurement).
    pub kind: &'static str,
    pub used: Use,
    pub source: &'static str,
    /// When the model misses: what is believed missing.
    pub if_missed: &'static str,
}

const SPEC: &str = "spec";
const REVIEW: &str = "review";

/// The published numbers, per drive. Sources: the presets' own (their TOML files' notes),
/// and reviews found for this section (docs/sources.md, "Presets against their drives").
pub const PUBLISHED: &[Published] = &[
    // Samsung 840 Pro 256 GB.
    Published { id: "840pro-seq-read", preset: "840pro", measure: Measure::SeqRead { kib: 128, qd: 32 }, value: 540.0, kind: SPEC, used: Use::Calibrated("timing.host_bytes_per_s"), source: "Samsung SSD 840 PRO data sheet (2012): 540 MB/s sequential read", if_missed: "" },
    Published { id: "840pro-seq-write", preset: "840pro", measure: Measure::SeqWrite { kib: 128, qd: 32, used: false }, value: 520.0, kind: SPEC, used: Use::Calibrated("timing.program_ns"), source: "Samsung SSD 840 PRO data sheet (2012): 520 MB/s sequential write", if_missed: "" },
    Published { id: "840pro-rand-read-qd32", preset: "840pro", measure: Measure::RandRead { qd: 32 }, value: 100_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 840 PRO 256 GB rating, 4 KB random read QD32: 100,000 IOPS (HEXUS review's specification table, 2012)", if_missed: "the controller's command rate: the model's per-command overhead (8 µs, assumed) and SATA transfers bound QD32 reads, not the flash" },
    Published { id: "840pro-rand-write-qd32", preset: "840pro", measure: Measure::RandWrite { qd: 32 }, value: 90_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 840 PRO 256 GB rating, 4 KB random write QD32: 90,000 IOPS (HEXUS, 2012)", if_missed: "the controller's command rate: with its write buffer the model takes 4 KiB random writes at the flash's program rate (504 MB/s, about 123,000 IOPS); its per-write firmware work (write_ack_ns, calibrated at QD1) overlaps across commands, where a controller of three cores would serialise it" },
    Published { id: "840pro-rand-read-qd1", preset: "840pro", measure: Measure::RandRead { qd: 1 }, value: 9_900.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 840 PRO 256 GB rating, 4 KB random read QD1: 9,900 IOPS (HEXUS, 2012)", if_missed: "the read path's fixed costs: tR (60 µs, assumed for the generation) and the command overhead (8 µs, assumed)" },
    Published { id: "840pro-rand-write-qd1", preset: "840pro", measure: Measure::RandWrite { qd: 1 }, value: 31_000.0, kind: SPEC, used: Use::Calibrated("timing.write_ack_ns"), source: "Samsung 840 PRO 256 GB rating, 4 KB random write QD1: 31,000 IOPS (HEXUS, 2012)", if_missed: "" },
    Published { id: "840pro-seq-read-qd1", preset: "840pro", measure: Measure::SeqRead { kib: 128, qd: 1 }, value: 410.0, kind: REVIEW, used: Use::HeldOut, source: "Tom's Hardware, Samsung 840 Pro SSD review (2012): 128 KB sequential reads at QD1, about 410 MB/s", if_missed: "read-ahead inside the drive: at QD1 a 128 KiB read is one request, and a drive that prefetches the next pages overlaps them" },
    Published { id: "840pro-seq-write-used", preset: "840pro", measure: Measure::SeqWrite { kib: 128, qd: 32, used: true }, value: 528.6, kind: REVIEW, used: Use::InterfaceBound, source: "HT4U.net, Samsung 840 Pro und Evo im Test, p. 9 (2013): Iometer sequential write 528.6 MB/s with every block written once", if_missed: "garbage collection's cost on sequential overwrites: a drive that erases whole invalid blocks in idle time writes at the fresh rate" },
    // Crucial MX500 250 GB.
    Published { id: "mx500-seq-read", preset: "mx500", measure: Measure::SeqRead { kib: 128, qd: 32 }, value: 560.0, kind: SPEC, used: Use::Calibrated("timing.host_bytes_per_s"), source: "Crucial MX500 product flyer (2018): 560 MB/s sequential read", if_missed: "" },
    Published { id: "mx500-seq-write", preset: "mx500", measure: Measure::SeqWrite { kib: 128, qd: 32, used: false }, value: 510.0, kind: SPEC, used: Use::Calibrated("slc_cache.program_ns"), source: "Crucial MX500 product flyer (2018): 510 MB/s sequential write (in the SLC cache)", if_missed: "" },
    Published { id: "mx500-rand-read-qd32", preset: "mx500", measure: Measure::RandRead { qd: 32 }, value: 95_000.0, kind: SPEC, used: Use::HeldOut, source: "Crucial MX500 rating, random 4 KB read: 95,000 IOPS (product flyer; TechPowerUp SSD database)", if_missed: "the controller's command rate and the 4 dies' tR: 8 dies x 2 planes at 80 µs (assumed TLC tR) bound QD32 reads" },
    Published { id: "mx500-rand-write-qd32", preset: "mx500", measure: Measure::RandWrite { qd: 32 }, value: 90_000.0, kind: SPEC, used: Use::HeldOut, source: "Crucial MX500 rating, random 4 KB write: 90,000 IOPS (product flyer; TechPowerUp SSD database)", if_missed: "the controller's command rate: with its write buffer the model takes 4 KiB random writes at the SLC cache's program rate (510 MB/s, about 125,000 IOPS) with no per-write firmware work (write_ack_ns assumed 0: no QD1 write figure is published for the drive)" },
    Published { id: "mx500-post-cache-write", preset: "mx500", measure: Measure::PostCacheWrite, value: 250.0, kind: REVIEW, used: Use::Calibrated("timing.program_ns"), source: "TechPowerUp, Crucial MX300 525 GB review (the MX500's predecessor, same Dynamic Write Acceleration): about 250 MB/s once the cache is full", if_missed: "" },
    // Samsung 980 1 TB.
    Published { id: "980-seq-read", preset: "980", measure: Measure::SeqRead { kib: 128, qd: 32 }, value: 3_500.0, kind: SPEC, used: Use::Calibrated("timing.host_bytes_per_s"), source: "Samsung 980 1 TB specification: 3,500 MB/s sequential read (AnandTech, Guru3D, 2021)", if_missed: "" },
    Published { id: "980-seq-write", preset: "980", measure: Measure::SeqWrite { kib: 128, qd: 32, used: false }, value: 3_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 980 1 TB specification: 3,000 MB/s sequential write, in the SLC cache (AnandTech, Guru3D, 2021)", if_missed: "the SLC program time was set from TechPowerUp's measured 2.5 GB/s in the cache, not Samsung's 3.0 GB/s: the preset follows the measurement" },
    Published { id: "980-in-cache-write", preset: "980", measure: Measure::SeqWrite { kib: 1024, qd: 32, used: false }, value: 2_500.0, kind: REVIEW, used: Use::Calibrated("slc_cache.program_ns"), source: "TechPowerUp, Samsung 980 1 TB review (2021): 2.5 GB/s written into the SLC cache", if_missed: "" },
    Published { id: "980-post-cache-write", preset: "980", measure: Measure::PostCacheWrite, value: 500.0, kind: REVIEW, used: Use::Calibrated("timing.program_ns"), source: "TechPowerUp, Samsung 980 1 TB review (2021): about 500 MB/s after 160 GB", if_missed: "" },
    Published { id: "980-fill-average", preset: "980", measure: Measure::FillAverage, value: 600.0, kind: REVIEW, used: Use::HeldOut, source: "TechPowerUp, Samsung 980 1 TB review (2021): about 600 MB/s averaged over filling the whole drive", if_missed: "folding the SLC cache while the fill runs: a drive that keeps writing some data in SLC mode past the cache's nominal size averages more" },
    Published { id: "980-rand-read-qd1", preset: "980", measure: Measure::RandRead { qd: 1 }, value: 17_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 980 1 TB specification: random read 4 KB QD1 17,000 IOPS (Guru3D, 2021)", if_missed: "the test span: reads over the whole drive miss the HMB (which maps 6.9% of it) and read a translation page before the data; Samsung's span is not published (CrystalDiskMark's default, 1 GiB, is mapped whole by the HMB); and tR, 45 µs, is assumed" },
    Published { id: "980-rand-write-qd1", preset: "980", measure: Measure::RandWrite { qd: 1 }, value: 54_000.0, kind: SPEC, used: Use::Calibrated("timing.write_ack_ns"), source: "Samsung 980 1 TB specification: random write 4 KB QD1 54,000 IOPS (Guru3D, 2021)", if_missed: "" },
    Published { id: "980-rand-read-qd32", preset: "980", measure: Measure::RandRead { qd: 32 }, value: 500_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 980 1 TB specification: random read 4 KB QD32 500,000 IOPS (Guru3D, 2021)", if_missed: "Samsung's figure is measured with several threads (QD32 x 4): the model's one stream of 32 is bound by 16 dies' tR and the HMB lookups" },
    Published { id: "980-rand-write-qd32", preset: "980", measure: Measure::RandWrite { qd: 32 }, value: 480_000.0, kind: SPEC, used: Use::HeldOut, source: "Samsung 980 1 TB specification: random write 4 KB QD32 480,000 IOPS (Guru3D, 2021)", if_missed: "the controller's own limits: the model takes 4 KiB writes at the SLC program rate (16 dies, 2.5 GB/s: about 610,000 IOPS), bound by no command rate and no mapping update through the HMB, where Samsung rates 480,000" },
    // Intel X25-E 32 GB.
    Published { id: "x25e-seq-read", preset: "x25e", measure: Measure::SeqRead { kib: 128, qd: 32 }, value: 250.0, kind: SPEC, used: Use::InterfaceBound, source: "Intel X25-E product manual (2009): 250 MB/s sustained sequential read (The Tech Report's review, 2008)", if_missed: "" },
    Published { id: "x25e-seq-write", preset: "x25e", measure: Measure::SeqWrite { kib: 128, qd: 32, used: false }, value: 170.0, kind: SPEC, used: Use::HeldOut, source: "Intel X25-E product manual (2009): 170 MB/s sustained sequential write (The Tech Report, 2008)", if_missed: "the controller's own write rate: 20 dies x 2 planes at 200 µs (SLC tPROG) program 800 MB/s, so something other than the flash sets the 170 MB/s" },
    Published { id: "x25e-rand-read", preset: "x25e", measure: Measure::RandRead { qd: 32 }, value: 35_000.0, kind: SPEC, used: Use::HeldOut, source: "Intel X25-E product manual (2009): 35,000 random 4 KB read IOPS (queue depth as Intel's IOMeter test, taken as 32)", if_missed: "the controller's command rate: the model's per-command overhead (10 µs) and SATA transfers bound QD32 reads" },
    Published { id: "x25e-rand-write", preset: "x25e", measure: Measure::RandWriteSteady { qd: 32 }, value: 3_300.0, kind: SPEC, used: Use::HeldOut, source: "Intel X25-E product manual (2009): 3,300 random 4 KB write IOPS (its conditions not given in the source quoted; taken as sustained over the whole span)", if_missed: "the drive's garbage collection in steady state: at 7% spare (assumed, binary over decimal capacity) greedy GC on a page map; Intel's conditions (span, spare area) are not in the sources found" },
    Published { id: "x25e-read-latency", preset: "x25e", measure: Measure::ReadLatency, value: 75.0, kind: SPEC, used: Use::Calibrated("timing.channel_bytes_per_s, command_overhead_ns"), source: "Intel X25-E product manual (2009): 75 µs read latency", if_missed: "" },
    Published { id: "x25e-write-latency", preset: "x25e", measure: Measure::WriteLatency, value: 85.0, kind: SPEC, used: Use::Calibrated("timing.write_ack_ns"), source: "Intel X25-E product manual (2009): 85 µs write latency", if_missed: "" },
    // Seagate Barracuda 7200.12 250 GB.
    Published { id: "hdd7200-random-access", preset: "hdd7200", measure: Measure::RandomAccess, value: 17.0, kind: REVIEW, used: Use::HeldOut, source: "The Tech Report, a storage performance retrospective: HD Tach random access time 17 ms for the Barracuda 7200.12 (capacity not stated)", if_missed: "HD Tach's access time includes the host's and the drive's command overhead and a full-stroke seek distribution; the model's 8.5 ms average seek (datasheet) plus half a rotation (4.17 ms) is the drive's alone" },
    Published { id: "hdd7200-seq-read", preset: "hdd7200", measure: Measure::SeqRead { kib: 1024, qd: 1 }, value: 125.0, kind: SPEC, used: Use::HeldOut, source: "Seagate Barracuda 7200.12 product manual (2009): 125 MB/s maximum sustained transfer (the outer zone)", if_missed: "zoned recording: the model has one media rate, 100 MB/s (the preset's assumed average across the stroke), where the outer zone, where a read from the start runs, gives the maximum" },
];

/// One run's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunOut {
    pub iops: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    pub read_mean_ns: f64,
    pub write_mean_ns: f64,
    pub simulated_ns: u64,
    pub write_bytes: u64,
}

/// What one run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunKind {
    SeqRead {
        kib: u64,
        qd: u32,
    },
    SeqWrite {
        kib: u64,
        qd: u32,
        used: bool,
    },
    RandRead {
        qd: u32,
    },
    RandWrite {
        qd: u32,
    },
    RandWriteSteady {
        qd: u32,
    },
    /// Sequential 1 MiB writes at QD32 over half (or all) of a fresh drive.
    Fill {
        half: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunKey {
    preset: &'static str,
    run: RunKind,
}

/// Run lengths per scale.
struct Setup {
    /// SSDs run at this capacity (or their own, if smaller).
    ssd_bytes: u64,
    /// Random 4 KiB requests per run.
    random_requests: u64,
    /// Bytes of a sequential run.
    sequential_bytes: u64,
}

fn setup(scale: Scale) -> Setup {
    match scale {
        Scale::Quick => Setup {
            ssd_bytes: 16 << 30,
            random_requests: 20_000,
            sequential_bytes: 512 << 20,
        },
        Scale::Full | Scale::Paper => Setup {
            ssd_bytes: 64 << 30,
            random_requests: 100_000,
            sequential_bytes: 2 << 30,
        },
    }
}

/// The drive a run uses: an SSD scaled to the setup's capacity, a disk at its own.
fn drive(name: &str, s: &Setup) -> Result<Preset, crate::LabError> {
    let p = Preset::load(name)?;
    if p.ssd_config().is_none() {
        return Ok(p);
    }
    let own = p.ssd_config().map_or(0, |c| c.geometry.logical_bytes);
    let overrides = SsdOverrides {
        capacity_bytes: Some(s.ssd_bytes.min(own)),
        ..Default::default()
    };
    Ok(overrides.apply(p)?)
}

/// The simulation of `key`.
fn spec(key: &RunKey, s: &Setup, seed: u64) -> Result<SimSpec, crate::LabError> {
    use crate::precondition::Precondition;
    let preset = drive(key.preset, s)?;
    let (logical, is_ssd) = match &preset.device {
        flash::DeviceConfig::Ssd(c) => (c.geometry.logical_bytes, true),
        flash::DeviceConfig::Hdd(h) => (h.logical_bytes, false),
    };
    let (pattern, kib, read_fraction, qd, volume_bytes, filled) = match key.run {
        RunKind::SeqRead { kib, qd } => {
            (Pattern::Sequential, kib, 1.0, qd, s.sequential_bytes, true)
        }
        RunKind::SeqWrite { kib, qd, used } => {
            (Pattern::Sequential, kib, 0.0, qd, s.sequential_bytes, used)
        }
        RunKind::RandRead { qd } => (Pattern::Uniform, 4, 1.0, qd, s.random_requests * 4096, true),
        RunKind::RandWrite { qd } | RunKind::RandWriteSteady { qd } => (
            Pattern::Uniform,
            4,
            0.0,
            qd,
            s.random_requests * 4096,
            false,
        ),
        RunKind::Fill { half } => {
            let bytes = if half { logical / 2 } else { logical };
            (Pattern::Sequential, 1024, 0.0, 32, bytes, false)
        }
    };
    // A disk reads what was never written at full cost: no fill (nor preconditioning).
    let mode = match key.run {
        RunKind::RandWriteSteady { .. } => Precondition::Steady {
            max_x: crate::precondition::DEFAULT_STEADY_MAX_X,
        },
        _ if filled && is_ssd => Precondition::Fill,
        _ => Precondition::None,
    };
    Ok(SimSpec {
        preset,
        pattern,
        request_bytes: kib << 10,
        read_fraction,
        queue_depth: qd,
        writes_x: volume_bytes as f64 / logical as f64,
        warmup_x: 0.0,
        timed_warmup_x: 0.0,
        timing: true,
        seed,
        precondition: Some((mode, 1.0)),
        separate: false,
        // Reads are measured on a drive that rested after its fill (its SLC cache folded),
        // as a review tests a drive it filled.
        idle_after_precondition: mode == Precondition::Fill,
    })
}

fn run_one(spec: &SimSpec) -> Result<RunOut, crate::LabError> {
    let r = crate::sim::run(spec, &mut |_, _| {})?;
    let s = &r.stats;
    Ok(RunOut {
        iops: s.iops,
        read_mb_per_s: s.read_mb_per_s,
        write_mb_per_s: s.write_mb_per_s,
        read_mean_ns: s.read_latency_ns.mean as f64,
        write_mean_ns: s.write_latency_ns.mean as f64,
        simulated_ns: s.simulated_ns,
        write_bytes: s.host_write_bytes,
    })
}

/// Every run the published numbers need, once each.
fn plan(s: &Setup, seed: u64) -> Result<Plan<RunKey, SimSpec>, crate::LabError> {
    let mut plan = Plan::new();
    let mut keys: Vec<RunKey> = Vec::new();
    for p in PUBLISHED {
        for run in p.measure.runs() {
            let key = RunKey {
                preset: p.preset,
                run,
            };
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    for (i, key) in keys.iter().enumerate() {
        plan.add(*key, spec(key, s, derive_seed(seed, i as u64))?);
    }
    Ok(plan)
}

/// Our value of each published number, in [`PUBLISHED`] order.
fn ours(done: &super::plan::Done<RunKey, RunOut>) -> Vec<f64> {
    PUBLISHED
        .iter()
        .map(|p| {
            let runs: Vec<&RunOut> = p
                .measure
                .runs()
                .into_iter()
                .map(|run| {
                    done.get(&RunKey {
                        preset: p.preset,
                        run,
                    })
                })
                .collect();
            p.measure.value(&runs)
        })
        .collect()
}

/// One verdict per published number: held out ones predicted within [`TOLERANCE`],
/// calibrated ones shown as such.
pub fn analyse(ours: &[f64]) -> Vec<Verdict> {
    PUBLISHED
        .iter()
        .zip(ours)
        .map(|(p, &v)| {
            let claim = format!(
                "{}: {} {} {}",
                p.preset,
                p.measure.describe(),
                fmt_value(p.value),
                p.measure.unit()
            );
            let verdict = Verdict::numeric(
                &format!("presets.{}", p.id),
                &claim,
                p.source,
                v,
                p.value,
                TOLERANCE,
                format!(
                    "ours {} {} ({:+.1}%)",
                    fmt_value(v),
                    p.measure.unit(),
                    100.0 * (v / p.value - 1.0)
                ),
            );
            match p.used {
                Use::HeldOut if !p.if_missed.is_empty() => verdict.if_missed(p.if_missed),
                Use::HeldOut => verdict,
                Use::InterfaceBound => verdict.with_role(Role::Check),
                Use::Calibrated(_) => verdict.with_role(Role::Calibrated),
            }
        })
        .collect()
}

/// A value with as many decimals as it needs to show three significant digits.
fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A row of table `published`.
struct PublishedRow {
    p: &'static Published,
    ours: f64,
}

impl Row for PublishedRow {
    const COLUMNS: &'static [&'static str] = &[
        "drive",
        "measurement",
        "unit",
        "published",
        "ours",
        "error %",
        "kind",
        "use",
        "source",
    ];
    fn cells(&self) -> Vec<Cell> {
        let p = self.p;
        vec![
            p.preset.into(),
            p.measure.describe().into(),
            p.measure.unit().into(),
            Cell::Fixed(p.value, decimals(p.value)),
            Cell::Fixed(self.ours, decimals(p.value)),
            Cell::Signed(100.0 * (self.ours / p.value - 1.0), 1),
            p.kind.into(),
            match p.used {
                Use::HeldOut => "held out".into(),
                Use::InterfaceBound => "held out (interface-bound: a check)".into(),
                Use::Calibrated(param) => format!("calibrated: {param}").into(),
            },
            p.source.into(),
        ]
    }
}

fn decimals(v: f64) -> usize {
    if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    }
}

/// A row of table `counts`: one drive's numbers.
struct CountRow {
    preset: &'static str,
    numbers: usize,
    held_out: usize,
    held_out_holding: usize,
    calibrated: usize,
}

impl Row for CountRow {
    const COLUMNS: &'static [&'static str] = &[
        "drive",
        "published numbers",
        "held out",
        "held out within ±15%",
        "calibrated",
        "held-out share %",
    ];
    fn cells(&self) -> Vec<Cell> {
        vec![
            self.preset.into(),
            Cell::Count(self.numbers as u64),
            Cell::Count(self.held_out as u64),
            Cell::Count(self.held_out_holding as u64),
            Cell::Count(self.calibrated as u64),
            Cell::Fixed(100.0 * self.held_out as f64 / self.numbers as f64, 0),
        ]
    }
}

/// The drives, in [`PUBLISHED`] order.
fn drives() -> Vec<&'static str> {
    let mut d: Vec<&'static str> = Vec::new();
    for p in PUBLISHED {
        if !d.contains(&p.preset) {
            d.push(p.preset);
        }
    }
    d
}

fn count_rows(verdicts: &[Verdict]) -> Vec<CountRow> {
    drives()
        .into_iter()
        .map(|preset| {
            let mine: Vec<(&Published, &Verdict)> = PUBLISHED
                .iter()
                .zip(verdicts)
                .filter(|(p, _)| p.preset == preset)
                .collect();
            let held: Vec<&(&Published, &Verdict)> = mine
                .iter()
                .filter(|(p, _)| !matches!(p.used, Use::Calibrated(_)))
                .collect();
            CountRow {
                preset,
                numbers: mine.len(),
                held_out: held.len(),
                held_out_holding: held.iter().filter(|(_, v)| v.holds).count(),
                calibrated: mine.len() - held.len(),
            }
        })
        .collect()
}

/// The presets this section does not judge, and why.
pub const NOT_JUDGED: &[(&str, &str)] = &[
    ("cosmos", "the Cosmos+ OpenSSD board's published figures are its configuration (PCIe Gen2 x8, 1 GB DRAM, a 1 GHz dual Cortex-A9); no host-visible throughput or latency through an FTL was found"),
    ("openssd", "the Jasmine OpenSSD's published figures are firmware-level (raw NAND reads of 39–103 MB/s by channels and ways, 260 MB/s over SATA with no NAND behind it); none through an FTL"),
    ("nvme", "stands for a class, a modern PCIe 4.0 TLC drive of 1 TB: its link rate is the Samsung 980 PRO's datasheet figure (7,000 MB/s), its other parameters the class's; the 980 PRO's other figures are not judged yet"),
    ("ssd2011", "names no product: a 2011 SATA-2 MLC drive with a FAST hybrid FTL, the kind paper 004 ran on"),
];

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    let s = setup(scale);
    let done = ctx.run_plan(plan(&s, seed)?, run_one)?;
    let ours = ours(&done);
    let verdicts = analyse(&ours);
    let counts = count_rows(&verdicts);
    let rows = PUBLISHED
        .iter()
        .zip(&ours)
        .map(|(p, &ours)| PublishedRow { p, ours });
    let not_judged = NOT_JUDGED
        .iter()
        .map(|(name, why)| format!("{name}: {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    Ok(Section {
        id: "presets".into(),
        title: "Presets against their drives: datasheets and reviews".into(),
        question: format!(
            "Does each preset that names a product do what its drive is published to do? Each number from the \
             maker's datasheet or an independent review is run on the preset (SSDs at {} GiB, the preset's dies and \
             timing; reads on a drive filled first, writes on a fresh one unless the source measured a used drive; \
             random runs of {} requests, sequential of {} MiB). A number a parameter was set from is calibrated; \
             the others are held out and judged within ±{:.0}%. Not judged: {not_judged}.",
            s.ssd_bytes >> 30,
            s.random_requests,
            s.sequential_bytes >> 20,
            TOLERANCE * 100.0
        ),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots: vec![],
        tables: vec![
            Table::of(
                "published",
                "Each published number beside the preset's",
                rows,
            ),
            Table::of("counts", "Per drive: numbers held out and calibrated", counts),
        ],
        provenance: PUBLISHED
            .iter()
            .map(|p| Provenance {
                number: format!("{} {}: {}", p.preset, p.measure.describe(), p.source),
                role: match p.used {
                    Use::HeldOut => "held out (predicted)".into(),
                    Use::InterfaceBound => {
                        "held out, a check: bound by the host interface, which a drive without flash reaches too".into()
                    }
                    Use::Calibrated(param) => format!("calibrated: set {param}"),
                },
            })
            .collect(),
        results: json!({
            "tolerance": TOLERANCE,
            "numbers": PUBLISHED.iter().zip(&ours).map(|(p, &v)| json!({
                "id": p.id, "preset": p.preset, "measurement": p.measure.describe(), "unit": p.measure.unit(),
                "published": p.value, "ours": v, "kind": p.kind,
                "use": match p.used { Use::HeldOut => "held out".to_string(), Use::InterfaceBound => "held out (interface-bound check)".to_string(), Use::Calibrated(param) => format!("calibrated: {param}") },
                "source": p.source,
            })).collect::<Vec<_>>(),
            "not_judged": NOT_JUDGED.iter().map(|(n, why)| json!({"preset": n, "why": why})).collect::<Vec<_>>(),
        }),
        verdicts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_published_number_names_a_preset_a_source_and_a_unique_id() {
        let mut ids = std::collections::HashSet::new();
        for p in PUBLISHED {
            assert!(ids.insert(p.id), "{} twice", p.id);
            assert!(p.id.starts_with(p.preset), "{}", p.id);
            assert!(Preset::load(p.preset).is_ok(), "{}", p.preset);
            assert!(p.source.len() > 20 && p.value > 0.0, "{}", p.id);
            if p.used == Use::HeldOut {
                assert!(
                    !p.if_missed.is_empty(),
                    "{}: say what a miss would mean",
                    p.id
                );
            }
            if let Use::Calibrated(param) = p.used {
                assert!(!param.is_empty() && p.if_missed.is_empty(), "{}", p.id);
            }
        }
    }

    #[test]
    fn at_least_half_of_each_named_drives_numbers_are_held_out_where_enough_were_published() {
        let fake: Vec<Verdict> = analyse(&PUBLISHED.iter().map(|p| p.value).collect::<Vec<_>>());
        for c in count_rows(&fake) {
            // Every number equal to its published value holds.
            assert_eq!(c.held_out_holding, c.held_out, "{}", c.preset);
            if matches!(c.preset, "840pro" | "980" | "x25e") {
                assert!(
                    2 * c.held_out >= c.numbers,
                    "{}: {} of {}",
                    c.preset,
                    c.held_out,
                    c.numbers
                );
            }
        }
    }

    /// The null model: a drive that is its host interface alone (no flash time, no
    /// command overhead): every rate the interface's, every latency a transfer's.
    fn interface_only(p: &Published) -> f64 {
        let preset = Preset::load(p.preset).unwrap();
        let rate = match &preset.device {
            flash::DeviceConfig::Ssd(c) => c.timing.host_bytes_per_s as f64,
            flash::DeviceConfig::Hdd(h) => h.host_bytes_per_s as f64,
        };
        match p.measure {
            Measure::SeqRead { .. }
            | Measure::SeqWrite { .. }
            | Measure::FillAverage
            | Measure::PostCacheWrite => rate / 1e6,
            Measure::RandRead { .. }
            | Measure::RandWrite { .. }
            | Measure::RandWriteSteady { .. } => rate / 4096.0,
            Measure::ReadLatency | Measure::WriteLatency => 4096.0 / rate * 1e6,
            Measure::RandomAccess => 4096.0 / rate * 1e3,
        }
    }

    #[test]
    fn an_interface_only_drive_fails_the_held_out_numbers_that_are_not_interface_bound() {
        let null: Vec<f64> = PUBLISHED.iter().map(interface_only).collect();
        let v = analyse(&null);
        let holding: Vec<&str> = PUBLISHED
            .iter()
            .zip(&v)
            .filter(|(p, v)| p.used == Use::HeldOut && v.holds)
            .map(|(p, _)| p.id)
            .collect();
        assert!(
            holding.is_empty(),
            "{holding:?} hold without the flash: mark them interface-bound"
        );
        // The X25-E's sequential read is bound by its interface: a model without its flash
        // gets it too (SATA 3 Gb/s after overheads, 280 MB/s, against 250), so it is a check;
        // so is the 840 Pro's used-drive sequential write (SATA 6 Gb/s, 550 against 529).
        let x = PUBLISHED
            .iter()
            .position(|p| p.id == "x25e-seq-read")
            .unwrap();
        assert!(v[x].holds);
        assert_eq!(v[x].score.as_ref().unwrap().role, Role::Check);
    }

    #[test]
    fn the_measures_are_computed_from_their_runs() {
        let out = |write_bytes: u64, ns: u64| RunOut {
            iops: 10.0,
            read_mb_per_s: 1.0,
            write_mb_per_s: 2.0,
            read_mean_ns: 3_000.0,
            write_mean_ns: 4_000.0,
            simulated_ns: ns,
            write_bytes,
        };
        let (half, whole) = (
            out(500_000_000, 1_000_000_000),
            out(1_000_000_000, 2_000_000_000),
        );
        // 500 MB more in 1 s more: 500 MB/s.
        assert_eq!(Measure::PostCacheWrite.value(&[&half, &whole]), 500.0);
        assert_eq!(Measure::ReadLatency.value(&[&half]), 3.0);
        assert_eq!(Measure::RandomAccess.value(&[&half]), 0.003);
        assert_eq!(Measure::WriteLatency.value(&[&half]), 4.0);
    }
}
