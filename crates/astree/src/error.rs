//! Errors of the trees and their stores.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TreeError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("corrupt node {id} at byte {offset}: {msg}")]
    Corrupt { id: u64, offset: u64, msg: String },
    #[error("entry too large: a key of {key_bytes} and a value of {value_bytes} bytes do not fit a {node_bytes} byte node with its neighbours")]
    TooLarge {
        key_bytes: usize,
        value_bytes: usize,
        node_bytes: usize,
    },
    /// The file system the store's files live on is full (simfs, or a real one).
    #[error("{path}: no space left on the device")]
    DiskFull { path: String },
    #[error("invalid settings: {0}")]
    Config(String),
    #[error("node {0} does not exist")]
    MissingNode(u64),
    #[error("interrupted")]
    Interrupted,
    #[error("an earlier sync failed ({0}); what reached the medium is unknown, so the store takes no more writes: reopen it to recover the last durable commit")]
    SyncFailed(String),
    #[error("corrupt log at segment {segment} slot {slot}: {msg}")]
    CorruptLog {
        segment: u64,
        slot: u64,
        msg: String,
    },
}
