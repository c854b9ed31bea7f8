//! `flashlab sim`: fill a drive sequentially, warm it up with the workload, then measure.
//!
//! With timing on, the measured phase runs closed loop at the given queue depth through
//! the full device model; fill and warm-up always use the WAF-only path (the FTL state
//! they leave is the same, and they run many times faster). With timing off, the measured
//! phase also runs on the WAF-only path: only writes matter there, reads are skipped.

use flash::timeline::{Completion, Recording, TimeSeries, Timeline};
use flash::{AnyDevice, Command, Device, DeviceStats, FlashError, GcPolicy, Preset};
use serde::Serialize;
use trace::Request;
use workloads::synthetic::{Pattern, SlotGen};

#[derive(Debug, Clone)]
pub struct SimSpec {
    pub preset: Preset,
    pub pattern: Pattern,
    pub request_bytes: u64,
    pub read_fraction: f64,
    pub queue_depth: u32,
    /// Measured write volume, in multiples of the logical capacity.
    pub writes_x: f64,
    pub warmup_x: f64,
    /// After `precondition`: the workload itself, timed but not measured, for this many
    /// multiples of the capacity in writes, so that state idle time changes (the SLC
    /// cache's folds) reaches the workload's steady state before measuring. 0 = none.
    pub timed_warmup_x: f64,
    pub timing: bool,
    pub seed: u64,
    /// Instead of filling the drive and warming it up with the workload: precondition it
    /// ([`crate::precondition`]) to an occupancy; the workload then addresses the filled
    /// space only.
    pub precondition: Option<(crate::precondition::Precondition, f64)>,
    /// Hot/cold separation by placement handle: under [`Pattern::HotCold`], writes to the
    /// hot region carry handle 1 and the rest handle 0 (an FDP drive with two handles or
    /// more, `--drive fdp`).
    pub separate: bool,
    /// After `precondition`: leave the drive idle until its deferred and idle-time work
    /// (the SLC cache's folds) is done before measuring, as a drive tested after a rest.
    pub idle_after_precondition: bool,
}

/// The kind of drive (`--drive`), replacing the preset's `[ssd.fdp]` and `[ssd.zoned]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Drive {
    /// One write frontier, no zones: today's drive.
    Conventional,
    /// Flexible Data Placement ([`flash::placement`]).
    Fdp(flash::FdpConfig),
    /// Zoned ([`flash::zoned`]).
    Zoned(flash::ZonedConfig),
}

/// Overrides of a preset's SSD settings (the `sim` flags).
#[derive(Debug, Clone, Default)]
pub struct SsdOverrides {
    pub capacity_bytes: Option<u64>,
    pub op: Option<f64>,
    pub page_size_bytes: Option<u32>,
    pub pages_per_block: Option<u32>,
    pub gc: Option<GcPolicy>,
    pub gc_free_blocks: Option<u32>,
    /// Enable idle-time GC up to this many free blocks per die.
    pub background_gc_free_blocks: Option<u32>,
    pub write_cache_bytes: Option<u64>,
    pub trim_queued: Option<bool>,
    /// vTrim/fTrim work in idle time, and whether host commands preempt it.
    pub trim_background: Option<bool>,
    pub trim_preemptive: Option<bool>,
    /// `[ssd.trim] settle_ns`: work a TRIM leaves that the next TRIM waits for.
    pub trim_settle_ns: Option<u64>,
    /// Wear leveling (`[ssd.wear_leveling]`): off, dynamic, static or both.
    pub wear_leveling: Option<flash::WearLevelingConfig>,
    /// Bytes of a cached mapping table (`[ssd.mapping_cache]`, with the map on flash);
    /// 0 = the whole map in DRAM. A preset without one gets one in controller DRAM.
    pub mapping_cache_bytes: Option<u64>,
    /// What the mapping cache holds (`entry` or `page`); needs a mapping cache (the
    /// preset's or `mapping_cache_bytes`).
    pub mapping_cache_granularity: Option<flash::CacheGranularity>,
    /// `[ssd] unwritten_reads`: zeros (the default) or a flash read each.
    pub unwritten_reads: Option<flash::UnwrittenReads>,
    /// The drive's age (`--age`): enables the error model (`[ssd.aging]`, with the cell
    /// type's defaults if the preset has none) and sets its starting P/E cycles and data
    /// retention.
    pub age: Option<flash::Age>,
    /// The kind of drive (`--drive`, `--handles`, the zone flags).
    pub drive: Option<Drive>,
    /// How each die orders its flash operations (`--scheduler`, `[ssd.scheduler]`).
    pub scheduler: Option<flash::ssd::SchedulerConfig>,
}

impl SsdOverrides {
    pub fn apply(&self, mut p: Preset) -> Result<Preset, FlashError> {
        // The over-provisioning first: capacity scaling counts blocks per die at it.
        if let (Some(op), Some(c)) = (self.op, p.ssd_config_mut()) {
            c.geometry.op = op;
        }
        if let Some(c) = self.capacity_bytes {
            // Pages per block the user chose win over capacity scaling's.
            p = match self.pages_per_block {
                Some(_) => p.with_capacity_same_blocks(c),
                None => p.with_capacity(c),
            };
        }
        if self.wear_leveling.is_some() && p.ssd_config().is_none() {
            return Err(FlashError::Config(format!(
                "preset {} is a disk: --wear-leveling applies to SSDs only",
                p.name
            )));
        }
        self.refuse_with_zoned()?;
        let name = p.name.clone();
        match p.ssd_config_mut() {
            Some(c) => self.apply_to_ssd(&name, c)?,
            None if self.ssd_only() => {
                return Err(FlashError::Config(format!(
                    "preset {} is a disk: --op, --page-size, --pages-per-block, --gc, --gc-free-blocks, --background-gc, --write-cache, --trim, --mapping-cache, --age, --drive, --scheduler and --unwritten-reads apply to SSDs only",
                    p.name
                )))
            }
            None => {}
        }
        p.validate()?;
        Ok(p)
    }

    /// Refuses what a zoned drive cannot do: it maps zones, not pages, and moves no data of
    /// its own.
    fn refuse_with_zoned(&self) -> Result<(), FlashError> {
        if !matches!(self.drive, Some(Drive::Zoned(_))) {
            return Ok(());
        }
        let refused = [
            (
                self.mapping_cache_bytes.is_some() || self.mapping_cache_granularity.is_some(),
                "--mapping-cache",
                "a zoned drive has no page mapping table to cache (its map is a zone's write pointer)",
            ),
            (
                self.wear_leveling.is_some(),
                "--wear-leveling",
                "a zoned drive moves no data of its own (the host chooses which zones to reset)",
            ),
        ];
        match refused.iter().find(|r| r.0) {
            Some((_, flag, why)) => Err(FlashError::Config(format!(
                "{flag} does nothing with --drive zoned: {why}"
            ))),
            None => Ok(()),
        }
    }

    /// Whether any override applies to SSDs only.
    fn ssd_only(&self) -> bool {
        self.op.is_some()
            || self.page_size_bytes.is_some()
            || self.pages_per_block.is_some()
            || self.gc.is_some()
            || self.gc_free_blocks.is_some()
            || self.background_gc_free_blocks.is_some()
            || self.write_cache_bytes.is_some()
            || self.trim_queued.is_some()
            || self.trim_background.is_some()
            || self.trim_preemptive.is_some()
            || self.trim_settle_ns.is_some()
            || self.mapping_cache_bytes.is_some()
            || self.mapping_cache_granularity.is_some()
            || self.unwritten_reads.is_some()
            || self.age.is_some()
            || self.drive.is_some()
            || self.scheduler.is_some()
    }

