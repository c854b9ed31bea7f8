//! A zoned drive (NVMe Zoned Namespace command set 1.1, "ZNS"): the logical space is cut
//! into zones written only sequentially at each zone's write pointer; the host resets a
//! zone to rewrite it. The drive keeps no page mapping and runs no GC: every flash write
//! is a host write (WAF 1 for the device), and the host does what GC did.
//!
//! The model:
//! - a zone is a superblock: block `z` of every die. Its size is the superblock's bytes;
//!   its capacity (`zone_capacity_bytes`, at most the size) is what may be written, and the
//!   addresses between capacity and size are never writable (as on drives whose zone size
//!   is a power of two above the flash behind it). Writes inside a zone stripe a
//!   superpage per die in turn, as the conventional drive's host writes do. The zoned
//!   space is `logical_bytes` rounded down to whole zones; the rest of the flash (the
//!   over-provisioning) stays unused (real drives keep it for bad blocks);
//! - zone states Empty, Implicitly Opened, Explicitly Opened, Closed and Full (Read Only
//!   and Offline need media failures, which are not modelled), with the open and active
//!   limits (`max_open_zones`, `max_active_zones`; 0 = none): a write to an Empty or Closed
//!   zone opens it implicitly, first closing the implicitly opened zone opened longest
//!   ago if the open limit is reached (as the spec lets a controller do), else failing with
//!   Too Many Open Zones; opening an Empty zone when the active limit is reached fails with
//!   Too Many Active Zones;
//! - commands ([`ZonedSsd::zone_append`], [`ZonedSsd::reset`], [`ZonedSsd::finish`],
//!   [`ZonedSsd::open`], [`ZonedSsd::close`], [`ZonedSsd::report`]) fail with the ZNS
//!   statuses ([`ZoneStatus`]); a write ([`crate::Device::submit`]) must start at its zone's
//!   write pointer (else Zone Invalid Write), not be in a Full zone (Zone Is Full) and not
//!   cross the zone's capacity (Zone Boundary Error); zone append writes at the write
//!   pointer and returns where it wrote;
//! - timing: the conventional drive's resources (per-die array, per-channel transfer, host
//!   interface, command overhead), without a write cache or SLC cache; a reset erases the
//!   zone's written blocks (one erase per die, in parallel); a finish costs the command
//!   only (the model does not pad the rest of the zone). A TRIM is accepted only over
//!   whole zones and resets them (a discard on a zoned block device is a zone reset).
//!
//! Not modelled: zone descriptors' extensions, zone random write area, variable zone
//! capacity, the Zone Descriptor Changed events, simple copy.

pub use crate::stats::ZonedStats;
use crate::stats::{DeviceStats, HostRecorder};
use crate::{Command, Device, FlashError, Geometry, Op, SsdConfig};
use serde::{Deserialize, Serialize};

/// `[ssd.zoned]`: the drive is zoned.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZonedConfig {
    /// Writable bytes of each zone, at most the zone's size (a superblock); absent = the
    /// size. A multiple of the mapping unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_capacity_bytes: Option<u64>,
    /// Zones that may be open at once (implicitly or explicitly); 0 = no limit.
    #[serde(default)]
    pub max_open_zones: u32,
    /// Zones that may be active (open or closed) at once; 0 = no limit.
    #[serde(default)]
    pub max_active_zones: u32,
}

impl ZonedConfig {
    pub fn validate(&self, g: &Geometry) -> Result<(), FlashError> {
        let size = zone_size_bytes(g);
        if let Some(c) = self.zone_capacity_bytes {
            if c == 0 || c > size || !c.is_multiple_of(g.mapping_unit_bytes as u64) {
                return Err(FlashError::Config(format!(
                    "zoned.zone_capacity_bytes = {c} must be a positive multiple of the mapping unit ({} bytes) of at most the zone size, {size} bytes (a block on each of {} dies)",
                    g.mapping_unit_bytes,
                    g.dies()
                )));
            }
        }
        if g.logical_bytes < size {
            return Err(FlashError::Config(format!(
                "a zoned drive of {} logical bytes holds no zone of {size} bytes (a block on each of {} dies): raise the capacity",
                g.logical_bytes,
                g.dies()
            )));
        }
        if self.max_active_zones > 0 && self.max_open_zones > self.max_active_zones {
            return Err(FlashError::Config(format!(
                "zoned.max_open_zones = {} exceeds max_active_zones = {} (an open zone is active)",
                self.max_open_zones, self.max_active_zones
            )));
        }
        Ok(())
    }
}

