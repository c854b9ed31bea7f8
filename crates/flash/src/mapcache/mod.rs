//! A cached mapping table (DFTL: Gupta, Kim and Urgaonkar, "DFTL: a flash translation
//! layer employing demand-based selective caching of page-level address mappings",
//! ASPLOS 2009), for drives whose controller memory cannot hold the whole map: DRAM-less
//! drives, which cache entries in on-chip SRAM or, over NVMe, in a host memory buffer (HMB).
//!
//! Owns the preset section `[ssd.mapping_cache]` ([`MappingCacheConfig`]; absent, the whole
//! map is in DRAM at no cost, as before) and [`CachedFtl`], a [`PageFtl`] whose mapping
//! entries are looked up through a cache:
//!
//! - **Translation pages.** The map lives on flash in translation pages of one mapping unit
//!   (`mapping_unit_bytes`, 4 KiB on every preset), each holding `mapping_unit_bytes /
//!   entry_bytes` consecutive entries (1,024 of 4 bytes: one 32-bit physical unit number
//!   per 4 KiB unit, the "1 GB of DRAM per TB" rule, AnandTech's Toshiba RC100 review, 2018).
//!   They are written out of place like data, through a frontier of their own on each die
//!   (DFTL keeps translation blocks apart from data blocks); the global translation
//!   directory (GTD), which locates each one, stays in controller SRAM at no cost.
//!   Several translation pages fill a flash superpage, as host units do.
//! - **The cache** holds `cache_bytes / entry_bytes` entries (no per-entry overhead is
//!   charged), least recently used out first. DFTL uses a segmented LRU; plain LRU is used
//!   here, so that the hit ratio follows LRU theory (uniform references over F units with
//!   C cached: C/F; Zipf: Che's approximation; both tested).
//! - **Granularity** (`granularity`): `entry` (DFTL) caches and evicts single entries;
//!   `page` caches whole translation pages (`cache_bytes / mapping_unit_bytes` of them,
//!   least recently used page out first), as TPFTL (Zhou et al., EuroSys 2015) and S-FTL
//!   (Jiang et al., MSST 2011) do and as host-memory-buffer drives and UFS's Host Performance
//!   Booster page map segments in: one miss brings in the entries of its neighbours, so a
//!   workload with spatial locality misses once per translation page, not once per unit. A
//!   cached page is written back whole on eviction (no read first).
//! - **Cold misses** (the first lookup of an entry, or of a page, never cached before) are
//!   counted apart: no cache size removes them, only granularity and prefetching do.
//! - **A miss** (a read or a write whose entry is not cached) reads the entry's translation
//!   page (a flash read on its die: tR and one unit over the channel; none if the page was
//!   never written, as the GTD tells), then caches the entry. A read waits for it; a write
//!   does not (its data program does not need the old entry, only the die time is taken).
//!   Consecutive misses on one translation page read it once: the controller keeps the
//!   page it read last.
//! - **A dirty eviction** writes the victim's translation page: read-modify-write (the old
//!   page is read unless it is the one kept from the last read) and a program. Every dirty
//!   entry of that page in the cache goes with it and is clean afterwards (batched per
//!   page). A clean eviction costs nothing.
//! - **GC.** Translation blocks are cleaned like data blocks (the same victim policy), their
//!   valid pages copied to the translation frontier and the GTD updated. When data GC
//!   relocates a unit whose entry is cached, the cached entry is updated (DFTL's lazy
//!   copying: it becomes dirty); otherwise its translation page is updated on flash, once
//!   per page for all such units (DFTL's batch update), after the GC that moved them.
//! - **TRIM** of a cached entry dirties it; of an uncached one, queues its page for a batch
//!   update, written with the next write's.
//! - **Costs.** Translation page writes count as flash writes: WAF = flash units written
//!   (host, GC copies of data and translation pages, translation pages, SLC-mode programs)
//!   / host units written. With `location = "hmb"`, every lookup of a read also pays
//!   `hmb_access_ns`, a round trip over PCIe to host memory, before its flash read starts.
//!
//! Timing: under the priority scheduler ([`crate::ssd`]) the translation page work no
//! command waits for — a dirty eviction's read-modify-write and a write's miss — is
//! maintenance, queued per die behind host commands; in submission order it takes the die
//! at once.
//!
//! Limits: lookups of one command proceed in parallel; the HMB's round trip is charged to
//! reads only (a write's mapping update is off its critical path); translation programs
//! are never in SLC mode; fTrim's metadata lookups and the write path's hits are free; the
//! ground truth of where data lives stays the FTL's full table (the cache decides costs,
//! never placement), which costs the simulator 4 more bytes of memory per logical unit.

