//! Trace file formats: detection, and the parsers of each format.
//!
//! Every parser is line-based and total: any input gives either a trace or an error
//! naming the input, the line and the problem, never a panic.

mod blkparse;
pub(crate) mod msr;
pub(crate) mod native;
pub(crate) mod tracefs;

pub use native::write_native;

use crate::request::{infer_dependencies, CpuWaits, Request};
use crate::{Trace, TraceError};
use flash::{Command, Op};
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Auto,
    Blkparse,
    Tracefs,
    Msr,
    Native,
}

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Blkparse => "blkparse",
            Format::Tracefs => "tracefs",
            Format::Msr => "msr",
            Format::Native => "native",
        }
    }
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Format::Auto,
            "blkparse" => Format::Blkparse,
            "tracefs" => Format::Tracefs,
            "msr" => Format::Msr,
            "native" => Format::Native,
            _ => {
                return Err(format!(
                    "unknown trace format {s:?}: expected auto, blkparse, tracefs, msr or native"
                ))
            }
        })
    }
}

/// Guesses the format from the first meaningful lines.
pub fn detect(text: &str) -> Option<Format> {
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(50)
    {
        if line.starts_with("flashlab-trace") {
            return Some(Format::Native);
        }
        if line.contains("block_rq_") {
            return Some(Format::Tracefs);
        }
        if line.starts_with('#') {
            continue;
        }
        if line.split(',').count() == 7
            && line.split(',').nth(3).is_some_and(|t| {
                t.eq_ignore_ascii_case("read") || t.eq_ignore_ascii_case("write") || t == "Type"
            })
        {
            return Some(Format::Msr);
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if first.split(',').count() == 2 && first.split(',').all(|p| p.parse::<u32>().is_ok()) {
            return Some(Format::Blkparse);
        }
    }
    None
}

/// Parses `text` (read from `origin`, named in errors) in `format`.
pub fn parse(origin: &str, text: &str, format: Format) -> Result<Trace, TraceError> {
    parse_disk(origin, text, format, None)
}

/// [`parse`], keeping only `disk` of a trace that holds several (MSR Cambridge: `N` or
/// `HOST:N`); other formats hold one device and refuse it.
pub fn parse_disk(
    origin: &str,
    text: &str,
    format: Format,
    disk: Option<&str>,
) -> Result<Trace, TraceError> {
    let format = match format {
        Format::Auto => detect(text).ok_or_else(|| TraceError::Format {
            origin: origin.to_string(),
            msg: "cannot tell the trace format from its first lines; pass --format blkparse, tracefs, msr or native".into(),
        })?,
        f => f,
    };
    if disk.is_some() && format != Format::Msr {
        return Err(TraceError::Format {
            origin: origin.to_string(),
            msg: format!(
                "--disk picks a disk of an MSR Cambridge trace; this is a {} trace of one device",
                format.name()
            ),
        });
    }
    if let Some((i, line)) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.len() > MAX_LINE_BYTES)
    {
        return Err(TraceError::Parse {
            origin: origin.to_string(),
            line: i + 1,
            msg: long_line(line.as_bytes()),
        });
    }
    match format {
        Format::Blkparse => blkparse::parse(origin, text),
        Format::Tracefs => tracefs::parse(origin, text),
        Format::Msr => msr::parse(origin, text, disk),
        Format::Native => native::parse(origin, text),
        Format::Auto => unreachable!("resolved above"),
    }
}

/// Reads and parses a trace file.
pub fn read_file(path: &std::path::Path, format: Format) -> Result<Trace, TraceError> {
    read_file_disk(path, format, None)
}

/// [`read_file`], keeping only `disk` (see [`parse_disk`]).
pub fn read_file_disk(
    path: &std::path::Path,
    format: Format,
    disk: Option<&str>,
) -> Result<Trace, TraceError> {
    let origin = path.display().to_string();
    // Read a line at a time, each at most MAX_LINE_BYTES: a file of one endless line is an
    // error as soon as the line passes the limit, not after it is all in memory.
    let mut reader = std::io::BufReader::with_capacity(1 << 16, open_regular(path, &origin)?);
    let mut text = String::new();
    let mut line_no = 0usize;
    loop {
        let before = text.len();
        let limit = MAX_LINE_BYTES as u64 + 2; // the line and its "\r\n"
        let n =
            std::io::BufRead::read_line(&mut std::io::Read::take(&mut reader, limit), &mut text)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::InvalidData {
                        TraceError::Format {
                            origin: origin.clone(),
                            msg: format!("not UTF-8 text (line {})", line_no + 1),
                        }
                    } else {
                        TraceError::Io {
                            origin: origin.clone(),
                            source: e,
                        }
                    }
                })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if n as u64 == limit && !text.ends_with('\n') {
            return Err(TraceError::Parse {
                origin: origin.clone(),
                line: line_no,
                msg: long_line(&text.as_bytes()[before..]),
            });
        }
    }
    parse_disk(&origin, &text, format, disk)
}