/// Status codes of the ZNS command set (command-specific status values, ZNS 1.1
/// figure "Zoned Namespace Command Set specific status values").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ZoneStatus {
    ZoneBoundaryError,
    ZoneIsFull,
    ZoneIsReadOnly,
    ZoneIsOffline,
    ZoneInvalidWrite,
    TooManyActiveZones,
    TooManyOpenZones,
    InvalidZoneStateTransition,
}

impl ZoneStatus {
    /// The status code (status code type 1h, command specific).
    pub fn code(self) -> u8 {
        match self {
            ZoneStatus::ZoneBoundaryError => 0xB8,
            ZoneStatus::ZoneIsFull => 0xB9,
            ZoneStatus::ZoneIsReadOnly => 0xBA,
            ZoneStatus::ZoneIsOffline => 0xBB,
            ZoneStatus::ZoneInvalidWrite => 0xBC,
            ZoneStatus::TooManyActiveZones => 0xBD,
            ZoneStatus::TooManyOpenZones => 0xBE,
            ZoneStatus::InvalidZoneStateTransition => 0xBF,
        }
    }
}

impl std::fmt::Display for ZoneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ZoneStatus::ZoneBoundaryError => "Zone Boundary Error",
            ZoneStatus::ZoneIsFull => "Zone Is Full",
            ZoneStatus::ZoneIsReadOnly => "Zone Is Read Only",
            ZoneStatus::ZoneIsOffline => "Zone Is Offline",
            ZoneStatus::ZoneInvalidWrite => "Zone Invalid Write",
            ZoneStatus::TooManyActiveZones => "Too Many Active Zones",
            ZoneStatus::TooManyOpenZones => "Too Many Open Zones",
            ZoneStatus::InvalidZoneStateTransition => "Invalid Zone State Transition",
        })
    }
}

/// A zone's state (ZNS zone state machine; Read Only and Offline are not modelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ZoneState {
    Empty,
    ImplicitlyOpened,
    ExplicitlyOpened,
    Closed,
    Full,
}

impl ZoneState {
    fn is_open(self) -> bool {
        matches!(
            self,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened
        )
    }
    fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }
}

/// One line of a zone report (Zone Management Receive, Report Zones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ZoneDescriptor {
    pub zone: u32,
    pub state: ZoneState,
    pub start_bytes: u64,
    pub capacity_bytes: u64,
    /// Absolute byte offset of the write pointer (its start + capacity when Full).
    pub write_pointer_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Zone {
    state: ZoneState,
    /// Bytes written from the zone's start (a multiple of the mapping unit).
    wp_bytes: u64,
    /// When it was last opened (for choosing which implicitly opened zone to close).
    opened_seq: u64,
}

/// The zoned drive.
pub struct ZonedSsd {
    cfg: SsdConfig,
    zcfg: ZonedConfig,
    zones: Vec<Zone>,
    zone_size_bytes: u64,
    zone_capacity_bytes: u64,
    unit_bytes: u64,
    superpage_bytes: u64,
    dies: u32,
    page_transfer_ns: u64,
    unit_transfer_ns: u64,
    die_free_ns: Vec<u64>,
    channel_free_ns: Vec<u64>,
    host_free_ns: u64,
    last_submit_ns: u64,
    last_completion_ns: u64,
    open_seq: u64,
    /// Erases per zone (every block of a zone is erased together).
    zone_erases: Vec<u32>,
    /// Erases per block since the drive was new, zone by zone (a zone's block on each die
    /// in turn): a reset erases the blocks of the dies its data reached.
    block_erases: Vec<u32>,
    /// `block_erases` when the measured phase began (the last reset_stats).
    phase_block_erases: Vec<u32>,
    host: HostRecorder,
    stats: ZonedStats,
    written_units: u64,
    erases: u64,
}

/// A zone's size: a block (over the die's planes) on every die.
pub fn zone_size_bytes(g: &Geometry) -> u64 {
    g.block_bytes() * g.dies() as u64
}

fn transfer_ns(bytes: u64, bytes_per_s: u64) -> u64 {
    (bytes as u128 * 1_000_000_000 / bytes_per_s as u128) as u64
}

