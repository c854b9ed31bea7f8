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
        });
        Ok(0)
    }
    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }
}

/// Submits each request to a device model when the previous one has completed (queue
/// depth 1), keeping the virtual clock; records the requests with their issue times.
pub struct Timed<D: Device> {
    pub dev: D,
    pub now_ns: u64,
    /// Issue time of the latest request.
    pub last_issue_ns: u64,
    pub stream: u32,
    /// Requests issued, with `at_ns` their issue time (kept only if `record` is set).
    pub requests: Vec<Request>,
    pub record: bool,
    /// Background I/O: requests are all issued at `now_ns`, which does not advance (the
    /// host goes on; later requests queue behind them in the device).
    pub hold_clock: bool,
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
        }
    }

    /// Host time passes without I/O (think time).
    pub fn think(&mut self, ns: u64) {
        self.now_ns += ns;
    }
}

impl<D: Device> BlockDev for Timed<D> {
    fn io(&mut self, cmd: Command) -> Result<u64, SimfsError> {
        let done = self.dev.submit(&cmd, self.now_ns)?;
        self.last_issue_ns = self.now_ns;
        if self.record {
            self.requests.push(Request {
                stream: self.stream,
                cmd,
                think_ns: 0,
                at_ns: self.now_ns,
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
}
