//! Device statistics: counters and latency distributions, as reported by `--json` and the
//! report.

use crate::Op;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency distribution of one operation type, recorded with 3 significant digits.
#[derive(Clone, Debug)]
pub struct LatencyRecorder {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder {
            // 1 ns to ~19.5 hours at 3 significant digits; longer latencies saturate.
            hist: Histogram::new_with_bounds(1, 1 << 46, 3).expect("valid histogram bounds"),
            sum_ns: 0,
        }
    }
}

impl LatencyRecorder {
    #[inline]
    pub fn record(&mut self, latency_ns: u64) {
        self.hist.saturating_record(latency_ns);
        self.sum_ns += latency_ns as u128;
    }

    pub fn summary(&self) -> LatencySummary {
        let count = self.hist.len();
        if count == 0 {
            return LatencySummary::default();
        }
        LatencySummary {
            count,
            mean: (self.sum_ns / count as u128) as u64,
            p50: self.hist.value_at_quantile(0.50),
            p99: self.hist.value_at_quantile(0.99),
            p999: self.hist.value_at_quantile(0.999),
            max: self.hist.max(),
        }
    }
}

/// Latency summary in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Per-op latency recorders and host-side counters, shared by every device model.
#[derive(Clone, Debug, Default)]
pub struct HostRecorder {
    pub read: LatencyRecorder,
    pub write: LatencyRecorder,
    pub trim: LatencyRecorder,
    pub flush: LatencyRecorder,
    pub host_read_bytes: u64,
    pub host_write_bytes: u64,
    pub trim_commands: u64,
    pub trim_bytes: u64,
    pub first_submit_ns: Option<u64>,
    pub last_completion_ns: u64,
}

impl HostRecorder {
    #[inline]
    pub fn record(&mut self, op: Op, len_bytes: u64, submit_ns: u64, completion_ns: u64) {
        if self.first_submit_ns.is_none() {
            self.first_submit_ns = Some(submit_ns);
        }
        self.last_completion_ns = self.last_completion_ns.max(completion_ns);
        let latency_ns = completion_ns - submit_ns;
        match op {
            Op::Read => {
                self.read.record(latency_ns);
                self.host_read_bytes += len_bytes;
            }
            Op::Write => {
                self.write.record(latency_ns);
                self.host_write_bytes += len_bytes;
            }
            Op::Trim | Op::VTrim | Op::FTrim => {
                self.trim.record(latency_ns);
                self.trim_commands += 1;
                if op == Op::Trim {
                    self.trim_bytes += len_bytes;
                }
            }
            Op::Flush => self.flush.record(latency_ns),
        }
    }

    /// Fills the host-side fields of `s`.
    pub fn fill(&self, s: &mut DeviceStats) {
        s.read_latency_ns = self.read.summary();
        s.write_latency_ns = self.write.summary();
        s.trim_latency_ns = self.trim.summary();
        s.flush_latency_ns = self.flush.summary();
        s.host_ops = s.read_latency_ns.count
            + s.write_latency_ns.count
            + s.trim_latency_ns.count
            + s.flush_latency_ns.count;
        s.host_read_bytes = self.host_read_bytes;
        s.host_write_bytes = self.host_write_bytes;
        s.trim_commands = self.trim_commands;
        s.trim_bytes = self.trim_bytes;
        s.simulated_ns = self
            .first_submit_ns
            .map_or(0, |first| self.last_completion_ns.saturating_sub(first));
        if s.simulated_ns > 0 {
            let secs = s.simulated_ns as f64 / 1e9;
            s.iops = s.host_ops as f64 / secs;
            s.read_mb_per_s = self.host_read_bytes as f64 / 1e6 / secs;
            s.write_mb_per_s = self.host_write_bytes as f64 / 1e6 / secs;
        }
    }
}