impl ZonedSsd {
    /// A zoned drive from an SSD configuration with `[ssd.zoned]`.
    pub fn new(cfg: SsdConfig) -> Result<ZonedSsd, FlashError> {
        cfg.validate()?;
        let zcfg = cfg.zoned.clone().ok_or_else(|| {
            FlashError::Config("a zoned drive needs [ssd.zoned] in its configuration".into())
        })?;
        let g = &cfg.geometry;
        let zone_size_bytes = zone_size_bytes(g);
        let zones = (g.logical_bytes / zone_size_bytes).min(g.blocks_per_die()) as u32;
        let capacity = zcfg.zone_capacity_bytes.unwrap_or(zone_size_bytes);
        Ok(ZonedSsd {
            zones: vec![
                Zone {
                    state: ZoneState::Empty,
                    wp_bytes: 0,
                    opened_seq: 0,
                };
                zones as usize
            ],
            zone_size_bytes,
            zone_capacity_bytes: capacity,
            unit_bytes: g.mapping_unit_bytes as u64,
            superpage_bytes: g.superpage_bytes(),
            dies: g.dies(),
            page_transfer_ns: transfer_ns(g.superpage_bytes(), cfg.timing.channel_bytes_per_s),
            unit_transfer_ns: transfer_ns(
                g.mapping_unit_bytes as u64,
                cfg.timing.channel_bytes_per_s,
            ),
            die_free_ns: vec![0; g.dies() as usize],
            channel_free_ns: vec![0; g.channels as usize],
            host_free_ns: 0,
            last_submit_ns: 0,
            last_completion_ns: 0,
            open_seq: 0,
            zone_erases: vec![0; zones as usize],
            block_erases: vec![0; zones as usize * g.dies() as usize],
            phase_block_erases: Vec::new(),
            host: HostRecorder::default(),
            stats: ZonedStats {
                zones,
                zone_size_bytes,
                zone_capacity_bytes: capacity,
                max_open_zones: zcfg.max_open_zones,
                max_active_zones: zcfg.max_active_zones,
                ..ZonedStats::default()
            },
            written_units: 0,
            erases: 0,
            zcfg: *zcfg,
            cfg,
        })
    }

    pub fn config(&self) -> &SsdConfig {
        &self.cfg
    }

    pub fn zones(&self) -> u32 {
        self.zones.len() as u32
    }

    pub fn zone_size_bytes(&self) -> u64 {
        self.zone_size_bytes
    }

    pub fn zone_capacity_bytes(&self) -> u64 {
        self.zone_capacity_bytes
    }

    /// The zone holding byte `offset_bytes`.
    pub fn zone_of(&self, offset_bytes: u64) -> u32 {
        (offset_bytes / self.zone_size_bytes) as u32
    }

    /// Zone Management Receive, Report Zones: every zone's state and write pointer.
    pub fn report(&self) -> Vec<ZoneDescriptor> {
        (0..self.zones()).map(|z| self.descriptor(z)).collect()
    }

    /// One zone's descriptor.
    pub fn descriptor(&self, zone: u32) -> ZoneDescriptor {
        let s = &self.zones[zone as usize];
        let start = zone as u64 * self.zone_size_bytes;
        ZoneDescriptor {
            zone,
            state: s.state,
            start_bytes: start,
            capacity_bytes: self.zone_capacity_bytes,
            write_pointer_bytes: start + s.wp_bytes,
        }
    }

    fn err(
        &self,
        op: &'static str,
        offset_bytes: u64,
        status: ZoneStatus,
        msg: String,
    ) -> FlashError {
        FlashError::Zone {
            op,
            offset_bytes,
            zone: self.zone_of(offset_bytes),
            status,
            msg,
        }
    }

    fn count(&self, f: impl Fn(ZoneState) -> bool) -> u32 {
        self.zones.iter().filter(|z| f(z.state)).count() as u32
    }

    /// The zone starting at `offset_bytes` (zone management commands name a zone by its
    /// start).
    fn zone_at(&self, op: &'static str, offset_bytes: u64) -> Result<u32, FlashError> {
        let z = self.zone_of(offset_bytes);
        if z >= self.zones() || !offset_bytes.is_multiple_of(self.zone_size_bytes) {
            return Err(FlashError::Config(format!(
                "{op} at offset {offset_bytes}: not the start of one of the drive's {} zones of {} bytes",
                self.zones(),
                self.zone_size_bytes
            )));
        }
        Ok(z)
    }

