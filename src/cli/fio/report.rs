//! What `flashlab fio` prints: per job, what fio prints (IOPS, bandwidth, completion
//! latency and its percentiles, per direction; syncs), as fio's text or in the shape of
//! fio's JSON (`jobs[].read.iops`, `jobs[].write.clat_ns.percentile["99.000000"]`, ...).

use super::jobfile::Opt;
use super::latency::{Latencies, Summary};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// fio's three data directions, in its order.
pub(crate) const DIRECTIONS: [&str; 3] = ["read", "write", "trim"];

/// One direction's requests of a job.
#[derive(Debug, Clone, Default)]
pub(crate) struct Direction {
    pub(crate) bytes: u64,
    /// Completion latencies (issue to completion in the simulated drive).
    pub(crate) clat: Latencies,
}

/// One job of fio's report: a job or one of its numjobs clones, or with group_reporting
/// all jobs together.
#[derive(Debug, Clone)]
pub(crate) struct Unit {
    pub(crate) name: String,
    /// Jobs (clones counted) in it.
    pub(crate) jobs: u32,
    pub(crate) iodepth: u32,
    /// The job's own options, for "job options".
    pub(crate) options: Vec<Opt>,
    /// Read, write, trim.
    pub(crate) dirs: [Direction; 3],
    /// Flushes (fio's fsync/fdatasync), latencies.
    pub(crate) sync: Latencies,
    /// From the start (time 0) to the last completion.
    pub(crate) runtime_ns: u64,
}

impl Unit {
    pub(crate) fn new(name: &str, iodepth: u32, options: Vec<Opt>) -> Unit {
        Unit {
            name: name.to_string(),
            jobs: 1,
            iodepth,
            options,
            dirs: Default::default(),
            sync: Latencies::default(),
            runtime_ns: 0,
        }
    }

    /// The runtime of direction `d` (0 without requests, as fio reports it).
    fn runtime_ns(&self, d: usize) -> u64 {
        if self.dirs[d].clat.len() == 0 {
            0
        } else {
            self.runtime_ns
        }
    }
}

/// `bytes` or requests per second over `ns`.
fn per_s(n: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

/// Milliseconds, rounded up (so a run that did anything lasted at least 1 ms, as in fio).
fn ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000)
}

/// A quantity as fio prints it: at most four digits before the unit prefix (powers of
/// 1000, or of 1024 with `binary`), then as many decimals as fit in four significant
/// digits, rounded: 248000 -> "248k", 1016000000 -> "1016M", 45678 -> "45.7k".
pub(crate) fn short(num: u64, binary: bool) -> String {
    let base: u64 = if binary { 1024 } else { 1000 };
    let prefixes: [&str; 7] = if binary {
        ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
    } else {
        ["", "k", "M", "G", "T", "P", "E"]
    };
    let digits = |n: u64| n.to_string().len();
    let (mut whole, mut rest, mut scale, mut p) = (num, 0u64, 1u128, 0usize);
    while digits(whole) > 4 && p + 1 < prefixes.len() {
        scale *= base as u128;
        whole = num / scale as u64;
        rest = (num as u128 % scale) as u64;
        p += 1;
    }
    if p == 0 {
        return num.to_string();
    }
    let decimals = 3usize.saturating_sub(digits(whole));
    let tens = 10u128.pow(decimals as u32);
    // The value in units of 10^-decimals of the prefix, rounded half up.
    let scaled = (whole as u128 * tens) + (rest as u128 * tens * 2 + scale) / (scale * 2);
    if decimals == 0 {
        format!("{scaled}{}", prefixes[p])
    } else {
        let (i, f) = (scaled / tens, scaled % tens);
        format!("{i}.{f:0width$}{}", prefixes[p], width = decimals)
    }
}

/// "969MiB/s (1016MB/s)".
fn bandwidth(bytes_per_s: u64) -> String {
    format!(
        "{}B/s ({}B/s)",
        short(bytes_per_s, true),
        short(bytes_per_s, false)
    )
}

/// The unit fio prints latencies in: the largest of msec, usec and nsec in which min,
/// max, mean and standard deviation are all above 1000 of the unit below (so a narrow
/// spread keeps its digits).
fn lat_unit(s: &Summary) -> (&'static str, u64) {
    let above = |div: f64| {
        [s.min_ns as f64, s.max_ns as f64, s.mean_ns, s.stddev_ns]
            .iter()
            .all(|&v| v > div)
    };
    if above(1e6) {
        ("msec", 1_000_000)
    } else if above(1e3) {
        ("usec", 1_000)
    } else {
        ("nsec", 1)
    }
}

