//! calibrate's fixed probe sequence, written once against [`ProbeTarget`]; it returns the
//! raw measurements that [`super::fit`] turns into a preset.
//!
//! The order matters, and the region's layout too (`R` = the probed region):
//!
//! 1. flushes of an idle target: a command's round trip;
//! 2. 4 KiB writes at random places, each followed by a flush, on the fresh target: which
//!    ones wait for a program (one in a superpage's worth) and for how long;
//! 3. sequential 1 MiB writes at queue depth 8 over all of `R`, until `--size`: the write
//!    rate, and where it drops (an SLC cache filling); then a pause for the drive to fold;
//! 4. reads of 4 KiB up to a superpage, QD1: the per-byte cost of the flash channel;
//! 5. random 4 KiB reads at QD1 and QD32, sequential 1 MiB reads at QD8, 1 MiB reads at
//!    random places at QD1 (each spread over the dies: how they share channels);
//! 6. random 4 KiB writes at QD1 and QD32; a pause; a burst of 64 KiB writes at QD32 (a
//!    write buffer filling); reads of data just written;
//! 7. discards of several sizes in the second half of `R` (reads stay in the first half:
//!    a discarded range reads without flash work), then one discard while reads run;
//! 8. where discards are TRIMs (a device, a simulated drive): reads of discarded data of
//!    4 KiB up to 64 KiB, which the controller answers without the flash: the link's rate.

use super::stats;
use super::target::{OpTime, ProbeOp, ProbeTarget, Stream};
use anyhow::{bail, Result};

/// The probes' unit: random reads and writes are this size, at offsets aligned to it.
pub const UNIT_BYTES: u64 = 4096;
/// The smallest region the sequence fits in (its areas and discard slots).
pub const MIN_REGION_BYTES: u64 = 64 << 20;
const SYNC_WRITES: usize = 256;
const SEQ_REQUEST_BYTES: u64 = 1 << 20;
const SEQ_QUEUE_DEPTH: u32 = 8;
const READ_SIZE_REPS: usize = 16;
/// The read-size probe reads within this many consecutive superpages (their mapping
/// entries warmed first).
const READ_POOL_SUPERPAGES: u64 = 32;
/// Read sizes, in units, tried up to a superpage.
const READ_SIZES_UNITS: [u64; 8] = [1, 2, 3, 4, 6, 8, 12, 16];
const READS_QD1: usize = 1000;
const READS_QD32: usize = 4000;
const WRITES_QD1: usize = 256;
const WRITES_QD32: usize = 2048;
const DEEP_QUEUE: u32 = 32;
const SEQ_READ_MAX_BYTES: u64 = 256 << 20;
/// Large reads at QD1: each spreads over the dies, and how they share channels shows.
const LARGE_READS: usize = 32;
const LARGE_READ_BYTES: u64 = 1 << 20;
const BURST_REQUEST_BYTES: u64 = 64 << 10;
const BURST_MAX_BYTES: u64 = 256 << 20;
const READ_AFTER_WRITE_PAIRS: usize = 64;
const DISCARD_REPS: usize = 3;
/// Idle time before each discard of the size series, so each finds the drive idle: longer
/// than the most a TRIM has been found to leave behind (Lord 2009: 70-113 ms back to back;
/// docs/sources.md).
const DISCARD_GAP_NS: u64 = 250_000_000;
/// Discards of the smallest size sent back to back (each as the last completes): what a
/// TRIM leaves for the next one ([`flash::ssd::TrimConfig::settle_ns`]).
const DISCARD_BURST: usize = 8;
const DISCARD_SIZES: [u64; 6] = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20];
/// A pause lets the drive finish work it defers (folding its SLC cache, draining a
/// buffer); at least this long, and at most [`PAUSE_MAX_NS`].
const PAUSE_MIN_NS: u64 = 1_000_000_000;
const PAUSE_MAX_NS: u64 = 120_000_000_000;

/// Completions of equal-sized requests of one stream, in completion order.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub request_bytes: u64,
    pub queue_depth: u32,
    pub completions_ns: Vec<u64>,
}