    /// Makes zone `z` open (explicitly or not), checking the open and active limits:
    /// an Empty zone needs an active resource; any zone not open needs an open one, for
    /// which the drive may close the implicitly opened zone opened longest ago.
    fn make_open(&mut self, op: &'static str, z: u32, explicit: bool) -> Result<(), FlashError> {
        let state = self.zones[z as usize].state;
        let start = z as u64 * self.zone_size_bytes;
        if state == ZoneState::Empty
            && self.zcfg.max_active_zones > 0
            && self.count(ZoneState::is_active) >= self.zcfg.max_active_zones
        {
            return Err(self.err(
                op,
                start,
                ZoneStatus::TooManyActiveZones,
                format!(
                    "{} zones are active (open or closed), the limit; finish or reset one first",
                    self.zcfg.max_active_zones
                ),
            ));
        }
        if !state.is_open()
            && self.zcfg.max_open_zones > 0
            && self.count(ZoneState::is_open) >= self.zcfg.max_open_zones
        {
            let oldest = (0..self.zones())
                .filter(|&i| self.zones[i as usize].state == ZoneState::ImplicitlyOpened)
                .min_by_key(|&i| self.zones[i as usize].opened_seq);
            match oldest {
                Some(i) => {
                    self.zones[i as usize].state = ZoneState::Closed;
                    self.stats.implicit_closes += 1;
                }
                None => {
                    return Err(self.err(
                        op,
                        start,
                        ZoneStatus::TooManyOpenZones,
                        format!(
                            "{} zones are explicitly open, the limit; close or finish one first",
                            self.zcfg.max_open_zones
                        ),
                    ))
                }
            }
        }
        let s = &mut self.zones[z as usize];
        if explicit {
            s.state = ZoneState::ExplicitlyOpened;
        } else if !s.state.is_open() {
            s.state = ZoneState::ImplicitlyOpened;
        }
        if !state.is_open() {
            self.open_seq += 1;
            s.opened_seq = self.open_seq;
        }
        Ok(())
    }

    /// Checks and accounts a write of `len_bytes` at the write pointer of zone `z`;
    /// returns the byte offset written.
    fn advance(&mut self, op: &'static str, z: u32, len_bytes: u64) -> Result<u64, FlashError> {
        let start = z as u64 * self.zone_size_bytes;
        let s = self.zones[z as usize];
        if s.state == ZoneState::Full {
            return Err(self.err(
                op,
                start,
                ZoneStatus::ZoneIsFull,
                "the zone is full; reset it to write it again".into(),
            ));
        }
        if s.wp_bytes + len_bytes > self.zone_capacity_bytes {
            return Err(self.err(
                op,
                start + s.wp_bytes,
                ZoneStatus::ZoneBoundaryError,
                format!(
                    "{len_bytes} bytes at the write pointer ({} into the zone) cross the zone's capacity, {} bytes",
                    s.wp_bytes, self.zone_capacity_bytes
                ),
            ));
        }
        if len_bytes == 0 || !len_bytes.is_multiple_of(self.unit_bytes) {
            return Err(self.err(
                op,
                start + s.wp_bytes,
                ZoneStatus::ZoneInvalidWrite,
                format!(
                    "{len_bytes} bytes: zone writes are whole mapping units of {} bytes",
                    self.unit_bytes
                ),
            ));
        }
        self.make_open(op, z, false)?;
        let s = &mut self.zones[z as usize];
        let at = start + s.wp_bytes;
        s.wp_bytes += len_bytes;
        if s.wp_bytes == self.zone_capacity_bytes {
            s.state = ZoneState::Full;
        }
        Ok(at)
    }

    /// Times a write of `len_bytes` at `zone_offset` of zone `z` (already accounted):
    /// each superpage it completes is transferred and programmed on its die.
    fn time_write(&mut self, zone_offset: u64, len_bytes: u64, start_ns: u64) -> u64 {
        let t = &self.cfg.timing;
        let ready = start_ns + t.command_overhead_ns;
        let xfer = ready.max(self.host_free_ns);
        self.host_free_ns = xfer + transfer_ns(len_bytes, t.host_bytes_per_s);
        let data_ready = self.host_free_ns;
        let mut done = data_ready;
        let sp = self.superpage_bytes;
        // Superpages completed by this write, those whose last byte it wrote, are
        // programmed; a partly written one waits in controller memory for the next write.
        let (first, end) = (zone_offset / sp, (zone_offset + len_bytes) / sp);
        for page in first..end {
            let die = (page % self.dies as u64) as usize;
            let ch = die % self.channel_free_ns.len();
            let start = data_ready
                .max(self.channel_free_ns[ch])
                .max(self.die_free_ns[die]);
            self.channel_free_ns[ch] = start + self.page_transfer_ns;
            self.die_free_ns[die] = self.channel_free_ns[ch] + t.program_ns;
            done = done.max(self.die_free_ns[die]);
        }
        self.written_units += len_bytes / self.unit_bytes;
        done
    }

