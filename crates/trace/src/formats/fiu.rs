//! FIU block traces (SNIA IOTTA, "FIU IODedup": homes, mail, web-vm; format from the
//! dataset's README): space-separated lines
//! `ts pid process lba size rw major minor md5`, with `ts` in nanoseconds, `size` in
//! 512-byte blocks, `rw` R or W, `major minor` the device's numbers and the MD5 digest of
//! the data (per 4096 bytes; per 512 bytes in homes). `lba` is in 512-byte blocks as
//! `size` is: the README gives no unit for it, and 512-byte blocks are how the traces'
//! users read it. Each device (`--disk MAJOR:MINOR`) is an address space; each process
//! (pid) is a stream. Digests are ignored; a request whose data spans several digests may
//! carry them all, so fields past the ninth are allowed.

use super::parse_u64;
use super::rows::{data_command, scaled, Devices, Row, RowLines};
use crate::TraceError;
use std::collections::HashMap;

pub(crate) struct FiuLines {
    devices: Devices,
    /// "major:minor" of the current row (a buffer reused across rows).
    device: String,
    /// pid → stream, numbered in order of first appearance.
    streams: HashMap<u64, u32>,
}

impl FiuLines {
    pub(crate) fn new(disk: Option<&str>) -> FiuLines {
        FiuLines {
            // Devices are named MAJOR:MINOR, as lsblk writes them; blkparse's 8,0 works too.
            devices: Devices::new("device", disk.map(|d| d.replace(',', ":")).as_deref()),
            device: String::new(),
            streams: HashMap::new(),
        }
    }
}

/// The first nine fields of `line`; an error if it has fewer.
fn fields(line: &str) -> Result<[&str; 9], String> {
    let mut out = [""; 9];
    let mut n = 0;
    for f in line.split_whitespace().take(9) {
        out[n] = f;
        n += 1;
    }
    if n < 9 {
        return Err(format!(
            "expected 9 space-separated fields (ts pid process lba size rw major minor md5), found {n}"
        ));
    }
    Ok(out)
}

/// Whether `line` is a row of this format (for `--format auto`).
pub(crate) fn looks_like(line: &str) -> bool {
    let Ok(f) = fields(line) else {
        return false;
    };
    [f[0], f[1], f[3], f[4]]
        .iter()
        .all(|x| x.parse::<u64>().is_ok())
        && matches!(f[5], "R" | "W")
        && f[6].parse::<u32>().is_ok()
        && f[7].parse::<u32>().is_ok()
}

impl RowLines for FiuLines {
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(None);
        }
        let f = fields(t)?;
        let major = parse_u64(f[6], "major device number")?;
        let minor = parse_u64(f[7], "minor device number")?;
        self.device.clear();
        use std::fmt::Write;
        let _ = write!(self.device, "{major}:{minor}");
        if self.devices.keep(&self.device).is_none() {
            return Ok(None);
        }
        let at_ns = parse_u64(f[0], "timestamp (ns)")?;
        let pid = parse_u64(f[1], "pid")?;
        let lba = scaled(parse_u64(f[3], "lba")?, 512, "lba (512-byte blocks)")?;
        let size = scaled(parse_u64(f[4], "size")?, 512, "size (512-byte blocks)")?;
        let write = match f[5] {
            "R" => false,
            "W" => true,
            other => return Err(format!("rw {other:?} is neither R nor W")),
        };
        let next = self.streams.len() as u32;
        let stream = *self.streams.entry(pid).or_insert(next);
        Ok(Some(Row {
            at_ns,
            stream,
            cmd: data_command(write, lba, size)?,
            response_ns: 0,
        }))
    }

    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        self.devices.finish(origin)
    }

    fn sort_hint(&self) -> &'static str {
        "sort -k1,1n"
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::parse_rows;
    use super::*;
    use flash::Op;

    fn parse(text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows("web-vm.blkparse", text, Box::new(FiuLines::new(disk)))
    }

    /// Rows laid out as the README describes (two processes on device 8:0).
    const SAMPLE: &str = "89968195792462 20782 gzip 283193184 8 R 8 0 56f11b711d91a065a2b6458eca924523\n\
        89968195892462 4420 kjournald 1024 16 W 8 0 c1bfd1e2a8b4f9c6d0a1e3b5c7d9f0a2 7d0e4a1b2c3d4e5f6a7b8c9d0e1f2a3b\n\
        89968196892462 20782 gzip 283193192 8 R 8 0 0e9b1f5bc4d0f8a2b1c3d5e7f9a0b2c4\n";

    #[test]
    fn parses_rows_as_the_readme_describes() {
        assert!(SAMPLE.lines().all(looks_like));
        let t = parse(SAMPLE, None).unwrap();
        assert!(t.timestamped);
        let r: Vec<_> = t
            .requests
            .iter()
            .map(|r| {
                (
                    r.stream,
                    r.cmd.op,
                    r.cmd.offset_bytes,
                    r.cmd.len_bytes,
                    r.at_ns,
                )
            })
            .collect();
        assert_eq!(
            r,
            vec![
                (0, Op::Read, 283_193_184 * 512, 4096, 0),
                (1, Op::Write, 1024 * 512, 8192, 100_000),
                (0, Op::Read, 283_193_192 * 512, 4096, 1_100_000),
            ]
        );
        assert_eq!(t.requests[2].think_ns, 1_100_000, "per process");
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let e = parse("1 2 p 3 8 R 8 0\n", None).unwrap_err().to_string();
        assert_eq!(
            e,
            "web-vm.blkparse:1: expected 9 space-separated fields (ts pid process lba size rw major minor md5), found 8"
        );
        let e = parse("1 2 p 3 8 R 8 0 ab\n2 2 p 3 8 D 8 0 ab\n", None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "web-vm.blkparse:2: rw \"D\" is neither R nor W");
    }

    #[test]
    fn disk_picks_a_device_by_major_and_minor() {
        let text = "1 2 p 3 8 R 8 0 ab\n2 2 p 3 8 W 8 16 ab\n3 2 p 3 8 W 8 16 ab\n";
        let e = parse(text, None).unwrap_err().to_string();
        assert!(
            e.contains("2 devices (8:0, 8:16)") && e.contains("--disk 8:0"),
            "{e}"
        );
        assert_eq!(parse(text, Some("8:16")).unwrap().requests.len(), 2);
        assert_eq!(parse(text, Some("8,0")).unwrap().requests.len(), 1);
    }
}