/// fio's latency line: "clat (usec): min=..., max=..., avg=..., stdev=...".
fn lat_line(out: &mut String, indent: &str, label: &str, s: &Summary) {
    let (unit, div) = lat_unit(s);
    let d = div as f64;
    let _ = writeln!(
        out,
        "{indent}{label} ({unit}): min={}, max={}, avg={:.2}, stdev={:.2}",
        s.min_ns / div,
        s.max_ns / div,
        s.mean_ns / d,
        s.stddev_ns / d
    );
}

/// fio's percentile table, four to a line.
fn percentile_table(out: &mut String, label: &str, s: &Summary) {
    let (unit, div) = lat_unit(s);
    let _ = writeln!(out, "    {label} percentiles ({unit}):");
    let width = (s.max_ns / div).to_string().len().max(5);
    let cells: Vec<String> = s
        .percentiles
        .iter()
        .map(|&(p, v)| format!("{p:5.2}th=[{:>width$}]", v / div))
        .collect();
    let rows: Vec<&[String]> = cells.chunks(4).collect();
    for (i, row) in rows.iter().enumerate() {
        let more = if i + 1 < rows.len() { "," } else { "" };
        let _ = writeln!(out, "     | {}{more}", row.join(", "));
    }
}

/// fio's text report of `units`, then its "Run status" lines.
pub(crate) fn text(units: &[Unit]) -> String {
    let mut out = String::new();
    for u in units {
        let _ = writeln!(
            out,
            "{}: (groupid=0, jobs={}): err= 0: iodepth={}",
            u.name, u.jobs, u.iodepth
        );
        for (d, dir) in u.dirs.iter().enumerate() {
            let n = dir.clat.len();
            if n == 0 {
                continue;
            }
            let rt = u.runtime_ns(d);
            let _ = writeln!(
                out,
                "  {}: IOPS={}, BW={}({}B/{}msec)",
                DIRECTIONS[d],
                short(per_s(n, rt).round() as u64, false),
                bandwidth(per_s(dir.bytes, rt) as u64),
                short(dir.bytes, true),
                ms(rt)
            );
            let s = dir.clat.summary();
            lat_line(&mut out, "    ", "clat", &s);
            lat_line(&mut out, "     ", "lat", &s);
            percentile_table(&mut out, "clat", &s);
        }
        if u.sync.len() > 0 {
            let _ = writeln!(out, "  fsync/fdatasync/sync_file_range:");
            let s = u.sync.summary();
            lat_line(&mut out, "    ", "sync", &s);
            percentile_table(&mut out, "sync", &s);
        }
        out.push('\n');
    }
    let _ = writeln!(out, "Run status group 0 (all jobs):");
    for (d, name) in DIRECTIONS.iter().enumerate() {
        let with: Vec<&Unit> = units.iter().filter(|u| u.dirs[d].clat.len() > 0).collect();
        if with.is_empty() {
            continue;
        }
        let bytes: u64 = with.iter().map(|u| u.dirs[d].bytes).sum();
        let rts: Vec<u64> = with.iter().map(|u| u.runtime_ns(d)).collect();
        let bws: Vec<u64> = with
            .iter()
            .map(|u| per_s(u.dirs[d].bytes, u.runtime_ns(d)) as u64)
            .collect();
        let (bw_min, bw_max) = (*bws.iter().min().unwrap(), *bws.iter().max().unwrap());
        let (rt_min, rt_max) = (*rts.iter().min().unwrap(), *rts.iter().max().unwrap());
        let _ = writeln!(
            out,
            "{:>7}: bw={}, {}B/s-{}B/s ({}B/s-{}B/s), io={}B ({}B), run={}-{}msec",
            name.to_uppercase(),
            bandwidth(per_s(bytes, rt_max) as u64),
            short(bw_min, true),
            short(bw_max, true),
            short(bw_min, false),
            short(bw_max, false),
            short(bytes, true),
            short(bytes, false),
            ms(rt_min),
            ms(rt_max)
        );
    }
    out
}

/// fio's `{min, max, mean, stddev, N}` (and `percentile` when asked and there are values).
fn lat_json(s: &Summary, percentiles: bool) -> Value {
    let mut v = json!({
        "min": s.min_ns,
        "max": s.max_ns,
        "mean": s.mean_ns,
        "stddev": s.stddev_ns,
        "N": s.n,
    });
    if percentiles && s.n > 0 {
        let p: Map<String, Value> = s
            .percentiles
            .iter()
            .map(|&(p, ns)| (format!("{p:.6}"), json!(ns)))
            .collect();
        v["percentile"] = Value::Object(p);
    }
    v
}

fn direction_json(u: &Unit, d: usize) -> Value {
    let dir = &u.dirs[d];
    let rt = u.runtime_ns(d);
    let n = dir.clat.len();
    let bw_bytes = per_s(dir.bytes, rt) as u64;
    let s = dir.clat.summary();
    json!({
        "io_bytes": dir.bytes,
        "io_kbytes": dir.bytes / 1024,
        "bw_bytes": bw_bytes,
        "bw": bw_bytes / 1024,
        "iops": per_s(n, rt),
        "runtime": ms(rt),
        "total_ios": n,
        "short_ios": 0,
        "drop_ios": 0,
        // Submission takes no time: there is no host software stack in the simulation.
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": lat_json(&s, true),
        "lat_ns": lat_json(&s, false),
    })
}

