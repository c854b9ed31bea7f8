//! FAST (Lee et al., "A log buffer-based flash translation layer using fully-associative
//! sector translation", TECS 2007): the hybrid log-block FTL of 2000s SSDs, paper 004's
//! drive among them.
//!
//! Data blocks are block-mapped: logical page `o` of logical block `b` lives at page `o` of
//! `b`'s data block. Writes go to log blocks with page-level mapping: one sequential log
//! block (SW) receives a logical block's pages written in order from page 0; every other
//! write is appended to the random-write log blocks (RW), shared by all logical blocks.
//! When the SW block must make room it is merged: a *switch* (it holds the whole block in
//! order and replaces the data block), a *partial* merge (it holds pages 0..k in order: the
//! rest is copied in), or a *full* merge. When the RW blocks run out, the oldest is
//! reclaimed by full merges of every logical block with a valid page in it: each gathers
//! the block's latest pages into a fresh block. Random writes therefore cost merges
//! (copies and erases) that sequential writes avoid.
//!
//! Mapping units equal flash pages here (one program per unit). A FAST block is a
//! superblock of one erase block per die, pages interleaved across dies, so sequential
//! runs use every die and an erase takes every die.

use crate::ftl::{FlashSink, FtlCounters, ProgramKind, INVALID, UNMAPPED};
use crate::{FlashError, Geometry};
use std::collections::VecDeque;

const NO_BLOCK: u32 = u32::MAX;

/// Merge counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeCounts {
    pub switch: u64,
    pub partial: u64,
    pub full: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sw {
    block: u32,
    lbn: u32,
    next: u32,
}

pub struct FastFtl {
    ppb: u32,
    dies: u32,
    logical_units: u32,
    data_map: Vec<u32>,
    /// Page-level map of pages held in log blocks.
    log_map: Vec<u32>,
    p2l: Vec<u32>,
    free: VecDeque<u32>,
    sw: Option<Sw>,
    rw: VecDeque<u32>,
    rw_cur: Option<(u32, u32)>,
    max_rw: usize,
    erase_count: Vec<u32>,
    mapped_units: u64,
    counters: FtlCounters,
    pub merges: MergeCounts,
}

impl FastFtl {
    /// `log_blocks`: random-write log blocks (one more block is the sequential log).
    pub fn new(g: &Geometry, log_blocks: u32) -> Result<Self, FlashError> {
        g.validate()?;
        if g.units_per_page() != 1 {
            return Err(FlashError::Config(format!(
                "the FAST FTL maps whole pages: mapping_unit_bytes must equal page_size_bytes × planes_per_die ({} units per page here)",
                g.units_per_page()
            )));
        }
        // A FAST block is a superblock: one erase block on every die, its pages
        // interleaved across the dies.
        let ppb = g.pages_per_block * g.dies();
        let logical_blocks = g.logical_units().div_ceil(ppb as u64) as u32;
        let total = g.blocks_per_die() as u32;
        // Data blocks, the log blocks, the SW block and two spares for merges.
        if log_blocks == 0 || (logical_blocks as u64 + log_blocks as u64 + 3) > total as u64 {
            return Err(FlashError::Geometry(format!(
                "FAST needs {logical_blocks} data blocks + {log_blocks} log blocks + 3 spare, but the drive has {total} blocks (raise --op)"
            )));
        }
        Ok(FastFtl {
            ppb,
            dies: g.dies(),
            logical_units: g.logical_units() as u32,
            data_map: vec![NO_BLOCK; logical_blocks as usize],
            log_map: vec![UNMAPPED; g.logical_units() as usize],
            p2l: vec![INVALID; total as usize * ppb as usize],
            free: (0..total).collect(),
            sw: None,
            rw: VecDeque::new(),
            rw_cur: None,
            max_rw: log_blocks as usize,
            erase_count: vec![0; total as usize],
            mapped_units: 0,
            counters: FtlCounters::default(),
            merges: MergeCounts::default(),
        })
    }

