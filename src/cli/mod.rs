//! The command line, one module per command; this module holds what several share: the
//! device and backend flag groups, progress bars, the crash-test loop and how statistics
//! are printed for people.

pub(crate) mod bench;
pub(crate) mod btree;
pub(crate) mod calibrate;
pub(crate) mod capture;
pub(crate) mod compare;
pub(crate) mod emit;
pub(crate) mod fio;
pub(crate) mod given;
pub(crate) mod join;
pub(crate) mod kv;
pub(crate) mod presets;
pub(crate) mod progress;
pub(crate) mod replay;
pub(crate) mod reproduce;
pub(crate) mod sim;
pub(crate) mod simfs;
pub(crate) mod sweep;
pub(crate) mod timeline;
pub(crate) mod validate;
pub(crate) mod wear;

use crate::units;
use anyhow::{bail, Context, Result};
use clap::Subcommand;
use flash::{Device, GcPolicy, Preset};
use indicatif::{ProgressBar, ProgressStyle};
use lab::experiments::{self, Scale};
use lab::sim::{SimSpec, SsdOverrides};
use std::path::PathBuf;
use std::time::Instant;
use trace::formats::Format;
use workloads::synthetic::Pattern;

/// An on/off switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnOff {
    On,
    Off,
}

impl OnOff {
    pub(crate) fn on(self) -> bool {
        self == OnOff::On
    }
}

/// How the drive takes TRIM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TrimKind {
    /// NCQ TRIM, queued like reads and writes.
    Queued,
    /// TRIM drains the queue and blocks other commands.
    Blocking,
}