/// Everything a device reports. "Pages" are FTL mapping units (`mapping_unit_bytes`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceStats {
    pub simulated_ns: u64,
    pub host_ops: u64,
    pub iops: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    pub host_read_bytes: u64,
    pub host_write_bytes: u64,
    /// Bytes of host reads (in mapping units) of space never written or trimmed: an SSD
    /// answers them with zeros without reading flash, so they make reads look fast (0 on
    /// drives that read every sector, such as the HDD).
    pub unwritten_read_bytes: u64,
    /// Whether those reads were served from flash (`[ssd] unwritten_reads = "flash"`)
    /// rather than answered with zeros.
    pub unwritten_reads_from_flash: bool,
    pub read_latency_ns: LatencySummary,
    pub write_latency_ns: LatencySummary,
    pub trim_latency_ns: LatencySummary,
    pub flush_latency_ns: LatencySummary,
    pub mapping_unit_bytes: u64,
    /// Flash units written (host data, GC copies, translation pages of a cached mapping
    /// table, SLC-mode programs) / host units written; `None` before any host write (and on
    /// an HDD).
    pub waf: Option<f64>,
    pub host_write_pages: u64,
    pub flash_write_pages: u64,
    pub gc_copied_pages: u64,
    /// Logical space holding data now: mapping units mapped (host data, and a cached
    /// mapping table's translation pages) × the unit. What garbage collection must keep;
    /// it grows with every new address written and falls only with TRIM (0 on drives
    /// without a mapping table, such as the HDD).
    #[serde(default)]
    pub mapped_bytes: u64,
    pub erases: u64,
    pub erase_count_min: u32,
    pub erase_count_max: u32,
    pub erase_count_mean: f64,
    pub erase_count_stddev: f64,
    pub trim_commands: u64,
    /// Byte ranges carried by TRIM commands.
    pub trim_ranges: u64,
    pub trim_bytes: u64,
    pub trimmed_pages: u64,
    /// In-drive time spent on TRIM-family commands (foreground and background work).
    pub trim_busy_ns: u64,
    /// Host-interface time of TRIM-family commands (command round trips and payloads).
    pub trim_interface_ns: u64,
    /// Time TRIM-family commands waited for an earlier TRIM's settling work (`[ssd.trim]
    /// settle_ns`): what a burst of TRIMs costs beyond idle ones.
    #[serde(default)]
    pub trim_settle_wait_ns: u64,
    /// Time reads, writes and flushes waited for a TRIM's settling work, summed over the
    /// commands (several waiting at once each count).
    #[serde(default)]
    pub io_settle_wait_ns: u64,
    /// Metadata blocks fTrim read from flash.
    pub ftrim_metadata_reads: u64,
    /// Under the priority scheduler (`[ssd.scheduler]`): host reads that suspended a
    /// maintenance program or erase.
    #[serde(default)]
    pub maintenance_suspensions: u64,
    /// Under the priority scheduler: host programs that waited for their die's queued
    /// maintenance up to the erase of the block they opened.
    #[serde(default)]
    pub maintenance_forced_drains: u64,
    /// Under the priority scheduler, on a drive with a write buffer: writes that found the
    /// buffer full and were admitted when a buffered program was expected to end.
    #[serde(default)]
    pub write_buffer_waits: u64,
    /// How much later than expected those programs ended, in all (reads that arrived
    /// after the write overtook or suspended them): how optimistic those writes'
    /// latencies are.
    #[serde(default)]
    pub write_buffer_slip_ns: u64,
    /// Bytes host writes programmed in SLC mode, on drives with an SLC cache (whole
    /// multi-plane pages).
    pub slc_write_bytes: u64,
    /// Bytes folded from SLC mode into TLC (each page an SLC read and a TLC program).
    pub slc_folded_bytes: u64,
    /// Data in the SLC cache awaiting a fold, now (None without an SLC cache).
    pub slc_held_bytes: Option<u64>,
    /// Of `flash_write_pages`: host pages programmed in SLC mode (each also counts its TLC
    /// program, direct or at the fold, among the FTL's).
    pub slc_program_pages: u64,
    /// Of `flash_write_pages`: host pages' TLC programs (direct, or folds out of SLC).
    pub host_program_pages: u64,
    /// Host pages of one GC cycle (a block on every die); 0 where the drive has none.
    pub gc_cycle_pages: u64,
    /// The measured host writes are fewer than one GC cycle on a drive whose GC is in
    /// play: their WAF and latency depend on where in the cycle the window fell, and are
    /// not the drive's steady state.
    pub window_shorter_than_gc_cycle: bool,
    /// On drives with wear leveling on (`[ssd.wear_leveling]`): static wear leveling's work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wear_leveling: Option<WearLevelingStats>,
    /// On drives with a cached mapping table (`[ssd.mapping_cache]`): its lookups and
    /// translation page traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping_cache: Option<MappingCacheStats>,
    /// On drives with the error model (`[ssd.aging]`): retries, uncorrectable reads, reclaims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aging: Option<crate::aging::AgingStats>,
    /// On drives with FDP (`[ssd.fdp]`): the statistics log and per-handle bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fdp: Option<crate::placement::FdpStats>,
    /// On zoned drives (`[ssd.zoned]`): zone resets, finishes and states.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zoned: Option<ZonedStats>,
}

