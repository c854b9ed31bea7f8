//! A run's figures over time: [`Timeline`] wraps any [`Device`] and cuts the run into
//! intervals of virtual time (`--interval`), each with its host figures (operations,
//! bandwidth, latency p50/p99/max per operation, mean queue depth) and the drive's work
//! (flash programs, GC copies, erases, pages trimmed, suspensions, SLC cache fill, WAF in
//! the interval and so far). It also keeps each operation's whole latency histogram at
//! full precision, for export in HdrHistogram's percentile format ([`hgrm`]), and can hand
//! every completed request to a callback (per-request records, as blktrace's btt reads).
//!
//! Host figures are counted where a request *completes*; the drive's counters where its
//! work was *submitted* (the FTL decides at submission): the counters are read from
//! [`Device::stats`] whenever a submission starts a new interval, so the work of every
//! submission made in an interval is that interval's. The queue depth is the mean number of
//! requests outstanding over the interval (each request counted from its submission to its
//! completion). Summed over the rows, operations, bytes and device counters equal the run's
//! totals (a test checks it).
//!
//! Wrapping changes nothing the device decides: the same commands reach it at the same
//! times.

use crate::{Command, Device, DeviceStats, FlashError, Op};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::VecDeque;

/// The most intervals one run may produce: a trace with long idle gaps at a short
/// interval would otherwise fill memory with empty rows.
pub const MAX_INTERVALS: u64 = 500_000;

/// One request as the device served it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub submit_ns: u64,
    pub complete_ns: u64,
}

/// The operations a row keeps figures for, in column order.
const OPS: [(&str, usize); 3] = [("read", 0), ("write", 1), ("trim", 2)];

fn op_slot(op: Op) -> Option<usize> {
    match op {
        Op::Read => Some(0),
        Op::Write => Some(1),
        Op::Trim | Op::VTrim | Op::FTrim => Some(2),
        Op::Flush => None,
    }
}

/// Latencies of one operation in one interval: 2 significant digits (1%) are enough for
/// an interval's p50 and p99, and keep a histogram at about 20 KB.
fn interval_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, 1 << 46, 2).expect("valid histogram bounds")
}

/// A whole run's latencies of one operation, as [`crate::stats`] keeps them (3 digits).
fn run_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 46, 3).expect("valid histogram bounds")
}

#[derive(Default)]
struct OpBin {
    count: u64,
    bytes: u64,
    hist: Option<Histogram<u32>>,
}

#[derive(Default)]
struct Bin {
    ops: [OpBin; 3],
    flushes: u64,
    /// Sum over requests of the time each was outstanding within the interval.
    outstanding_ns: u128,
    device: Counters,
    slc_held_bytes: Option<u64>,
}

/// The drive's cumulative counters that rows report the change of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    host_write_pages: u64,
    flash_write_pages: u64,
    gc_copied_pages: u64,
    erases: u64,
    trimmed_pages: u64,
    suspensions: u64,
}

impl Counters {
    fn of(s: &DeviceStats) -> Counters {
        Counters {
            host_write_pages: s.host_write_pages,
            flash_write_pages: s.flash_write_pages,
            gc_copied_pages: s.gc_copied_pages,
            erases: s.erases,
            trimmed_pages: s.trimmed_pages,
            suspensions: s.maintenance_suspensions,
        }
    }
    fn minus(self, o: Counters) -> Counters {
        Counters {
            host_write_pages: self.host_write_pages.saturating_sub(o.host_write_pages),
            flash_write_pages: self.flash_write_pages.saturating_sub(o.flash_write_pages),
            gc_copied_pages: self.gc_copied_pages.saturating_sub(o.gc_copied_pages),
            erases: self.erases.saturating_sub(o.erases),
            trimmed_pages: self.trimmed_pages.saturating_sub(o.trimmed_pages),
            suspensions: self.suspensions.saturating_sub(o.suspensions),
        }
    }
    fn plus(self, o: Counters) -> Counters {
        Counters {
            host_write_pages: self.host_write_pages + o.host_write_pages,
            flash_write_pages: self.flash_write_pages + o.flash_write_pages,
            gc_copied_pages: self.gc_copied_pages + o.gc_copied_pages,
            erases: self.erases + o.erases,
            trimmed_pages: self.trimmed_pages + o.trimmed_pages,
            suspensions: self.suspensions + o.suspensions,
        }
    }
}