impl Series {
    fn new(request_bytes: u64, queue_depth: u32, times: &[OpTime]) -> Series {
        let mut completions_ns: Vec<u64> = times.iter().map(|t| t.complete_ns).collect();
        completions_ns.sort_unstable();
        Series {
            request_bytes,
            queue_depth,
            completions_ns,
        }
    }

    /// (bytes completed, time) after each completion.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.completions_ns
            .iter()
            .enumerate()
            .map(|(i, &t)| (((i + 1) as u64 * self.request_bytes) as f64, t as f64))
            .collect()
    }
}

/// Bytes per second of the last three quarters of a series (the first quarter holds the
/// queue filling up).
pub fn series_rate(s: &Series) -> f64 {
    rate_between(s, s.completions_ns.len() / 4, s.completions_ns.len())
}

/// Bytes per second over the last quarter of a series.
pub fn tail_rate(s: &Series) -> f64 {
    let n = s.completions_ns.len();
    rate_between(s, n.saturating_sub(n / 4 + 1), n)
}

fn rate_between(s: &Series, from: usize, to: usize) -> f64 {
    if to < from + 2 {
        return 0.0;
    }
    let t = &s.completions_ns;
    let dt = t[to - 1].saturating_sub(t[from]) as f64;
    if dt <= 0.0 {
        return 0.0;
    }
    ((to - 1 - from) as u64 * s.request_bytes) as f64 * 1e9 / dt
}

/// Operations of one stream run at a fixed queue depth: latencies and the batch's span.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    pub latencies_ns: Vec<u64>,
    /// From the first submission to the last completion.
    pub elapsed_ns: u64,
}

impl Batch {
    fn new(times: &[OpTime]) -> Batch {
        let first = times.iter().map(|t| t.submit_ns).min().unwrap_or(0);
        let last = times.iter().map(|t| t.complete_ns).max().unwrap_or(0);
        Batch {
            latencies_ns: times.iter().map(OpTime::latency_ns).collect(),
            elapsed_ns: last - first,
        }
    }

