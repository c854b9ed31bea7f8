//! Alibaba Cloud block traces (2020; schema from the README of github.com/alibaba/block-traces,
//! file `io_traces.csv`): CSV lines `device_id,opcode,offset,length,timestamp`, with
//! `device_id` the virtual disk (0-999), `opcode` R or W, `offset` and `length` in bytes,
//! and `timestamp` when the server received the request, in microseconds. Each virtual
//! disk is a device (`--disk ID`) and one stream. A header line naming the columns is
//! skipped.

use super::parse_u64;
use super::rows::{csv_fields, data_command, scaled, Devices, Row, RowLines};
use crate::TraceError;

const COLUMNS: &str = "device_id,opcode,offset,length,timestamp";

pub(crate) struct AlibabaLines {
    devices: Devices,
}

impl AlibabaLines {
    pub(crate) fn new(disk: Option<&str>) -> AlibabaLines {
        AlibabaLines {
            devices: Devices::new("device", disk),
        }
    }
}

/// Whether `line` is a header or a row of this format (for `--format auto`).
pub(crate) fn looks_like(line: &str) -> bool {
    let Ok(f) = csv_fields::<5>(line, COLUMNS) else {
        return false;
    };
    f[0].eq_ignore_ascii_case("device_id")
        || (f[0].parse::<u32>().is_ok()
            && matches!(f[1], "R" | "W")
            && f[2..].iter().all(|x| x.parse::<u64>().is_ok()))
}

impl RowLines for AlibabaLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        let f = csv_fields::<5>(t, COLUMNS)?;
        if f[0].eq_ignore_ascii_case("device_id") {
            return Ok(None);
        }
        parse_u64(f[0], "device_id")?;
        let Some(stream) = self.devices.keep(f[0]) else {
            return Ok(None);
        };
        let write = match f[1] {
            "R" => false,
            "W" => true,
            other => return Err(format!("opcode {other:?} is neither R nor W")),
        };
        let offset = parse_u64(f[2], "offset")?;
        let length = parse_u64(f[3], "length")?;
        let us = parse_u64(f[4], "timestamp")?;
        Ok(Some(Row {
            at_ns: scaled(us, 1_000, "timestamp (µs)")?,
            stream,
            cmd: data_command(write, offset, length)?,
            response_ns: 0,
        }))
    }

    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        self.devices.finish(origin)
    }

    fn sort_hint(&self) -> &'static str {
        "sort -t, -k5,5n"
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("io_traces.csv", text, Box::new(AlibabaLines::new(disk)))
    }

    /// The README's example row, and a write 1 ms later.
    const SAMPLE: &str = "device_id,opcode,offset,length,timestamp\n\
        0,R,126703644672,4096,1577808000000626\n\
        0,W,8192,16384,1577808000001626\n";

    #[test]
    fn parses_the_readme_example() {
        let t = parse(SAMPLE, None).unwrap();
        assert!(t.timestamped);
        assert_eq!(t.requests.len(), 2);
        let (a, b) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (a.cmd.op, a.cmd.offset_bytes, a.cmd.len_bytes),
            (Op::Read, 126_703_644_672, 4096)
        );
        assert_eq!(
            (b.cmd.op, b.cmd.offset_bytes, b.cmd.len_bytes),
            (Op::Write, 8192, 16384)
        );
        assert_eq!((a.at_ns, b.at_ns), (0, 1_000_000), "µs to ns");
        assert_eq!(b.think_ns, 1_000_000);
        assert!(SAMPLE.lines().all(looks_like));
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let e = parse("0,R,0,4096\n", None).unwrap_err().to_string();
        assert_eq!(
            e,
            "io_traces.csv:1: expected 5 comma-separated fields (device_id,opcode,offset,length,timestamp), found 4"
        );
        let e = parse("0,R,0,4096,1\n0,D,0,4096,2\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "io_traces.csv:2: opcode \"D\" is neither R nor W");
        let e = parse("0,R,18446744073709551615,4096,1\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("passes 2^64"), "{e}");
    }

    #[test]
    fn disk_picks_a_virtual_disk() {
        let text = "3,W,0,4096,10\n5,W,0,4096,11\n3,R,0,4096,12\n";
        let e = parse(text, None).unwrap_err().to_string();
        assert!(
            e.contains("2 devices (3, 5)") && e.contains("--disk 3"),
            "{e}"
        );
        assert_eq!(parse(text, Some("3")).unwrap().requests.len(), 2);
        assert_eq!(parse(text, Some("5")).unwrap().requests.len(), 1);
        let e = parse(text, Some("4")).unwrap_err().to_string();
        assert!(e.contains("no device 4"), "{e}");
    }
}
