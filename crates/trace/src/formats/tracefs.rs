//! Kernel tracefs text (`/sys/kernel/tracing/trace` with the `block_rq_issue` and
//! `block_rq_complete` events enabled):
//! `TASK-PID [CPU] FLAGS SECS.USECS: block_rq_issue: maj,min RWBS BYTES (CMD) SECTOR + NR [IOPRIO] [COMM]`
//! and `... block_rq_complete: maj,min RWBS (CMD) SECTOR + NR [IOPRIO] [ERROR]`.
//! Older kernels lack the ioprio field; both layouts parse. With `sched_switch` events
//! too, a request's think time is its task's time on a CPU (not the wall-clock gap, which
//! on a busy machine includes waiting for a CPU). Other events are skipped.

use super::{for_each_line, op_from_rwbs, parse_seconds_ns, parse_u64, KernelEvents};
use crate::{Trace, TraceError};

pub fn parse(origin: &str, text: &str) -> Result<Trace, TraceError> {
    let mut events = KernelEvents::default();
    for_each_line(origin, text, |line| {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(true);
        }
        if let Some(p) = t.find(": sched_switch: ") {
            // "... prev_pid=N ... ==> next_comm=... next_pid=M ...": who left the CPU, who
            // came on.
            let head = &t[..p];
            let time_field = head.split_whitespace().last().ok_or("missing timestamp")?;
            let time_ns = parse_seconds_ns(time_field)?;
            let pid_after = |key: &str| -> Result<u32, String> {
                let at = t[p..]
                    .rfind(key)
                    .ok_or_else(|| format!("sched_switch without {key}"))?;
                let digits: String = t[p + at + key.len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits
                    .parse::<u32>()
                    .map_err(|_| format!("sched_switch: {key} is not a task id"))
            };
            events
                .on_cpu
                .switch(time_ns, pid_after(" prev_pid=")?, pid_after(" next_pid=")?);
            return Ok(true);
        }
        let (is_issue, marker) = if let Some(p) = t.find(": block_rq_issue: ") {
            (true, p)
        } else if let Some(p) = t.find(": block_rq_complete: ") {
            (false, p)
        } else if t.contains(": block_") {
            events.other_events += 1;
            return Ok(true); // another block event
        } else if t.contains("CPU:") {
            return Ok(true); // a "CPU:n [LOST n EVENTS]" note
        } else {
            return Err("not a tracefs event line (expected '...: block_rq_issue: ...')".into());
        };
        // Header: "TASK-PID [CPU] FLAGS TIMESTAMP"
        let head = &t[..marker];
        let time_field = head.split_whitespace().last().ok_or("missing timestamp")?;
        let time_ns = parse_seconds_ns(time_field)?;
        let cpu_open = cpu_field_start(head).ok_or("missing [CPU] field")?;
        let task_pid = head[..cpu_open].trim();
        let pid_str = task_pid
            .rsplit_once('-')
            .map(|(_, p)| p)
            .ok_or_else(|| format!("task field {task_pid:?} is not TASK-PID"))?;
        let pid = parse_u64(pid_str, "pid")?;
        let payload_start = t[marker + 2..]
            .find(": ")
            .map(|p| marker + 2 + p + 2)
            .ok_or("missing event payload")?;
        let f: Vec<&str> = t[payload_start..].split_whitespace().collect();
        if f.len() < 5 {
            return Err(format!(
                "event payload has {} fields, expected at least 5",
                f.len()
            ));
        }
        if !f[0]
            .split_once(',')
            .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
        {
            return Err(format!("device field {:?} is not major,minor", f[0]));
        }
        let plus = f
            .iter()
            .position(|&x| x == "+")
            .ok_or("missing 'SECTOR + NR'")?;
        if plus < 3 {
            return Err("'+' too early: expected 'dev rwbs ... SECTOR + NR'".into());
        }
        let sector = parse_u64(f[plus - 1], "sector")?;
        let sectors = parse_u64(
            f.get(plus + 1).ok_or("missing sector count after '+'")?,
            "sector count",
        )?;
        let Some(op) = op_from_rwbs(f[1], sectors)? else {
            return Ok(true);
        };
        events.push(is_issue, pid, time_ns, op, sector, sectors)?;
        Ok(true)
    })?;
    events.into_trace(origin, "block_rq_issue events")
}

