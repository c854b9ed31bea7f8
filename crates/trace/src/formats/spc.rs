//! SPC trace files, as the UMass Trace Repository's OLTP (Financial1, Financial2) and
//! search-engine (WebSearch1-3) traces are stored (Storage Performance Council, "SPC
//! Trace File Format Specification", revision 1.0.1): CSV lines
//! `ASU,LBA,Size,Opcode,Timestamp[,optional fields...]`, with `ASU` the application
//! specific unit (each its own address space), `LBA` a block offset within the ASU,
//! `Size` in bytes, `Opcode` r/R (read) or w/W (write) and `Timestamp` decimal seconds
//! from the start of the trace. Fields after the fifth are optional and ignored; white
//! space around fields is allowed. Each ASU is a device (`--disk ASU`) and one stream.
//!
//! The specification leaves the block size to each trace's description; the UMass
//! traces' is taken as 512 bytes (not confirmed from the repository's own pages).

use super::rows::{data_command, scaled, Devices, Row, RowLines};
use super::{parse_seconds_ns, parse_u64};
use crate::TraceError;

/// Bytes per LBA.
const BLOCK_BYTES: u64 = 512;

pub(crate) struct SpcLines {
    devices: Devices,
}

impl SpcLines {
    pub(crate) fn new(disk: Option<&str>) -> SpcLines {
        SpcLines {
            devices: Devices::new("ASU", disk),
        }
    }
}

/// The five required fields of `line`, trimmed; an error if it has fewer.
fn fields(line: &str) -> Result<[&str; 5], String> {
    let mut out = [""; 5];
    let mut n = 0;
    for f in line.split(',').take(5) {
        out[n] = f.trim();
        n += 1;
    }
    if n < 5 {
        return Err(format!(
            "expected at least 5 comma-separated fields (ASU,LBA,Size,Opcode,Timestamp), found {n}"
        ));
    }
    Ok(out)
}

/// Whether `line` is a row of this format (for `--format auto`).
pub(crate) fn looks_like(line: &str) -> bool {
    let Ok(f) = fields(line) else {
        return false;
    };
    f[..3].iter().all(|x| x.parse::<u64>().is_ok())
        && matches!(f[3], "r" | "R" | "w" | "W")
        && parse_seconds_ns(f[4]).is_ok()
}

impl RowLines for SpcLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        let f = fields(t)?;
        parse_u64(f[0], "ASU")?;
        let Some(stream) = self.devices.keep(f[0]) else {
            return Ok(None);
        };
        let offset = scaled(parse_u64(f[1], "LBA")?, BLOCK_BYTES, "LBA")?;
        let size = parse_u64(f[2], "size")?;
        let write = match f[3] {
            "r" | "R" => false,
            "w" | "W" => true,
            other => return Err(format!("opcode {other:?} is neither r/R nor w/W")),
        };
        Ok(Some(Row {
            at_ns: parse_seconds_ns(f[4])?,
            stream,
            cmd: data_command(write, offset, size)?,
            response_ns: 0,
        }))
    }

    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        self.devices.finish(origin)
    }

    fn sort_hint(&self) -> &'static str {
        "sort -t, -k5,5g"
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("Financial1.spc", text, Box::new(SpcLines::new(disk)))
    }

    /// The specification's example records (its "2 448003" typo written as 2.448003).
    const SAMPLE: &str = "0,20941264,8192,W,0.551706,Alpha/NT\n\
        0,20939840,8192,W,0.554041\n\
        0,20939808,8192,W,0.556202\n\
        1,3436288,15872,W,1.250720,0x123,5.99,test\n\
        1,3435888,512,W,1.609859\n\
        1,3435889,512,W,1.634761\n\
        0,7695360,4096,R,2.346628\n\
        1,10274472,4096,R,2.436645\n\
        2,30862016,4096,W,2.448003\n\
        2,30845544,4096,W,2.449733\n\
        1,10356592,4096,W,2.449733\n";

    #[test]
    fn parses_the_specifications_example() {
        assert!(SAMPLE.lines().all(looks_like));
        let e = parse(SAMPLE, None).unwrap_err().to_string();
        assert!(e.contains("3 ASUs (0, 1, 2)"), "{e}");
        let t = parse(SAMPLE, Some("0")).unwrap();
        assert_eq!(t.requests.len(), 4);
        let a = &t.requests[0];
        assert_eq!(
            (a.cmd.op, a.cmd.offset_bytes, a.cmd.len_bytes),
            (Op::Write, 20_941_264 * 512, 8192)
        );
        assert_eq!(t.requests[1].at_ns, 2_335_000, "0.554041 - 0.551706 s");
        assert_eq!(t.requests[3].cmd.op, Op::Read);
        let t = parse(SAMPLE, Some("1")).unwrap();
        assert_eq!(t.requests.len(), 5, "optional fields are ignored");
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let e = parse("0,1,512,W\n", None).unwrap_err().to_string();
        assert_eq!(
            e,
            "Financial1.spc:1: expected at least 5 comma-separated fields (ASU,LBA,Size,Opcode,Timestamp), found 4"
        );
        let e = parse("0,1,512,W,0.1\n0,1,512,X,0.2\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "Financial1.spc:2: opcode \"X\" is neither r/R nor w/W");
        let e = parse("0,1,512,W,soon\n", None).unwrap_err().to_string();
        assert!(e.contains("not decimal seconds"), "{e}");
    }
}
