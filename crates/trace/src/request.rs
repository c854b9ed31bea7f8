//! Requests and traces.

use flash::Command;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The stream (process, disk, generator) that issues it.
    pub stream: u32,
    pub cmd: Command,
    /// Closed loop: time between the completion of this stream's previous request and
    /// the issue of this one.
    pub think_ns: u64,
    /// Open loop: issue time, from the start of the trace.
    pub at_ns: u64,
}

/// A parsed trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub requests: Vec<Request>,
    /// Whether `at_ns` carries real issue times (captured traces) rather than zeros.
    pub timestamped: bool,
}

impl Trace {
    /// Splits the requests by stream, keeping their order; streams are numbered densely
    /// in order of first appearance.
    pub fn by_stream(&self) -> Vec<Vec<Request>> {
        let mut index: Vec<(u32, usize)> = Vec::new();
        let mut out: Vec<Vec<Request>> = Vec::new();
        for r in &self.requests {
            let slot = match index.iter().find(|(s, _)| *s == r.stream) {
                Some(&(_, i)) => i,
                None => {
                    index.push((r.stream, out.len()));
                    out.push(Vec::new());
                    out.len() - 1
                }
            };
            out[slot].push(r.clone());
        }
        out
    }

    /// Requests of kind `op`.
    pub fn count(&self, op: flash::Op) -> u64 {
        self.requests.iter().filter(|r| r.cmd.op == op).count() as u64
    }

    /// Bytes the requests of kind `op` cover.
    pub fn bytes(&self, op: flash::Op) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.cmd.op == op)
            .map(|r| r.cmd.len_bytes)
            .sum()
    }

    /// The highest byte any request touches.
    pub fn max_end_bytes(&self) -> u64 {
        self.requests
            .iter()
            .map(|r| r.cmd.offset_bytes.saturating_add(r.cmd.len_bytes))
            .max()
            .unwrap_or(0)
    }
}

/// Fills `think_ns` from issue and completion times: per stream, the gap between a
/// request's completion and the next request's issue (clamped at zero). Without a
/// completion time the gap between issues is used.
pub fn derive_think_times(requests: &mut [Request], completions_ns: &[Option<u64>]) {
    let mut last_done: Vec<(u32, u64)> = Vec::new();
    for (r, done) in requests.iter_mut().zip(completions_ns) {
        let prev = last_done.iter_mut().find(|(s, _)| *s == r.stream);
        r.think_ns = match &prev {
            Some((_, t)) => r.at_ns.saturating_sub(*t),
            None => 0,
        };
        let end = done.unwrap_or(r.at_ns).max(r.at_ns);
        match prev {
            Some(p) => p.1 = end,
            None => last_done.push((r.stream, end)),
        }
    }
}
