//! MSR Cambridge block traces (SNIA IOTTA): CSV lines
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with the timestamp in
//! Windows filetime ticks (100 ns) and the response time in ticks too. One stream per
//! host and disk.

use super::parse_u64;
use super::rows::{Row, RowLines};
use crate::TraceError;
use flash::Command;
use std::collections::HashMap;

/// The MSR parser, a line at a time: rows of the wanted disk, and every disk seen. Each
/// (host, disk number) is its own address space: a file holding several is an error
/// naming them unless `--disk` picks one (`N`, or `HOST:N` when several hosts have a disk
/// N); only its rows are kept.
pub(crate) struct MsrLines {
    wanted: Option<(Option<String>, String)>,
    /// The option as given, for messages.
    disk: Option<String>,
    /// Every (host, disk) seen, in order of first appearance.
    disks: Vec<(String, String)>,
    /// (host, disk) → stream, numbered in order of first appearance.
    streams: HashMap<(String, String), u32>,
}

impl MsrLines {
    pub(crate) fn new(disk: Option<&str>) -> MsrLines {
        MsrLines {
            wanted: disk.map(|d| match d.split_once(':') {
                Some((host, n)) => (Some(host.to_string()), n.to_string()),
                None => (None, d.to_string()),
            }),
            disk: disk.map(str::to_string),
            disks: Vec::new(),
            streams: HashMap::new(),
        }
    }
}

impl RowLines for MsrLines {
    /// The row on `line`, if it holds one of the wanted disk.
    fn line(&mut self, line: &str) -> Result<Option<Row>, String> {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("Timestamp") {
            return Ok(None);
        }
        let f: Vec<&str> = t.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(format!(
                "expected 7 comma-separated fields, found {}",
                f.len()
            ));
        }
        let ticks = parse_u64(f[0], "timestamp")?;
        parse_u64(f[2], "disk number")?;
        let (host, number) = (f[1], f[2]);
        if !self.disks.iter().any(|(h, d)| h == host && d == number) {
            self.disks.push((host.to_string(), number.to_string()));
        }
        if let Some((h, n)) = &self.wanted {
            if n != number || h.as_ref().is_some_and(|h| h != host) {
                return Ok(None);
            }
        }
        let offset = parse_u64(f[4], "offset")?;
        let size = parse_u64(f[5], "size")?;
        let response = parse_u64(f[6], "response time")?;
        offset.checked_add(size).ok_or("offset + size overflows")?;
        let cmd = match f[3].to_ascii_lowercase().as_str() {
            "read" => Command::read(offset, size),
            "write" => Command::write(offset, size),
            _ => return Err(format!("type {:?} is neither Read nor Write", f[3])),
        };
        let next = self.streams.len() as u32;
        let stream = *self
            .streams
            .entry((host.to_string(), number.to_string()))
            .or_insert(next);
        let at_ns = ticks
            .checked_mul(100)
            .ok_or("timestamp overflows nanoseconds")?;
        Ok(Some(Row {
            at_ns,
            stream,
            cmd,
            response_ns: response.saturating_mul(100),
        }))
    }

    /// At the end of the input: an error if the disks seen cannot be replayed as asked
    /// (several without `--disk`, or `--disk` naming none or an ambiguous one).
    fn finish(&self, origin: &str) -> Result<(), TraceError> {
        let names = |v: &[(String, String)]| {
            v.iter()
                .map(|(h, d)| format!("{h}:{d}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let err = |msg: String| TraceError::Format {
            origin: origin.to_string(),
            msg,
        };
        let disks = &self.disks;
        match &self.wanted {
            None if disks.len() > 1 => Err(err(format!(
                "the trace holds {} disks ({}), each its own address space: replaying them as one would \
                 make their blocks collide; pick one with --disk (e.g. --disk {}:{})",
                disks.len(),
                names(disks),
                disks[0].0,
                disks[0].1
            ))),
            Some((host, n)) => {
                let matching: Vec<(String, String)> = disks
                    .iter()
                    .filter(|(h, d)| d == n && host.as_ref().is_none_or(|w| w == h))
                    .cloned()
                    .collect();
                if matching.is_empty() {
                    return Err(err(format!(
                        "no disk {} in the trace; it holds {}",
                        self.disk.as_deref().unwrap_or_default(),
                        names(disks)
                    )));
                }
                if matching.len() > 1 {
                    return Err(err(format!(
                        "disk {n} is on several hosts ({}): pick one with --disk HOST:{n}",
                        names(&matching)
                    )));
                }
                Ok(())
            }
            None => Ok(()),
        }
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

    fn parse(origin: &str, text: &str, disk: Option<&str>) -> Result<crate::Trace, TraceError> {
        parse_rows(origin, text, Box::new(MsrLines::new(disk)))
    }

    #[test]
    fn parses_msr_rows() {
        let text = "128166372003061629,wdev,0,Read,3154509824,4096,1331\n128166372003161629,wdev,0,Write,8192,16384,500\n";
        let t = parse("wdev_0.csv", text, None).unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[0].cmd.op, Op::Read);
        assert_eq!(t.requests[1].at_ns, 10_000_000);
        assert_eq!(t.requests[1].think_ns, 10_000_000 - 133_100);
    }

    #[test]
    fn rejects_bad_rows() {
        let err = parse("x.csv", "1,h,0,Erase,0,4096,1\n", None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("x.csv:1:") && err.contains("Erase"),
            "{err}"
        );
        let err = parse("x.csv", "1,h,0,Read,0,4096\n", None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("7 comma"), "{err}");
    }

    #[test]
    fn a_trace_of_several_disks_needs_one_picked() {
        let text = "1,wdev,0,Write,0,4096,1\n2,wdev,1,Write,0,4096,1\n3,src,1,Read,0,4096,1\n4,wdev,1,Read,8192,4096,1\n";
        let err = parse("mix.csv", text, None).unwrap_err().to_string();
        assert!(
            err.contains("3 disks")
                && err.contains("wdev:0, wdev:1, src:1")
                && err.contains("--disk"),
            "{err}"
        );
        let t = parse("mix.csv", text, Some("wdev:1")).unwrap();
        assert_eq!(t.requests.len(), 2, "only wdev's disk 1");
        assert!(t.requests.iter().all(|r| r.stream == 0));
        assert_eq!(parse("mix.csv", text, Some("0")).unwrap().requests.len(), 1);
        let err = parse("mix.csv", text, Some("1")).unwrap_err().to_string();
        assert!(
            err.contains("several hosts") && err.contains("HOST:1"),
            "{err}"
        );
        let err = parse("mix.csv", text, Some("7")).unwrap_err().to_string();
        assert!(err.contains("no disk 7") && err.contains("src:1"), "{err}");
    }
}