/// Where the `[CPU]` field of an event header starts: the rightmost `[digits]` token.
/// The task name comes first and may hold anything, `[` and spaces included (a thread
/// may name itself "worker [3]"), so the fixed fields are found from the right.
fn cpu_field_start(head: &str) -> Option<usize> {
    head.rmatch_indices('[').map(|(i, _)| i).find(|&i| {
        let rest = &head[i + 1..];
        let Some(close) = rest.find(']') else {
            return false;
        };
        let after = &rest[close + 1..];
        close > 0
            && rest[..close].bytes().all(|b| b.is_ascii_digit())
            && (after.is_empty() || after.starts_with(char::is_whitespace))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Op;

    const SAMPLE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
              dd-4321    [001] d..1.   100.000010: block_rq_issue: 7,0 WS 4096 () 2048 + 8 none,0,0 [dd]
          <idle>-0       [001] d.h1.   100.000110: block_rq_complete: 7,0 WS () 2048 + 8 none,0,0 [0]
    kworker/u8:2-77      [000] d..1.   100.000500: block_rq_issue: 7,0 DS 0 () 8192 + 1024 none,0,0 [kworker/u8:2]
              dd-4321    [001] d..1.   100.000610: block_rq_issue: 8,0 R 8192 () 4096 + 16 [dd]
              dd-4321    [001] d..1.   100.000700: block_bio_queue: 8,0 R 4096 + 16 [dd]
";

    #[test]
    fn parses_both_payload_layouts() {
        let t = parse("trace.txt", SAMPLE).unwrap();
        let got: Vec<_> = t
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
            got,
            vec![
                (4321, Op::Write, 2048 * 512, 4096, 0),
                (77, Op::Trim, 8192 * 512, 1024 * 512, 490_000),
                (4321, Op::Read, 4096 * 512, 8192, 600_000),
            ]
        );
        // dd's read came 500 µs after its write completed.
        assert_eq!(t.requests[2].think_ns, 500_000);
    }

    #[test]
    fn with_context_switches_think_time_is_time_on_a_cpu() {
        // dd's write completes at 100.000110; it waits for a CPU (a hog runs) from
        // 100.000200 to 100.000500 and issues its read at 100.000610: 500 µs of wall gap,
        // 200 µs on a CPU (110-200 and 500-610).
        let text = "\
              dd-4321    [001] d..1.   100.000010: block_rq_issue: 7,0 WS 4096 () 2048 + 8 none,0,0 [dd]
          <idle>-0       [001] d.h1.   100.000110: block_rq_complete: 7,0 WS () 2048 + 8 none,0,0 [0]
              dd-4321    [001] d..2.   100.000200: sched_switch: prev_comm=dd prev_pid=4321 prev_prio=120 prev_state=R+ ==> next_comm=hog next_pid=99 next_prio=120
             hog-99      [001] d..2.   100.000500: sched_switch: prev_comm=hog prev_pid=99 prev_prio=120 prev_state=R ==> next_comm=dd next_pid=4321 next_prio=120
              dd-4321    [001] d..1.   100.000610: block_rq_issue: 8,0 R 8192 () 4096 + 16 [dd]
";
        let t = parse("t", text).unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[1].think_ns, 200_000);
        // Without the switches, the wall-clock gap.
        let plain: String = text
            .lines()
            .filter(|l| !l.contains("sched_switch"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(parse("t", &plain).unwrap().requests[1].think_ns, 500_000);
    }

    #[test]
    fn task_names_may_hold_brackets_and_spaces() {
        // A thread named "worker [3]" (prctl allows any 15 bytes): the capture lost its whole
        // trace to this once.
        let text = "\
   worker [3] x-555    [001] d..1.   1.000010: block_rq_issue: 7,0 WS 4096 () 8 + 8 none,0,0 [worker [3] x]
   worker [3] x-555    [001] d.h1.   1.000110: block_rq_complete: 7,0 WS () 8 + 8 none,0,0 [0]
        [7]-9    [000] ....   1.000200: block_rq_issue: 7,0 R 4096 () 16 + 8 [[7]]
";
        let t = parse("t", text).unwrap();
        let got: Vec<_> = t.requests.iter().map(|r| (r.stream, r.cmd.op)).collect();
        assert_eq!(got, vec![(555, Op::Write), (9, Op::Read)]);
        assert_eq!(cpu_field_start("a [b]-1 [002] d..."), Some(8));
        assert_eq!(cpu_field_start("no cpu field"), None);
    }

    #[test]
    fn reports_bad_lines() {
        let err = parse("t", "garbage line\n").unwrap_err().to_string();
        assert!(err.starts_with("t:1:"), "{err}");
        let err = parse(
            "t",
            " dd-1 [000] .... 1.0: block_rq_issue: 7,0 WS 4096 () x + 8 [dd]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("sector"), "{err}");
    }
}