/// The longest trace line read: far beyond any format's rows, short enough that a file
/// of one endless line is an error, not a memory hog.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// The message for a line longer than [`MAX_LINE_BYTES`], quoting its start.
pub(crate) fn long_line(start: &[u8]) -> String {
    let head = String::from_utf8_lossy(&start[..start.len().min(40)]).into_owned();
    format!("the line is longer than {MAX_LINE_BYTES} bytes (it starts {head:?}); is this a trace?")
}

/// Opens `path` for reading if it is a regular file. A trace is read twice (once to check
/// it, once to replay it), which a pipe, FIFO or device cannot give: those are refused
/// before they are opened (opening a FIFO would wait for a writer).
pub fn open_regular(path: &std::path::Path, origin: &str) -> Result<std::fs::File, TraceError> {
    let io = |source| TraceError::Io {
        origin: origin.to_string(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a pipe, FIFO, socket or device)"
        };
        return Err(TraceError::Format {
            origin: origin.to_string(),
            msg: format!("{what}: a trace is read twice (to check it, then to replay it), so it must be a file; save it first (e.g. `cat > trace.csv`)"),
        });
    }
    std::fs::File::open(path).map_err(io)
}

pub(crate) fn parse_u64(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse::<u64>()
        .map_err(|_| format!("{what} {field:?} is not a non-negative integer"))
}

/// Parses decimal seconds ("123.456789") into nanoseconds without floating point.
pub(crate) fn parse_seconds_ns(field: &str) -> Result<u64, String> {
    let bad = || format!("timestamp {field:?} is not decimal seconds");
    let (secs, frac) = field.split_once('.').unwrap_or((field, ""));
    if secs.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let secs: u64 = secs.parse().map_err(|_| bad())?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(9 - frac.len() as u32)
    };
    secs.checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(|| {
            format!(
                "timestamp {field} s is past the latest time flashlab can hold ({} s, u64 nanoseconds)",
                u64::MAX / 1_000_000_000
            )
        })
}

/// Operation from a Linux RWBS string; `None` for requests that carry no data command.
pub(crate) fn op_from_rwbs(rwbs: &str, sectors: u64) -> Result<Option<Op>, String> {
    if rwbs.is_empty() || !rwbs.bytes().all(|b| b"RWDFSAMNEZT".contains(&b)) {
        return Err(format!(
            "RWBS field {rwbs:?} is not a Linux request type (letters of RWDFSAMNE)"
        ));
    }
    Ok(if rwbs.contains('D') {
        Some(Op::Trim)
    } else if rwbs.contains('R') {
        Some(Op::Read)
    } else if rwbs.contains('W') {
        Some(if sectors == 0 { Op::Flush } else { Op::Write })
    } else if rwbs.contains('F') {
        Some(Op::Flush)
    } else {
        None
    })
}

/// A request as captured by the kernel: issue and (optionally) completion.
pub(crate) struct KernelIssue {
    pub stream: u32,
    pub time_ns: u64,
    pub op: Op,
    pub sector: u64,
    pub sectors: u64,
}

pub(crate) struct KernelCompletion {
    pub time_ns: u64,
    pub op: Op,
    pub sector: u64,
    pub sectors: u64,
}

/// Issue and completion events collected by the kernel-trace parsers.
#[derive(Default)]
pub(crate) struct KernelEvents {
    issues: Vec<KernelIssue>,
    completions: Vec<KernelCompletion>,
    /// Block events that are neither (blkparse's Q, G, I, M, ... actions).
    pub(crate) other_events: u64,
    /// When tasks waited for a CPU, where the trace has the scheduler's events
    /// (`sched_wakeup`, `sched_switch`).
    pub(crate) cpu_waits: CpuWaits,
}

impl KernelEvents {
    /// Records an issue (from process `pid`) or a completion.
    pub(crate) fn push(
        &mut self,
        is_issue: bool,
        pid: u64,
        time_ns: u64,
        op: Op,
        sector: u64,
        sectors: u64,
    ) -> Result<(), String> {
        if is_issue {
            let stream =
                u32::try_from(pid).map_err(|_| format!("pid {pid} does not fit 32 bits"))?;
            self.issues.push(KernelIssue {
                stream,
                time_ns,
                op,
                sector,
                sectors,
            });
        } else {
            self.completions.push(KernelCompletion {
                time_ns,
                op,
                sector,
                sectors,
            });
        }
        Ok(())
    }

    /// The trace. A file with block events but no issue events (named by `issue_events`)
    /// is an error: it would replay as nothing.
    pub(crate) fn into_trace(self, origin: &str, issue_events: &str) -> Result<Trace, TraceError> {
        if self.issues.is_empty() && (self.other_events > 0 || !self.completions.is_empty()) {
            return Err(TraceError::Format {
                origin: origin.to_string(),
                msg: format!(
                    "{} block events but no {issue_events}: a replay needs the requests as the device saw them issued",
                    self.other_events + self.completions.len() as u64
                ),
            });
        }
        let waits = (!self.cpu_waits.is_empty()).then_some(self.cpu_waits);
        assemble(origin, self.issues, self.completions, waits)
    }
}

