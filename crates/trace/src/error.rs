//! Errors of trace parsing and replay; each names the input and where in it.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("{origin}:{line}: {msg}")]
    Parse {
        origin: String,
        line: usize,
        msg: String,
    },
    #[error("{origin}: {msg}")]
    Format { origin: String, msg: String },
    /// The thread's cancellation token was cancelled ([`crate::cancel::requested`]).
    #[error("interrupted")]
    Cancelled,
    /// A replay setting that cannot work.
    #[error("{0}")]
    Config(String),
    #[error("cannot read {origin}: {source}")]
    Io {
        origin: String,
        source: std::io::Error,
    },
    #[error("request {index} (stream {stream}, {op} at byte {offset_bytes}): {source}")]
    Device {
        index: u64,
        stream: u32,
        op: &'static str,
        offset_bytes: u64,
        source: flash::FlashError,
    },
}
