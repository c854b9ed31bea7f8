//! Page-mapped flash translation layer: the mapping and garbage-collection mechanism,
//! with no notion of time.
//!
//! Logical mapping units (LPNs) map to physical units (PPNs) through `l2p`; `p2l` maps back
//! and marks invalid units. Each die has a free-block pool and two write frontiers (host
//! writes and GC copies, so GC-relocated cold data does not mix with fresh host data).
//! Host writes fill one superpage on a die, then move to the next die (channel-first), so
//! a large sequential write stripes across all dies. When a die's pool falls to
//! `gc_free_blocks`, GC cleans victims chosen by the [`GcPolicy`] until it is above again.
//!
//! Paced GC ([`PageFtl::with_pacing`]) cleans ahead of that: while a die's pool is at the
//! threshold or below, it cleans one victim each time the host has written as many units
//! on the die as the last victim freed (a host block then must wait for cleaning only one
//! block further down), so GC's work is spread over the host's
//! writes the way a controller paces it, instead of falling due all at once when a host
//! block opens (with the dies striped in step, every die at the same moment: a stall of
//! seconds every `dies × block` host units, which a measured window short of that either
//! misses or meets whole). Above the threshold what the last victim freed stays owed, so
//! each die keeps its own phase instead of all restarting together as host blocks open.
//!
//! Flash operations are reported to a [`FlashSink`]; the timing model in `ssd` schedules
//! them, and [`NoTiming`] discards them for the WAF-only fast path.
//!
//! With translation pages ([`PageFtl::with_translation_pages`], for the cached mapping
//! table of [`crate::mapcache`]), the FTL also stores the drive's mapping table on flash:
//! translation page `t` is unit `logical_units + t` of the same tables, written through a
//! third frontier per die (its own blocks, as DFTL keeps translation blocks apart from
//! data blocks), so its `l2p` entry is the global translation directory. GC cleans
//! translation blocks like data blocks (the same victim policy) and copies their valid
//! pages to the translation frontier; the logical units of data GC relocates are logged
//! for the cache to update their entries. Without translation pages that frontier never
//! opens and nothing is logged.
//!
//! Wear leveling ([`PageFtl::with_wear_leveling`], [`crate::wear`]) is off by default:
//! frontiers then open the pool's oldest free block, as always. Dynamic takes the free
//! block with the fewest erases; static, after each GC erase, cleans the die's least-erased
//! closed block through the same path as a GC victim once the die's spread reaches its
//! threshold.

use crate::gc::{self, Candidates, CostBenefitIndex, GcPolicy, GreedyIndex};
use crate::wear::WearLevelingConfig;
use crate::{FlashError, Geometry};
use std::collections::VecDeque;

/// `l2p` value of a logical unit that holds no data (never written, or trimmed).
pub const UNMAPPED: u32 = u32::MAX;
/// `p2l` value of a physical unit that holds no valid data.
pub const INVALID: u32 = u32::MAX;
const NO_BLOCK: u32 = u32::MAX;
/// How many writes ahead [`PageFtl::write_batch`] prefetches the mapping entries.
const PREFETCH_AHEAD: usize = 16;

/// Asks the CPU to bring `slice[i]` into cache; a hint only, with no effect on results.
#[inline(always)]
fn prefetch<T>(slice: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = slice.get(i) {
        // SAFETY: prefetching is a hint that cannot fault; the pointer is to a live element.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                x as *const T as *const i8,
                core::arch::x86_64::_MM_HINT_T0,
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, i);
}

/// Who asked for a superpage program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramKind {
    Host,
    GcCopy,
    /// A superpage of translation pages (the mapping table on flash), written from
    /// controller memory.
    Map,
}

/// Receives the flash operations the FTL performs, in order.
pub trait FlashSink {
    /// A superpage of `die` is read (GC reading a victim's valid data).
    fn page_read(&mut self, die: u32);
    /// A superpage of `die` is programmed.
    fn page_program(&mut self, die: u32, kind: ProgramKind);
    /// Block `block` (a global block number) of `die` is erased.
    fn block_erase(&mut self, die: u32, block: u32);
    /// A translation page (one mapping unit) of `die` is read into controller memory: a
    /// mapping-cache miss, or the read half of a translation page's read-modify-write.
    #[inline]
    fn map_read(&mut self, die: u32) {
        self.page_read(die);
    }
    /// GC moved the data of physical unit `from_ppn` to `to_ppn` (lets tests carry
    /// payloads through GC; timing ignores it).
    #[inline(always)]
    fn unit_moved(&mut self, _from_ppn: u32, _to_ppn: u32) {}
    /// Block `block` (an erased block from a free pool) becomes a write frontier: its
    /// program starts now (the error model of [`crate::aging`] dates its data by this).
    #[inline(always)]
    fn block_opened(&mut self, _block: u32) {}
    /// As [`FlashSink::block_opened`], for a block GC opens to copy into (its copies are
    /// queued behind its erase like every GC step).
    #[inline(always)]
    fn gc_block_opened(&mut self, block: u32) {
        self.block_opened(block)
    }
}

/// Discards flash operations: the WAF-only path.
pub struct NoTiming;

impl FlashSink for NoTiming {
    #[inline(always)]
    fn page_read(&mut self, _die: u32) {}
    #[inline(always)]
    fn page_program(&mut self, _die: u32, _kind: ProgramKind) {}
    #[inline(always)]
    fn block_erase(&mut self, _die: u32, _block: u32) {}
}

#[derive(Debug, Clone, Copy)]
struct Frontier {
    block: u32,
    next_unit: u32,
}

impl Frontier {
    const CLOSED: Frontier = Frontier {
        block: NO_BLOCK,
        next_unit: 0,
    };
    /// Writing from the start of erased block `block`.
    fn at(block: u32) -> Frontier {
        Frontier {
            block,
            next_unit: 0,
        }
    }
}

#[derive(Debug, Clone)]
struct Die {
    free: VecDeque<u32>,
    host: Frontier,
    gc: Frontier,
    /// Translation pages (host-time writes and GC copies alike); never opens without them.
    map: Frontier,
    /// Closed blocks in the order they were closed (kept for FIFO only).
    closed_order: VecDeque<u32>,
    /// Closed blocks by valid count (kept for greedy only).
    greedy: Option<GreedyIndex>,
    /// Closed blocks by valid count, oldest first (kept for cost-benefit only).
    cost_benefit: Option<CostBenefitIndex>,
}

/// Counters of the FTL, in mapping units unless named otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FtlCounters {
    pub host_write_units: u64,
    pub host_read_units: u64,
    /// GC copies of data and translation pages alike.
    pub gc_copied_units: u64,
    pub erases: u64,
    pub gc_victims: u64,
    pub trimmed_units: u64,
    /// Translation pages written by the mapping cache (evictions, batch updates).
    pub map_write_units: u64,
    /// Of `gc_copied_units`: translation pages GC copied.
    pub gc_copied_map_units: u64,
    /// Of `gc_copied_units`: units static wear leveling moved off cold blocks.
    pub wl_copied_units: u64,
    /// Cold blocks static wear leveling moved and erased (their erases are in `erases`).
    pub wl_moves: u64,
}

impl FtlCounters {
    /// Every unit programmed: host data, GC copies and translation pages.
    pub fn flash_write_units(&self) -> u64 {
        self.host_write_units + self.gc_copied_units + self.map_write_units
    }
}

/// Which frontier of a die a unit is appended to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Host,
    Gc,
    Map,
    /// Frontier `i` of [`Die::placed`].
    Placed(u32),
}

