//! The SSD model: a [`PageFtl`] plus timing in virtual time.
//!
//! Resources are reserved in submission order ("busy until" times): each die serialises
//! its reads, programs and erases; each channel serialises page transfers; the host
//! interface serialises data transfers. A command starts when it arrives and the resources
//! it needs are free, so commands on different dies and channels overlap, and a large
//! request striped over all dies runs on all of them at once.
//!
//! Writes complete once their data has crossed the interface and every superpage they
//! filled is programmed; units left in a partly filled superpage wait in controller SRAM
//! (as on real drives) and complete with the transfer. With a DRAM write cache, a write
//! completes once it fits in the cache, which drains as programs finish.
//!
//! TRIM-family commands (TRIM, vectored vTrim, file-based fTrim) invalidate their units in
//! the FTL at once, so no later read or GC sees the dead data. Their cost is split into
//! interface time (the command round trip and its payload) and in-drive work: a fixed
//! cost per command, per range and per mapping unit, and for fTrim the flash reads and
//! parsing of the file system's metadata ([`crate::fslayout`]). A non-queued TRIM (SATA
//! before NCQ TRIM) waits for every outstanding command, and every later command waits for
//! it. With `background`, vTrim and fTrim are acknowledged once recorded and their work
//! runs in chunks (one per range or metadata block) while no host command is pending;
//! without `preemptive`, a host command that arrives once that work has started waits for
//! all of it, with `preemptive` only for the chunk in progress.

use crate::aging::{AgingConfig, AgingState};
use crate::command::{ByteRange, Payload};
use crate::fast::FastFtl;
use crate::fslayout::{self, LayoutError};
use crate::ftl::{FlashSink, NoTiming, PageFtl, ProgramKind};
use crate::mapcache::{CachedFtl, MappingCacheConfig};
use crate::mapping::{Ftl, FtlKind};
use crate::placement::{FdpConfig, FdpStats, HandleStats};
use crate::slc::{SlcCache, SlcCacheConfig};
use crate::stats::{DeviceStats, HostRecorder, MappingCacheStats};
use crate::wear::{EnduranceConfig, WearInputs, WearLevelingConfig, WearReport};
use crate::{Command, Device, FlashError, GcPolicy, Geometry, Op};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

mod bus;
pub mod sched;
mod trim;

use bus::Bus;
use sched::{Maintenance, StepKind};
pub use sched::{SchedulerConfig, SchedulerPolicy};
use trim::TrimChunk;

/// Flash and interface timing. Sources are given per preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdTiming {
    /// Array read of one page into the page register (tR).
    pub read_ns: u64,
    /// Program of one (multi-plane) page (tPROG).
    pub program_ns: u64,
    /// Erase of one block (tBERS).
    pub erase_ns: u64,
    /// On a drive scaled down by dividing its pages per block by k (`--capacity`): one
    /// erase in k takes `erase_ns` and the others none, so the dies spend the full drive's
    /// erase time per byte written, each erase as long as the full drive's.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub erase_every: u32,
    /// Bus bandwidth of one channel.
    pub channel_bytes_per_s: u64,
    /// Effective host interface bandwidth (SATA, NVMe).
    pub host_bytes_per_s: u64,
    /// Controller and protocol overhead of every command.
    pub command_overhead_ns: u64,
    /// With a write cache: firmware work between a write's data arriving and its
    /// acknowledgement (buffer allocation, mapping update).
    #[serde(default)]
    pub write_ack_ns: u64,
}

/// Garbage-collection settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcConfig {
    pub policy: GcPolicy,
    /// Foreground GC runs when a die's free pool is at or below this many blocks.
    pub free_blocks: u32,
    /// Clean in idle time, up to `background_free_blocks` free blocks per die.
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub background_free_blocks: u32,
    /// A die counts as idle after this long without work.
    #[serde(default)]
    pub background_idle_ns: u64,
    /// Paced foreground GC: at `free_blocks` or below, a victim each time the host
    /// has written what the last one freed (spread over the writes, as controllers pace
    /// it), instead of all victims at once when a host block opens. On unless a preset
    /// says `paced = false`.
    #[serde(default = "paced_by_default")]
    pub paced: bool,
}

fn paced_by_default() -> bool {
    true
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// TRIM-family command costs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrimConfig {
    /// NCQ (queued) TRIM; `false` = the command drains the queue and blocks others.
    pub queued: bool,
    /// In-drive work per command (firmware handling), on top of the interface round trip.
    pub command_overhead_ns: u64,
    /// Mapping-table work per mapping unit in a trimmed range.
    pub per_page_ns: u64,
    /// Mapping-table work per range (finding its start).
    #[serde(default)]
    pub per_range_ns: u64,
    /// Background mode: recording a vTrim/fTrim in DRAM before acknowledging it.
    #[serde(default)]
    pub record_ns: u64,
    /// fTrim: firmware parsing of one metadata block, on top of its flash read.
    #[serde(default)]
    pub metadata_parse_ns: u64,
    /// vTrim/fTrim work runs in idle time after the acknowledgement.
    #[serde(default)]
    pub background: bool,
    /// Background TRIM work pauses (at chunk boundaries) when a host command arrives.
    #[serde(default)]
    pub preemptive: bool,
    /// Work a foreground TRIM-family command leaves after it is acknowledged (the map's
    /// update finishing in the firmware); the drive takes its next command, of any kind,
    /// only when it is done. So a TRIM sent alone costs its command work, TRIMs back to back
    /// cost this each (Lord, linux-ide 2009), and reads and writes behind a burst of small
    /// TRIMs wait for it (McKusick, FreeBSD r338056, 2018): see docs/sources.md.
    #[serde(default)]
    pub settle_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SsdConfig {
    pub geometry: Geometry,
    pub timing: SsdTiming,
    pub gc: GcConfig,
    pub trim: TrimConfig,
    /// DRAM write cache; 0 = none.
    #[serde(default)]
    pub write_cache_bytes: u64,
    /// Mapping scheme: `page` (default) or `fast` (hybrid log-block).
    #[serde(default)]
    pub ftl: FtlKind,
    /// FAST: random-write log blocks.
    #[serde(default)]
    pub log_blocks: u32,
    /// Wear leveling ([`crate::wear`]); absent, none (today's block choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wear_leveling: Option<Box<WearLevelingConfig>>,
    /// Rated endurance, for the wear report ([`crate::wear::WearReport`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endurance: Option<Box<EnduranceConfig>>,
    /// A dynamic SLC cache in front of TLC flash ([`crate::slc`]); none if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slc_cache: Option<SlcCacheConfig>,
    /// A cached mapping table with the map on flash ([`crate::mapcache`]); absent, the
    /// whole map is in DRAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping_cache: Option<MappingCacheConfig>,
    /// Errors that grow with age ([`crate::aging`]): read retries and read reclaim; absent,
    /// every read costs one array read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aging: Option<Box<AgingConfig>>,
    /// Flexible Data Placement ([`crate::placement`]): writes carry placement handles,
    /// each with its own frontiers; absent, one frontier (a write on any handle but 0 is
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fdp: Option<Box<FdpConfig>>,
    /// A zoned drive ([`crate::zoned`]): the drive is a [`crate::zoned::ZonedSsd`] with
    /// these zones instead of a drive with an FTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zoned: Option<Box<crate::zoned::ZonedConfig>>,
    /// How each die orders its flash operations ([`sched`]); absent, submission order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerConfig>,
    /// How reads of space never written (or trimmed) are served: `zeros` (the default, as
    /// an SSD does: no flash read) or `flash` (each such unit costs a flash read, as if the
    /// space had been written in order: for traces replayed on a fresh drive).
    #[serde(default, skip_serializing_if = "UnwrittenReads::is_zeros")]
    pub unwritten_reads: UnwrittenReads,
}

/// How an SSD serves reads of unmapped space ([`SsdConfig::unwritten_reads`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnwrittenReads {
    /// Zeros from the controller, no flash read (what drives do).
    #[default]
    Zeros,
    /// A flash read per unit, on the die the unit would have been written to in order
    /// (its superpage's), at the array read time; the error model is not consulted.
    Flash,
}

impl UnwrittenReads {
    fn is_zeros(&self) -> bool {
        *self == UnwrittenReads::Zeros
    }
}

impl SsdConfig {
    /// The scheduler this drive runs: `[ssd.scheduler]` if given; otherwise the priority
    /// scheduler with its sourced defaults, except on the hybrid log-block FTL (whose
    /// merges are not split into steps), which keeps submission order.
    pub fn scheduler_or_default(&self) -> SchedulerConfig {
        match (&self.scheduler, self.ftl) {
            (Some(s), _) => s.clone(),
            (None, FtlKind::Page) => SchedulerConfig::priority(),
            (None, _) => SchedulerConfig::fifo(),
        }
    }

