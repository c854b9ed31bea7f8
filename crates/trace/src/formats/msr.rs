//! MSR Cambridge block traces (SNIA IOTTA): CSV lines
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with the timestamp in
//! Windows filetime ticks (100 ns) and the response time in ticks too. One stream per
//! host and disk.

use super::{for_each_line, parse_u64};
use crate::request::Request;
use crate::{Trace, TraceError};
use flash::Command;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Parses an MSR Cambridge CSV. Each (host, disk number) is its own address space: a file
/// holding several is an error naming them unless `disk` picks one (`N`, or `HOST:N` when
/// several hosts have a disk N); only its rows are kept.
pub fn parse(origin: &str, text: &str, disk: Option<&str>) -> Result<Trace, TraceError> {
    let mut lines = MsrLines::new(disk);
    let mut rows = Vec::new();
    for_each_line(origin, text, |line| {
        if let Some(row) = lines.line(line)? {
            rows.push(row);
        }
        Ok(true)
    })?;
    lines.finish(origin)?;
    // Whole in memory: any disorder is sorted (a stable sort, as the window below).
    let mut order = MsrOrder::new(usize::MAX);
    let mut requests = Vec::with_capacity(rows.len());
    for row in rows {
        order.push(row).map_err(|msg| TraceError::Format {
            origin: origin.to_string(),
            msg,
        })?;
    }
    while let Some(r) = order.pop() {
        requests.push(r);
    }
    Ok(Trace {
        requests,
        timestamped: true,
    })
}

/// One row: issue time (ns, absolute), stream, command, response time (ns).
pub(crate) struct MsrRow {
    at_ns: u64,
    stream: u32,
    cmd: Command,
    response_ns: u64,
}

/// The MSR parser, a line at a time: rows of the wanted disk, and every disk seen.
pub(crate) struct MsrLines {
    wanted: Option<(Option<String>, String)>,
    /// The option as given, for messages.
    disk: Option<String>,
    /// Every (host, disk) seen, in order of first appearance.
    disks: Vec<(String, String)>,
    /// (host, disk) → stream, numbered in order of first appearance.
    streams: HashMap<(String, String), u32>,
}

impl MsrLines {
    pub(crate) fn new(disk: Option<&str>) -> MsrLines {
        MsrLines {
            wanted: disk.map(|d| match d.split_once(':') {
                Some((host, n)) => (Some(host.to_string()), n.to_string()),
                None => (None, d.to_string()),
            }),
            disk: disk.map(str::to_string),
            disks: Vec::new(),
            streams: HashMap::new(),
        }
    }

