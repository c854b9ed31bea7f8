//! The block devices simfs runs on: a [`Recorder`] that only collects the requests (to
//! replay them later on any device model), and a [`Timed`] device that submits each request
//! to a device model at a virtual clock, one at a time, and records it too.

use crate::SimfsError;
use flash::{Command, Device};
use trace::{Request, Trace};

/// Where simfs sends its block requests.
pub trait BlockDev {
    /// Issues `cmd`; returns its completion time (0 on devices without time).
    fn io(&mut self, cmd: Command) -> Result<u64, SimfsError>;
    /// The device's user-visible size.
    fn capacity_bytes(&self) -> u64;
    /// The host's clock (0 on devices without time).
    fn now_ns(&self) -> u64 {
        0
    }
    /// Issues `cmd` for a background worker of the file system at `at_ns` (or after the
    /// last request issued, if that is later), without moving the host's clock; returns
    /// its completion time.
    fn io_background(&mut self, cmd: Command, at_ns: u64) -> Result<u64, SimfsError> {
        let _ = at_ns;
        self.io(cmd)
    }
}

/// Collects every request in order, as a closed-loop trace of one stream.
#[derive(Debug, Clone)]
pub struct Recorder {
    capacity_bytes: u64,
    pub stream: u32,
    pub requests: Vec<Request>,
}

impl Recorder {
    pub fn new(capacity_bytes: u64) -> Self {
        Recorder {
            capacity_bytes,
            stream: 0,
            requests: Vec::new(),
        }
    }

    pub fn trace(&self) -> Trace {
        Trace {
            requests: self.requests.clone(),
            timestamped: false,
        }
    }
}

impl BlockDev for Recorder {
    fn io(&mut self, cmd: Command) -> Result<u64, SimfsError> {
        cmd.check_range(self.capacity_bytes)?;
        self.requests.push(Request {
            stream: self.stream,
            cmd,
            think_ns: 0,
            at_ns: 0,
            after: None,
        });
        Ok(0)
    }
    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
}

/// Submits requests to a device model in virtual time, keeping the clock; records the
/// requests with their issue times. A synchronous request waits for its completion (the
/// clock moves to it); background requests ([`Timed::hold_clock`]) stay in flight together,
/// at most [`Timed::queue_depth`] of them: the block layer dispatches in order, and a
/// request finding the queue full waits for a slot.
pub struct Timed<D: Device> {
    pub dev: D,
    /// The host's clock: moves only forward ([`Timed::think`], [`Timed::advance_to`],
    /// synchronous requests), or is positioned at a user's time by [`Timed::issue_at`].
    now_ns: u64,
    /// Issue time of the latest request.
    pub last_issue_ns: u64,
    pub stream: u32,
    /// Requests issued, with `at_ns` their issue time (kept only if `record` is set).
    pub requests: Vec<Request>,
    pub record: bool,
    /// Background I/O: requests are all issued at `now_ns`, which does not advance (the
    /// host goes on; later requests queue behind them in the device).
    pub hold_clock: bool,
    /// The most requests in flight (the drive's queue: 32 for SATA NCQ, `ATA_MAX_QUEUE`
    /// in include/linux/libata.h); 0 = no limit.
    pub queue_depth: usize,
    /// Completion times of the requests in flight, earliest first.
    in_flight: std::collections::BinaryHeap<std::cmp::Reverse<u64>>,
    /// The issue times of the last `queue_depth + 1` requests, oldest first
    /// ([`Timed::submitted_ns`]).
    recent_issue_ns: std::collections::VecDeque<u64>,
    /// Where requests went, `(offset_bytes, len_bytes)`, since [`Timed::take_positions`]
    /// last took them (kept only if `track_positions` is set: an I/O scheduler that
    /// watches how far each user seeks reads them).
    pub track_positions: bool,
    positions: Vec<(u64, u64)>,
    /// The run over time (`--timeseries` on the engine commands): every request is
    /// recorded in it while set.
    pub timeline: Option<flash::timeline::Recording>,
}

impl<D: Device> Timed<D> {
    pub fn new(dev: D) -> Self {
        Timed {
            dev,
            now_ns: 0,
            last_issue_ns: 0,
            stream: 0,
            requests: Vec::new(),
            record: false,
            hold_clock: false,
            queue_depth: 0,
            in_flight: std::collections::BinaryHeap::new(),
            recent_issue_ns: std::collections::VecDeque::new(),
            track_positions: false,
            positions: Vec::new(),
            timeline: None,
        }
    }