/// An operation's figures in one interval (latencies in microseconds; `None` without
/// any operation of the kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OpFigures {
    pub count: u64,
    pub bytes: u64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub max_us: Option<f64>,
}

/// One interval of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalRow {
    /// The interval's start, in seconds since the recording began (the measured phase's
    /// start; a request log's times are the drive's virtual clock, warm-up included).
    pub t_s: f64,
    pub interval_s: f64,
    /// Operations completed per second (reads, writes, TRIMs and flushes).
    pub iops: f64,
    pub read_mb_per_s: f64,
    pub write_mb_per_s: f64,
    pub read: OpFigures,
    pub write: OpFigures,
    pub trim: OpFigures,
    pub flushes: u64,
    /// Mean requests outstanding over the interval.
    pub queue_depth: f64,
    pub host_write_pages: u64,
    pub flash_write_pages: u64,
    pub gc_copied_pages: u64,
    pub erases: u64,
    pub trimmed_pages: u64,
    /// Program and erase suspensions for host reads (the priority scheduler).
    pub suspensions: u64,
    /// Flash pages written over host pages written in the interval.
    pub waf: Option<f64>,
    /// The same from the recording's start to the interval's end.
    pub waf_so_far: Option<f64>,
    /// Data held in the SLC cache awaiting a fold, at the interval's end (drives with one).
    pub slc_held_bytes: Option<u64>,
}