impl Die {
    #[inline(always)]
    fn frontier(&mut self, stream: Stream) -> &mut Frontier {
        match stream {
            Stream::Host => &mut self.host,
            Stream::Gc => &mut self.gc,
            Stream::Map => &mut self.map,
            Stream::Placed(_) => unreachable!("placed frontiers live in PageFtl::placed"),
        }
    }

    /// A free block for a frontier: the pool's oldest, or with `dynamic` wear leveling the
    /// one with the fewest erases in `erase_count` (ties: the oldest).
    #[inline]
    fn take_free(&mut self, erase_count: &[u32], dynamic: bool) -> Option<u32> {
        if !dynamic {
            return self.free.pop_front();
        }
        let (i, _) = self
            .free
            .iter()
            .enumerate()
            .min_by_key(|&(_, &b)| erase_count[b as usize])?;
        self.free.remove(i)
    }
}

/// `n` copies of `value` in memory the kernel may back with 2 MiB pages (Linux's
/// transparent huge pages, asked for with madvise before the first touch, as THP's
/// `madvise` mode wants): the mapping tables are read at random, and with 4 KiB pages most
/// of those reads of a large drive also miss the TLB. Elsewhere, or if the kernel says no,
/// an ordinary vector.
fn table<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = n * std::mem::size_of::<T>();
        let start = v.as_mut_ptr() as usize;
        let (first, end) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if end > first {
            // SAFETY: the range lies inside the vector's allocation; MADV_HUGEPAGE changes
            // no contents and only hints how to back the pages.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
    v.resize(n, value);
    v
}

/// Division of u32 values by a divisor fixed at construction, by multiplication (Lemire,
/// Kaser and Kurz, "Faster remainder by direct computation", 2019: with a 64-bit
/// reciprocal the quotient and remainder are exact for every 32-bit numerator). The FTL
/// divides physical unit numbers by units per block and block numbers by blocks per die on
/// every write and GC copy; a hardware divide there costs more than the rest of the copy.
#[derive(Debug, Clone, Copy)]
struct Divisor {
    d: u32,
    /// ceil(2^64 / d); 0 for d = 1 (the quotient is the numerator).
    m: u64,
}

impl Divisor {
    fn new(d: u32) -> Divisor {
        assert!(d > 0, "a divisor is positive");
        let m = if d == 1 { 0 } else { u64::MAX / d as u64 + 1 };
        Divisor { d, m }
    }
    #[inline]
    fn div(self, x: u32) -> u32 {
        if self.m == 0 {
            x
        } else {
            ((self.m as u128 * x as u128) >> 64) as u32
        }
    }
    #[inline]
    fn rem(self, x: u32) -> u32 {
        if self.m == 0 {
            0
        } else {
            let low = self.m.wrapping_mul(x as u64);
            ((low as u128 * self.d as u128) >> 64) as u32
        }
    }
}

pub struct PageFtl {
    units_per_page: u32,
    units_per_block: u32,
    /// The same three as dividers for the hot paths.
    per_page: Divisor,
    per_block: Divisor,
    per_die: Divisor,
    /// GC's scratch list of (from physical unit, logical unit) moves of one victim.
    gc_moves: Vec<(u32, u32)>,
    pages_per_block: u32,
    dies: u32,
    blocks_per_die: u32,
    logical_units: u32,
    policy: GcPolicy,
    gc_free_blocks: u32,
    /// Paced GC: per die, host units written minus units the paced victims freed.
    paced: bool,
    gc_credit: Vec<i64>,
    l2p: Vec<u32>,
    p2l: Vec<u32>,
    valid_units: Vec<u32>,
    closed: Vec<bool>,
    written_stamp: Vec<u64>,
    erase_count: Vec<u32>,
    die: Vec<Die>,
    host_die: u32,
    /// Translation pages stored after the logical units (0: the map is not on flash).
    translation_pages: u32,
    /// The die whose translation frontier takes the next host-time translation page.
    map_die: u32,
    /// With translation pages: the logical units of data GC relocated since the last
    /// [`PageFtl::take_moved`], for the mapping cache to update their entries.
    moved: Option<Vec<u32>>,
    /// Host units written since creation: the clock for block ages.
    clock: u64,
    /// Units that hold data: logical units written and not trimmed, and translation pages.
    mapped_units: u64,
    counters: FtlCounters,
    /// Wear leveling ([`crate::wear`]); off by default.
    wear: WearLevelingConfig,
    /// Placement handles (NVMe FDP, [`crate::placement`]); none by default. One pointer,
    /// so that a drive without handles is laid out (and runs) as before.
    placement: Option<Box<Placement>>,
}

/// The FTL's placement state: which handle each block's data belongs to and the
/// per-handle counters of the FDP statistics.
#[derive(Debug, Clone)]
struct Placement {
    handles: u16,
    /// GC copies stay in their handle's own GC frontier ("persistently isolated"); else
    /// all handles' copies share the die's GC frontier ("initially isolated").
    persistent: bool,
    /// Per handle (index 0 unused: handle 0 is [`PageFtl::write`]'s own `host_die`): the die
    /// the handle's next host unit goes to.
    host_die: Vec<u32>,
    /// Per block: the handle whose frontier opened it (0 for handle 0 and the shared GC
    /// frontier of initial isolation); reset when the block is erased.
    block_handle: Vec<u16>,
    /// Per handle: host units written (index 0 unused: the total's remainder, so that
    /// handle 0's writes cost nothing extra).
    host_units: Vec<u64>,
    /// Per handle: units GC relocated from the handle's blocks.
    gc_units: Vec<u64>,
    /// Per die, the host and GC frontiers of handles 1.. (die `d`'s at `d × per_die`,
    /// handle `h`'s host frontier `2 (h - 1)` after, its GC frontier next); handle 0 uses
    /// the die's `host` and `gc`.
    placed: Vec<Frontier>,
    per_die: u32,
}

impl Placement {
    /// The frontier index in [`Die::placed`] of handle `h`'s host (or GC) frontier.
    #[inline]
    fn index(h: u16, gc: bool) -> u32 {
        2 * (h as u32 - 1) + gc as u32
    }
    /// The handle a [`Die::placed`] frontier belongs to.
    #[inline]
    fn handle_of(i: u32) -> u16 {
        (i / 2 + 1) as u16
    }
    /// Where `victim`'s `copies` relocated units go; counts them to its handle.
    #[inline]
    fn gc_stream(&mut self, victim: u32, copies: usize) -> Stream {
        let h = self.block_handle[victim as usize];
        self.gc_units[h as usize] += copies as u64;
        if h == 0 || !self.persistent {
            Stream::Gc
        } else {
            Stream::Placed(Self::index(h, true))
        }
    }
}

/// Per-handle counters of a drive with placement handles, in mapping units.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlacementCounters {
    /// Per handle: host units written.
    pub host_units: Vec<u64>,
    /// Per handle: units GC (and read reclaim, static wear leveling) copied out of the
    /// handle's blocks. Under initial isolation, copies of the shared GC blocks (which
    /// mix handles) count to handle 0.
    pub gc_units: Vec<u64>,
    pub persistent: bool,
}

impl PageFtl {
    /// Builds an empty FTL. `gc_free_blocks` is the per-die free-pool size below which GC
    /// runs (at least 1).
    pub fn new(g: &Geometry, policy: GcPolicy, gc_free_blocks: u32) -> Result<Self, FlashError> {
        Self::with_translation_pages(g, policy, gc_free_blocks, 0)
    }