#[derive(clap::Args)]
pub(crate) struct DeviceArgs {
    /// Device preset name (see `flashlab presets`) or a path to a preset TOML file.
    #[arg(long)]
    pub(crate) preset: String,
    /// Logical (user-visible) capacity, e.g. 4GiB; the preset's ratios are kept.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) capacity: Option<u64>,
    /// Over-provisioning as a fraction: (physical - logical) / logical.
    #[arg(long)]
    pub(crate) op: Option<f64>,
    /// Flash page size, e.g. 16KiB.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) page_size: Option<u64>,
    /// Pages per erase block.
    #[arg(long)]
    pub(crate) pages_per_block: Option<u32>,
    /// GC victim policy: greedy, cost-benefit or fifo.
    #[arg(long)]
    pub(crate) gc: Option<GcPolicy>,
    /// GC runs when a die's free pool is at or below this many blocks.
    #[arg(long)]
    pub(crate) gc_free_blocks: Option<u32>,
    /// Clean in idle time (after 1 ms without work on a die) up to N free blocks per die.
    #[arg(long, value_name = "N")]
    pub(crate) background_gc: Option<u32>,
    /// DRAM write cache size (0 = none): writes complete once cached.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) write_cache: Option<u64>,
    /// queued: NCQ TRIM; blocking: TRIM drains the queue and blocks other commands.
    #[arg(long, value_enum)]
    pub(crate) trim: Option<TrimKind>,
    /// vTrim/fTrim: acknowledge once recorded, do the work in idle time.
    #[arg(long)]
    pub(crate) trim_background: bool,
    /// Background TRIM work pauses when a host command arrives.
    #[arg(long)]
    pub(crate) trim_preemptive: bool,
    /// Work a TRIM leaves after its acknowledgement, which the next TRIM waits for (e.g.
    /// 90ms: TRIMs back to back then cost about that each, idle ones their command work).
    #[arg(long, value_parser = units::parse_duration_ns, value_name = "DURATION")]
    pub(crate) trim_settle: Option<u64>,
    /// Wear leveling: off, dynamic (open the least-worn free block), static[:THRESHOLD]
    /// (move a cold block's data once a die's erase-count spread reaches THRESHOLD,
    /// default 100 as MQSim) or both[:THRESHOLD]; costed in WAF and time.
    #[arg(long, value_name = "MODE")]
    pub(crate) wear_leveling: Option<flash::WearLevelingConfig>,
    /// Mapping cache (DFTL): cache this many bytes of mapping entries (4 bytes per 4 KiB)
    /// and keep the map on flash in translation pages; 0 = the whole map in DRAM. Replaces
    /// the preset's (the 980's HMB) or adds one in controller DRAM.
    #[arg(long, value_name = "SIZE", value_parser = units::parse_size)]
    pub(crate) mapping_cache: Option<u64>,
    /// What the mapping cache holds: entry (single entries, DFTL) or page (whole
    /// translation pages: one miss brings in its 1,024 neighbours, as TPFTL and HMB drives).
    #[arg(long, value_name = "entry|page", value_parser = parse_granularity)]
    pub(crate) mapping_cache_granularity: Option<flash::CacheGranularity>,
    /// Reads of space never written or trimmed: zeros (as a drive answers them, no flash
    /// read: the default) or flash (a flash read each, as if the space had been written in
    /// order: for a trace replayed on a fresh drive).
    #[arg(long, value_name = "zeros|flash", value_parser = parse_unwritten_reads)]
    pub(crate) unwritten_reads: Option<flash::UnwrittenReads>,
    /// The drive's age: enables the error model (RBER, ECC, read retries, read reclaim) with
    /// every block at pe=N P/E cycles and the data present at the start retention=T old
    /// (s, h, d, y), e.g. pe=1500,retention=1y; cell=slc|mlc|tlc for a preset that does
    /// not say its cell type (TLC drives with an SLC cache do).
    #[arg(long, value_name = "pe=N,retention=T")]
    pub(crate) age: Option<flash::Age>,
    /// The kind of drive: conventional (one write frontier), fdp (NVMe Flexible Data
    /// Placement: writes carry a placement handle, each handle has its own write frontiers
    /// and, persistently isolated, its own GC frontiers; --handles) or zoned (NVMe ZNS:
    /// zones of a block on every die written at their write pointers, reset by the host,
    /// no device GC; --zone-capacity, --max-open-zones, --max-active-zones). Default: the
    /// preset's ([ssd.fdp] or [ssd.zoned] in its TOML), conventional for every built-in one.
    /// `sim` and `replay` take several, separated by commas, to compare them.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub(crate) drive: Vec<DriveKind>,
    /// FDP: reclaim unit handles (placement handles 0..N; default 2).
    #[arg(long, value_name = "N")]
    pub(crate) handles: Option<u16>,
    /// FDP: persistent (GC keeps each handle's data apart; default) or initial (GC's
    /// copies of all handles share one frontier).
    #[arg(long, value_enum)]
    pub(crate) isolation: Option<IsolationArg>,
    /// Zoned: writable bytes of each zone (at most the zone size; default the size).
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) zone_capacity: Option<u64>,
    /// Zoned: zones open at once (0 = no limit; default 0).
    #[arg(long)]
    pub(crate) max_open_zones: Option<u32>,
    /// Zoned: zones active (open or closed) at once (0 = no limit; default 0).
    #[arg(long)]
    pub(crate) max_active_zones: Option<u32>,
    /// How each die orders its flash operations: fifo (as issued: a read waits behind
    /// every GC step issued before it; the null model) or priority (host reads first,
    /// suspending programs and erases; buffered host programs in order with the GC paced
    /// to them; transfers out of order on channels and the host link; constants in
    /// docs/sources.md). Default: the preset's ([ssd.scheduler]), else priority
    /// (fifo on the hybrid log-block FTL).
    #[arg(long, value_enum)]
    pub(crate) scheduler: Option<SchedulerArg>,
}

/// `--scheduler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SchedulerArg {
    Fifo,
    Priority,
}

/// `--drive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DriveKind {
    Conventional,
    Fdp,
    Zoned,
}

/// `--isolation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum IsolationArg {
    Persistent,
    Initial,
}