/// The figures over time, and each operation's whole latency histogram.
#[derive(Debug, Clone)]
pub struct TimeSeries {
    pub interval_ns: u64,
    pub rows: Vec<IntervalRow>,
    /// Read, write and TRIM latencies of the whole recording, in nanoseconds.
    pub histograms: [(&'static str, Histogram<u64>); 3],
    /// Every request, in submission order, if [`Recording::keep_requests`] asked for them.
    pub requests: Vec<Completion>,
}

impl TimeSeries {
    /// The names of the CSV's columns, in order (a row's JSON fields, nested ones joined
    /// with `_`: `read.p99_us` is `read_p99_us`).
    pub fn columns() -> Vec<String> {
        let mut out: Vec<String> = [
            "t_s",
            "interval_s",
            "iops",
            "read_mb_per_s",
            "write_mb_per_s",
        ]
        .map(String::from)
        .to_vec();
        for (name, _) in OPS {
            for f in ["count", "bytes", "p50_us", "p99_us", "max_us"] {
                out.push(format!("{name}_{f}"));
            }
        }
        out.extend(
            [
                "flushes",
                "queue_depth",
                "host_write_pages",
                "flash_write_pages",
                "gc_copied_pages",
                "erases",
                "trimmed_pages",
                "suspensions",
                "waf",
                "waf_so_far",
                "slc_held_bytes",
            ]
            .map(String::from),
        );
        out
    }

    /// The rows as CSV, one header line then a line per interval (empty cells for figures
    /// an interval has none of).
    pub fn to_csv(&self) -> String {
        let mut out = Self::columns().join(",");
        out.push('\n');
        let opt = |v: Option<f64>| v.map_or(String::new(), num);
        for r in &self.rows {
            out.push_str(&format!(
                "{},{},{},{},{}",
                num(r.t_s),
                num(r.interval_s),
                num(r.iops),
                num(r.read_mb_per_s),
                num(r.write_mb_per_s)
            ));
            for f in [&r.read, &r.write, &r.trim] {
                out.push_str(&format!(
                    ",{},{},{},{},{}",
                    f.count,
                    f.bytes,
                    opt(f.p50_us),
                    opt(f.p99_us),
                    opt(f.max_us)
                ));
            }
            out.push_str(&format!(
                ",{},{},{},{},{},{},{},{},{},{},{}\n",
                r.flushes,
                num(r.queue_depth),
                r.host_write_pages,
                r.flash_write_pages,
                r.gc_copied_pages,
                r.erases,
                r.trimmed_pages,
                r.suspensions,
                opt(r.waf),
                opt(r.waf_so_far),
                r.slc_held_bytes.map_or(String::new(), |v| v.to_string())
            ));
        }
        out
    }
}

/// `v` with at most 9 decimals (CSV cells without binary noise such as 0.15000000000000002;
/// a nanosecond in seconds kept).
fn num(v: f64) -> String {
    format!("{}", (v * 1e9).round() / 1e9)
}

/// The recording a [`Timeline`] keeps; [`Recording::finish`] turns it into a
/// [`TimeSeries`].
pub struct Recording {
    interval_ns: u64,
    start_ns: u64,
    rows: Vec<IntervalRow>,
    /// Bins not yet closed, from bin `first_open` on.
    open: VecDeque<Bin>,
    first_open: u64,
    /// The bin of the latest submission, whose device work is not yet counted.
    current: u64,
    counters_at_current: Counters,
    counters_at_start: Counters,
    totals: Counters,
    /// The SLC fill last read, carried into intervals without a reading of their own.
    last_slc_held_bytes: Option<u64>,
    whole: [Histogram<u64>; 3],
    spare: Vec<Histogram<u32>>,
    /// Every request, when kept (for a request log where no callback reaches the device).
    requests: Option<Vec<Completion>>,
}

impl Recording {
    /// A recording of intervals of `interval_ns` from virtual time `start_ns`, the device's
    /// counters then being `stats`.
    pub fn new(interval_ns: u64, start_ns: u64, stats: &DeviceStats) -> Result<Self, FlashError> {
        if interval_ns == 0 {
            return Err(FlashError::Config("--interval must be positive".into()));
        }
        let c = Counters::of(stats);
        Ok(Recording {
            interval_ns,
            start_ns,
            rows: Vec::new(),
            open: VecDeque::new(),
            first_open: 0,
            current: 0,
            counters_at_current: c,
            counters_at_start: c,
            totals: Counters::default(),
            last_slc_held_bytes: stats.slc_held_bytes,
            whole: [run_histogram(), run_histogram(), run_histogram()],
            spare: Vec::new(),
            requests: None,
        })
    }

    /// Keeps every request for [`TimeSeries::requests`] (about 40 bytes each).
    pub fn keep_requests(mut self) -> Self {
        self.requests = Some(Vec::new());
        self
    }

    fn bin_of(&self, t_ns: u64) -> u64 {
        t_ns.saturating_sub(self.start_ns) / self.interval_ns
    }

    /// Refuses a bin past [`MAX_INTERVALS`] before any row up to it is made.
    fn check_limit(&self, bin: u64) -> Result<(), FlashError> {
        if bin < MAX_INTERVALS {
            return Ok(());
        }
        Err(FlashError::Config(format!(
            "the run reached {:.3} s, more than {MAX_INTERVALS} intervals of {} ms: give a longer --interval",
            (bin as f64 * self.interval_ns as f64) / 1e9,
            self.interval_ns as f64 / 1e6
        )))
    }

    fn bin_mut(&mut self, bin: u64) -> Result<&mut Bin, FlashError> {
        self.check_limit(bin)?;
        let i = (bin - self.first_open) as usize;
        while self.open.len() <= i {
            self.open.push_back(Bin::default());
        }
        Ok(&mut self.open[i])
    }

    /// Call before submitting a command at `now_ns`; `stats` gives the device's counters
    /// (read only when the submission starts a new interval).
    pub fn before_submit(
        &mut self,
        now_ns: u64,
        stats: impl FnOnce() -> DeviceStats,
    ) -> Result<(), FlashError> {
        let bin = self.bin_of(now_ns);
        if bin <= self.current {
            return Ok(());
        }
        self.check_limit(bin)?;
        let s = stats();
        self.close_current(&s)?;
        self.current = bin;
        // No completion or outstanding time can land before `now_ns` any more.
        while self.first_open < bin {
            let b = self.open.pop_front().unwrap_or_default();
            self.close_bin(self.first_open, b);
            self.first_open += 1;
        }
        Ok(())
    }

    /// Counts the device's work since the last reading into the current bin.
    fn close_current(&mut self, s: &DeviceStats) -> Result<(), FlashError> {
        let c = Counters::of(s);
        let delta = c.minus(self.counters_at_current);
        self.counters_at_current = c;
        let slc = s.slc_held_bytes;
        let current = self.current;
        let b = self.bin_mut(current)?;
        b.device = b.device.plus(delta);
        b.slc_held_bytes = slc;
        Ok(())
    }

    /// Call with each command the device answered.
    pub fn completed(&mut self, c: &Completion) -> Result<(), FlashError> {
        if let Some(kept) = &mut self.requests {
            kept.push(*c);
        }
        let latency = c.complete_ns - c.submit_ns;
        let done_bin = self.bin_of(c.complete_ns);
        self.check_limit(done_bin)?;
        if let Some(slot) = op_slot(c.op) {
            self.whole[slot].saturating_record(latency.max(1));
            let spare = self.spare.pop();
            let b = self.bin_mut(done_bin)?;
            let o = &mut b.ops[slot];
            o.count += 1;
            o.bytes += c.len_bytes;
            let h = o
                .hist
                .get_or_insert_with(|| spare.unwrap_or_else(interval_histogram));
            h.saturating_record(latency.max(1));
        } else {
            self.bin_mut(done_bin)?.flushes += 1;
        }
        // Outstanding time, spread over the bins the request spans.
        let mut t = c.submit_ns;
        let mut bin = self.bin_of(t).max(self.first_open);
        while t < c.complete_ns {
            let end = (self.start_ns + (bin + 1) * self.interval_ns).min(c.complete_ns);
            let end = end.max(t);
            self.bin_mut(bin)?.outstanding_ns += (end - t) as u128;
            t = end;
            bin += 1;
        }
        Ok(())
    }

    fn close_bin(&mut self, index: u64, mut b: Bin) {
        let secs = self.interval_ns as f64 / 1e9;
        self.totals = self.totals.plus(b.device);
        let d = b.device;
        let mut figures = [OpFigures::default(); 3];
        for (slot, f) in figures.iter_mut().enumerate() {
            let o = &mut b.ops[slot];
            f.count = o.count;
            f.bytes = o.bytes;
            if let Some(mut h) = o.hist.take() {
                let us = |v: u64| v as f64 / 1e3;
                f.p50_us = Some(us(h.value_at_quantile(0.5)));
                f.p99_us = Some(us(h.value_at_quantile(0.99)));
                f.max_us = Some(us(h.max()));
                h.reset();
                self.spare.push(h);
            }
        }
        let ops = figures.iter().map(|f| f.count).sum::<u64>() + b.flushes;
        let slc_held_bytes = b.slc_held_bytes.or(self.last_slc_held_bytes);
        self.last_slc_held_bytes = slc_held_bytes;
        let ratio = |flash: u64, host: u64| (host > 0).then(|| flash as f64 / host as f64);
        self.rows.push(IntervalRow {
            t_s: index as f64 * secs,
            interval_s: secs,
            iops: ops as f64 / secs,
            read_mb_per_s: figures[0].bytes as f64 / 1e6 / secs,
            write_mb_per_s: figures[1].bytes as f64 / 1e6 / secs,
            read: figures[0],
            write: figures[1],
            trim: figures[2],
            flushes: b.flushes,
            queue_depth: b.outstanding_ns as f64 / self.interval_ns as f64,
            host_write_pages: d.host_write_pages,
            flash_write_pages: d.flash_write_pages,
            gc_copied_pages: d.gc_copied_pages,
            erases: d.erases,
            trimmed_pages: d.trimmed_pages,
            suspensions: d.suspensions,
            waf: ratio(d.flash_write_pages, d.host_write_pages),
            waf_so_far: ratio(self.totals.flash_write_pages, self.totals.host_write_pages),
            slc_held_bytes,
        });
    }

    /// Closes the recording with the device's final counters (`stats`, read after
    /// [`Device::settle`] if the caller settles: work it did then is the last interval's).
    pub fn finish(mut self, stats: &DeviceStats) -> Result<TimeSeries, FlashError> {
        self.close_current(stats)?;
        while let Some(b) = self.open.pop_front() {
            self.close_bin(self.first_open, b);
            self.first_open += 1;
        }
        debug_assert_eq!(
            self.totals,
            Counters::of(stats).minus(self.counters_at_start),
            "interval counters add up to the run's"
        );
        let [r, w, t] = self.whole;
        Ok(TimeSeries {
            interval_ns: self.interval_ns,
            rows: self.rows,
            histograms: [("read", r), ("write", w), ("trim", t)],
            requests: self.requests.unwrap_or_default(),
        })
    }
}

/// A device whose run is recorded interval by interval (module docs).
pub struct Timeline<'d, 'e, D: Device> {
    dev: &'d mut D,
    rec: Recording,
    each: Option<&'e mut dyn FnMut(&Completion)>,
}

impl<'d, 'e, D: Device> Timeline<'d, 'e, D> {
    /// Records `dev` from virtual time `start_ns` in intervals of `interval_ns`; `each`, if
    /// given, is told every completed request.
    pub fn new(
        dev: &'d mut D,
        interval_ns: u64,
        start_ns: u64,
        each: Option<&'e mut dyn FnMut(&Completion)>,
    ) -> Result<Self, FlashError> {
        let rec = Recording::new(interval_ns, start_ns, &dev.stats())?;
        Ok(Timeline { dev, rec, each })
    }

    /// The recording so far, releasing the device (to settle it, then
    /// [`Recording::finish`] with its final stats).
    pub fn into_recording(self) -> Recording {
        self.rec
    }
}

impl<D: Device> Device for Timeline<'_, '_, D> {
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        let dev = &mut *self.dev;
        self.rec.before_submit(now_ns, || dev.stats())?;
        let done = self.dev.submit(cmd, now_ns)?;
        let c = Completion {
            op: cmd.op,
            offset_bytes: cmd.offset_bytes,
            len_bytes: cmd.len_bytes,
            submit_ns: now_ns,
            complete_ns: done,
        };
        self.rec.completed(&c)?;
        if let Some(each) = self.each.as_deref_mut() {
            each(&c);
        }
        Ok(done)
    }
    fn stats(&self) -> DeviceStats {
        self.dev.stats()
    }
    fn reset_stats(&mut self) {
        self.dev.reset_stats()
    }
    fn logical_bytes(&self) -> u64 {
        self.dev.logical_bytes()
    }
    fn prefetch(&self, cmd: &Command) {
        self.dev.prefetch(cmd)
    }
    fn prefetch_mapped(&self, cmd: &Command) {
        self.dev.prefetch_mapped(cmd)
    }
    fn settle(&mut self) -> u64 {
        self.dev.settle()
    }
    fn rested_ns(&mut self) -> u64 {
        self.dev.rested_ns()
    }
}

/// `h` (nanoseconds) in HdrHistogram's percentile distribution format (`.hgrm`, values in
/// microseconds), as HdrHistogram's `outputPercentileDistribution` writes it and its
/// plotter (hdrhistogram.github.io/HdrHistogram/plotFiles.html) reads it.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut out = String::from("       Value     Percentile TotalCount 1/(1-Percentile)\n\n");
    if h.is_empty() {
        return out;
    }
    let mut total = 0u64;
    for v in h.iter_quantiles(5) {
        total += v.count_since_last_iteration();
        let q = v.quantile_iterated_to();
        let value_us = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
        if q < 1.0 {
            out.push_str(&format!(
                "{value_us:12.3} {q:14.12} {total:10} {:14.2}\n",
                1.0 / (1.0 - q)
            ));
        } else {
            out.push_str(&format!("{value_us:12.3} {q:14.12} {total:10}\n"));
        }
    }
    out.push_str(&format!(
        "#[Mean    = {:12.3}, StdDeviation   = {:12.3}]\n#[Max     = {:12.3}, Total count    = {:12}]\n#[Buckets = {:12}, SubBuckets     = {:12}]\n",
        h.mean() / 1e3,
        h.stdev() / 1e3,
        h.max() as f64 / 1e3,
        h.len(),
        h.buckets(),
        sub_buckets(h.sigfig())
    ));
    out
}

