//! flashlab's own trace format: plain text, one request a line.
//!
//! ```text
//! flashlab-trace v1 closed        # or "open"
//! # stream op offset_bytes len_bytes time_ns
//! 0 W 0 4096 0
//! 0 R 0 4096 1000
//! 1 T 1048576 65536 0
//! 0 F 0 0 0
//! ```
//! `op` is R (read), W (write), T (trim) or F (flush); V (vectored TRIM) takes a sixth
//! field with its ranges, `offset:len,offset:len,...`, and I (file-based TRIM) a sixth
//! field with the inode number. A W may take a sixth field with the bytes it writes, in
//! hex, trailing zero bytes left out (`0 W 4096 4096 0 53ef01`): simfs's metadata writes
//! carry them, so that a replayed fTrim parses the same inode tables and extent blocks.
//! A W on a placement handle other than 0 (NVMe FDP's placement identifier,
//! `flash::Command::handle`) ends with `h=N` (`0 W 0 4096 0 h=2`, `0 W 4096 4096 0 53ef01
//! h=2`); without it the write is on handle 0, so traces written before handles existed
//! read as they did. In a `closed` trace `time_ns` is the think time before the request;
//! in an `open` trace it is the issue time.

use super::{for_each_line, parse_u64};
use crate::request::Request;
use crate::{Trace, TraceError};
use flash::{ByteRange, Command, Op, Payload};
use std::io::Write;

pub fn parse(origin: &str, text: &str) -> Result<Trace, TraceError> {
    let mut lines = NativeLines::default();
    let mut requests = Vec::new();
    for_each_line(origin, &mut crate::input::TextLines::new(text), |line| {
        if let Some(r) = lines.line(line)? {
            requests.push(r);
        }
        Ok(true)
    })?;
    let open = lines.finish(origin)?;
    Ok(Trace {
        requests,
        timestamped: open,
    })
}

/// The native format's parser, a line at a time (for whole texts and for streaming).
#[derive(Debug, Default)]
pub(crate) struct NativeLines {
    /// From the header: `Some(true)` = open loop.
    mode: Option<bool>,
    /// Open loop: the previous request's time (times must not decrease).
    last_at_ns: u64,
}

impl NativeLines {
    /// Whether the header said open loop (`None` before it).
    pub(crate) fn open(&self) -> Option<bool> {
        self.mode
    }

