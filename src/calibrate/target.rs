//! What calibrate's probes run on: one narrow trait with two implementations, a real file or
//! block device in wall-clock time ([`super::os_target`]) and a simulated drive in virtual
//! time ([`super::sim_target`]). The probe sequence is written once, against this trait.

use anyhow::Result;

/// One operation of a probe, on a byte range of the probed region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOp {
    Read {
        offset_bytes: u64,
        len_bytes: u64,
    },
    Write {
        offset_bytes: u64,
        len_bytes: u64,
    },
    /// Declare the range unused: a device discard, or on a file the file system's hole
    /// punching (which may or may not reach the device).
    Discard {
        offset_bytes: u64,
        len_bytes: u64,
    },
    /// Wait until every earlier write is durable.
    Flush,
}

impl ProbeOp {
    pub fn len_bytes(&self) -> u64 {
        match *self {
            ProbeOp::Read { len_bytes, .. }
            | ProbeOp::Write { len_bytes, .. }
            | ProbeOp::Discard { len_bytes, .. } => len_bytes,
            ProbeOp::Flush => 0,
        }
    }
}

/// Operations issued in order, up to `queue_depth` in flight; the first no earlier than
/// `start_delay_ns` after the batch starts.
#[derive(Debug, Clone)]
pub struct Stream {
    pub ops: Vec<ProbeOp>,
    pub queue_depth: u32,
    pub start_delay_ns: u64,
}

impl Stream {
    pub fn new(ops: Vec<ProbeOp>, queue_depth: u32) -> Stream {
        Stream {
            ops,
            queue_depth,
            start_delay_ns: 0,
        }
    }
}

/// When an operation was issued and when it completed, from the start of its batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpTime {
    pub submit_ns: u64,
    pub complete_ns: u64,
}

impl OpTime {
    pub fn latency_ns(&self) -> u64 {
        self.complete_ns - self.submit_ns
    }
}

pub trait ProbeTarget {
    /// What is probed, for the preset's comments: a model string, or the file system and
    /// drive a file lives on.
    fn describe(&self) -> String;
    /// The drive's user capacity (the preset's `logical_bytes`).
    fn capacity_bytes(&self) -> u64;
    /// The probes use bytes `0..region_bytes()` of the target.
    fn region_bytes(&self) -> u64;
    /// What a discard is on this target, for the report.
    fn discard_kind(&self) -> String;
    /// Whether a discard reaches the drive as a TRIM (a device or a simulated drive), so a
    /// read of discarded data is answered by the controller without the flash: its time is
    /// the command and the link's. Not on a file, whose holes the file system answers.
    fn discards_are_trims(&self) -> bool {
        false
    }
    /// Runs the streams concurrently, each keeping up to its queue depth in flight, and
    /// returns every operation's times, per stream in order. Returns once all completed.
    fn run(&mut self, streams: &[Stream]) -> Result<Vec<Vec<OpTime>>>;
    /// Leaves the target idle (no commands) for `ns`.
    fn idle(&mut self, ns: u64) -> Result<()>;
}