mod lru;
#[cfg(test)]
mod tests;

use crate::ftl::{FlashSink, FtlCounters, PageFtl};
use crate::{FlashError, GcPolicy, Geometry};
use lru::EntryLru;
use serde::{Deserialize, Serialize};

/// Where the cached entries live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheLocation {
    /// Controller memory (SRAM or on-board DRAM): lookups cost nothing extra.
    #[default]
    Dram,
    /// NVMe host memory buffer: each read's lookup costs a PCIe round trip.
    Hmb,
}

impl std::fmt::Display for CacheLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheLocation::Dram => "dram",
            CacheLocation::Hmb => "hmb",
        })
    }
}

fn four() -> u32 {
    4
}

/// What the cache holds and evicts (see the module's notes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheGranularity {
    /// Single mapping entries (DFTL).
    #[default]
    Entry,
    /// Whole translation pages (TPFTL, S-FTL, HMB map segments).
    Page,
}

impl std::fmt::Display for CacheGranularity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CacheGranularity::Entry => "entry",
            CacheGranularity::Page => "page",
        })
    }
}

/// A preset's `[ssd.mapping_cache]`. Sources are given per preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingCacheConfig {
    /// Memory for cached mapping entries.
    pub cache_bytes: u64,
    /// Bytes of one mapping entry, in translation pages and in the cache (default 4).
    #[serde(default = "four")]
    pub entry_bytes: u32,
    /// `dram` (default) or `hmb`.
    #[serde(default)]
    pub location: CacheLocation,
    /// With `location = "hmb"`: one lookup's round trip to host memory over PCIe.
    #[serde(default)]
    pub hmb_access_ns: u64,
    /// `entry` (default) or `page`: what one miss brings in and one eviction sends out.
    #[serde(default)]
    pub granularity: CacheGranularity,
}

impl MappingCacheConfig {
    /// A cache of `cache_bytes` in controller DRAM with 4-byte entries.
    pub fn dram(cache_bytes: u64) -> MappingCacheConfig {
        MappingCacheConfig {
            cache_bytes,
            entry_bytes: four(),
            location: CacheLocation::Dram,
            hmb_access_ns: 0,
            granularity: CacheGranularity::Entry,
        }
    }

    pub fn validate(&self, mapping_unit_bytes: u32) -> Result<(), String> {
        if self.entry_bytes == 0
            || self.entry_bytes > mapping_unit_bytes
            || !mapping_unit_bytes.is_multiple_of(self.entry_bytes)
        {
            return Err(format!(
                "mapping_cache.entry_bytes {} must divide the mapping unit ({mapping_unit_bytes} bytes): a translation page is one unit of whole entries",
                self.entry_bytes
            ));
        }
        if self.cache_bytes < self.entry_bytes as u64 {
            return Err(format!(
                "mapping_cache.cache_bytes {} holds no entry of {} bytes (drop the section, or --mapping-cache 0, for the whole map in DRAM)",
                self.cache_bytes, self.entry_bytes
            ));
        }
        if self.granularity == CacheGranularity::Page
            && self.cache_bytes < mapping_unit_bytes as u64
        {
            return Err(format!(
                "mapping_cache.cache_bytes {} holds no translation page of {mapping_unit_bytes} bytes (granularity = \"page\" caches whole pages: give at least one, or granularity = \"entry\")",
                self.cache_bytes
            ));
        }
        match (self.location, self.hmb_access_ns) {
            (CacheLocation::Hmb, 0) => Err(
                "mapping_cache.location = \"hmb\" needs hmb_access_ns, the PCIe round trip of a lookup".into(),
            ),
            (CacheLocation::Dram, ns) if ns > 0 => Err(format!(
                "mapping_cache.hmb_access_ns = {ns} applies to location = \"hmb\" only"
            )),
            _ => Ok(()),
        }
    }

