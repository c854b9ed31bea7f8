//! Requests and traces.

use flash::Command;
use std::collections::HashMap;

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
        let mut index: HashMap<u32, usize> = HashMap::new();
        let mut out: Vec<Vec<Request>> = Vec::new();
        for r in &self.requests {
            let slot = *index.entry(r.stream).or_insert_with(|| {
                out.push(Vec::new());
                out.len() - 1
            });
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
    // Per stream, when its previous request completed.
    let mut last_done: HashMap<u32, u64> = HashMap::new();
    for (r, done) in requests.iter_mut().zip(completions_ns) {
        let end = done.unwrap_or(r.at_ns).max(r.at_ns);
        r.think_ns = match last_done.insert(r.stream, end) {
            Some(t) => r.at_ns.saturating_sub(t),
            None => 0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_streams_group_in_order_of_first_appearance_with_their_think_times() {
        // 100,000 streams (this was quadratic: 16 s); each stream's requests keep their
        // order and think times run from the stream's own previous completion.
        let n = 100_000u32;
        let mut requests: Vec<Request> = (0..2 * n)
            .map(|i| Request {
                stream: (u64::from(i % n) * 2_654_435_761 % 1_000_003) as u32,
                cmd: Command::read(u64::from(i) * 4096, 4096),
                think_ns: 0,
                at_ns: u64::from(i) * 10,
            })
            .collect();
        let done: Vec<Option<u64>> = requests.iter().map(|r| Some(r.at_ns + 5)).collect();
        derive_think_times(&mut requests, &done);
        for (i, r) in requests.iter().enumerate() {
            let expect = if i < n as usize {
                0
            } else {
                u64::from(n) * 10 - 5
            };
            assert_eq!(r.think_ns, expect, "request {i}");
        }
        let trace = Trace {
            requests,
            timestamped: true,
        };
        let streams = trace.by_stream();
        assert_eq!(streams.len(), n as usize);
        for (k, s) in streams.iter().enumerate() {
            assert_eq!(s.len(), 2);
            assert_eq!(s[0].cmd.offset_bytes, k as u64 * 4096);
            assert_eq!(s[1].cmd.offset_bytes, (k as u64 + u64::from(n)) * 4096);
        }
    }
}
