//! DiskSim's ASCII trace and the simulators that read it: space-separated lines
//! `time device block size type`, `block` and `size` in 512-byte sectors, `device` the
//! device number (`--disk N`; each device is one stream). The variants differ in the
//! time's unit and the type's code, which nothing in a line tells apart, so the variant is
//! named (`--format disksim`, `disksim-mqsim`, `disksim-ssdsim`), never guessed:
//!
//! - `disksim`: DiskSim 4.0 (`iotrace_ascii_get_ioreq_event` in `disksim_iotrace.c`
//!   reads `%lf %d %d %d %x`): time in milliseconds, a decimal; the type is a hex flags
//!   word whose bit 0 is 1 for a read, 0 for a write.
//! - `disksim-mqsim`: MQSim (CMU-SAFARI/MQSim, README "Defining a Trace-based Workload"
//!   and `src/host/ASCII_Trace_Definition.h`): time an integer on the simulator's clock,
//!   nanoseconds (`IO_Flow_Trace_Based.cpp` schedules each request at the raw value; the
//!   workload's `Time_Unit` is parsed but not applied there); type 0 for a write, 1 for a
//!   read.
//! - `disksim-ssdsim`: SSDSim (Hu Yang et al., HUST; `readme.txt` and `get_requests` in
//!   `ssd.c`, which reads `%lld %d %d %d %d`): time an integer in nanoseconds; type 1 for
//!   a read, 0 for a write.
//!
//! So MQSim's and SSDSim's sources agree on both unit and codes; they are kept as two
//! names so that a trace says which simulator it was made for.

use super::rows::{data_command, scaled, Devices, Row, RowLines};
use super::{parse_decimal_ns, parse_u64};
use crate::TraceError;

/// Which simulator's reading of the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    DiskSim,
    MqSim,
    SsdSim,
}

pub(crate) struct DiskSimLines {
    variant: Variant,
    devices: Devices,
}

impl DiskSimLines {
    pub(crate) fn new(variant: Variant, disk: Option<&str>) -> DiskSimLines {
        DiskSimLines {
            variant,
            devices: Devices::new("device", disk),
        }
    }
}

/// The five fields of `line`; an error if it has another number.
fn fields(line: &str) -> Result<[&str; 5], String> {
    let mut out = [""; 5];
    let mut n = 0;
    for f in line.split_whitespace() {
        if n < 5 {
            out[n] = f;
        }
        n += 1;
    }
    if n != 5 {
        return Err(format!(
            "expected 5 space-separated fields (time device block size type), found {n}"
        ));
    }
    Ok(out)
}

/// The time in nanoseconds, as `variant` counts it.
fn time_ns(variant: Variant, field: &str) -> Result<u64, String> {
    match variant {
        Variant::DiskSim => parse_decimal_ns(field, 1_000_000, "milliseconds"),
        Variant::MqSim | Variant::SsdSim => field
            .parse::<u64>()
            .map_err(|_| format!("time {field:?} is not a whole number of nanoseconds")),
    }
}

/// Whether the type field says write, as `variant` codes it.
fn is_write(variant: Variant, field: &str) -> Result<bool, String> {
    match variant {
        Variant::DiskSim => {
            let hex = field
                .strip_prefix("0x")
                .or_else(|| field.strip_prefix("0X"))
                .unwrap_or(field);
            u32::from_str_radix(hex, 16)
                .map(|flags| flags & 1 == 0)
                .map_err(|_| {
                    format!("flags {field:?} are not a hex number (bit 0: 1 read, 0 write)")
                })
        }
        Variant::MqSim | Variant::SsdSim => match field {
            "0" => Ok(true),
            "1" => Ok(false),
            other => Err(format!("type {other:?} is neither 0 (write) nor 1 (read)")),
        },
    }
}