impl DeviceArgs {
    /// What `--drive` (`given`, one of its kinds) and its flags ask for, on top of the
    /// preset `p`'s own settings.
    fn drive(&self, p: &Preset, given: Option<DriveKind>) -> Result<Option<lab::sim::Drive>> {
        let fdp_flags = self.handles.is_some() || self.isolation.is_some();
        let zone_flags = self.zone_capacity.is_some()
            || self.max_open_zones.is_some()
            || self.max_active_zones.is_some();
        let own = p.ssd_config();
        let kind = match given {
            Some(k) => k,
            None if own.is_some_and(|c| c.fdp.is_some()) => DriveKind::Fdp,
            None if own.is_some_and(|c| c.zoned.is_some()) => DriveKind::Zoned,
            None => DriveKind::Conventional,
        };
        // Comparing kinds (`--drive conventional,fdp`), each kind's flags set up that kind.
        let compared = |k: DriveKind| self.drive.len() > 1 && self.drive.contains(&k);
        if fdp_flags && kind != DriveKind::Fdp && !compared(DriveKind::Fdp) {
            bail!("--handles and --isolation set up an FDP drive: add --drive fdp");
        }
        if zone_flags && kind != DriveKind::Zoned && !compared(DriveKind::Zoned) {
            bail!("--zone-capacity, --max-open-zones and --max-active-zones set up a zoned drive: add --drive zoned");
        }
        if given.is_none() && !fdp_flags && !zone_flags {
            return Ok(None);
        }
        Ok(Some(match kind {
            DriveKind::Conventional => lab::sim::Drive::Conventional,
            DriveKind::Fdp => {
                let mut f = own
                    .and_then(|c| c.fdp.as_deref().cloned())
                    .unwrap_or_else(|| flash::FdpConfig::new(2));
                if let Some(h) = self.handles {
                    f.handles = h;
                }
                if let Some(i) = self.isolation {
                    f.isolation = match i {
                        IsolationArg::Persistent => flash::Isolation::Persistent,
                        IsolationArg::Initial => flash::Isolation::Initial,
                    };
                }
                lab::sim::Drive::Fdp(f)
            }
            DriveKind::Zoned => {
                let mut z = own
                    .and_then(|c| c.zoned.as_deref().cloned())
                    .unwrap_or_default();
                if let Some(c) = self.zone_capacity {
                    z.zone_capacity_bytes = Some(c);
                }
                if let Some(n) = self.max_open_zones {
                    z.max_open_zones = n;
                }
                if let Some(n) = self.max_active_zones {
                    z.max_active_zones = n;
                }
                lab::sim::Drive::Zoned(z)
            }
        }))
    }

    /// The drives `--preset` names: one, or several separated by commas (`sim` and
    /// `replay` run each and compare them); a file's path is one name even with a comma.
    pub(crate) fn preset_names(&self) -> Vec<String> {
        if !self.preset.contains(',') || std::path::Path::new(&self.preset).is_file() {
            return vec![self.preset.clone()];
        }
        self.preset
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// The one drive `--preset` names, with the flags' overrides.
    fn preset(&self) -> Result<Preset> {
        if self.drive.len() > 1 {
            bail!("--drive {}: this command runs one drive (sim and replay take several kinds, separated by commas, to compare them)",
                self.drive.iter().map(|d| format!("{d:?}").to_lowercase()).collect::<Vec<_>>().join(","));
        }
        match self.preset_names().as_slice() {
            [one] => self.preset_named(one, self.drive.first().copied()),
            _ => bail!(
                "--preset {}: this command runs one drive (sim and replay take several, separated by commas, to compare them)",
                self.preset
            ),
        }
    }

    /// The drives to compare: every preset `--preset` names as every kind `--drive` names,
    /// with a name each (the preset's, `/kind` added when several kinds are given).
    pub(crate) fn drives(&self) -> Vec<(String, String, Option<DriveKind>)> {
        let kinds: Vec<Option<DriveKind>> = if self.drive.is_empty() {
            vec![None]
        } else {
            self.drive.iter().copied().map(Some).collect()
        };
        let mut out = Vec::new();
        for p in self.preset_names() {
            for k in &kinds {
                let name = match k {
                    Some(k) if kinds.len() > 1 => {
                        format!("{p}/{}", format!("{k:?}").to_lowercase())
                    }
                    _ => p.clone(),
                };
                out.push((name, p.clone(), *k));
            }
        }
        out
    }

    /// Preset `name` as drive kind `kind` (the preset's own if None), with the flags'
    /// overrides.
    pub(crate) fn preset_named(&self, name: &str, kind: Option<DriveKind>) -> Result<Preset> {
        let p = Preset::load(name)?;
        let drive = self.drive(&p, kind)?;
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
            trim_queued: self.trim.map(|t| t == TrimKind::Queued),
            trim_background: self.trim_background.then_some(true),
            trim_preemptive: self.trim_preemptive.then_some(true),
            trim_settle_ns: self.trim_settle,
            wear_leveling: self.wear_leveling.clone(),
            mapping_cache_bytes: self.mapping_cache,
            mapping_cache_granularity: self.mapping_cache_granularity,
            unwritten_reads: self.unwritten_reads,
            age: self.age.clone(),
            drive,
            scheduler: self.scheduler.map(|s| match s {
                SchedulerArg::Fifo => flash::ssd::SchedulerConfig::fifo(),
                SchedulerArg::Priority => flash::ssd::SchedulerConfig::priority(),
            }),
        };
        Ok(o.apply(p)?)
    }
}