    /// The request on `line`, if it holds one.
    pub(crate) fn line(&mut self, line: &str) -> Result<Option<Request>, String> {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            return Ok(None);
        }
        // At most six fields and a write's handle (more make the count wrong, which is
        // reported).
        let mut fields_buf = [""; 8];
        let mut n = 0;
        for w in t.split_whitespace() {
            if n == fields_buf.len() {
                n += 1;
                break;
            }
            fields_buf[n] = w;
            n += 1;
        }
        let mut handle = 0u16;
        if n >= 2 && n <= fields_buf.len() && fields_buf[1] == "W" {
            if let Some(h) = fields_buf[n - 1].strip_prefix("h=") {
                handle = u16::try_from(parse_u64(h, "handle")?)
                    .map_err(|_| format!("handle {h} does not fit 16 bits"))?;
                n -= 1;
            }
        }
        let f = &fields_buf[..n.min(7)];
        let found = n;
        let Some(open) = self.mode else {
            return match f {
                ["flashlab-trace", "v1", "closed"] => {
                    self.mode = Some(false);
                    Ok(None)
                }
                ["flashlab-trace", "v1", "open"] => {
                    self.mode = Some(true);
                    Ok(None)
                }
                _ => Err(
                    "first line must be 'flashlab-trace v1 closed' or 'flashlab-trace v1 open'"
                        .into(),
                ),
            };
        };
        let fields = match f.get(1) {
            Some(&"V") | Some(&"I") => 6,
            Some(&"W") if f.len() == 6 => 6,
            _ => 5,
        };
        if found != fields {
            return Err(format!(
                "expected {fields} fields (stream op offset_bytes len_bytes time_ns{}), found {}",
                if fields == 6 { " ranges|inode" } else { "" },
                if found > 6 {
                    "more than 6".to_string()
                } else {
                    found.to_string()
                }
            ));
        }
        let stream = u32::try_from(parse_u64(f[0], "stream")?)
            .map_err(|_| "stream does not fit 32 bits".to_string())?;
        let op = match f[1] {
            "R" => Op::Read,
            "W" => Op::Write,
            "T" => Op::Trim,
            "F" => Op::Flush,
            "V" => Op::VTrim,
            "I" => Op::FTrim,
            other => return Err(format!("op {other:?} is not R, W, T, F, V or I")),
        };
        let offset = parse_u64(f[2], "offset_bytes")?;
        let len = parse_u64(f[3], "len_bytes")?;
        offset
            .checked_add(len)
            .ok_or("offset_bytes + len_bytes overflows")?;
        let time = parse_u64(f[4], "time_ns")?;
        if open {
            if time < self.last_at_ns {
                return Err(format!(
                    "open-loop trace times must not decrease: {time} ns after {} ns",
                    self.last_at_ns
                ));
            }
            self.last_at_ns = time;
        }
        let mut cmd = Command::new(op, offset, len);
        if op == Op::VTrim {
            let mut ranges = Vec::new();
            for part in f[5].split(',') {
                let (o, l) = part
                    .split_once(':')
                    .ok_or_else(|| format!("range {part:?} is not offset:len"))?;
                let (o, l) = (parse_u64(o, "range offset")?, parse_u64(l, "range length")?);
                o.checked_add(l).ok_or("range offset + length overflows")?;
                ranges.push(ByteRange {
                    offset_bytes: o,
                    len_bytes: l,
                });
            }
            cmd.payload = Payload::Ranges(ranges.into());
        } else if op == Op::FTrim {
            let ino = u32::try_from(parse_u64(f[5], "inode")?)
                .map_err(|_| "inode does not fit 32 bits".to_string())?;
            cmd.payload = Payload::Inode(ino);
        } else if op == Op::Write && f.len() == 6 {
            cmd.payload = Payload::Data(parse_data(f[5], len)?.into());
        }
        cmd.handle = handle;
        Ok(Some(Request {
            stream,
            cmd,
            think_ns: if open { 0 } else { time },
            at_ns: if open { time } else { 0 },
            after: None,
        }))
    }

    /// At the end of the input: whether the trace is open loop, or an error for an input
    /// without a header.
    pub(crate) fn finish(&self, origin: &str) -> Result<bool, TraceError> {
        self.mode.ok_or_else(|| TraceError::Format {
            origin: origin.to_string(),
            msg: "empty trace: no 'flashlab-trace v1' header".into(),
        })
    }
}

/// Most bytes a write may carry in a trace (a metadata block is 4 KiB).
const MAX_DATA_BYTES: u64 = 1 << 20;

/// The bytes of a write of `len` bytes from their hex (trailing zeros left out).
fn parse_data(hex: &str, len: u64) -> Result<Vec<u8>, String> {
    if len > MAX_DATA_BYTES {
        return Err(format!(
            "a write that carries its bytes may be at most {MAX_DATA_BYTES} bytes long, not {len}"
        ));
    }
    if !hex.len().is_multiple_of(2) || hex.len() as u64 > 2 * len {
        return Err(format!(
            "data field of {} hex digits: expected an even number, at most 2 x len_bytes ({})",
            hex.len(),
            2 * len
        ));
    }
    let mut bytes = vec![0u8; len as usize];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let digits = std::str::from_utf8(pair).unwrap_or("");
        bytes[i] = u8::from_str_radix(digits, 16)
            .map_err(|_| format!("data byte {i} {digits:?} is not two hex digits"))?;
    }
    Ok(bytes)
}

