//! From calibrate's measurements to a drive's parameters, through the simulator's own
//! timing model (`flash::ssd`): each fitted value inverts the equation the model uses for
//! what the probe saw, and says which probe set it, or that it is only a bound, or that no
//! probe can see it (an assumption).
//!
//! The model's equations (`oh` command overhead, `tR` array read, `tP` program, `ch` and
//! `host` channel and link rates, `S` superpage bytes, `D` dies, `u` = 4 KiB):
//! - a flush with nothing pending takes `oh`;
//! - a read of `k` units inside one superpage takes `oh + tR + k·u/ch + k·u/host`;
//! - a 4 KiB write completes when its data has crossed the link, unless it fills a
//!   superpage: then it also waits for the superpage's transfer and program, `X = S/ch + tP`
//!   (with a write buffer, the flush after it waits instead); one write in `S/u` does;
//! - sustained writes run at `min(link, D·S/X)`: each die transfers and programs a
//!   superpage at a time;
//! - a discard of `n` units takes `oh + trim overhead + n·per unit`; a non-queued one waits
//!   for the commands before it and holds back those after.

use super::probe::{self, series_rate, Measurements, Series, UNIT_BYTES};
use super::sim_target::SimTarget;
use super::stats::{line, median, quantile, sync_writes, SyncWrites};
use flash::mapping::FtlKind;
use flash::ssd::{GcConfig, SsdTiming, TrimConfig};
use flash::{DeviceConfig, GcPolicy, Geometry, Preset, SlcCacheConfig, SsdConfig};

/// A sustained rate at or above this share of the link rate is taken as link-bound: what
/// is behind the link could be faster, so values fitted from it are lower bounds.
const LINK_BOUND_SHARE: f64 = 0.9;
/// A rate falling below this share of the rate before it is a drop...
const DROP_SHARE: f64 = 0.9;
/// ...if two lines explain the series this much better than one (a step, not noise).
const DROP_ERROR_SHARE: f64 = 0.25;
/// Assumed values, for what no probe sees (each says why where it is written).
const ASSUMED_PAGES_PER_BLOCK: u32 = 256;
const ASSUMED_OP: f64 = 0.07;
const ASSUMED_ERASE_NS: u64 = 3_500_000;
const ASSUMED_SUPERPAGE_BYTES: u64 = 16 << 10;
const ASSUMED_DIES: u32 = 8;
/// The most dies the fit considers.
const MAX_DIES: u32 = 1024;
/// The over-provisioning of the model drives the fit times reads on (at most the 10 a
/// geometry allows): enough free blocks per die with [`MAX_DIES`] dies.
const READ_MODEL_OP: f64 = 4.0;
const ASSUMED_BITS_PER_CELL: u32 = 3;
const ASSUMED_FOLD_IDLE_NS: u64 = 1_000_000;
/// The smallest array read or program time a fit gives (a measured value below it means the
/// probe saw nothing of it).
const MIN_FLASH_NS: u64 = 1_000;
/// The command overhead is measured unless the writes give it below the idle flush's by
/// more than this share.
const OVERHEAD_AGREEMENT: f64 = 0.1;

