//! fio's I/O logs (`write_iolog` / `read_iolog`), versions 2 and 3, as fio's HOWTO ("Trace
//! file format") and its reader (`read_iolog` in `iolog.c`) define them. The first line
//! is `fio version 2 iolog` or `fio version 3 iolog`; then
//!
//! - version 2: `filename action` (add, open, close) or `filename action offset length`
//!   (read, write, trim, sync, datasync, wait), offset and length in bytes. A `wait`
//!   waits `offset` microseconds before the next request, and fio discards waits under
//!   100 µs (HOWTO). A version 2 log carries no issue times: it replays closed loop, the
//!   waits as think times.
//! - version 3 (fio 3.31 on): the same lines led by a timestamp, microseconds from the
//!   start of the run (fio writes `utime_since_now` there, and `wait` is not allowed). It
//!   replays open loop at those times.
//!
//! The filename is the device (`--disk FILE`; one stream each); sync and datasync become
//! flushes; add, open and close carry no request. fio's HOWTO and its code disagree on
//! `wait`: the HOWTO says microseconds relative to the previous wait, while
//! `read_iolog_get` compares the value with milliseconds since the job started. The HOWTO
//! is followed here.

use super::parse_u64;
use super::rows::{check_range, data_command, scaled, Devices, Row, RowLines};
use crate::TraceError;
use flash::Command;

/// Waits shorter than this (µs) fio discards.
const WAIT_MIN_US: u64 = 100;

pub(crate) struct FioLines {
    /// From the header: 2 or 3.
    version: Option<u8>,
    devices: Devices,
    /// Version 2: the time the waits so far add up to (ns).
    clock_ns: u64,
}

impl FioLines {
    pub(crate) fn new(disk: Option<&str>) -> FioLines {
        FioLines {
            version: None,
            devices: Devices::new("file", disk),
            clock_ns: 0,
        }
    }
}

/// The version a header line names, if it is one.
pub(crate) fn header_version(line: &str) -> Option<u8> {
    match line.trim() {
        "fio version 2 iolog" => Some(2),
        "fio version 3 iolog" => Some(3),
        _ => None,
    }
}

impl RowLines for FioLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() {
            return Ok(None);
        }
        let Some(version) = self.version else {
            self.version = Some(header_version(t).ok_or(
                "the first line must be 'fio version 2 iolog' or 'fio version 3 iolog' \
                 (fio's version 1 log, 'rw, offset, length', is not read: fio dropped it in 1.20)",
            )?);
            return Ok(None);
        };
        // At most 6 fields are looked at (a sixth makes the count wrong, which is reported).
        let mut f = [""; 6];
        let mut n = 0;
        for w in t.split_whitespace().take(6) {
            f[n] = w;
            n += 1;
        }
        let (at_us, rest) = if version == 3 {
            if !(n == 3 || n == 5) {
                return Err(format!(
                    "expected 3 or 5 fields (timestamp filename action [offset length]), found {}",
                    count(t)
                ));
            }
            (Some(parse_u64(f[0], "timestamp (µs)")?), &f[1..n])
        } else {
            if !(n == 2 || n == 4) {
                return Err(format!(
                    "expected 2 or 4 fields (filename action [offset length]), found {}",
                    count(t)
                ));
            }
            (None, &f[..n])
        };
        let (file, action) = (rest[0], rest[1]);
        let offset_len = || -> Result<(u64, u64), String> {
            match rest {
                [_, _, offset, len] => {
                    Ok((parse_u64(offset, "offset")?, parse_u64(len, "length")?))
                }
                _ => Err(format!("action {action} needs an offset and a length")),
            }
        };
        let cmd = match action {
            "add" | "open" | "close" => {
                if rest.len() != 2 {
                    return Err(format!("action {action} takes no offset and length"));
                }
                return Ok(None);
            }
            "wait" if version == 3 => {
                return Err("wait is not allowed in a version 3 log (its timestamps time the requests; fio ignores the line)".into())
            }
            "wait" => {
                let (us, _) = offset_len()?;
                if us >= WAIT_MIN_US {
                    let ns = scaled(us, 1_000, "wait (µs)")?;
                    self.clock_ns = self
                        .clock_ns
                        .checked_add(ns)
                        .ok_or("the waits add up past 2^64 ns")?;
                }
                return Ok(None);
            }
            "read" | "write" => {
                let (offset, len) = offset_len()?;
                data_command(action == "write", offset, len)?
            }
            "trim" => {
                let (offset, len) = offset_len()?;
                check_range(offset, len)?;
                Command::trim(offset, len)
            }
            "sync" | "datasync" => {
                offset_len()?;
                Command::flush()
            }
            other => {
                return Err(format!(
                    "action {other:?} is not one of add, open, close, read, write, trim, sync, datasync, wait"
                ))
            }
        };
        let Some(stream) = self.devices.keep(file) else {
            return Ok(None);
        };
        let at_ns = match at_us {
            Some(us) => scaled(us, 1_000, "timestamp (µs)")?,
            None => self.clock_ns,
        };
        Ok(Some(Row {
            at_ns,
            stream,
            cmd,
            response_ns: 0,
        }))
    }

    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        if self.version.is_none() {
            return Err(TraceError::Format {
                origin: origin.to_string(),
                msg: "empty: no 'fio version 2 iolog' or 'fio version 3 iolog' line".into(),
            });
        }
        self.devices.finish(origin)
    }

    fn timestamped(&self) -> bool {
        self.version == Some(3)
    }

    fn sort_hint(&self) -> &'static str {
        "keep the header line first and sort the rest by its first column: \
         (head -n 1 LOG; tail -n +2 LOG | sort -k1,1n)"
    }
}

