//! blkparse's default text output (`blkparse -i dev`):
//! `maj,min cpu seq secs.nsecs pid action rwbs [sector + sectors] [process]`.
//! Issue (`D`) and complete (`C`) events make the trace; other actions (Q, G, I, M, P,
//! U, ...) and `m` messages are skipped; the per-CPU summary at the end is ignored.

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
    let mut in_summary = false;
    for_each_line(origin, lines, |line| {
        let t = line.trim();
        if t.is_empty() {
            return Ok(true);
        }
        let f: Vec<&str> = t.split_whitespace().collect();
        // blkparse ends with a summary ("CPU0 (8,0):", "Total (8,0):", ...); only its
        // heading starts it, and no event may follow it.
        if is_summary_heading(t) {
            in_summary = true;
            return Ok(true);
        }
        if in_summary {
            if f.len() >= 7 && is_major_minor(f[0]) {
                return Err("an event line after blkparse's summary (two traces joined?)".into());
            }
            return Ok(true);
        }
        if f.len() < 7 {
            return Err(format!(
                "expected at least 7 fields (dev cpu seq time pid action rwbs), found {}",
                f.len()
            ));
        }
        if !is_major_minor(f[0]) {
            return Err(format!("device field {:?} is not major,minor", f[0]));
        }
        let time_ns = parse_seconds_ns(f[3])?;
        let pid = parse_u64(f[4], "pid")?;
        let action = f[5];
        if action != "D" && action != "C" {
            events.other_events += 1;
            return Ok(true);
        }
        let rwbs = f[6];
        // Range: "sector + sectors" when present (a flush has none).
        let (sector, sectors) = match f.iter().position(|&x| x == "+") {
            Some(p) if p >= 8 => (
                parse_u64(f[p - 1], "sector")?,
                parse_u64(
                    f.get(p + 1).ok_or("missing sector count after '+'")?,
                    "sector count",
                )?,
            ),
            Some(_) => return Err("'+' without a sector before it".into()),
            None => (0, 0),
        };
        let Some(op) = op_from_rwbs(rwbs, sectors)? else {
            return Ok(true);
        };
        events.push(action == "D", pid, time_ns, op, sector, sectors)?;
        Ok(true)
    })?;
    events.into_trace(
        origin,
        "D (issue) events; trace with blktrace's default mask, or keep D when filtering with -a",
    )
}

fn is_major_minor(field: &str) -> bool {
    field
        .split_once(',')
        .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
}

/// "CPU3 (8,0):" or "Total (8,0):", the headings of blkparse's closing summary.
fn is_summary_heading(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("Total").or_else(|| {
        line.strip_prefix("CPU")
            .map(|r| r.trim_start_matches(|c: char| c.is_ascii_digit()))
    }) else {
        return false;
    };
    rest.trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix("):"))
        .is_some_and(is_major_minor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Op;

    const SAMPLE: &str = "\
  8,0    1        1     0.000000000  1234  Q  WS 2048 + 8 [dd]
  8,0    1        2     0.000001000  1234  G  WS 2048 + 8 [dd]
  8,0    1        3     0.000002000  1234  D  WS 2048 + 8 [dd]
  8,0    1        4     0.000102000     0  C  WS 2048 + 8 [0]
  8,0    1        5     0.000202000  1234  D  R 4096 + 16 [dd]
  8,0    1        6     0.000302000     0  C  R 4096 + 16 [0]
  8,0    0        7     0.000402000   99  D  DS 0 + 2048 [fstrim]
  8,0    0        8     0.000502000   99  D  FWS [kworker]
  8,0    0        0     0.000600000     0  m   N cfq1234 some message
CPU0 (8,0):
 Reads Queued:           1,        8KiB	 Writes Queued:           1,        4KiB
";

    #[test]
    fn parses_issues_completions_and_think_times() {
        let t = parse("sample.blk", SAMPLE).unwrap();
        assert!(t.timestamped);
        let ops: Vec<_> = t.requests.iter().map(|r| r.cmd.op).collect();
        assert_eq!(ops, vec![Op::Write, Op::Read, Op::Trim, Op::Flush]);
        let w = &t.requests[0];
        assert_eq!(
            (w.cmd.offset_bytes, w.cmd.len_bytes, w.stream, w.at_ns),
            (2048 * 512, 4096, 1234, 0)
        );
        let r = &t.requests[1];
        assert_eq!(
            (r.cmd.offset_bytes, r.cmd.len_bytes, r.at_ns),
            (4096 * 512, 8192, 200_000)
        );
        // Issued 100 µs after the write completed.
        assert_eq!(r.think_ns, 100_000);
        assert_eq!(t.requests[2].cmd.len_bytes, 2048 * 512);
    }

    #[test]
    fn the_summary_ends_events_only_as_a_heading() {
        // A process named "CPUburn" or "Totals" used to end the parse silently.
        let text = "\
  8,0    1        1     0.000000000  1234  D  WS 2048 + 8 [dd]
CPUburn and Totals in a task name are no summary
  8,0    1        2     0.000001000  1234  D  WS 4096 + 8 [dd]
";
        let err = parse("t.blk", text).unwrap_err().to_string();
        assert!(err.starts_with("t.blk:2:"), "{err}");
        let text = "\
  8,0    1        1     0.000000000  1234  D  WS 2048 + 8 [dd]
CPU0 (8,0):
 Reads Queued:           1,        8KiB
  8,0    1        2     0.000001000  1234  D  WS 4096 + 8 [dd]
";
        let err = parse("t.blk", text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.blk:4:") && err.contains("summary"),
            "{err}"
        );
        assert!(is_summary_heading("Total (8,16):"));
        assert!(is_summary_heading("CPU12 (259,0):"));
        assert!(!is_summary_heading("CPU time"));
    }

    #[test]
    fn queue_events_without_issues_are_an_error() {
        let text = "  8,0 1 1 0.0 12 Q WS 2048 + 8 [dd]\n  8,0 1 2 0.1 12 Q WS 4096 + 8 [dd]\n";
        let err = parse("q.blk", text).unwrap_err().to_string();
        assert!(err.contains("no D (issue) events"), "{err}");
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let text = "  8,0 1 1 0.0 12 D WS 2048 + 8 [dd]\n  8,0 1 2 0.x 12 D WS 2048 + 8 [dd]\n";
        let err = parse("bad.blk", text).unwrap_err().to_string();
        assert!(
            err.starts_with("bad.blk:2:") && err.contains("timestamp"),
            "{err}"
        );
        let err = parse("bad.blk", "  8,0 1 2 0.1 12 D WS abc + 8 [dd]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sector"), "{err}");
    }
}