    /// The row on `line`, if it holds one of the wanted disk.
    pub(crate) fn line(&mut self, line: &str) -> Result<Option<MsrRow>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("Timestamp") {
            return Ok(None);
        }
        let f: Vec<&str> = t.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(format!(
                "expected 7 comma-separated fields, found {}",
                f.len()
            ));
        }
        let ticks = parse_u64(f[0], "timestamp")?;
        parse_u64(f[2], "disk number")?;
        let (host, number) = (f[1], f[2]);
        if !self.disks.iter().any(|(h, d)| h == host && d == number) {
            self.disks.push((host.to_string(), number.to_string()));
        }
        if let Some((h, n)) = &self.wanted {
            if n != number || h.as_ref().is_some_and(|h| h != host) {
                return Ok(None);
            }
        }
        let offset = parse_u64(f[4], "offset")?;
        let size = parse_u64(f[5], "size")?;
        let response = parse_u64(f[6], "response time")?;
        offset.checked_add(size).ok_or("offset + size overflows")?;
        let cmd = match f[3].to_ascii_lowercase().as_str() {
            "read" => Command::read(offset, size),
            "write" => Command::write(offset, size),
            _ => return Err(format!("type {:?} is neither Read nor Write", f[3])),
        };
        let next = self.streams.len() as u32;
        let stream = *self
            .streams
            .entry((host.to_string(), number.to_string()))
            .or_insert(next);
        let at_ns = ticks
            .checked_mul(100)
            .ok_or("timestamp overflows nanoseconds")?;
        Ok(Some(MsrRow {
            at_ns,
            stream,
            cmd,
            response_ns: response.saturating_mul(100),
        }))
    }

    /// At the end of the input: an error if the disks seen cannot be replayed as asked
    /// (several without `--disk`, or `--disk` naming none or an ambiguous one).
    pub(crate) fn finish(&self, origin: &str) -> Result<(), TraceError> {
        let names = |v: &[(String, String)]| {
            v.iter()
                .map(|(h, d)| format!("{h}:{d}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let err = |msg: String| TraceError::Format {
            origin: origin.to_string(),
            msg,
        };
        let disks = &self.disks;
        match &self.wanted {
            None if disks.len() > 1 => Err(err(format!(
                "the trace holds {} disks ({}), each its own address space: replaying them as one would \
                 make their blocks collide; pick one with --disk (e.g. --disk {}:{})",
                disks.len(),
                names(disks),
                disks[0].0,
                disks[0].1
            ))),
            Some((host, n)) => {
                let matching: Vec<(String, String)> = disks
                    .iter()
                    .filter(|(h, d)| d == n && host.as_ref().is_none_or(|w| w == h))
                    .cloned()
                    .collect();
                if matching.is_empty() {
                    return Err(err(format!(
                        "no disk {} in the trace; it holds {}",
                        self.disk.as_deref().unwrap_or_default(),
                        names(disks)
                    )));
                }
                if matching.len() > 1 {
                    return Err(err(format!(
                        "disk {n} is on several hosts ({}): pick one with --disk HOST:{n}",
                        names(&matching)
                    )));
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// Puts rows in time order through a window of `window` rows (ties keep the file's order,
/// as a stable sort) and turns them into requests: times from the first request, think
/// times per stream from the previous request's completion (issue + response time).
/// A row waiting in the window, ordered by time, then by arrival (a stable sort's order).
struct Pending {
    seq: u64,
    row: MsrRow,
}

impl Pending {
    fn key(&self) -> (u64, u64) {
        (self.row.at_ns, self.seq)
    }
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

pub(crate) struct MsrOrder {
    window: usize,
    /// Rows waiting, earliest (time, then arrival) first.
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    /// Time of the first request out (times start there), and of the latest.
    t0_ns: Option<u64>,
    last_out_ns: u64,
    /// Per stream, when its previous request completed (from t0).
    last_done_ns: HashMap<u32, u64>,
}

impl MsrOrder {
    pub(crate) fn new(window: usize) -> MsrOrder {
        MsrOrder {
            window,
            pending: BinaryHeap::new(),
            seq: 0,
            t0_ns: None,
            last_out_ns: 0,
            last_done_ns: HashMap::new(),
        }
    }

    /// Adds a row; an error if it is earlier than a row already out (the file is out of
    /// order by more than the window).
    pub(crate) fn push(&mut self, row: MsrRow) -> Result<(), String> {
        if self.t0_ns.is_some() && row.at_ns < self.last_out_ns {
            return Err(format!(
                "a row at timestamp {} (100 ns ticks) comes more than {} rows after later ones: \
                 sort the file by its first column first (sort -t, -k1,1n)",
                row.at_ns / 100,
                self.window
            ));
        }
        self.pending.push(Reverse(Pending { seq: self.seq, row }));
        self.seq += 1;
        Ok(())
    }

    /// Whether the window is full (the earliest row may go out).
    pub(crate) fn full(&self) -> bool {
        self.pending.len() > self.window
    }

    /// The earliest pending row as a request.
    pub(crate) fn pop(&mut self) -> Option<Request> {
        let Reverse(Pending { row, .. }) = self.pending.pop()?;
        let at = row.at_ns;
        let t0 = *self.t0_ns.get_or_insert(at);
        self.last_out_ns = at;
        let at_ns = at - t0;
        let done = at_ns + row.response_ns;
        let think_ns = match self.last_done_ns.insert(row.stream, done) {
            Some(prev) => at_ns.saturating_sub(prev),
            None => 0,
        };
        Some(Request {
            stream: row.stream,
            cmd: row.cmd,
            think_ns,
            at_ns,
            after: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Op;

    #[test]
    fn parses_msr_rows() {
        let text = "128166372003061629,wdev,0,Read,3154509824,4096,1331\n128166372003161629,wdev,0,Write,8192,16384,500\n";
        let t = parse("wdev_0.csv", text, None).unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[0].cmd.op, Op::Read);
        assert_eq!(t.requests[1].at_ns, 10_000_000);
        assert_eq!(t.requests[1].think_ns, 10_000_000 - 133_100);
    }

    #[test]
    fn rejects_bad_rows() {
        let err = parse("x.csv", "1,h,0,Erase,0,4096,1\n", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("x.csv:1:") && err.contains("Erase"),
            "{err}"
        );
        let err = parse("x.csv", "1,h,0,Read,0,4096\n", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("7 comma"), "{err}");
    }

    #[test]
    fn a_trace_of_several_disks_needs_one_picked() {
        let text = "1,wdev,0,Write,0,4096,1\n2,wdev,1,Write,0,4096,1\n3,src,1,Read,0,4096,1\n4,wdev,1,Read,8192,4096,1\n";
        let err = parse("mix.csv", text, None).unwrap_err().to_string();
        assert!(
            err.contains("3 disks")
                && err.contains("wdev:0, wdev:1, src:1")
                && err.contains("--disk"),
            "{err}"
        );
        let t = parse("mix.csv", text, Some("wdev:1")).unwrap();
        assert_eq!(t.requests.len(), 2, "only wdev's disk 1");
        assert!(t.requests.iter().all(|r| r.stream == 0));
        assert_eq!(parse("mix.csv", text, Some("0")).unwrap().requests.len(), 1);
        let err = parse("mix.csv", text, Some("1")).unwrap_err().to_string();
        assert!(
            err.contains("several hosts") && err.contains("HOST:1"),
            "{err}"
        );
        let err = parse("mix.csv", text, Some("7")).unwrap_err().to_string();
        assert!(err.contains("no disk 7") && err.contains("src:1"), "{err}");
    }
}