    /// Entries the cache holds (with `page` granularity, those of the whole pages it
    /// holds, for translation pages of `mapping_unit_bytes`).
    pub fn entries(&self, mapping_unit_bytes: u32) -> u64 {
        match self.granularity {
            CacheGranularity::Entry => self.cache_bytes / self.entry_bytes as u64,
            CacheGranularity::Page => {
                self.cache_bytes / mapping_unit_bytes as u64
                    * (mapping_unit_bytes / self.entry_bytes) as u64
            }
        }
    }

    /// What one read's lookup costs on top of the command's overhead.
    pub fn lookup_ns(&self) -> u64 {
        match self.location {
            CacheLocation::Dram => 0,
            CacheLocation::Hmb => self.hmb_access_ns,
        }
    }
}

/// Counters of the cache (the FTL counts translation page writes and GC copies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapCacheCounters {
    pub hits: u64,
    pub misses: u64,
    /// Misses on an entry (or, with `page` granularity, a page) never cached before.
    pub cold_misses: u64,
    /// Translation pages read from flash (misses and read-modify-writes).
    pub translation_reads: u64,
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    /// Where the unit's data lives, if it holds any.
    pub ppn: Option<u32>,
    pub hit: bool,
    /// The entry's translation page.
    pub tpage: u32,
    /// A miss that had to read its translation page: the die to read it on (the caller
    /// times the read; the cache has counted it).
    pub read_die: Option<u32>,
}

/// Rounds of translation page updates after GC before giving up (each round's writes may
/// run GC that moves more data, which a full drive with no spare space never ends).
const SETTLE_ROUNDS: u32 = 64;
const NONE: u32 = u32::MAX;

/// A page-mapped FTL whose mapping entries are reached through a cache (see the module's
/// notes).
pub struct CachedFtl {
    ftl: PageFtl,
    cfg: MappingCacheConfig,
    /// Cached entries (`entry` granularity) or translation pages (`page`), by
    /// [`CachedFtl::key`].
    lru: EntryLru,
    /// Per key, whether it was ever cached (a bit each): tells cold misses.
    seen: Vec<u64>,
    entries_per_tpage: u32,
    /// Per translation page, the generation its cached dirty entries carry (never 0).
    dirty_gen: Vec<u32>,
    /// The translation page the controller holds from its last read or write.
    last_tpage: u32,
    /// Translation pages awaiting a batch update (GC moves and trims of uncached entries).
    pending: Vec<u32>,
    /// Scratch: units GC moved.
    moved: Vec<u32>,
    counters: MapCacheCounters,
}

impl CachedFtl {
    pub fn new(
        g: &Geometry,
        policy: GcPolicy,
        gc_free_blocks: u32,
        paced: bool,
        cfg: &MappingCacheConfig,
    ) -> Result<Self, FlashError> {
        g.validate()?;
        cfg.validate(g.mapping_unit_bytes)
            .map_err(FlashError::Config)?;
        let entries_per_tpage = g.mapping_unit_bytes / cfg.entry_bytes;
        let logical_units = g.logical_units() as u32;
        let tpages = logical_units.div_ceil(entries_per_tpage);
        let ftl =
            PageFtl::with_translation_pages(g, policy, gc_free_blocks, tpages)?.with_pacing(paced);
        let (keys, capacity) = match cfg.granularity {
            CacheGranularity::Entry => (logical_units, cfg.entries(g.mapping_unit_bytes)),
            CacheGranularity::Page => (tpages, cfg.cache_bytes / g.mapping_unit_bytes as u64),
        };
        let capacity = capacity.min(keys as u64).max(1) as u32;
        Ok(CachedFtl {
            ftl,
            cfg: cfg.clone(),
            lru: EntryLru::new(capacity, keys),
            seen: vec![0; (keys as usize).div_ceil(64)],
            entries_per_tpage,
            dirty_gen: vec![1; tpages as usize],
            last_tpage: NONE,
            pending: Vec::new(),
            moved: Vec::new(),
            counters: MapCacheCounters::default(),
        })
    }

    pub fn config(&self) -> &MappingCacheConfig {
        &self.cfg
    }

    /// The FTL underneath (its full table is the ground truth of where data lives).
    pub fn page_ftl(&self) -> &PageFtl {
        &self.ftl
    }

    /// The page FTL underneath, to configure before use (wear leveling).
    pub fn page_ftl_mut(&mut self) -> &mut PageFtl {
        &mut self.ftl
    }

    pub fn cache_counters(&self) -> MapCacheCounters {
        self.counters
    }