    pub fn validate(&self) -> Result<(), FlashError> {
        self.geometry.validate()?;
        let t = &self.timing;
        if t.channel_bytes_per_s == 0 || t.host_bytes_per_s == 0 {
            return Err(FlashError::Config(
                "channel_bytes_per_s and host_bytes_per_s must be positive".into(),
            ));
        }
        if self.gc.background && self.gc.background_free_blocks <= self.gc.free_blocks {
            return Err(FlashError::Config(format!(
                "background_free_blocks ({}) must exceed free_blocks ({}) for background GC to do anything",
                self.gc.background_free_blocks, self.gc.free_blocks
            )));
        }
        if let Some(wl) = self.wear_leveling.as_ref().filter(|w| !w.is_off()) {
            wl.validate().map_err(FlashError::Config)?;
            if self.ftl != FtlKind::Page {
                return Err(FlashError::Config(
                    "wear_leveling needs ftl = \"page\" (the FAST FTL's merges have no wear-leveling model)".into(),
                ));
            }
        }
        if let Some(e) = &self.endurance {
            e.validate().map_err(FlashError::Config)?;
        }
        if let Some(slc) = &self.slc_cache {
            slc.validate().map_err(FlashError::Config)?;
        }
        if let Some(mc) = &self.mapping_cache {
            if self.ftl != FtlKind::Page {
                return Err(FlashError::Config(
                    "mapping_cache needs ftl = \"page\" (the FAST FTL's block map has no cached-table model)".into(),
                ));
            }
            mc.validate(self.geometry.mapping_unit_bytes)
                .map_err(FlashError::Config)?;
        }
        if let Some(a) = &self.aging {
            if self.ftl != FtlKind::Page {
                return Err(FlashError::Config(
                    "aging needs ftl = \"page\" (read reclaim relocates a block through the page FTL's GC)".into(),
                ));
            }
            crate::aging::validate(a)?;
        }
        if let Some(fdp) = &self.fdp {
            fdp.validate(self.geometry.block_bytes())?;
            if self.ftl != FtlKind::Page || self.mapping_cache.is_some() {
                return Err(FlashError::Config(
                    "fdp needs ftl = \"page\" with the whole map in DRAM (no mapping_cache): placement handles are frontiers of the page-mapped FTL".into(),
                ));
            }
            if self.zoned.is_some() {
                return Err(FlashError::Config(
                    "a drive is either FDP ([ssd.fdp]) or zoned ([ssd.zoned]), not both".into(),
                ));
            }
        }
        if let Some(sc) = &self.scheduler {
            if sc.policy == SchedulerPolicy::Priority && self.ftl != FtlKind::Page {
                return Err(FlashError::Config(
                    "scheduler policy \"priority\" needs ftl = \"page\": the hybrid log-block FTL's merges are not split into steps".into(),
                ));
            }
        }
        if let Some(z) = &self.zoned {
            z.validate(&self.geometry)?;
            if self.aging.is_some() {
                return Err(FlashError::Config(
                    "a zoned drive with aging ([ssd.aging], --age) is not modelled: the error model's read reclaim relocates blocks through the page FTL, and a zoned drive moves no data of its own (the host would have to rewrite aged zones); age a conventional or FDP drive".into(),
                ));
            }
        }
        Ok(())
    }
}

#[inline]
fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / bytes_per_s as u128) as u64
}

/// Schedules the FTL's flash operations on die and channel timelines.
struct TimingSink<'a> {
    die_free_ns: &'a mut [u64],
    channel_bus: &'a mut [Bus],
    channels: u32,
    timing: &'a SsdTiming,
    page_transfer_ns: u64,
    /// One mapping unit over a channel (a translation page read).
    unit_transfer_ns: u64,
    /// Earliest start of any operation (data arrival for host programs, now for GC).
    not_before_ns: u64,
    /// Latest completion of a host program scheduled through this sink.
    host_done_ns: u64,
    /// Completion times of host programs, for the write cache to drain (if enabled).
    cache: Option<&'a mut BinaryHeap<Reverse<(u64, u64)>>>,
    superpage_bytes: u64,
    /// The SLC cache, if the drive has one: host programs land there while it has room.
    slc: Option<&'a mut SlcCache>,
    /// The error model, if the drive has one: it dates each block's program.
    aging: Option<&'a mut AgingState>,
    /// The priority scheduler's maintenance queues, if the drive has them: GC's reads,
    /// copies and erases are queued there instead of booked on the dies.
    maint: Option<&'a mut Maintenance>,
    /// Blocks per die (a block's die is its number divided by this).
    blocks_per_die: u32,
    /// Per die: erases issued (for [`SsdTiming::erase_every`]).
    erases_issued: &'a mut [u32],
}

/// The WAF-only path's sink on a drive with an SLC cache: no time, but host pages land in
/// the cache while it has room (and, with no idle time, nothing folds).
struct UntimedSlc<'a>(&'a mut SlcCache);

impl FlashSink for UntimedSlc<'_> {
    fn page_read(&mut self, _die: u32) {}
    fn page_program(&mut self, die: u32, kind: ProgramKind) {
        if matches!(kind, ProgramKind::Host) {
            self.0.host_program_ns(die, 0);
        }
    }
    fn block_erase(&mut self, _die: u32, _block: u32) {}
}

impl TimingSink<'_> {
    /// A page's transfer from controller memory over `die`'s channel, once the channel
    /// and the die are free: returns when it ends (the channel is busy until then). The
    /// program of `program_ns` follows it (under the priority scheduler, an erase it
    /// suspends is pushed back by both).
    #[inline]
    fn transfer_to_die(&mut self, die: u32, program_ns: u64) -> u64 {
        let ch = (die % self.channels) as usize;
        let d = die as usize;
        let mut start = self.not_before_ns.max(self.die_free_ns[d]);
        if let Some(m) = self.maint.as_deref_mut() {
            // Only the step in progress, or an erase suspended (the erase of a block this
            // program opened was promised when the block was opened).
            start = m.host_program(
                die,
                self.die_free_ns[d],
                start,
                self.page_transfer_ns + program_ns,
            );
        }
        self.channel_bus[ch].book(start, self.page_transfer_ns)
    }
}

impl FlashSink for TimingSink<'_> {
    #[inline]
    fn page_read(&mut self, die: u32) {
        if let Some(m) = self.maint.as_deref_mut() {
            m.push(die, StepKind::Read, self.timing.read_ns, self.not_before_ns);
            return;
        }
        let d = &mut self.die_free_ns[die as usize];
        *d = (*d).max(self.not_before_ns) + self.timing.read_ns;
    }

    #[inline]
    fn page_program(&mut self, die: u32, kind: ProgramKind) {
        let d = die as usize;
        match kind {
            ProgramKind::Host => {
                let program_ns = match self.slc.as_deref_mut() {
                    Some(slc) => slc.host_program_ns(die, self.timing.program_ns),
                    None => self.timing.program_ns,
                };
                if let (Some(m), Some(_)) = (self.maint.as_deref_mut(), &self.cache) {
                    // Buffered: the program waits in the die's queue, promised to nobody
                    // (the write was acknowledged from the buffer), after the erase of a
                    // block it opens (see `block_opened`). Its channel transfer is counted
                    // in the die's step and not booked on the channel.
                    m.push_write(
                        die,
                        self.page_transfer_ns + program_ns,
                        self.not_before_ns,
                        self.superpage_bytes,
                    );
                    return;
                }
                let transferred = self.transfer_to_die(die, program_ns);
                self.die_free_ns[d] = transferred + program_ns;
                self.host_done_ns = self.host_done_ns.max(self.die_free_ns[d]);
                if let Some(cache) = self.cache.as_deref_mut() {
                    cache.push(Reverse((self.die_free_ns[d], self.superpage_bytes)));
                }
            }
            // GC copies stay inside the die (copyback): no channel transfer.
            ProgramKind::GcCopy => {
                if let Some(m) = self.maint.as_deref_mut() {
                    // Into a block the queue erases first: FIFO order keeps that.
                    m.push_copy(die, self.timing.program_ns, self.not_before_ns);
                    return;
                }
                self.die_free_ns[d] =
                    self.die_free_ns[d].max(self.not_before_ns) + self.timing.program_ns;
            }
            // Translation pages come from controller memory like host data, but no host
            // command waits for them: under the priority scheduler they are maintenance
            // (queued, overtaken and suspended by host commands, their channel transfer
            // counted in the step as a buffered program's is); in submission order they
            // take the die and channel at once.
            ProgramKind::Map => {
                if let Some(m) = self.maint.as_deref_mut() {
                    m.push_map(
                        die,
                        self.page_transfer_ns + self.timing.program_ns,
                        self.not_before_ns,
                    );
                    return;
                }
                let transferred = self.transfer_to_die(die, self.timing.program_ns);
                self.die_free_ns[d] = transferred + self.timing.program_ns;
            }
        }
    }

    /// A translation page read no host command waits for (a write's miss, the read half of
    /// a dirty eviction's read-modify-write; a read's own miss is timed by `read_cached`):
    /// maintenance under the priority scheduler.
    #[inline]
    fn map_read(&mut self, die: u32) {
        let d = die as usize;
        if let Some(m) = self.maint.as_deref_mut() {
            m.push(die, StepKind::Read, self.timing.read_ns, self.not_before_ns);
            return;
        }
        let start = self.die_free_ns[d].max(self.not_before_ns);
        self.die_free_ns[d] = start + self.timing.read_ns;
        let ch = (die % self.channels) as usize;
        self.channel_bus[ch].book(self.die_free_ns[d], self.unit_transfer_ns);
    }

    #[inline]
    fn block_erase(&mut self, die: u32, block: u32) {
        let issued = &mut self.erases_issued[die as usize];
        *issued += 1;
        let erase_ns = if (*issued).is_multiple_of(self.timing.erase_every.max(1)) {
            self.timing.erase_ns
        } else {
            0
        };
        if let Some(m) = self.maint.as_deref_mut() {
            m.push(die, StepKind::Erase(block), erase_ns, self.not_before_ns);
            return;
        }
        let d = &mut self.die_free_ns[die as usize];
        *d = (*d).max(self.not_before_ns) + erase_ns;
    }

    #[inline]
    fn block_opened(&mut self, block: u32) {
        self.gc_block_opened(block);
        // A host frontier: its programs come after the block's erase, and
        // the erase after what was queued before it (the hard threshold). A buffered
        // program is queued behind them already; an unbuffered one is promised, so they
        // are promised now.
        let Some(m) = self.maint.as_deref_mut() else {
            return;
        };
        let die = block / self.blocks_per_die;
        if !m.erase_pending(die, block) {
            return;
        }
        if self.cache.is_none() {
            let d = die as usize;
            let free = self.die_free_ns[d];
            let end = m.drain_through_erase(die, block, free, self.not_before_ns.max(free));
            self.die_free_ns[d] = free.max(end);
        } else {
            m.release_through_erase(die, block);
        }
    }

    #[inline]
    fn gc_block_opened(&mut self, block: u32) {
        if let Some(a) = self.aging.as_deref_mut() {
            a.block_opened(block, self.not_before_ns);
        }
    }
}

