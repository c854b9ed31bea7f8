//! Tencent Cloud Block Storage traces (2018, SNIA IOTTA; schema from the dataset's
//! README.txt): CSV lines `Timestamp,Offset,Size,IOType,VolumeID`, with `Timestamp` the
//! Unix time the request was issued, in seconds; `Offset` and `Size` in 512-byte sectors;
//! `IOType` 0 for a read, 1 for a write; `VolumeID` the cloud virtual volume. Each volume
//! is a device (`--disk ID`) and one stream. Whole-second timestamps put every request of
//! a second at the same instant in open loop. A header line naming the columns is
//! skipped. The dataset ships as `.tgz` archives: unpack them first.

use super::rows::{csv_fields, data_command, scaled, Devices, Row, RowLines};
use super::{parse_seconds_ns, parse_u64};
use crate::TraceError;

const COLUMNS: &str = "Timestamp,Offset,Size,IOType,VolumeID";

pub(crate) struct TencentLines {
    devices: Devices,
}

impl TencentLines {
    pub(crate) fn new(disk: Option<&str>) -> TencentLines {
        TencentLines {
            devices: Devices::new("volume", disk),
        }
    }
}

/// Whether `line` is a header or a row of this format (for `--format auto`).
pub(crate) fn looks_like(line: &str) -> bool {
    let Ok(f) = csv_fields::<5>(line, COLUMNS) else {
        return false;
    };
    f[0].eq_ignore_ascii_case("timestamp") && f[3].eq_ignore_ascii_case("iotype")
        || (parse_seconds_ns(f[0]).is_ok()
            && matches!(f[3], "0" | "1")
            && [f[1], f[2], f[4]].iter().all(|x| x.parse::<u64>().is_ok()))
}

impl RowLines for TencentLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        let f = csv_fields::<5>(t, COLUMNS)?;
        if f[0].eq_ignore_ascii_case("timestamp") {
            return Ok(None);
        }
        parse_u64(f[4], "volume id")?;
        let Some(stream) = self.devices.keep(f[4]) else {
            return Ok(None);
        };
        let at_ns = parse_seconds_ns(f[0])?;
        let offset = scaled(parse_u64(f[1], "offset")?, 512, "offset (sectors)")?;
        let size = scaled(parse_u64(f[2], "size")?, 512, "size (sectors)")?;
        let write = match f[3] {
            "0" => false,
            "1" => true,
            other => {
                return Err(format!(
                    "IOType {other:?} is neither 0 (read) nor 1 (write)"
                ))
            }
        };
        Ok(Some(Row {
            at_ns,
            stream,
            cmd: data_command(write, offset, size)?,
            response_ns: 0,
        }))
    }

    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        self.devices.finish(origin)
    }

    fn sort_hint(&self) -> &'static str {
        "sort -t, -k1,1n"
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("2018-10-01-01.csv", text, Box::new(TencentLines::new(disk)))
    }

    /// Rows as the README describes them: a read and, a second later, a write.
    const SAMPLE: &str = "Timestamp,Offset,Size,IOType,VolumeID\n\
        1538323200,2048,8,0,1063\n\
        1538323201,4096,16,1,1063\n";

    #[test]
    fn parses_rows_as_the_readme_describes() {
        let t = parse(SAMPLE, None).unwrap();
        assert!(t.timestamped);
        let (a, b) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (a.cmd.op, a.cmd.offset_bytes, a.cmd.len_bytes),
            (Op::Read, 2048 * 512, 8 * 512)
        );
        assert_eq!(
            (b.cmd.op, b.cmd.offset_bytes, b.cmd.len_bytes),
            (Op::Write, 4096 * 512, 16 * 512)
        );
        assert_eq!((a.at_ns, b.at_ns), (0, 1_000_000_000), "seconds to ns");
        assert!(SAMPLE.lines().all(looks_like));
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let e = parse("1,0,8,0,1,9\n", None).unwrap_err().to_string();
        assert!(
            e.starts_with("2018-10-01-01.csv:1: expected 5") && e.contains("found 6"),
            "{e}"
        );
        let e = parse("1,0,8,0,1\n2,0,8,R,1\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "2018-10-01-01.csv:2: IOType \"R\" is neither 0 (read) nor 1 (write)"
        );
    }

    #[test]
    fn disk_picks_a_volume() {
        let text = "1,0,8,1,1063\n1,0,8,1,7\n2,8,8,0,1063\n";
        let e = parse(text, None).unwrap_err().to_string();
        assert!(e.contains("2 volumes (1063, 7)"), "{e}");
        assert_eq!(parse(text, Some("1063")).unwrap().requests.len(), 2);
    }
}