/// Where a fitted value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// Set by this probe (as the model explains its numbers).
    Measured(String),
    /// The probe gives a bound only; the value is that bound. (probe, why)
    Bound(String, String),
    /// Measured together with a value that is assumed or only bounded: the two together
    /// give what the probe saw, this one alone may not be the drive's. (probe, why)
    Tied(String, String),
    /// No probe sees it: an assumption, and why.
    Assumed(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Param<T> {
    pub value: T,
    pub basis: Basis,
}

fn measured<T>(value: T, probe: &str) -> Param<T> {
    Param {
        value,
        basis: Basis::Measured(probe.to_string()),
    }
}

fn bound<T>(value: T, probe: &str, why: String) -> Param<T> {
    Param {
        value,
        basis: Basis::Bound(probe.to_string(), why),
    }
}

fn tied<T>(value: T, probe: &str, why: &str) -> Param<T> {
    Param {
        value,
        basis: Basis::Tied(probe.to_string(), why.to_string()),
    }
}

fn assumed<T>(value: T, why: impl Into<String>) -> Param<T> {
    Param {
        value,
        basis: Basis::Assumed(why.into()),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SlcFit {
    pub program_ns: Param<u64>,
    pub max_fraction: Param<f64>,
    pub bits_per_cell: Param<u32>,
    pub fold_idle_ns: Param<u64>,
}

/// A drive as calibrate sees it: every field of an SSD preset with its basis.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub logical_bytes: Param<u64>,
    pub op: Param<f64>,
    pub dies: Param<u32>,
    pub channels: Param<u32>,
    pub superpage_bytes: Param<u64>,
    pub pages_per_block: Param<u32>,
    pub mapping_unit_bytes: Param<u32>,
    pub read_ns: Param<u64>,
    pub program_ns: Param<u64>,
    pub erase_ns: Param<u64>,
    pub channel_bytes_per_s: Param<u64>,
    pub host_bytes_per_s: Param<u64>,
    pub command_overhead_ns: Param<u64>,
    pub write_ack_ns: Param<u64>,
    pub write_cache_bytes: Param<u64>,
    /// `Err`: no SLC cache in the preset, and why (no drop in the sequential write rate).
    pub slc: Result<SlcFit, Basis>,
    pub gc: Param<GcPolicy>,
    pub gc_free_blocks: Param<u32>,
    pub trim_queued: Param<bool>,
    pub trim_command_overhead_ns: Param<u64>,
    pub trim_per_page_ns: Param<u64>,
    pub trim_settle_ns: Param<u64>,
    /// Measured but not part of the model: (what, value), for the report.
    pub observations: Vec<(String, String)>,
}

// ---- statistics -------------------------------------------------------------------------

/// A line's (intercept, slope).
type Line = (f64, f64);

/// A series' rate, and where it drops if it does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateFit {
    /// Bytes per second before the drop (or throughout).
    pub before: f64,
    /// After the drop, if there is one.
    pub drop: Option<Drop>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drop {
    pub after: f64,
    /// Bytes completed when the rate dropped, and when.
    pub at_bytes: u64,
    pub at_ns: u64,
}

/// Fits two lines to (bytes completed, time) at every split leaving at least a sixteenth of
/// the points on each side, and keeps the split with the least squared error. The second
/// line is a drop if its rate is below [`DROP_SHARE`] of the first's and the two lines'
/// error is at most [`DROP_ERROR_SHARE`] of one line's; otherwise the series has one rate.
pub fn rate_drop(s: &Series) -> RateFit {
    let p = s.points();
    let n = p.len();
    let one_rate = RateFit {
        before: series_rate(s),
        drop: None,
    };
    let min = (n / 16).max(3);
    if n < 2 * min {
        return one_rate;
    }
    // Prefix sums (count, x, y, x², xy, y²) for least squares of any prefix and suffix.
    let mut pre = vec![[0.0f64; 6]; n + 1];
    for (i, &(x, y)) in p.iter().enumerate() {
        let (x, y) = (x / 1e6, y / 1e6); // MB and ms keep the sums well scaled
        for (k, v) in [1.0, x, y, x * x, x * y, y * y].into_iter().enumerate() {
            pre[i + 1][k] = pre[i][k] + v;
        }
    }
    // The line (intercept, slope) through points lo..hi, and its squared error.
    let fit = |lo: usize, hi: usize| -> Option<(Line, f64)> {
        let d = |k: usize| pre[hi][k] - pre[lo][k];
        let (c, sx, sy, sxx, sxy, syy) = (d(0), d(1), d(2), d(3), d(4), d(5));
        let den = c * sxx - sx * sx;
        if den <= 0.0 {
            return None;
        }
        let b = (c * sxy - sx * sy) / den;
        let a = (sy - b * sx) / c;
        let sse = syy - 2.0 * a * sy - 2.0 * b * sxy + c * a * a + 2.0 * a * b * sx + b * b * sxx;
        Some(((a, b), sse.max(0.0)))
    };
    let mut best: Option<(f64, Line, Line)> = None;
    for k in min..=n - min {
        let (Some((l1, e1)), Some((l2, e2))) = (fit(0, k), fit(k, n)) else {
            continue;
        };
        if best.is_none_or(|(e, ..)| e1 + e2 < e) {
            best = Some((e1 + e2, l1, l2));
        }
    }
    let Some((two_lines_error, (a1, b1), (a2, b2))) = best else {
        return one_rate;
    };
    let one_line_error = fit(0, n).map_or(0.0, |f| f.1);
    // Slopes are ms per MB, that is ns per byte.
    let rate = |slope: f64| if slope > 0.0 { 1e9 / slope } else { 0.0 };
    let (before, after) = (rate(b1), rate(b2));
    if !(before > 0.0
        && after > 0.0
        && after < DROP_SHARE * before
        && two_lines_error <= DROP_ERROR_SHARE * one_line_error)
    {
        return one_rate;
    }
    // The drop is where the two lines meet (in MB and ms), within the points.
    let x = ((a2 - a1) / (b1 - b2)).clamp(p[0].0 / 1e6, p[n - 1].0 / 1e6);
    RateFit {
        before,
        drop: Some(Drop {
            after,
            at_bytes: (x * 1e6).round() as u64,
            at_ns: ((a1 + b1 * x) * 1e6).round() as u64,
        }),
    }
}

// ---- the sync-write probe ---------------------------------------------------------------

// ---- the fit ----------------------------------------------------------------------------

const P_IDLE_FLUSH: &str = "flushes of an idle drive";
const P_SYNC: &str = "4 KiB writes each followed by a flush, QD1";
const P_SEQ_WRITE: &str = "sequential 1 MiB writes at QD8 over the region";
const P_READ_SIZES: &str = "reads of 4 KiB up to a superpage, QD1";
const P_SEQ_READ: &str = "sequential 1 MiB reads at QD8";
const P_READS_QD1: &str = "random 4 KiB reads, QD1";
const P_READS_QD32: &str = "random 4 KiB reads, QD32";
const P_WRITES_QD1: &str = "random 4 KiB writes, QD1";
const P_BURST: &str = "burst of 64 KiB writes at QD32";
const P_DISCARDS: &str = "discards of several sizes, QD1, each after an idle pause";
const P_DISCARD_BURST: &str = "discards back to back, QD1";
const P_DISCARD_UNDER_READS: &str = "a discard while QD1 reads run";
const P_TRIMMED_READS: &str = "reads of discarded data, QD1";
const P_LARGE_READS: &str = "1 MiB reads at random places, QD1";

fn ns(s: f64) -> u64 {
    (s * 1e9).round().max(0.0) as u64
}

/// Fits the drive's parameters to `m`.
pub fn fit(m: &Measurements) -> Fitted {
    let u = UNIT_BYTES as f64;
    let mut obs: Vec<(String, String)> = Vec::new();

    // The link: reads of discarded data cross it with no flash behind them, so their
    // latency grows with size at the link's rate; without them (a file), sequential reads
    // run at the slowest of the link, the channels and the dies: a lower bound.
    let seq_rate = series_rate(&m.seq_read).max(1.0);
    let host_bytes_per_s = match link_from_trimmed_reads(m, seq_rate) {
        Some(rate) => measured(
            rate as u64,
            &format!("{P_TRIMMED_READS}: latency per byte (sequential reads ran at {:.0} MB/s)", seq_rate / 1e6),
        ),
        None => bound(
            seq_rate as u64,
            P_SEQ_READ,
            "sequential reads run at the slowest of the link, the channels and the dies, so the link is at least this fast (and this fast where it is the slowest, as on most drives)".into(),
        ),
    };
    let host = host_bytes_per_s.value.max(1) as f64;

    // Command overhead: all a flush with nothing to wait for takes, and all a write that
    // waits for no program takes besides its transfer. Each is at least the overhead (a
    // real flush may do more, a real write may be buffered): the smaller is taken.
    let writes: Vec<u64> = m.sync_writes_ns.iter().map(|p| p.0).collect();
    let by_flush = median(&m.idle_flush_ns);
    let by_write = quantile(&writes, 0.25)
        .min(quantile(&m.writes_qd1.latencies_ns, 0.25))
        .saturating_sub(ns(u / host));
    let oh_ns = by_flush.min(by_write);
    let how = if by_flush <= by_write {
        format!("{P_IDLE_FLUSH}: median latency (less than a write's, {by_write} ns)")
    } else {
        format!("{P_SYNC} and {P_WRITES_QD1}: lower-quartile write latency less the link transfer (less than an idle flush's, {by_flush} ns)")
    };
    // A write is never quicker than the round trip and its transfer (a buffered one adds
    // its acknowledgement), so where the writes give no less than the flush, the flush is
    // the round trip: measured. Where they give well less, the write's estimate is low by
    // its transfer at a link faster than it was taken to be, or the flush's high by work
    // of its own: the truth lies between them.
    let agree = by_write as f64 >= (1.0 - OVERHEAD_AGREEMENT) * by_flush as f64;
    let command_overhead_ns = if agree {
        measured(oh_ns, &how)
    } else {
        bound(
            oh_ns,
            &how,
            format!(
                "the writes less their link transfer ({by_write} ns) take more than {:.0}% less than the idle flush ({by_flush} ns): a write's transfer at a link faster than measured, or a flush doing more than a round trip; the overhead lies between the two",
                OVERHEAD_AGREEMENT * 100.0
            ),
        )
    };
    let oh_measured = agree;
    let oh = oh_ns as f64 / 1e9;

    // Superpage size, program wait and write buffer from the write + flush pairs.
    let sync = sync_writes(&m.sync_writes_ns);
    let superpage_bytes = match sync {
        Some(s) => measured(
            s.units_per_superpage * UNIT_BYTES,
            &format!(
                "{P_SYNC}: one write in {} waited for a program",
                s.units_per_superpage
            ),
        ),
        None => assumed(
            ASSUMED_SUPERPAGE_BYTES,
            "no 4 KiB write or flush waited at regular intervals, as a superpage's program makes them (every write waited, none did, or they waited for something else)",
        ),
    };
    let sp = superpage_bytes.value as f64;

    // Channel and array read from reads of 1..superpage units.
    let medians: Vec<(f64, f64)> = m
        .read_by_size_ns
        .iter()
        .map(|(b, l)| (*b as f64, median(l) as f64 / 1e9))
        .collect();
    let slope = line(&medians);
    let channel_bytes_per_s = match slope {
        Some((_, b)) if b - 1.0 / host > 0.05 * b => {
            measured(
                (1.0 / (b - 1.0 / host)) as u64,
                &format!("{P_READ_SIZES}: latency per byte less the link's"),
            )
        }
        _ => assumed(
            host as u64,
            "read latency does not grow with size faster than the link explains (superpage of one unit or a fast channel): set to the link rate",
        ),
    };
    let ch = channel_bytes_per_s.value.max(1) as f64;
    let read_1 = median(&m.reads_qd1.latencies_ns) as f64 / 1e9;
    let tr = match (slope, &channel_bytes_per_s.basis) {
        (Some((a, _)), Basis::Measured(_)) => a - oh,
        _ => read_1 - oh - u / ch - u / host,
    };
    let read_ns = if ns(tr) < MIN_FLASH_NS {
        assumed(
            MIN_FLASH_NS,
            format!(
                "a 4 KiB read took {:.1} µs, no more than the command overhead and transfers: the array read is not visible",
                read_1 * 1e6
            ),
        )
    } else if let (Basis::Measured(_), true) = (&channel_bytes_per_s.basis, oh_measured) {
        measured(
            ns(tr),
            &format!("{P_READ_SIZES}: latency at zero size less the command overhead"),
        )
    } else if let Basis::Measured(_) = channel_bytes_per_s.basis {
        tied(
            ns(tr),
            P_READ_SIZES,
            "latency at zero size less the command overhead, which is only bounded: the two together are what the probe measured",
        )
    } else {
        tied(
            ns(tr),
            P_READS_QD1,
            "with the channel rate assumed, this holds the array read and any channel time beyond the link's: their sum is what the probe measured",
        )
    };

    // Sustained writes: dies and program times.
    // Write buffer (before the write rates: its filling is a drop of its own).
    // The program wait X: with a buffer, the flush's wait plus the write's time from its
    // data crossing the link (oh + u/host after submission) to its acknowledgement.
    let x = sync.map(|s| {
        let wait = s.wait_ns as f64 / 1e9;
        if s.buffered {
            wait + (s.fast_write_ns as f64 / 1e9 - oh - u / host).max(0.0)
        } else {
            wait
        }
    });
    let (write_cache_bytes, write_ack_ns) = fit_buffer(m, sync, x, oh, host);
    let seq = without_buffer_drop(rate_drop(&m.seq_write), &write_cache_bytes);
    let reads = ReadPath {
        command_overhead_ns: oh_ns,
        read_ns: read_ns.value,
        channel_bytes_per_s: channel_bytes_per_s.value,
        host_bytes_per_s: host_bytes_per_s.value,
        superpage_bytes: superpage_bytes.value,
    };
    obs.push((
        "sequential write".into(),
        match seq.drop {
            Some(d) => format!(
                "{:.0} MB/s for the first {} MiB, then {:.0} MB/s",
                seq.before / 1e6,
                d.at_bytes >> 20,
                d.after / 1e6
            ),
            None => format!(
                "{:.0} MB/s over {} MiB, no drop",
                seq.before / 1e6,
                m.region_bytes >> 20
            ),
        },
    ));
    let read_path_measured = [
        &read_ns.basis,
        &channel_bytes_per_s.basis,
        &command_overhead_ns.basis,
    ]
    .iter()
    .all(|b| matches!(b, Basis::Measured(_)));
    let dies = fit_dies(m, &seq, x, sp, host, &reads, read_path_measured, &mut obs);
    let (program_ns, slc) = fit_programs(m, &seq, x, sp, ch, &dies);
    let d = dies.value;
    let ppb = pages_per_block(m.capacity_bytes, d, superpage_bytes.value);
    let channels = fit_channels(m, &dies, &reads, read_path_measured, &mut obs);
    // A buffer whose size did not show gets docs/sources.md's rule for one ("The write
    // buffer": two superpages per die), as the presets do.
    let write_cache_bytes = match write_cache_bytes.basis {
        Basis::Assumed(_) if write_cache_bytes.value > 0 => assumed(
            2 * d as u64 * superpage_bytes.value,
            "writes are acknowledged before their programs, but the burst never filled the buffer (or filled it before the fit resolves a drop), so its size does not show: two superpages per die, the rule the presets follow (docs/sources.md, \"The write buffer\")",
        ),
        _ => write_cache_bytes,
    };

    // Discards.
    let (trim_command_overhead_ns, trim_per_page_ns) = fit_discards(m, &command_overhead_ns);
    let trim_settle_ns = fit_settle(m);
    let trim_queued = fit_queued(m);

    // Report-only observations.
    let r1 = &m.reads_qd1;
    let r32 = &m.reads_qd32;
    obs.push((
        "random 4 KiB reads".into(),
        format!(
            "QD1 {:.0} IOPS (p50 {:.1} µs, p99 {:.1} µs); QD32 {:.0} IOPS (p50 {:.1} µs): parallelism {:.1}x",
            r1.ops_per_s(),
            median(&r1.latencies_ns) as f64 / 1e3,
            quantile(&r1.latencies_ns, 0.99) as f64 / 1e3,
            r32.ops_per_s(),
            median(&r32.latencies_ns) as f64 / 1e3,
            r32.ops_per_s() / r1.ops_per_s().max(1e-9)
        ),
    ));
    let w1 = &m.writes_qd1;
    let w32 = &m.writes_qd32;
    obs.push((
        "random 4 KiB writes".into(),
        format!(
            "QD1 {:.0} IOPS (p50 {:.1} µs, p99 {:.1} µs); QD32 {:.0} IOPS",
            w1.ops_per_s(),
            median(&w1.latencies_ns) as f64 / 1e3,
            quantile(&w1.latencies_ns, 0.99) as f64 / 1e3,
            w32.ops_per_s()
        ),
    ));
    obs.push(("sequential read".into(), format!("{:.0} MB/s", host / 1e6)));
    obs.push((
        "reads of data just written".into(),
        format!(
            "p50 {:.1} µs vs {:.1} µs for older data (the model reads everything from flash: not fitted)",
            median(&m.read_after_write_ns) as f64 / 1e3,
            median(&r1.latencies_ns) as f64 / 1e3
        ),
    ));
    obs.push(("discards".into(), m.discard_kind.clone()));
    obs.push((
        "pauses".into(),
        format!(
            "{} s idle between probes, for the drive to fold or drain",
            m.pauses_ns
                .iter()
                .map(|p| format!("{:.1}", *p as f64 / 1e9))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ));

    Fitted {
        logical_bytes: measured(
            m.capacity_bytes / UNIT_BYTES * UNIT_BYTES,
            "the drive's size",
        ),
        op: assumed(
            ASSUMED_OP,
            "spare space shows only once garbage collection runs, after the drive is full",
        ),
        dies,
        channels,
        superpage_bytes,
        pages_per_block: assumed(
            ppb,
            format!("block size shows only through garbage collection: {ASSUMED_PAGES_PER_BLOCK} pages, or fewer (down to {}) where the drive would have under {} blocks per die", flash::preset::MIN_PAGES_PER_BLOCK, flash::preset::MIN_BLOCKS_PER_DIE),
        ),
        mapping_unit_bytes: assumed(
            UNIT_BYTES as u32,
            "the probes write whole 4 KiB units; a larger mapping unit is not probed",
        ),
        read_ns,
        program_ns,
        erase_ns: assumed(
            ASSUMED_ERASE_NS,
            "erases happen only in garbage collection, which the probes do not reach",
        ),
        channel_bytes_per_s,
        host_bytes_per_s,
        command_overhead_ns,
        write_ack_ns,
        write_cache_bytes,
        slc,
        gc: assumed(GcPolicy::Greedy, "garbage collection is not probed"),
        gc_free_blocks: assumed(2, "garbage collection is not probed"),
        trim_queued,
        trim_command_overhead_ns,
        trim_per_page_ns,
        trim_settle_ns,
        observations: obs,
    }
}

/// The link's rate from reads of discarded data (bytes per second), if they grow with
/// size as a link does: a positive slope, and a rate no slower than the sequential reads
/// (`seq_rate`, which the link carried) by more than 10%.
fn link_from_trimmed_reads(m: &Measurements, seq_rate: f64) -> Option<f64> {
    let points: Vec<(f64, f64)> = m
        .trimmed_reads_ns
        .iter()
        .map(|(b, l)| (*b as f64, median(l) as f64 / 1e9))
        .collect();
    if points.len() < 3 {
        return None;
    }
    let (_, per_byte) = line(&points)?;
    let rate = 1.0 / per_byte;
    (per_byte > 0.0 && rate >= 0.9 * seq_rate).then(|| rate.max(seq_rate))
}

/// [`ASSUMED_PAGES_PER_BLOCK`], halved while the drive would have fewer than
/// [`flash::preset::MIN_BLOCKS_PER_DIE`] blocks per die (as scaling a preset down does), so
/// that GC's reserve stays a small part of the spare space.
fn pages_per_block(capacity_bytes: u64, dies: u32, superpage_bytes: u64) -> u32 {
    let mut ppb = ASSUMED_PAGES_PER_BLOCK;
    let per_die = capacity_bytes as f64 * (1.0 + ASSUMED_OP) / dies.max(1) as f64;
    while per_die / (superpage_bytes as f64 * ppb as f64) < flash::preset::MIN_BLOCKS_PER_DIE as f64
        && ppb / 2 >= flash::preset::MIN_PAGES_PER_BLOCK
    {
        ppb /= 2;
    }
    ppb
}

/// What the model needs to time a random read: the fitted read path.
struct ReadPath {
    command_overhead_ns: u64,
    read_ns: u64,
    channel_bytes_per_s: u64,
    host_bytes_per_s: u64,
    superpage_bytes: u64,
}

/// The QD32 random-read rate the model gives a drive with `dies` dies and the fitted read
/// path, over the probe's read area (`region_bytes / 2`, written first).
fn model_read_rate(dies: u32, r: &ReadPath, region_bytes: u64) -> Option<f64> {
    // Room for the region, and for 16 of the smallest blocks on every die.
    let min_block_bytes = r.superpage_bytes * flash::preset::MIN_PAGES_PER_BLOCK as u64;
    let blocks_bytes = (dies as u64 * 16 * min_block_bytes) as f64 / (1.0 + READ_MODEL_OP);
    let capacity = (2 * region_bytes).max((blocks_bytes as u64).next_multiple_of(UNIT_BYTES));
    let fitted = Fitted::for_reads(dies, r, capacity);
    let preset = fitted.preset("read-model", "dies from QD32 reads");
    let mut t = SimTarget::new(&preset, region_bytes).ok()?;
    probe::read_parallelism(&mut t).ok().map(|b| b.ops_per_s())
}

/// The die count for which the model's QD32 random-read rate is nearest `measured` (the
/// rate grows with the dies until the channels or the link cap it). `None` if no count
/// fits: the model is faster than the drive with one die (more than 10%: the drive is not
/// like the model there), or slower with [`MAX_DIES`].
fn dies_from_reads(measured: f64, r: &ReadPath, region_bytes: u64) -> Option<u32> {
    let rate = |d: u32| model_read_rate(d, r, region_bytes);
    if rate(1)? > 1.1 * measured {
        return None;
    }
    let mut hi = 1;
    while rate(hi)? < measured {
        if hi >= MAX_DIES {
            return None;
        }
        hi = (2 * hi).min(MAX_DIES);
    }
    let mut lo = hi / 2; // rate(lo) < measured, or lo = 0
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if rate(mid)? < measured {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo == 0 {
        return Some(hi);
    }
    let (below, above) = (rate(lo)?, rate(hi)?);
    Some(if measured - below < above - measured {
        lo
    } else {
        hi
    })
}

/// The median 1 MiB QD1 read the model gives `dies` dies on `channels` buses with the
/// fitted read path (None if the model cannot be built).
fn model_large_read_ns(dies: u32, channels: u32, r: &ReadPath, region_bytes: u64) -> Option<u64> {
    let min_block_bytes = r.superpage_bytes * flash::preset::MIN_PAGES_PER_BLOCK as u64;
    let blocks_bytes = (dies as u64 * 16 * min_block_bytes) as f64 / (1.0 + READ_MODEL_OP);
    let capacity = (2 * region_bytes).max((blocks_bytes as u64).next_multiple_of(UNIT_BYTES));
    let mut fitted = Fitted::for_reads(dies, r, capacity);
    fitted.channels.value = channels;
    let preset = fitted.preset("read-model", "channels from 1 MiB reads");
    let mut t = SimTarget::new(&preset, region_bytes).ok()?;
    probe::large_read_latencies(&mut t).ok().map(|l| median(&l))
}

/// How the dies share channels, from 1 MiB reads at QD1: each spreads over the dies, and
/// the fewer buses carry it the longer it takes. The channel count (a divisor of the dies)
/// whose model read is nearest the drive's, if that is within 5% and the counts differ by
/// more than 2% (else the layout does not show: a bus per die).
fn fit_channels(
    m: &Measurements,
    dies: &Param<u32>,
    reads: &ReadPath,
    read_path_measured: bool,
    obs: &mut Vec<(String, String)>,
) -> Param<u32> {
    let d = dies.value.max(1);
    let per_die = |why: &str| assumed(d, format!("{why}: a bus per die"));
    if m.large_reads_qd1_ns.is_empty() {
        return per_die("no large reads were measured");
    }
    let measured_ns = median(&m.large_reads_qd1_ns) as f64;
    let candidates: Vec<(u32, f64)> = (1..=d)
        .filter(|c| d.is_multiple_of(*c))
        .filter_map(|c| model_large_read_ns(d, c, reads, m.region_bytes).map(|ns| (c, ns as f64)))
        .collect();
    let Some(&(best, best_ns)) = candidates.iter().min_by(|a, b| {
        (a.1 - measured_ns)
            .abs()
            .total_cmp(&(b.1 - measured_ns).abs())
    }) else {
        return per_die("the model could not be built for the large reads");
    };
    let per_die_ns = candidates
        .iter()
        .find(|c| c.0 == d)
        .map_or(best_ns, |c| c.1);
    obs.push((
        "1 MiB reads at QD1".into(),
        format!(
            "median {:.1} µs; the model gives {} ({} dies, fitted read path)",
            measured_ns / 1e3,
            candidates
                .iter()
                .map(|(c, ns)| format!("{c} buses {:.1} µs", ns / 1e3))
                .collect::<Vec<_>>()
                .join(", "),
            d
        ),
    ));
    if (best_ns - measured_ns).abs() > 0.05 * measured_ns {
        return per_die("no channel count makes the model's 1 MiB read within 5% of the drive's");
    }
    if (per_die_ns - best_ns).abs() <= 0.02 * best_ns {
        return per_die("1 MiB reads take the same with any channel count near the best: the layout does not show");
    }
    let how = format!("{P_LARGE_READS}: the channel count whose model read is nearest the drive's");
    match (&dies.basis, read_path_measured) {
        (Basis::Measured(_), true) => measured(best, &how),
        _ => tied(
            best,
            &how,
            "with the die count and read path as fitted (not all measured): together they give the large reads' time",
        ),
    }
}

/// The dies: from the sustained write rate and a program's wait `x` (seconds), where the
/// writes are not link-bound; otherwise from QD32 random reads, where those are not; else
/// the larger lower bound of the two; else an assumption.
#[allow(clippy::too_many_arguments)]
fn fit_dies(
    m: &Measurements,
    seq: &RateFit,
    x: Option<f64>,
    sp: f64,
    host: f64,
    reads: &ReadPath,
    read_path_measured: bool,
    obs: &mut Vec<(String, String)>,
) -> Param<u32> {
    let writes_bound = seq.before >= LINK_BOUND_SHARE * host;
    let from_writes = x.map(|x| seq.before * x / sp);
    let read_rate = m.reads_qd32.ops_per_s();
    let reads_bound = read_rate * UNIT_BYTES as f64 >= LINK_BOUND_SHARE * host;
    let from_reads = dies_from_reads(read_rate, reads, m.region_bytes);
    if let (Some(d), false) = (from_writes, writes_bound) {
        let d = d.round().max(1.0) as u32;
        let how = format!(
            "{P_SEQ_WRITE} and {P_SYNC}: write rate times a program's wait, over the superpage"
        );
        // Both counts assume a bus per die; where the QD32 reads (not link-bound) need a
        // count far from the writes', the dies share buses and neither count is theirs.
        return match from_reads.filter(|_| !reads_bound) {
            Some(r) if r.abs_diff(d) as f64 > (0.25 * d as f64).max(1.0) => tied(
                d,
                &how,
                &format!(
                    "the QD32 reads need {r} dies with a bus per die, the writes {d}: the dies share buses, which the probes do not show, so this count holds only with the bus per die the preset assumes"
                ),
            ),
            _ => measured(d, &how),
        };
    }
    obs.push((
        "dies from QD32 reads".into(),
        match from_reads {
            Some(d) => format!("{d}: the model with the fitted read timings reaches {read_rate:.0} IOPS with this many"),
            None => format!("none: the model with the fitted read timings does not come to {read_rate:.0} IOPS with 1 to {MAX_DIES} dies"),
        },
    ));
    // The least whole count the writes allow (a count within 5% of a die above a whole
    // one is that one: the wait and rate are measured, not exact).
    let write_floor = from_writes.map(|d| (d - 0.05).ceil().max(1.0) as u32);
    if let Some(d) = from_reads.filter(|&d| !reads_bound && d >= write_floor.unwrap_or(1)) {
        let how = format!("{P_READS_QD32}: the die count at which the model, with the fitted read timings, reaches the measured rate");
        return tied(
            d,
            &how,
            if read_path_measured {
                "with a bus per die (the channel layout does not show): dies that share fewer buses give the same rate in greater number"
            } else {
                "the read timings it rests on are not all measured (the array read, the channel or the command overhead is assumed, tied or bounded), and the channel layout does not show: with them it gives the measured rate"
            },
        );
    }
    let why = format!(
        "writes ({:.0} MB/s) and QD32 reads ({:.0} MB/s) run at or near the link's rate ({:.0} MB/s), so more dies would not show",
        seq.before / 1e6,
        read_rate * UNIT_BYTES as f64 / 1e6,
        host / 1e6
    );
    // Link-bound QD32 reads give no floor: near the link's cap the model's rate grows so
    // slowly with the dies (random collisions) that the count reaching it may be more than
    // the drive's. Where it is more than the writes' floor it is kept, so that the fitted
    // drive reads as fast as the drive did, but tied to the model, not called a bound.
    match (write_floor, from_reads) {
        (Some(w), Some(r)) if reads_bound && r > w => tied(
            r,
            P_READS_QD32,
            &format!("the count at which the model's QD32 reads reach the link's rate, as the drive's did (fewer would read slower); the writes show at least {w}, and the drive may have fewer than this or more"),
        ),
        (None, Some(r)) if reads_bound => tied(
            r,
            P_READS_QD32,
            "the count at which the model's QD32 reads reach the link's rate, as the drive's did: the drive may have fewer or more",
        ),
        (Some(w), Some(r)) if !reads_bound && r > w => bound(r, P_READS_QD32, why),
        (None, Some(r)) if !reads_bound => bound(r, P_READS_QD32, why),
        (Some(w), _) => bound(w, P_SEQ_WRITE, why),
        _ => assumed(
            ASSUMED_DIES,
            "no write showed a program's wait and the QD32 reads fit the model at no die count",
        ),
    }
}

/// The native program time and the SLC cache, from the sustained write rates, the dies
/// and a program's wait `x` (seconds) in the write + flush pairs, which ran on the fresh
/// drive (in SLC mode if it has a cache with room): where no wait showed, the dies and a
/// sustained rate give the program time together.
fn fit_programs(
    m: &Measurements,
    seq: &RateFit,
    x: Option<f64>,
    sp: f64,
    ch: f64,
    dies: &Param<u32>,
) -> (Param<u64>, Result<SlcFit, Basis>) {
    let xfer = sp / ch;
    let flash_ns = |s: f64| ns(s - xfer).max(MIN_FLASH_NS);
    let from_wait = |x: f64, when: &str| {
        measured(
            flash_ns(x),
            &format!(
                "{P_SYNC}{when}: a write's wait for its program, less the superpage's transfer"
            ),
        )
    };
    // The program time at which the dies give `rate`: D superpages per program and transfer.
    let from_rate = |rate: f64, which: &str| {
        let v = flash_ns(dies.value as f64 * sp / rate);
        let how = format!("dies times superpage over the {which}, less the superpage's transfer");
        match dies.basis {
            Basis::Measured(_) => measured(v, &format!("{P_SEQ_WRITE}: {how}")),
            _ => tied(
                v,
                P_SEQ_WRITE,
                &format!("{how}, with dies that are not measured: together they give that rate"),
            ),
        }
    };
    let Some(dr) = seq.drop else {
        let program_ns = match x {
            Some(x) => from_wait(x, ""),
            None => from_rate(seq.before, "sustained write rate"),
        };
        if m.region_bytes >= m.capacity_bytes {
            let none = Basis::Measured(format!(
                "{P_SEQ_WRITE}: no drop over the whole drive ({} MiB written)",
                m.region_bytes >> 20
            ));
            return (program_ns, Err(none));
        }
        // The writes covered only part of the drive: an SLC cache larger than that part
        // would take all of them, so what they showed may be its program time, which is
        // shorter than the native one.
        let why = format!(
            "the write rate held over the {} MiB written, {:.1}% of the drive: an SLC cache larger than that would take every write, so this may be the cache's program time; the native one is at least this (probe the whole drive to see it)",
            m.region_bytes >> 20,
            100.0 * m.region_bytes as f64 / m.capacity_bytes.max(1) as f64
        );
        let program_ns = match program_ns.basis {
            Basis::Measured(probe) => bound(program_ns.value, &probe, why),
            _ => program_ns,
        };
        let none = Basis::Bound(
            P_SEQ_WRITE.to_string(),
            format!(
                "no drop in the {} MiB written: no SLC cache, or one larger than that",
                m.region_bytes >> 20
            ),
        );
        return (program_ns, Err(none));
    };
    let fraction = (dr.at_bytes as f64 / m.capacity_bytes as f64).clamp(1e-6, 1.0);
    let slc = SlcFit {
        program_ns: match x {
            Some(x) => from_wait(x, ", on the fresh drive"),
            None => from_rate(seq.before, "rate before the drop"),
        },
        // Rounded to a millionth, never to 0: a drop early in a large drive (a file's
        // file system stands for the drive) is a small share of it, and a preset's cache
        // must have one.
        max_fraction: measured(
            ((fraction * 1e6).round() / 1e6).max(1e-6),
            &format!("{P_SEQ_WRITE}: bytes written before the rate dropped, over the capacity"),
        ),
        bits_per_cell: assumed(
            ASSUMED_BITS_PER_CELL,
            "TLC; the cache's shrinking as the drive fills is not probed",
        ),
        fold_idle_ns: assumed(
            ASSUMED_FOLD_IDLE_NS,
            "when folding starts in idle time is not probed",
        ),
    };
    (from_rate(dr.after, "rate after the drop"), Ok(slc))
}

/// The sequential writes' rates with a write buffer's filling taken out: a drive with a
/// buffer takes the first writes at the link's rate, so a drop within a few buffers' worth
/// of bytes (four, at least 8 MiB and at most 64 MiB: the buffer's own estimate may be far
/// off) is the buffer filling, not an SLC cache running out; the
/// sustained rate is the one after it.
fn without_buffer_drop(seq: RateFit, buffer: &Param<u64>) -> RateFit {
    match seq.drop {
        Some(d)
            if buffer.value > 0 && d.at_bytes <= (4 * buffer.value).clamp(8 << 20, 64 << 20) =>
        {
            RateFit {
                before: d.after,
                drop: None,
            }
        }
        _ => seq,
    }
}

/// The write buffer's size and acknowledgement time.
fn fit_buffer(
    m: &Measurements,
    sync: Option<SyncWrites>,
    x: Option<f64>,
    oh: f64,
    host: f64,
) -> (Param<u64>, Param<u64>) {
    let Some(s) = sync.filter(|s| s.buffered) else {
        return (
            match sync {
                Some(_) => measured(
                    0,
                    &format!("{P_SYNC}: writes waited for their programs, so no write buffer"),
                ),
                None => assumed(0, "no write showed a program's wait either way"),
            },
            assumed(0, "used only with a write buffer"),
        );
    };
    let ack = (s.fast_write_ns as f64 / 1e9 - oh - UNIT_BYTES as f64 / host).max(0.0);
    let ack = measured(
        ns(ack),
        &format!("{P_SYNC}: write latency less the command overhead and the link transfer"),
    );
    let burst = rate_drop(&m.burst);
    let in_flight = m.burst.request_bytes * m.burst.queue_depth as u64;
    let seq = rate_drop(&m.seq_write);
    let cache = match burst.drop {
        // An SLC cache running out is a drop of its own: where the sequential write shows
        // one and the burst's rate after its drop is not the cache's, the burst may have
        // met the cache's end instead of the buffer's.
        Some(d) if seq.drop.is_some() && (d.after - seq.before).abs() > 0.10 * seq.before => bound(
            d.at_bytes,
            P_BURST,
            format!("the burst's rate fell to {:.0} MB/s, not the {:.0} MB/s at which the sequential write ran before its own drop: an SLC cache running out may be what it met, so the buffer holds at most the bytes acknowledged before the drop", d.after / 1e6, seq.before / 1e6),
        ),
        Some(d) => {
            // Bytes acknowledged when the buffer filled, less what the flash wrote meanwhile:
            // a buffered write's bytes leave the buffer when their program ends, so the
            // flash's first bytes left a program's wait `x` after the burst began.
            let draining_s = (d.at_ns as f64 / 1e9 - x.unwrap_or(0.0)).max(0.0);
            let programmed = d.after * draining_s;
            let bytes = (d.at_bytes as f64 - programmed).max(UNIT_BYTES as f64);
            let size = bytes as u64 / UNIT_BYTES * UNIT_BYTES;
            measured(
                size,
                &format!("{P_BURST}: bytes acknowledged before the rate dropped, less what the flash wrote meanwhile"),
            )
        }
        // Replaced by the rule once the dies are known (in `fit`).
        None => assumed(
            in_flight,
            format!("writes are acknowledged before their programs, but the {P_BURST} never filled the buffer"),
        ),
    };
    (cache, ack)
}

/// TRIM's fixed and per-unit cost from discards of several sizes.
fn fit_discards(m: &Measurements, oh: &Param<u64>) -> (Param<u64>, Param<u64>) {
    let oh_ns = oh.value;
    let mut sizes: Vec<u64> = m.discards_ns.iter().map(|d| d.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let points: Vec<(f64, f64)> = sizes
        .iter()
        .map(|&s| {
            let lat: Vec<u64> = m
                .discards_ns
                .iter()
                .filter(|d| d.0 == s)
                .map(|d| d.1)
                .collect();
            ((s / UNIT_BYTES) as f64, median(&lat) as f64)
        })
        .collect();
    match line(&points) {
        Some((a, b)) => (
            {
                let v = (a - oh_ns as f64).max(0.0).round() as u64;
                let how = format!("{P_DISCARDS}: latency at zero size less the command overhead");
                match oh.basis {
                    Basis::Measured(_) => measured(v, &how),
                    _ => tied(
                        v,
                        &how,
                        "the command overhead it is taken from is only bounded: the two together are the discard's fixed cost",
                    ),
                }
            },
            measured(
                b.max(0.0).round() as u64,
                &format!("{P_DISCARDS}: latency per 4 KiB unit"),
            ),
        ),
        None => (
            assumed(0, "fewer than two discard sizes fit in the region"),
            assumed(0, "fewer than two discard sizes fit in the region"),
        ),
    }
}

/// What a TRIM leaves for the next one: discards back to back each take this much longer
/// than the same discard on an idle drive (the first of the burst finds the drive idle).
fn fit_settle(m: &Measurements) -> Param<u64> {
    let (bytes, burst) = &m.discard_burst_ns;
    let idle: Vec<u64> = m
        .discards_ns
        .iter()
        .filter(|d| d.0 == *bytes)
        .map(|d| d.1)
        .collect();
    if burst.len() < 2 || idle.is_empty() {
        return assumed(0, "no back-to-back discards were measured");
    }
    let (b, i) = (median(&burst[1..]), median(&idle));
    measured(
        b.saturating_sub(i),
        &format!(
            "{P_DISCARD_BURST}: {:.3} ms each after the first, against {:.3} ms for the same {bytes}-byte discard after an idle pause",
            b as f64 / 1e6,
            i as f64 / 1e6
        ),
    )
}

/// Whether a discard holds back reads issued while it runs (a non-queued TRIM does).
fn fit_queued(m: &Measurements) -> Param<bool> {
    let d = &m.discard_under_reads;
    // Against the same stream's reads before the discard: the drive in the same state
    // (work it does in idle time, such as folding its SLC cache, slows both alike).
    let before: Vec<u64> = d
        .reads
        .iter()
        .filter(|r| r.complete_ns <= d.discard.submit_ns)
        .map(|r| r.latency_ns())
        .collect();
    let base = if before.is_empty() {
        median(&m.reads_qd1.latencies_ns)
    } else {
        median(&before)
    };
    let during: Vec<u64> = d
        .reads
        .iter()
        .filter(|r| r.submit_ns < d.discard.complete_ns && r.complete_ns > d.discard.submit_ns)
        .map(|r| r.latency_ns())
        .collect();
    if during.is_empty() {
        return assumed(
            false,
            "no read ran while the discard did; taken as non-queued, the cautious choice",
        );
    }
    let worst = *during.iter().max().expect("not empty");
    // The slow reads before the discard (the 75th percentile): reads that miss a cached
    // mapping table are slow without any discard.
    let worst_before = if before.is_empty() {
        base
    } else {
        quantile(&before, 0.75)
    };
    if d.discard.latency_ns() <= 2 * worst_before {
        // A read held back waits at most the discard and its own time, which the test
        // below cannot tell from a slow read (the slow ones before it included).
        return assumed(
            false,
            format!(
                "the discard of {} bytes took {:.1} µs, not more than two slow reads' time ({:.1} µs, the 75th percentile of the reads before it): whether reads wait for it does not show; taken as non-queued, the cautious choice",
                d.discard_bytes,
                d.discard.latency_ns() as f64 / 1e3,
                worst_before as f64 / 1e3
            ),
        );
    }
    let held = worst
        > (3 * base)
            .max(base + d.discard.latency_ns() / 2)
            .max(worst_before + worst_before / 2);
    measured(
        !held,
        &format!(
            "{P_DISCARD_UNDER_READS}: the slowest of {} reads during a {:.2} ms discard of {} MiB took {:.1} µs (reads before it {:.1} µs)",
            during.len(),
            d.discard.latency_ns() as f64 / 1e6,
            d.discard_bytes >> 20,
            worst as f64 / 1e3,
            base as f64 / 1e3
        ),
    )
}

impl Fitted {
    /// A drive with `dies` dies and the given read path; the rest as assumed (for the
    /// model's read rate only). Its spare space is large ([`READ_MODEL_OP`]): reads do not
    /// see it, and with many dies on a small drive the FTL needs it for its free blocks.
    fn for_reads(dies: u32, r: &ReadPath, capacity_bytes: u64) -> Fitted {
        let why = || Basis::Assumed("a model for reads only".into());
        let p = |v: u64| Param {
            value: v,
            basis: why(),
        };
        let channels = dies;
        Fitted {
            logical_bytes: p(capacity_bytes),
            op: Param {
                value: READ_MODEL_OP,
                basis: why(),
            },
            dies: Param {
                value: dies,
                basis: why(),
            },
            channels: Param {
                value: channels,
                basis: why(),
            },
            superpage_bytes: p(r.superpage_bytes),
            pages_per_block: Param {
                value: pages_per_block(capacity_bytes, dies, r.superpage_bytes),
                basis: why(),
            },
            mapping_unit_bytes: Param {
                value: UNIT_BYTES as u32,
                basis: why(),
            },
            read_ns: p(r.read_ns),
            program_ns: p(1_000_000),
            erase_ns: p(ASSUMED_ERASE_NS),
            channel_bytes_per_s: p(r.channel_bytes_per_s),
            host_bytes_per_s: p(r.host_bytes_per_s),
            command_overhead_ns: p(r.command_overhead_ns),
            write_ack_ns: p(0),
            write_cache_bytes: p(0),
            slc: Err(why()),
            gc: Param {
                value: GcPolicy::Greedy,
                basis: why(),
            },
            gc_free_blocks: Param {
                value: 2,
                basis: why(),
            },
            trim_queued: Param {
                value: true,
                basis: why(),
            },
            trim_command_overhead_ns: p(0),
            trim_per_page_ns: p(0),
            trim_settle_ns: p(0),
            observations: Vec::new(),
        }
    }

    /// The preset these values describe.
    pub fn preset(&self, name: &str, description: &str) -> Preset {
        let d = self.dies.value;
        let c = self.channels.value;
        let geometry = Geometry {
            channels: c,
            chips_per_channel: d / c,
            dies_per_chip: 1,
            planes_per_die: 1,
            pages_per_block: self.pages_per_block.value,
            page_size_bytes: self.superpage_bytes.value as u32,
            mapping_unit_bytes: self.mapping_unit_bytes.value,
            logical_bytes: self.logical_bytes.value,
            op: self.op.value,
        };
        let timing = SsdTiming {
            read_ns: self.read_ns.value,
            program_ns: self.program_ns.value,
            erase_ns: self.erase_ns.value,
            erase_every: 1,
            channel_bytes_per_s: self.channel_bytes_per_s.value.max(1),
            host_bytes_per_s: self.host_bytes_per_s.value.max(1),
            command_overhead_ns: self.command_overhead_ns.value,
            write_ack_ns: self.write_ack_ns.value,
        };
        let ssd = SsdConfig {
            geometry,
            timing,
            gc: GcConfig {
                policy: self.gc.value,
                free_blocks: self.gc_free_blocks.value,
                background: false,
                background_free_blocks: 0,
                background_idle_ns: 0,
                paced: true,
            },
            trim: TrimConfig {
                queued: self.trim_queued.value,
                command_overhead_ns: self.trim_command_overhead_ns.value,
                per_page_ns: self.trim_per_page_ns.value,
                settle_ns: self.trim_settle_ns.value,
                ..TrimConfig::default()
            },
            write_cache_bytes: self.write_cache_bytes.value,
            ftl: FtlKind::Page,
            log_blocks: 0,
            // Not probed: wear leveling and endurance (no probe wears a drive out).
            wear_leveling: None,
            endurance: None,
            slc_cache: self.slc.as_ref().ok().map(|s| SlcCacheConfig {
                program_ns: s.program_ns.value,
                max_fraction: s.max_fraction.value,
                bits_per_cell: s.bits_per_cell.value,
                fold_idle_ns: s.fold_idle_ns.value,
            }),
            // Not probed: the whole map in DRAM (a DRAM-less drive's map misses would show
            // only as slower random reads over a footprint larger than its cache).
            mapping_cache: None,
            aging: None,
            // Not probed: placement (a probe cannot see FDP or zones).
            fdp: None,
            zoned: None,
            scheduler: None,
            unwritten_reads: Default::default(),
        };
        Preset {
            name: name.to_string(),
            description: description.to_string(),
            device: DeviceConfig::Ssd(ssd),
            notes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(request_bytes: u64, times: Vec<u64>) -> Series {
        Series {
            request_bytes,
            queue_depth: 1,
            completions_ns: times,
        }
    }

    #[test]
    fn a_rate_that_drops_is_found_where_it_drops() {
        // 100 MB at 1 GB/s, then 300 MB at 250 MB/s, in 1 MB requests.
        let mut t = Vec::new();
        let mut now = 0u64;
        for i in 0..400u64 {
            now += if i < 100 { 1_000_000 } else { 4_000_000 };
            t.push(now);
        }
        let f = rate_drop(&series(1_000_000, t));
        let d = f.drop.expect("a drop");
        assert!((f.before - 1e9).abs() < 1e6, "{f:?}");
        assert!((d.after - 250e6).abs() < 1e5, "{f:?}");
        assert_eq!(d.at_bytes, 100_000_000);
        assert_eq!(d.at_ns, 100_000_000);
        // A steady rate has no drop.
        let steady: Vec<u64> = (1..=400).map(|i| i * 2_000_000).collect();
        let f = rate_drop(&series(1_000_000, steady));
        assert!(f.drop.is_none());
        assert!((f.before - 500e6).abs() < 1e5, "{f:?}");
    }

    #[test]
    fn write_flush_pairs_give_the_superpage_and_the_wait() {
        // One write in four waits 500 µs for its program (no buffer) ...
        let pairs: Vec<(u64, u64)> = (0..256)
            .map(|i| {
                if i % 4 == 3 {
                    (520_000, 10_000)
                } else {
                    (20_000, 10_000)
                }
            })
            .collect();
        let s = sync_writes(&pairs).unwrap();
        assert_eq!(s.units_per_superpage, 4);
        assert_eq!(s.wait_ns, 500_000);
        assert!(!s.buffered);
        // ... or the flush after it does (a buffer), for what is left after the write's
        // acknowledgement.
        let pairs: Vec<(u64, u64)> = (0..256)
            .map(|i| {
                if i % 8 == 7 {
                    (20_000, 510_000)
                } else {
                    (20_000, 10_000)
                }
            })
            .collect();
        let s = sync_writes(&pairs).unwrap();
        assert_eq!((s.units_per_superpage, s.wait_ns), (8, 510_000));
        assert!(s.buffered);
        // Nothing stands out: not identifiable.
        assert!(sync_writes(&vec![(20_000, 10_000); 256]).is_none());
        // Waits at random (a journal, a host's cache): not a superpage either.
        let mut x = 7u64;
        let pairs: Vec<(u64, u64)> = (0..256)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (if x >> 61 == 0 { 900_000 } else { 20_000 }, 10_000)
            })
            .collect();
        assert!(sync_writes(&pairs).is_none());
    }

    #[test]
    fn the_read_model_builds_with_any_die_count() {
        let r = ReadPath {
            command_overhead_ns: 10_000,
            read_ns: 50_000,
            channel_bytes_per_s: 400_000_000,
            host_bytes_per_s: 550_000_000,
            superpage_bytes: 64 << 10,
        };
        for d in [1, 7, MAX_DIES] {
            let rate = model_read_rate(d, &r, 64 << 20).unwrap_or_else(|| panic!("{d} dies"));
            assert!(rate > 0.0);
        }
        // More dies, more reads at once, up to the link (550 MB/s = 134 K 4 KiB reads/s).
        let one = model_read_rate(1, &r, 64 << 20).unwrap();
        let many = model_read_rate(MAX_DIES, &r, 64 << 20).unwrap();
        assert!(one < 25_000.0 && many > 100_000.0, "{one} {many}");
    }

    #[test]
    fn lines_and_quantiles() {
        let (a, b) = line(&[(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)]).unwrap();
        assert!((a - 1.0).abs() < 1e-12 && (b - 2.0).abs() < 1e-12);
        assert!(line(&[(1.0, 3.0)]).is_none());
        assert_eq!(median(&[5, 1, 3]), 3);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
