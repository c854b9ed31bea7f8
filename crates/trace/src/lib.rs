//! Block I/O traces: request types, file formats and the replay engine.
//!
//! A [`Trace`] is a list of [`Request`]s, each belonging to a stream (an issuing process,
//! a disk, a generator). Parsers in [`formats`] read blkparse text, kernel tracefs text,
//! our own native format and public archives (MSR Cambridge, Alibaba, Tencent, SPC/UMass,
//! FIU, DiskSim/MQSim/SSDSim, fio iologs; gzip or zstd); [`replay`] feeds requests to any
//! [`flash::Device`], closed loop per stream with a queue depth or open loop by timestamp.
//! [`stream`] reads a trace file a request at a time, so replays of long traces stay in
//! bounded memory. [`capture`] records a real file system's block I/O on a loop device (reading the kernel's
//! binary [`ring_buffer`]); [`Cancel`] is how
//! the binary tells long-running library code that the user interrupted.

pub mod cancel;
pub mod capture;
mod capture_events;
mod command_group;
pub mod dirty_limit;
pub mod error;
pub mod formats;
mod fs_kind;
mod host;
mod input;
pub mod leftovers;
pub mod loopdev;
pub mod mkfs_opts;
pub mod procs;
pub mod reclaim;
pub mod replay;
pub mod request;
pub mod ring_buffer;
pub mod stream;
pub mod transform;

pub use cancel::Cancel;
pub use error::TraceError;
pub use formats::{parse, Format};
pub use replay::{replay_closed, replay_closed_each, replay_open, Issued, ReplaySummary};
pub use request::{After, CpuWaits, Request, Trace};
pub use stream::{replay_file, TraceFile, TraceInfo};
