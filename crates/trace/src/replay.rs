//! The replay engine: feeds requests to a device in virtual time.
//!
//! - Closed loop ([`replay_closed`]): each stream keeps up to `queue_depth` requests in
//!   flight; when one completes, the stream's next request is issued after its think time.
//!   [`replay_closed_each`] takes a depth per stream and reports each request's issue and
//!   completion times.
//! - Open loop ([`replay_open`]): each request is issued at its timestamp, whatever the
//!   device's state; queueing shows up as latency.
//!
//! Submissions reach the device in non-decreasing time order (ties broken by a sequence
//! number), so a run is a pure function of the device and the requests.

use crate::{Request, TraceError};
use flash::Device;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    pub requests: u64,
    /// Virtual time at which the last request completed.
    pub end_ns: u64,
}

/// A closed-loop event: (time, sequence, stream, [`SLOT_FREES`] = a slot frees, else the
/// waiting request of that index issues). 24 bytes, ordered by time then sequence (the
/// sequence is unique): the heap moves and compares one per request.
type Event = (u64, u64, u32, u32);

/// An [`Event`]'s last field when a slot of its stream frees.
const SLOT_FREES: u32 = u32::MAX;

/// A waiting request's index as an [`Event`] carries it.
fn slot_index(i: usize) -> Result<u32, TraceError> {
    u32::try_from(i)
        .ok()
        .filter(|&i| i != SLOT_FREES)
        .ok_or_else(|| {
            TraceError::Config(format!(
                "{i} requests waiting at once: more than a replay keeps ({SLOT_FREES})"
            ))
        })
}

/// The deepest queue a stream may keep: an NVMe I/O queue holds at most 65,536 commands
/// (NVM Express base specification, Maximum Queue Entries Supported); SATA NCQ holds 32.
pub const MAX_QUEUE_DEPTH: u32 = 65_536;

/// How often (in requests) the progress callback is called.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Virtual time ends here (2^62 ns, about 146 years): later times are a broken trace,
/// and staying far below 2^64 keeps every sum of a time and a duration exact.
pub const MAX_TIME_NS: u64 = 1 << 62;

/// `base + delta_ns` for request `index`, or an error naming the request when the sum
/// passes [`MAX_TIME_NS`].
fn checked_time(base: u64, delta_ns: u64, index: u64, what: &str) -> Result<u64, TraceError> {
    match base.checked_add(delta_ns) {
        Some(t) if t <= MAX_TIME_NS => Ok(t),
        _ => Err(TraceError::Config(format!(
            "request {index}: its {what} of {delta_ns} ns puts it at {base} + {delta_ns} ns, past the end of virtual time ({MAX_TIME_NS} ns, about 146 years)"
        ))),
    }
}

fn submit<D: Device>(dev: &mut D, r: &Request, at_ns: u64, index: u64) -> Result<u64, TraceError> {
    dev.submit(&r.cmd, at_ns)
        .map_err(|source| TraceError::Device {
            index,
            stream: r.stream,
            op: r.cmd.op.name(),
            offset_bytes: r.cmd.offset_bytes,
            source,
        })
}

/// A request a closed-loop replay issued: its stream (the position in `streams`), when it
/// was issued and when the device completed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    pub stream: usize,
    pub issue_ns: u64,
    pub done_ns: u64,
}