/// HdrHistogram's sub-bucket count for `sigfig` significant digits (the footer of
/// [`hgrm`]): the power of two at or above 2 x 10^sigfig.
fn sub_buckets(sigfig: u8) -> u64 {
    (2 * 10u64.pow(sigfig as u32)).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AnyDevice, Preset};

    /// A small MX500 (SLC cache, write buffer, priority scheduler), filled.
    fn drive() -> AnyDevice {
        let mut dev = Preset::load("mx500")
            .unwrap()
            .with_capacity(256 << 20)
            .build()
            .unwrap();
        let mut now = 0;
        for i in 0..256u64 {
            now = dev.submit(&Command::write(i << 20, 1 << 20), now).unwrap();
        }
        dev.reset_stats();
        dev
    }

    /// 30,000 requests at queue depth 1 spaced 20 us apart: random 4 KiB writes over the
    /// first 200 MiB (enough to make GC run), every third a read, every 500th a TRIM.
    fn run<D: Device>(dev: &mut D) -> Vec<u64> {
        let mut x: u64 = 7;
        let mut now = 1 << 40;
        let mut done = Vec::new();
        for i in 0..30_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let offset = (x >> 20) % (200 << 8) * 4096;
            let cmd = match i % 500 {
                499 => Command::trim(offset, 64 << 10),
                _ if i % 3 == 0 => Command::read(offset, 4096),
                _ => Command::write(offset, 4096),
            };
            let d = dev.submit(&cmd, now).unwrap();
            done.push(d);
            now = d + 20_000;
        }
        done
    }

    #[test]
    fn rows_add_up_to_the_runs_totals_and_wrapping_changes_nothing() {
        let mut plain = drive();
        let plain_done = run(&mut plain);
        let mut dev = drive();
        let mut seen = 0u64;
        let mut count = |_: &Completion| seen += 1;
        let mut t = Timeline::new(&mut dev, 10_000_000, 1 << 40, Some(&mut count)).unwrap();
        let done = run(&mut t);
        let rec = t.into_recording();
        assert_eq!(done, plain_done, "the same completions with the timeline");
        dev.settle();
        let s = dev.stats();
        let ts = rec.finish(&s).unwrap();
        assert_eq!(seen, 30_000);
        assert!(ts.rows.len() > 20, "{} rows", ts.rows.len());
        let sum = |f: &dyn Fn(&IntervalRow) -> u64| ts.rows.iter().map(f).sum::<u64>();
        assert_eq!(sum(&|r| r.read.count), s.read_latency_ns.count);
        assert_eq!(sum(&|r| r.write.count), s.write_latency_ns.count);
        assert_eq!(sum(&|r| r.trim.count), s.trim_commands);
        assert_eq!(sum(&|r| r.read.bytes), s.host_read_bytes);
        assert_eq!(sum(&|r| r.write.bytes), s.host_write_bytes);
        assert_eq!(sum(&|r| r.host_write_pages), s.host_write_pages);
        assert_eq!(sum(&|r| r.flash_write_pages), s.flash_write_pages);
        assert_eq!(sum(&|r| r.gc_copied_pages), s.gc_copied_pages);
        assert_eq!(sum(&|r| r.erases), s.erases);
        assert_eq!(sum(&|r| r.trimmed_pages), s.trimmed_pages);
        assert!(
            s.gc_copied_pages > 0 && s.trimmed_pages > 0,
            "GC and TRIM ran"
        );
        let last = ts.rows.iter().rev().find_map(|r| r.waf_so_far).unwrap();
        assert!(
            (last - s.waf.unwrap()).abs() < 1e-9,
            "{last} vs {:?}",
            s.waf
        );
        // Little's law: the mean queue depth times the time is the sum of latencies.
        let area: f64 = ts.rows.iter().map(|r| r.queue_depth * r.interval_s).sum();
        let latencies = (s.read_latency_ns.mean * s.read_latency_ns.count
            + s.write_latency_ns.mean * s.write_latency_ns.count
            + s.trim_latency_ns.mean * s.trim_latency_ns.count) as f64
            / 1e9;
        assert!(
            (area - latencies).abs() / latencies < 1e-3,
            "{area} vs {latencies}"
        );
        // The whole-run histograms agree with the device's.
        let [(_, r), (_, w), _] = &ts.histograms;
        assert_eq!(r.len(), s.read_latency_ns.count);
        assert_eq!(r.value_at_quantile(0.99), s.read_latency_ns.p99);
        assert_eq!(w.max(), s.write_latency_ns.max);
        // An interval's max is the largest latency completed in it; the run's is one of them.
        let max_us = ts
            .rows
            .iter()
            .filter_map(|r| r.write.max_us)
            .fold(0.0, f64::max);
        assert!((max_us * 1e3 - s.write_latency_ns.max as f64).abs() / max_us / 1e3 < 0.01);
        assert!(ts.rows.iter().any(|r| r.slc_held_bytes.is_some()));
        let csv = ts.to_csv();
        assert_eq!(csv.lines().count(), ts.rows.len() + 1);
        let cols = csv.lines().next().unwrap().split(',').count();
        assert!(csv.lines().all(|l| l.split(',').count() == cols));
    }

    #[test]
    fn a_zero_interval_and_a_run_past_the_interval_limit_are_refused_by_name() {
        let mut dev = drive();
        let e = Timeline::new(&mut dev, 0, 0, None).err().unwrap();
        assert!(e.to_string().contains("--interval"), "{e}");
        let start = 1 << 40;
        let mut t = Timeline::new(&mut dev, 1_000, start, None).unwrap();
        t.submit(&Command::write(0, 4096), start).unwrap();
        let e = t
            .submit(&Command::write(0, 4096), start + 10_000_000_000)
            .unwrap_err();
        assert!(e.to_string().contains("longer --interval"), "{e}");
    }

    #[test]
    fn hgrm_lists_percentiles_up_to_the_max_with_the_total_count() {
        let mut h = run_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 1_000).unwrap();
        }
        let text = hgrm(&h);
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().map(|v| v.parse().unwrap()).collect())
            .collect();
        assert!(rows
            .windows(2)
            .all(|w| w[0][0] <= w[1][0] && w[0][1] <= w[1][1]));
        let last = rows.last().unwrap();
        assert_eq!(last[1], 1.0);
        assert_eq!(last[2], 10_000.0);
        assert!((last[0] - 10_000.0).abs() < 10.0, "max {} us", last[0]);
        let p50 = rows.iter().find(|r| r[1] >= 0.5).unwrap();
        assert!((p50[0] - 5_000.0).abs() < 10.0, "p50 {} us", p50[0]);
        assert!(text.contains("Total count    =        10000"), "{text}");
    }
}