/// Progress of command `what` over `total` steps: a bar on a terminal, a line every 10 s
/// off one ([`progress::Progress`]).
pub(crate) fn progress_bar(total: u64, what: &str) -> progress::Progress {
    progress::Progress::new(what, total)
}

pub(crate) fn print_precondition(pre: &lab::precondition::PreconditionReport) {
    println!("  preconditioned    {}", precondition_line(pre));
}

/// What preconditioning did, in one line.
pub(crate) fn precondition_line(pre: &lab::precondition::PreconditionReport) -> String {
    format!(
        "{}: {} bytes filled, {} bytes of random writes{} in {} rounds{} (not measured)",
        pre.mode,
        pre.filled_bytes,
        pre.aging_write_bytes,
        match pre.aging_read_bytes {
            0 => String::new(),
            r => format!(
                " and {r} bytes of reads (the workload's share: they age the mapping cache)"
            ),
        },
        pre.rounds,
        match (pre.steady, pre.round_waf.last()) {
            (Some(true), Some(w)) => format!(", steady at WAF {w:.2}"),
            (Some(false), Some(w)) => format!(", not steady at the cap (last WAF {w:.2})"),
            _ => String::new(),
        }
    )
}

/// Seconds as the largest unit of `--age retention=` that fits (`1y`, `30d`, `12h`, `5s`).
fn human_duration(secs: u64) -> String {
    for (unit, per) in [("y", 365 * 86_400), ("d", 86_400), ("h", 3600)] {
        if secs >= per {
            return format!("{:.3}{unit}", secs as f64 / per as f64).replace(".000", "");
        }
    }
    format!("{secs}s")
}

/// The share of the bytes read above which reads of never-written space are warned about.
pub(crate) const UNWRITTEN_READ_WARN_SHARE: f64 = 0.01;

/// Reads of space never written or trimmed, and a warning when they are more than 1% of
/// the bytes read: the drive answers them without flash, so reads look faster than they are.
fn print_unwritten_reads(s: &flash::DeviceStats) {
    if s.unwritten_read_bytes == 0 || s.host_read_bytes == 0 {
        return;
    }
    let share = s.unwritten_read_bytes as f64 / s.host_read_bytes as f64;
    if s.unwritten_reads_from_flash {
        println!(
            "  unwritten reads   {:.1} MB ({:.1}% of the bytes read) of space never written or trimmed: each served as a flash read (--unwritten-reads flash)",
            s.unwritten_read_bytes as f64 / 1e6,
            share * 100.0
        );
        return;
    }
    println!(
        "  unwritten reads   {:.1} MB ({:.1}% of the bytes read) of space never written or trimmed: answered with zeros, no flash read",
        s.unwritten_read_bytes as f64 / 1e6,
        share * 100.0
    );
    if share > UNWRITTEN_READ_WARN_SHARE {
        println!(
            "  warning           {:.1}% of the bytes read were never written (or were trimmed), so the read latencies above are understated: precondition the drive first (--precondition fill, or steady), or serve them from flash (--unwritten-reads flash)",
            share * 100.0
        );
    }
}

