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

/// As [`derive_think_times`], but with `waits` (the scheduler's record of when each task
/// waited for a CPU) taken out of each think time: on a busy machine a task woken by its
/// request's completion, or preempted, waits for a CPU, and that wait is not thinking.
/// Sleeps (waiting for another task, e.g. fsync for the journal) stay in.
pub fn derive_think_times_on_cpu(
    requests: &mut [Request],
    completions_ns: &[Option<u64>],
    waits: Option<&CpuWaits>,
) {
    // Per stream, when its previous request completed.
    let mut last_done: HashMap<u32, u64> = HashMap::new();
    for (r, done) in requests.iter_mut().zip(completions_ns) {
        let end = done.unwrap_or(r.at_ns).max(r.at_ns);
        r.think_ns = match last_done.insert(r.stream, end) {
            Some(t) if r.at_ns > t => {
                let waited = waits.map_or(0, |w| w.waited(r.stream, t, r.at_ns));
                (r.at_ns - t).saturating_sub(waited)
            }
            _ => 0,
        };
    }
}

/// When each task waited for a CPU (runnable but not running), from the scheduler's
/// `sched_wakeup` and `sched_switch` events: from a wake-up, or a switch-out while still
/// runnable (preempted, state R), to its next switch-in. Per task id, sorted
/// `[start, end)` intervals in the trace's time.
#[derive(Debug, Clone, Default)]
pub struct CpuWaits {
    intervals: HashMap<u32, Vec<(u64, u64)>>,
    /// Runnable since, for tasks not on a CPU.
    runnable: HashMap<u32, u64>,
    /// Events recorded.
    events: u64,
}

impl CpuWaits {
    /// Task `task` was woken at `at_ns` (it is runnable from then).
    pub fn wakeup(&mut self, at_ns: u64, task: u32) {
        self.events += 1;
        if task != 0 {
            self.runnable.entry(task).or_insert(at_ns);
        }
    }

    /// A context switch at `at_ns` from `prev` (still runnable if `prev_runnable`: it was
    /// preempted) to `next` (0: idle).
    pub fn switch(&mut self, at_ns: u64, prev: u32, prev_runnable: bool, next: u32) {
        self.events += 1;
        if prev != 0 {
            if prev_runnable {
                self.runnable.insert(prev, at_ns);
            } else {
                self.runnable.remove(&prev);
            }
        }
        if next != 0 {
            if let Some(since) = self.runnable.remove(&next) {
                if at_ns > since {
                    self.intervals.entry(next).or_default().push((since, at_ns));
                }
            }
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
        for t in self.runnable.values_mut() {
            *t = t.saturating_sub(t0);
        }
    }

    /// How long task `task` waited for a CPU within `[from, to)`.
    pub fn waited(&self, task: u32, from: u64, to: u64) -> u64 {
        let Some(v) = self.intervals.get(&task) else {
            return 0;
        };
        let i = v.partition_point(|&(_, end)| end <= from);
        v[i..]
            .iter()
            .take_while(|&&(a, _)| a < to)
            .map(|&(a, b)| b.min(to) - a.max(from))
            .sum()
    }

    /// Whether any scheduler event was recorded.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_leaves_out_waits_for_a_cpu_but_keeps_sleeps() {
        // Task 7's request completes at 5 and wakes it, but a hog (9) holds the CPU until
        // 30: 25 of waiting. It runs 30-40, sleeps 40-50 (waiting for another task),
        // is woken at 50 and runs at once, is preempted at 55 (runnable) until 58, and
        // issues at 60. Wall gap 55, of which 25 + 3 waiting for a CPU: think 27.
        let mut w = CpuWaits::default();
        w.wakeup(5, 7);
        w.switch(30, 9, true, 7);
        w.switch(40, 7, false, 9);
        w.wakeup(50, 7);
        w.switch(50, 9, true, 7);
        w.switch(55, 7, true, 9);
        w.switch(58, 9, true, 7);
        assert_eq!(w.waited(7, 5, 60), 28);
        assert_eq!(w.waited(3, 0, 100), 0, "task 3 never waited");
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
        derive_think_times_on_cpu(&mut requests, &done, Some(&w));
        assert_eq!(requests[1].think_ns, 27);
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
