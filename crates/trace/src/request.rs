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
    derive_think_times_on_cpu(requests, completions_ns, None);
}

/// As [`derive_think_times`], but where `on_cpu` knows a stream's task, its think time is
/// the time the task spent on a CPU between its previous request's completion and this
/// issue: waiting for a CPU on a busy machine is not thinking.
pub fn derive_think_times_on_cpu(
    requests: &mut [Request],
    completions_ns: &[Option<u64>],
    on_cpu: Option<&OnCpu>,
) {
    // Per stream, when its previous request completed.
    let mut last_done: HashMap<u32, u64> = HashMap::new();
    for (r, done) in requests.iter_mut().zip(completions_ns) {
        let end = done.unwrap_or(r.at_ns).max(r.at_ns);
        r.think_ns = match last_done.insert(r.stream, end) {
            Some(t) if r.at_ns > t => on_cpu
                .and_then(|c| c.time_on_cpu(r.stream, t, r.at_ns))
                .unwrap_or(r.at_ns - t),
            _ => 0,
        };
    }
}

/// When each task was on a CPU (from the scheduler's `sched_switch` events): per task id,
/// sorted, non-overlapping `[start, end)` intervals in the trace's time.
#[derive(Debug, Clone, Default)]
pub struct OnCpu {
    intervals: HashMap<u32, Vec<(u64, u64)>>,
    /// Where a task was switched in and not yet out.
    running: HashMap<u32, u64>,
    /// Switches recorded.
    switches: u64,
}

impl OnCpu {
    /// Records a context switch at `at_ns` from task `prev` to task `next` (0: idle).
    pub fn switch(&mut self, at_ns: u64, prev: u32, next: u32) {
        self.switches += 1;
        if prev != 0 {
            // Switched out with no switch-in seen: on a CPU since before the trace began.
            let start = self.running.remove(&prev).unwrap_or(0);
            if at_ns > start {
                self.intervals.entry(prev).or_default().push((start, at_ns));
            }
        }
        if next != 0 {
            self.running.insert(next, at_ns);
            self.intervals.entry(next).or_default();
        }
    }

    /// Shifts every time back by `t0` (a trace's times start at its first request).
    pub fn shift(&mut self, t0: u64) {
        for v in self.intervals.values_mut() {
            for (a, b) in v.iter_mut() {
                *a = a.saturating_sub(t0);
                *b = b.saturating_sub(t0);
            }
        }
        for t in self.running.values_mut() {
            *t = t.saturating_sub(t0);
        }
    }

    /// Time task `task` spent on a CPU within `[from, to)`; None if no switch of it was
    /// seen (nothing is known about it).
    pub fn time_on_cpu(&self, task: u32, from: u64, to: u64) -> Option<u64> {
        let v = self.intervals.get(&task)?;
        let i = v.partition_point(|&(_, end)| end <= from);
        let mut sum = 0;
        for &(a, b) in &v[i..] {
            if a >= to {
                break;
            }
            sum += b.min(to) - a.max(from);
        }
        if let Some(&start) = self.running.get(&task) {
            if start < to {
                sum += to - start.max(from);
            }
        }
        Some(sum)
    }

    /// Whether any switch was recorded.
    pub fn is_empty(&self) -> bool {
        self.switches == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_counts_only_time_on_a_cpu() {
        // Task 7: on a CPU 0-10, off 10-50 (waiting for a CPU), on 50-60, then issues at
        // 60; its previous request completed at 5. Wall gap 55, on-CPU time 5 + 10 = 15.
        let mut c = OnCpu::default();
        c.switch(0, 0, 7);
        c.switch(10, 7, 9);
        c.switch(50, 9, 7);
        assert_eq!(c.time_on_cpu(7, 5, 60), Some(15));
        assert_eq!(c.time_on_cpu(9, 0, 100), Some(40), "task 9 ran 10-50");
        assert_eq!(c.time_on_cpu(3, 0, 100), None, "task 3 never seen");
        let mut requests = vec![
            Request {
                stream: 7,
                cmd: Command::read(0, 4096),
                think_ns: 0,
                at_ns: 1,
            },
            Request {
                stream: 7,
                cmd: Command::read(4096, 4096),
                think_ns: 0,
                at_ns: 60,
            },
        ];
        let done = [Some(5), Some(70)];
        derive_think_times_on_cpu(&mut requests, &done, Some(&c));
        assert_eq!(requests[1].think_ns, 15);
        derive_think_times(&mut requests, &done);
        assert_eq!(
            requests[1].think_ns, 55,
            "without the scheduler: the wall gap"
        );
    }

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