    /// The `(offset_bytes, len_bytes)` of the requests since the last call (see
    /// `track_positions`).
    pub fn take_positions(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.positions)
    }

    /// When a request submitted now would be dispatched: in order after the last one, and
    /// once a queue slot is free.
    fn dispatch_time(&mut self) -> u64 {
        let mut at = self.now_ns.max(self.last_issue_ns);
        if self.queue_depth == 0 {
            return at;
        }
        loop {
            while let Some(&std::cmp::Reverse(done)) = self.in_flight.peek() {
                if done > at {
                    break;
                }
                self.in_flight.pop();
            }
            if self.in_flight.len() < self.queue_depth {
                return at;
            }
            let std::cmp::Reverse(first) = self.in_flight.pop().expect("the queue is full");
            at = at.max(first);
        }
    }

    /// The host's clock.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Host time passes without I/O (think time).
    pub fn think(&mut self, ns: u64) {
        self.now_ns += ns;
    }

    /// The host waits until `t` (nothing happens if that is not later than now): the clock
    /// never goes backwards this way.
    pub fn advance_to(&mut self, t: u64) {
        self.now_ns = self.now_ns.max(t);
    }

    /// Positions the clock at a user's time, for users sharing the drive with their own
    /// clocks: `t` may lie before the clock (another user ran ahead) and before the last
    /// submission (background work queued ahead); the drive still sees submissions in time
    /// order, a request issued before the last one's time being dispatched after it.
    pub fn issue_at(&mut self, t: u64) {
        self.now_ns = t;
    }

    /// When a submitter that issued the requests since `since_ns` back to back, as the
    /// kernel's flusher does, got the last of them into the block layer. With an I/O
    /// scheduler the block layer holds twice the drive's queue (block/blk-mq-sched.c,
    /// `q->nr_requests = 2 * min_t(unsigned int, q->tag_set->queue_depth,
    /// BLKDEV_DEFAULT_RQ)`): a submitter blocks only while those are all taken, so its last
    /// request went in when the one a queue's depth before it was dispatched (or at once,
    /// with fewer ahead of it).
    pub fn submitted_ns(&self, since_ns: u64) -> u64 {
        match self.recent_issue_ns.front() {
            Some(&t) if self.queue_depth > 0 && self.recent_issue_ns.len() > self.queue_depth => {
                t.max(since_ns)
            }
            _ => since_ns,
        }
    }
}

impl<D: Device> BlockDev for Timed<D> {
    fn io(&mut self, cmd: Command) -> Result<u64, SimfsError> {
        let at = self.dispatch_time();
        if let Some(t) = &mut self.timeline {
            let dev = &self.dev;
            t.before_submit(at, || dev.stats())?;
        }
        let done = self.dev.submit(&cmd, at)?;
        if let Some(t) = &mut self.timeline {
            t.completed(&flash::timeline::Completion {
                op: cmd.op,
                offset_bytes: cmd.offset_bytes,
                len_bytes: cmd.len_bytes,
                submit_ns: at,
                complete_ns: done,
            })?;
        }
        self.last_issue_ns = at;
        if self.queue_depth > 0 {
            if self.recent_issue_ns.len() > self.queue_depth {
                self.recent_issue_ns.pop_front();
            }
            self.recent_issue_ns.push_back(at);
        }
        if self.track_positions && matches!(cmd.op, flash::Op::Read | flash::Op::Write) {
            self.positions.push((cmd.offset_bytes, cmd.len_bytes));
        }
        if self.queue_depth > 0 {
            self.in_flight.push(std::cmp::Reverse(done));
        }
        if self.record {
            self.requests.push(Request {
                stream: self.stream,
                cmd,
                think_ns: 0,
                at_ns: at,
                after: None,
            });
        }
        if !self.hold_clock {
            self.now_ns = done;
        }
        Ok(done)
    }
    fn capacity_bytes(&self) -> u64 {
        self.dev.logical_bytes()
    }
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn io_background(&mut self, cmd: Command, at_ns: u64) -> Result<u64, SimfsError> {
        let (now, hold) = (self.now_ns, self.hold_clock);
        self.now_ns = at_ns;
        self.hold_clock = true;
        let done = self.io(cmd);
        (self.now_ns, self.hold_clock) = (now, hold);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Preset;

    /// A 1 GiB x25e, timed.
    fn x25e() -> Timed<flash::AnyDevice> {
        let dev = Preset::load("x25e")
            .unwrap()
            .with_capacity(1 << 30)
            .build()
            .unwrap();
        Timed::new(dev)
    }

    /// Issue times of 8 background 4 KiB writes to different dies, then of a read, with
    /// the queue `depth` deep.
    fn issue_times(depth: usize) -> Vec<u64> {
        let mut t = x25e();
        t.record = true;
        t.queue_depth = depth;
        t.hold_clock = true;
        for i in 0..8u64 {
            t.io(Command::write(i * (1 << 20), 4096)).unwrap();
        }
        t.hold_clock = false;
        t.io(Command::read(64 << 20, 4096)).unwrap();
        t.requests.iter().map(|r| r.at_ns).collect()
    }

    #[test]
    fn a_full_queue_holds_requests_until_a_slot_frees() {
        let unlimited = issue_times(0);
        assert!(unlimited.iter().all(|&t| t == 0), "{unlimited:?}");
        assert_eq!(issue_times(32), unlimited, "8 requests fit in 32 slots");
        let two = issue_times(2);
        assert_eq!(&two[..2], &[0, 0], "two in flight at once");
        assert!(
            two.windows(2).all(|w| w[1] >= w[0]) && two[2] > 0,
            "the rest wait for slots, in order: {two:?}"
        );
        assert!(two[8] > unlimited[8], "the read queues behind the writes");
    }

    #[test]
    fn a_submitter_blocks_only_when_twice_the_queue_is_taken() {
        // Eight background writes, the queue 2 deep: the block layer holds 4, so the
        // submitter handed over the eighth when the sixth was dispatched.
        let mut t = x25e();
        (t.record, t.queue_depth, t.hold_clock) = (true, 2, true);
        assert_eq!(t.submitted_ns(7), 7, "nothing ahead: at once");
        for i in 0..8u64 {
            t.io(Command::write(i * (1 << 20), 4096)).unwrap();
        }
        let at: Vec<u64> = t.requests.iter().map(|r| r.at_ns).collect();
        assert!(at[5] > 0 && at[5] < at[7], "{at:?}");
        assert_eq!(t.submitted_ns(0), at[5]);
        assert_eq!(
            t.submitted_ns(u64::MAX),
            u64::MAX,
            "never before it started"
        );
    }
}