    /// Entries the cache can hold (at most one per logical unit).
    pub fn cache_entries(&self) -> u64 {
        let held = match self.cfg.granularity {
            CacheGranularity::Entry => self.lru.capacity() as u64,
            CacheGranularity::Page => self.lru.capacity() as u64 * self.entries_per_tpage as u64,
        };
        held.min(self.ftl.logical_units() as u64)
    }

    /// What the cache keeps `lpn`'s entry under: the entry itself, or its translation page.
    #[inline]
    fn key(&self, lpn: u32) -> u32 {
        match self.cfg.granularity {
            CacheGranularity::Entry => lpn,
            CacheGranularity::Page => lpn / self.entries_per_tpage,
        }
    }

    /// The translation page of a cache key.
    #[inline]
    fn tpage_of_key(&self, key: u32) -> u32 {
        match self.cfg.granularity {
            CacheGranularity::Entry => key / self.entries_per_tpage,
            CacheGranularity::Page => key,
        }
    }

    /// Looks `lpn`'s entry up as a host read does: a hit, or a miss that caches it (and
    /// may evict). Returns where the data is and which translation page read, if any, the
    /// caller must time.
    pub fn translate<S: FlashSink>(
        &mut self,
        lpn: u32,
        sink: &mut S,
    ) -> Result<Translation, FlashError> {
        let (hit, read_die) = self.access(lpn, sink)?;
        self.settle(sink)?;
        Ok(Translation {
            ppn: self.ftl.lookup(lpn),
            hit,
            tpage: lpn / self.entries_per_tpage,
            read_die,
        })
    }

    /// Writes `lpn` (its entry looked up first, as DFTL does to find the page it replaces).
    /// Never inlined: callers that dispatch between FTLs keep the page FTL's path small.
    #[inline(never)]
    pub fn write<S: FlashSink>(&mut self, lpn: u32, sink: &mut S) -> Result<u32, FlashError> {
        let (_, read_die) = self.access(lpn, sink)?;
        if let Some(d) = read_die {
            sink.map_read(d);
        }
        let die = self.ftl.write(lpn, sink)?;
        self.mark_dirty(lpn);
        self.settle(sink)?;
        Ok(die)
    }

    /// Declares `lpn` dead; its entry changes like a write's.
    pub fn trim(&mut self, lpn: u32) -> bool {
        if !self.ftl.trim(lpn) {
            return false;
        }
        match self.lru.get(self.key(lpn)) {
            Some(_) => self.mark_dirty(lpn),
            None => self.pending.push(lpn / self.entries_per_tpage),
        }
        true
    }

    /// Idle-time GC: cleans as [`PageFtl::background_collect`] does; the entries it moved
    /// are updated with the next write.
    pub fn background_collect<S: FlashSink>(
        &mut self,
        die: u32,
        target: u32,
        sink: &mut S,
    ) -> bool {
        let cleaned = self.ftl.background_collect(die, target, sink);
        self.absorb_moves();
        cleaned
    }

    /// Read reclaim of `block` ([`PageFtl::reclaim`]); the entries it moved are updated with
    /// the next write, as after idle-time GC.
    pub fn reclaim<S: FlashSink>(&mut self, block: u32, sink: &mut S) -> Option<u32> {
        let copied = self.ftl.reclaim(block, sink);
        self.absorb_moves();
        copied
    }

    pub fn reset_counters(&mut self) {
        self.ftl.reset_counters();
        self.counters = MapCacheCounters::default();
    }

