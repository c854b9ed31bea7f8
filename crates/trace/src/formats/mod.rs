//! Trace file formats: detection, and the parsers of each format.
//!
//! Every parser is line-based and total: any input gives either a trace or an error
//! naming the input, the line and the problem, never a panic. The archive formats (MSR
//! Cambridge, Alibaba, Tencent, SPC, FIU, DiskSim, fio) share their row handling in
//! [`rows`]; each module's first lines name the document its format was checked against.

mod alibaba;
mod blkparse;
pub mod disksim;
mod fio;
mod fiu;
pub(crate) mod msr;
pub(crate) mod native;
pub(crate) mod rows;
mod spc;
mod tencent;
pub(crate) mod tracefs;

pub use crate::input::{open_regular, MAX_LINE_BYTES};
pub use native::write_native;

use crate::input::long_line;
use crate::request::{infer_dependencies, CpuWaits, Request};
use crate::{Trace, TraceError};
use disksim::Variant;
use flash::{Command, Op};
use rows::RowLines;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Auto,
    Blkparse,
    Tracefs,
    Msr,
    Native,
    Alibaba,
    Tencent,
    Spc,
    Fiu,
    Disksim,
    DisksimMqsim,
    DisksimSsdsim,
    Fio,
}

/// Every format `--format` takes, in the order messages list them.
pub const FORMATS: [Format; 13] = [
    Format::Auto,
    Format::Blkparse,
    Format::Tracefs,
    Format::Msr,
    Format::Native,
    Format::Alibaba,
    Format::Tencent,
    Format::Spc,
    Format::Fiu,
    Format::Disksim,
    Format::DisksimMqsim,
    Format::DisksimSsdsim,
    Format::Fio,
];

/// The formats told apart by their rows' content (a row of each fits only its own
/// format, except DiskSim's variants, which no row tells apart).
const ROW_FORMATS: [Format; 7] = [
    Format::Alibaba,
    Format::Tencent,
    Format::Spc,
    Format::Fiu,
    Format::Disksim,
    Format::DisksimMqsim,
    Format::DisksimSsdsim,
];

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Blkparse => "blkparse",
            Format::Tracefs => "tracefs",
            Format::Msr => "msr",
            Format::Native => "native",
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
            Format::Spc => "spc",
            Format::Fiu => "fiu",
            Format::Disksim => "disksim",
            Format::DisksimMqsim => "disksim-mqsim",
            Format::DisksimSsdsim => "disksim-ssdsim",
            Format::Fio => "fio",
        }
    }

    /// The parser of a format whose files may hold several devices (`--disk` picks one),
    /// a line at a time; `None` for the others.
    pub(crate) fn row_lines(self, disk: Option<&str>) -> Option<Box<dyn RowLines>> {
        Some(match self {
            Format::Msr => Box::new(msr::MsrLines::new(disk)),
            Format::Alibaba => Box::new(alibaba::AlibabaLines::new(disk)),
            Format::Tencent => Box::new(tencent::TencentLines::new(disk)),
            Format::Spc => Box::new(spc::SpcLines::new(disk)),
            Format::Fiu => Box::new(fiu::FiuLines::new(disk)),
            Format::Disksim => Box::new(disksim::DiskSimLines::new(Variant::DiskSim, disk)),
            Format::DisksimMqsim => Box::new(disksim::DiskSimLines::new(Variant::MqSim, disk)),
            Format::DisksimSsdsim => Box::new(disksim::DiskSimLines::new(Variant::SsdSim, disk)),
            Format::Fio => Box::new(fio::FioLines::new(disk)),
            Format::Auto | Format::Blkparse | Format::Tracefs | Format::Native => return None,
        })
    }

    /// Whether `line` is a row (or header) of this format, for detection.
    fn fits(self, line: &str) -> bool {
        match self {
            Format::Alibaba => alibaba::looks_like(line),
            Format::Tencent => tencent::looks_like(line),
            Format::Spc => spc::looks_like(line),
            Format::Fiu => fiu::looks_like(line),
            Format::Disksim => disksim::looks_like(Variant::DiskSim, line),
            Format::DisksimMqsim => disksim::looks_like(Variant::MqSim, line),
            Format::DisksimSsdsim => disksim::looks_like(Variant::SsdSim, line),
            _ => false,
        }
    }
}

/// The names of `formats`, comma-separated.
fn names(formats: &[Format]) -> String {
    formats
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FORMATS.into_iter().find(|f| f.name() == s).ok_or_else(|| {
            format!(
                "unknown trace format {s:?}: expected one of {}",
                names(&FORMATS)
            )
        })
    }
}