    /// An empty FTL that also stores `translation_pages` translation pages of one mapping
    /// unit each (see the module's notes); 0 is [`PageFtl::new`].
    pub fn with_translation_pages(
        g: &Geometry,
        policy: GcPolicy,
        gc_free_blocks: u32,
        translation_pages: u32,
    ) -> Result<Self, FlashError> {
        g.validate()?;
        if gc_free_blocks == 0 {
            return Err(FlashError::Config(
                "gc_free_blocks must be at least 1 (GC needs a free block to copy into)".into(),
            ));
        }
        let dies = g.dies();
        let blocks_per_die = g.blocks_per_die() as u32;
        let upb = g.units_per_block();
        // Per die, up to gc_free_blocks free blocks and the open frontiers (two, three with
        // translation pages) hold no reclaimable data; the rest must hold more than the
        // logical capacity and the translation pages, or GC could find every block full of
        // valid data.
        let frontiers = if translation_pages > 0 { 3 } else { 2 };
        let reserved = gc_free_blocks as u64 + frontiers;
        let stored_units = g.logical_units() + translation_pages as u64;
        if stored_units >= u32::MAX as u64 {
            return Err(FlashError::Geometry(format!(
                "{} logical units and {translation_pages} translation pages do not fit 32-bit unit numbers (raise the mapping unit or lower the capacity)",
                g.logical_units()
            )));
        }
        if (blocks_per_die as u64) <= reserved
            || (blocks_per_die as u64 - reserved) * dies as u64 * upb as u64 <= stored_units
        {
            return Err(FlashError::Geometry(format!(
                "{blocks_per_die} blocks per die leave too little spare space: over-provisioning {:.3} \
                 must exceed the {reserved} blocks per die kept free or open (raise --op or the capacity, \
                 or lower --gc-free-blocks / --pages-per-block)",
                g.op
            )));
        }
        let total_blocks = blocks_per_die as usize * dies as usize;
        let die = (0..dies)
            .map(|d| Die {
                free: (d * blocks_per_die..(d + 1) * blocks_per_die).collect(),
                host: Frontier::CLOSED,
                gc: Frontier::CLOSED,
                map: Frontier::CLOSED,
                closed_order: VecDeque::new(),
                greedy: (policy == GcPolicy::Greedy)
                    .then(|| GreedyIndex::new(blocks_per_die as usize, upb)),
                cost_benefit: (policy == GcPolicy::CostBenefit).then(|| CostBenefitIndex::new(upb)),
            })
            .collect();
        Ok(PageFtl {
            units_per_page: g.units_per_page(),
            units_per_block: upb,
            per_page: Divisor::new(g.units_per_page()),
            per_block: Divisor::new(upb),
            per_die: Divisor::new(blocks_per_die),
            gc_moves: Vec::with_capacity(upb as usize),
            pages_per_block: g.pages_per_block,
            dies,
            blocks_per_die,
            logical_units: g.logical_units() as u32,
            policy,
            gc_free_blocks,
            paced: false,
            gc_credit: vec![0; dies as usize],
            l2p: table(stored_units as usize, UNMAPPED),
            p2l: table(total_blocks * upb as usize, INVALID),
            valid_units: vec![0; total_blocks],
            closed: vec![false; total_blocks],
            written_stamp: vec![0; total_blocks],
            erase_count: vec![0; total_blocks],
            die,
            host_die: 0,
            translation_pages,
            map_die: 0,
            moved: (translation_pages > 0).then(Vec::new),
            clock: 0,
            mapped_units: 0,
            counters: FtlCounters::default(),
            wear: WearLevelingConfig::default(),
            placement: None,
        })
    }

    /// `die`'s frontier of `stream`.
    #[inline]
    fn front(&mut self, die: u32, stream: Stream) -> &mut Frontier {
        if let Stream::Placed(i) = stream {
            let p = self
                .placement
                .as_deref_mut()
                .expect("placed frontiers exist with placement handles");
            let at = (die * p.per_die + i) as usize;
            return &mut p.placed[at];
        }
        self.die[die as usize].frontier(stream)
    }

    /// `die`'s frontiers of handles 1.. (empty without placement handles).
    fn placed_of(&self, die: usize) -> &[Frontier] {
        match self.placement.as_deref() {
            None => &[],
            Some(p) => {
                let n = p.per_die as usize;
                &p.placed[die * n..(die + 1) * n]
            }
        }
    }

    /// Gives the FTL `handles` placement handles (NVMe FDP's reclaim unit handles, one
    /// reclaim group per die): each handle writes through its own host frontier on every
    /// die, and with `persistent` isolation GC copies a block's valid data to its handle's
    /// own GC frontier (otherwise to the die's one GC frontier, shared by all handles).
    /// Handle 0 is the frontiers of a drive without handles, so one handle is today's
    /// drive exactly. Each handle past the first keeps two more blocks open per die, which
    /// the over-provisioning must cover. Call before the FTL is used.
    pub fn set_placement(&mut self, handles: u16, persistent: bool) -> Result<(), FlashError> {
        if handles == 0 {
            return Err(FlashError::Config(
                "fdp.handles must be at least 1 (handle 0 is the default frontier)".into(),
            ));
        }
        let frontiers = if self.translation_pages > 0 { 3 } else { 2 } + 2 * (handles as u64 - 1);
        let reserved = self.gc_free_blocks as u64 + frontiers;
        let stored = self.logical_units as u64 + self.translation_pages as u64;
        let bpd = self.blocks_per_die as u64;
        if bpd <= reserved
            || (bpd - reserved) * self.dies as u64 * self.units_per_block as u64 <= stored
        {
            return Err(FlashError::Geometry(format!(
                "{handles} placement handles keep {frontiers} blocks per die open and {} free, of {bpd}: too little spare space left (lower fdp.handles, raise --op or the capacity)",
                self.gc_free_blocks
            )));
        }
        let n = 2 * (handles as usize - 1);
        self.placement = Some(Box::new(Placement {
            placed: vec![Frontier::CLOSED; n * self.dies as usize],
            per_die: n as u32,
            handles,
            persistent,
            host_die: vec![0; handles as usize],
            block_handle: vec![0; self.valid_units.len()],
            host_units: vec![0; handles as usize],
            gc_units: vec![0; handles as usize],
        }));
        Ok(())
    }

    /// Placement handles (1 without [`PageFtl::set_placement`]: the default frontier).
    pub fn handles(&self) -> u16 {
        self.placement.as_ref().map_or(1, |p| p.handles)
    }

    /// Per-handle counters, with placement handles.
    pub fn placement_counters(&self) -> Option<PlacementCounters> {
        let p = self.placement.as_deref()?;
        let mut host_units = p.host_units.clone();
        host_units[0] = self.counters.host_write_units - host_units[1..].iter().sum::<u64>();
        Some(PlacementCounters {
            host_units,
            gc_units: p.gc_units.clone(),
            persistent: p.persistent,
        })
    }

    /// The handle whose data block `block` holds (see [`PageFtl::set_placement`]): 0
    /// without placement handles.
    pub fn block_handle(&self, block: u32) -> u16 {
        self.placement
            .as_ref()
            .map_or(0, |p| p.block_handle[block as usize])
    }

    /// The logical units whose data block `block` holds (for tests and tools).
    pub fn valid_lpns(&self, block: u32) -> Vec<u32> {
        let upb = self.units_per_block as usize;
        let lo = block as usize * upb;
        self.p2l[lo..lo + upb]
            .iter()
            .copied()
            .filter(|&l| l != INVALID)
            .collect()
    }

    /// Blocks of the drive.
    pub fn total_blocks(&self) -> u32 {
        self.valid_units.len() as u32
    }

    /// Writes logical unit `lpn` on placement handle `handle` (below
    /// [`PageFtl::handles`]; the caller checks it). Handle 0 is [`PageFtl::write`].
    #[inline]
    pub fn write_placed<S: FlashSink>(
        &mut self,
        lpn: u32,
        handle: u16,
        sink: &mut S,
    ) -> Result<u32, FlashError> {
        if handle == 0 {
            self.write(lpn, sink)
        } else {
            self.write_on_handle(lpn, handle, sink)
        }
    }