/// One entry of fio's `jobs` array.
pub(crate) fn job_json(u: &Unit) -> Value {
    let options: Map<String, Value> = u
        .options
        .iter()
        .map(|o| (o.key.clone(), json!(o.value.clone().unwrap_or_default())))
        .collect();
    let mut v = json!({
        "jobname": u.name,
        "groupid": 0,
        "error": 0,
        "job options": options,
        "job_runtime": ms(u.runtime_ns),
        "sync": {
            "total_ios": u.sync.len(),
            "lat_ns": lat_json(&u.sync.summary(), true),
        },
    });
    for (d, name) in DIRECTIONS.iter().enumerate() {
        v[*name] = direction_json(u, d);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_in_four_significant_digits_as_fio_does() {
        // The values of a real fio run's report: "IOPS=248k, BW=969MiB/s (1016MB/s)(992KiB".
        assert_eq!(short(248_000, false), "248k");
        assert_eq!(short(1_016_000_000, true), "969Mi");
        assert_eq!(short(1_016_000_000, false), "1016M");
        assert_eq!(short(1_015_808, true), "992Ki");
        assert_eq!(short(4801, false), "4801");
        assert_eq!(short(45_678, false), "45.7k");
        assert_eq!(short(12_345_678, false), "12.3M");
        assert_eq!(short(99_999, false), "100.0k");
        assert_eq!(short(0, true), "0");
        assert_eq!(short(64 << 20, true), "64.0Mi");
        assert_eq!(short(u64::MAX, true), "16.0Ei");
    }

    fn unit() -> Unit {
        let mut u = Unit::new("w", 32, vec![]);
        for i in 1..=100u64 {
            u.dirs[1].bytes += 4096;
            u.dirs[1].clat.push(i * 10_000);
        }
        u.sync.push(2_000_000);
        u.runtime_ns = 100_000_000;
        u
    }

    #[test]
    fn json_has_fios_fields_and_units() {
        let v = job_json(&unit());
        let w = &v["write"];
        assert_eq!(w["total_ios"], 100);
        assert_eq!(w["io_bytes"], 409_600);
        assert_eq!(w["io_kbytes"], 400);
        assert_eq!(w["bw_bytes"], 4_096_000);
        assert_eq!(w["bw"], 4000);
        assert_eq!(w["iops"], 1000.0);
        assert_eq!(w["runtime"], 100);
        assert_eq!(w["clat_ns"]["percentile"]["50.000000"], 500_000);
        assert_eq!(w["clat_ns"]["percentile"]["99.990000"], 1_000_000);
        assert_eq!(w["clat_ns"]["N"], 100);
        assert_eq!(w["lat_ns"]["max"], 1_000_000);
        assert!(w["lat_ns"].get("percentile").is_none());
        let r = &v["read"];
        assert_eq!(
            (r["total_ios"].as_u64(), r["runtime"].as_u64()),
            (Some(0), Some(0))
        );
        assert!(r["clat_ns"].get("percentile").is_none());
        assert_eq!(v["sync"]["total_ios"], 1);
        assert_eq!(v["job_runtime"], 100);
    }

    #[test]
    fn text_reads_like_fios() {
        let t = text(&[unit()]);
        assert!(
            t.starts_with("w: (groupid=0, jobs=1): err= 0: iodepth=32\n"),
            "{t}"
        );
        assert!(
            t.contains("  write: IOPS=1000, BW=4000KiB/s (4096kB/s)(400KiB/100msec)\n"),
            "{t}"
        );
        assert!(
            t.contains("    clat (usec): min=10, max=1000, avg=505.00, stdev=290.11\n"),
            "{t}"
        );
        assert!(t.contains("     lat (usec): min=10"), "{t}");
        assert!(t.contains("    clat percentiles (usec):\n     |  1.00th=[   10],  5.00th=[   50], 10.00th=[  100], 20.00th=[  200],\n"), "{t}");
        assert!(t.contains("     | 99.99th=[ 1000]\n"), "{t}");
        assert!(
            t.contains(
                "  fsync/fdatasync/sync_file_range:\n    sync (nsec): min=2000000, max=2000000"
            ),
            "{t}"
        );
        assert!(t.contains("  WRITE: bw=4000KiB/s (4096kB/s), 4000KiB/s-4000KiB/s (4096kB/s-4096kB/s), io=400KiB (410kB), run=100-100msec"), "{t}");
        assert!(!t.contains("read:"));
    }
}