/// Writes `trace` in the native format (open loop if it is timestamped).
pub fn write_native<W: Write>(trace: &Trace, mut out: W) -> std::io::Result<()> {
    let open = trace.timestamped;
    writeln!(
        out,
        "flashlab-trace v1 {}",
        if open { "open" } else { "closed" }
    )?;
    writeln!(
        out,
        "# stream op offset_bytes len_bytes {}",
        if open { "at_ns" } else { "think_ns" }
    )?;
    for r in &trace.requests {
        let op = match r.cmd.op {
            Op::Read => 'R',
            Op::Write => 'W',
            Op::Trim => 'T',
            Op::Flush => 'F',
            Op::VTrim => 'V',
            Op::FTrim => 'I',
        };
        let time = if open { r.at_ns } else { r.think_ns };
        write!(
            out,
            "{} {} {} {} {}",
            r.stream, op, r.cmd.offset_bytes, r.cmd.len_bytes, time
        )?;
        match &r.cmd.payload {
            Payload::Ranges(rs) => {
                let list: Vec<String> = rs
                    .iter()
                    .map(|x| format!("{}:{}", x.offset_bytes, x.len_bytes))
                    .collect();
                writeln!(out, " {}", list.join(","))?;
            }
            Payload::Inode(ino) => writeln!(out, " {ino}")?,
            Payload::Data(bytes) if r.cmd.op == Op::Write => {
                let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                write!(out, " ")?;
                for b in &bytes[..used] {
                    write!(out, "{b:02x}")?;
                }
                if r.cmd.handle != 0 {
                    write!(out, " h={}", r.cmd.handle)?;
                }
                writeln!(out)?;
            }
            _ if r.cmd.op == Op::Write && r.cmd.handle != 0 => {
                writeln!(out, " h={}", r.cmd.handle)?
            }
            _ => writeln!(out)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let text = "flashlab-trace v1 closed\n# comment\n0 W 0 4096 0\n0 R 0 4096 1000 # trailing\n1 T 1048576 65536 0\n0 F 0 0 0\n\
                    2 V 4096 4096 0 0:8192,65536:4096\n2 I 4096 512 0 12\n";
        let t = parse("a.trace", text).unwrap();
        assert_eq!(t.requests.len(), 6);
        assert_eq!(t.requests[4].cmd.ranges().len(), 2);
        assert_eq!(t.requests[5].cmd.payload, Payload::Inode(12));
        assert_eq!(t.requests[1].think_ns, 1000);
        let mut out = Vec::new();
        write_native(&t, &mut out).unwrap();
        let again = parse("b.trace", std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(t, again);
    }

    #[test]
    fn writes_carry_their_bytes() {
        let mut data = vec![0u8; 4096];
        data[0] = 0x53;
        data[1] = 0xef;
        data[100] = 7;
        let t = Trace {
            requests: vec![Request {
                stream: 0,
                cmd: Command::write_data(8192, data.into()),
                think_ns: 0,
                at_ns: 0,
                after: None,
            }],
            timestamped: false,
        };
        let mut out = Vec::new();
        write_native(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("0 W 8192 4096 0 53ef"), "{text}");
        assert_eq!(parse("d.trace", &text).unwrap(), t);
        for bad in ["0 W 0 4096 0 5", "0 W 0 4096 0 zz", "0 W 0 2 0 0011223344"] {
            let err = parse("d.trace", &format!("flashlab-trace v1 closed\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("d.trace:2:") && err.contains("data"), "{err}");
        }
    }

    #[test]
    fn writes_carry_their_handles() {
        let mut data = vec![0u8; 4096];
        data[0] = 0x53;
        let req = |cmd: Command| Request {
            stream: 1,
            cmd,
            think_ns: 5,
            at_ns: 0,
            after: None,
        };
        let t = Trace {
            requests: vec![
                req(Command::write(0, 4096).on_handle(3)),
                req(Command::write_data(8192, data.into()).on_handle(2)),
                req(Command::write(4096, 4096)),
            ],
            timestamped: false,
        };
        let mut out = Vec::new();
        write_native(&t, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("1 W 0 4096 5 h=3\n"), "{text}");
        assert!(text.contains("1 W 8192 4096 5 53 h=2\n"), "{text}");
        assert!(
            text.contains("1 W 4096 4096 5\n"),
            "handle 0 is not written: {text}"
        );
        assert_eq!(parse("h.trace", &text).unwrap(), t);
        for (bad, says) in [
            ("0 W 0 4096 0 h=70000", "16 bits"),
            ("0 W 0 4096 0 h=x", "handle"),
            ("0 R 0 4096 0 h=1", "fields"),
            ("0 W 0 4096 0 00 11 h=1", "fields"),
        ] {
            let err = parse("h.trace", &format!("flashlab-trace v1 closed\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("h.trace:2:") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn errors_name_line_and_field() {
        let err = parse(
            "a.trace",
            "flashlab-trace v1 open\n0 W 0 4096 5\n0 X 0 1 6\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("a.trace:3:") && err.contains("\"X\""),
            "{err}"
        );
        let err = parse("a.trace", "0 W 0 4096 5\n").unwrap_err().to_string();
        assert!(err.contains("first line"), "{err}");
        let err = parse(
            "a.trace",
            "flashlab-trace v1 open\n0 W 0 4096 5\n0 W 0 4096 4\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("decrease"), "{err}");
    }
}