pub(crate) fn print_stats(s: &flash::DeviceStats) {
    let ms = |ns: u64| ns as f64 / 1e6;
    if s.simulated_ns == 0 {
        println!("  simulated time    not timed (the WAF-only path: no time, IOPS or latency)");
    } else {
        println!("  simulated time    {:.3} s", s.simulated_ns as f64 / 1e9);
        println!(
            "  host ops          {} ({:.0} IOPS, read {:.1} MB/s, write {:.1} MB/s)",
            s.host_ops, s.iops, s.read_mb_per_s, s.write_mb_per_s
        );
    }
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
    print_unwritten_reads(s);
    if s.trim_commands > 0 {
        println!(
            "  trim work         {:.3} ms in the drive, {:.3} ms on the interface; waiting for earlier TRIMs' settling work: TRIMs {:.3} ms (bursts), other commands {:.3} ms (summed)",
            ms(s.trim_busy_ns),
            ms(s.trim_interface_ns),
            ms(s.trim_settle_wait_ns),
            ms(s.io_settle_wait_ns)
        );
    }
    if s.maintenance_suspensions + s.maintenance_forced_drains + s.write_buffer_waits > 0 {
        println!(
            "  scheduler         {} program/erase suspensions for host work, {} host programs waited for GC up to an erase",
            s.maintenance_suspensions, s.maintenance_forced_drains
        );
    }
    if s.write_buffer_waits > 0 {
        println!(
            "  write buffer      full for {} writes, each admitted when enough buffered programs were expected to end to make room; reads that came later delayed the programs those admissions counted on by {:.3} ms per waiting write on average (those writes' latencies are optimistic by up to about that much)",
            s.write_buffer_waits,
            ms(s.write_buffer_slip_ns / s.write_buffer_waits)
        );
    }
    if let Some(waf) = s.waf {
        println!(
            "  WAF               {waf:.3} ({} host pages, {} flash pages, {} GC copies, {} erases)",
            s.host_write_pages, s.flash_write_pages, s.gc_copied_pages, s.erases
        );
        if s.slc_program_pages > 0 {
            println!(
                "  flash programs    {} host pages to TLC (direct or folded), {} in SLC mode, {} GC copies ({} bytes folded so far)",
                s.host_program_pages, s.slc_program_pages, s.gc_copied_pages, s.slc_folded_bytes
            );
        }
        println!(
            "  erase counts      min {} max {} mean {:.2} stddev {:.2}",
            s.erase_count_min, s.erase_count_max, s.erase_count_mean, s.erase_count_stddev
        );
        if s.window_shorter_than_gc_cycle {
            println!(
                "  note              {} host pages are fewer than one GC cycle of this drive ({} pages: a block on every die): this WAF and latency depend on where in the cycle the window fell and are not the drive's steady state; measure at least {} pages",
                s.host_write_pages, s.gc_cycle_pages, s.gc_cycle_pages
            );
        }
    }
    if let Some(m) = &s.mapping_cache {
        println!(
            "  mapping cache     {} entries of {} bytes ({} bytes in {}, cached by {}) for {} translation pages: hit ratio {} ({} hits, {} misses, {} of them cold{}), {} translation pages read, {} written, {} copied by GC",
            m.cache_entries,
            m.entry_bytes,
            m.cache_bytes,
            m.location,
            m.granularity,
            m.translation_pages,
            m.hit_ratio.map_or("-".into(), |r| format!("{r:.4}")),
            m.hits,
            m.misses,
            m.cold_misses,
            m.cold_miss_share
                .map_or(String::new(), |r| format!(": {:.1}%", 100.0 * r)),
            m.translation_reads,
            m.translation_writes,
            m.translation_gc_copies
        );
        if s.flash_write_pages > 0 {
            println!(
                "  translation pages {:.1}% of flash writes (written and GC-copied)",
                100.0 * (m.translation_writes + m.translation_gc_copies) as f64
                    / s.flash_write_pages as f64
            );
        }
    }
    if let Some(a) = &s.aging {
        println!(
            "  {:<18}start {} P/E cycles, data {} old at the start: {} array reads, {:.4} retries per read ({} reads retried), {} uncorrectable, {} blocks reclaimed ({} for read disturb, {} pages copied)",
            format!("errors ({})", a.cell),
            a.start_pe_cycles,
            human_duration(a.start_retention_s),
            a.reads,
            a.retries_per_read.unwrap_or(0.0),
            a.retried_reads,
            a.uncorrectable_reads,
            a.reclaimed_blocks,
            a.reclaimed_for_reads,
            a.reclaim_copied_pages
        );
    }
    if let Some(f) = &s.fdp {
        println!(
            "  FDP               {} handles ({} isolation), {} reclaim groups of {} reclaim units of {} bytes; log: {} host bytes written (HBMW), {} media bytes written (MBMW), {} media bytes erased (MBE)",
            f.handles,
            f.isolation,
            f.reclaim_groups,
            f.reclaim_units_per_group,
            f.reclaim_unit_bytes,
            f.host_bytes_with_metadata_written,
            f.media_bytes_with_metadata_written,
            f.media_bytes_erased
        );
        for h in f.per_handle.iter().filter(|h| h.host_bytes_written > 0) {
            println!(
                "    handle {:<3}      {} host bytes, {} media bytes, WAF {}",
                h.handle,
                h.host_bytes_written,
                h.media_bytes_written,
                h.waf.map_or("-".into(), |w| format!("{w:.3}"))
            );
        }
    }
    if let Some(z) = &s.zoned {
        println!(
            "  zones             {} of {} bytes (capacity {}), open limit {}, active limit {}: {} resets, {} finishes, {} explicit opens, {} implicit closes, {} appends; now {} open, {} active, {} full",
            z.zones,
            z.zone_size_bytes,
            z.zone_capacity_bytes,
            z.max_open_zones,
            z.max_active_zones,
            z.resets,
            z.finishes,
            z.explicit_opens,
            z.implicit_closes,
            z.appends,
            z.open_zones,
            z.active_zones,
            z.full_zones
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

/// Where an engine's files live: one flag group for `join`, `btree` and `kv`.
#[derive(clap::Args)]
pub(crate) struct BackendArgs {
    /// mem: files in RAM; os: real files in --dir; sim: simfs on a simulated drive
    /// (--preset) [default: os for join, mem for btree and kv].
    #[arg(long, value_enum)]
    pub(crate) backend: Option<BackendKind>,
    /// os: the directory for the run's files (it must exist).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// os: open the files with O_DIRECT.
    #[arg(long)]
    pub(crate) direct_io: bool,
    /// sim: the drive (a preset name, see `flashlab presets`, or a TOML file).
    #[arg(long)]
    pub(crate) preset: Option<String>,
    /// sim: logical capacity of the drive, e.g. 4GiB.
    #[arg(long, value_parser = units::parse_size)]
    pub(crate) capacity: Option<u64>,
    /// sim: the drive's age, as `sim --age`: every block at pe=N P/E cycles (its erase
    /// counts start there, so life used starts at N / rated), the data present at the start
    /// retention=T old, and the error model on (cell=slc|mlc|tlc where the preset does not
    /// say).
    #[arg(long, value_name = "pe=N,retention=T")]
    pub(crate) age: Option<flash::Age>,
    /// sim: print the drive's wear report after the run, as `sim --wear` does (erase
    /// counts, life used, projected TBW beside the rated one, days at the run's write
    /// rate); with --json, a `wear` object.
    #[arg(long)]
    pub(crate) wear: bool,
    /// sim: the kind of drive, as `sim --drive`: conventional, fdp (simfs maps the engines'
    /// write-life hints onto its handles) or zoned (simfs runs its zoned log: segments are
    /// zones, host cleaning, zone resets). Default: the preset's.
    #[arg(long, value_enum)]
    pub(crate) drive: Option<DriveKind>,
    /// sim, --drive fdp: reclaim unit handles (default 5: handle 0 and Linux's four
    /// write-life streams).
    #[arg(long, value_name = "N")]
    pub(crate) handles: Option<u16>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BackendKind {
    Mem,
    Os,
    Sim,
}

impl BackendKind {
    /// As `--backend` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            BackendKind::Mem => "mem",
            BackendKind::Os => "os",
            BackendKind::Sim => "sim",
        }
    }
}

impl BackendArgs {
    /// The backend these flags describe (`default` when --backend is absent; `dir` when
    /// --dir is).
    fn resolve(&self, default: BackendKind, dir: Option<PathBuf>) -> Result<lab::backend::Backend> {
        let kind = self.backend.unwrap_or(default);
        if self.handles.is_some() && self.drive != Some(DriveKind::Fdp) {
            bail!("--handles sets up an FDP drive: add --drive fdp");
        }
        if kind != BackendKind::Sim {
            for (given, flag) in [
                (self.age.is_some(), "--age"),
                (self.wear, "--wear"),
                (self.drive.is_some(), "--drive"),
            ] {
                if given {
                    bail!("{flag} applies to a simulated drive: add --backend sim --preset NAME");
                }
            }
        }
        Ok(match kind {
            BackendKind::Mem => lab::backend::Backend::Mem,
            BackendKind::Os => lab::backend::Backend::Os {
                dir: self
                    .dir
                    .clone()
                    .or(dir)
                    .context("--backend os needs --dir DIR")?,
                direct_io: self.direct_io,
                cancel: crate::signals::cancel_token(),
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
                let drive = self.drive.map(|d| match d {
                    DriveKind::Conventional => lab::sim::Drive::Conventional,
                    DriveKind::Fdp => {
                        lab::sim::Drive::Fdp(flash::FdpConfig::new(self.handles.unwrap_or(5)))
                    }
                    DriveKind::Zoned => lab::sim::Drive::Zoned(flash::ZonedConfig::default()),
                });
                if self.age.is_some() || drive.is_some() {
                    p = SsdOverrides {
                        age: self.age.clone(),
                        drive,
                        ..SsdOverrides::default()
                    }
                    .apply(p)?;
                }
                lab::backend::Backend::Sim {
                    preset: Box::new(p),
                }
            }
        })
    }
}

#[derive(clap::Args)]
pub(crate) struct CrashTestArgs {
    /// Seeded crash tests to run (each draws its geometry and 1-4 crash/recover cycles
    /// from its seed).
    #[arg(long, default_value_t = 1000)]
    pub(crate) iterations: u64,
    /// First seed.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
}

/// Runs `iterations` seeded crash tests of `what` on every core and says what they
/// covered. Every seed runs (a failure does not stop the others); each failing seed is
/// printed with the command that reproduces it, and any failure makes the command fail.
pub(crate) fn run_crash_tests(
    what: &str,
    c: &CrashTestArgs,
    test: impl Fn(u64) -> Result<astree::crash::Coverage, String> + Sync,
) -> Result<()> {
    if c.iterations == 0 {
        bail!("--iterations 0: nothing to test (give at least 1)");
    }
    let Some(last) = c.seed.checked_add(c.iterations - 1) else {
        bail!(
            "--seed {} --iterations {}: the seeds would pass {} (u64's largest); start lower",
            c.seed,
            c.iterations,
            u64::MAX
        );
    };
    let pb = progress_bar(c.iterations, "crash-test");
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(c.iterations as usize);
    let next = std::sync::atomic::AtomicU64::new(c.seed);
    let done = std::sync::atomic::AtomicU64::new(0);
    let cancel = crate::signals::cancel_token();
    let outcomes: Vec<(astree::crash::Coverage, Vec<(u64, String)>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut total = astree::crash::Coverage::default();
                    let mut failed = Vec::new();
                    loop {
                        if cancel.is_cancelled() {
                            break;
                        }
                        let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if seed > last || seed < c.seed {
                            break;
                        }
                        match test(seed) {
                            Ok(cov) => total.add(&cov),
                            Err(e) => failed.push((seed, e)),
                        }
                        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                        pb.set_position(n);
                    }
                    (total, failed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a crash-test thread panicked"))
            .collect()
    });
    pb.finish_and_clear();
    let mut total = astree::crash::Coverage::default();
    let mut failed = Vec::new();
    for (cov, f) in outcomes {
        total.add(&cov);
        failed.extend(f);
    }
    failed.sort();
    let ran = done.load(std::sync::atomic::Ordering::Relaxed);
    if cancel.is_cancelled() {
        eprintln!(
            "flashlab {what} crash-test: interrupted after {ran} of {} seeds ({} failed)",
            c.iterations,
            failed.len()
        );
        std::process::exit(crate::signals::EXIT_INTERRUPTED);
    }
    for (seed, e) in &failed {
        eprintln!("flashlab {what} crash-test: {e}");
        eprintln!("  reproduce: flashlab {what} crash-test --iterations 1 --seed {seed}");
    }
    let range = format!("seeds {}..={last}", c.seed);
    if !failed.is_empty() {
        bail!(
            "{} of {ran} seeded crash tests ({range}) failed (listed above); {} passed",
            failed.len(),
            ran - failed.len() as u64
        );
    }
    println!(
        "flashlab {what} crash-test: all {ran} seeded tests ({range}) recovered the last durable commit: {}",
        total.summary()
    );
    Ok(())
}

/// This process's peak resident memory (Linux VmHWM), if known.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn parse_unwritten_reads(s: &str) -> Result<flash::UnwrittenReads, String> {
    match s {
        "zeros" => Ok(flash::UnwrittenReads::Zeros),
        "flash" => Ok(flash::UnwrittenReads::Flash),
        _ => Err(format!(
            "{s:?} is not a way to serve unwritten reads: give zeros or flash"
        )),
    }
}

fn parse_granularity(s: &str) -> Result<flash::CacheGranularity, String> {
    match s {
        "entry" => Ok(flash::CacheGranularity::Entry),
        "page" => Ok(flash::CacheGranularity::Page),
        _ => Err(format!("{s:?} is not a granularity: give entry or page")),
    }
}