pub struct Ssd {
    cfg: SsdConfig,
    ftl: Ftl,
    /// Per-block erase counts when the measured phase began (at the last
    /// [`Device::reset_stats`]; empty before any, or without an endurance rating).
    phase_erase_counts: Vec<u32>,
    unit_bytes: u64,
    page_transfer_ns: u64,
    unit_transfer_ns: u64,
    die_free_ns: Vec<u64>,
    /// Each flash channel's transfers.
    channel_bus: Vec<Bus>,
    /// The host interface's transfers (data in for writes, out for reads).
    host_link: Bus,
    controller_free_ns: u64,
    /// A non-queued TRIM blocks every command until this time.
    barrier_ns: u64,
    last_submit_ns: u64,
    last_completion_ns: u64,
    cache: BinaryHeap<Reverse<(u64, u64)>>,
    cache_used_bytes: u64,
    host: HostRecorder,
    trim_busy_ns: u64,
    trim_interface_ns: u64,
    /// When the last foreground TRIM's settling work ([`TrimConfig::settle_ns`]) ends.
    trim_settled_ns: u64,
    /// Time TRIM-family commands waited for an earlier TRIM's settling work (bursts).
    trim_settle_wait_ns: u64,
    /// Time reads, writes and flushes waited for a TRIM's settling work (summed).
    io_settle_wait_ns: u64,
    /// Mapping units host reads found never written or trimmed (answered with zeros,
    /// no flash read), since the statistics were last reset.
    unwritten_read_units: u64,
    ftrim_metadata_reads: u64,
    trim_ranges: u64,
    /// Bytes of 4 KiB blocks written with content (file-system metadata), by block number.
    data: HashMap<u64, Box<[u8]>>,
    /// Deferred TRIM work, in order.
    background: VecDeque<TrimChunk>,
    pub(crate) slc: Option<SlcCache>,
    /// The error model's per-block state ([`crate::aging`]), if the drive has one.
    aging: Option<Box<AgingState>>,
    /// The priority scheduler's per-die maintenance queues ([`sched`]); `None` with
    /// submission order.
    maint: Option<Maintenance>,
    /// Per die: erases issued (see [`SsdTiming::erase_every`]).
    erases_issued: Vec<u32>,
    /// Per die, under the priority scheduler: the gaps `[from, to)` the host timeline left
    /// before reads booked ahead of it, at least a read long, in time order (see
    /// [`Ssd::book_host_read`]); those ended before the latest submission are dropped.
    holes: Vec<Vec<(u64, u64)>>,
    /// Host reads placed in such a gap.
    hole_reads: u64,
}

const DATA_BLOCK_BYTES: u64 = crate::fslayout::BLOCK_BYTES as u64;

impl Ssd {
    pub fn new(cfg: SsdConfig) -> Result<Self, FlashError> {
        cfg.validate()?;
        let g = &cfg.geometry;
        let ftl = match (cfg.ftl, &cfg.mapping_cache) {
            (FtlKind::Page, None) => Ftl::Page(
                PageFtl::new(g, cfg.gc.policy, cfg.gc.free_blocks)?.with_pacing(cfg.gc.paced),
            ),
            (FtlKind::Page, Some(mc)) => Ftl::Cached(Box::new(CachedFtl::new(
                g,
                cfg.gc.policy,
                cfg.gc.free_blocks,
                cfg.gc.paced,
                mc,
            )?)),
            (FtlKind::Fast, _) => Ftl::Fast(FastFtl::new(g, cfg.log_blocks)?),
        };
        let mut ftl = ftl;
        // The priority scheduler's buses serve transfers out of order (see [`bus`]).
        let scheduler = cfg.scheduler_or_default();
        let gap_filling = scheduler.policy == SchedulerPolicy::Priority;
        if let Some(wl) = cfg.wear_leveling.as_deref().filter(|w| !w.is_off()) {
            ftl.set_wear_leveling(wl.clone());
        }
        // A drive aged before the run (`--age pe=N`): its blocks have been erased N times
        // since new, so the wear report's life used starts at N / rated P/E and the error
        // model reads each block's P/E count from the FTL.
        if let Some(pe) = cfg
            .aging
            .as_ref()
            .map(|a| a.start_pe_cycles)
            .filter(|&n| n > 0)
        {
            ftl.seed_erase_counts(pe);
        }
        if let (Some(fdp), Ftl::Page(f)) = (&cfg.fdp, &mut ftl) {
            f.set_placement(
                fdp.handles,
                fdp.isolation == crate::placement::Isolation::Persistent,
            )?;
        }
        Ok(Ssd {
            phase_erase_counts: Vec::new(),
            unit_bytes: g.mapping_unit_bytes as u64,
            page_transfer_ns: transfer_ns(g.superpage_bytes(), cfg.timing.channel_bytes_per_s),
            unit_transfer_ns: transfer_ns(
                g.mapping_unit_bytes as u64,
                cfg.timing.channel_bytes_per_s,
            ),
            die_free_ns: vec![0; g.dies() as usize],
            channel_bus: vec![Bus::new(gap_filling); g.channels as usize],
            ftl,
            host_link: Bus::new(gap_filling),
            controller_free_ns: 0,
            barrier_ns: 0,
            last_submit_ns: 0,
            last_completion_ns: 0,
            cache: BinaryHeap::new(),
            cache_used_bytes: 0,
            host: HostRecorder::default(),
            trim_busy_ns: 0,
            trim_interface_ns: 0,
            trim_settled_ns: 0,
            trim_settle_wait_ns: 0,
            io_settle_wait_ns: 0,
            ftrim_metadata_reads: 0,
            unwritten_read_units: 0,
            trim_ranges: 0,
            data: HashMap::new(),
            background: VecDeque::new(),
            aging: cfg.aging.as_ref().map(|a| {
                Box::new(AgingState::new(
                    a,
                    g.total_blocks() as usize,
                    g.pages_per_block,
                    g.mapping_unit_bytes as u64,
                ))
            }),
            maint: gap_filling.then(|| Maintenance::new(&scheduler, g.dies(), g.pages_per_block)),
            erases_issued: vec![0; g.dies() as usize],
            holes: vec![Vec::new(); g.dies() as usize],
            hole_reads: 0,
            slc: cfg.slc_cache.clone().map(|c| {
                SlcCache::new(
                    c,
                    g.logical_bytes,
                    g.physical_bytes(),
                    g.superpage_bytes(),
                    g.dies(),
                    g.pages_per_block,
                )
            }),
            cfg,
        })
    }

    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// Seeds the error model's draws (no effect on a drive without `[ssd.aging]`).
    pub fn seed_errors(&mut self, seed: u64) {
        if let Some(a) = &mut self.aging {
            a.seed(seed);
        }
    }

    /// The error model's state, if the drive has one.
    pub fn aging(&self) -> Option<&AgingState> {
        self.aging.as_deref()
    }

    /// Cheap consistency check of the FTL (run after every simulation).
    pub fn check_counts(&self) -> Result<(), String> {
        self.ftl.check_counts()
    }

