//! Kernel tracefs text (`/sys/kernel/tracing/trace` with the `block_rq_issue` and
//! `block_rq_complete` events enabled):
//! `TASK-PID [CPU] FLAGS SECS.USECS: block_rq_issue: maj,min RWBS BYTES (CMD) SECTOR + NR [IOPRIO] [COMM]`
//! and `... block_rq_complete: maj,min RWBS (CMD) SECTOR + NR [IOPRIO] [ERROR]`.
//! Older kernels lack the ioprio field; both layouts parse. With the scheduler's
//! `sched_wakeup` and `sched_switch` events too, the time a task waited for a CPU (on a
//! busy machine, after the wake-up its request's completion caused) is left out of its
//! think time. Other events are skipped.

use super::{for_each_line, op_from_rwbs, parse_seconds_ns, parse_u64, KernelEvents};
use crate::{Trace, TraceError};

pub fn parse(origin: &str, text: &str) -> Result<Trace, TraceError> {
    parse_lines(origin, &mut crate::input::TextLines::new(text))
}

/// [`parse`], a line at a time from `lines` (a file is never held whole).
pub fn parse_lines(
    origin: &str,
    lines: &mut dyn crate::input::LineSource,
) -> Result<Trace, TraceError> {
    let mut events = KernelEvents::default();
    for_each_line(origin, lines, |line| {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            return Ok(true);
        }
        let sched = [
            ": sched_switch: ",
            ": sched_wakeup: ",
            ": sched_wakeup_new: ",
        ]
        .iter()
        .find_map(|m| t.find(m).map(|p| (p, *m)));
        if let Some((p, marker)) = sched {
            let head = &t[..p];
            let time_field = head.split_whitespace().last().ok_or("missing timestamp")?;
            let time_ns = parse_seconds_ns(time_field)?;
            let payload = &t[p + marker.len()..];
            let field = |key: &str| -> Result<&str, String> {
                let at = payload
                    .rfind(key)
                    .ok_or_else(|| format!("{} without {key}", marker.trim_matches([':', ' '])))?;
                Ok(payload[at + key.len()..]
                    .split_whitespace()
                    .next()
                    .unwrap_or(""))
            };
            let task = |key: &str| -> Result<u32, String> {
                let v = field(key)?;
                v.parse::<u32>()
                    .map_err(|_| format!("{key}{v:?} is not a task id"))
            };
            if marker == ": sched_switch: " {
                // "prev_pid=N ... prev_state=R+ ==> next_comm=... next_pid=M": still
                // runnable when its state is R (preempted).
                let runnable = field("prev_state=")?.starts_with('R');
                events.cpu_waits.switch(
                    time_ns,
                    task(" prev_pid=")?,
                    runnable,
                    task(" next_pid=")?,
                );
            } else {
                events.cpu_waits.wakeup(time_ns, task(" pid=")?);
            }
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
    fn with_the_scheduler_s_events_waits_for_a_cpu_are_not_think_time() {
        // dd's write completes at 100.000110 and wakes it; a hog holds the CPU until
        // 100.000500; dd issues its read at 100.000610: 500 µs of wall gap, 390 µs of it
        // waiting for the CPU, 110 µs of think time.
        let text = "\
              dd-4321    [001] d..1.   100.000010: block_rq_issue: 7,0 WS 4096 () 2048 + 8 none,0,0 [dd]
          <idle>-0       [001] d.h1.   100.000110: block_rq_complete: 7,0 WS () 2048 + 8 none,0,0 [0]
          <idle>-0       [001] d.h2.   100.000110: sched_wakeup: comm=dd pid=4321 prio=120 target_cpu=001
             hog-99      [001] d..2.   100.000500: sched_switch: prev_comm=hog prev_pid=99 prev_prio=120 prev_state=R ==> next_comm=dd next_pid=4321 next_prio=120
              dd-4321    [001] d..1.   100.000610: block_rq_issue: 8,0 R 8192 () 4096 + 16 [dd]
";
        let t = parse("t", text).unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[1].think_ns, 110_000);
        // Without the scheduler's events, the wall-clock gap.
        let plain: String = text
            .lines()
            .filter(|l| !l.contains("sched_"))
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