    /// The overrides on an SSD's configuration (preset `name`'s).
    fn apply_to_ssd(&self, name: &str, c: &mut flash::SsdConfig) -> Result<(), FlashError> {
        let g = &mut c.geometry;
        if let Some(op) = self.op {
            g.op = op;
        }
        if let Some(ps) = self.page_size_bytes {
            g.page_size_bytes = ps;
            g.mapping_unit_bytes = g.mapping_unit_bytes.min(ps);
        }
        if let Some(ppb) = self.pages_per_block {
            g.pages_per_block = ppb;
        }
        if let Some(gc) = self.gc {
            c.gc.policy = gc;
        }
        if let Some(n) = self.gc_free_blocks {
            c.gc.free_blocks = n;
            if c.gc.background && c.gc.background_free_blocks <= n {
                c.gc.background_free_blocks = n + 1;
            }
        }
        if let Some(n) = self.background_gc_free_blocks {
            c.gc.background = true;
            c.gc.background_free_blocks = n;
            if c.gc.background_idle_ns == 0 {
                c.gc.background_idle_ns = 1_000_000;
            }
        }
        if let Some(b) = self.write_cache_bytes {
            c.write_cache_bytes = b;
        }
        if let Some(u) = self.unwritten_reads {
            c.unwritten_reads = u;
        }
        if let Some(q) = self.trim_queued {
            c.trim.queued = q;
        }
        if let Some(b) = self.trim_background {
            c.trim.background = b;
        }
        if let Some(p) = self.trim_preemptive {
            c.trim.preemptive = p;
        }
        if let Some(ns) = self.trim_settle_ns {
            c.trim.settle_ns = ns;
        }
        if let Some(wl) = &self.wear_leveling {
            c.wear_leveling = (!wl.is_off()).then(|| Box::new(wl.clone()));
        }
        match (self.mapping_cache_bytes, &mut c.mapping_cache) {
            (None, _) => {}
            (Some(0), mc) => *mc = None,
            (Some(b), Some(mc)) => mc.cache_bytes = b,
            (Some(b), mc) => *mc = Some(flash::MappingCacheConfig::dram(b)),
        }
        match (self.mapping_cache_granularity, &mut c.mapping_cache) {
            (None, _) => {}
            (Some(g), Some(mc)) => mc.granularity = g,
            (Some(_), None) => {
                return Err(FlashError::Config(format!(
                    "--mapping-cache-granularity needs a mapping cache: preset {name} keeps its whole map in DRAM (add --mapping-cache SIZE)"
                )))
            }
        }
        if let Some(age) = &self.age {
            set_age(name, c, age)?;
        }
        if let Some(sc) = &self.scheduler {
            c.scheduler = Some(sc.clone());
        }
        match &self.drive {
            None => {}
            Some(Drive::Conventional) => (c.fdp, c.zoned) = (None, None),
            Some(Drive::Fdp(f)) => (c.fdp, c.zoned) = (Some(Box::new(f.clone())), None),
            Some(Drive::Zoned(z)) => (c.fdp, c.zoned) = (None, Some(Box::new(z.clone()))),
        }
        Ok(())
    }
}

/// Enables the error model on `c` at `age`. The cell type comes from `cell=`, else the
/// preset's `[ssd.aging]`, else its SLC cache's `bits_per_cell` (a TLC drive's).
fn set_age(name: &str, c: &mut flash::SsdConfig, age: &flash::Age) -> Result<(), FlashError> {
    let cell = match (age.cell, &c.aging, &c.slc_cache) {
        (Some(cell), _, _) => cell,
        (None, Some(a), _) => a.cell,
        (None, None, Some(slc)) if slc.bits_per_cell == 3 => flash::CellType::Tlc,
        (None, None, Some(slc)) if slc.bits_per_cell == 2 => flash::CellType::Mlc,
        _ => {
            return Err(FlashError::Config(format!(
                "--age: preset {name} does not say its cell type (no [ssd.aging] table): add cell=slc, cell=mlc or cell=tlc to --age"
            )))
        }
    };
    let aging = c
        .aging
        .get_or_insert_with(|| Box::new(flash::AgingConfig::new(cell)));
    aging.cell = cell;
    aging.set_age(age);
    Ok(())
}

/// The error model's draws get a seed of their own from the run's.
pub fn errors_seed(seed: u64) -> u64 {
    seed ^ 0x6167_696e_6773_6565
}

#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    pub preset: String,
    pub workload: String,
    pub seed: u64,
    pub timing: bool,
    pub logical_bytes: u64,
    pub physical_bytes: Option<u64>,
    pub op: Option<f64>,
    /// The over-provisioning GC works with after its per-die reserve ([`effective_op`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effective_op: Option<f64>,
    pub gc: Option<String>,
    /// What preconditioning did, when asked for instead of fill and warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precondition: Option<crate::precondition::PreconditionReport>,
    #[serde(flatten)]
    pub stats: DeviceStats,
    /// Life used and projected TBW ([`flash::WearReport`]), when the preset gives the
    /// drive's rated endurance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wear: Option<flash::WearReport>,
}

/// The over-provisioning a page-mapped drive's GC works with
/// ([`crate::analytic::effective_op`]) when `handles_in_use` placement handles are written:
/// the pool of `gc.free_blocks` per die and the open frontiers (host and GC; a translation
/// frontier with a mapping cache; per further handle, two under persistent isolation, a
/// host frontier under initial isolation). None where the model does not apply: a hybrid
/// FTL, an SLC cache (its blocks change mode), a zoned drive (no device GC).
pub fn effective_op(c: &flash::ssd::SsdConfig, handles_in_use: u16) -> Option<f64> {
    if c.ftl != flash::mapping::FtlKind::Page || c.slc_cache.is_some() || c.zoned.is_some() {
        return None;
    }
    let mut frontiers = if c.mapping_cache.is_some() { 3 } else { 2 };
    if let Some(f) = &c.fdp {
        let extra = u32::from(handles_in_use.clamp(1, f.handles) - 1);
        frontiers += match f.isolation {
            flash::Isolation::Persistent => 2 * extra,
            flash::Isolation::Initial => extra,
        };
    }
    Some(crate::analytic::effective_op(
        &c.geometry,
        c.gc.free_blocks,
        frontiers,
    ))
}

/// Measured-phase requests generator: closed-loop stream 0.
struct Workload<'a> {
    gen: &'a mut SlotGen,
    request_bytes: u64,
    read_fraction: f64,
    remaining: u64,
    /// With `--separate`: writes below this byte offset (the hot region) on handle 1.
    hot_bytes: Option<u64>,
    /// On a zoned drive: the zone size, and which zones hold data; a sequential write that
    /// comes back to the start of a written zone resets it first (a TRIM of the whole
    /// zone), as a host's circular log on zones does.
    zones: Option<(u64, &'a mut Vec<bool>)>,
    /// A write held back behind the zone reset just issued.
    pending: Option<Command>,
}

fn request(cmd: Command) -> Request {
    Request {
        stream: 0,
        cmd,
        think_ns: 0,
        at_ns: 0,
        after: None,
    }
}

impl Iterator for Workload<'_> {
    type Item = Request;
    #[inline]
    fn next(&mut self) -> Option<Request> {
        if let Some(cmd) = self.pending.take() {
            return Some(request(cmd));
        }
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (offset, len) = self.gen.next_request(self.request_bytes);
        let is_read = self.read_fraction > 0.0 && self.gen.unit_f64() < self.read_fraction;
        let cmd = if is_read {
            Command::read(offset, len)
        } else {
            let handle = self.hot_bytes.map_or(0, |h| (offset < h) as u16);
            Command::write(offset, len).on_handle(handle)
        };
        if let Some((zone_bytes, written)) = &mut self.zones {
            let z = (offset / *zone_bytes) as usize;
            if !is_read && offset % *zone_bytes == 0 && written[z] {
                self.pending = Some(cmd);
                return Some(request(Command::trim(offset, *zone_bytes)));
            }
            written[z] = true;
        }
        Some(request(cmd))
    }
}

/// Issues `requests` requests drawn from `gen` (of `request_bytes`, or of the pattern's
/// sizes) on the WAF-only path, in batches; a `read_fraction` of them are reads, which that
/// path skips (the draw still happens, so the address sequence matches a timed run's).
/// Returns (reads, writes, bytes written).
#[allow(clippy::too_many_arguments)]
fn write_untimed_requests(
    ssd: &mut flash::Ssd,
    gen: &mut SlotGen,
    request_bytes: u64,
    requests: u64,
    read_fraction: f64,
    hot_bytes: Option<u64>,
    progress: &mut dyn FnMut(u64),
) -> Result<(u64, u64, u64), FlashError> {
    let unit = ssd.config().geometry.mapping_unit_bytes as u64;
    let mut writes = 0u64;
    let mut write_bytes = 0u64;
    let mut lpns: Vec<u32> = Vec::with_capacity(8192);
    let mut handles: Vec<u16> = Vec::new();
    let mut done = 0u64;
    while done < requests {
        if trace::cancel::requested() {
            return Err(FlashError::Config(trace::cancel::INTERRUPTED.into()));
        }
        lpns.clear();
        handles.clear();
        while done < requests && lpns.len() < 4096 {
            let (offset, len) = gen.next_request(request_bytes);
            let is_read = read_fraction > 0.0 && gen.unit_f64() < read_fraction;
            done += 1;
            if !is_read {
                writes += 1;
                write_bytes += len;
                // A write of part of a mapping unit programs the whole unit (the drive's
                // read-modify-write; its read is not charged).
                let first = offset / unit;
                let end = (offset + len).div_ceil(unit);
                lpns.extend((first..end).map(|l| l as u32));
                if let Some(h) = hot_bytes {
                    handles.resize(lpns.len(), (offset < h) as u16);
                }
            }
        }
        if hot_bytes.is_some() {
            ssd.write_units_untimed_placed(&lpns, &handles)?;
        } else {
            ssd.write_units_untimed(&lpns)?;
        }
        if done % (1 << 20) < 4096 {
            progress(done);
        }
    }
    Ok((requests - writes, writes, write_bytes))
}

