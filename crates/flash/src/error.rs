//! Errors of the device models: bad configuration and bad commands.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum FlashError {
    #[error("invalid geometry: {0}")]
    Geometry(String),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{op} at offset {offset_bytes} length {len_bytes} lies outside the device's {capacity_bytes} bytes")]
    OutOfRange {
        op: &'static str,
        offset_bytes: u64,
        len_bytes: u64,
        capacity_bytes: u64,
    },
    #[error("commands must be submitted in time order: got {now_ns} ns after {last_ns} ns")]
    TimeWentBackwards { now_ns: u64, last_ns: u64 },
    #[error("fTrim of inode {inode} failed: {msg}")]
    FTrim { inode: u32, msg: String },
    #[error("a write carrying data must start and end on a 4 KiB boundary (offset {offset_bytes}, length {len_bytes})")]
    UnalignedData { offset_bytes: u64, len_bytes: u64 },
    #[error("preset {name:?}: {msg}")]
    Preset { name: String, msg: String },
}
