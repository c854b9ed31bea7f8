//! MSR Cambridge block traces (SNIA IOTTA): CSV lines
//! `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`, with the timestamp in
//! Windows filetime ticks (100 ns) and the response time in ticks too. One stream per
//! host and disk.

use super::{for_each_line, parse_u64};
use crate::request::{derive_think_times, Request};
use crate::{Trace, TraceError};
use flash::Command;
use std::collections::HashMap;

/// Parses an MSR Cambridge CSV. Each (host, disk number) is its own address space: a file
/// holding several is an error naming them unless `disk` picks one (`N`, or `HOST:N` when
/// several hosts have a disk N); only its rows are kept.
pub fn parse(origin: &str, text: &str, disk: Option<&str>) -> Result<Trace, TraceError> {
    let wanted = disk.map(|d| match d.split_once(':') {
        Some((host, n)) => (Some(host.to_string()), n.to_string()),
        None => (None, d.to_string()),
    });
    // Every (host, disk) seen, in order of first appearance.
    let mut disks: Vec<(String, String)> = Vec::new();
    // (host, disk) → stream, numbered in order of first appearance.
    let mut streams: HashMap<(String, String), u32> = HashMap::new();
    let mut rows: Vec<(u64, u32, Command, u64)> = Vec::new();
    for_each_line(origin, text, |line| {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') || t.starts_with("Timestamp") {
            return Ok(true);
        }
        let f: Vec<&str> = t.split(',').map(str::trim).collect();
        if f.len() != 7 {
            return Err(format!(
                "expected 7 comma-separated fields, found {}",
                f.len()
            ));
        }
        let ticks = parse_u64(f[0], "timestamp")?;
        let key = (f[1].to_string(), f[2].to_string());
        parse_u64(f[2], "disk number")?;
        if !disks.contains(&key) {
            disks.push(key.clone());
        }
        if let Some((host, n)) = &wanted {
            if *n != key.1 || host.as_ref().is_some_and(|h| *h != key.0) {
                return Ok(true);
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
        let next = streams.len() as u32;
        let stream = *streams.entry(key).or_insert(next);
        let at_ns = ticks
            .checked_mul(100)
            .ok_or("timestamp overflows nanoseconds")?;
        rows.push((at_ns, stream, cmd, response.saturating_mul(100)));
        Ok(true)
    })?;
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
    match &wanted {
        None if disks.len() > 1 => {
            return Err(err(format!(
                "the trace holds {} disks ({}), each its own address space: replaying them as one would \
                 make their blocks collide; pick one with --disk (e.g. --disk {}:{})",
                disks.len(),
                names(&disks),
                disks[0].0,
                disks[0].1
            )))
        }
        Some((host, n)) => {
            let matching: Vec<(String, String)> = disks
                .iter()
                .filter(|(h, d)| d == n && host.as_ref().is_none_or(|w| w == h))
                .cloned()
                .collect();
            if matching.is_empty() {
                return Err(err(format!(
                    "no disk {} in the trace; it holds {}",
                    disk.unwrap_or_default(),
                    names(&disks)
                )));
            }
            if matching.len() > 1 {
                return Err(err(format!(
                    "disk {n} is on several hosts ({}): pick one with --disk HOST:{n}",
                    names(&matching)
                )));
            }
        }
        None => {}
    }
    rows.sort_by_key(|r| r.0);
    let t0 = rows.first().map_or(0, |r| r.0);
    let mut requests: Vec<Request> = rows
        .iter()
        .map(|(at, stream, cmd, _)| Request {
            stream: *stream,
            cmd: cmd.clone(),
            think_ns: 0,
            at_ns: *at - t0,
        })
        .collect();
    let done: Vec<Option<u64>> = rows
        .iter()
        .map(|&(at, _, _, resp)| Some(at - t0 + resp))
        .collect();
    derive_think_times(&mut requests, &done);
    Ok(Trace {
        requests,
        timestamped: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Op;

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
