//! Rewrites of a trace before replay.

use crate::Request;
use flash::{ByteRange, Command, Op};
use std::collections::HashMap;

/// Most ranges one vTrim carries (a 4-byte count and 8-byte entries in 4 KiB).
pub const VTRIM_MAX_RANGES: usize = (4096 - 4) / 8;

/// Turns each run of consecutive TRIMs of a stream (no other request of that stream in
/// between, issued within `window_ns` of the run's previous TRIM) into one vectored TRIM
/// addressed to `command_page_offset`, as if the file system had sent one vTrim per
/// unlink. Runs longer than [`VTRIM_MAX_RANGES`] become several vTrims. The vTrim takes
/// the place (and issue time) of the run's first TRIM. Dependencies on merged TRIMs point
/// to the vTrim that took them in.
pub fn coalesce_trims(
    requests: &[Request],
    window_ns: u64,
    command_page_offset: u64,
) -> Vec<Request> {
    let mut out: Vec<Request> = Vec::with_capacity(requests.len());
    // Per stream: index in `out` of the open vTrim, and the issue time of its last TRIM.
    let mut open: HashMap<u32, (usize, u64)> = HashMap::new();
    // Per stream: the new position (in the stream) of each of its old requests.
    let mut renumbered: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut per_stream: HashMap<u32, u64> = HashMap::new();
    let mut place = |stream: u32, merged: bool| {
        let n = per_stream.entry(stream).or_insert(0);
        if !merged {
            *n += 1;
        }
        renumbered.entry(stream).or_default().push(*n - 1);
    };
    for r in requests {
        if r.cmd.op != Op::Trim {
            open.remove(&r.stream);
            place(r.stream, false);
            out.push(r.clone());
            continue;
        }
        let range = ByteRange {
            offset_bytes: r.cmd.offset_bytes,
            len_bytes: r.cmd.len_bytes,
        };
        if let Some(&(at, last_ns)) = open.get(&r.stream) {
            let ranges = out[at].cmd.ranges();
            if r.at_ns.saturating_sub(last_ns) <= window_ns && ranges.len() < VTRIM_MAX_RANGES {
                let mut v = ranges.to_vec();
                v.push(range);
                let think = out[at].think_ns;
                let at_ns = out[at].at_ns;
                out[at] = Request {
                    stream: r.stream,
                    cmd: Command::vtrim(command_page_offset, v),
                    think_ns: think,
                    at_ns,
                    after: out[at].after,
                };
                place(r.stream, true);
                open.insert(r.stream, (at, r.at_ns));
                continue;
            }
        }
        open.insert(r.stream, (out.len(), r.at_ns));
        place(r.stream, false);
        out.push(Request {
            stream: r.stream,
            cmd: Command::vtrim(command_page_offset, vec![range]),
            think_ns: r.think_ns,
            at_ns: r.at_ns,
            after: r.after,
        });
    }
    for r in &mut out {
        if let Some(a) = &mut r.after {
            match renumbered
                .get(&a.stream)
                .and_then(|v| v.get(a.nth as usize))
            {
                Some(&n) => a.nth = n,
                None => r.after = None,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(stream: u32, cmd: Command, at_ns: u64) -> Request {
        Request {
            stream,
            cmd,
            think_ns: 0,
            at_ns,
            after: None,
        }
    }

    #[test]
    fn merges_runs_of_trims_per_stream() {
        let rs = vec![
            req(1, Command::trim(0, 4096), 0),
            req(2, Command::read(0, 4096), 5),
            req(1, Command::trim(8192, 4096), 10),
            req(1, Command::trim(65536, 8192), 20),
            req(1, Command::write(0, 4096), 30),
            req(1, Command::trim(0, 4096), 40),
            req(1, Command::trim(4096, 4096), 10_000),
        ];
        let out = coalesce_trims(&rs, 1_000, 1 << 30);
        let ops: Vec<Op> = out.iter().map(|r| r.cmd.op).collect();
        assert_eq!(
            ops,
            vec![Op::VTrim, Op::Read, Op::Write, Op::VTrim, Op::VTrim]
        );
        assert_eq!(out[0].cmd.ranges().len(), 3);
        assert_eq!(out[0].cmd.offset_bytes, 1 << 30);
        assert_eq!(
            out[3].cmd.ranges().len(),
            1,
            "the gap of 9,960 ns exceeds the window"
        );
    }

    #[test]
    fn splits_long_runs() {
        let rs: Vec<Request> = (0..1000)
            .map(|i| req(0, Command::trim(i * 8192, 4096), i))
            .collect();
        let out = coalesce_trims(&rs, 10, 0);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].cmd.ranges().len(), VTRIM_MAX_RANGES);
    }
}