    pub fn logical_units(&self) -> u32 {
        self.logical_units
    }
    pub fn counters(&self) -> FtlCounters {
        self.counters
    }
    pub fn reset_counters(&mut self) {
        self.counters = FtlCounters::default();
        self.merges = MergeCounts::default();
    }
    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }
    /// Every block starts at `cycles` erases (a drive worn before the run).
    pub fn seed_erase_counts(&mut self, cycles: u32) {
        self.erase_count.fill(cycles);
    }
    pub fn mapped_units(&self) -> u64 {
        self.mapped_units
    }
    /// Blocks are superblocks across all dies: consecutive pages of a block sit on
    /// consecutive dies, so a sequential run uses every die.
    #[inline]
    pub fn die_of(&self, ppn: u32) -> u32 {
        ppn % self.dies
    }
    #[inline]
    pub fn page_of(&self, ppn: u32) -> u32 {
        ppn
    }
    pub fn note_read(&mut self) {
        self.counters.host_read_units += 1;
    }

    /// Where logical unit `lpn` lives.
    pub fn lookup(&self, lpn: u32) -> Option<u32> {
        let l = self.log_map[lpn as usize];
        if l != UNMAPPED {
            return Some(l);
        }
        let d = self.data_map[(lpn / self.ppb) as usize];
        if d == NO_BLOCK {
            return None;
        }
        let p = d * self.ppb + lpn % self.ppb;
        (self.p2l[p as usize] == lpn).then_some(p)
    }

    fn invalidate(&mut self, lpn: u32) -> bool {
        match self.lookup(lpn) {
            Some(p) => {
                self.p2l[p as usize] = INVALID;
                self.log_map[lpn as usize] = UNMAPPED;
                true
            }
            None => false,
        }
    }

    fn erase<S: FlashSink>(&mut self, block: u32, sink: &mut S) {
        debug_assert!(
            self.p2l[(block * self.ppb) as usize..((block + 1) * self.ppb) as usize]
                .iter()
                .all(|&l| l == INVALID)
        );
        self.erase_count[block as usize] += 1;
        self.counters.erases += 1;
        for d in 0..self.dies {
            sink.block_erase(d, block);
        }
        self.free.push_back(block);
    }

    fn take_free<S: FlashSink>(&mut self, sink: &mut S) -> Result<u32, FlashError> {
        if self.free.is_empty() {
            self.reclaim_rw(sink)?;
        }
        self.free.pop_front().ok_or_else(|| {
            FlashError::Config("FAST: no free block even after reclaiming log blocks".into())
        })
    }

    /// Places `lpn` at physical unit `p` (a log page).
    fn place<S: FlashSink>(&mut self, lpn: u32, p: u32, kind: ProgramKind, sink: &mut S) {
        self.p2l[p as usize] = lpn;
        self.log_map[lpn as usize] = p;
        sink.page_program(p % self.dies, kind);
    }

    /// Gathers every latest page of logical block `lbn` into a fresh data block.
    fn full_merge<S: FlashSink>(&mut self, lbn: u32, sink: &mut S) -> Result<(), FlashError> {
        self.merges.full += 1;
        let fresh = self
            .free
            .pop_front()
            .ok_or_else(|| FlashError::Config("FAST: no spare block for a merge".into()))?;
        for off in 0..self.ppb {
            let lpn = lbn * self.ppb + off;
            if lpn >= self.logical_units {
                break;
            }
            if let Some(src) = self.lookup(lpn) {
                sink.page_read(src % self.dies);
                self.p2l[src as usize] = INVALID;
                self.log_map[lpn as usize] = UNMAPPED;
                let dst = fresh * self.ppb + off;
                self.p2l[dst as usize] = lpn;
                sink.page_program(dst % self.dies, ProgramKind::GcCopy);
                self.counters.gc_copied_units += 1;
            }
        }
        let old = std::mem::replace(&mut self.data_map[lbn as usize], fresh);
        if old != NO_BLOCK {
            self.erase(old, sink);
        }
        // A sequential log block of this logical block has nothing valid left.
        if let Some(sw) = self.sw {
            if sw.lbn == lbn {
                self.sw = None;
                self.erase(sw.block, sink);
            }
        }
        Ok(())
    }

    /// Merges the sequential log block into a data block.
    fn merge_sw<S: FlashSink>(&mut self, sink: &mut S) -> Result<(), FlashError> {
        let Some(sw) = self.sw.take() else {
            return Ok(());
        };
        let base = sw.block * self.ppb;
        let in_order = (0..sw.next).all(|o| self.p2l[(base + o) as usize] == sw.lbn * self.ppb + o);
        if !in_order {
            self.sw = Some(sw);
            return self.full_merge(sw.lbn, sink);
        }
        if sw.next == self.ppb {
            self.merges.switch += 1;
        } else {
            // Partial merge: copy the block's remaining pages in behind the logged ones.
            self.merges.partial += 1;
            for off in sw.next..self.ppb {
                let lpn = sw.lbn * self.ppb + off;
                if lpn >= self.logical_units {
                    break;
                }
                if let Some(src) = self.lookup(lpn) {
                    sink.page_read(src % self.dies);
                    self.p2l[src as usize] = INVALID;
                    self.log_map[lpn as usize] = UNMAPPED;
                    self.p2l[(base + off) as usize] = lpn;
                    sink.page_program((base + off) % self.dies, ProgramKind::GcCopy);
                    self.counters.gc_copied_units += 1;
                }
            }
        }
        // The log block becomes the data block: its pages leave the page-level map.
        for off in 0..self.ppb {
            let lpn = sw.lbn * self.ppb + off;
            if lpn < self.logical_units && self.log_map[lpn as usize] == base + off {
                self.log_map[lpn as usize] = UNMAPPED;
            }
        }
        let old = std::mem::replace(&mut self.data_map[sw.lbn as usize], sw.block);
        if old != NO_BLOCK {
            for p in old * self.ppb..(old + 1) * self.ppb {
                debug_assert_eq!(
                    self.p2l[p as usize], INVALID,
                    "the old data block's pages were superseded"
                );
                self.p2l[p as usize] = INVALID;
            }
            self.erase(old, sink);
        }
        Ok(())
    }

    /// Reclaims the oldest random-write log block by full merges.
    fn reclaim_rw<S: FlashSink>(&mut self, sink: &mut S) -> Result<(), FlashError> {
        let Some(victim) = self.rw.pop_front() else {
            return Err(FlashError::Config("FAST: no log block to reclaim".into()));
        };
        if self.rw_cur.is_some_and(|(b, _)| b == victim) {
            self.rw_cur = None;
        }
        let mut lbns: Vec<u32> = (victim * self.ppb..(victim + 1) * self.ppb)
            .map(|p| self.p2l[p as usize])
            .filter(|&l| l != INVALID)
            .map(|l| l / self.ppb)
            .collect();
        lbns.sort_unstable();
        lbns.dedup();
        for lbn in lbns {
            self.full_merge(lbn, sink)?;
        }
        self.erase(victim, sink);
        Ok(())
    }

    pub fn write<S: FlashSink>(&mut self, lpn: u32, sink: &mut S) -> Result<u32, FlashError> {
        debug_assert!(lpn < self.logical_units);
        if !self.invalidate(lpn) {
            self.mapped_units += 1;
        }
        self.counters.host_write_units += 1;
        let (lbn, off) = (lpn / self.ppb, lpn % self.ppb);
        // Sequential stream: page 0 opens a new SW block; the next page in order extends it.
        if off == 0 {
            self.merge_sw(sink)?;
            let b = self.take_free(sink)?;
            self.sw = Some(Sw {
                block: b,
                lbn,
                next: 1,
            });
            self.place(lpn, b * self.ppb, ProgramKind::Host, sink);
            return Ok((b * self.ppb) % self.dies);
        }
        if let Some(sw) = self.sw {
            if sw.lbn == lbn && sw.next == off {
                self.place(lpn, sw.block * self.ppb + off, ProgramKind::Host, sink);
                self.sw = Some(Sw {
                    next: off + 1,
                    ..sw
                });
                return Ok((sw.block * self.ppb + off) % self.dies);
            }
        }
        // Random: append to the current RW log block.
        let (b, next) = match self.rw_cur {
            Some((b, n)) if n < self.ppb => (b, n),
            _ => {
                if self.rw.len() >= self.max_rw {
                    self.reclaim_rw(sink)?;
                }
                let b = self.take_free(sink)?;
                self.rw.push_back(b);
                (b, 0)
            }
        };
        self.rw_cur = Some((b, next + 1));
        self.place(lpn, b * self.ppb + next, ProgramKind::Host, sink);
        Ok((b * self.ppb + next) % self.dies)
    }

    pub fn trim(&mut self, lpn: u32) -> bool {
        if self.invalidate(lpn) {
            self.mapped_units -= 1;
            self.counters.trimmed_units += 1;
            true
        } else {
            false
        }
    }

    /// Consistency: every mapped unit's location says so, counts agree.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut mapped = 0u64;
        for lpn in 0..self.logical_units {
            if let Some(p) = self.lookup(lpn) {
                mapped += 1;
                if self.p2l[p as usize] != lpn {
                    return Err(format!(
                        "lpn {lpn} maps to {p}, which holds {}",
                        self.p2l[p as usize]
                    ));
                }
            }
        }
        let valid = self.p2l.iter().filter(|&&l| l != INVALID).count() as u64;
        if mapped != self.mapped_units || valid != mapped {
            return Err(format!(
                "{mapped} mapped units, {valid} valid pages, counter {}",
                self.mapped_units
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftl::NoTiming;
    use std::collections::HashMap;

    fn geometry() -> Geometry {
        Geometry {
            channels: 1,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 1,
            pages_per_block: 16,
            page_size_bytes: 4096,
            mapping_unit_bytes: 4096,
            logical_bytes: 4 << 20,
            op: 0.3,
        }
    }

    #[test]
    fn sequential_writes_switch_merge_and_random_writes_full_merge() {
        let mut f = FastFtl::new(&geometry(), 4).unwrap();
        let n = f.logical_units();
        for lpn in 0..n {
            f.write(lpn, &mut NoTiming).unwrap();
        }
        for lpn in 0..n {
            f.write(lpn, &mut NoTiming).unwrap();
        }
        f.check_invariants().unwrap();
        assert!(f.merges.switch > 0 && f.merges.full == 0, "{:?}", f.merges);
        assert_eq!(
            f.counters().gc_copied_units,
            0,
            "sequential rewrites copy nothing"
        );
        let mut x = 1u32;
        for _ in 0..4 * n {
            x = x.wrapping_mul(1103515245).wrapping_add(12345);
            f.write((x >> 8) % n, &mut NoTiming).unwrap();
        }
        f.check_invariants().unwrap();
        assert!(f.merges.full > 0);
        let c = f.counters();
        assert!(
            c.flash_write_units() > 3 * c.host_write_units,
            "random writes are expensive: {c:?}"
        );
    }

    #[test]
    fn matches_a_reference_map_under_mixed_writes_and_trims() {
        let mut f = FastFtl::new(&geometry(), 3).unwrap();
        let n = f.logical_units();
        let mut model: HashMap<u32, bool> = HashMap::new();
        let mut x = 7u64;
        for i in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 33) as u32;
            if i % 7 == 0 {
                let start = r % n;
                for lpn in start..(start + 20).min(n) {
                    f.write(lpn, &mut NoTiming).unwrap();
                    model.insert(lpn, true);
                }
            } else if i % 11 == 0 {
                let lpn = r % n;
                assert_eq!(f.trim(lpn), model.remove(&lpn).is_some());
            } else {
                let lpn = r % n;
                f.write(lpn, &mut NoTiming).unwrap();
                model.insert(lpn, true);
            }
        }
        f.check_invariants().unwrap();
        for lpn in 0..n {
            assert_eq!(
                f.lookup(lpn).is_some(),
                model.contains_key(&lpn),
                "lpn {lpn}"
            );
        }
    }
}