/// A cached mapping table's counters. Translation pages are mapping units.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MappingCacheStats {
    /// `dram` or `hmb`.
    pub location: String,
    /// `entry` (single entries cached) or `page` (whole translation pages).
    pub granularity: String,
    pub cache_bytes: u64,
    pub cache_entries: u64,
    pub entry_bytes: u32,
    pub translation_pages: u64,
    /// Lookups of host reads and writes.
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses); `None` without lookups.
    pub hit_ratio: Option<f64>,
    /// Misses on an entry (or page) never cached before: no cache size removes them.
    pub cold_misses: u64,
    /// cold_misses / misses; `None` without misses.
    pub cold_miss_share: Option<f64>,
    /// Translation pages read from flash: misses and read-modify-writes.
    pub translation_reads: u64,
    /// Translation pages written (dirty evictions, batch updates): part of
    /// `flash_write_pages`.
    pub translation_writes: u64,
    /// Translation pages GC copied: part of `gc_copied_pages`.
    pub translation_gc_copies: u64,
}

/// Static wear leveling's counters; its copies are part of `gc_copied_pages` and its
/// erases of `erases`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WearLevelingStats {
    /// Cold blocks moved and erased.
    pub moves: u64,
    /// Pages (mapping units) moved off them.
    pub copied_pages: u64,
}

impl DeviceStats {
    /// Sets the erase-spread fields from per-block erase counts.
    pub fn set_erase_spread(&mut self, erase_counts: &[u32]) {
        if erase_counts.is_empty() {
            return;
        }
        let n = erase_counts.len() as f64;
        let mean = erase_counts.iter().map(|&c| c as f64).sum::<f64>() / n;
        let var = erase_counts
            .iter()
            .map(|&c| (c as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        self.erase_count_min = *erase_counts.iter().min().unwrap_or(&0);
        self.erase_count_max = *erase_counts.iter().max().unwrap_or(&0);
        self.erase_count_mean = mean;
        self.erase_count_stddev = var.sqrt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_latencies() {
        let mut r = LatencyRecorder::default();
        for v in 1..=1000u64 {
            r.record(v * 1000);
        }
        let s = r.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.mean, 500_500);
        assert!((s.p50 as i64 - 500_000).abs() <= 500, "{}", s.p50);
        assert!((s.p99 as i64 - 990_000).abs() <= 1000, "{}", s.p99);
    }

    #[test]
    fn host_recorder_computes_rates() {
        let mut h = HostRecorder::default();
        h.record(Op::Write, 4096, 0, 100);
        h.record(Op::Read, 4096, 500_000_000, 1_000_000_000);
        let mut s = DeviceStats::default();
        h.fill(&mut s);
        assert_eq!(s.simulated_ns, 1_000_000_000);
        assert_eq!(s.host_ops, 2);
        assert!((s.iops - 2.0).abs() < 1e-9);
    }
}

/// Counters of a zoned drive ([`crate::zoned`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ZonedStats {
    pub zones: u32,
    pub zone_size_bytes: u64,
    pub zone_capacity_bytes: u64,
    pub max_open_zones: u32,
    pub max_active_zones: u32,
    pub resets: u64,
    pub finishes: u64,
    pub explicit_opens: u64,
    /// Implicitly opened zones the drive closed to open another.
    pub implicit_closes: u64,
    pub appends: u64,
    pub open_zones: u32,
    pub active_zones: u32,
    pub full_zones: u32,
}