/// The most requests one phase of a run may ask for (about an hour of the timed path):
/// more is a typo such as `--read-fraction 0.9999999999`, not an experiment.
pub const MAX_REQUESTS: u64 = 10_000_000_000;

/// A run's request counts, from its spec and the drive's logical bytes.
#[derive(Debug, Clone, Copy)]
struct Requests {
    /// Bytes of each request.
    rb: u64,
    /// Request-sized slots the workload addresses.
    slots: u64,
    /// Requests of the measured phase, the warm-up and the timed warm-up.
    measured: u64,
    warmup: u64,
    timed_warmup: u64,
}

/// Refuses a spec whose mix or volumes make no run.
fn check_volumes(spec: &SimSpec) -> Result<(), crate::LabError> {
    if !(0.0..=1.0).contains(&spec.read_fraction) {
        return Err(format!("--read-fraction {} must lie in [0, 1]", spec.read_fraction).into());
    }
    if !(spec.writes_x > 0.0
        && spec.writes_x.is_finite()
        && spec.warmup_x >= 0.0
        && spec.warmup_x.is_finite())
    {
        return Err("--writes must be positive and --warmup non-negative (multiples of the capacity, e.g. 2x)".into());
    }
    if !(spec.timed_warmup_x >= 0.0 && spec.timed_warmup_x.is_finite()) {
        return Err("--timed-warmup must be a non-negative volume".into());
    }
    if spec.timed_warmup_x > 0.0 && spec.precondition.is_none() {
        return Err(
            "--timed-warmup follows --precondition (without it, --warmup warms the drive up)"
                .into(),
        );
    }
    Ok(())
}

/// The requests of each phase on a drive of `logical` bytes, or why the spec asks for
/// none or too many.
fn requests(spec: &SimSpec, logical: u64) -> Result<Requests, crate::LabError> {
    let rb = spec.request_bytes;
    if rb == 0 || !rb.is_multiple_of(512) {
        return Err(format!("--request-size {rb} must be a positive multiple of 512 bytes").into());
    }
    if rb > logical {
        return Err(format!(
            "--request-size {rb} is larger than the drive's {logical} logical bytes (--capacity)"
        )
        .into());
    }
    let occupancy = spec.precondition.map_or(1.0, |(_, f)| f);
    if !(occupancy > 0.0 && occupancy <= 1.0) {
        return Err(format!(
            "--occupancy {occupancy} must be above 0 and at most 1 (a share of the logical space)"
        )
        .into());
    }
    let slots = ((logical as f64 * occupancy) as u64 / rb).max(1);
    if spec.pattern == Pattern::Jesd219 && slots * rb < 64 << 10 {
        return Err(format!(
            "--workload jesd219 needs at least 64 KiB to address (its largest transfer); the space it addresses (capacity x --occupancy) is {} bytes",
            slots * rb
        )
        .into());
    }
    let volume_requests = (spec.writes_x * logical as f64 / rb as f64).ceil() as u64;
    let measured = if spec.read_fraction < 1.0 {
        (volume_requests as f64 / (1.0 - spec.read_fraction)).ceil() as u64
    } else {
        volume_requests
    };
    let warmup_requests = (spec.warmup_x * logical as f64 / rb as f64).ceil() as u64;
    // Writes of the timed warm-up; with reads, as many requests as the workload's mix makes.
    let timed_warmup_requests = if spec.timed_warmup_x > 0.0 {
        let writes = spec.timed_warmup_x * logical as f64 / rb as f64;
        (writes / (1.0 - spec.read_fraction).max(1e-9)).ceil() as u64
    } else {
        0
    };
    for (what, n) in [("measured", measured), ("warm-up", warmup_requests)] {
        if n > MAX_REQUESTS {
            return Err(format!(
                "--writes {}x, --warmup {}x and --read-fraction {} ask for {n} {what} requests of {rb} bytes; a run is limited to {MAX_REQUESTS}: lower them",
                spec.writes_x, spec.warmup_x, spec.read_fraction
            ).into());
        }
    }
    Ok(Requests {
        rb,
        slots,
        measured,
        warmup: warmup_requests,
        timed_warmup: timed_warmup_requests,
    })
}

/// With `--separate`: where the hot region ends (writes below it go to handle 1); checks
/// the workload and the drive allow it.
fn hot_region(
    spec: &SimSpec,
    dev: &AnyDevice,
    gen: &SlotGen,
    rb: u64,
) -> Result<Option<u64>, crate::LabError> {
    Ok(if spec.separate {
        if !matches!(spec.pattern, Pattern::HotCold { .. }) {
            return Err(format!(
                "--separate puts the hot region's writes on handle 1: it needs --workload hotcold:R/F, not {}",
                spec.pattern
            )
            .into());
        }
        let handles = match &dev {
            AnyDevice::Ssd(s) => s.handles(),
            _ => 0,
        };
        if handles < 2 {
            return Err(format!(
                "--separate needs an FDP drive with at least 2 placement handles (--drive fdp --handles 2); preset {} has {}",
                spec.preset.name,
                if handles == 0 { "no FDP (a zoned drive or a disk)".to_string() } else { format!("{handles} handle") }
            )
            .into());
        }
        Some(gen.hot_slots() * rb)
    } else {
        None
    })
}

/// On a zoned drive, its zone size, after checking sim can run it (sequential writes that
/// fill zones, no preconditioning).
fn zone_size(spec: &SimSpec, dev: &AnyDevice, rb: u64) -> Result<Option<u64>, crate::LabError> {
    Ok(match dev {
        AnyDevice::Zoned(z) => {
            let zb = z.zone_size_bytes();
            if spec.pattern != Pattern::Sequential || spec.read_fraction > 0.0 {
                return Err(format!(
                    "a zoned drive takes writes at each zone's write pointer only: sim runs it with --workload sequential and --read-fraction 0 (resetting each zone before writing it again), not --workload {} with --read-fraction {}",
                    spec.pattern, spec.read_fraction
                )
                .into());
            }
            if !zb.is_multiple_of(rb) || z.zone_capacity_bytes() != zb {
                return Err(format!(
                    "on a zoned drive sim's --request-size ({rb} bytes) must divide the zone size ({zb} bytes) and zones must have their full capacity (sim's sequential writes fill every zone to its end)"
                )
                .into());
            }
            if spec.precondition.is_some() {
                return Err("a zoned drive keeps no mapping to age: use no --precondition (sim writes its zones in turn, resetting each before writing it again)".into());
            }
            Some(zb)
        }
        _ => None,
    })
}

/// The result of a run that ended with the drive's counters `stats`.
fn sim_result(
    spec: &SimSpec,
    dev: &AnyDevice,
    logical: u64,
    stats: flash::DeviceStats,
    preconditioned: Option<crate::precondition::PreconditionReport>,
) -> Result<SimResult, crate::LabError> {
    let wear = match &dev {
        AnyDevice::Ssd(ssd) => ssd.wear_report(Some(stats.host_write_bytes)),
        AnyDevice::Zoned(z) => z.wear_report(),
        AnyDevice::Hdd(_) => None,
    };
    let (physical_bytes, op, gc, effective) = match &spec.preset.device {
        flash::DeviceConfig::Ssd(c) => (
            Some(c.geometry.physical_bytes()),
            Some(c.geometry.op),
            Some(c.gc.policy.to_string()),
            effective_op(c, if spec.separate { 2 } else { 1 }),
        ),
        flash::DeviceConfig::Hdd(_) => (None, None, None, None),
    };
    Ok(SimResult {
        preset: spec.preset.name.clone(),
        workload: spec.pattern.to_string(),
        seed: spec.seed,
        timing: spec.timing,
        logical_bytes: logical,
        physical_bytes,
        op,
        effective_op: effective,
        gc,
        precondition: preconditioned,
        stats,
        wear,
    })
}

