//! What the archive formats share (MSR Cambridge, Alibaba, Tencent, SPC, FIU, DiskSim,
//! fio iologs): a parser that turns one line into at most one timed row ([`RowLines`]),
//! the choice of one device of a file that holds several ([`Devices`]), and the window
//! that puts rows in time order and turns them into requests ([`Order`]).
//!
//! A file is read a line at a time, whole ([`parse_rows`]) or streamed
//! (`crate::stream`); both go through the same parser and the same ordering, so they
//! give the same requests.

use super::for_each_line;
use crate::request::Request;
use crate::{Trace, TraceError};
use flash::Command;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// One row: issue time (ns, absolute, as the file counts it), stream, command, and the
/// response time the file records (0 where it records none).
pub(crate) struct Row {
    pub at_ns: u64,
    pub stream: u32,
    pub cmd: Command,
    pub response_ns: u64,
}

/// A format's parser, a line at a time.
pub(crate) trait RowLines: Send {
    /// The row on `line`, if it holds one of the wanted device.
    fn line(&mut self, line: &str) -> Result<Option<Row>, String>;
    /// At the end of the input: an error if the devices seen cannot be replayed as asked
    /// (several without `--disk`, or `--disk` naming none of them).
    fn finish(&self, origin: &str) -> Result<(), TraceError>;
    /// Whether the rows carry real issue times (open loop by default).
    fn timestamped(&self) -> bool {
        true
    }
    /// How to sort a file whose times go back further than the window.
    fn sort_hint(&self) -> &'static str;
}

/// Parses a whole text with `lines`: every row, in time order (a stable sort).
pub(crate) fn parse_rows(
    origin: &str,
    text: &str,
    mut lines: Box<dyn RowLines>,
) -> Result<Trace, TraceError> {
    let mut order = Order::new(usize::MAX, lines.sort_hint());
    for_each_line(origin, &mut crate::input::TextLines::new(text), |line| {
        if let Some(row) = lines.line(line)? {
            order.push(row)?;
        }
        Ok(true)
    })?;
    lines.finish(origin)?;
    let mut requests = Vec::new();
    while let Some(r) = order.pop() {
        requests.push(r);
    }
    Ok(Trace {
        requests,
        timestamped: lines.timestamped(),
    })
}

/// An error if `len` bytes at byte `offset` pass 2^64.
pub(crate) fn check_range(offset: u64, len: u64) -> Result<(), String> {
    offset
        .checked_add(len)
        .map(|_| ())
        .ok_or_else(|| format!("offset {offset} + length {len} bytes passes 2^64"))
}

/// A read or write of `len` bytes at byte `offset`; an error if the range passes 2^64.
pub(crate) fn data_command(write: bool, offset: u64, len: u64) -> Result<Command, String> {
    check_range(offset, len)?;
    Ok(if write {
        Command::write(offset, len)
    } else {
        Command::read(offset, len)
    })
}

/// `n` units of `unit` (e.g. 512-byte sectors, 1000 ns) as one number; an error naming
/// `what` if it passes 2^64.
pub(crate) fn scaled(n: u64, unit: u64, what: &str) -> Result<u64, String> {
    n.checked_mul(unit)
        .ok_or_else(|| format!("{what} {n} is too large (times {unit} it passes 2^64)"))
}

/// The fields of a comma-separated line, trimmed, if it has exactly `N`; otherwise an
/// error saying how many it has.
pub(crate) fn csv_fields<'a, const N: usize>(
    line: &'a str,
    names: &str,
) -> Result<[&'a str; N], String> {
    let mut out = [""; N];
    let mut n = 0;
    for f in line.split(',') {
        if n < N {
            out[n] = f.trim();
        }
        n += 1;
    }
    if n != N {
        return Err(format!(
            "expected {N} comma-separated fields ({names}), found {n}"
        ));
    }
    Ok(out)
}

/// Most device names an error lists.
const NAMES_LISTED: usize = 20;

/// The devices (disks, volumes, ASUs, files) a trace holds, and the one `--disk` picks.
/// Each is its own address space: replaying two as one would make their blocks collide.
pub(crate) struct Devices {
    /// What the format calls a device ("volume", "ASU"), for messages.
    what: &'static str,
    wanted: Option<String>,
    /// Every device seen, in order of first appearance.
    seen: Vec<String>,
    index: HashMap<String, u32>,
    /// The device of the previous row and its number if kept (most rows repeat it).
    last: Option<(String, Option<u32>)>,
}

impl Devices {
    pub(crate) fn new(what: &'static str, wanted: Option<&str>) -> Devices {
        Devices {
            what,
            wanted: wanted.map(str::to_string),
            seen: Vec::new(),
            index: HashMap::new(),
            last: None,
        }
    }

    /// Records a row of device `name`; its number (in order of first appearance: its
    /// stream, where a device is one stream) if its rows are kept.
    pub(crate) fn keep(&mut self, name: &str) -> Option<u32> {
        if let Some((last, kept)) = &self.last {
            if last == name {
                return *kept;
            }
        }
        let number = match self.index.get(name) {
            Some(&n) => n,
            None => {
                let n = self.seen.len() as u32;
                self.index.insert(name.to_string(), n);
                self.seen.push(name.to_string());
                n
            }
        };
        let kept = self
            .wanted
            .as_deref()
            .is_none_or(|w| w == name)
            .then_some(number);
        match &mut self.last {
            Some((last, k)) => {
                last.clear();
                last.push_str(name);
                *k = kept;
            }
            None => self.last = Some((name.to_string(), kept)),
        }
        kept
    }