    /// Full consistency check of the FTL (slow: for tests).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.ftl.check_invariants()
    }

    /// The wear report of the measured phase (since the last [`Device::reset_stats`]; erase
    /// counts since the drive was new), if the drive's endurance is known.
    /// `host_write_bytes` overrides the host bytes the device counted (the WAF-only path
    /// counts none).
    pub fn wear_report(&self, host_write_bytes: Option<u64>) -> Option<WearReport> {
        let endurance = self.cfg.endurance.as_deref()?;
        let s = self.stats();
        let g = &self.cfg.geometry;
        Some(WearReport::new(WearInputs {
            endurance,
            erase_counts: self.ftl.erase_counts(),
            phase_start_counts: &self.phase_erase_counts,
            slc_mode_erases: self.slc.as_ref().map_or(0, |c| c.erased_blocks()),
            slc_erase_weight: self.slc.as_ref().map_or(1.0, |c| c.erase_weight()),
            simulated_logical_bytes: g.logical_bytes,
            simulated_raw_bytes: g.physical_bytes(),
            host_write_bytes: host_write_bytes.unwrap_or(s.host_write_bytes),
            flash_write_bytes: s.flash_write_pages * self.unit_bytes,
            simulated_ns: s.simulated_ns,
        }))
    }

    /// Host bytes written since the last [`Device::reset_stats`] (cheap: no statistics
    /// are computed).
    pub fn host_write_bytes(&self) -> u64 {
        self.host.host_write_bytes
    }

    /// Mapping units fully or partly covered by a byte range (writes and reads touch them).
    fn touched_units(&self, cmd: &Command) -> (u32, u32) {
        let first = cmd.offset_bytes / self.unit_bytes;
        let end = (cmd.offset_bytes + cmd.len_bytes).div_ceil(self.unit_bytes);
        (first as u32, end as u32)
    }

    /// Writes a byte range through the FTL without timing: the WAF-only path.
    pub fn write_untimed(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<(), FlashError> {
        self.write_untimed_on(offset_bytes, len_bytes, 0)
    }

    /// [`Ssd::write_untimed`] on placement handle `handle`.
    pub fn write_untimed_on(
        &mut self,
        offset_bytes: u64,
        len_bytes: u64,
        handle: u16,
    ) -> Result<(), FlashError> {
        let cmd = Command::write(offset_bytes, len_bytes).on_handle(handle);
        cmd.check_range(self.logical_bytes())?;
        if handle != 0 {
            self.check_handle(&cmd)?;
        }
        let (first, end) = self.touched_units(&cmd);
        match &mut self.slc {
            Some(slc) => {
                slc.resize(self.ftl.mapped_units() * self.unit_bytes);
                if handle == 0 {
                    self.ftl.write_range(first..end, &mut UntimedSlc(slc))?;
                } else {
                    self.ftl
                        .write_range_placed(first..end, handle, &mut UntimedSlc(slc))?;
                }
            }
            None if handle == 0 => self.ftl.write_range(first..end, &mut NoTiming)?,
            None => self
                .ftl
                .write_range_placed(first..end, handle, &mut NoTiming)?,
        }
        Ok(())
    }

    /// Placement handles of the drive (1 without FDP: only handle 0).
    pub fn handles(&self) -> u16 {
        self.ftl.handles()
    }

    /// Refuses a write on a handle the drive does not have.
    #[cold]
    #[inline(never)]
    fn check_handle(&self, cmd: &Command) -> Result<(), FlashError> {
        if cmd.handle == 0 || cmd.handle < self.ftl.handles() {
            return Ok(());
        }
        Err(FlashError::Placement {
            handle: cmd.handle,
            offset_bytes: cmd.offset_bytes,
            msg: match self.cfg.fdp {
                None => "the drive has no FDP ([ssd.fdp]), so only handle 0 (NVMe: Invalid Field in Command)".into(),
                Some(ref f) => format!(
                    "the drive has {} handles, 0..{} (NVMe: Invalid Placement Handle)",
                    f.handles,
                    f.handles - 1
                ),
            },
        })
    }

    /// [`Ssd::write_units_untimed`] with each unit on its placement handle.
    pub fn write_units_untimed_placed(
        &mut self,
        lpns: &[u32],
        handles: &[u16],
    ) -> Result<(), FlashError> {
        if lpns.len() != handles.len() {
            return Err(FlashError::Config(format!(
                "{} units but {} handles",
                lpns.len(),
                handles.len()
            )));
        }
        let n = self.ftl.handles();
        if let Some((i, &h)) = handles.iter().enumerate().find(|&(_, &h)| h >= n && h != 0) {
            return self.check_handle(
                &Command::write(lpns[i] as u64 * self.unit_bytes, self.unit_bytes).on_handle(h),
            );
        }
        self.check_units(lpns, "write")?;
        match &mut self.slc {
            Some(slc) => {
                slc.resize(self.ftl.mapped_units() * self.unit_bytes);
                self.ftl
                    .write_batch_placed(lpns, handles, &mut UntimedSlc(slc))
            }
            None => self.ftl.write_batch_placed(lpns, handles, &mut NoTiming),
        }
    }

    /// The FDP statistics, on a drive with `[ssd.fdp]`.
    fn fdp_stats(&self) -> Option<FdpStats> {
        let fdp = self.cfg.fdp.as_ref()?;
        let f = self.ftl.page_ftl()?;
        let p = f.placement_counters()?;
        let c = self.ftl.counters();
        let g = &self.cfg.geometry;
        let u = self.unit_bytes;
        let per_handle = (0..fdp.handles)
            .map(|h| {
                let host = p.host_units[h as usize] * u;
                let media = host + p.gc_units[h as usize] * u;
                HandleStats {
                    handle: h,
                    host_bytes_written: host,
                    media_bytes_written: media,
                    waf: (host > 0).then(|| media as f64 / host as f64),
                }
            })
            .collect();
        Some(FdpStats {
            handles: fdp.handles,
            isolation: fdp.isolation,
            reclaim_groups: g.dies(),
            reclaim_unit_bytes: g.block_bytes(),
            reclaim_units_per_group: g.blocks_per_die() as u32,
            host_bytes_with_metadata_written: c.host_write_units * u,
            media_bytes_with_metadata_written: c.flash_write_units() * u,
            media_bytes_erased: c.erases * g.block_bytes(),
            per_handle,
        })
    }

    /// Every unit of an untimed batch write lies on the drive.
    fn check_units(&self, lpns: &[u32], op: &'static str) -> Result<(), FlashError> {
        let units = self.ftl.logical_units();
        match lpns.iter().find(|&&l| l >= units) {
            Some(&bad) => Err(FlashError::OutOfRange {
                op,
                offset_bytes: bad as u64 * self.unit_bytes,
                len_bytes: self.unit_bytes,
                capacity_bytes: self.logical_bytes(),
            }),
            None => Ok(()),
        }
    }

    /// Writes logical mapping units in order without timing (batched, with prefetching):
    /// the fast path for long WAF runs.
    pub fn write_units_untimed(&mut self, lpns: &[u32]) -> Result<(), FlashError> {
        self.check_units(lpns, "write")?;
        match &mut self.slc {
            Some(slc) => {
                slc.resize(self.ftl.mapped_units() * self.unit_bytes);
                self.ftl.write_batch(lpns, &mut UntimedSlc(slc))
            }
            None => self.ftl.write_batch(lpns, &mut NoTiming),
        }
    }

    /// Reads logical mapping units without timing, for what a read changes in the drive's
    /// state: a mapping cache's contents and the translation pages its dirty evictions
    /// write (nothing on a drive with its whole map in DRAM). Counts no host read.
    pub fn read_units_untimed(&mut self, lpns: &[u32]) -> Result<(), FlashError> {
        self.check_units(lpns, "read")?;
        lpns.iter()
            .try_for_each(|&l| self.ftl.translate_for_read(l, &mut NoTiming))
    }

    /// Whether a host read changes the drive's state (a mapping cache), so that a
    /// workload's reads belong in its preconditioning.
    pub fn reads_change_state(&self) -> bool {
        self.ftl.mapping_cache().is_some()
    }

    /// Trims a byte range without timing; returns the units that held data.
    pub fn trim_untimed(&mut self, offset_bytes: u64, len_bytes: u64) -> Result<u64, FlashError> {
        let cmd = Command::trim(offset_bytes, len_bytes);
        cmd.check_range(self.logical_bytes())?;
        let first = offset_bytes.div_ceil(self.unit_bytes) as u32;
        let end = ((offset_bytes + len_bytes) / self.unit_bytes) as u32;
        Ok((first..end.max(first))
            .filter(|&l| self.ftl.trim(l))
            .count() as u64)
    }

    /// A sink scheduling flash operations on this drive's timelines, none before
    /// `not_before_ns`. A free function over the fields so the FTL can be borrowed beside it.
    #[allow(clippy::too_many_arguments)]
    fn sink<'a>(
        cfg: &'a SsdConfig,
        die_free_ns: &'a mut [u64],
        channel_bus: &'a mut [Bus],
        cache: &'a mut BinaryHeap<Reverse<(u64, u64)>>,
        slc: Option<&'a mut SlcCache>,
        page_transfer_ns: u64,
        unit_transfer_ns: u64,
        not_before_ns: u64,
        aging: Option<&'a mut AgingState>,
        maint: Option<&'a mut Maintenance>,
        erases_issued: &'a mut [u32],
    ) -> TimingSink<'a> {
        TimingSink {
            die_free_ns,
            channel_bus,
            channels: cfg.geometry.channels,
            timing: &cfg.timing,
            page_transfer_ns,
            unit_transfer_ns,
            not_before_ns,
            host_done_ns: 0,
            cache: (cfg.write_cache_bytes > 0).then_some(cache),
            superpage_bytes: cfg.geometry.superpage_bytes(),
            slc,
            aging,
            maint,
            blocks_per_die: cfg.geometry.blocks_per_die() as u32,
            erases_issued,
        }
    }

    fn background_gc(&mut self, now_ns: u64) {
        let gc = &self.cfg.gc;
        let (target, idle_ns) = (gc.background_free_blocks, gc.background_idle_ns);
        for die in 0..self.die_free_ns.len() as u32 {
            loop {
                let mut idle_since = self.die_free_ns[die as usize];
                if let Some(m) = &mut self.maint {
                    // Idle means no maintenance left either (foreground GC's queue first).
                    m.advance(die, idle_since, now_ns);
                    if m.busy(die) {
                        break;
                    }
                    idle_since = idle_since.max(m.clock_ns(die));
                }
                if idle_since + idle_ns > now_ns || self.ftl.free_blocks(die) >= target as usize {
                    break;
                }
                let mut sink = Self::sink(
                    &self.cfg,
                    &mut self.die_free_ns,
                    &mut self.channel_bus,
                    &mut self.cache,
                    None,
                    self.page_transfer_ns,
                    self.unit_transfer_ns,
                    idle_since + idle_ns,
                    self.aging.as_deref_mut(),
                    self.maint.as_mut(),
                    &mut self.erases_issued,
                );
                sink.cache = None;
                if !self.ftl.background_collect(die, target, &mut sink) {
                    break;
                }
            }
        }
    }

    fn write(&mut self, cmd: &Command, start_ns: u64) -> Result<u64, FlashError> {
        let cmd_ready = start_ns + self.cfg.timing.command_overhead_ns;
        let data_ready = self.host_link.book(
            cmd_ready,
            transfer_ns(cmd.len_bytes, self.cfg.timing.host_bytes_per_s),
        );
        let (first, end) = self.touched_units(cmd);
        if let Some(slc) = &mut self.slc {
            slc.resize(self.ftl.mapped_units() * self.unit_bytes);
        }
        let mut sink = Self::sink(
            &self.cfg,
            &mut self.die_free_ns,
            &mut self.channel_bus,
            &mut self.cache,
            self.slc.as_mut(),
            self.page_transfer_ns,
            self.unit_transfer_ns,
            data_ready,
            self.aging.as_deref_mut(),
            self.maint.as_mut(),
            &mut self.erases_issued,
        );
        if cmd.handle == 0 {
            self.ftl.write_range(first..end, &mut sink)?;
        } else {
            self.ftl
                .write_range_placed(first..end, cmd.handle, &mut sink)?;
        }
        let programs_done = sink.host_done_ns;
        if self.cfg.write_cache_bytes == 0 {
            return Ok(data_ready.max(programs_done));
        }
        let cap = self.cfg.write_cache_bytes;
        let need = cmd.len_bytes.min(cap);
        let mut admitted = data_ready + self.cfg.timing.write_ack_ns;
        if let Some(m) = &mut self.maint {
            // Admission under the priority scheduler: the buffered programs (this write's
            // among them, queued above) wait in the dies' queues, and their bytes stay in
            // the buffer until they end. While the buffer holds more than it can, the
            // write waits until enough of them are expected to end. A write larger than
            // the buffer waits until all but a buffer's worth of it is programmed.
            m.advance_all(&self.die_free_ns, data_ready);
            self.cache_used_bytes = self.cache_used_bytes.saturating_sub(m.take_drained());
            self.cache_used_bytes += cmd.len_bytes;
            if self.cache_used_bytes > cap {
                let excess = self.cache_used_bytes - cap;
                if let Some(end) = m.admission_ns(&self.die_free_ns, data_ready, excess) {
                    admitted = admitted.max(end);
                }
            }
            return Ok(admitted);
        }
        // Admission to the DRAM cache: wait until enough earlier programs have finished.
        while let Some(&Reverse((done, bytes))) = self.cache.peek() {
            if done > data_ready && self.cache_used_bytes + need <= cap {
                break;
            }
            self.cache.pop();
            self.cache_used_bytes = self.cache_used_bytes.saturating_sub(bytes);
            if done > data_ready {
                admitted = admitted.max(done);
            }
        }
        self.cache_used_bytes += need;
        Ok(admitted)
    }

    fn read(&mut self, cmd: &Command, start_ns: u64) -> u64 {
        let cmd_ready = start_ns + self.cfg.timing.command_overhead_ns;
        let (first, end) = self.touched_units(cmd);
        let mut data_done = cmd_ready;
        let mut lpn = first;
        while lpn < end {
            self.ftl.note_read();
            let Some(ppn) = self.ftl.lookup(lpn) else {
                // Never written or trimmed: the drive returns zeros without flash I/O
                // (unless the configuration has such reads served from flash).
                self.unwritten_read_units += 1;
                if self.cfg.unwritten_reads == UnwrittenReads::Flash {
                    data_done = data_done.max(self.read_unwritten(lpn, cmd_ready));
                }
                lpn += 1;
                continue;
            };
            // Units of this request that sit in the same superpage are read together.
            let page = self.ftl.page_of(ppn);
            let mut units = 1u64;
            while lpn + (units as u32) < end
                && self
                    .ftl
                    .lookup(lpn + units as u32)
                    .map(|p| self.ftl.page_of(p))
                    == Some(page)
            {
                self.ftl.note_read();
                units += 1;
            }
            lpn += units as u32;
            let die = self.ftl.die_of(ppn);
            data_done = data_done.max(self.read_units(die, page, units, cmd_ready));
        }
        self.host_link.book(
            data_done,
            transfer_ns(cmd.len_bytes, self.cfg.timing.host_bytes_per_s),
        )
    }

    /// A read on a drive with a cached mapping table ([`crate::mapcache`]): each unit's
    /// entry is looked up first (an HMB round trip, or on a miss its translation page read
    /// from flash) and the unit's flash read starts once its entry is known. Units of one
    /// superpage are read together, as in [`Ssd::read`].
    fn read_cached(&mut self, cmd: &Command, start_ns: u64) -> Result<u64, FlashError> {
        let cmd_ready = start_ns + self.cfg.timing.command_overhead_ns;
        let lookup_ns = self
            .cfg
            .mapping_cache
            .as_ref()
            .map_or(0, MappingCacheConfig::lookup_ns);
        let (first, end) = self.touched_units(cmd);
        let mut data_done = cmd_ready;
        // The translation page this command read last and when it arrived: later misses
        // on it wait for that read, not another.
        let mut tpage_ready: Option<(u32, u64)> = None;
        // Units of one superpage in a row: (superpage, die, units, entries known).
        let mut group: Option<(u32, u32, u64, u64)> = None;
        for lpn in first..end {
            self.ftl.note_read();
            let Ftl::Cached(ftl) = &mut self.ftl else {
                unreachable!("read_cached runs on drives with a mapping cache");
            };
            let mut sink = Self::sink(
                &self.cfg,
                &mut self.die_free_ns,
                &mut self.channel_bus,
                &mut self.cache,
                None,
                self.page_transfer_ns,
                self.unit_transfer_ns,
                cmd_ready,
                self.aging.as_deref_mut(),
                self.maint.as_mut(),
                &mut self.erases_issued,
            );
            let t = ftl.translate(lpn, &mut sink)?;
            let page = t.ppn.map(|p| ftl.page_of(p));
            let die = t.ppn.map(|p| ftl.die_of(p));
            if t.ppn.is_none() {
                self.unwritten_read_units += 1;
                if self.cfg.unwritten_reads == UnwrittenReads::Flash {
                    data_done = data_done.max(self.read_unwritten(lpn, cmd_ready + lookup_ns));
                }
            }
            let mut known = cmd_ready + lookup_ns;
            if let Some(d) = t.read_die {
                let d = d as usize;
                let read_end = self.book_host_read(d, known, self.cfg.timing.read_ns)
                    + self.cfg.timing.read_ns;
                let ch = d % self.channel_bus.len();
                known = self.channel_bus[ch].book(read_end, self.unit_transfer_ns);
                tpage_ready = Some((t.tpage, known));
            } else if let Some((tp, at)) = tpage_ready.filter(|_| !t.hit) {
                if tp == t.tpage {
                    known = known.max(at);
                }
            }
            match (&mut group, page, die) {
                (Some((p, _, units, k)), Some(page), _) if *p == page => {
                    *units += 1;
                    *k = (*k).max(known);
                }
                _ => {
                    if let Some(g) = group.take() {
                        data_done = data_done.max(self.read_units(g.1, g.0, g.2, g.3));
                    }
                    // Never written or trimmed: zeros without flash I/O.
                    group = page.zip(die).map(|(p, d)| (p, d, 1, known));
                }
            }
        }
        if let Some(g) = group {
            data_done = data_done.max(self.read_units(g.1, g.0, g.2, g.3));
        }
        Ok(self.host_link.book(
            data_done,
            transfer_ns(cmd.len_bytes, self.cfg.timing.host_bytes_per_s),
        ))
    }

    /// Books a host read of `dur_ns` on `die`, ready at `ready_ns`; returns when it starts.
    /// Under the priority scheduler a read may be booked ahead of the die's host timeline
    /// (a read that waited for its translation page on another die): the gap it leaves
    /// before it (one of the die's *holes*, [`Ssd::holes`]) takes later reads that
    /// fit, so a read booked ahead holds back only reads that arrive after it. Maintenance
    /// ran in that gap when the read ahead was booked; a read placed there suspends it (a
    /// suspension's latency) and pushes it back by its own time. In submission order the
    /// die's host timeline is one "busy until" time.
    fn book_host_read(&mut self, die: usize, ready_ns: u64, dur_ns: u64) -> u64 {
        let free = self.die_free_ns[die];
        let Some(m) = &mut self.maint else {
            let start = ready_ns.max(free);
            self.die_free_ns[die] = start + dur_ns;
            return start;
        };
        let now = self.last_submit_ns;
        let holes = &mut self.holes[die];
        // Gaps that ended before this command was submitted take nothing more.
        if holes.first().is_some_and(|&(_, to)| to <= now) {
            let n = holes.partition_point(|&(_, to)| to <= now);
            holes.drain(..n);
        }
        if ready_ns < free {
            // The first gap, in time order, that the read fits.
            for i in holes.partition_point(|&(_, to)| to <= ready_ns)..holes.len() {
                let (from, to) = holes[i];
                if let Some(start) = m.give_way(die as u32, ready_ns.max(from), dur_ns, to) {
                    // What is left of the gap after the read (its start side is lost).
                    holes[i].0 = start + dur_ns;
                    if holes[i].0 >= to {
                        holes.remove(i);
                    }
                    self.hole_reads += 1;
                    return start;
                }
            }
        } else if ready_ns.saturating_sub(free.max(now)) >= dur_ns {
            // A gap a read could fit in (most are the microseconds of a command's overhead
            // on an idle die, and are not kept).
            holes.push((free.max(now), ready_ns));
        }
        // Before queued maintenance; a program or erase in progress is suspended or
        // waited for.
        let start = m.host_read(die as u32, free, ready_ns.max(free), dur_ns);
        self.die_free_ns[die] = start + dur_ns;
        start
    }

    /// Reads `units` units of superpage `page` on `die`, starting no earlier than
    /// `ready_ns`; returns when their data has crossed the channel. With the error model,
    /// the array read is repeated for each read retry it draws.
    #[inline]
    /// A read of unmapped unit `lpn` served from flash ([`UnwrittenReads::Flash`]): one
    /// array read on the die its superpage would have gone to had the space been written
    /// in order, and its transfer; when it has been transferred.
    fn read_unwritten(&mut self, lpn: u32, ready_ns: u64) -> u64 {
        let g = &self.cfg.geometry;
        let units_per_superpage = (g.superpage_bytes() / self.unit_bytes).max(1);
        let die = ((lpn as u64 / units_per_superpage) % g.dies() as u64) as usize;
        let read_ns = self.cfg.timing.read_ns;
        let start = self.book_host_read(die, ready_ns, read_ns);
        let ch = die % self.channel_bus.len();
        self.channel_bus[ch].book(start + read_ns, self.unit_transfer_ns)
    }

    fn read_units(&mut self, die: u32, page: u32, units: u64, ready_ns: u64) -> u64 {
        let die = die as usize;
        // (The error model dates the read by when the die's host timeline frees.)
        let read_start = ready_ns.max(self.die_free_ns[die]);
        let array_ns = match self.aging.as_deref_mut() {
            None => self.cfg.timing.read_ns,
            Some(a) => {
                let block = page / self.cfg.geometry.pages_per_block;
                let erases = self.ftl.erase_counts()[block as usize];
                let retries = a.read(block, erases, units, read_start);
                self.cfg.timing.read_ns * (1 + retries as u64)
            }
        };
        let read_start = self.book_host_read(die, ready_ns, array_ns);
        let ch = die % self.channel_bus.len();
        self.channel_bus[ch].book(read_start + array_ns, units * self.unit_transfer_ns)
    }

    /// What a block of the device holds: `None` if its unit is unmapped (never written or
    /// trimmed: reads return zeros), `Some(None)` if written without content the model
    /// keeps, `Some(Some(bytes))` for content written with [`Payload::Data`].
    pub fn block_content(&self, block: u64) -> Option<Option<&[u8]>> {
        let lpn = (block * DATA_BLOCK_BYTES / self.unit_bytes) as u32;
        if lpn >= self.ftl.logical_units() {
            return None;
        }
        self.ftl.lookup(lpn)?;
        Some(self.data.get(&block).map(|b| &b[..]))
    }

    /// Read reclaim of the blocks the error model marked: each one's valid data is copied
    /// on its die (as GC copies) and the block erased, from `now_ns` on. A block that is
    /// a write frontier again, or on a die with no free block, is left for a later read.
    #[cold]
    fn read_reclaim(&mut self, now_ns: u64) {
        let mut due = Vec::new();
        if let Some(a) = &mut self.aging {
            a.take_due(&mut due);
        }
        for (block, for_reads) in due {
            let mut sink = Self::sink(
                &self.cfg,
                &mut self.die_free_ns,
                &mut self.channel_bus,
                &mut self.cache,
                None,
                self.page_transfer_ns,
                self.unit_transfer_ns,
                now_ns,
                self.aging.as_deref_mut(),
                self.maint.as_mut(),
                &mut self.erases_issued,
            );
            sink.cache = None;
            if let Some(copied) = self.ftl.reclaim(block, &mut sink) {
                if let Some(a) = &mut self.aging {
                    a.reclaimed(copied as u64, for_reads);
                }
            }
        }
    }

    fn flush(&mut self, start_ns: u64) -> u64 {
        if let Some(m) = &mut self.maint {
            if self.cfg.write_cache_bytes > 0 {
                // The buffered programs (and the maintenance queued among them) are
                // promised now.
                for (d, free) in self.die_free_ns.iter_mut().enumerate() {
                    *free = m.drain_all(d as u32, *free);
                }
                self.cache_used_bytes = self.cache_used_bytes.saturating_sub(m.take_drained());
            }
        }
        let all_programs = self.die_free_ns.iter().copied().max().unwrap_or(0);
        (start_ns + self.cfg.timing.command_overhead_ns).max(all_programs)
    }
}