/// The measured phase's workload: its generator, request size, requests, hot region (with
/// `--separate`) and, on a zoned drive, its zones.
struct Phase<'a> {
    gen: &'a mut SlotGen,
    rb: u64,
    requests: u64,
    hot_bytes: Option<u64>,
    zones: Option<(u64, &'a mut Vec<bool>)>,
}

/// Runs the measured phase from `start_ns`: on the WAF-only path (returning its reads,
/// writes and bytes written, which it does not time) or timed, closed loop at the spec's
/// queue depth.
fn measure(
    spec: &SimSpec,
    dev: &mut AnyDevice,
    p: Phase,
    start_ns: u64,
    progress: &mut dyn FnMut(u64, u64),
    record: Option<&mut Record>,
) -> Result<Option<(u64, u64, u64)>, crate::LabError> {
    let measured = p.requests;
    if let (AnyDevice::Ssd(ssd), false) = (&mut *dev, spec.timing) {
        let ops = write_untimed_requests(
            ssd,
            p.gen,
            p.rb,
            measured,
            spec.read_fraction,
            p.hot_bytes,
            &mut |n| progress(n, measured),
        )
        .map_err(|e| e.to_string())?;
        return Ok(Some(ops));
    }
    let w = Workload {
        gen: p.gen,
        request_bytes: p.rb,
        read_fraction: spec.read_fraction,
        remaining: measured,
        hot_bytes: p.hot_bytes,
        zones: p.zones,
        pending: None,
    };
    match record {
        None => {
            trace::replay_closed(dev, vec![w], spec.queue_depth, start_ns, &mut |n| {
                progress(n, measured)
            })?;
        }
        Some(r) => {
            // A reborrow of the callback for the timeline's lifetime.
            let each: Option<&mut dyn FnMut(&Completion)> = match &mut r.each {
                Some(f) => Some(&mut **f),
                None => None,
            };
            let mut t = Timeline::new(dev, r.interval_ns, start_ns, each)?;
            trace::replay_closed(&mut t, vec![w], spec.queue_depth, start_ns, &mut |n| {
                progress(n, measured)
            })?;
            r.recording = Some(t.into_recording());
        }
    }
    Ok(None)
}

/// What to record of the measured phase over time (`--timeseries`, `--request-log`).
pub struct Record<'a> {
    pub interval_ns: u64,
    /// Told every completed request.
    pub each: Option<&'a mut dyn FnMut(&Completion)>,
    recording: Option<Recording>,
}

impl<'a> Record<'a> {
    pub fn new(interval_ns: u64, each: Option<&'a mut dyn FnMut(&Completion)>) -> Self {
        Record {
            interval_ns,
            each,
            recording: None,
        }
    }
}

