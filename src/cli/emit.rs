//! Where a command's machine-readable output goes: printed to standard output (the command
//! line), or kept for the caller that ran the command as a library call ([`crate::api`]),
//! with the recordings that caller asked for (figures per interval, latency histograms,
//! every request). One switch per thread: a library call runs its command on a thread of
//! its own, so calls at the same time do not see each other's output.

use anyhow::Result;
use flash::timeline::{Completion, TimeSeries};
use std::cell::RefCell;

/// What a library caller asked to be recorded, beside the command's JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// Figures per interval and the latency histograms (as `--timeseries` and
    /// `--histograms` would write them).
    pub series: bool,
    /// Every request as the drive served it (as `--request-log` would write it).
    pub requests: bool,
}

/// What a command run as a library call produced.
#[derive(Debug, Default)]
pub(crate) struct Captured {
    pub(crate) want: Want,
    /// The JSON objects the command printed with `--json` (one, for the commands the
    /// library runs).
    pub(crate) json: Vec<serde_json::Value>,
    /// Each run's recording (run name, figures).
    pub(crate) series: Vec<(String, TimeSeries)>,
    /// Each request served, column by column.
    pub(crate) requests: Requests,
}

/// Served requests as columns (a request log of millions of rows is kept once, in the
/// shape it is handed on in).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// The runs' names; `run[i]` is a position in it.
    pub(crate) runs: Vec<String>,
    pub(crate) run: Vec<u32>,
    pub(crate) submit_ns: Vec<u64>,
    pub(crate) complete_ns: Vec<u64>,
    /// The operations' names; `op[i]` is a position in it.
    pub(crate) ops: Vec<String>,
    pub(crate) op: Vec<u32>,
    pub(crate) offset_bytes: Vec<u64>,
    pub(crate) len_bytes: Vec<u64>,
}

/// The position of `name` in `names`, added at the end if new.
pub(crate) fn code_of(names: &mut Vec<String>, name: &str) -> u32 {
    match names.iter().position(|n| n == name) {
        Some(i) => i as u32,
        None => {
            names.push(name.to_string());
            (names.len() - 1) as u32
        }
    }
}

impl Requests {
    fn push(&mut self, run: &str, c: &Completion) {
        let r = code_of(&mut self.runs, run);
        self.run.push(r);
        self.submit_ns.push(c.submit_ns);
        self.complete_ns.push(c.complete_ns);
        let op = code_of(&mut self.ops, c.op.name());
        self.op.push(op);
        self.offset_bytes.push(c.offset_bytes);
        self.len_bytes.push(c.len_bytes);
    }
}

thread_local! {
    static CAPTURE: RefCell<Option<Captured>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's output kept instead of printed; what was kept, and `f`'s
/// result.
pub(crate) fn capturing<T>(want: Want, f: impl FnOnce() -> T) -> (T, Captured) {
    CAPTURE.with(|c| {
        *c.borrow_mut() = Some(Captured {
            want,
            ..Captured::default()
        })
    });
    // Taken back even if `f` panics, so a later call on this thread starts clean.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CAPTURE.with(|c| c.borrow_mut().take());
        }
    }
    let reset = Reset;
    let out = f();
    let captured = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    drop(reset);
    (out, captured)
}

/// What the library caller asked to be recorded (nothing on the command line).
pub(crate) fn wanted() -> Want {
    CAPTURE.with(|c| c.borrow().as_ref().map(|c| c.want).unwrap_or_default())
}

/// Whether this thread's output is kept for a library caller.
pub(crate) fn is_capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// A command's `--json` output: printed on one line, or kept.
pub(crate) fn json(v: &serde_json::Value) -> Result<()> {
    emit_json(v, false)
}

/// [`json`], printed indented.
pub(crate) fn json_pretty(v: &serde_json::Value) -> Result<()> {
    emit_json(v, true)
}

fn emit_json(v: &serde_json::Value, pretty: bool) -> Result<()> {
    let kept = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(c) => {
            c.json.push(v.clone());
            true
        }
        None => false,
    });
    if !kept {
        let text = if pretty {
            serde_json::to_string_pretty(v)?
        } else {
            serde_json::to_string(v)?
        };
        println!("{text}");
    }
    Ok(())
}

/// Keeps the recordings of `runs` for a library caller that asked for them.
pub(crate) fn series(runs: &[(String, TimeSeries)]) {
    CAPTURE.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            if c.want.series {
                c.series.extend(runs.iter().cloned());
            }
        }
    });
}

/// Keeps one served request of run `run` for a library caller that asked for them.
pub(crate) fn request(run: &str, done: &Completion) {
    CAPTURE.with(|c| {
        if let Some(c) = c.borrow_mut().as_mut() {
            if c.want.requests {
                c.requests.push(run, done);
            }
        }
    });
}