/// Turns kernel issue/complete events into a timestamped trace: completions are matched
/// to the oldest unmatched issue of the same op and range; times start at zero. With the
/// scheduler's record of waits for a CPU (`waits`), those are left out of think times.
pub(crate) fn assemble(
    origin: &str,
    issues: Vec<KernelIssue>,
    completions: Vec<KernelCompletion>,
    mut waits: Option<CpuWaits>,
) -> Result<Trace, TraceError> {
    let to_cmd = |op: Op, sector: u64, sectors: u64| -> Option<Command> {
        let offset = sector.checked_mul(512)?;
        let len = sectors.checked_mul(512)?;
        offset.checked_add(len)?;
        Some(match op {
            Op::Flush => Command::flush(),
            _ => Command::new(op, offset, len),
        })
    };
    let t0 = issues.iter().map(|i| i.time_ns).min().unwrap_or(0);
    let mut requests = Vec::with_capacity(issues.len());
    for i in &issues {
        let cmd = to_cmd(i.op, i.sector, i.sectors).ok_or_else(|| TraceError::Format {
            origin: origin.to_string(),
            msg: format!(
                "request at sector {} + {} overflows a 64-bit byte offset",
                i.sector, i.sectors
            ),
        })?;
        requests.push(Request {
            stream: i.stream,
            cmd,
            think_ns: 0,
            at_ns: i.time_ns - t0,
            after: None,
        });
    }
    // Match completions in time order to the oldest open issue with the same key.
    let mut open: std::collections::HashMap<(u8, u64, u64), std::collections::VecDeque<usize>> =
        std::collections::HashMap::new();
    let key = |op: Op, sector: u64, sectors: u64| (op as u8, sector, sectors);
    let mut events: Vec<(u64, bool, usize)> = issues
        .iter()
        .enumerate()
        .map(|(i, e)| (e.time_ns, false, i))
        .chain(
            completions
                .iter()
                .enumerate()
                .map(|(i, c)| (c.time_ns, true, i)),
        )
        .collect();
    events.sort_by_key(|&(t, is_completion, i)| (t, !is_completion, i));
    let mut done: Vec<Option<u64>> = vec![None; issues.len()];
    for (_, is_completion, i) in events {
        if is_completion {
            let c = &completions[i];
            if let Some(q) = open.get_mut(&key(c.op, c.sector, c.sectors)) {
                if let Some(idx) = q.pop_front() {
                    done[idx] = Some(c.time_ns.saturating_sub(t0));
                }
            }
        } else {
            let e = &issues[i];
            open.entry(key(e.op, e.sector, e.sectors))
                .or_default()
                .push_back(i);
        }
    }
    if let Some(w) = &mut waits {
        w.shift(t0);
    }
    infer_dependencies(&mut requests, &done, waits.as_ref());
    Ok(Trace {
        requests,
        timestamped: true,
    })
}

/// Runs `parse_line` on every line, attaching origin and line number to its errors.
pub(crate) fn for_each_line<F>(
    origin: &str,
    text: &str,
    mut parse_line: F,
) -> Result<(), TraceError>
where
    F: FnMut(&str) -> Result<bool, String>,
{
    for (i, line) in text.lines().enumerate() {
        match parse_line(line) {
            Ok(true) => {}
            Ok(false) => break,
            Err(msg) => {
                return Err(TraceError::Parse {
                    origin: origin.to_string(),
                    line: i + 1,
                    msg,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_seconds_ns("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_seconds_ns("0.000000001"), Ok(1));
        assert_eq!(parse_seconds_ns("12"), Ok(12_000_000_000));
        assert!(parse_seconds_ns("1.0000000001").is_err());
        assert!(parse_seconds_ns("-1.0").is_err());
        assert!(parse_seconds_ns("99999999999999999999.0").is_err());
    }

    #[test]
    fn rwbs_maps_to_ops() {
        assert_eq!(op_from_rwbs("WS", 8), Ok(Some(Op::Write)));
        assert_eq!(op_from_rwbs("RA", 8), Ok(Some(Op::Read)));
        assert_eq!(op_from_rwbs("DS", 8), Ok(Some(Op::Trim)));
        assert_eq!(op_from_rwbs("FWS", 0), Ok(Some(Op::Flush)));
        assert_eq!(op_from_rwbs("FF", 0), Ok(Some(Op::Flush)));
        assert_eq!(op_from_rwbs("N", 0), Ok(None));
        assert!(op_from_rwbs("XYZ", 0).is_err());
    }

    #[test]
    fn detects_each_format() {
        assert_eq!(detect("flashlab-trace v1 closed\n"), Some(Format::Native));
        assert_eq!(
            detect("  8,0    1        3     0.000002000  1234  D  WS 123456 + 8 [dd]\n"),
            Some(Format::Blkparse)
        );
        assert_eq!(
            detect("# tracer: nop\n dd-1 [000] ..... 1.0: block_rq_issue: 7,0 W 4096 () 0 + 8 none,0,0 [dd]\n"),
            Some(Format::Tracefs)
        );
        assert_eq!(
            detect("128166372003061629,wdev,0,Read,3154509824,4096,1331\n"),
            Some(Format::Msr)
        );
        assert_eq!(detect("hello world\n"), None);
    }
}
