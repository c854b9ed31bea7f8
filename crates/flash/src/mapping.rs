//! The SSD's mapping scheme: the page-mapped FTL (its whole map in DRAM, or cached with the
//! map on flash) or the FAST hybrid log-block FTL, behind one type the timing model calls.

use crate::fast::FastFtl;
use crate::ftl::{FlashSink, FtlCounters, PageFtl};
use crate::mapcache::CachedFtl;
use crate::FlashError;
use serde::{Deserialize, Serialize};

/// Which FTL a drive runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FtlKind {
    /// Page-level mapping with GC (`ftl::PageFtl`).
    #[default]
    Page,
    /// FAST hybrid log-block mapping (`fast::FastFtl`).
    Fast,
}

pub enum Ftl {
    Page(PageFtl),
    /// The page-mapped FTL with a cached mapping table ([`crate::mapcache`]).
    Cached(Box<CachedFtl>),
    Fast(FastFtl),
}

macro_rules! both {
    ($self:ident, $f:ident => $e:expr) => {
        match $self {
            Ftl::Page($f) => $e,
            Ftl::Cached($f) => $e,
            Ftl::Fast($f) => $e,
        }
    };
}

impl Ftl {
    pub fn logical_units(&self) -> u32 {
        both!(self, f => f.logical_units())
    }
    /// Logical units that hold data (written and not trimmed).
    pub fn mapped_units(&self) -> u64 {
        both!(self, f => f.mapped_units())
    }
    pub fn counters(&self) -> FtlCounters {
        both!(self, f => f.counters())
    }
    pub fn reset_counters(&mut self) {
        both!(self, f => f.reset_counters())
    }
    pub fn erase_counts(&self) -> &[u32] {
        both!(self, f => f.erase_counts())
    }
    #[inline]
    pub fn die_of(&self, ppn: u32) -> u32 {
        both!(self, f => f.die_of(ppn))
    }
    #[inline]
    pub fn page_of(&self, ppn: u32) -> u32 {
        both!(self, f => f.page_of(ppn))
    }
    #[inline]
    pub fn lookup(&self, lpn: u32) -> Option<u32> {
        both!(self, f => f.lookup(lpn))
    }
    #[inline]
    pub fn note_read(&mut self) {
        both!(self, f => f.note_read())
    }
    #[inline]
    pub fn write<S: FlashSink>(&mut self, lpn: u32, sink: &mut S) -> Result<u32, FlashError> {
        both!(self, f => f.write(lpn, sink))
    }
    /// Writes the logical units `lpns` in order (one dispatch for the whole range, so the
    /// loop over a large write stays the page FTL's own).
    pub fn write_range<S: FlashSink>(
        &mut self,
        lpns: std::ops::Range<u32>,
        sink: &mut S,
    ) -> Result<(), FlashError> {
        match self {
            Ftl::Page(f) => lpns
                .into_iter()
                .try_for_each(|l| f.write(l, sink).map(drop)),
            Ftl::Cached(f) => lpns
                .into_iter()
                .try_for_each(|l| f.write(l, sink).map(drop)),
            Ftl::Fast(f) => lpns
                .into_iter()
                .try_for_each(|l| f.write(l, sink).map(drop)),
        }
    }
    pub fn write_batch<S: FlashSink>(
        &mut self,
        lpns: &[u32],
        sink: &mut S,
    ) -> Result<(), FlashError> {
        match self {
            Ftl::Page(f) => f.write_batch(lpns, sink),
            Ftl::Cached(f) => lpns.iter().try_for_each(|&l| f.write(l, sink).map(|_| ())),
            Ftl::Fast(f) => lpns.iter().try_for_each(|&l| f.write(l, sink).map(|_| ())),
        }
    }
    /// [`Ftl::write_range`] on placement handle `handle` (other than 0: the caller keeps
    /// the default path to [`Ftl::write_range`]; only a page FTL with placement handles
    /// has others, which the drive checks first).
    #[cold]
    #[inline(never)]
    pub fn write_range_placed<S: FlashSink>(
        &mut self,
        lpns: std::ops::Range<u32>,
        handle: u16,
        sink: &mut S,
    ) -> Result<(), FlashError> {
        match self {
            Ftl::Page(f) => lpns
                .into_iter()
                .try_for_each(|l| f.write_placed(l, handle, sink).map(drop)),
            _ => Err(FlashError::Config(
                "placement handles need the page-mapped FTL".into(),
            )),
        }
    }
    /// Writes `lpns[i]` on placement handle `handles[i]` in order (the page FTL with
    /// placement handles; the drive checks the handles first).
    pub fn write_batch_placed<S: FlashSink>(
        &mut self,
        lpns: &[u32],
        handles: &[u16],
        sink: &mut S,
    ) -> Result<(), FlashError> {
        debug_assert_eq!(lpns.len(), handles.len());
        match self {
            Ftl::Page(f) => lpns
                .iter()
                .zip(handles)
                .try_for_each(|(&l, &h)| f.write_placed(l, h, sink).map(drop)),
            _ if handles.iter().all(|&h| h == 0) => self.write_batch(lpns, sink),
            _ => Err(FlashError::Config(
                "placement handles need the page-mapped FTL".into(),
            )),
        }
    }
    /// The page FTL's placement handles (1: only the default frontier).
    pub fn handles(&self) -> u16 {
        match self {
            Ftl::Page(f) => f.handles(),
            _ => 1,
        }
    }
    /// The page FTL, if that is the drive's mapping scheme (without a mapping cache).
    pub fn page_ftl(&self) -> Option<&PageFtl> {
        match self {
            Ftl::Page(f) => Some(f),
            _ => None,
        }
    }
    #[inline]
    pub fn trim(&mut self, lpn: u32) -> bool {
        both!(self, f => f.trim(lpn))
    }
    /// Looks `lpn` up as a host read does, changing what the lookup changes: the mapping
    /// cache's contents (and the translation pages its evictions write). Drives with the
    /// whole map in DRAM change nothing on a read.
    pub fn translate_for_read<S: FlashSink>(
        &mut self,
        lpn: u32,
        sink: &mut S,
    ) -> Result<(), FlashError> {
        match self {
            Ftl::Cached(f) => f.translate(lpn, sink).map(drop),
            _ => Ok(()),
        }
    }
    pub fn prefetch_lpn(&self, lpn: u32) {
        match self {
            Ftl::Page(f) => f.prefetch_lpn(lpn),
            Ftl::Cached(f) => f.page_ftl().prefetch_lpn(lpn),
            Ftl::Fast(_) => {}
        }
    }
    /// See [`crate::ftl::PageFtl::prefetch_mapped`].
    #[inline]
    pub fn prefetch_mapped(&self, lpn: u32) {
        match self {
            Ftl::Page(f) => f.prefetch_mapped(lpn),
            Ftl::Cached(f) => f.page_ftl().prefetch_mapped(lpn),
            Ftl::Fast(_) => {}
        }
    }
    /// Sets wear leveling ([`crate::wear`]) on the page-mapped FTL; the FAST FTL has none
    /// (its config is refused before it gets here).
    /// Every block starts at `cycles` erases: a drive worn before the run (`--age pe=N`).
    pub fn seed_erase_counts(&mut self, cycles: u32) {
        match self {
            Ftl::Page(f) => f.seed_erase_counts(cycles),
            Ftl::Cached(f) => f.page_ftl_mut().seed_erase_counts(cycles),
            Ftl::Fast(f) => f.seed_erase_counts(cycles),
        }
    }
    pub fn set_wear_leveling(&mut self, wear: crate::wear::WearLevelingConfig) {
        match self {
            Ftl::Page(f) => f.set_wear_leveling(wear),
            Ftl::Cached(f) => f.page_ftl_mut().set_wear_leveling(wear),
            Ftl::Fast(_) => {}
        }
    }
    /// The cached mapping table, if the drive has one.
    pub fn mapping_cache(&self) -> Option<&CachedFtl> {
        match self {
            Ftl::Cached(f) => Some(f),
            _ => None,
        }
    }
    /// Host units of one GC cycle, and whether GC is in play now (the page FTL; FAST
    /// merges per log block and has no such cycle).
    pub fn gc_cycle(&self) -> Option<(u64, bool)> {
        match self {
            Ftl::Page(f) => Some((f.gc_cycle_units(), f.in_gc_regime())),
            Ftl::Cached(f) => Some((f.page_ftl().gc_cycle_units(), f.page_ftl().in_gc_regime())),
            Ftl::Fast(_) => None,
        }
    }
    pub fn free_blocks(&self, die: u32) -> usize {
        match self {
            Ftl::Page(f) => f.free_blocks(die),
            Ftl::Cached(f) => f.page_ftl().free_blocks(die),
            Ftl::Fast(_) => usize::MAX,
        }
    }
    /// Idle-time GC (the page FTL only; FAST merges on demand).
    pub fn background_collect<S: FlashSink>(
        &mut self,
        die: u32,
        target: u32,
        sink: &mut S,
    ) -> bool {
        match self {
            Ftl::Page(f) => f.background_collect(die, target, sink),
            Ftl::Cached(f) => f.background_collect(die, target, sink),
            Ftl::Fast(_) => false,
        }
    }
    /// Read reclaim of `block` (the page FTL only): the units copied, or `None` if it could
    /// not run now.
    pub fn reclaim<S: FlashSink>(&mut self, block: u32, sink: &mut S) -> Option<u32> {
        match self {
            Ftl::Page(f) => f.reclaim(block, sink),
            Ftl::Cached(f) => f.reclaim(block, sink),
            Ftl::Fast(_) => None,
        }
    }
    pub fn check_counts(&self) -> Result<(), String> {
        match self {
            Ftl::Page(f) => f.check_counts(),
            Ftl::Cached(f) => f.page_ftl().check_counts(),
            Ftl::Fast(f) => f.check_invariants(),
        }
    }
    pub fn check_invariants(&self) -> Result<(), String> {
        both!(self, f => f.check_invariants())
    }
}