    /// Whether several devices were seen and one is replayed.
    pub(crate) fn finish(&self, origin: &str) -> Result<(), TraceError> {
        let what = self.what;
        let err = |msg: String| TraceError::Format {
            origin: origin.to_string(),
            msg,
        };
        match &self.wanted {
            None if self.seen.len() > 1 => Err(err(format!(
                "the trace holds {} {what}s ({}), each its own address space: replaying them as \
                 one would make their blocks collide; pick one with --disk (e.g. --disk {})",
                self.seen.len(),
                self.names(),
                self.seen[0]
            ))),
            Some(w) if !self.index.contains_key(w) => Err(err(if self.seen.is_empty() {
                format!("no {what} {w} in the trace; it holds no requests")
            } else {
                format!("no {what} {w} in the trace; it holds {}", self.names())
            })),
            _ => Ok(()),
        }
    }

    fn names(&self) -> String {
        let mut s = self.seen[..self.seen.len().min(NAMES_LISTED)].join(", ");
        if self.seen.len() > NAMES_LISTED {
            s.push_str(&format!(" and {} more", self.seen.len() - NAMES_LISTED));
        }
        s
    }
}

/// A row waiting in the window, ordered by time, then by arrival (a stable sort's order).
struct Pending {
    seq: u64,
    row: Row,
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

/// Puts rows in time order through a window of `window` rows (ties keep the file's order,
/// as a stable sort) and turns them into requests: times from the first request, think
/// times per stream from the previous request's completion (issue + response time; the
/// previous issue where the file records no response time).
pub(crate) struct Order {
    window: usize,
    sort_hint: &'static str,
    /// Rows waiting, earliest (time, then arrival) first.
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    /// Time of the first request out (times start there), and of the latest.
    t0_ns: Option<u64>,
    last_out_ns: u64,
    /// Per stream, when its previous request completed (from t0).
    last_done_ns: HashMap<u32, u64>,
}

impl Order {
    pub(crate) fn new(window: usize, sort_hint: &'static str) -> Order {
        Order {
            window,
            sort_hint,
            pending: BinaryHeap::new(),
            seq: 0,
            t0_ns: None,
            last_out_ns: 0,
            last_done_ns: HashMap::new(),
        }
    }

    /// Adds a row; an error if it is earlier than a row already out (the file is out of
    /// order by more than the window).
    pub(crate) fn push(&mut self, row: Row) -> Result<(), String> {
        if self.t0_ns.is_some() && row.at_ns < self.last_out_ns {
            return Err(format!(
                "time goes back by {} ns, further than the reorder window of {} rows can sort; \
                 sort the file by time first ({})",
                self.last_out_ns - row.at_ns,
                self.window,
                self.sort_hint
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
        let done = at_ns.saturating_add(row.response_ns);
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

    fn row(at_ns: u64, stream: u32) -> Row {
        Row {
            at_ns,
            stream,
            cmd: Command::read(0, 4096),
            response_ns: 0,
        }
    }

    #[test]
    fn a_window_sorts_near_disorder_and_refuses_far_disorder() {
        let mut o = Order::new(2, "sort it");
        for t in [30, 10, 20] {
            o.push(row(t, 0)).unwrap();
        }
        assert!(o.full());
        assert_eq!(o.pop().unwrap().at_ns, 0, "10 goes out first");
        o.push(row(15, 0)).unwrap();
        assert_eq!(o.pop().unwrap().at_ns, 5);
        let e = o.push(row(5, 0)).unwrap_err();
        assert!(
            e.contains("goes back by 10 ns") && e.contains("sort it"),
            "{e}"
        );
    }

    #[test]
    fn think_times_count_from_the_streams_previous_issue_without_response_times() {
        let mut o = Order::new(usize::MAX, "");
        for (t, s) in [(100, 0), (150, 1), (400, 0), (450, 1)] {
            o.push(row(t, s)).unwrap();
        }
        let got: Vec<(u64, u64)> = std::iter::from_fn(|| o.pop())
            .map(|r| (r.at_ns, r.think_ns))
            .collect();
        assert_eq!(got, vec![(0, 0), (50, 0), (300, 300), (350, 300)]);
    }

    #[test]
    fn devices_pick_one_and_list_them_all() {
        let mut d = Devices::new("volume", None);
        let numbers: Vec<_> = ["7", "7", "3", "7"].iter().map(|n| d.keep(n)).collect();
        assert_eq!(numbers, [Some(0), Some(0), Some(1), Some(0)]);
        let e = d.finish("t").unwrap_err().to_string();
        assert!(
            e.contains("2 volumes (7, 3)") && e.contains("--disk 7"),
            "{e}"
        );
        let mut d = Devices::new("volume", Some("3"));
        assert_eq!(
            [d.keep("7"), d.keep("3"), d.keep("7")],
            [None, Some(1), None]
        );
        d.finish("t").unwrap();
        let mut d = Devices::new("ASU", Some("99"));
        for i in 0..30 {
            d.keep(&i.to_string());
        }
        let e = d.finish("t").unwrap_err().to_string();
        assert!(
            e.contains("no ASU 99 in the trace; it holds 0, 1, 2")
                && e.contains("19 and 10 more")
                && !e.contains("25"),
            "{e}"
        );
    }
}