/// Whether `line` is a row of `variant` (for `--format auto`).
pub(crate) fn looks_like(variant: Variant, line: &str) -> bool {
    let Ok(f) = fields(line) else {
        return false;
    };
    time_ns(variant, f[0]).is_ok()
        && f[1..4].iter().all(|x| x.parse::<u64>().is_ok())
        && is_write(variant, f[4]).is_ok()
}

impl RowLines for DiskSimLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        let f = fields(t)?;
        parse_u64(f[1], "device number")?;
        let Some(stream) = self.devices.keep(f[1]) else {
            return Ok(None);
        };
        let at_ns = time_ns(self.variant, f[0])?;
        let offset = scaled(parse_u64(f[2], "block")?, 512, "block (sectors)")?;
        let size = scaled(parse_u64(f[3], "size")?, 512, "size (sectors)")?;
        let write = is_write(self.variant, f[4])?;
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
        "sort -k1,1g"
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(v: Variant, text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("t.ascii", text, Box::new(DiskSimLines::new(v, disk)))
    }

    fn ops(t: &crate::Trace) -> Vec<(Op, u64, u64, u64)> {
        t.requests
            .iter()
            .map(|r| (r.cmd.op, r.cmd.offset_bytes, r.cmd.len_bytes, r.at_ns))
            .collect()
    }

    #[test]
    fn disksim_reads_milliseconds_and_flag_bit_0() {
        // As DiskSim's manual lays a row out: ms, device, block, blocks, flags.
        let text = "13.191135 0 1024 5 1\n17.829285 0 576560 6 0\n24.5 0 8 24 0x3\n";
        assert!(text.lines().all(|l| looks_like(Variant::DiskSim, l)));
        let t = parse(Variant::DiskSim, text, None).unwrap();
        assert_eq!(
            ops(&t),
            vec![
                (Op::Read, 1024 * 512, 5 * 512, 0),
                (Op::Write, 576_560 * 512, 6 * 512, 4_638_150),
                (Op::Read, 8 * 512, 24 * 512, 11_308_865),
            ]
        );
    }

    #[test]
    fn mqsim_and_ssdsim_read_nanoseconds_and_0_write_1_read() {
        // The example rows of umn-cris/MQSim's traces/README.md: ns, device, LSN, sectors, type.
        let text = "4851300 1 524288 16 0\n4864300 1 524304 16 1\n";
        for v in [Variant::MqSim, Variant::SsdSim] {
            assert!(text.lines().all(|l| looks_like(v, l)));
            let t = parse(v, text, None).unwrap();
            assert_eq!(
                ops(&t),
                vec![
                    (Op::Write, 524_288 * 512, 16 * 512, 0),
                    (Op::Read, 524_304 * 512, 16 * 512, 13_000),
                ]
            );
        }
        // A decimal time is DiskSim's, not theirs.
        assert!(!looks_like(Variant::MqSim, "13.19 0 8 8 1"));
        assert!(looks_like(Variant::DiskSim, "13.19 0 8 8 1"));
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let e = parse(Variant::MqSim, "1 0 8 8\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "t.ascii:1: expected 5 space-separated fields (time device block size type), found 4"
        );
        let e = parse(Variant::SsdSim, "1 0 8 8 0\n2 0 8 8 2\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.ascii:2: type \"2\" is neither 0 (write) nor 1 (read)");
        let e = parse(Variant::DiskSim, "1.0 0 8 8 R\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("flags \"R\" are not a hex number"), "{e}");
        let e = parse(Variant::MqSim, "1.5 0 8 8 0\n", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a whole number of nanoseconds"), "{e}");
    }

    #[test]
    fn disk_picks_a_device_number() {
        let text = "1 0 8 8 0\n2 1 8 8 0\n3 1 16 8 1\n";
        let e = parse(Variant::MqSim, text, None).unwrap_err().to_string();
        assert!(e.contains("2 devices (0, 1)"), "{e}");
        assert_eq!(
            parse(Variant::MqSim, text, Some("1"))
                .unwrap()
                .requests
                .len(),
            2
        );
    }
}