    fn check_time(&mut self, now_ns: u64) -> Result<(), FlashError> {
        if now_ns < self.last_submit_ns {
            return Err(FlashError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_submit_ns,
            });
        }
        self.last_submit_ns = now_ns;
        Ok(())
    }

    fn finish_cmd(&mut self, op: Op, len_bytes: u64, now_ns: u64, done_ns: u64) -> u64 {
        self.last_completion_ns = self.last_completion_ns.max(done_ns);
        self.host.record(op, len_bytes, now_ns, done_ns);
        done_ns
    }

    /// A zone management command completes (its latency is not among the host's
    /// read/write/trim/flush latencies; its count is in [`ZonedStats`]).
    fn mgmt_done(&mut self, done_ns: u64) -> u64 {
        self.last_completion_ns = self.last_completion_ns.max(done_ns);
        done_ns
    }

    /// Zone Append of `len_bytes` to the zone starting at `zone_start_bytes`: written at
    /// the zone's write pointer. Returns (the byte offset written, completion time).
    pub fn zone_append(
        &mut self,
        zone_start_bytes: u64,
        len_bytes: u64,
        now_ns: u64,
    ) -> Result<(u64, u64), FlashError> {
        let z = self.zone_at("zone append", zone_start_bytes)?;
        self.check_time(now_ns)?;
        let at = self.advance("zone append", z, len_bytes)?;
        self.stats.appends += 1;
        let done = self.time_write(at - zone_start_bytes, len_bytes, now_ns);
        Ok((at, self.finish_cmd(Op::Write, len_bytes, now_ns, done)))
    }

    /// The drive's wear, as [`crate::Ssd::wear_report`] gives a conventional drive's: its
    /// erases are its zone resets (one erase of each block a zone's data reached); blocks
    /// past the last zone are never written and count as unworn. None without rated
    /// endurance (`[ssd.endurance]`).
    pub fn wear_report(&self) -> Option<crate::WearReport> {
        let endurance = self.cfg.endurance.as_deref()?;
        let g = &self.cfg.geometry;
        let mut counts = self.block_erases.clone();
        counts.resize((g.total_blocks() as usize).max(counts.len()), 0);
        let s = Device::stats(self);
        Some(crate::WearReport::new(crate::wear::WearInputs {
            endurance,
            erase_counts: &counts,
            phase_start_counts: &self.phase_block_erases,
            slc_mode_erases: 0,
            slc_erase_weight: 1.0,
            simulated_logical_bytes: g.logical_bytes,
            simulated_raw_bytes: g.physical_bytes(),
            host_write_bytes: s.host_write_bytes,
            flash_write_bytes: self.written_units * self.unit_bytes,
            simulated_ns: s.simulated_ns,
        }))
    }

    /// Zone Management Send, Reset Zone: the zone becomes Empty with its write pointer at
    /// its start; its written blocks are erased (one erase per die, in parallel).
    pub fn reset(&mut self, zone_start_bytes: u64, now_ns: u64) -> Result<u64, FlashError> {
        let z = self.zone_at("zone reset", zone_start_bytes)?;
        self.check_time(now_ns)?;
        let ready = now_ns + self.cfg.timing.command_overhead_ns;
        let written = self.zones[z as usize].wp_bytes;
        let mut done = ready;
        if written > 0 {
            // Dies that hold any of the zone's data.
            let pages = written.div_ceil(self.superpage_bytes);
            for die in 0..(pages.min(self.dies as u64)) as usize {
                let start = ready.max(self.die_free_ns[die]);
                self.die_free_ns[die] = start + self.cfg.timing.erase_ns;
                done = done.max(self.die_free_ns[die]);
                self.erases += 1;
                self.block_erases[z as usize * self.dies as usize + die] += 1;
            }
            self.zone_erases[z as usize] += 1;
        }
        self.zones[z as usize] = Zone {
            state: ZoneState::Empty,
            wp_bytes: 0,
            opened_seq: 0,
        };
        self.stats.resets += 1;
        Ok(self.mgmt_done(done))
    }

    /// Zone Management Send, Finish Zone: the zone becomes Full (its unwritten rest stays
    /// unwritten; the model charges the command only).
    pub fn finish(&mut self, zone_start_bytes: u64, now_ns: u64) -> Result<u64, FlashError> {
        let z = self.zone_at("zone finish", zone_start_bytes)?;
        self.check_time(now_ns)?;
        let s = &mut self.zones[z as usize];
        if s.state != ZoneState::Full {
            s.state = ZoneState::Full;
            s.wp_bytes = self.zone_capacity_bytes;
        }
        self.stats.finishes += 1;
        let done = now_ns + self.cfg.timing.command_overhead_ns;
        Ok(self.mgmt_done(done))
    }

    /// Zone Management Send, Open Zone: the zone becomes Explicitly Opened (from Empty,
    /// Implicitly Opened or Closed).
    pub fn open(&mut self, zone_start_bytes: u64, now_ns: u64) -> Result<u64, FlashError> {
        let z = self.zone_at("zone open", zone_start_bytes)?;
        self.check_time(now_ns)?;
        if self.zones[z as usize].state == ZoneState::Full {
            return Err(self.err(
                "zone open",
                zone_start_bytes,
                ZoneStatus::InvalidZoneStateTransition,
                "a Full zone cannot be opened; reset it first".into(),
            ));
        }
        self.make_open("zone open", z, true)?;
        self.stats.explicit_opens += 1;
        let done = now_ns + self.cfg.timing.command_overhead_ns;
        Ok(self.mgmt_done(done))
    }

    /// Zone Management Send, Close Zone: an open zone becomes Closed (Empty if nothing
    /// was written to it); closing a Closed zone does nothing.
    pub fn close(&mut self, zone_start_bytes: u64, now_ns: u64) -> Result<u64, FlashError> {
        let z = self.zone_at("zone close", zone_start_bytes)?;
        self.check_time(now_ns)?;
        let s = &mut self.zones[z as usize];
        match s.state {
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => {
                s.state = if s.wp_bytes == 0 {
                    ZoneState::Empty
                } else {
                    ZoneState::Closed
                };
            }
            ZoneState::Closed => {}
            other => {
                return Err(self.err(
                    "zone close",
                    zone_start_bytes,
                    ZoneStatus::InvalidZoneStateTransition,
                    format!("the zone is {other:?}; only an open zone can be closed"),
                ))
            }
        }
        let done = now_ns + self.cfg.timing.command_overhead_ns;
        Ok(self.mgmt_done(done))
    }

    /// A write, which must start at its zone's write pointer.
    fn write(&mut self, cmd: &Command, start_ns: u64) -> Result<u64, FlashError> {
        let z = self.zone_of(cmd.offset_bytes);
        let zstart = z as u64 * self.zone_size_bytes;
        let wp = zstart + self.zones[z as usize].wp_bytes;
        if self.zones[z as usize].state != ZoneState::Full && cmd.offset_bytes != wp {
            return Err(self.err(
                "write",
                cmd.offset_bytes,
                ZoneStatus::ZoneInvalidWrite,
                format!("writes must start at the zone's write pointer, offset {wp}"),
            ));
        }
        let at = self.advance("write", z, cmd.len_bytes)?;
        Ok(self.time_write(at - zstart, cmd.len_bytes, start_ns))
    }

    /// A read: units below their zone's write pointer come from flash (a superpage per
    /// die, as written); the rest reads as zeros without flash I/O.
    fn read(&mut self, cmd: &Command, start_ns: u64) -> u64 {
        let t = &self.cfg.timing;
        let ready = start_ns + t.command_overhead_ns;
        let mut done = ready;
        let sp = self.superpage_bytes;
        let end = cmd.offset_bytes + cmd.len_bytes;
        let mut off = cmd.offset_bytes / self.unit_bytes * self.unit_bytes;
        while off < end {
            let z = self.zone_of(off);
            let zstart = z as u64 * self.zone_size_bytes;
            let in_zone = off - zstart;
            let page_end = (zstart + (in_zone / sp + 1) * sp).min(end);
            let written = self.zones[z as usize].wp_bytes;
            if in_zone < written && in_zone < self.zone_capacity_bytes {
                let units = (page_end.min(zstart + written) - off).div_ceil(self.unit_bytes);
                let die = ((in_zone / sp) % self.dies as u64) as usize;
                let rs = ready.max(self.die_free_ns[die]);
                self.die_free_ns[die] = rs + t.read_ns;
                let ch = die % self.channel_free_ns.len();
                let xs = self.die_free_ns[die].max(self.channel_free_ns[ch]);
                self.channel_free_ns[ch] = xs + units * self.unit_transfer_ns;
                done = done.max(self.channel_free_ns[ch]);
            }
            off = page_end;
        }
        let hs = done.max(self.host_free_ns);
        self.host_free_ns = hs + transfer_ns(cmd.len_bytes, t.host_bytes_per_s);
        self.host_free_ns
    }

    /// A TRIM over whole zones resets them; any other TRIM is refused.
    fn trim(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        let zs = self.zone_size_bytes;
        if cmd.op != Op::Trim
            || !cmd.offset_bytes.is_multiple_of(zs)
            || !cmd.len_bytes.is_multiple_of(zs)
        {
            return Err(self.err(
                cmd.op.name(),
                cmd.offset_bytes,
                ZoneStatus::ZoneInvalidWrite,
                format!(
                    "a zoned drive takes TRIM only over whole zones of {zs} bytes (each a zone reset); vTrim and fTrim not at all"
                ),
            ));
        }
        let mut done = now_ns;
        let first = cmd.offset_bytes / zs;
        for z in first..first + cmd.len_bytes / zs {
            done = done.max(self.reset(z * zs, now_ns)?);
        }
        Ok(done)
    }
}

