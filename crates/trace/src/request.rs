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
    /// Closed loop: another stream's request this one waited for (None: only its own
    /// stream's previous one). `think_ns` then counts from whichever of the two completed
    /// later. Inferred from captured issue and completion times ([`infer_dependencies`]):
    /// a task that sleeps in fsync until the journal's commit record is written issues
    /// its next request after that write, not after its own last one.
    pub after: Option<After>,
}

/// A request of another stream: the `nth` (from 0) request of stream `stream`, in the
/// trace's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct After {
    pub stream: u32,
    pub nth: u64,
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

    /// The requests issued in `[from_ns, to_ns]` (in `at_ns`), with times counted from the
    /// first of them. Dependencies are renumbered; one on a request left out is dropped
    /// (it completed before the window began).
    pub fn window(&self, from_ns: u64, to_ns: u64) -> Trace {
        let keep = |r: &Request| r.at_ns >= from_ns && r.at_ns <= to_ns;
        // Per stream: the new number of each old request (None: left out).
        let mut renumber: HashMap<u32, Vec<Option<u64>>> = HashMap::new();
        let mut kept: HashMap<u32, u64> = HashMap::new();
        for r in &self.requests {
            let new = keep(r).then(|| {
                let n = kept.entry(r.stream).or_insert(0);
                *n += 1;
                *n - 1
            });
            renumber.entry(r.stream).or_default().push(new);
        }
        let base = self
            .requests
            .iter()
            .find(|r| keep(r))
            .map_or(0, |r| r.at_ns);
        let requests = self
            .requests
            .iter()
            .filter(|r| keep(r))
            .map(|r| {
                let mut r = r.clone();
                r.at_ns -= base;
                r.after = r.after.and_then(|a| {
                    let nth = (*renumber.get(&a.stream)?.get(a.nth as usize)?)?;
                    Some(After { nth, ..a })
                });
                r
            })
            .collect();
        Trace {
            requests,
            timestamped: self.timestamped,
        }
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

/// Fills `think_ns` (and `after`) from issue and completion times, as
/// [`infer_dependencies`] without the scheduler's record.
pub fn derive_think_times(requests: &mut [Request], completions_ns: &[Option<u64>]) {
    infer_dependencies(requests, completions_ns, None);
}

/// Fills `think_ns` and `after` from issue and completion times (`requests` in issue
/// order, `completions_ns[i]` when request `i` completed, None if never seen).
///
/// Per stream, a request's think time is the gap from its stream's previous completion to
/// its issue (clamped at zero; without a completion, the gap between issues). One case
/// differs: a stream whose previous request was a write or a flush, and which issues its
/// next request only after another stream's write or flush completed, waited for that one
/// (a task in fsync sleeps until the journal's commit record, written by the journal's
/// thread, is on the device). The request then depends on it (`after`) and its think time
/// counts from that completion, so a replay waits for the simulated journal write, not for
/// the captured device's. Reads never make a dependency: a read-heavy task would otherwise
/// seem to wait for every background write that happened to complete before its next read.
///
/// With `waits` (the scheduler's record of when each task ran), a think time is the time
/// the task spent on a CPU in that gap: on a busy machine a woken or preempted task waits
/// for a CPU, and that is not thinking; its sleeps are waits for other tasks, whose
/// requests the dependency carries. Tasks the record never saw keep the whole gap.
pub fn infer_dependencies(
    requests: &mut [Request],
    completions_ns: &[Option<u64>],
    waits: Option<&CpuWaits>,
) {
    // Completions in time order: (time, stream, nth in its stream).
    let mut nth_of: HashMap<u32, u64> = HashMap::new();
    let mut completions: Vec<(u64, u32, u64, bool)> = Vec::new();
    for (r, done) in requests.iter().zip(completions_ns) {
        let n = nth_of.entry(r.stream).or_insert(0);
        if let Some(t) = *done {
            let write_or_flush = matches!(r.cmd.op, flash::Op::Write | flash::Op::Flush);
            completions.push((t.max(r.at_ns), r.stream, *n, write_or_flush));
        }
        *n += 1;
    }
    completions.sort_unstable();
    let mut next_completion = 0;
    // The latest write or flush completed so far, and the latest of a stream other than
    // that one's: (time, stream, nth).
    let mut latest: Option<(u64, u32, u64)> = None;
    let mut latest_other: Option<(u64, u32, u64)> = None;
    // Per stream: its previous request's completion (or issue) and whether it wrote.
    let mut previous: HashMap<u32, (u64, bool)> = HashMap::new();
    for (r, done) in requests.iter_mut().zip(completions_ns) {
        while let Some(&(t, stream, nth, write_or_flush)) = completions.get(next_completion) {
            if t > r.at_ns {
                break;
            }
            next_completion += 1;
            if !write_or_flush {
                continue;
            }
            match latest {
                Some((_, s, _)) if s == stream => {}
                _ => latest_other = latest,
            }
            latest = Some((t, stream, nth));
        }
        let end = done.unwrap_or(r.at_ns).max(r.at_ns);
        let writes = matches!(r.cmd.op, flash::Op::Write | flash::Op::Flush);
        r.after = None;
        r.think_ns = match previous.insert(r.stream, (end, writes)) {
            Some((own_done, own_wrote)) => {
                let other = match latest {
                    Some((_, s, _)) if s == r.stream => latest_other,
                    l => l,
                };
                let from = match other {
                    Some((t, stream, nth)) if own_wrote && t > own_done => {
                        r.after = Some(After { stream, nth });
                        t
                    }
                    _ => own_done,
                };
                if r.at_ns > from {
                    waits
                        .and_then(|w| w.on_cpu(r.stream, from, r.at_ns))
                        .unwrap_or(r.at_ns - from)
                } else {
                    0
                }
            }
            None => 0,
        };
    }
}

/// When each task ran and when it waited for a CPU, from the scheduler's `sched_wakeup`
/// and `sched_switch` events. Waiting (runnable but not running): from a wake-up, or a
/// switch-out while still runnable (preempted, state R), to its next switch-in. Running:
/// from a switch-in to the next switch-out (a task first seen switching out ran from the
/// trace's start). Per task id, sorted `[start, end)` intervals in the trace's time.
#[derive(Debug, Clone, Default)]
pub struct CpuWaits {
    intervals: HashMap<u32, Vec<(u64, u64)>>,
    /// Runnable since, for tasks not on a CPU.
    runnable: HashMap<u32, u64>,
    /// Per task, when it was on a CPU.
    running: HashMap<u32, Vec<(u64, u64)>>,
    /// On a CPU since, for tasks running now.
    on_cpu_since: HashMap<u32, u64>,
    /// Events recorded.
    events: u64,
}

impl CpuWaits {
    /// Task `task` was woken at `at_ns` (it is runnable from then).
    pub fn wakeup(&mut self, at_ns: u64, task: u32) {
        self.events += 1;
        if task != 0 {
            self.runnable.entry(task).or_insert(at_ns);
            // A task first seen woken was asleep before: it ran no earlier part of the trace.
            self.running.entry(task).or_default();
        }
    }

    /// A context switch at `at_ns` from `prev` (still runnable if `prev_runnable`: it was
    /// preempted) to `next` (0: idle).
    pub fn switch(&mut self, at_ns: u64, prev: u32, prev_runnable: bool, next: u32) {
        self.events += 1;
        if prev != 0 {
            let ran = self.running.entry(prev).or_default();
            match self.on_cpu_since.remove(&prev) {
                Some(since) => ran.push((since, at_ns)),
                // First seen leaving a CPU: it ran from the trace's start.
                None if ran.is_empty() => ran.push((0, at_ns)),
                None => {}
            }
            if prev_runnable {
                self.runnable.insert(prev, at_ns);
            } else {
                self.runnable.remove(&prev);
            }
        }
        if next != 0 {
            self.running.entry(next).or_default();
            self.on_cpu_since.insert(next, at_ns);
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
        for v in self.running.values_mut() {
            for (a, b) in v.iter_mut() {
                *a = a.saturating_sub(t0);
                *b = b.saturating_sub(t0);
            }
        }
        for t in self
            .runnable
            .values_mut()
            .chain(self.on_cpu_since.values_mut())
        {
            *t = t.saturating_sub(t0);
        }
    }

    /// How long task `task` was on a CPU within `[from, to)`; None if no scheduler event
    /// names it (the record cannot say).
    pub fn on_cpu(&self, task: u32, from: u64, to: u64) -> Option<u64> {
        let v = self.running.get(&task)?;
        let i = v.partition_point(|&(_, end)| end <= from);
        let closed: u64 = v[i..]
            .iter()
            .take_while(|&&(a, _)| a < to)
            .map(|&(a, b)| b.min(to) - a.max(from))
            .sum();
        // Still on a CPU when the record ended.
        let open = self
            .on_cpu_since
            .get(&task)
            .filter(|&&since| since < to)
            .map_or(0, |&since| to - since.max(from));
        Some(closed + open)
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

    fn read(stream: u32, at_ns: u64) -> Request {
        Request {
            stream,
            cmd: Command::read(at_ns * 4096, 4096),
            think_ns: 0,
            at_ns,
            after: None,
        }
    }

    fn write(stream: u32, at_ns: u64) -> Request {
        Request {
            cmd: Command::write(at_ns * 4096, 4096),
            ..read(stream, at_ns)
        }
    }

    #[test]
    fn think_time_is_the_time_the_task_ran() {
        // Task 7's request completes at 5 and wakes it, but a hog (9) holds the CPU until
        // 30: 25 of waiting. It runs 30-40, sleeps 40-50 (waiting for another task),
        // is woken at 50 and runs at once, is preempted at 55 (runnable) until 58, and
        // issues at 60. Wall gap 55, of which 25 + 3 waiting for a CPU and 10 asleep: it
        // ran 10 + 5 + 2.
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
        assert_eq!(w.on_cpu(7, 5, 60), Some(17));
        assert_eq!(w.on_cpu(7, 59, 70), Some(11), "still running at the end");
        assert_eq!(
            w.on_cpu(9, 0, 30),
            Some(30),
            "first seen leaving: ran from 0"
        );
        assert_eq!(w.on_cpu(3, 0, 100), None, "never seen: unknown");
        let mut requests = vec![read(7, 1), read(7, 60)];
        let done = [Some(5), Some(70)];
        infer_dependencies(&mut requests, &done, Some(&w));
        assert_eq!(requests[1].think_ns, 17);
        derive_think_times(&mut requests, &done);
        assert_eq!(
            requests[1].think_ns, 55,
            "without the scheduler: the wall gap"
        );
    }

    #[test]
    fn a_writer_waits_for_another_streams_later_write_but_a_reader_does_not() {
        // Task 1 writes (done at 10) and fsyncs: the journal (task 2) writes at 12, done
        // at 40; task 1 writes again at 45. Task 3 reads (done at 20), a background write
        // of task 4 completes at 50, and task 3 reads again at 55.
        let mut requests = vec![
            write(1, 0),
            write(2, 12),
            read(3, 15),
            write(4, 30),
            write(1, 45),
            read(3, 55),
        ];
        let done = [Some(10), Some(40), Some(20), Some(50), Some(60), Some(70)];
        derive_think_times(&mut requests, &done);
        assert_eq!(requests[4].after, Some(After { stream: 2, nth: 0 }));
        assert_eq!(
            requests[4].think_ns, 5,
            "from the journal's write, not its own"
        );
        assert_eq!(
            requests[5].after, None,
            "a read follows its own stream only"
        );
        assert_eq!(requests[5].think_ns, 35);
        // Its own later completion wins over another stream's earlier one.
        let mut requests = vec![write(2, 0), write(1, 1), write(1, 20)];
        derive_think_times(&mut requests, &[Some(5), Some(10), Some(30)]);
        assert_eq!((requests[2].after, requests[2].think_ns), (None, 10));
    }

    #[test]
    fn a_window_renumbers_dependencies_and_drops_those_left_out() {
        let mut requests = vec![
            write(2, 0),
            write(1, 1),
            write(2, 12),
            write(1, 45),
            write(1, 50),
        ];
        let done = [Some(5), Some(10), Some(40), Some(48), Some(60)];
        derive_think_times(&mut requests, &done);
        assert_eq!(requests[3].after, Some(After { stream: 2, nth: 1 }));
        let t = Trace {
            requests,
            timestamped: true,
        };
        let w = t.window(10, 100);
        assert_eq!(w.requests.len(), 3);
        assert_eq!(w.requests[0].at_ns, 0);
        assert_eq!(w.requests[1].after, Some(After { stream: 2, nth: 0 }));
        let w = t.window(40, 100);
        assert_eq!(
            w.requests[0].after, None,
            "its dependency is before the window"
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
                after: None,
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