/// Runs a simulation. `progress(done, total)` is called now and then with request counts.
pub fn run(
    spec: &SimSpec,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SimResult, crate::LabError> {
    Ok(run_recorded(spec, progress, None)?.0)
}

/// [`run`], recording the measured phase over time as `record` asks (on the timed path
/// only: the WAF-only path has no time to cut into intervals).
pub fn run_recorded(
    spec: &SimSpec,
    progress: &mut dyn FnMut(u64, u64),
    mut record: Option<Record>,
) -> Result<(SimResult, Option<TimeSeries>), crate::LabError> {
    if record.is_some() && !spec.timing {
        return Err("--timeseries and --request-log record the run over virtual time: they need --timing on (the WAF-only path has no time)".into());
    }
    check_volumes(spec)?;
    let mut dev = spec.preset.build()?;
    if let AnyDevice::Ssd(s) = &mut dev {
        s.seed_errors(errors_seed(spec.seed));
    }
    let logical = dev.logical_bytes();
    let Requests {
        rb,
        slots,
        measured,
        warmup: warmup_requests,
        timed_warmup: timed_warmup_requests,
    } = requests(spec, logical)?;
    let mut gen = SlotGen::new(spec.pattern, slots, spec.seed)?;
    let err = |e: FlashError| e.to_string();
    let hot_bytes = hot_region(spec, &dev, &gen, rb)?;
    let mut zones_written = Vec::new();
    let zone_bytes = zone_size(spec, &dev, rb)?;
    if let AnyDevice::Zoned(z) = &dev {
        zones_written = vec![false; z.zones() as usize];
    }
    let mut preconditioned = None;
    // Where the measured phase starts in virtual time: 0 after the WAF-only path's fill
    // and warm-up (which take no time), after the warm-up on a zoned drive.
    let mut warm_end_ns = 0;
    if let Some(zb) = zone_bytes {
        // Warm-up on the timed path (a zoned drive has no WAF-only one).
        let w = Workload {
            gen: &mut gen,
            request_bytes: rb,
            read_fraction: 0.0,
            remaining: warmup_requests,
            hot_bytes: None,
            zones: Some((zb, &mut zones_written)),
            pending: None,
        };
        warm_end_ns = trace::replay_closed(&mut dev, vec![w], spec.queue_depth, 0, &mut |_| {
            progress(0, measured)
        })?
        .end_ns;
        dev.reset_stats();
    } else if let Some((mode, occupancy)) = spec.precondition {
        preconditioned = Some(crate::precondition::precondition(
            &mut dev,
            mode,
            occupancy,
            spec.read_fraction,
            spec.seed,
        )?);
        if spec.idle_after_precondition {
            warm_end_ns = dev.rested_ns();
            dev.reset_stats();
        }
        if timed_warmup_requests > 0 {
            let w = Workload {
                gen: &mut gen,
                request_bytes: rb,
                read_fraction: spec.read_fraction,
                remaining: timed_warmup_requests,
                hot_bytes,
                zones: None,
                pending: None,
            };
            warm_end_ns = trace::replay_closed(
                &mut dev,
                vec![w],
                spec.queue_depth,
                warm_end_ns,
                &mut |_| progress(0, measured),
            )?
            .end_ns;
            dev.reset_stats();
        }
    } else if let AnyDevice::Ssd(ssd) = &mut dev {
        // Fill sequentially in large writes, then warm up, on the WAF-only path.
        crate::precondition::fill(ssd, logical).map_err(err)?;
        write_untimed_requests(
            ssd,
            &mut gen,
            rb,
            warmup_requests,
            0.0,
            hot_bytes,
            &mut |_| progress(0, measured),
        )
        .map_err(err)?;
        ssd.reset_stats();
    }
    let phase = Phase {
        gen: &mut gen,
        rb,
        requests: measured,
        hot_bytes,
        zones: zone_bytes.map(|zb| (zb, &mut zones_written)),
    };
    let untimed_ops = measure(
        spec,
        &mut dev,
        phase,
        warm_end_ns,
        progress,
        record.as_mut(),
    )?;
    progress(measured, measured);
    let (stats, series) = end_run(&mut dev, untimed_ops, record)?;
    Ok((
        sim_result(spec, &dev, logical, stats, preconditioned)?,
        series,
    ))
}

/// After the measured phase: the FTL's invariants checked, deferred work settled, the
/// drive's counters (with the WAF-only path's request counts, `untimed_ops`) and the
/// recording closed.
fn end_run(
    dev: &mut AnyDevice,
    untimed_ops: Option<(u64, u64, u64)>,
    record: Option<Record>,
) -> Result<(DeviceStats, Option<TimeSeries>), crate::LabError> {
    if let AnyDevice::Ssd(ssd) = &*dev {
        ssd.check_counts()
            .map_err(|e| format!("internal error, FTL invariant broken: {e}"))?;
    }
    dev.settle();
    let mut stats = dev.stats();
    let series = match record.and_then(|r| r.recording) {
        Some(rec) => Some(rec.finish(&stats)?),
        None => None,
    };
    if let Some((reads, writes, write_bytes)) = untimed_ops {
        // The WAF-only path has no latencies, but it did issue these requests.
        stats.host_ops = reads + writes;
        stats.host_write_bytes = write_bytes;
    }
    Ok((stats, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(timing: bool) -> SimSpec {
        let overrides = SsdOverrides {
            capacity_bytes: Some(256 << 20),
            op: Some(0.15),
            ..Default::default()
        };
        SimSpec {
            preset: overrides.apply(Preset::load("x25e").unwrap()).unwrap(),
            pattern: Pattern::Uniform,
            request_bytes: 4096,
            read_fraction: 0.0,
            queue_depth: 16,
            writes_x: 1.0,
            warmup_x: 1.0,
            timed_warmup_x: 0.0,
            timing,
            seed: 9,
            precondition: None,
            separate: false,
            idle_after_precondition: false,
        }
    }

    #[test]
    fn preconditioning_replaces_fill_and_warm_up_and_the_workload_stays_in_the_filled_space() {
        use crate::precondition::Precondition;
        let mut s = spec(false);
        s.precondition = Some((Precondition::Steady { max_x: 3.0 }, 0.5));
        let r = run(&s, &mut |_, _| {}).unwrap();
        let p = r.precondition.as_ref().unwrap();
        assert_eq!(p.filled_bytes, 128 << 20);
        assert!(p.rounds >= 5);
        // Half the space holds data: more over-provisioning in effect, less amplification
        // than the full drive's.
        let full = run(&spec(false), &mut |_, _| {}).unwrap();
        assert!(
            r.stats.waf.unwrap() < full.stats.waf.unwrap(),
            "{:?} vs {:?}",
            r.stats.waf,
            full.stats.waf
        );
        s.precondition = Some((Precondition::Fill, 0.0));
        assert!(run(&s, &mut |_, _| {})
            .unwrap_err()
            .to_string()
            .contains("--occupancy"));
    }

    #[test]
    fn pages_per_block_given_wins_over_capacity_scaling() {
        let given = SsdOverrides {
            capacity_bytes: Some(4 << 30),
            pages_per_block: Some(64),
            ..Default::default()
        };
        let p = given.apply(Preset::load("nvme").unwrap()).unwrap();
        let flash::DeviceConfig::Ssd(c) = &p.device else {
            panic!("nvme is an SSD")
        };
        assert_eq!(c.geometry.pages_per_block, 64);
        assert!(p.notes.is_empty(), "no stale scaling note: {:?}", p.notes);
        // A shape that cannot fit is an error naming the flag, not a silent change.
        let too_big = SsdOverrides {
            pages_per_block: Some(256),
            ..given
        };
        let e = too_big
            .apply(Preset::load("nvme").unwrap())
            .and_then(|p| p.build())
            .err()
            .expect("rejected")
            .to_string();
        assert!(e.contains("--pages-per-block"), "{e}");
    }

    /// Uniform random writes with FIFO cleaning on the nvme preset scaled to 4 GiB (16 dies
    /// of 183-219 blocks of 1.5 MiB): Desnoyers' model at the nominal op is far off at low
    /// op (the drive amplifies 27% more at 0.07: the model has no per-die reserve), and
    /// follows the drive within 3% (measured 1.2% / 0.9% / 0.6%)
    /// at the effective op the reserve leaves (2 free blocks + 2 open frontiers, half
    /// written on average, per die; derived, not fitted).
    #[test]
    fn uniform_fifo_follows_the_model_at_the_effective_op() {
        use crate::analytic::fifo_waf;
        for op in [0.07, 0.15, 0.28] {
            let overrides = SsdOverrides {
                capacity_bytes: Some(4 << 30),
                op: Some(op),
                gc: Some(GcPolicy::Fifo),
                ..Default::default()
            };
            let spec = SimSpec {
                preset: overrides.apply(Preset::load("nvme").unwrap()).unwrap(),
                writes_x: 2.0,
                warmup_x: 2.0,
                timed_warmup_x: 0.0,
                ..spec(false)
            };
            if op == 0.07 {
                // Scaling counts blocks per die at the op given, not the preset's.
                assert!(
                    spec.preset
                        .notes
                        .iter()
                        .any(|n| n.contains("183 blocks per die")),
                    "{:?}",
                    spec.preset.notes
                );
            }
            let r = run(&spec, &mut |_, _| {}).unwrap();
            let (waf, eff) = (r.stats.waf.unwrap(), r.effective_op.unwrap());
            eprintln!(
                "op {op}: WAF {waf:.3}, model at op {:.3}, effective op {eff:.4}, model there {:.3}",
                fifo_waf(op),
                fifo_waf(eff)
            );
            assert!(eff < op, "the reserve costs spare space: {eff} vs {op}");
            assert!(
                (waf / fifo_waf(eff) - 1.0).abs() < 0.03,
                "op {op}: WAF {waf:.3} vs the model at effective op {eff:.4}: {:.3}",
                fifo_waf(eff)
            );
            if op == 0.07 {
                assert!(
                    waf > fifo_waf(op) * 1.15,
                    "the nominal op's model fails here: {waf:.3} vs {:.3}",
                    fifo_waf(op)
                );
            }
        }
    }

    /// The waf experiment's drive (one die, 256 pages of 4 KiB per block, greedy, one free
    /// block) at 512 MiB, as FDP with `handles`.
    fn fdp_spec(op: f64, hot: (f64, f64), handles: u16, separate: bool) -> SimSpec {
        let mut p = Preset::load("x25e").unwrap();
        let c = p.ssd_config_mut().unwrap();
        c.geometry = crate::experiments::waf::geometry(512 << 20, 256, op);
        c.gc.policy = GcPolicy::Greedy;
        c.gc.free_blocks = 1;
        c.gc.paced = false;
        c.fdp = Some(Box::new(flash::FdpConfig::new(handles)));
        SimSpec {
            preset: p,
            pattern: Pattern::HotCold {
                hot_write_fraction: hot.0,
                hot_space_fraction: hot.1,
            },
            writes_x: 3.0,
            warmup_x: 3.0,
            timed_warmup_x: 0.0,
            separate,
            ..spec(false)
        }
    }

    /// Hot/cold writes with the hot region on its own handle against the separated model
    /// ([`crate::analytic::separated_waf`]: every stream at the drive's spare space, i.e.
    /// uniform random writes' WAF under FIFO) read at the effective op (less the die's free
    /// block and four half-written frontiers: 0.6% of the logical space here), and the same
    /// writes on one handle. Measured 2026-11-25 (one handle / separated / model at the
    /// effective op): op 0.07 80/20 8.153 / 7.795 / 8.431; op 0.15 80/20 4.291 / 3.986 /
    /// 4.142, 95/5 4.718 / 3.908 / 4.142, 90/10 4.546 / 3.805 / 4.142; op 0.28 90/10 2.956 /
    /// 2.521 / 2.511, 80/20 2.720 / 2.470 / 2.511. Greedy never amplifies more than the FIFO
    /// model (at most 0.4% above it) and does better the lower the op and the stronger the
    /// skew (7.5-8% below at op 0.07 and 90/10 at 0.15): greedy beats FIFO by itself, and
    /// its victims split the spare space towards the hot handle, beyond the model's share
    /// by space. Within 5% where the skew or the op is moderate. (Read at the nominal op the
    /// model had matched 80/20 within 1%: the reserve's +8% and greedy's -8% cancelled.)
    #[test]
    fn hot_cold_by_handle_follows_the_separated_model_and_beats_one_handle() {
        use crate::analytic::{optimal_separated_fifo_waf, separated_waf, Stream};
        let cases = [
            (0.07, (0.8, 0.2), false),
            (0.15, (0.8, 0.2), true),
            (0.15, (0.95, 0.05), false),
            (0.28, (0.9, 0.1), true),
            (0.28, (0.8, 0.2), true),
            (0.15, (0.9, 0.1), false),
        ];
        for (op, hot, within) in cases {
            let waf = |handles, separate| {
                run(&fdp_spec(op, hot, handles, separate), &mut |_, _| {})
                    .unwrap()
                    .stats
                    .waf
                    .unwrap()
            };
            let (mixed, separated) = (waf(1, false), waf(2, true));
            let streams = [
                Stream {
                    write_share: hot.0,
                    space_share: hot.1,
                },
                Stream {
                    write_share: 1.0 - hot.0,
                    space_share: 1.0 - hot.1,
                },
            ];
            let c = fdp_spec(op, hot, 2, true).preset;
            let eff = effective_op(c.ssd_config().unwrap(), 2).unwrap();
            let model = separated_waf(eff, &streams);
            let best = optimal_separated_fifo_waf(eff, &streams);
            eprintln!(
                "op {op} hot {hot:?}: one handle {mixed:.3}, separated {separated:.3}, model at op {:.3}, effective op {eff:.4}, model there {model:.3} (optimal split {best:.3})",
                separated_waf(op, &streams)
            );
            if within {
                assert!(
                    (separated - model).abs() / model < 0.05,
                    "op {op} {hot:?}: separated {separated:.3} vs model {model:.3}"
                );
            }
            assert!(
                separated < model * 1.01,
                "op {op} {hot:?}: greedy's separated {separated:.3} vs FIFO's model {model:.3}"
            );
            assert!(
                separated < mixed * 0.96,
                "op {op} {hot:?}: separated {separated:.3} vs one handle {mixed:.3}"
            );
            assert!(
                separated > best,
                "below the optimal split's bound {best:.3}"
            );
        }
    }

    #[test]
    fn separation_and_zoned_runs_refuse_what_they_cannot_do() {
        let mut s = fdp_spec(0.15, (0.9, 0.1), 1, true);
        let e = run(&s, &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("--drive fdp --handles 2"), "{e}");
        s = fdp_spec(0.15, (0.9, 0.1), 2, true);
        s.pattern = Pattern::Uniform;
        let e = run(&s, &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("hotcold"), "{e}");
        let zoned = |pattern| {
            let o = SsdOverrides {
                capacity_bytes: Some(256 << 20),
                drive: Some(Drive::Zoned(flash::ZonedConfig::default())),
                ..Default::default()
            };
            SimSpec {
                preset: o.apply(Preset::load("nvme").unwrap()).unwrap(),
                pattern,
                request_bytes: 64 << 10,
                queue_depth: 4,
                ..spec(true)
            }
        };
        let e = run(&zoned(Pattern::Uniform), &mut |_, _| {})
            .unwrap_err()
            .to_string();
        assert!(e.contains("--workload sequential"), "{e}");
        // Sequential writes run, resetting each zone before writing it again: WAF 1.
        let r = run(&zoned(Pattern::Sequential), &mut |_, _| {}).unwrap();
        assert_eq!(r.stats.waf, Some(1.0));
        let z = r.stats.zoned.unwrap();
        assert!(z.resets >= z.zones as u64, "{z:?}");
        assert_eq!(r.stats.gc_copied_pages, 0);
        // Aging a zoned drive is refused by name, not ignored.
        let aged = SsdOverrides {
            capacity_bytes: Some(256 << 20),
            drive: Some(Drive::Zoned(flash::ZonedConfig::default())),
            age: Some("pe=1000,cell=tlc".parse().unwrap()),
            ..Default::default()
        };
        let e = aged
            .apply(Preset::load("nvme").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("zoned drive with aging"), "{e}");
    }

    #[test]
    fn runs_that_would_never_end_are_refused() {
        let mut s = spec(false);
        s.read_fraction = 0.9999999999;
        let e = run(&s, &mut |_, _| {}).unwrap_err().to_string();
        assert!(
            e.contains("--read-fraction") && e.contains("limited"),
            "{e}"
        );
        let mut s = spec(false);
        s.writes_x = 1e9;
        assert!(run(&s, &mut |_, _| {})
            .unwrap_err()
            .to_string()
            .contains("limited"));
    }

    /// 70/30 random 4 KiB on `preset` at `queue_depth`, preconditioned to steady state at
    /// 90% occupancy, `writes_x` of the capacity measured, with no warm-up.
    fn steady_mixed(preset: Preset, queue_depth: u32, writes_x: f64, seed: u64) -> SimSpec {
        SimSpec {
            preset,
            pattern: Pattern::Uniform,
            request_bytes: 4096,
            read_fraction: 0.7,
            queue_depth,
            writes_x,
            warmup_x: 0.0,
            timed_warmup_x: 0.0,
            timing: true,
            seed,
            precondition: Some((
                crate::precondition::Precondition::Steady { max_x: 5.0 },
                0.9,
            )),
            separate: false,
            idle_after_precondition: false,
        }
    }

    #[test]
    fn a_rested_drive_has_folded_its_slc_cache_before_the_reads_start() {
        // The 980 filled (untimed: its first 16% lands in the SLC cache), then random 4 KiB
        // reads at QD1 with the map in DRAM: without a rest, dies idle between reads start
        // folding and reads wait behind the folds; rested, every read is one flash read.
        let overrides = SsdOverrides {
            capacity_bytes: Some(2 << 30),
            mapping_cache_bytes: Some(0),
            ..Default::default()
        };
        let preset = overrides.apply(Preset::load("980").unwrap()).unwrap();
        let spec = |rest: bool| SimSpec {
            read_fraction: 1.0,
            queue_depth: 1,
            writes_x: 20_000.0 * 4096.0 / (2u64 << 30) as f64,
            precondition: Some((crate::precondition::Precondition::Fill, 1.0)),
            idle_after_precondition: rest,
            ..steady_mixed(preset.clone(), 1, 0.0, 3)
        };
        let tired = run(&spec(false), &mut |_, _| {}).unwrap();
        let rested = run(&spec(true), &mut |_, _| {}).unwrap();
        let (t, r) = (&tired.stats.read_latency_ns, &rested.stats.read_latency_ns);
        assert_eq!(r.count, t.count);
        assert!(t.max > r.max, "tired {t:?} rested {r:?}");
        // Rested, every read costs the same: tR, the transfers and the command overhead.
        assert_eq!(r.p50, r.max, "{r:?}");
        assert!(r.mean < t.mean);
    }

    /// 70/30 random 4 KiB at queue depth 32 on a steady 840 Pro at 90% occupancy, under
    /// `scheduler`, with the write buffer of docs/sources.md's rule (2 superpages x 32 dies).
    fn mixed_steady(scheduler: flash::ssd::SchedulerConfig) -> SimResult {
        let overrides = SsdOverrides {
            capacity_bytes: Some(1 << 30),
            write_cache_bytes: Some(1 << 20),
            scheduler: Some(scheduler),
            ..Default::default()
        };
        let preset = overrides.apply(Preset::load("840pro").unwrap()).unwrap();
        run(&steady_mixed(preset, 32, 0.25, 3), &mut |_, _| {}).unwrap()
    }

    #[test]
    fn reads_overtake_queued_gc_under_the_priority_scheduler_and_the_ftl_decides_the_same() {
        let fifo = mixed_steady(flash::ssd::SchedulerConfig::fifo());
        let prio = mixed_steady(flash::ssd::SchedulerConfig::priority());
        let p99 = |r: &SimResult| {
            (
                r.stats.read_latency_ns.p99 as f64,
                r.stats.write_latency_ns.p99 as f64,
            )
        };
        let ((fr, fw), (pr, pw)) = (p99(&fifo), p99(&prio));
        // The null model: a read waits behind every GC step issued before it, as a write
        // waits for the buffer to drain through them.
        assert!(fr >= 0.9 * fw, "fifo: read p99 {fr} vs write p99 {fw}");
        // Priority: reads go before queued GC steps and buffered programs and suspend
        // programs and erases; writes wait for the buffer, which drains through GC. (On
        // the 840 Pro reads then queue at QD32 to about a write's wait for a program's
        // end: about the same as writes, not half; docs/timing.md.)
        assert!(pr < 0.5 * fr, "read p99 {pr} (priority) vs {fr} (fifo)");
        assert!(pr <= 1.25 * pw, "priority: read p99 {pr} vs write p99 {pw}");
        assert!(prio.stats.write_buffer_waits > 0);
        assert!(prio.stats.maintenance_suspensions > 0);
        assert_eq!(fifo.stats.maintenance_suspensions, 0);
        // Only when the FTL's operations occupy the dies moves, not what it does (the 840
        // Pro has no SLC cache, whose folds depend on idle time).
        assert_eq!(fifo.stats.flash_write_pages, prio.stats.flash_write_pages);
        assert_eq!(fifo.stats.erases, prio.stats.erases);
        assert_eq!(
            fifo.stats.read_latency_ns.count,
            prio.stats.read_latency_ns.count
        );
        let again = mixed_steady(flash::ssd::SchedulerConfig::priority());
        assert_eq!(
            serde_json::to_string(&prio).unwrap(),
            serde_json::to_string(&again).unwrap(),
            "the same seed gives the same numbers"
        );
    }

    #[test]
    fn a_timed_warm_up_after_preconditioning_brings_the_slc_cache_to_the_workload_s_state() {
        // Steady preconditioning has no idle time and leaves the MX500's SLC cache full; at
        // queue depth 1 the workload's idle time folds it. Measured right away, the writes
        // see that transient; after a timed warm-up, the cache's steady state (more writes
        // in SLC). The warm-up is not measured.
        let run_with = |timed_warmup_x: f64| {
            let preset = SsdOverrides {
                capacity_bytes: Some(2 << 30),
                ..Default::default()
            }
            .apply(Preset::load("mx500").unwrap())
            .unwrap();
            let s = SimSpec {
                timed_warmup_x,
                ..steady_mixed(preset, 1, 1.0 / 64.0, 1)
            };
            run(&s, &mut |_, _| {})
        };
        let (cold, warm) = (run_with(0.0).unwrap(), run_with(0.5).unwrap());
        assert_eq!(
            cold.stats.host_ops, warm.stats.host_ops,
            "the warm-up is not measured"
        );
        assert!(
            warm.stats.slc_write_bytes > cold.stats.slc_write_bytes,
            "SLC writes: {} after the warm-up, {} without",
            warm.stats.slc_write_bytes,
            cold.stats.slc_write_bytes
        );
        // Without preconditioning there is nothing for it to follow.
        let mut s = SimSpec {
            timed_warmup_x: 0.5,
            ..spec(true)
        };
        s.precondition = None;
        let e = run(&s, &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("--timed-warmup follows --precondition"), "{e}");
    }

    #[test]
    fn with_their_write_buffers_reads_overtake_writes_on_the_mx500_840_pro_and_980() {
        // Issue 43's read-tail test at 4 GiB: 70/30 random 4 KiB at QD32, steady at 90%,
        // each drive as its preset is (with docs/sources.md's write buffer, two superpages
        // per die). Under the priority scheduler read p99 is at most half of write p99 on
        // the MX500 (writes wait for the flash, reads overtake and suspend its programs).
        // On the 840 Pro it is not: writes wait for a program's end (p99 ~1.2 ms) and reads
        // queue at QD32 on its dies to about the same (1.06x at 4 GiB, 1.20x since paced
        // dies keep their own phase), so only "about the same" (within 25%) is asserted;
        // docs/timing.md says why. The 980 at 4 GiB is not a faithful copy of the full
        // drive (its 16 translation frontiers hold 3x its translation pages, so its WAF is
        // 6.0 against 11.5; it meets the bound at full size and from 16 GiB up): 0.88x,
        // so only "faster than writes". Under the
        // null model (`fifo`) read p99 is at least 0.9 of write p99 everywhere. (`nvme` is
        // left out: its flash keeps up with these writes, so they never wait.)
        for (name, most) in [("mx500", 0.5), ("840pro", 1.25), ("980", 0.9)] {
            let p99 = |scheduler: flash::ssd::SchedulerConfig| {
                let preset = SsdOverrides {
                    capacity_bytes: Some(4 << 30),
                    scheduler: Some(scheduler),
                    ..Default::default()
                }
                .apply(Preset::load(name).unwrap())
                .unwrap();
                assert!(preset.ssd_config().unwrap().write_cache_bytes > 0, "{name}");
                let r = run(&steady_mixed(preset, 32, 0.25, 1), &mut |_, _| {}).unwrap();
                let s = &r.stats;
                (s.read_latency_ns.p99 as f64, s.write_latency_ns.p99 as f64)
            };
            let (read, write) = p99(flash::ssd::SchedulerConfig::priority());
            assert!(
                read <= most * write,
                "{name}: read p99 {read} vs write p99 {write}"
            );
            let (read, write) = p99(flash::ssd::SchedulerConfig::fifo());
            assert!(
                read >= 0.9 * write,
                "{name} fifo: read p99 {read} vs write p99 {write}"
            );
        }
    }

    #[test]
    fn a_full_write_buffers_write_tail_stays_steady_over_a_long_run() {
        // The MX500 with its write buffer at QD32, 70/30, steady at 90%: 40% of the 4 GiB
        // drive written (~1.4 M requests, ~38 s of virtual time), cut into 5 s intervals.
        // Admission counts every buffered program not yet ended, so the write p99 of each
        // interval stays within 2.5x of the others' (an earlier rule, which freed a
        // program's bytes at its expected end, let reads' delays lend the buffer bytes for
        // good: its per-interval write p99 wandered 25-101 ms, 4x) and writes are
        // acknowledged a small part of their wait earlier than their programs end.
        let preset = SsdOverrides {
            capacity_bytes: Some(4 << 30),
            ..Default::default()
        }
        .apply(Preset::load("mx500").unwrap())
        .unwrap();
        let spec = steady_mixed(preset, 32, 0.4, 1);
        let record = Record::new(5_000_000_000, None);
        let (r, series) = run_recorded(&spec, &mut |_, _| {}, Some(record)).unwrap();
        let rows = series.unwrap().rows;
        let full: Vec<f64> = rows[..rows.len() - 1]
            .iter()
            .map(|r| r.write.p99_us.unwrap())
            .collect();
        assert!(full.len() >= 6, "{} intervals", full.len());
        let (lo, hi) = full
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &v| (a.min(v), b.max(v)));
        assert!(hi <= 2.5 * lo, "write p99 per interval {full:?}");
        let s = &r.stats;
        assert!(
            s.write_buffer_waits > s.write_latency_ns.count / 2,
            "the buffer is full"
        );
        let slip = s.write_buffer_slip_ns / s.write_buffer_waits;
        assert!(
            slip * 4 < s.write_latency_ns.p50,
            "slip {slip} ns per write, write p50 {} ns",
            s.write_latency_ns.p50
        );
    }

    #[test]
    fn the_840_pro_scaled_to_16_gib_keeps_its_full_size_latencies() {
        // Issue 43 item 4 at a size CI affords (bench/scaling.py runs the whole table): 70/30
        // random 4 KiB at QD32, steady at 90%, the same 256 MiB of measured writes (~153k
        // reads) at 16 GiB and at the preset's full 256 GB; every read and write p50, p99
        // and p99.9 within ±15%. (The MX500's and 980's
        // figures need bench/scaling.py's 4 GiB window, too long for CI; there they keep all
        // but the four presets/scaling_limits.toml names: docs/timing.md.)
        let at = |capacity_bytes: Option<u64>| {
            let preset = SsdOverrides {
                capacity_bytes,
                ..Default::default()
            }
            .apply(Preset::load("840pro").unwrap())
            .unwrap();
            let writes_x = (256u64 << 20) as f64 / preset.logical_bytes() as f64;
            run(&steady_mixed(preset, 32, writes_x, 1), &mut |_, _| {})
                .unwrap()
                .stats
        };
        let (scaled, full) = (at(Some(16 << 30)), at(None));
        assert!(full.read_latency_ns.count >= 100_000);
        assert_eq!(scaled.read_latency_ns.count, full.read_latency_ns.count);
        for (what, s, f) in [
            ("read", &scaled.read_latency_ns, &full.read_latency_ns),
            ("write", &scaled.write_latency_ns, &full.write_latency_ns),
        ] {
            for (p, a, b) in [
                ("p50", s.p50, f.p50),
                ("p99", s.p99, f.p99),
                ("p99.9", s.p999, f.p999),
            ] {
                let r = a as f64 / b as f64;
                assert!(
                    (0.85..=1.15).contains(&r),
                    "{what} {p}: {a} ns at 16 GiB, {b} ns at full size ({r:.2}x)"
                );
            }
        }
    }

    #[test]
    fn same_seed_same_numbers() {
        let a = run(&spec(true), &mut |_, _| {}).unwrap();
        let b = run(&spec(true), &mut |_, _| {}).unwrap();
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        assert!(a.stats.simulated_ns > 0 && a.stats.waf.unwrap() > 1.0);
    }

    #[test]
    fn timing_off_gives_the_same_waf_as_timing_on() {
        // At queue depth 1 the timed run writes in generation order, as the untimed one does.
        let mut timed = spec(true);
        timed.queue_depth = 1;
        let t = run(&timed, &mut |_, _| {}).unwrap();
        let f = run(&spec(false), &mut |_, _| {}).unwrap();
        assert_eq!(t.stats.flash_write_pages, f.stats.flash_write_pages);
        assert_eq!(f.stats.simulated_ns, 0);
    }

    #[test]
    fn a_mapping_cache_is_set_scaled_and_removed_by_the_override() {
        let small = |bytes: Option<u64>| {
            let o = SsdOverrides {
                capacity_bytes: Some(1 << 30),
                mapping_cache_bytes: bytes,
                ..Default::default()
            };
            let p = o.apply(Preset::load("980").unwrap()).unwrap();
            p.ssd_config().unwrap().mapping_cache.clone()
        };
        // 64 MiB of HMB for 1 TB keeps its share at 1 GiB.
        let scaled = small(None).unwrap();
        assert_eq!(
            scaled.cache_bytes,
            (64u64 << 20) * (1 << 30) / 1_000_000_000_000
        );
        assert_eq!(scaled.location, flash::CacheLocation::Hmb);
        assert_eq!(small(Some(4096)).unwrap().cache_bytes, 4096);
        assert_eq!(small(Some(0)), None);
        // A preset without one gets one in DRAM.
        let o = SsdOverrides {
            mapping_cache_bytes: Some(1 << 20),
            ..Default::default()
        };
        let p = o.apply(Preset::load("nvme").unwrap()).unwrap();
        let mc = p.ssd_config().unwrap().mapping_cache.clone().unwrap();
        assert_eq!(mc.location, flash::CacheLocation::Dram);
    }

    #[test]
    fn a_cached_mapping_table_gives_the_same_numbers_and_the_same_waf_untimed() {
        let cached = |timing: bool| {
            let mut s = spec(timing);
            s.queue_depth = 1;
            s.preset = SsdOverrides {
                mapping_cache_bytes: Some(16 << 10),
                ..Default::default()
            }
            .apply(s.preset)
            .unwrap();
            run(&s, &mut |_, _| {}).unwrap()
        };
        let (a, b) = (cached(true), cached(true));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let m = a.stats.mapping_cache.as_ref().unwrap();
        assert!(
            m.translation_writes > 0 && m.hit_ratio.unwrap() < 0.2,
            "{m:?}"
        );
        let f = cached(false);
        assert_eq!(a.stats.flash_write_pages, f.stats.flash_write_pages);
    }

    #[test]
    fn age_enables_the_error_model_with_the_presets_cell_type_or_asks_for_one() {
        let aged = |preset: &str, age: &str| {
            let o = SsdOverrides {
                capacity_bytes: Some(1 << 30),
                age: Some(age.parse().unwrap()),
                ..Default::default()
            };
            o.apply(Preset::load(preset).unwrap())
        };
        // The MX500's SLC cache says it is TLC.
        let p = aged("mx500", "pe=1500,retention=1y").unwrap();
        let a = p.ssd_config().unwrap().aging.clone().unwrap();
        assert_eq!(a.cell, flash::CellType::Tlc);
        assert_eq!((a.start_pe_cycles, a.start_retention_s), (1500, 31_536_000));
        let err = aged("840pro", "pe=1500").unwrap_err().to_string();
        assert!(err.contains("840pro") && err.contains("cell=mlc"), "{err}");
        let p = aged("840pro", "pe=1500,cell=mlc").unwrap();
        assert_eq!(
            p.ssd_config().unwrap().aging.as_ref().unwrap().cell,
            flash::CellType::Mlc
        );
        let err = aged("hdd7200", "pe=1").unwrap_err().to_string();
        assert!(err.contains("--age"), "{err}");
        // Without --age no preset has the model.
        for (name, _) in flash::preset::BUILTIN {
            let p = Preset::load(name).unwrap();
            assert!(p.ssd_config().is_none_or(|c| c.aging.is_none()), "{name}");
        }
    }

    #[test]
    fn an_aged_drive_reads_slower_and_the_same_seed_gives_the_same_numbers() {
        let aged = |age: Option<&str>, seed: u64| {
            let o = SsdOverrides {
                capacity_bytes: Some(256 << 20),
                age: age.map(|a| a.parse().unwrap()),
                ..Default::default()
            };
            let s = SimSpec {
                preset: o.apply(Preset::load("mx500").unwrap()).unwrap(),
                read_fraction: 0.7,
                writes_x: 0.2,
                warmup_x: 0.5,
                timed_warmup_x: 0.0,
                queue_depth: 4,
                seed,
                ..spec(true)
            };
            run(&s, &mut |_, _| {}).unwrap()
        };
        let young = aged(Some("pe=0,retention=0"), 3);
        let old = aged(Some("pe=3000,retention=1y"), 3);
        let off = aged(None, 3);
        assert!(off.stats.aging.is_none());
        // Age zero still draws, but the TLC fit's fresh RBER never needs a retry.
        assert_eq!(young.stats.aging.as_ref().unwrap().retries, 0);
        assert_eq!(
            serde_json::to_string(&young.stats.read_latency_ns).unwrap(),
            serde_json::to_string(&off.stats.read_latency_ns).unwrap()
        );
        // Data written or moved by GC during the run is young: only the rest needs retries.
        let a = old.stats.aging.as_ref().unwrap();
        assert!(a.retries_per_read.unwrap() > 0.2, "{a:?}");
        assert!(old.stats.read_latency_ns.mean > young.stats.read_latency_ns.mean);
        let again = aged(Some("pe=3000,retention=1y"), 3);
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            serde_json::to_string(&again).unwrap()
        );
        let other = aged(Some("pe=3000,retention=1y"), 4);
        assert_ne!(
            serde_json::to_string(&old.stats.aging).unwrap(),
            serde_json::to_string(&other.stats.aging).unwrap()
        );
    }

    #[test]
    fn disk_rejects_ssd_flags() {
        let o = SsdOverrides {
            op: Some(0.1),
            ..Default::default()
        };
        let err = o
            .apply(Preset::load("hdd7200").unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("SSDs only"), "{err}");
    }

    #[test]
    fn static_wear_leveling_costs_flash_writes_and_time_and_the_report_follows() {
        // 99% of writes to a hot 10%, the rest nearly static; 4 KiB requests on the x25e
        // at 256 MiB, threshold 2 so the short run levels. Queue depth 32 keeps the dies
        // busy: at depth 1 the write cache acknowledges every write before the dies matter
        // (since paced GC keeps a victim's debt, 2026-12-01, the two runs then take the
        // same time).
        let run = |wl: &str, timing: bool| {
            let mut s = spec(timing);
            s.queue_depth = 32;
            s.pattern = Pattern::HotCold {
                hot_write_fraction: 0.99,
                hot_space_fraction: 0.1,
            };
            s.writes_x = 2.0;
            // In submission order, where the mover's work is booked on the write path.
            // (Under the priority scheduler it runs in the dies' idle gaps, which a queue
            // depth of 1 leaves plenty of: the writes do not wait for it.)
            s.preset = SsdOverrides {
                wear_leveling: Some(wl.parse().unwrap()),
                scheduler: Some(flash::ssd::SchedulerConfig::fifo()),
                ..Default::default()
            }
            .apply(s.preset)
            .unwrap();
            run(&s, &mut |_, _| {}).unwrap()
        };
        let (off, st) = (run("off", true), run("static:2", true));
        let moves = st.stats.wear_leveling.as_ref().unwrap();
        assert!(moves.moves > 0 && moves.copied_pages > 0, "{moves:?}");
        assert!(off.stats.wear_leveling.is_none());
        assert!(st.stats.waf.unwrap() > off.stats.waf.unwrap());
        // The mover's reads, programs and erases occupy the dies the host writes need.
        assert!(
            st.stats.simulated_ns > off.stats.simulated_ns,
            "{} vs {}",
            st.stats.simulated_ns,
            off.stats.simulated_ns
        );
        let (wo, ws) = (off.wear.unwrap(), st.wear.unwrap());
        assert!(ws.erase_count_max - ws.erase_count_min < wo.erase_count_max - wo.erase_count_min);
        assert!(ws.projected_tbw_bytes.unwrap() < wo.projected_tbw_bytes.unwrap());
        assert!(wo.projected_days.is_some());
        // The same flash writes on the WAF-only path (the FTL takes the writes in
        // submission order at any depth).
        let untimed = run("static:2", false);
        assert_eq!(untimed.stats.flash_write_pages, st.stats.flash_write_pages);
        assert!(untimed.wear.unwrap().projected_days.is_none());
    }

    #[test]
    fn jesd219_counts_the_bytes_it_writes_and_its_sub_unit_writes_cost_whole_units() {
        let mut s = spec(false);
        s.pattern = Pattern::Jesd219;
        let r = run(&s, &mut |_, _| {}).unwrap();
        let requests = (256u64 << 20) / 4096;
        assert_eq!(r.stats.host_ops, requests);
        // Mean transfer of the size mix: about 7.9 KiB, not the 4 KiB request size.
        let mean = r.stats.host_write_bytes as f64 / requests as f64;
        assert!((7000.0..9000.0).contains(&mean), "{mean}");
        // Sub-4 KiB writes program whole units: the byte WAF exceeds the unit WAF.
        let w = r.wear.unwrap();
        assert!(w.waf_bytes.unwrap() > r.stats.waf.unwrap());
        // A space too small for its 64 KiB transfers is refused by name.
        s.precondition = Some((crate::precondition::Precondition::Fill, 0.0001));
        let e = run(&s, &mut |_, _| {}).unwrap_err().to_string();
        assert!(e.contains("jesd219") && e.contains("64 KiB"), "{e}");
    }

    #[test]
    fn wear_leveling_on_a_disk_is_refused_by_name() {
        let o = SsdOverrides {
            wear_leveling: Some("dynamic".parse().unwrap()),
            ..Default::default()
        };
        let err = o
            .apply(Preset::load("hdd7200").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--wear-leveling") && err.contains("SSDs only"),
            "{err}"
        );
    }
}