    /// The FTL's full check plus the cache's list and index.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.ftl.check_invariants()?;
        self.lru.check()
    }

    // Pass-throughs to the FTL, so [`crate::mapping::Ftl`] treats both alike.
    pub fn logical_units(&self) -> u32 {
        self.ftl.logical_units()
    }
    pub fn mapped_units(&self) -> u64 {
        self.ftl.mapped_units()
    }
    pub fn counters(&self) -> FtlCounters {
        self.ftl.counters()
    }
    pub fn erase_counts(&self) -> &[u32] {
        self.ftl.erase_counts()
    }
    #[inline]
    pub fn die_of(&self, ppn: u32) -> u32 {
        self.ftl.die_of(ppn)
    }
    #[inline]
    pub fn page_of(&self, ppn: u32) -> u32 {
        self.ftl.page_of(ppn)
    }
    /// Where `lpn`'s data is, without a lookup's cost (the model's own bookkeeping).
    #[inline]
    pub fn lookup(&self, lpn: u32) -> Option<u32> {
        self.ftl.lookup(lpn)
    }
    #[inline]
    pub fn note_read(&mut self) {
        self.ftl.note_read()
    }

    /// A lookup of `lpn`'s entry: a hit, or a miss that caches it, first writing back the
    /// entry it evicts if dirty. Returns whether it hit, and the die on which a miss reads
    /// its translation page (none if the page was never written or is the one kept).
    fn access<S: FlashSink>(
        &mut self,
        lpn: u32,
        sink: &mut S,
    ) -> Result<(bool, Option<u32>), FlashError> {
        let key = self.key(lpn);
        if let Some(slot) = self.lru.get(key) {
            self.lru.touch(slot);
            self.counters.hits += 1;
            return Ok((true, None));
        }
        self.counters.misses += 1;
        let (word, bit) = ((key / 64) as usize, 1u64 << (key % 64));
        if self.seen[word] & bit == 0 {
            self.seen[word] |= bit;
            self.counters.cold_misses += 1;
        }
        if let Some((victim, generation)) = self.lru.insert(key) {
            let vt = self.tpage_of_key(victim);
            if generation != 0 && generation == self.dirty_gen[vt as usize] {
                // A whole cached page goes out without being read first.
                let whole = self.cfg.granularity == CacheGranularity::Page;
                self.write_tpage(vt, whole, sink)?;
            }
        }
        Ok((false, self.read_tpage(lpn / self.entries_per_tpage)))
    }

    /// Reads translation page `tpage` into controller memory unless it is the page kept
    /// there or was never written; returns the die read.
    fn read_tpage(&mut self, tpage: u32) -> Option<u32> {
        if tpage == self.last_tpage {
            return None;
        }
        let ppn = self.ftl.lookup_translation_page(tpage)?;
        self.last_tpage = tpage;
        self.counters.translation_reads += 1;
        Some(self.ftl.die_of(ppn))
    }

    /// Writes translation page `tpage` with every cached dirty entry of it (read-modify-
    /// write, unless the `whole` page is in controller memory), which are clean afterwards.
    fn write_tpage<S: FlashSink>(
        &mut self,
        tpage: u32,
        whole: bool,
        sink: &mut S,
    ) -> Result<(), FlashError> {
        if !whole {
            if let Some(d) = self.read_tpage(tpage) {
                sink.map_read(d);
            }
        }
        let g = &mut self.dirty_gen[tpage as usize];
        *g = g.wrapping_add(1).max(1);
        self.ftl.write_translation_page(tpage, sink)?;
        self.last_tpage = tpage;
        Ok(())
    }

    /// `lpn`'s cached entry changed.
    fn mark_dirty(&mut self, lpn: u32) {
        let slot = self
            .lru
            .get(self.key(lpn))
            .expect("a unit whose entry changes was just looked up");
        let tpage = lpn / self.entries_per_tpage;
        self.lru.set_dirty_gen(slot, self.dirty_gen[tpage as usize]);
    }

    /// Entries of units GC moved: cached ones are updated in the cache, the pages of the
    /// others queued for a batch update.
    fn absorb_moves(&mut self) {
        let mut moved = std::mem::take(&mut self.moved);
        self.ftl.take_moved(&mut moved);
        for &lpn in &moved {
            match self.lru.get(self.key(lpn)) {
                Some(_) => self.mark_dirty(lpn),
                None => self.pending.push(lpn / self.entries_per_tpage),
            }
        }
        self.moved = moved;
    }

    /// Batch updates: writes each queued translation page once, until GC moves no more.
    fn settle<S: FlashSink>(&mut self, sink: &mut S) -> Result<(), FlashError> {
        for _ in 0..SETTLE_ROUNDS {
            self.absorb_moves();
            if self.pending.is_empty() {
                return Ok(());
            }
            let mut batch = std::mem::take(&mut self.pending);
            batch.sort_unstable();
            batch.dedup();
            for &t in &batch {
                // A queued page is not cached whole (a cached page's entries are updated
                // in the cache): it is read first.
                self.write_tpage(t, false, sink)?;
            }
            batch.clear();
            self.pending = batch;
        }
        Err(FlashError::Config(format!(
            "mapping cache: translation pages updated after GC kept moving data for {SETTLE_ROUNDS} rounds: the drive has too little spare space for its translation pages (raise --op)"
        )))
    }
}