impl Device for Ssd {
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        cmd.check_range(self.logical_bytes())?;
        if now_ns < self.last_submit_ns {
            return Err(FlashError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_submit_ns,
            });
        }
        self.last_submit_ns = now_ns;
        if self.maint.is_some() {
            self.host_link.forget_before(now_ns);
            for bus in &mut self.channel_bus {
                bus.forget_before(now_ns);
            }
        }
        if self.cfg.gc.background {
            self.background_gc(now_ns);
        }
        if let Some(slc) = &mut self.slc {
            let t = &self.cfg.timing;
            match &mut self.maint {
                None => slc.fold_idle(&mut self.die_free_ns, now_ns, t.read_ns, t.program_ns),
                // A die is idle when its maintenance is done too; its folds are queued as
                // maintenance (a read and a TLC program each), so host commands overtake
                // and suspend them.
                Some(m) => {
                    for (d, &free) in self.die_free_ns.iter().enumerate() {
                        let die = d as u32;
                        m.advance(die, free, now_ns);
                        if m.busy(die) {
                            continue;
                        }
                        let idle_since = free.max(m.clock_ns(die));
                        let cost = t.read_ns + t.program_ns;
                        if let Some((start, folds)) = slc.idle_folds(die, idle_since, now_ns, cost)
                        {
                            for _ in 0..folds {
                                m.push(die, StepKind::Read, t.read_ns, start);
                                m.push(die, StepKind::Program, t.program_ns, start);
                            }
                        }
                    }
                }
            }
        }
        if !self.background.is_empty() {
            let wait = self.run_background(now_ns);
            self.barrier_ns = self.barrier_ns.max(wait);
        }
        let mut start_ns = now_ns.max(self.barrier_ns);
        // The drive finishes an earlier TRIM's map work before it takes the next command.
        if self.trim_settled_ns > start_ns {
            let wait = self.trim_settled_ns - start_ns;
            match cmd.op {
                Op::Trim | Op::VTrim | Op::FTrim => self.trim_settle_wait_ns += wait,
                _ => self.io_settle_wait_ns += wait,
            }
            start_ns = self.trim_settled_ns;
        }
        let done_ns = match cmd.op {
            Op::Write => {
                if cmd.handle != 0 {
                    self.check_handle(cmd)?;
                }
                self.store_data(cmd)?;
                self.write(cmd, start_ns)?
            }
            Op::Read if matches!(self.ftl, Ftl::Cached(_)) => self.read_cached(cmd, start_ns)?,
            Op::Read => self.read(cmd, start_ns),
            Op::Trim | Op::VTrim | Op::FTrim => self.trim_family(cmd, start_ns)?,
            Op::Flush => self.flush(start_ns),
        };
        self.last_completion_ns = self.last_completion_ns.max(done_ns);
        self.host.record(cmd.op, cmd.len_bytes, now_ns, done_ns);
        if self.aging.as_ref().is_some_and(|a| a.has_due()) {
            self.read_reclaim(done_ns);
        }
        Ok(done_ns)
    }

    fn stats(&self) -> DeviceStats {
        let mut s = DeviceStats::default();
        self.host.fill(&mut s);
        let c = self.ftl.counters();
        s.mapping_unit_bytes = self.unit_bytes;
        s.host_write_pages = c.host_write_units;
        s.host_program_pages = c.host_write_units;
        s.gc_copied_pages = c.gc_copied_units;
        s.mapped_bytes = self.ftl.mapped_units() * self.unit_bytes;
        s.erases = c.erases;
        if let Some(slc) = &self.slc {
            s.slc_program_pages = slc.written_pages * slc.superpage_bytes / self.unit_bytes;
            s.erases += slc.erased_blocks();
        }
        s.flash_write_pages = c.flash_write_units() + s.slc_program_pages;
        s.waf = (c.host_write_units > 0)
            .then(|| s.flash_write_pages as f64 / c.host_write_units as f64);
        s.trimmed_pages = c.trimmed_units;
        s.trim_busy_ns = self.trim_busy_ns;
        s.trim_interface_ns = self.trim_interface_ns;
        s.trim_settle_wait_ns = self.trim_settle_wait_ns;
        s.io_settle_wait_ns = self.io_settle_wait_ns;
        s.ftrim_metadata_reads = self.ftrim_metadata_reads;
        s.unwritten_read_bytes = self.unwritten_read_units * self.unit_bytes;
        s.unwritten_reads_from_flash = self.cfg.unwritten_reads == UnwrittenReads::Flash;
        if let Some(m) = &self.maint {
            s.maintenance_suspensions = m.suspensions;
            s.maintenance_forced_drains = m.forced_drains;
            s.write_buffer_waits = m.buffer_waits;
            s.write_buffer_slip_ns = m.buffer_slip_ns;
        }
        s.trim_ranges = self.trim_ranges;
        if let Some(slc) = &self.slc {
            s.slc_write_bytes = slc.written_pages * slc.superpage_bytes;
            s.slc_folded_bytes = slc.folded_pages * slc.superpage_bytes;
            s.slc_held_bytes = Some(slc.held_bytes());
        }
        s.set_erase_spread(self.ftl.erase_counts());
        if self.cfg.wear_leveling.as_ref().is_some_and(|w| !w.is_off()) {
            s.wear_leveling = Some(crate::stats::WearLevelingStats {
                moves: c.wl_moves,
                copied_pages: c.wl_copied_units,
            });
        }
        if let Some(mc) = self.ftl.mapping_cache() {
            let k = mc.cache_counters();
            let cfg = mc.config();
            let lookups = k.hits + k.misses;
            s.mapping_cache = Some(MappingCacheStats {
                location: cfg.location.to_string(),
                granularity: cfg.granularity.to_string(),
                cache_bytes: cfg.cache_bytes,
                cache_entries: mc.cache_entries(),
                entry_bytes: cfg.entry_bytes,
                translation_pages: mc.page_ftl().translation_pages() as u64,
                hits: k.hits,
                misses: k.misses,
                hit_ratio: (lookups > 0).then(|| k.hits as f64 / lookups as f64),
                cold_misses: k.cold_misses,
                cold_miss_share: (k.misses > 0).then(|| k.cold_misses as f64 / k.misses as f64),
                translation_reads: k.translation_reads,
                translation_writes: c.map_write_units,
                translation_gc_copies: c.gc_copied_map_units,
            });
        }
        if let Some(a) = &self.aging {
            s.aging = Some(crate::aging::AgingStats::of(a));
        }
        s.fdp = self.fdp_stats();
        if let Some((cycle, in_play)) = self.ftl.gc_cycle() {
            s.gc_cycle_pages = cycle;
            s.window_shorter_than_gc_cycle =
                (in_play || c.gc_copied_units > 0) && (1..cycle).contains(&c.host_write_units);
        }
        s
    }

    fn reset_stats(&mut self) {
        self.ftl.reset_counters();
        if self.cfg.endurance.is_some() {
            self.phase_erase_counts = self.ftl.erase_counts().to_vec();
        }
        self.host = HostRecorder::default();
        self.trim_busy_ns = 0;
        self.trim_interface_ns = 0;
        self.trim_settle_wait_ns = 0;
        self.io_settle_wait_ns = 0;
        self.ftrim_metadata_reads = 0;
        self.unwritten_read_units = 0;
        if let Some(m) = &mut self.maint {
            m.suspensions = 0;
            m.forced_drains = 0;
            m.buffer_waits = 0;
            m.buffer_slip_ns = 0;
        }
        self.trim_ranges = 0;
        if let Some(slc) = &mut self.slc {
            slc.reset_counters();
        }
        if let Some(a) = &mut self.aging {
            a.reset_counters();
        }
    }

    fn rested_ns(&mut self) -> u64 {
        let settled = self.settle();
        let Some(slc) = &self.slc else {
            return settled;
        };
        let cost = self.cfg.timing.read_ns + self.cfg.timing.program_ns;
        let rest = (0..self.die_free_ns.len() as u32)
            .map(|d| slc.rest_ns(d, cost))
            .max()
            .unwrap_or(0);
        // The first command after the rest finds every fold done (plus a nanosecond: a
        // fold that ends as it arrives is behind it).
        if rest == 0 {
            settled
        } else {
            settled + rest + 1
        }
    }

    fn settle(&mut self) -> u64 {
        if let Some(m) = &mut self.maint {
            for (d, free) in self.die_free_ns.iter_mut().enumerate() {
                *free = m.drain_all(d as u32, *free);
            }
        }
        let mut t = self.last_completion_ns.max(self.controller_free_ns);
        while let Some(chunk) = self.background.pop_front() {
            t = self.run_chunk(chunk, t);
        }
        t.max(self.die_free_ns.iter().copied().max().unwrap_or(0))
            .max(self.trim_settled_ns)
    }

    fn logical_bytes(&self) -> u64 {
        self.cfg.geometry.logical_bytes
    }

    #[inline]
    fn prefetch(&self, cmd: &Command) {
        self.ftl
            .prefetch_lpn((cmd.offset_bytes / self.unit_bytes) as u32);
    }
    #[inline]
    fn prefetch_mapped(&self, cmd: &Command) {
        if cmd.op == Op::Write {
            self.ftl
                .prefetch_mapped((cmd.offset_bytes / self.unit_bytes) as u32);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn config() -> SsdConfig {
        SsdConfig {
            geometry: Geometry {
                channels: 2,
                chips_per_channel: 2,
                dies_per_chip: 1,
                planes_per_die: 1,
                pages_per_block: 32,
                page_size_bytes: 4096,
                mapping_unit_bytes: 4096,
                logical_bytes: 16 << 20,
                op: 0.25,
            },
            timing: SsdTiming {
                read_ns: 50_000,
                program_ns: 500_000,
                erase_ns: 3_000_000,
                erase_every: 1,
                channel_bytes_per_s: 400_000_000,
                host_bytes_per_s: 500_000_000,
                command_overhead_ns: 5_000,
                write_ack_ns: 0,
            },
            gc: GcConfig {
                policy: GcPolicy::Greedy,
                free_blocks: 2,
                background: false,
                background_free_blocks: 0,
                background_idle_ns: 0,
                paced: false,
            },
            trim: TrimConfig {
                queued: false,
                command_overhead_ns: 100_000,
                per_page_ns: 1_000,
                ..TrimConfig::default()
            },
            write_cache_bytes: 0,
            wear_leveling: None,
            endurance: None,
            slc_cache: None,
            mapping_cache: None,
            aging: None,
            ftl: FtlKind::Page,
            log_blocks: 0,
            fdp: None,
            zoned: None,
            scheduler: None,
            unwritten_reads: Default::default(),
        }
    }

    #[test]
    fn a_single_write_costs_transfer_plus_program() {
        let mut ssd = Ssd::new(config()).unwrap();
        let done = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        // overhead 5 µs + host 8.192 µs + channel 10.24 µs + program 500 µs
        assert_eq!(done, 5_000 + 8_192 + 10_240 + 500_000);
    }

    #[test]
    fn striped_writes_overlap_across_dies() {
        let mut ssd = Ssd::new(config()).unwrap();
        let one = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        let mut ssd = Ssd::new(config()).unwrap();
        let four = ssd.submit(&Command::write(0, 4 * 4096), 0).unwrap();
        // Four pages on four dies take far less than four programs in a row.
        assert!(four < one + 100_000, "one {one} four {four}");
        let mut ssd = Ssd::new(config()).unwrap();
        let eight = ssd.submit(&Command::write(0, 8 * 4096), 0).unwrap();
        assert!(
            eight >= one + 500_000,
            "second round of programs waits for the dies"
        );
    }

    #[test]
    fn reads_of_unwritten_data_skip_flash() {
        let mut ssd = Ssd::new(config()).unwrap();
        let unwritten = ssd.submit(&Command::read(0, 4096), 0).unwrap();
        ssd.submit(&Command::write(0, 4096), 1_000_000).unwrap();
        let written = ssd.submit(&Command::read(0, 4096), 10_000_000).unwrap() - 10_000_000;
        assert!(unwritten < written);
        assert!(written >= 50_000);
    }

    #[test]
    fn non_queued_trim_waits_for_the_queue_and_blocks_later_commands() {
        let mut ssd = Ssd::new(config()).unwrap();
        let w = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        let t = ssd.submit(&Command::trim(0, 1 << 20), 1_000).unwrap();
        let cost = 5_000 + 100_000 + 256 * 1_000;
        assert_eq!(t, w + cost);
        let r = ssd.submit(&Command::read(8192, 4096), 2_000).unwrap();
        assert!(r > t);
        assert_eq!(ssd.stats().trim_commands, 1);
        assert_eq!(ssd.stats().trimmed_pages, 1);

        let mut cfg = config();
        cfg.trim.queued = true;
        let mut ssd = Ssd::new(cfg).unwrap();
        let w = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        let t = ssd.submit(&Command::trim(0, 1 << 20), 1_000).unwrap();
        assert_eq!(t, 1_000 + cost, "queued TRIM does not wait for the write");
        assert!(t < w);
    }

    #[test]
    fn trims_back_to_back_wait_for_the_last_one_s_settling_work_and_idle_ones_do_not() {
        // An idle TRIM costs its command work; each TRIM sent as soon as the previous one
        // completes, and any read behind one, waits for its settling work first.
        let settle_ns = 50_000_000;
        let mut cfg = config();
        cfg.trim.settle_ns = settle_ns;
        let one = 5_000 + 100_000 + 1_000; // interface + command + one 4 KiB unit
        let burst = |cfg: SsdConfig, gap_ns: u64| {
            let mut ssd = Ssd::new(cfg).unwrap();
            let mut t = 0;
            let mut took = Vec::new();
            for i in 0..8u64 {
                let start = t + gap_ns;
                t = ssd.submit(&Command::trim(i * 4096, 4096), start).unwrap();
                took.push(t - start);
            }
            (took, ssd.stats().trim_settle_wait_ns)
        };
        let (idle, idle_wait) = burst(cfg.clone(), settle_ns);
        assert!(idle.iter().all(|&d| d == one), "{idle:?}");
        assert_eq!(idle_wait, 0);
        let (b2b, wait) = burst(cfg.clone(), 0);
        assert_eq!(
            b2b[0], one,
            "the first TRIM of a burst finds the drive idle"
        );
        assert!(b2b[1..].iter().all(|&d| d == settle_ns + one), "{b2b:?}");
        assert_eq!(wait, 7 * settle_ns);
        // A read just after a TRIM waits for its settling work, queued TRIM or not.
        for queued in [false, true] {
            let mut cfg = cfg.clone();
            cfg.trim.queued = queued;
            let mut ssd = Ssd::new(cfg).unwrap();
            let t = ssd.submit(&Command::trim(0, 4096), 0).unwrap();
            let r = ssd.submit(&Command::read(8192, 4096), t).unwrap();
            assert!(r >= t + settle_ns, "queued {queued}: the read ended at {r}");
            let s = ssd.stats();
            assert_eq!((s.trim_settle_wait_ns, s.io_settle_wait_ns), (0, settle_ns));
            // Long after, it does not.
            let r2 = ssd.submit(&Command::read(8192, 4096), 2 * r).unwrap();
            assert!(r2 - 2 * r < 1_000_000);
        }
        // Without settling work a burst costs what idle TRIMs do, and a queued TRIM holds
        // back no read that arrives while it works.
        cfg.trim.settle_ns = 0;
        assert!(burst(cfg.clone(), 0).0.iter().all(|&d| d == one));
        cfg.trim.queued = true;
        let mut ssd = Ssd::new(cfg).unwrap();
        let t = ssd.submit(&Command::trim(0, 4096), 0).unwrap();
        let r = ssd.submit(&Command::read(8192, 4096), 1_000).unwrap();
        assert!(r < t, "the read ended at {r}, the TRIM at {t}");
    }

    #[test]
    fn write_cache_acknowledges_before_programs() {
        let mut cfg = config();
        cfg.write_cache_bytes = 1 << 20;
        let mut ssd = Ssd::new(cfg).unwrap();
        let done = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        assert_eq!(done, 5_000 + 8_192);
        let flushed = ssd.submit(&Command::flush(), done).unwrap();
        assert!(flushed >= done + 500_000);
        // Firmware work before the acknowledgement comes on top of the transfer.
        let mut cfg = config();
        cfg.write_cache_bytes = 1 << 20;
        cfg.timing.write_ack_ns = 60_000;
        let mut ssd = Ssd::new(cfg).unwrap();
        let done = ssd.submit(&Command::write(0, 4096), 0).unwrap();
        assert_eq!(done, 5_000 + 8_192 + 60_000);
    }

    #[test]
    fn a_write_buffer_never_lets_sustained_writes_outrun_the_flash() {
        // Sequential 1 MiB writes at QD8, each larger than the buffer: with a buffer the
        // drive acknowledges at most a buffer's worth ahead of its programs, so over 64 MiB
        // it writes at the flash's rate as a drive without one does (before, each 1 MiB
        // write was counted as the buffer's size, and the buffer never filled).
        let run = |buffer: u64| {
            let mut cfg = config();
            cfg.scheduler = Some(SchedulerConfig::priority());
            cfg.write_cache_bytes = buffer;
            cfg.geometry.logical_bytes = 64 << 20;
            let mut ssd = Ssd::new(cfg).unwrap();
            let mut last = 0;
            let mut inflight: std::collections::VecDeque<u64> = Default::default();
            let mut now = 0;
            for i in 0..64u64 {
                if inflight.len() == 8 {
                    now = now.max(inflight.pop_front().unwrap());
                }
                let done = ssd.submit(&Command::write(i << 20, 1 << 20), now).unwrap();
                inflight.push_back(done);
                last = last.max(done);
            }
            // When the host saw the last write complete.
            last
        };
        let (plain, buffered) = (run(0), run(512 << 10));
        assert!(
            (buffered as f64) >= 0.97 * plain as f64,
            "buffered {buffered} ns against {plain} ns for 64 MiB"
        );
    }

    #[test]
    fn under_the_priority_scheduler_a_ready_read_is_not_held_back_by_a_waiting_one() {
        // Die 0 programs a page; a read on die 0 waits for it. A read on another die of
        // the same channel, submitted just after, has its data at once: in submission
        // order its channel and host-link transfers queue behind the waiting read's; with
        // gap-filling buses they go first.
        let run = |policy: Option<SchedulerConfig>| {
            let mut cfg = config();
            cfg.scheduler = policy;
            let mut ssd = Ssd::new(cfg).unwrap();
            ssd.submit(&Command::write(0, 4 * 4096), 0).unwrap();
            let die = |ssd: &Ssd, lpn: u32| ssd.ftl.die_of(ssd.ftl.lookup(lpn).unwrap());
            let on_die = |ssd: &Ssd, d: u32| (0..4).find(|&l| die(ssd, l) == d).unwrap();
            let (first, neighbour) = (on_die(&ssd, 0), on_die(&ssd, 2));
            // The next page goes to die 0 again (round robin over 4 dies).
            ssd.submit(&Command::write(4 * 4096, 4096), 10_000_000)
                .unwrap();
            assert_eq!(die(&ssd, 4), 0);
            let waiting = ssd
                .submit(&Command::read(first as u64 * 4096, 4096), 10_030_000)
                .unwrap();
            let ready = ssd
                .submit(&Command::read(neighbour as u64 * 4096, 4096), 10_040_000)
                .unwrap();
            (waiting, ready)
        };
        let (waiting, ready) = run(Some(SchedulerConfig::fifo()));
        assert!(waiting > 10_500_000, "waits for the program: {waiting}");
        assert!(ready > waiting, "fifo: behind the waiting read's transfers");
        let (waiting, ready) = run(None); // the default: priority
        assert!(
            waiting > 10_500_000,
            "still waits for the program: {waiting}"
        );
        // 5 µs overhead, 50 µs array read, 10.24 µs channel, 8.192 µs host link.
        assert_eq!(ready, 10_040_000 + 5_000 + 50_000 + 10_240 + 8_192);
    }

    #[test]
    fn a_read_booked_ahead_of_its_die_holds_back_only_reads_that_come_after_it() {
        // A read that waited for its translation page elsewhere is booked on an idle die
        // at 1 ms. Under the priority scheduler the die is free before it: a read ready at
        // 0.1 ms starts then; one that does not fit before 1 ms waits for it. In
        // submission order (one "busy until" time per die) both wait.
        let run = |policy: Option<SchedulerConfig>| {
            let mut cfg = config();
            cfg.scheduler = policy;
            let mut ssd = Ssd::new(cfg).unwrap();
            let ahead = ssd.book_host_read(0, 1_000_000, 50_000);
            let early = ssd.book_host_read(0, 100_000, 50_000);
            let late = ssd.book_host_read(0, 990_000, 50_000);
            (ahead, early, late, ssd.hole_reads)
        };
        assert_eq!(run(None), (1_000_000, 100_000, 1_050_000, 1));
        let fifo = run(Some(SchedulerConfig::fifo()));
        assert_eq!(fifo, (1_000_000, 1_050_000, 1_100_000, 0));
        // Maintenance ran in the gap (a 0.5 ms program from 0, when the read ahead was
        // booked): the early read suspends it, starting a program suspension's latency
        // (0.1 ms) late, and the die's maintenance ends the read's time and that later.
        let mut ssd = Ssd::new(config()).unwrap();
        let m = ssd.maint.as_mut().unwrap();
        m.push(0, StepKind::Program, 500_000, 0);
        assert_eq!(ssd.book_host_read(0, 1_000_000, 50_000), 1_000_000);
        assert_eq!(ssd.maint.as_ref().unwrap().clock_ns(0), 500_000);
        assert_eq!(ssd.book_host_read(0, 100_000, 50_000), 200_000);
        assert_eq!(ssd.maint.as_ref().unwrap().clock_ns(0), 650_000);
    }

    #[test]
    fn rejects_out_of_range_and_time_travel() {
        let mut ssd = Ssd::new(config()).unwrap();
        let err = ssd.submit(&Command::write(16 << 20, 4096), 0).unwrap_err();
        assert!(err.to_string().contains("outside"), "{err}");
        ssd.submit(&Command::write(0, 4096), 100).unwrap();
        assert!(matches!(
            ssd.submit(&Command::write(0, 4096), 50),
            Err(FlashError::TimeWentBackwards { .. })
        ));
    }

    #[test]
    fn background_gc_uses_idle_time() {
        // In submission order, where foreground GC is booked on the write path. (Under the
        // priority scheduler foreground GC's steps already wait for the dies' idle gaps.)
        let run = |background: bool| {
            let mut cfg = config();
            cfg.scheduler = Some(SchedulerConfig::fifo());
            cfg.gc.background = background;
            cfg.gc.background_free_blocks = 4;
            cfg.gc.background_idle_ns = 1_000_000;
            let mut ssd = Ssd::new(cfg).unwrap();
            let units = (16 << 20) / 4096;
            let mut now = 0;
            for round in 0..3u64 {
                for i in 0..units {
                    let lpn = (i * 7919 + round) % units;
                    now = ssd.submit(&Command::write(lpn * 4096, 4096), now).unwrap();
                    if i % 64 == 0 {
                        now += 20_000_000; // idle gap
                    }
                }
            }
            ssd.check_invariants().unwrap();
            let s = ssd.stats();
            (s.write_latency_ns.p99, s.write_latency_ns.mean)
        };
        let (with, without) = (run(true), run(false));
        assert!(
            with.1 < without.1,
            "idle-time GC should take GC off the write path: {with:?} vs {without:?}"
        );
    }
}
