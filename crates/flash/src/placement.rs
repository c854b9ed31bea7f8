//! Flexible Data Placement (NVMe FDP, TP4146, in NVMe 2.0's base specification since
//! 2.0c): the drive's settings (`[ssd.fdp]`) and its statistics log.
//!
//! FDP's terms and how this model maps them:
//! - a *reclaim unit* (RU) is the flash a drive erases as one; here one block of a die (a
//!   superblock over the die's planes), so `reclaim_unit_bytes` is the block's size;
//! - a *reclaim group* (RG) is a set of RUs; here one per die, each with the die's blocks
//!   as its RUs;
//! - a *reclaim unit handle* (RUH) points at one RU in each RG that the host's writes on
//!   that handle fill; here each handle has a host write frontier on every die, and a
//!   write's placement handle ([`crate::Command::handle`]) picks it. The host picks the
//!   handle only: the drive spreads each handle's writes over the RGs as it spreads all
//!   writes (a superpage per die in turn), so the host cannot pick the RG;
//! - RUH *isolation*: with *initially isolated* handles, GC may mix the valid data it
//!   relocates from RUs of different handles; with *persistently isolated* handles it keeps
//!   each handle's data apart for life. Both are modelled, persistent by default (each
//!   handle then has its own GC frontier on every die; initially isolated handles share the
//!   die's one GC frontier).
//!
//! Handle 0 is the drive's frontier without FDP, so a drive with one handle gives exactly
//! the results of the drive without `[ssd.fdp]`.
//!
//! The statistics log (NVMe log page 22h, FDP Statistics) counts per endurance group the
//! host bytes with metadata written (HBMW), media bytes with metadata written (MBMW) and
//! media bytes erased (MBE); the per-handle host and media bytes beside them are this
//! model's own (the spec's per-handle log, Reclaim Unit Handle Usage, says only who
//! set a handle's RU). Not modelled: FDP events (RU not fully written, media reallocated),
//! the host's Reclaim Unit Handle Update (move a handle to a new RU), namespaces (one
//! namespace using every handle), and metadata (the bytes are data bytes).

use crate::FlashError;
use serde::{Deserialize, Serialize};

/// How GC treats the data of different handles (the RUH type of TP4146).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Persistently isolated: GC keeps each handle's data in the handle's own RUs.
    #[default]
    Persistent,
    /// Initially isolated: host writes are kept apart, GC's copies of all handles share
    /// the die's GC frontier.
    Initial,
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isolation::Persistent => "persistent",
            Isolation::Initial => "initial",
        })
    }
}

/// `[ssd.fdp]`: the drive supports FDP with these settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FdpConfig {
    /// Reclaim unit handles; writes may carry placement handles `0..handles`.
    pub handles: u16,
    /// Persistently (default) or initially isolated handles.
    #[serde(default)]
    pub isolation: Isolation,
    /// The reclaim unit's size; this model's RU is one block of a die, and a value given
    /// must equal that block's bytes (absent: that size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_unit_bytes: Option<u64>,
}

/// The most handles a drive may have (a TP4146 drive reports up to 65535 handles per
/// configuration; each handle keeps two blocks open per die here, so far fewer fit).
pub const MAX_HANDLES: u16 = 1024;

impl FdpConfig {
    /// FDP with `handles` persistently isolated handles.
    pub fn new(handles: u16) -> FdpConfig {
        FdpConfig {
            handles,
            isolation: Isolation::Persistent,
            reclaim_unit_bytes: None,
        }
    }

    pub fn validate(&self, block_bytes: u64) -> Result<(), FlashError> {
        if self.handles == 0 || self.handles > MAX_HANDLES {
            return Err(FlashError::Config(format!(
                "fdp.handles = {} must lie in 1..={MAX_HANDLES}",
                self.handles
            )));
        }
        if let Some(ru) = self.reclaim_unit_bytes.filter(|&ru| ru != block_bytes) {
            return Err(FlashError::Config(format!(
                "fdp.reclaim_unit_bytes = {ru}: this model's reclaim unit is one block of a die, {block_bytes} bytes here (pages_per_block x page_size_bytes x planes_per_die); leave it out or give that"
            )));
        }
        Ok(())
    }
}

/// One handle's line of the statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandleStats {
    pub handle: u16,
    pub host_bytes_written: u64,
    /// Host bytes plus the bytes GC copied out of this handle's blocks.
    pub media_bytes_written: u64,
    /// `media_bytes_written / host_bytes_written`; `None` before any host write.
    pub waf: Option<f64>,
}

/// The FDP statistics of a drive with `[ssd.fdp]` (since the last stats reset).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FdpStats {
    pub handles: u16,
    pub isolation: Isolation,
    /// One per die.
    pub reclaim_groups: u32,
    pub reclaim_unit_bytes: u64,
    pub reclaim_units_per_group: u32,
    /// The FDP statistics log page's HBMW: host bytes written.
    pub host_bytes_with_metadata_written: u64,
    /// Its MBMW: bytes programmed (host data, GC copies, translation pages).
    pub media_bytes_with_metadata_written: u64,
    /// Its MBE: bytes erased.
    pub media_bytes_erased: u64,
    pub per_handle: Vec<HandleStats>,
}