    /// [`PageFtl::write`] through handle `h`'s frontiers (`h` ≥ 1).
    #[inline(never)]
    fn write_on_handle<S: FlashSink>(
        &mut self,
        lpn: u32,
        h: u16,
        sink: &mut S,
    ) -> Result<u32, FlashError> {
        debug_assert!(lpn < self.logical_units);
        let Some(p) = self.placement.as_deref_mut().filter(|p| h < p.handles) else {
            return Err(FlashError::Placement {
                handle: h,
                offset_bytes: 0,
                msg: format!("the FTL has {} placement handles", self.handles()),
            });
        };
        p.host_units[h as usize] += 1;
        let d = p.host_die[h as usize];
        let old = self.l2p[lpn as usize];
        if old != UNMAPPED {
            self.invalidate(old);
        } else {
            self.mapped_units += 1;
        }
        self.counters.host_write_units += 1;
        self.clock += 1;
        let stream = Stream::Placed(Placement::index(h, false));
        let d = if self.front(d, stream).block == NO_BLOCK {
            self.open_block(d, stream, sink)?
        } else {
            d
        };
        if self.append_to(d, stream, lpn) {
            sink.page_program(d, ProgramKind::Host);
            if let Some(p) = self.placement.as_deref_mut() {
                p.host_die[h as usize] = (d + 1) % self.dies;
            }
        }
        if self.paced {
            self.pace(d, sink);
        }
        Ok(d)
    }

    /// [`PageFtl::append`] for any stream's frontier (which must be open).
    #[inline]
    fn append_to(&mut self, die: u32, stream: Stream, lpn: u32) -> bool {
        let upb = self.units_per_block;
        let f = self.front(die, stream);
        let block = f.block;
        let ppn = block * upb + f.next_unit;
        f.next_unit += 1;
        let next = f.next_unit;
        self.p2l[ppn as usize] = lpn;
        self.l2p[lpn as usize] = ppn;
        self.valid_units[block as usize] += 1;
        if next == upb {
            *self.front(die, stream) = Frontier::CLOSED;
            self.close_block(die, block);
        }
        self.per_page.rem(next) == 0
    }

    /// Block `b` opens as `stream`'s frontier: with placement handles, it is tagged with
    /// the stream's handle.
    #[inline]
    fn tag_block(&mut self, b: u32, stream: Stream) {
        if let (Stream::Placed(i), Some(p)) = (stream, self.placement.as_deref_mut()) {
            p.block_handle[b as usize] = Placement::handle_of(i);
        }
    }

    /// Sets wear leveling ([`crate::wear`]); off by default.
    pub fn with_wear_leveling(mut self, wear: WearLevelingConfig) -> Self {
        self.set_wear_leveling(wear);
        self
    }

    /// Sets wear leveling on a built FTL (before it is used).
    pub fn set_wear_leveling(&mut self, wear: WearLevelingConfig) {
        self.wear = wear;
    }

    /// [`PageFtl::collect`], then, with static wear leveling, its check on the die.
    #[inline]
    fn collect_and_level<S: FlashSink>(&mut self, die: u32, sink: &mut S) -> Option<u32> {
        let freed = self.collect(die, sink);
        if let (Some(_), Some(threshold)) = (freed, self.wear.static_threshold) {
            self.static_wear_level(die, threshold, sink);
        }
        freed
    }

    /// Static wear leveling after a GC erase on `die`: once the die's erase-count spread
    /// (its most-erased block against its least-erased closed block) reaches `threshold`,
    /// that cold block is cleaned as a read reclaim is ([`PageFtl::reclaim`]: its valid
    /// units to the GC frontier, then erased), back in the pool to take hot data (MQSim
    /// moves the plane's coldest block the same way after each erase; one block per GC
    /// victim here, so the mover's work is paced with GC's).
    #[cold]
    fn static_wear_level<S: FlashSink>(&mut self, die: u32, threshold: u32, sink: &mut S) {
        let lo = (die * self.blocks_per_die) as usize;
        let hi = lo + self.blocks_per_die as usize;
        let max = self.erase_count[lo..hi].iter().copied().max().unwrap_or(0);
        let mut cold: Option<usize> = None;
        for b in lo..hi {
            if self.closed[b] && cold.is_none_or(|c| self.erase_count[b] < self.erase_count[c]) {
                cold = Some(b);
            }
        }
        let Some(cold) = cold else { return };
        if max - self.erase_count[cold] < threshold {
            return;
        }
        // Refused (None) only on a die without a free block for the copies.
        if let Some(copied) = self.reclaim(cold as u32, sink) {
            self.counters.wl_moves += 1;
            self.counters.wl_copied_units += copied as u64;
        }
    }

    /// Paces GC (see the module's notes); off by default.
    pub fn with_pacing(mut self, paced: bool) -> Self {
        self.paced = paced;
        self
    }

    pub fn logical_units(&self) -> u32 {
        self.logical_units
    }

    pub fn units_per_page(&self) -> u32 {
        self.units_per_page
    }