/// Closed-loop replay of `streams`, starting at virtual time `start_ns`.
pub fn replay_closed<D, I>(
    dev: &mut D,
    streams: Vec<I>,
    queue_depth: u32,
    start_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplaySummary, TraceError>
where
    D: Device,
    I: Iterator<Item = Request>,
{
    let depths = vec![queue_depth; streams.len()];
    replay_closed_each(dev, streams, &depths, start_ns, progress, &mut |_, _| {})
}

/// [`replay_closed`] with a queue depth per stream (`queue_depths[i]` for `streams[i]`),
/// telling `issued_to` about every request with its issue and completion times (`flashlab
/// fio` keeps them for per-job latency percentiles).
pub fn replay_closed_each<D, I>(
    dev: &mut D,
    streams: Vec<I>,
    queue_depths: &[u32],
    start_ns: u64,
    progress: &mut dyn FnMut(u64),
    issued_to: &mut dyn FnMut(&Request, Issued),
) -> Result<ReplaySummary, TraceError>
where
    D: Device,
    I: Iterator<Item = Request>,
{
    assert_eq!(
        queue_depths.len(),
        streams.len(),
        "a queue depth per stream"
    );
    if let Some(&queue_depth) = queue_depths.iter().find(|&&q| q > MAX_QUEUE_DEPTH) {
        return Err(TraceError::Config(format!(
            "queue depth {queue_depth} is above {MAX_QUEUE_DEPTH}, the most commands an NVMe queue holds"
        )));
    }
    // A replay run again and again (`--repeat`) may never reach PROGRESS_EVERY requests
    // in one call: its thread's cancellation is checked at every call's start too.
    if crate::cancel::requested() {
        return Err(TraceError::Cancelled);
    }
    if u32::try_from(streams.len()).is_err() {
        return Err(TraceError::Config(format!(
            "{} streams: more than a replay keeps ({})",
            streams.len(),
            u32::MAX
        )));
    }
    let qd: Vec<usize> = queue_depths.iter().map(|&q| q.max(1) as usize).collect();
    let mut streams = streams;
    // Per stream, the next requests in order (pulled early so the device can prefetch);
    // each grows to at most the queue depth or the stream's length, whichever is less.
    let mut ahead: Vec<VecDeque<Request>> = vec![VecDeque::new(); streams.len()];
    // Each request pulled is prefetched (`Device::prefetch`) and, at queue depths above
    // 2, prefetched again halfway to its turn (`Device::prefetch_mapped`, which reaches
    // what the first brought into cache); at 1 or 2 the second stage would come right
    // after the first and wait for it.
    let refill = |s: usize, ahead: &mut Vec<VecDeque<Request>>, streams: &mut Vec<I>, dev: &D| {
        while ahead[s].len() < qd[s] {
            match streams[s].next() {
                Some(r) => {
                    dev.prefetch(&r.cmd);
                    ahead[s].push_back(r);
                    if qd[s] > 2 {
                        if let Some(half) = ahead[s].get(ahead[s].len() / 2) {
                            dev.prefetch_mapped(&half.cmd);
                        }
                    }
                }
                None => break,
            }
        }
    };
    // Events: (time, sequence, stream, what): a slot of `stream` frees (`None`), or a
    // request issues after its think time (`Some(slot)` in `waiting`).
    let mut heap: BinaryHeap<Reverse<Event>> = BinaryHeap::new();
    let mut waiting: Vec<Request> = Vec::new();
    let mut reusable: Vec<usize> = Vec::new();
    let mut seq = 0u64;
    for s in 0..streams.len() {
        refill(s, &mut ahead, &mut streams, dev);
        // A slot beyond the stream's requests would never issue anything.
        for _ in 0..ahead[s].len() {
            heap.push(Reverse((start_ns, seq, s as u32, SLOT_FREES)));
            seq += 1;
        }
    }
    // The stream id each iterator carries (its first request's), to find a dependency's.
    let mut slot_of: HashMap<u32, usize> = HashMap::new();
    for (s, a) in ahead.iter().enumerate() {
        if let Some(r) = a.front() {
            slot_of.entry(r.stream).or_insert(s);
        }
    }
    // Dependencies between streams (`Request::after`): per stream, requests issued so far
    // and the completion times of the latest ones. A request is issued only after the
    // one before it that is `qd` back has completed, so completions older than the
    // window were over before anything now waiting became ready.
    let window: Vec<usize> = qd.iter().map(|q| q + 1).collect();
    let mut issued: Vec<u64> = vec![0; streams.len()];
    let mut recent_done: Vec<VecDeque<u64>> = vec![VecDeque::new(); streams.len()];
    // Requests waiting for a request not yet issued: (stream, nth) -> (their stream, slot
    // in `waiting`).
    let mut parked: HashMap<(usize, u64), Vec<(usize, usize)>> = HashMap::new();
    let mut summary = ReplaySummary {
        requests: 0,
        end_ns: start_ns,
    };
    let park =
        |r: Request, waiting: &mut Vec<Request>, reusable: &mut Vec<usize>| match reusable.pop() {
            Some(i) => {
                waiting[i] = r;
                i
            }
            None => {
                waiting.push(r);
                waiting.len() - 1
            }
        };
    while let Some(Reverse((t, _, s, what))) = heap.pop() {
        let s = s as usize;
        let what = (what != SLOT_FREES).then_some(what as usize);
        let r = match what {
            // A slot freed: the stream's next request, in order, after its think time
            // (counted from its dependency's completion when that is later).
            None => {
                let Some(r) = ahead[s].pop_front() else {
                    continue;
                };
                refill(s, &mut ahead, &mut streams, dev);
                let mut from = t;
                if let Some(a) = r.after {
                    if let Some(&d) = slot_of.get(&a.stream).filter(|&&d| d != s) {
                        if a.nth >= issued[d] {
                            // Not issued yet: it is scheduled when its dependency is.
                            let i = park(r, &mut waiting, &mut reusable);
                            parked.entry((d, a.nth)).or_default().push((s, i));
                            continue;
                        }
                        let back = issued[d] - a.nth; // 1 = the latest issued
                        if back as usize <= recent_done[d].len() {
                            from = from.max(recent_done[d][recent_done[d].len() - back as usize]);
                        }
                    }
                }
                if r.think_ns > 0 || from > t {
                    let at = checked_time(from, r.think_ns, summary.requests, "think time")?;
                    let i = park(r, &mut waiting, &mut reusable);
                    heap.push(Reverse((at, seq, s as u32, slot_index(i)?)));
                    seq += 1;
                    continue;
                }
                r
            }
            Some(i) => {
                reusable.push(i);
                waiting[i].clone()
            }
        };
        let done = submit(dev, &r, t, summary.requests)?;
        issued_to(
            &r,
            Issued {
                stream: s,
                issue_ns: t,
                done_ns: done,
            },
        );
        summary.requests += 1;
        summary.end_ns = summary.end_ns.max(done);
        if summary.requests.is_multiple_of(PROGRESS_EVERY) {
            progress(summary.requests);
            if crate::cancel::requested() {
                return Err(TraceError::Cancelled);
            }
        }
        heap.push(Reverse((done, seq, s as u32, SLOT_FREES)));
        seq += 1;
        // Requests that waited for this one: after their think times from its completion.
        // (Most replays have no dependencies: no hashing then.)
        let woken = match parked.is_empty() {
            true => None,
            false => parked.remove(&(s, issued[s])),
        };
        if let Some(woken) = woken {
            for (ws, i) in woken {
                let at = checked_time(done, waiting[i].think_ns, summary.requests, "think time")?;
                heap.push(Reverse((at, seq, ws as u32, slot_index(i)?)));
                seq += 1;
            }
        }
        issued[s] += 1;
        if recent_done[s].len() == window[s] {
            recent_done[s].pop_front();
        }
        recent_done[s].push_back(done);
    }
    // A request still waiting waits for one its stream never issued: refuse, rather than
    // end with requests silently left out.
    if let Some((&(d, nth), waiting_requests)) = parked.iter().min_by_key(|(k, _)| **k) {
        let stream_id = slot_of
            .iter()
            .find(|&(_, &slot)| slot == d)
            .map_or(0, |(&id, _)| id);
        return Err(TraceError::Config(format!(
            "{} request(s) depend on request {nth} of stream {stream_id}, which has only {} requests: the trace's dependencies do not match its requests",
            waiting_requests.len(),
            issued[d]
        )));
    }
    progress(summary.requests);
    Ok(summary)
}

/// Open-loop replay: every request is issued at `start_ns + at_ns`. Requests must be in
/// non-decreasing `at_ns` order (parsers produce them so); they may come from a file as
/// it is read ([`crate::stream`]), so the first error reading them ends the replay.
pub fn replay_open<D, I>(
    dev: &mut D,
    requests: I,
    start_ns: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<ReplaySummary, TraceError>
where
    D: Device,
    I: IntoIterator<Item = Result<Request, TraceError>>,
{
    if crate::cancel::requested() {
        return Err(TraceError::Cancelled);
    }
    let mut summary = ReplaySummary {
        requests: 0,
        end_ns: start_ns,
    };
    for r in requests {
        let r = r?;
        let at = checked_time(start_ns, r.at_ns, summary.requests, "timestamp")?;
        let done = submit(dev, &r, at, summary.requests)?;
        summary.requests += 1;
        summary.end_ns = summary.end_ns.max(done);
        if summary.requests.is_multiple_of(PROGRESS_EVERY) {
            progress(summary.requests);
            if crate::cancel::requested() {
                return Err(TraceError::Cancelled);
            }
        }
    }
    progress(summary.requests);
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::{Command, DeviceStats, FlashError};

    /// A device that takes a fixed 10 µs per command, one at a time.
    struct Serial {
        busy_until: u64,
        log: Vec<(u64, u64)>,
    }
    impl Serial {
        fn new() -> Self {
            Serial {
                busy_until: 0,
                log: vec![],
            }
        }
    }

    impl Device for Serial {
        fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
            cmd.check_range(1 << 30)?;
            let start = now_ns.max(self.busy_until);
            self.busy_until = start + 10_000;
            self.log.push((now_ns, self.busy_until));
            Ok(self.busy_until)
        }
        fn stats(&self) -> DeviceStats {
            DeviceStats::default()
        }
        fn reset_stats(&mut self) {}
        fn logical_bytes(&self) -> u64 {
            1 << 30
        }
        fn settle(&mut self) -> u64 {
            self.busy_until
        }
    }

    fn req(stream: u32, think_ns: u64, at_ns: u64) -> Request {
        Request {
            stream,
            cmd: Command::read(0, 4096),
            think_ns,
            at_ns,
            after: None,
        }
    }

    #[test]
    fn closed_loop_waits_for_completion_plus_think_time() {
        let mut d = Serial::new();
        let s = vec![vec![req(0, 0, 0), req(0, 5_000, 0), req(0, 0, 0)].into_iter()];
        let sum = replay_closed(&mut d, s, 1, 0, &mut |_| {}).unwrap();
        assert_eq!(d.log, vec![(0, 10_000), (15_000, 25_000), (25_000, 35_000)]);
        assert_eq!(
            sum,
            ReplaySummary {
                requests: 3,
                end_ns: 35_000
            }
        );
    }

    #[test]
    fn a_request_waits_for_its_dependency_then_thinks() {
        // Stream 0 writes (done at 10), then its next request waits for stream 1's first
        // (issued after 30 of thinking, done at 40) and thinks 5 more: issued at 45.
        let mut d = Serial::new();
        let mut dependent = req(0, 5_000, 0);
        dependent.after = Some(crate::After { stream: 1, nth: 0 });
        let s = vec![
            vec![req(0, 0, 0), dependent].into_iter(),
            vec![req(1, 30_000, 0)].into_iter(),
        ];
        replay_closed(&mut d, s, 1, 0, &mut |_| {}).unwrap();
        assert_eq!(d.log, vec![(0, 10_000), (30_000, 40_000), (45_000, 55_000)]);
        // A dependency already done: think time from the later of the two completions.
        let mut d = Serial::new();
        let mut dependent = req(0, 5_000, 0);
        dependent.after = Some(crate::After { stream: 1, nth: 0 });
        let s = vec![
            vec![req(0, 20_000, 0), dependent].into_iter(),
            vec![req(1, 0, 0)].into_iter(),
        ];
        replay_closed(&mut d, s, 1, 0, &mut |_| {}).unwrap();
        // Stream 1 runs 0-10; stream 0's first issues at 20 (done 30), then its second at 35.
        assert_eq!(d.log, vec![(0, 10_000), (20_000, 30_000), (35_000, 45_000)]);
    }

    #[test]
    fn a_dependency_on_a_request_that_never_comes_is_an_error() {
        let mut d = Serial::new();
        let mut dependent = req(0, 0, 0);
        dependent.after = Some(crate::After { stream: 1, nth: 5 });
        let s = vec![
            vec![req(0, 0, 0), dependent].into_iter(),
            vec![req(1, 0, 0)].into_iter(),
        ];
        let e = replay_closed(&mut d, s, 1, 0, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("request 5 of stream 1") && e.contains("only 1"),
            "{e}"
        );
    }

    #[test]
    fn queue_depth_keeps_requests_in_flight() {
        let mut d = Serial::new();
        let s = vec![(0..4).map(|_| req(0, 0, 0)).collect::<Vec<_>>().into_iter()];
        replay_closed(&mut d, s, 2, 0, &mut |_| {}).unwrap();
        let issue: Vec<u64> = d.log.iter().map(|l| l.0).collect();
        assert_eq!(issue, vec![0, 0, 10_000, 20_000]);
    }

    #[test]
    fn each_stream_keeps_its_own_depth_and_every_request_is_reported() {
        // Stream 0 at depth 2, stream 1 at depth 1, on a device serving one at a time.
        let mut d = Serial::new();
        let s = vec![
            vec![req(0, 0, 0), req(0, 0, 0), req(0, 0, 0)].into_iter(),
            vec![req(1, 0, 0), req(1, 0, 0)].into_iter(),
        ];
        let mut seen = Vec::new();
        replay_closed_each(&mut d, s, &[2, 1], 0, &mut |_| {}, &mut |r, i| {
            seen.push((r.stream, i.stream, i.issue_ns, i.done_ns))
        })
        .unwrap();
        assert_eq!(
            seen,
            vec![
                (0, 0, 0, 10_000),
                (0, 0, 0, 20_000),
                (1, 1, 0, 30_000),
                (0, 0, 10_000, 40_000),
                (1, 1, 30_000, 50_000),
            ]
        );
    }

    #[test]
    fn deep_queues_cost_what_the_stream_holds_and_absurd_ones_are_refused() {
        // A queue deeper than the stream: the same schedule as a queue of its length (the
        // slots were allocated up front before: 2^32 of them aborted the process).
        let run = |qd: u32| {
            let mut d = Serial::new();
            let s = vec![(0..3).map(|_| req(0, 0, 0)).collect::<Vec<_>>().into_iter()];
            replay_closed(&mut d, s, qd, 0, &mut |_| {}).map(|_| d.log)
        };
        assert_eq!(run(3).unwrap(), run(MAX_QUEUE_DEPTH).unwrap());
        let e = run(u32::MAX).unwrap_err().to_string();
        assert!(e.contains("4294967295") && e.contains("65536"), "{e}");
    }

    #[test]
    fn times_past_the_end_of_virtual_time_are_errors_not_wraps() {
        let mut d = Serial::new();
        let rs = vec![req(0, 0, 0), req(0, 0, u64::MAX - 5)];
        let e = replay_open(&mut d, rs.into_iter().map(Ok), 0, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("request 1") && e.contains("timestamp"), "{e}");
        let s = vec![vec![req(0, 0, 0), req(0, u64::MAX, 0)].into_iter()];
        let e = replay_closed(&mut d, s, 1, 0, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("think time"), "{e}");
    }

    #[test]
    fn open_loop_issues_at_timestamps() {
        let mut d = Serial::new();
        let rs = vec![req(0, 0, 0), req(1, 0, 1_000), req(0, 0, 50_000)];
        let sum = replay_open(&mut d, rs.into_iter().map(Ok), 0, &mut |_| {}).unwrap();
        assert_eq!(d.log, vec![(0, 10_000), (1_000, 20_000), (50_000, 60_000)]);
        assert_eq!(sum.end_ns, 60_000);
    }

    #[test]
    fn device_errors_name_the_request() {
        let mut d = Serial::new();
        let mut bad = req(3, 0, 0);
        bad.cmd = Command::write(2 << 30, 4096);
        let err = replay_open(
            &mut d,
            [req(0, 0, 0), bad].into_iter().map(Ok),
            0,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("request 1") && err.contains("stream 3") && err.contains("outside"),
            "{err}"
        );
    }
}
