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
    /// A write on a placement handle the drive does not have (NVMe: Invalid Placement
    /// Handle, or a directive on a drive without FDP: Invalid Field in Command).
    #[error("write at offset {offset_bytes} on placement handle {handle}: {msg}")]
    Placement {
        handle: u16,
        offset_bytes: u64,
        msg: String,
    },
    /// A zoned drive refused a command with a status of the NVMe Zoned Namespace command
    /// set ([`crate::zoned::ZoneStatus`]).
    #[error("{op} at offset {offset_bytes} (zone {zone}): {status} (ZNS status 0x{code:X}): {msg}", code = status.code())]
    Zone {
        op: &'static str,
        offset_bytes: u64,
        zone: u32,
        status: crate::zoned::ZoneStatus,
        msg: String,
    },
}