fn count(line: &str) -> usize {
    line.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("job.log", text, Box::new(FioLines::new(disk)))
    }

    fn ops(t: &crate::Trace) -> Vec<(Op, u64, u64, u64, u64)> {
        t.requests
            .iter()
            .map(|r| {
                let c = &r.cmd;
                (c.op, c.offset_bytes, c.len_bytes, r.at_ns, r.think_ns)
            })
            .collect()
    }

    #[test]
    fn version_2_replays_closed_loop_with_waits_as_think_times() {
        // Every action the HOWTO lists for version 2.
        let text = "fio version 2 iolog\n\
            /dev/sdb add\n\
            /dev/sdb open\n\
            /dev/sdb write 0 4096\n\
            /dev/sdb wait 2000 0\n\
            /dev/sdb read 4096 8192\n\
            /dev/sdb wait 50 0\n\
            /dev/sdb trim 0 65536\n\
            /dev/sdb sync 0 0\n\
            /dev/sdb datasync 0 0\n\
            /dev/sdb close\n";
        let t = parse(text, None).unwrap();
        assert!(!t.timestamped);
        assert_eq!(
            ops(&t),
            vec![
                (Op::Write, 0, 4096, 0, 0),
                (Op::Read, 4096, 8192, 2_000_000, 2_000_000),
                (Op::Trim, 0, 65536, 2_000_000, 0),
                (Op::Flush, 0, 0, 2_000_000, 0),
                (Op::Flush, 0, 0, 2_000_000, 0),
            ],
            "a 50 µs wait is discarded, as fio does"
        );
    }

    #[test]
    fn version_3_replays_at_its_timestamps() {
        // As fio 3.31 writes it (log_file and log_io_u in iolog.c).
        let text = "fio version 3 iolog\n\
            2 Nvme1n1 add\n\
            872 Nvme1n1 open\n\
            878 Nvme1n1 write 0 16384\n\
            888 Nvme1n1 write 16384 16384\n\
            1891 Nvme1n1 read 0 16384\n\
            10001677 Nvme1n1 close\n";
        let t = parse(text, None).unwrap();
        assert!(t.timestamped);
        assert_eq!(
            ops(&t),
            vec![
                (Op::Write, 0, 16384, 0, 0),
                (Op::Write, 16384, 16384, 10_000, 10_000),
                (Op::Read, 0, 16384, 1_013_000, 1_003_000),
            ]
        );
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let err = |text: &str| parse(text, None).unwrap_err().to_string();
        assert!(err("/dev/sdb read 0 4096\n").starts_with("job.log:1: the first line must be"));
        assert_eq!(
            err("fio version 2 iolog\n/dev/sdb read 0\n"),
            "job.log:2: expected 2 or 4 fields (filename action [offset length]), found 3"
        );
        assert_eq!(
            err("fio version 3 iolog\n1 /dev/sdb read 0 4096 9\n"),
            "job.log:2: expected 3 or 5 fields (timestamp filename action [offset length]), found 6"
        );
        assert!(err("fio version 2 iolog\n/dev/sdb erase 0 4096\n")
            .starts_with("job.log:2: action \"erase\" is not one of add, open"));
        assert!(err("fio version 3 iolog\n1 /dev/sdb wait 100 0\n").contains("not allowed"));
        assert_eq!(
            err("fio version 2 iolog\n/dev/sdb read\n"),
            "job.log:2: action read needs an offset and a length"
        );
        assert!(err("").contains("empty"));
    }

    #[test]
    fn disk_picks_a_file() {
        let text = "fio version 3 iolog\n1 /a write 0 4096\n2 /b write 0 4096\n3 /b read 0 4096\n";
        let e = parse(text, None).unwrap_err().to_string();
        assert!(
            e.contains("2 files (/a, /b)") && e.contains("--disk /a"),
            "{e}"
        );
        assert_eq!(parse(text, Some("/b")).unwrap().requests.len(), 2);
    }
}