    pub fn counters(&self) -> FtlCounters {
        self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = FtlCounters::default();
        if let Some(p) = &mut self.placement {
            p.host_units.fill(0);
            p.gc_units.fill(0);
        }
    }

    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }

    /// Every block starts at `cycles` erases: a drive worn before the run (`--age pe=N`).
    pub fn seed_erase_counts(&mut self, cycles: u32) {
        self.erase_count.fill(cycles);
    }

    pub fn mapped_units(&self) -> u64 {
        self.mapped_units
    }

    /// Die that holds physical unit `ppn`.
    #[inline]
    pub fn die_of(&self, ppn: u32) -> u32 {
        self.per_die.div(self.per_block.div(ppn))
    }

    /// Superpage number (global) that holds physical unit `ppn`.
    #[inline]
    pub fn page_of(&self, ppn: u32) -> u32 {
        self.per_page.div(ppn)
    }

    /// Where logical unit `lpn` lives, if it holds data.
    #[inline]
    pub fn lookup(&self, lpn: u32) -> Option<u32> {
        let p = self.l2p[lpn as usize];
        (p != UNMAPPED).then_some(p)
    }

    /// Hints that logical unit `lpn` will be accessed soon (no effect on results).
    #[inline]
    pub fn prefetch_lpn(&self, lpn: u32) {
        prefetch(&self.l2p, lpn as usize);
    }

    /// The second stage of [`PageFtl::prefetch_lpn`], some writes later (`lpn`'s entry in
    /// cache by then): the unit `lpn` is mapped to now and its block's counts, which a
    /// write of `lpn` invalidates ([`PageFtl::write_batch`] does both for its own writes).
    #[inline]
    pub fn prefetch_mapped(&self, lpn: u32) {
        let old = self.l2p.get(lpn as usize).copied().unwrap_or(UNMAPPED);
        if old != UNMAPPED {
            prefetch(&self.p2l, old as usize);
            let b = self.per_block.div(old) as usize;
            prefetch(&self.valid_units, b);
            prefetch(&self.closed, b);
        }
    }

    /// Counts a host read of one unit (the caller times it).
    #[inline]
    pub fn note_read(&mut self) {
        self.counters.host_read_units += 1;
    }

    /// Writes logical unit `lpn` out of place. Returns the die it was written to.
    #[inline(always)]
    pub fn write<S: FlashSink>(&mut self, lpn: u32, sink: &mut S) -> Result<u32, FlashError> {
        debug_assert!(lpn < self.logical_units);
        let old = self.l2p[lpn as usize];
        if old != UNMAPPED {
            self.invalidate(old);
        } else {
            self.mapped_units += 1;
        }
        self.counters.host_write_units += 1;
        self.clock += 1;
        let d = self.host_die;
        let d = if self.die[d as usize].host.block == NO_BLOCK {
            self.open_block(d, Stream::Host, sink)?
        } else {
            d
        };
        let page_done = self.append::<false>(d, lpn);
        if page_done {
            sink.page_program(d, ProgramKind::Host);
            self.host_die = (d + 1) % self.dies;
        }
        if self.paced {
            self.pace(d, sink);
        }
        Ok(d)
    }

    /// The pool size at which a host block cannot open without cleaning first: the
    /// threshold, or with pacing (which keeps the pool at the threshold) one block below
    /// it, never below one (GC needs a block to copy into).
    fn hard_free_blocks(&self) -> u32 {
        if self.paced {
            (self.gc_free_blocks - 1).max(1)
        } else {
            self.gc_free_blocks
        }
    }

    /// Paced GC after a host unit on `die`: with the pool at the threshold or below, a
    /// victim each time the host has used up what the last one freed. Above the threshold
    /// no victim is cleaned and what the last one freed stays owed, so each die keeps its
    /// own phase. (Until 2026-12-01 the debt was forgiven there: every die's next victim
    /// then fell due at the first host unit after its pool came back to the threshold,
    /// which is when a host block opens, and host blocks open on all dies in step. The dies
    /// cleaned in lockstep, a burst on every die at once every `dies × block` host units,
    /// whose length and period followed the block size that `--capacity` scaling changes:
    /// docs/timing.md, "Dies in lockstep".)
    #[inline(always)]
    fn pace<S: FlashSink>(&mut self, die: u32, sink: &mut S) {
        let d = die as usize;
        if self.die[d].free.len() > self.gc_free_blocks as usize {
            return;
        }
        self.pace_low(die, sink);
    }

    /// [`PageFtl::pace`] with the pool at the threshold or below.
    #[inline(never)]
    fn pace_low<S: FlashSink>(&mut self, die: u32, sink: &mut S) {
        let d = die as usize;
        self.gc_credit[d] += 1;
        if self.gc_credit[d] > 0 {
            match self.collect_and_level(die, sink) {
                Some(freed) => self.gc_credit[d] -= freed as i64,
                None => self.gc_credit[d] = 0,
            }
        }
    }

    /// Writes the logical units `lpns` in order: the same as calling [`PageFtl::write`] on
    /// each, but prefetches mapping entries ahead, so the random accesses of many writes
    /// overlap instead of waiting on memory one after another.
    pub fn write_batch<S: FlashSink>(
        &mut self,
        lpns: &[u32],
        sink: &mut S,
    ) -> Result<(), FlashError> {
        for i in 0..lpns.len() {
            if let Some(&ahead) = lpns.get(i + PREFETCH_AHEAD) {
                prefetch(&self.l2p, ahead as usize);
            }
            if let Some(&near) = lpns.get(i + PREFETCH_AHEAD / 2) {
                self.prefetch_mapped(near);
            }
            self.write(lpns[i], sink)?;
        }
        Ok(())
    }

    /// Translation pages this FTL stores (0: the map is not on flash).
    pub fn translation_pages(&self) -> u32 {
        self.translation_pages
    }

    /// Where translation page `tpage` lives (the global translation directory's entry),
    /// if it has been written.
    #[inline]
    pub fn lookup_translation_page(&self, tpage: u32) -> Option<u32> {
        debug_assert!(tpage < self.translation_pages);
        self.lookup(self.logical_units + tpage)
    }

    /// Writes translation page `tpage` out of place at a die's translation frontier (dies
    /// in turn, a superpage each, as host writes stripe). Returns the die.
    pub fn write_translation_page<S: FlashSink>(
        &mut self,
        tpage: u32,
        sink: &mut S,
    ) -> Result<u32, FlashError> {
        assert!(
            tpage < self.translation_pages,
            "translation page {tpage} of {}",
            self.translation_pages
        );
        let unit = self.logical_units + tpage;
        let old = self.l2p[unit as usize];
        if old != UNMAPPED {
            self.invalidate(old);
        } else {
            self.mapped_units += 1;
        }
        self.counters.map_write_units += 1;
        let d = self.map_die;
        let d = if self.die[d as usize].map.block == NO_BLOCK {
            self.open_block(d, Stream::Map, sink)?
        } else {
            d
        };
        if self.append::<true>(d, unit) {
            sink.page_program(d, ProgramKind::Map);
            self.map_die = (d + 1) % self.dies;
        }
        if self.paced {
            self.pace(d, sink);
        }
        Ok(d)
    }

    /// Moves the logical units of data GC relocated since the last call into `out`
    /// (cleared first); nothing without translation pages.
    pub fn take_moved(&mut self, out: &mut Vec<u32>) {
        out.clear();
        if let Some(moved) = &mut self.moved {
            std::mem::swap(moved, out);
        }
    }

    /// Declares logical unit `lpn` dead. Returns whether it held data.
    #[inline]
    pub fn trim(&mut self, lpn: u32) -> bool {
        let old = self.l2p[lpn as usize];
        if old == UNMAPPED {
            return false;
        }
        self.invalidate(old);
        self.l2p[lpn as usize] = UNMAPPED;
        self.mapped_units -= 1;
        self.counters.trimmed_units += 1;
        true
    }

    /// Host units of one GC cycle: a block on every die (host writes stripe across the
    /// dies, so in steady state each die's GC turns over a block's worth per cycle).
    pub fn gc_cycle_units(&self) -> u64 {
        self.dies as u64 * self.units_per_block as u64
    }

    /// Whether GC is in play: some die's pool is at the threshold or below, so each new
    /// host block costs cleaning (a full, aged drive).
    pub fn in_gc_regime(&self) -> bool {
        self.die
            .iter()
            .any(|d| d.free.len() <= self.gc_free_blocks as usize)
    }

    /// Free blocks in `die`'s pool.
    pub fn free_blocks(&self, die: u32) -> usize {
        self.die[die as usize].free.len()
    }

    /// Runs one GC victim on `die` if its pool is below `target_free_blocks` (background GC).
    /// Returns whether a victim was cleaned.
    pub fn background_collect<S: FlashSink>(
        &mut self,
        die: u32,
        target_free_blocks: u32,
        sink: &mut S,
    ) -> bool {
        if self.die[die as usize].free.len() >= target_free_blocks as usize {
            return false;
        }
        self.collect_and_level(die, sink)
            .is_some_and(|freed| freed > 0)
    }

    #[inline]
    fn invalidate(&mut self, ppn: u32) {
        self.p2l[ppn as usize] = INVALID;
        let b = self.per_block.div(ppn) as usize;
        self.valid_units[b] -= 1;
        if self.policy != GcPolicy::Fifo && self.closed[b] {
            let (die, local) = (
                self.per_die.div(b as u32) as usize,
                self.per_die.rem(b as u32) as usize,
            );
            let d = &mut self.die[die];
            if let Some(idx) = &mut d.greedy {
                idx.decrement(local, self.valid_units[b]);
            } else if let Some(idx) = &mut d.cost_benefit {
                idx.decrement(local, self.valid_units[b], self.written_stamp[b]);
            }
        }
    }

    /// Appends `lpn` at `die`'s host frontier, or with `MAP` its translation frontier
    /// (which must be open). Returns whether the unit completed a superpage.
    #[inline]
    fn append<const MAP: bool>(&mut self, die: u32, lpn: u32) -> bool {
        let upb = self.units_per_block;
        let dstate = &mut self.die[die as usize];
        let f = if MAP {
            &mut dstate.map
        } else {
            &mut dstate.host
        };
        let block = f.block;
        let ppn = block * upb + f.next_unit;
        f.next_unit += 1;
        let next = f.next_unit;
        self.p2l[ppn as usize] = lpn;
        self.l2p[lpn as usize] = ppn;
        self.valid_units[block as usize] += 1;
        if next == upb {
            *f = Frontier::CLOSED;
            self.close_block(die, block);
        }
        self.per_page.rem(next) == 0
    }

    /// Block `block` of `die`, just filled, joins the closed blocks GC chooses from.
    fn close_block(&mut self, die: u32, block: u32) {
        let dstate = &mut self.die[die as usize];
        if self.policy == GcPolicy::Fifo {
            dstate.closed_order.push_back(block);
        }
        if let Some(idx) = &mut dstate.greedy {
            idx.insert(
                self.per_die.rem(block) as usize,
                self.valid_units[block as usize],
            );
        }
        if let Some(idx) = &mut dstate.cost_benefit {
            idx.insert(
                self.per_die.rem(block) as usize,
                self.valid_units[block as usize],
                self.clock,
            );
        }
        self.closed[block as usize] = true;
        self.written_stamp[block as usize] = self.clock;
    }

    /// Appends GC's `moves` (from physical unit, logical unit) to `die`'s `stream` frontier
    /// (GC's, or the translation pages'), a frontier block at a time: what
    /// [`PageFtl::append`] does per unit, with the block's bookkeeping once per block.
    fn append_moves<S: FlashSink>(
        &mut self,
        die: u32,
        moves: &[(u32, u32)],
        stream: Stream,
        sink: &mut S,
    ) {
        let upb = self.units_per_block;
        let mut done = 0;
        while done < moves.len() {
            if self.front(die, stream).block == NO_BLOCK {
                let b = self.die[die as usize]
                    .take_free(&self.erase_count, self.wear.dynamic)
                    .expect("GC always keeps a free block to copy into");
                *self.front(die, stream) = Frontier::at(b);
                sink.gc_block_opened(b);
                self.tag_block(b, stream);
            }
            let Frontier { block, next_unit } = *self.front(die, stream);
            let take = ((upb - next_unit) as usize).min(moves.len() - done);
            let base = block * upb + next_unit;
            for (i, &(from, lpn)) in moves[done..done + take].iter().enumerate() {
                let ppn = base + i as u32;
                self.p2l[ppn as usize] = lpn;
                self.l2p[lpn as usize] = ppn;
                sink.unit_moved(from, ppn);
                if self.per_page.rem(next_unit + i as u32 + 1) == 0 {
                    sink.page_program(die, ProgramKind::GcCopy);
                }
            }
            done += take;
            self.valid_units[block as usize] += take as u32;
            let next = next_unit + take as u32;
            if next == upb {
                *self.front(die, stream) = Frontier::CLOSED;
                self.close_block(die, block);
            } else {
                self.front(die, stream).next_unit = next;
            }
        }
    }

    /// The die `stream`'s next unit goes to now is `d`.
    fn set_stream_die(&mut self, stream: Stream, d: u32) {
        match stream {
            Stream::Host => self.host_die = d,
            Stream::Map => self.map_die = d,
            Stream::Placed(i) => {
                let p = self
                    .placement
                    .as_deref_mut()
                    .expect("placed frontiers exist with placement handles");
                p.host_die[Placement::handle_of(i) as usize] = d;
            }
            Stream::Gc => unreachable!("GC copies stay on their victim's die"),
        }
    }

    /// Opens a `stream` (host or translation) frontier block on `die`, cleaning first if
    /// its pool is low. If the die cannot free space (all its blocks hold valid data), the
    /// next die that can is used.
    #[cold]
    fn open_block<S: FlashSink>(
        &mut self,
        die: u32,
        stream: Stream,
        sink: &mut S,
    ) -> Result<u32, FlashError> {
        for step in 0..self.dies {
            let d = (die + step) % self.dies;
            if self.front(d, stream).block != NO_BLOCK {
                self.set_stream_die(stream, d);
                return Ok(d);
            }
            // Bounded: one pass over the die's blocks is enough for any policy to find a
            // block with invalid data if there is one.
            let mut attempts = 0;
            let hard = self.hard_free_blocks() as usize;
            while self.die[d as usize].free.len() <= hard && attempts <= self.blocks_per_die {
                if self.collect_and_level(d, sink).is_none() {
                    break;
                }
                attempts += 1;
            }
            // Cleaning translation blocks copies into the translation frontier: if that
            // opened it, it takes the page.
            if self.front(d, stream).block != NO_BLOCK {
                self.set_stream_die(stream, d);
                return Ok(d);
            }
            let dstate = &mut self.die[d as usize];
            if dstate.free.len() > hard {
                let b = dstate
                    .take_free(&self.erase_count, self.wear.dynamic)
                    .expect("pool holds more than the threshold");
                *self.front(d, stream) = Frontier::at(b);
                self.closed[b as usize] = false;
                match stream {
                    // Translation programs wait for nobody: queued behind the erase as
                    // GC's copies are.
                    Stream::Map => sink.gc_block_opened(b),
                    _ => sink.block_opened(b),
                }
                self.tag_block(b, stream);
                self.set_stream_die(stream, d);
                return Ok(d);
            }
        }
        Err(FlashError::Config(format!(
            "no die can free a block: {} of {} logical units hold data and every block is full of valid data",
            self.mapped_units, self.logical_units
        )))
    }

    fn choose_victim(&mut self, die: u32) -> Option<u32> {
        let lo = (die * self.blocks_per_die) as usize;
        let hi = lo + self.blocks_per_die as usize;
        let local = match self.policy {
            GcPolicy::Fifo => return self.die[die as usize].closed_order.pop_front(),
            GcPolicy::Greedy if self.die[die as usize].greedy.is_some() => self.die[die as usize]
                .greedy
                .as_mut()
                .and_then(|idx| idx.lowest()),
            GcPolicy::CostBenefit if self.die[die as usize].cost_benefit.is_some() => self.die
                [die as usize]
                .cost_benefit
                .as_ref()
                .and_then(|idx| idx.choose(self.clock, self.units_per_block)),
            GcPolicy::Greedy | GcPolicy::CostBenefit => {
                let c = Candidates {
                    valid_units: &self.valid_units[lo..hi],
                    closed: &self.closed[lo..hi],
                    written_stamp: &self.written_stamp[lo..hi],
                    units_per_block: self.units_per_block,
                    now_stamp: self.clock,
                };
                if self.policy == GcPolicy::Greedy {
                    gc::choose_greedy(&c)
                } else {
                    gc::choose_cost_benefit(&c)
                }
            }
        }?;
        Some((lo + local) as u32)
    }

    /// Cleans one victim on `die`: copies its valid units to the GC frontier and erases it.
    /// Returns the units it freed (block size minus copies), or `None` without a victim.
    fn collect<S: FlashSink>(&mut self, die: u32, sink: &mut S) -> Option<u32> {
        let victim = self.choose_victim(die)?;
        if self.policy != GcPolicy::Fifo
            && self.valid_units[victim as usize] == self.units_per_block
        {
            // Greedy/cost-benefit picked a full block: nothing on this die can be reclaimed.
            return None;
        }
        let local = (victim % self.blocks_per_die) as usize;
        let d = &mut self.die[die as usize];
        if let Some(idx) = &mut d.greedy {
            idx.remove(local, self.valid_units[victim as usize]);
        } else if let Some(idx) = &mut d.cost_benefit {
            idx.remove(
                local,
                self.valid_units[victim as usize],
                self.written_stamp[victim as usize],
            );
        }
        self.counters.gc_victims += 1;
        Some(self.units_per_block - self.relocate(die, victim, sink))
    }

    /// Read reclaim: relocates the valid data of closed block `block` (as GC copies, on its
    /// die) and erases it, whatever its valid count. Returns the units copied, or `None` if
    /// the block is not closed (a write frontier, or free) or its die has no free block to
    /// copy into.
    pub fn reclaim<S: FlashSink>(&mut self, block: u32, sink: &mut S) -> Option<u32> {
        let b = block as usize;
        if !self.closed[b] {
            return None;
        }
        let die = self.per_die.div(block);
        let local = self.per_die.rem(block) as usize;
        let d = &mut self.die[die as usize];
        if d.free.is_empty() {
            return None;
        }
        if let Some(idx) = &mut d.greedy {
            idx.remove(local, self.valid_units[b]);
        } else if let Some(idx) = &mut d.cost_benefit {
            idx.remove(local, self.valid_units[b], self.written_stamp[b]);
        } else if let Some(at) = d.closed_order.iter().position(|&x| x == block) {
            d.closed_order.remove(at);
        }
        Some(self.relocate(die, block, sink))
    }

    /// Copies the valid units of `victim` (closed, out of the GC indexes) to `die`'s GC
    /// (or translation) frontier and erases it; returns the units copied.
    #[inline(always)]
    fn relocate<S: FlashSink>(&mut self, die: u32, victim: u32, sink: &mut S) -> u32 {
        self.closed[victim as usize] = false;
        // Gather the victim's valid units (reading each page that holds any), fetching
        // the mapping entry each will update, then append them to the GC frontier: the
        // random L2P accesses of a whole block overlap instead of following one another.
        // (The sink's reads and programs of one die add up in any order.)
        let upp = self.units_per_page as usize;
        let first = (victim * self.units_per_block) as usize;
        let mut moves = std::mem::take(&mut self.gc_moves);
        moves.clear();
        moves.resize(self.units_per_block as usize, (0, INVALID));
        // Without a branch per unit (a victim's valid and invalid units are a mix no
        // branch predictor learns): each unit is written at the next place, which only a
        // valid one keeps; an invalid one's prefetch touches the map's last entry.
        let l2p_last = self.l2p.len().saturating_sub(1);
        let mut kept = 0;
        for page in 0..self.pages_per_block as usize {
            let lo = first + page * upp;
            let before = kept;
            for ppn in lo..lo + upp {
                let lpn = self.p2l[ppn];
                moves[kept] = (ppn as u32, lpn);
                prefetch(&self.l2p, (lpn as usize).min(l2p_last));
                kept += (lpn != INVALID) as usize;
            }
            if kept > before {
                sink.page_read(die);
            }
        }
        moves.truncate(kept);
        debug_assert_eq!(self.valid_units[victim as usize], moves.len() as u32);
        // The whole block's reverse map at once (a few cache lines), not entry by entry.
        self.p2l[first..first + self.units_per_block as usize].fill(INVALID);
        self.valid_units[victim as usize] = 0;
        // A block holds data or translation pages, never both (they have their own
        // frontiers): translation pages go back to the translation frontier.
        let translation = moves
            .first()
            .is_some_and(|&(_, lpn)| lpn >= self.logical_units);
        debug_assert!(moves
            .iter()
            .all(|&(_, lpn)| (lpn >= self.logical_units) == translation));
        if translation {
            self.append_moves(die, &moves, Stream::Map, sink);
            self.counters.gc_copied_map_units += moves.len() as u64;
        } else {
            let stream = match self.placement.as_deref_mut() {
                None => Stream::Gc,
                Some(p) => p.gc_stream(victim, moves.len()),
            };
            self.append_moves(die, &moves, stream, sink);
            if let Some(moved) = &mut self.moved {
                moved.extend(moves.iter().map(|&(_, lpn)| lpn));
            }
        }
        let copied = moves.len() as u32;
        self.gc_moves = moves;
        self.counters.gc_copied_units += copied as u64;
        self.erase_count[victim as usize] += 1;
        self.counters.erases += 1;
        if let Some(p) = &mut self.placement {
            p.block_handle[victim as usize] = 0;
        }
        sink.block_erase(die, victim);
        self.die[die as usize].free.push_back(victim);
        copied
    }

    /// Cheap consistency check, O(blocks): valid counts add up to the mapped units, no
    /// block holds more than it can, and every die's blocks are accounted for. Run at the
    /// end of every simulation; [`PageFtl::check_invariants`] is the full check.
    pub fn check_counts(&self) -> Result<(), String> {
        let total: u64 = self.valid_units.iter().map(|&v| v as u64).sum();
        if total != self.mapped_units {
            return Err(format!(
                "valid counts add up to {total}, but {} units are mapped",
                self.mapped_units
            ));
        }
        if let Some(b) = self
            .valid_units
            .iter()
            .position(|&v| v > self.units_per_block)
        {
            return Err(format!(
                "block {b} counts {} valid units, more than it holds",
                self.valid_units[b]
            ));
        }
        for (d, die) in self.die.iter().enumerate() {
            let lo = d * self.blocks_per_die as usize;
            let closed = self.closed[lo..lo + self.blocks_per_die as usize]
                .iter()
                .filter(|&&c| c)
                .count();
            let open = [die.host, die.gc, die.map]
                .iter()
                .chain(self.placed_of(d))
                .filter(|f| f.block != NO_BLOCK)
                .count();
            if closed + open + die.free.len() != self.blocks_per_die as usize {
                return Err(format!(
                    "die {d}: {closed} closed + {open} open + {} free blocks != {} blocks",
                    die.free.len(),
                    self.blocks_per_die
                ));
            }
        }
        Ok(())
    }

    /// Full consistency check: mapping tables agree both ways, valid counts match the
    /// physical map, and every block is exactly one of free, open or closed.
    pub fn check_invariants(&self) -> Result<(), String> {
        let upb = self.units_per_block as usize;
        let mut mapped = 0u64;
        for (lpn, &ppn) in self.l2p.iter().enumerate() {
            if ppn == UNMAPPED {
                continue;
            }
            mapped += 1;
            if self.p2l.get(ppn as usize) != Some(&(lpn as u32)) {
                return Err(format!("l2p[{lpn}] = {ppn} but p2l[{ppn}] disagrees"));
            }
        }
        if mapped != self.mapped_units {
            return Err(format!(
                "{mapped} mapped units, counter says {}",
                self.mapped_units
            ));
        }
        for (b, chunk) in self.p2l.chunks(upb).enumerate() {
            let mut valid = 0;
            for (i, &lpn) in chunk.iter().enumerate() {
                if lpn == INVALID {
                    continue;
                }
                valid += 1;
                let ppn = (b * upb + i) as u32;
                if self.l2p.get(lpn as usize) != Some(&ppn) {
                    return Err(format!("p2l[{ppn}] = {lpn} but l2p[{lpn}] disagrees"));
                }
            }
            if valid != self.valid_units[b] {
                return Err(format!(
                    "block {b}: {valid} valid units in p2l, count says {}",
                    self.valid_units[b]
                ));
            }
        }
        for (d, die) in self.die.iter().enumerate() {
            let lo = d as u32 * self.blocks_per_die;
            let hi = lo + self.blocks_per_die;
            let mut seen = vec![0u8; self.blocks_per_die as usize];
            for &b in &die.free {
                if !(lo..hi).contains(&b) {
                    return Err(format!("die {d}: free block {b} belongs to another die"));
                }
                if self.valid_units[b as usize] != 0 || self.closed[b as usize] {
                    return Err(format!("die {d}: free block {b} holds data or is closed"));
                }
                seen[(b - lo) as usize] += 1;
            }
            for f in [die.host, die.gc, die.map].iter().chain(self.placed_of(d)) {
                if f.block != NO_BLOCK {
                    seen[(f.block - lo) as usize] += 1;
                }
            }
            for b in lo..hi {
                if self.closed[b as usize] {
                    seen[(b - lo) as usize] += 1;
                    if let Some(idx) = &die.greedy {
                        if !idx.contains((b - lo) as usize, self.valid_units[b as usize]) {
                            return Err(format!(
                                "die {d}: closed block {b} is not in greedy's group of {} valid units",
                                self.valid_units[b as usize]
                            ));
                        }
                    }
                    if let Some(idx) = &die.cost_benefit {
                        let (v, st) =
                            (self.valid_units[b as usize], self.written_stamp[b as usize]);
                        if !idx.contains((b - lo) as usize, v, st) {
                            return Err(format!(
                                "die {d}: closed block {b} is not in cost-benefit's group of {v} valid units"
                            ));
                        }
                    }
                }
            }
            if let Some(i) = seen.iter().position(|&n| n != 1) {
                return Err(format!(
                    "die {d}: block {} is in {} of the sets free/open/closed",
                    lo + i as u32,
                    seen[i]
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "wear_tests.rs"]
mod wear_tests;

#[cfg(test)]
mod divisor_tests {
    use super::Divisor;

    #[test]
    fn divides_exactly_as_hardware_does() {
        let mut x = 0x9E37_79B9u32;
        for d in (1..300u32).chain([
            17_530,
            27_000,
            65_535,
            65_536,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
        ]) {
            let v = Divisor::new(d);
            for n in [0, 1, d - 1, d, d.wrapping_add(1), u32::MAX, u32::MAX - 1, x] {
                assert_eq!((v.div(n), v.rem(n)), (n / d, n % d), "{n} / {d}");
            }
            x = x.wrapping_mul(0x0019_660D).wrapping_add(0x3C6E_F35F);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(op: f64) -> Geometry {
        Geometry {
            channels: 2,
            chips_per_channel: 1,
            dies_per_chip: 1,
            planes_per_die: 1,
            pages_per_block: 16,
            page_size_bytes: 8192,
            mapping_unit_bytes: 4096,
            logical_bytes: 4 << 20,
            op,
        }
    }

    #[derive(Default)]
    struct Count {
        reads: u64,
        programs: u64,
        gc_programs: u64,
        erases: u64,
    }
    impl FlashSink for Count {
        fn page_read(&mut self, _d: u32) {
            self.reads += 1;
        }
        fn page_program(&mut self, _d: u32, k: ProgramKind) {
            self.programs += 1;
            if k == ProgramKind::GcCopy {
                self.gc_programs += 1;
            }
        }
        fn block_erase(&mut self, _d: u32, _block: u32) {
            self.erases += 1;
        }
    }

    #[test]
    fn sequential_fill_stripes_superpages_across_dies() {
        let mut ftl = PageFtl::new(&geometry(0.5), GcPolicy::Greedy, 1).unwrap();
        let mut dies = vec![];
        for lpn in 0..8 {
            dies.push(ftl.write(lpn, &mut NoTiming).unwrap());
        }
        // Two units per superpage, then the next die.
        assert_eq!(dies, vec![0, 0, 1, 1, 0, 0, 1, 1]);
        ftl.check_invariants().unwrap();
    }

    #[test]
    fn overwrites_cause_gc_and_keep_mapping_consistent() {
        for policy in [GcPolicy::Greedy, GcPolicy::CostBenefit, GcPolicy::Fifo] {
            let mut ftl = PageFtl::new(&geometry(0.3), policy, 2).unwrap();
            let n = ftl.logical_units();
            let mut sink = Count::default();
            for round in 0..6u32 {
                for i in 0..n {
                    let lpn = (i.wrapping_mul(2654435761).wrapping_add(round)) % n;
                    ftl.write(lpn, &mut sink).unwrap();
                }
                ftl.check_invariants().unwrap();
            }
            let c = ftl.counters();
            assert!(c.erases > 0, "{policy}: no GC happened");
            assert_eq!(c.erases, sink.erases);
            assert!(c.flash_write_units() >= c.host_write_units);
            // Every superpage program carries 2 units.
            assert_eq!(sink.programs, c.flash_write_units() / 2);
            assert_eq!(ftl.mapped_units(), n as u64);
        }
    }

    #[test]
    fn trim_unmaps_and_makes_gc_cheaper() {
        let run = |trim: bool| {
            let mut ftl = PageFtl::new(&geometry(0.2), GcPolicy::Greedy, 1).unwrap();
            let n = ftl.logical_units();
            for lpn in 0..n {
                ftl.write(lpn, &mut NoTiming).unwrap();
            }
            if trim {
                for lpn in 0..n / 2 {
                    assert!(ftl.trim(lpn));
                }
                assert!(!ftl.trim(0), "trimming twice finds nothing");
                assert_eq!(ftl.lookup(0), None);
            }
            for r in 0..4 * n {
                ftl.write(n / 2 + (r * 7919) % (n / 2), &mut NoTiming)
                    .unwrap();
            }
            ftl.check_invariants().unwrap();
            ftl.counters().gc_copied_units
        };
        assert!(run(true) < run(false) / 2);
    }

    /// Records each erase's die and the host units written before it.
    struct EraseTimes {
        host_units: u64,
        erases: Vec<(u32, u64)>,
    }
    impl FlashSink for EraseTimes {
        fn page_read(&mut self, _d: u32) {}
        fn page_program(&mut self, _d: u32, _k: ProgramKind) {}
        fn block_erase(&mut self, d: u32, _block: u32) {
            self.erases.push((d, self.host_units));
        }
    }

    /// Host blocks open on every die in step (writes stripe across the dies), so a rule
    /// that restarts pacing there puts the dies' victims in step too.
    #[test]
    fn paced_dies_do_not_clean_in_lockstep() {
        let g = Geometry {
            channels: 8,
            pages_per_block: 64,
            logical_bytes: 1 << 30,
            op: 0.07,
            ..geometry(0.07)
        };
        let mut ftl = PageFtl::new(&g, GcPolicy::Greedy, 2)
            .unwrap()
            .with_pacing(true);
        let n = ftl.logical_units();
        let mut sink = EraseTimes {
            host_units: 0,
            erases: vec![],
        };
        let mut x = 12345u64;
        for lpn in 0..n {
            ftl.write(lpn, &mut sink).unwrap();
        }
        for _ in 0..4 * n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ftl.write(((x >> 33) % n as u64) as u32, &mut sink).unwrap();
            sink.host_units += 1;
        }
        // Erases in the last 2 n host units, by stripe (8 dies x 2 units a superpage).
        let from = 2 * n as u64;
        let mut per_stripe = std::collections::BTreeMap::<u64, usize>::new();
        for &(_, t) in sink.erases.iter().filter(|e| e.1 >= from) {
            *per_stripe.entry(t / 16).or_default() += 1;
        }
        let total: usize = per_stripe.values().sum();
        let in_crowds: usize = per_stripe.values().filter(|&&n| n >= 6).sum();
        // Independent dies put about one erase in a stripe; dies in step put a victim on
        // most dies in the same stripe (a fifth of all erases before the debt was kept).
        assert!(
            in_crowds * 100 < total,
            "{in_crowds} of {total} erases fell in stripes with 6 or more erases (8 dies)"
        );
    }

    #[test]
    fn too_little_spare_space_is_a_clear_error() {
        let err = PageFtl::new(&geometry(0.01), GcPolicy::Greedy, 4)
            .err()
            .unwrap();
        assert!(err.to_string().contains("spare space"), "{err}");
    }
}