impl Device for ZonedSsd {
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        cmd.check_range(self.logical_bytes())?;
        if cmd.op.is_trim() {
            return self.trim(cmd, now_ns);
        }
        self.check_time(now_ns)?;
        if cmd.handle != 0 {
            return Err(FlashError::Placement {
                handle: cmd.handle,
                offset_bytes: cmd.offset_bytes,
                msg: "a zoned drive has no placement handles (the zone is the placement)".into(),
            });
        }
        let done = match cmd.op {
            Op::Write => self.write(cmd, now_ns)?,
            Op::Read => self.read(cmd, now_ns),
            Op::Flush => {
                let all = self.die_free_ns.iter().copied().max().unwrap_or(0);
                (now_ns + self.cfg.timing.command_overhead_ns).max(all)
            }
            Op::Trim | Op::VTrim | Op::FTrim => unreachable!("handled above"),
        };
        Ok(self.finish_cmd(cmd.op, cmd.len_bytes, now_ns, done))
    }

    fn stats(&self) -> DeviceStats {
        let mut s = DeviceStats::default();
        self.host.fill(&mut s);
        s.mapping_unit_bytes = self.unit_bytes;
        s.host_write_pages = self.written_units;
        s.host_program_pages = self.written_units;
        s.flash_write_pages = self.written_units;
        s.waf = (self.written_units > 0).then_some(1.0);
        s.erases = self.erases;
        let per_block: Vec<u32> = self
            .zone_erases
            .iter()
            .flat_map(|&e| std::iter::repeat_n(e, self.dies as usize))
            .collect();
        s.set_erase_spread(&per_block);
        let mut z = self.stats.clone();
        z.open_zones = self.count(ZoneState::is_open);
        z.active_zones = self.count(ZoneState::is_active);
        z.full_zones = self.count(|s| s == ZoneState::Full);
        s.zoned = Some(z);
        s
    }

    fn reset_stats(&mut self) {
        self.host = HostRecorder::default();
        self.phase_block_erases = self.block_erases.clone();
        self.written_units = 0;
        self.erases = 0;
        let keep = (
            self.stats.zones,
            self.stats.zone_size_bytes,
            self.stats.zone_capacity_bytes,
        );
        self.stats = ZonedStats {
            zones: keep.0,
            zone_size_bytes: keep.1,
            zone_capacity_bytes: keep.2,
            max_open_zones: self.zcfg.max_open_zones,
            max_active_zones: self.zcfg.max_active_zones,
            ..ZonedStats::default()
        };
    }

    fn logical_bytes(&self) -> u64 {
        self.zones() as u64 * self.zone_size_bytes
    }

    fn settle(&mut self) -> u64 {
        self.last_completion_ns
            .max(self.die_free_ns.iter().copied().max().unwrap_or(0))
    }
}