/// What the first lines of a trace say its format is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detected {
    One(Format),
    /// Every line read fits each of these: the user must say which.
    Several(Vec<Format>),
    Unknown,
}

/// Guesses the format from the first meaningful lines: by a line only one format has
/// (a header, a kernel event), else by which formats' rows the lines fit.
pub fn detect(text: &str) -> Detected {
    let mut fit: Vec<Format> = Vec::new();
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(50)
    {
        if line.starts_with("flashlab-trace") {
            return Detected::One(Format::Native);
        }
        if line.contains("block_rq_") {
            return Detected::One(Format::Tracefs);
        }
        if fio::header_version(line).is_some() {
            return Detected::One(Format::Fio);
        }
        if line.starts_with('#') {
            continue;
        }
        if line.split(',').count() == 7
            && line.split(',').nth(3).is_some_and(|t| {
                t.eq_ignore_ascii_case("read") || t.eq_ignore_ascii_case("write") || t == "Type"
            })
        {
            return Detected::One(Format::Msr);
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if first.split(',').count() == 2 && first.split(',').all(|p| p.parse::<u32>().is_ok()) {
            return Detected::One(Format::Blkparse);
        }
        // The formats every line so far fits; a line that fits none of them (a bad row)
        // is left for the parser to report.
        let here: Vec<Format> = ROW_FORMATS.into_iter().filter(|f| f.fits(line)).collect();
        let both: Vec<Format> = fit.iter().copied().filter(|f| here.contains(f)).collect();
        fit = if fit.is_empty() {
            here
        } else if both.is_empty() {
            fit
        } else {
            both
        };
    }
    match fit.as_slice() {
        [] => Detected::Unknown,
        [one] => Detected::One(*one),
        _ => Detected::Several(fit),
    }
}

/// The format of the trace from `origin` whose first lines are `head`: `format`, or when
/// it is `Auto`, the one they show; an error naming the candidates when they fit several.
pub fn resolve(origin: &str, head: &str, format: Format) -> Result<Format, TraceError> {
    if format != Format::Auto {
        return Ok(format);
    }
    let err = |msg: String| TraceError::Format {
        origin: origin.to_string(),
        msg,
    };
    match detect(head) {
        Detected::One(f) => Ok(f),
        Detected::Unknown => Err(err(format!(
            "cannot tell the trace format from its first lines; pass --format (one of {})",
            names(&FORMATS[1..])
        ))),
        Detected::Several(fs) => {
            let why = if fs.iter().all(|f| f.name().starts_with("disksim")) {
                " (DiskSim's variants differ in the time's unit and the type's code, which its \
                 rows do not show: disksim counts milliseconds with flags bit 0 set for a read; \
                 disksim-mqsim and disksim-ssdsim count nanoseconds with 0 for a write, 1 for a read)"
            } else {
                ""
            };
            Err(err(format!(
                "its first lines fit several trace formats ({}); pass --format with the one it is{why}",
                names(&fs)
            )))
        }
    }
}

/// Parses `text` (read from `origin`, named in errors) in `format`.
pub fn parse(origin: &str, text: &str, format: Format) -> Result<Trace, TraceError> {
    parse_disk(origin, text, format, None)
}

/// The error for `--disk` given with a format whose files hold one device.
pub(crate) fn refuse_disk(origin: &str, format: Format) -> TraceError {
    let several: Vec<Format> = FORMATS
        .into_iter()
        .filter(|f| f.row_lines(None).is_some())
        .collect();
    TraceError::Format {
        origin: origin.to_string(),
        msg: format!(
            "--disk picks a device of a trace that holds several ({}); this is a {} trace of one device",
            names(&several),
            format.name()
        ),
    }
}

/// [`parse`], keeping only `disk` of a trace that holds several (an MSR disk `N` or
/// `HOST:N`, an Alibaba device, a Tencent volume, an SPC ASU, a FIU `MAJOR:MINOR`, a
/// DiskSim device number, a fio filename); formats of one device refuse it.
pub fn parse_disk(
    origin: &str,
    text: &str,
    format: Format,
    disk: Option<&str>,
) -> Result<Trace, TraceError> {
    let format = resolve(origin, text, format)?;
    let lines = format.row_lines(disk);
    if disk.is_some() && lines.is_none() {
        return Err(refuse_disk(origin, format));
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
    if let Some(lines) = lines {
        return rows::parse_rows(origin, text, lines);
    }
    match format {
        Format::Blkparse => blkparse::parse(origin, text),
        Format::Tracefs => tracefs::parse(origin, text),
        Format::Native => native::parse(origin, text),
        _ => unreachable!("auto is resolved above, the row formats parse above"),
    }
}

/// Reads and parses a trace file.
pub fn read_file(path: &std::path::Path, format: Format) -> Result<Trace, TraceError> {
    read_file_disk(path, format, None)
}

/// [`read_file`], keeping only `disk` (see [`parse_disk`]). A gzip or zstd file is
/// decompressed.
pub fn read_file_disk(
    path: &std::path::Path,
    format: Format,
    disk: Option<&str>,
) -> Result<Trace, TraceError> {
    let origin = path.display().to_string();
    let format = if format == Format::Auto {
        let mut head = String::new();
        let mut lines = crate::input::open_lines(path, &origin)?;
        for _ in 0..DETECT_LINES {
            match lines.next_line() {
                None => break,
                Some(line) => head.push_str(line?),
            }
            head.push('\n');
        }
        resolve(&origin, &head, format)?
    } else {
        format
    };
    // The kernel captures are parsed as they are read (a compressed file of many short
    // lines never becomes one string); the others are read whole.
    match format {
        Format::Blkparse | Format::Tracefs if disk.is_some() => Err(refuse_disk(&origin, format)),
        Format::Blkparse => {
            blkparse::parse_lines(&origin, &mut crate::input::open_lines(path, &origin)?)
        }
        Format::Tracefs => {
            tracefs::parse_lines(&origin, &mut crate::input::open_lines(path, &origin)?)
        }
        _ => {
            let text = crate::input::read_text(path, &origin)?;
            parse_disk(&origin, &text, format, disk)
        }
    }
}

/// Lines read to recognise a file's format.
pub(crate) const DETECT_LINES: usize = 64;

pub(crate) fn parse_u64(field: &str, what: &str) -> Result<u64, String> {
    field
        .parse::<u64>()
        .map_err(|_| format!("{what} {field:?} is not a non-negative integer"))
}

/// Parses decimal seconds ("123.456789") into nanoseconds without floating point.
pub(crate) fn parse_seconds_ns(field: &str) -> Result<u64, String> {
    parse_decimal_ns(field, 1_000_000_000, "seconds")
}

/// Parses a decimal time in a unit of `unit_ns` nanoseconds (a power of ten, named
/// `unit`) into nanoseconds without floating point.
pub(crate) fn parse_decimal_ns(field: &str, unit_ns: u64, unit: &str) -> Result<u64, String> {
    let bad = || format!("timestamp {field:?} is not decimal {unit}");
    let digits = unit_ns.ilog10();
    let (whole, frac) = field.split_once('.').unwrap_or((field, ""));
    let is_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !is_digits(whole) || frac.len() > digits as usize || !is_digits(frac) {
        return Err(bad());
    }
    let whole: u64 = whole.parse().map_err(|_| bad())?;
    let frac_ns: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().map_err(|_| bad())? * 10u64.pow(digits - frac.len() as u32)
    };
    whole
        .checked_mul(unit_ns)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(|| {
            format!(
                "timestamp {field} {unit} is past the latest time flashlab can hold ({} {unit}, u64 nanoseconds)",
                u64::MAX / unit_ns
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

/// `ns` as decimal seconds with nine places, as kernel traces print them.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Most issue and completion events a blkparse or tracefs file may hold: they are paired
/// across the whole file in memory (about 200 bytes an event with the trace built from
/// them), so this keeps one file's parse near 2 GB.
pub const MAX_KERNEL_EVENTS: usize = 10_000_000;

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
    /// Most events kept (0: [`MAX_KERNEL_EVENTS`]).
    max_events: usize,
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
        let max = if self.max_events == 0 {
            MAX_KERNEL_EVENTS
        } else {
            self.max_events
        };
        if self.issues.len() + self.completions.len() >= max {
            return Err(format!(
                "more than {max} issue and completion events: a blkparse or tracefs capture is paired whole in memory (about 200 bytes an event), so one this long is refused; capture a shorter run, or convert it to flashlab's native format, which streams"
            ));
        }
        if is_issue {
            // A replay submits in issue order: a capture's issues come in time order, and
            // one that goes back is said here, at its line, not later as a replay error.
            if let Some(last) = self.issues.last().filter(|l| l.time_ns > time_ns) {
                return Err(format!(
                    "this issue at {} s is earlier than the one before it ({} s): a trace's issues must be in time order (sort the file by its time field)",
                    seconds(time_ns),
                    seconds(last.time_ns)
                ));
            }
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
    lines: &mut dyn crate::input::LineSource,
    mut parse_line: F,
) -> Result<(), TraceError>
where
    F: FnMut(&str) -> Result<bool, String>,
{
    while let Some(line) = lines.next_line() {
        match parse_line(line?) {
            Ok(true) => {}
            Ok(false) => break,
            Err(msg) => {
                return Err(TraceError::Parse {
                    origin: origin.to_string(),
                    line: lines.line_no(),
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
    fn kernel_events_past_the_limit_are_an_error_not_memory() {
        let mut e = KernelEvents {
            max_events: 3,
            ..KernelEvents::default()
        };
        for i in 0..3 {
            e.push(i % 2 == 0, 1, i, Op::Write, 0, 8).unwrap();
        }
        let err = e.push(true, 1, 9, Op::Write, 0, 8).unwrap_err();
        assert!(
            err.contains("more than 3 issue and completion events"),
            "{err}"
        );
    }

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
        let one = |f| Detected::One(f);
        assert_eq!(detect("flashlab-trace v1 closed\n"), one(Format::Native));
        assert_eq!(
            detect("  8,0    1        3     0.000002000  1234  D  WS 123456 + 8 [dd]\n"),
            one(Format::Blkparse)
        );
        assert_eq!(
            detect("# tracer: nop\n dd-1 [000] ..... 1.0: block_rq_issue: 7,0 W 4096 () 0 + 8 none,0,0 [dd]\n"),
            one(Format::Tracefs)
        );
        assert_eq!(
            detect("128166372003061629,wdev,0,Read,3154509824,4096,1331\n"),
            one(Format::Msr)
        );
        assert_eq!(detect("hello world\n"), Detected::Unknown);
    }

    #[test]
    fn five_column_csvs_are_told_apart_by_their_columns() {
        // Alibaba: the opcode letter second; Tencent: 0/1 fourth; SPC: a letter fourth and
        // decimal seconds fifth.
        assert_eq!(
            detect("0,R,126703644672,4096,1577808000000626\n"),
            Detected::One(Format::Alibaba)
        );
        assert_eq!(
            detect("1538323200,2048,8,0,1063\n"),
            Detected::One(Format::Tencent)
        );
        assert_eq!(
            detect("0,20941264,8192,W,0.551706\n"),
            Detected::One(Format::Spc)
        );
        // Headers name their format.
        assert_eq!(
            detect("device_id,opcode,offset,length,timestamp\n"),
            Detected::One(Format::Alibaba)
        );
        assert_eq!(
            detect("Timestamp,Offset,Size,IOType,VolumeID\n"),
            Detected::One(Format::Tencent)
        );
        // Five columns that fit none.
        assert_eq!(detect("a,b,c,d,e\n0,X,1,2,3\n"), Detected::Unknown);
    }

    #[test]
    fn disksim_variants_are_never_guessed() {
        let rows = "4851300 1 524288 16 0\n4864300 1 524304 16 1\n";
        assert_eq!(
            detect(rows),
            Detected::Several(vec![
                Format::Disksim,
                Format::DisksimMqsim,
                Format::DisksimSsdsim
            ])
        );
        let e = resolve("t", rows, Format::Auto).unwrap_err().to_string();
        assert!(
            e.contains("fit several trace formats (disksim, disksim-mqsim, disksim-ssdsim)")
                && e.contains("--format"),
            "{e}"
        );
        // A decimal time in milliseconds fits DiskSim alone.
        assert_eq!(
            detect("0 0 8 8 1\n13.191135 0 1024 5 1\n"),
            Detected::One(Format::Disksim)
        );
    }

    #[test]
    fn fiu_and_fio_are_detected() {
        assert_eq!(
            detect(
                "89968195792462 20782 gzip 283193184 8 R 6 0 56f11b711d91a065a2b6458eca924523\n"
            ),
            Detected::One(Format::Fiu)
        );
        assert_eq!(
            detect("fio version 2 iolog\n/dev/sdb add\n"),
            Detected::One(Format::Fio)
        );
        assert_eq!(
            detect("fio version 3 iolog\n0 /dev/sdb add\n"),
            Detected::One(Format::Fio)
        );
    }

    #[test]
    fn every_format_name_parses_back_and_the_error_lists_them() {
        for f in FORMATS {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
        }
        let e = "zip".parse::<Format>().unwrap_err();
        assert!(
            e.contains("auto, blkparse, tracefs, msr, native, alibaba, tencent, spc, fiu, disksim, disksim-mqsim, disksim-ssdsim, fio"),
            "{e}"
        );
    }

    #[test]
    fn decimal_times_parse_in_their_unit() {
        assert_eq!(
            parse_decimal_ns("13.191135", 1_000_000, "ms"),
            Ok(13_191_135)
        );
        assert_eq!(parse_decimal_ns("2", 1_000_000, "ms"), Ok(2_000_000));
        assert!(parse_decimal_ns("1.0000001", 1_000_000, "ms").is_err());
    }
}
