//! Device models for flashlab, in virtual time.
//!
//! Everything here is pure computation: a device receives [`Command`]s with the virtual
//! time at which they are submitted and answers with the virtual time at which they
//! complete. Nothing reads the wall clock and the only random draws are the error model's
//! ([`aging`], seeded from the run's seed), so a run depends only on its configuration, its
//! input and its seed.
//!
//! - [`ftl::PageFtl`]: page-mapped flash translation layer (L2P/P2L, valid counts, write
//!   frontiers, free pools, garbage collection with a [`gc::GcPolicy`], TRIM). Used alone it
//!   is the fast WAF-only path.
//! - [`mapcache::CachedFtl`]: the page-mapped FTL with a cached mapping table (DFTL) and
//!   translation pages on flash, for DRAM-less drives.
//! - [`ssd::Ssd`]: the FTL plus timing (dies, channels, host interface, write cache, TRIM
//!   command costs, background GC, a dynamic [`slc`] cache for TLC drives).
//! - [`hdd::Hdd`]: a disk with seek curve, rotational position and read-ahead.
//! - [`aging`]: errors that grow with age (RBER, ECC, read retries, read reclaim), off
//!   unless a preset has `[ssd.aging]`.
//! - [`preset::Preset`]: device descriptions loaded from TOML.
//! - [`wear`]: wear leveling's settings, rated endurance and the wear report.
//! - [`placement`]: Flexible Data Placement (`[ssd.fdp]`): writes carry a placement handle
//!   ([`Command::handle`]), each handle has its own write frontiers.
//! - [`zoned::ZonedSsd`]: a zoned drive (`[ssd.zoned]`, the NVMe ZNS command set): zones
//!   with write pointers on superblocks, no device GC.
//! - [`timeline::Timeline`]: any device's run cut into intervals of virtual time
//!   (`--interval`), with each operation's whole latency histogram.

pub mod aging;
pub mod bytes;
pub mod command;
pub mod error;
pub mod fast;
pub mod fslayout;
pub mod ftl;
pub mod gc;
pub mod geometry;
pub mod hdd;
pub mod mapcache;
pub mod mapping;
pub mod placement;
pub mod preset;
pub mod scaling_limits;
pub mod slc;
pub mod ssd;
pub mod stats;
pub mod timeline;
pub mod wear;
pub mod zoned;

pub use aging::{Age, AgingConfig, CellType};
pub use command::{ByteRange, Command, Op, Payload};
pub use error::FlashError;
pub use gc::GcPolicy;
pub use geometry::Geometry;
pub use hdd::{DestageOrder, Hdd, HddConfig};
pub use mapcache::{CacheGranularity, CacheLocation, MappingCacheConfig};
pub use placement::{FdpConfig, FdpStats, Isolation};
pub use preset::{AnyDevice, DeviceConfig, Preset};
pub use slc::SlcCacheConfig;
pub use ssd::{Ssd, SsdConfig, UnwrittenReads};
pub use stats::{DeviceStats, LatencySummary};
pub use wear::{EnduranceConfig, WearLevelingConfig, WearReport};
pub use zoned::{ZoneState, ZoneStatus, ZonedConfig, ZonedSsd};

/// A block device in virtual time.
///
/// Commands must be submitted in non-decreasing `now_ns` order; the device answers with
/// the virtual time at which the command completes (never earlier than `now_ns`).
pub trait Device {
    /// Submit `cmd` at virtual time `now_ns`; returns its completion time.
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError>;
    /// Counters and latency distributions since creation or the last [`Device::reset_stats`].
    fn stats(&self) -> DeviceStats;
    /// Forget counters and latencies (the device's contents and clocks stay).
    fn reset_stats(&mut self);
    /// The user-visible capacity.
    fn logical_bytes(&self) -> u64;
    /// A hint that `cmd` will be submitted soon, so the model may warm its caches (the
    /// replay engine calls it when a request is queued). Never changes results.
    #[inline]
    fn prefetch(&self, _cmd: &Command) {}
    /// The second stage of [`Device::prefetch`], called some requests later (the replay:
    /// halfway through a queue deeper than 2), when what the first stage fetched is in
    /// cache: the model may warm what that brings within reach (where a write's data lives
    /// now, which the write invalidates). Never changes results.
    #[inline]
    fn prefetch_mapped(&self, _cmd: &Command) {}
    /// Lets the device finish deferred work (background TRIM processing) as if the host
    /// stayed idle; returns the virtual time at which the device is idle.
    fn settle(&mut self) -> u64;
    /// Lets the device rest as a drive left idle does: deferred work settled, then the
    /// idle-time work (an SLC cache's folds) done; returns the virtual time at which a
    /// command finds it all done.
    fn rested_ns(&mut self) -> u64 {
        self.settle()
    }
}