    pub fn ops_per_s(&self) -> f64 {
        self.latencies_ns.len() as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// One discard issued while a stream of reads runs.
#[derive(Debug, Clone, Default)]
pub struct DiscardUnderReads {
    pub discard: OpTime,
    pub discard_bytes: u64,
    pub reads: Vec<OpTime>,
}

/// Everything the sequence measured, raw enough to fit and to print.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    pub target: String,
    pub discard_kind: String,
    pub capacity_bytes: u64,
    pub region_bytes: u64,
    pub idle_flush_ns: Vec<u64>,
    /// Per pair: the write's latency, then the flush's.
    pub sync_writes_ns: Vec<(u64, u64)>,
    pub seq_write: Series,
    /// Read latencies by request size (bytes), each read inside one superpage.
    pub read_by_size_ns: Vec<(u64, Vec<u64>)>,
    pub reads_qd1: Batch,
    pub reads_qd32: Batch,
    pub seq_read: Series,
    pub writes_qd1: Batch,
    pub writes_qd32: Batch,
    pub burst: Series,
    pub read_after_write_ns: Vec<u64>,
    /// (bytes, latency) of each discard at queue depth 1, each after an idle gap.
    pub discards_ns: Vec<(u64, u64)>,
    /// (bytes, latencies) of discards of one size sent back to back at queue depth 1.
    pub discard_burst_ns: (u64, Vec<u64>),
    pub discard_under_reads: DiscardUnderReads,
    /// Latencies of 1 MiB reads at QD1 at random places (each read once untimed first,
    /// so a cached mapping table holds its entries).
    pub large_reads_qd1_ns: Vec<u64>,
    /// Where discards are TRIMs: read latencies by request size (bytes) of discarded
    /// data, which the controller answers without the flash (empty on a file).
    pub trimmed_reads_ns: Vec<(u64, Vec<u64>)>,
    /// The pauses the sequence took (idle time it gave the drive).
    pub pauses_ns: Vec<u64>,
}

/// A seeded generator of offsets (SplitMix64): the same seed, the same probe.
struct Offsets(u64);

impl Offsets {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A random multiple of `align` such that `len` bytes from it fit below `end`.
    fn aligned(&mut self, end: u64, align: u64, len: u64) -> u64 {
        let slots = (end.saturating_sub(len) / align).max(1);
        (self.next() % slots) * align
    }
}

fn read(offset_bytes: u64, len_bytes: u64) -> ProbeOp {
    ProbeOp::Read {
        offset_bytes,
        len_bytes,
    }
}

fn write(offset_bytes: u64, len_bytes: u64) -> ProbeOp {
    ProbeOp::Write {
        offset_bytes,
        len_bytes,
    }
}

fn one(target: &mut dyn ProbeTarget, stream: Stream) -> Result<Vec<OpTime>> {
    Ok(target.run(&[stream])?.remove(0))
}

/// Sequential `request_bytes` writes (or reads) over `0..bytes` at `queue_depth`.
fn sequential(bytes: u64, request_bytes: u64, is_write: bool) -> Vec<ProbeOp> {
    (0..bytes / request_bytes)
        .map(|i| {
            let off = i * request_bytes;
            if is_write {
                write(off, request_bytes)
            } else {
                read(off, request_bytes)
            }
        })
        .collect()
}

/// A pause long enough for a drive to fold `written_bytes` out of an SLC cache written at
/// `rate_bytes_per_s` (folding runs at the native rate, down to a fifth of the SLC's).
fn fold_pause_ns(written_bytes: u64, rate_bytes_per_s: f64) -> u64 {
    // Folding runs at the native program rate, which may be a fifth of the SLC rate the
    // writes showed (the 980's 500 MB/s against 2.5 GB/s): eight times the writes' time.
    let fold_ns = if rate_bytes_per_s > 0.0 {
        8e9 * written_bytes as f64 / rate_bytes_per_s
    } else {
        0.0
    };
    (PAUSE_MIN_NS + fold_ns as u64).min(PAUSE_MAX_NS)
}

fn random_reads_qd32(target: &mut dyn ProbeTarget, end: u64, rng: &mut Offsets) -> Result<Batch> {
    let ops: Vec<ProbeOp> = (0..READS_QD32)
        .map(|_| read(rng.aligned(end, UNIT_BYTES, UNIT_BYTES), UNIT_BYTES))
        .collect();
    Ok(Batch::new(&one(target, Stream::new(ops, DEEP_QUEUE))?))
}

/// [`READ_SIZE_REPS`] reads of each of `sizes` at QD1, at random `align`ed places inside
/// `area` (start, bytes): their latencies by size.
fn reads_by_size(
    target: &mut dyn ProbeTarget,
    area: (u64, u64),
    align: u64,
    sizes: &[u64],
    rng: &mut Offsets,
) -> Result<Vec<(u64, Vec<u64>)>> {
    let mut ops = Vec::new();
    for _ in 0..READ_SIZE_REPS {
        for &len in sizes {
            ops.push(read(area.0 + rng.aligned(area.1, align, len), len));
        }
    }
    let times = one(target, Stream::new(ops.clone(), 1))?;
    Ok(sizes
        .iter()
        .map(|&len| {
            let lat = ops
                .iter()
                .zip(&times)
                .filter(|(o, _)| o.len_bytes() == len)
                .map(|(_, t)| t.latency_ns())
                .collect();
            (len, lat)
        })
        .collect())
}

/// 1 MiB reads at QD1 at random 1 MiB-aligned places below `end`, each read once before
/// the timed read (the pair at QD1): the timed reads' latencies.
fn large_reads_qd1(target: &mut dyn ProbeTarget, end: u64, rng: &mut Offsets) -> Result<Vec<u64>> {
    let mut ops = Vec::with_capacity(2 * LARGE_READS);
    for _ in 0..LARGE_READS {
        let off = rng.aligned(end, LARGE_READ_BYTES, LARGE_READ_BYTES);
        ops.push(read(off, LARGE_READ_BYTES));
        ops.push(read(off, LARGE_READ_BYTES));
    }
    let t = one(target, Stream::new(ops, 1))?;
    Ok(t.chunks(2).map(|p| p[1].latency_ns()).collect())
}

/// The large-read probe alone, after writing the read area as the sequence does: for the
/// fit, which runs it on model drives.
pub fn large_read_latencies(target: &mut dyn ProbeTarget) -> Result<Vec<u64>> {
    let half = target.region_bytes() / SEQ_REQUEST_BYTES * SEQ_REQUEST_BYTES / 2;
    one(
        target,
        Stream::new(sequential(half, SEQ_REQUEST_BYTES, true), SEQ_QUEUE_DEPTH),
    )?;
    target.idle(PAUSE_MIN_NS)?;
    large_reads_qd1(target, half, &mut Offsets(1))
}

/// The QD32 random-read probe alone, after writing the read area (the first half of the
/// region) as the sequence does: for the fit, which runs it on model drives.
pub fn read_parallelism(target: &mut dyn ProbeTarget) -> Result<Batch> {
    let half = target.region_bytes() / SEQ_REQUEST_BYTES * SEQ_REQUEST_BYTES / 2;
    one(
        target,
        Stream::new(sequential(half, SEQ_REQUEST_BYTES, true), SEQ_QUEUE_DEPTH),
    )?;
    target.idle(PAUSE_MIN_NS)?;
    random_reads_qd32(target, half, &mut Offsets(1))
}

/// Runs the sequence; `say` hears each probe's name as it starts.
pub fn run(
    target: &mut dyn ProbeTarget,
    seed: u64,
    say: &mut dyn FnMut(&str),
) -> Result<Measurements> {
    let region = target.region_bytes() / SEQ_REQUEST_BYTES * SEQ_REQUEST_BYTES;
    if region < MIN_REGION_BYTES {
        bail!(
            "the probed region is {} bytes; calibrate needs at least {MIN_REGION_BYTES} (64 MiB)",
            target.region_bytes()
        );
    }
    // Reads and small writes stay in the first half; discards use the second.
    let half = region / 2;
    let mut rng = Offsets(seed);
    let mut m = Measurements {
        target: target.describe(),
        discard_kind: target.discard_kind(),
        capacity_bytes: target.capacity_bytes(),
        region_bytes: region,
        ..Measurements::default()
    };
    let u = UNIT_BYTES;

    say("flush of an idle drive (command round trip)");
    let flushes = one(target, Stream::new(vec![ProbeOp::Flush; 16], 1))?;
    m.idle_flush_ns = flushes.iter().map(OpTime::latency_ns).collect();

    say("4 KiB writes each followed by a flush, QD1 (superpage size, program time, write buffer)");
    let mut ops = Vec::with_capacity(2 * SYNC_WRITES);
    for _ in 0..SYNC_WRITES {
        ops.push(write(rng.aligned(region, u, u), u));
        ops.push(ProbeOp::Flush);
    }
    let t = one(target, Stream::new(ops, 1))?;
    m.sync_writes_ns = t
        .chunks(2)
        .map(|p| (p[0].latency_ns(), p[1].latency_ns()))
        .collect();

    say("sequential 1 MiB writes, QD8, over the whole region (write rate, SLC cache)");
    let t = one(
        target,
        Stream::new(sequential(region, SEQ_REQUEST_BYTES, true), SEQ_QUEUE_DEPTH),
    )?;
    m.seq_write = Series::new(SEQ_REQUEST_BYTES, SEQ_QUEUE_DEPTH, &t);
    let pause = fold_pause_ns(region, tail_rate(&m.seq_write));
    say(&format!(
        "pause {:.1} s (the drive folds or drains)",
        pause as f64 / 1e9
    ));
    target.idle(pause)?;
    m.pauses_ns.push(pause);

    // Reads inside one superpage, from 4 KiB up to its size: the data was written in
    // order from the start of a superpage, so a superpage-aligned read stays in one.
    let superpage = stats::superpage_units(&m.sync_writes_ns).map(|n| n * u);
    let sizes: Vec<u64> = match superpage {
        Some(sp) => READ_SIZES_UNITS
            .iter()
            .map(|k| k * u)
            .filter(|&b| b <= sp)
            .collect(),
        None => vec![u],
    };
    let align = superpage.unwrap_or(u);
    say("reads of 4 KiB up to a superpage, QD1 (flash channel rate, read time)");
    // A pool of consecutive superpages, each read whole first (not timed), so that a
    // drive caching its mapping table (DRAM-less, HMB) has their entries cached when the
    // timed reads come: they see the flash, not the map's misses.
    let pool_bytes = (READ_POOL_SUPERPAGES * align).min(half);
    let pool_start = rng.aligned(half, align, pool_bytes);
    let warm: Vec<ProbeOp> = (0..pool_bytes / align)
        .map(|k| read(pool_start + k * align, align))
        .collect();
    one(target, Stream::new(warm, 1))?;
    m.read_by_size_ns = reads_by_size(target, (pool_start, pool_bytes), align, &sizes, &mut rng)?;

    say("random 4 KiB reads, QD1");
    let ops: Vec<ProbeOp> = (0..READS_QD1)
        .map(|_| read(rng.aligned(half, u, u), u))
        .collect();
    m.reads_qd1 = Batch::new(&one(target, Stream::new(ops, 1))?);
    say("random 4 KiB reads, QD32 (internal parallelism)");
    m.reads_qd32 = random_reads_qd32(target, half, &mut rng)?;
    say("sequential 1 MiB reads, QD8 (link rate)");
    let bytes = region.min(SEQ_READ_MAX_BYTES);
    let t = one(
        target,
        Stream::new(sequential(bytes, SEQ_REQUEST_BYTES, false), SEQ_QUEUE_DEPTH),
    )?;
    m.seq_read = Series::new(SEQ_REQUEST_BYTES, SEQ_QUEUE_DEPTH, &t);
    say("1 MiB reads at random places, QD1 (how the dies share channels)");
    m.large_reads_qd1_ns = large_reads_qd1(target, half, &mut rng)?;

    say("random 4 KiB writes, QD1");
    let ops: Vec<ProbeOp> = (0..WRITES_QD1)
        .map(|_| write(rng.aligned(half, u, u), u))
        .collect();
    m.writes_qd1 = Batch::new(&one(target, Stream::new(ops, 1))?);
    say("random 4 KiB writes, QD32");
    let ops: Vec<ProbeOp> = (0..WRITES_QD32)
        .map(|_| write(rng.aligned(half, u, u), u))
        .collect();
    m.writes_qd32 = Batch::new(&one(target, Stream::new(ops, DEEP_QUEUE))?);
    let written = (WRITES_QD1 + WRITES_QD32) as u64 * u;
    let pause = fold_pause_ns(written, tail_rate(&m.seq_write));
    say(&format!("pause {:.1} s", pause as f64 / 1e9));
    target.idle(pause)?;
    m.pauses_ns.push(pause);

    say("burst of 64 KiB writes, QD32 (write buffer)");
    let bytes = half.min(BURST_MAX_BYTES);
    let t = one(
        target,
        Stream::new(sequential(bytes, BURST_REQUEST_BYTES, true), DEEP_QUEUE),
    )?;
    m.burst = Series::new(BURST_REQUEST_BYTES, DEEP_QUEUE, &t);
    let pause = fold_pause_ns(bytes, tail_rate(&m.seq_write));
    say(&format!("pause {:.1} s", pause as f64 / 1e9));
    target.idle(pause)?;
    m.pauses_ns.push(pause);

    say("reads of data just written, QD1 (buffering)");
    let mut ops = Vec::new();
    for _ in 0..READ_AFTER_WRITE_PAIRS {
        let off = rng.aligned(half, u, u);
        ops.push(write(off, u));
        ops.push(read(off, u));
    }
    let t = one(target, Stream::new(ops, 1))?;
    m.read_after_write_ns = t.chunks(2).map(|p| p[1].latency_ns()).collect();

    // Discards: each size DISCARD_REPS times, plus one of the largest under reads, each
    // on bytes not discarded before, in the second half.
    // The second half holds every discard: the series (DISCARD_REPS of each size), the
    // back-to-back burst of the smallest, and one of the largest under reads.
    let burst_bytes = DISCARD_BURST as u64 * DISCARD_SIZES[0];
    let mut sizes: Vec<u64> = Vec::new();
    for s in DISCARD_SIZES {
        let total: u64 = sizes.iter().sum::<u64>() + s;
        if total * (DISCARD_REPS as u64 + 1) + burst_bytes > half {
            break;
        }
        sizes.push(s);
    }
    say(&format!(
        "discards of {} bytes, QD1 (TRIM cost)",
        sizes
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut next = half;
    for _ in 0..DISCARD_REPS {
        for &len in &sizes {
            target.idle(DISCARD_GAP_NS)?;
            m.pauses_ns.push(DISCARD_GAP_NS);
            let op = ProbeOp::Discard {
                offset_bytes: next,
                len_bytes: len,
            };
            next += len;
            let t = one(target, Stream::new(vec![op], 1))?;
            m.discards_ns.push((len, t[0].latency_ns()));
        }
    }
    say(&format!(
        "{DISCARD_BURST} discards of {} bytes back to back, QD1 (what a TRIM leaves for the next)",
        sizes[0]
    ));
    target.idle(DISCARD_GAP_NS)?;
    m.pauses_ns.push(DISCARD_GAP_NS);
    let ops: Vec<ProbeOp> = (0..DISCARD_BURST)
        .map(|_| {
            let op = ProbeOp::Discard {
                offset_bytes: next,
                len_bytes: sizes[0],
            };
            next += sizes[0];
            op
        })
        .collect();
    let t = one(target, Stream::new(ops, 1))?;
    m.discard_burst_ns = (sizes[0], t.iter().map(|t| t.latency_ns()).collect());

    say("a discard while reads run (queued or not)");
    let largest = *sizes.last().expect("64 MiB holds the smallest discards");
    if next + largest > region {
        bail!(
            "internal error: the discards would reach byte {} of a {region}-byte region",
            next + largest
        );
    }
    // Reads run from before the discard to well after it would end alone, counted at the
    // fastest reads' pace (the reads must not run out first).
    let read_ns = stats::median(&m.reads_qd1.latencies_ns).max(1);
    let fast_read_ns = stats::quantile(&m.reads_qd1.latencies_ns, 0.1).max(1);
    let discard_ns = m
        .discards_ns
        .iter()
        .filter(|(b, _)| *b == largest)
        .map(|(_, l)| *l)
        .max()
        .unwrap_or(0);
    let delay_ns = 20 * read_ns;
    let reads = (2 * (delay_ns + 3 * discard_ns) / fast_read_ns + 100).min(50_000) as usize;
    let ops: Vec<ProbeOp> = (0..reads)
        .map(|_| read(rng.aligned(half, u, u), u))
        .collect();
    let discard = Stream {
        ops: vec![ProbeOp::Discard {
            offset_bytes: next,
            len_bytes: largest,
        }],
        queue_depth: 1,
        start_delay_ns: delay_ns,
    };
    let mut t = target.run(&[Stream::new(ops, 1), discard])?;
    m.discard_under_reads = DiscardUnderReads {
        discard: t[1][0],
        discard_bytes: largest,
        reads: std::mem::take(&mut t[0]),
    };

    if target.discards_are_trims() {
        // The size series discarded [half, series_end): reads there cost the command and
        // the link only (no flash), so their growth with size is the link's rate.
        let series_end = half + sizes.iter().sum::<u64>() * DISCARD_REPS as u64;
        let span = series_end - half;
        let lens: Vec<u64> = READ_SIZES_UNITS
            .iter()
            .map(|k| k * u)
            .filter(|&b| b <= span)
            .collect();
        say("reads of discarded data, 4 KiB up to 64 KiB, QD1 (link rate: no flash behind them)");
        m.trimmed_reads_ns = reads_by_size(target, (half, span), u, &lens, &mut rng)?;
    }
    Ok(m)
}
