//! A dynamic SLC cache, as TLC drives have (Micron's Dynamic Write Acceleration on the
//! MX300 and MX500, Samsung's TurboWrite, ...).
//!
//! Free TLC blocks are programmed in SLC mode (one bit per cell instead of three), so a host
//! write lands at SLC program time while the cache has room. The cache's size follows the
//! free space: at most `max_fraction` of the user capacity, and never more than the
//! physically free flash (raw bytes minus mapped data) holds in SLC mode — a third of it
//! for TLC. Data deleted without TRIM is still mapped, so a drive that is never trimmed
//! looks full and its cache shrinks.
//!
//! Data in the cache is folded into TLC later: once a die has been idle for
//! `fold_idle_ns`, it folds page after page, each costing an SLC read and a TLC program
//! (`timing.program_ns`); a host command arriving meanwhile waits for the fold in progress.
//! When the cache is full, host writes go to TLC directly at TLC program time; GC copies are
//! always TLC programs.
//!
//! Simplification: the cache is an account of superpages per die, not blocks the FTL
//! places. Every flash program counts in WAF: a cached host page costs an SLC program and,
//! when folded, the TLC program the FTL counts for it (at host time: a page still in the
//! cache at the end has its fold counted already); an uncached one, that TLC program only.
//! The SLC programs are `DeviceStats::slc_program_pages` beside the FTL's. Folded SLC
//! blocks are erased: `erases` counts them (a fold frees an SLC-mode block per
//! `pages_per_block / bits_per_cell` superpages), though not in the per-block erase-count
//! spread, since the account places no blocks.
//!
//! The WAF-only path has no time, so nothing folds there: host pages go to SLC while the
//! cache has room, as on a timed drive kept busy; with idle time, a timed drive folds and
//! caches more.

use serde::{Deserialize, Serialize};

/// A preset's SLC cache. Sources are given per preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlcCacheConfig {
    /// SLC-mode program of one (multi-plane) page.
    pub program_ns: u64,
    /// The largest cache, as a fraction of the user capacity.
    pub max_fraction: f64,
    /// Bits per cell in native mode (3 for TLC): free flash holds 1/bits as much in SLC mode.
    pub bits_per_cell: u32,
    /// A die starts folding after this long without work.
    pub fold_idle_ns: u64,
}

impl SlcCacheConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.max_fraction > 0.0 && self.max_fraction <= 1.0) {
            return Err(format!(
                "slc_cache.max_fraction must be in (0, 1], got {}",
                self.max_fraction
            ));
        }
        if self.bits_per_cell < 2 {
            return Err(format!(
                "slc_cache.bits_per_cell must be at least 2 (an SLC drive has no SLC cache), got {}",
                self.bits_per_cell
            ));
        }
        if self.program_ns == 0 {
            return Err("slc_cache.program_ns must be positive".into());
        }
        Ok(())
    }
}

/// The cache's state: superpages held in SLC mode per die, awaiting a fold.
#[derive(Debug, Clone)]
pub(crate) struct SlcCache {
    cfg: SlcCacheConfig,
    held_pages: Vec<u64>,
    /// How many superpages each die may hold now (set before each write from free space).
    limit_pages: u64,
    max_pages_per_die: u64,
    physical_bytes: u64,
    pub(crate) superpage_bytes: u64,
    dies: u64,
    pub(crate) written_pages: u64,
    pub(crate) folded_pages: u64,
    /// Superpages an SLC-mode block holds (a TLC block's pages over bits per cell).
    block_pages: u64,
}

impl SlcCache {
    pub(crate) fn new(
        cfg: SlcCacheConfig,
        logical_bytes: u64,
        physical_bytes: u64,
        superpage_bytes: u64,
        dies: u32,
        pages_per_block: u32,
    ) -> SlcCache {
        let dies = dies as u64;
        let max_bytes = (logical_bytes as f64 * cfg.max_fraction) as u64;
        SlcCache {
            held_pages: vec![0; dies as usize],
            limit_pages: 0,
            max_pages_per_die: max_bytes / superpage_bytes / dies,
            physical_bytes,
            superpage_bytes,
            dies,
            written_pages: 0,
            folded_pages: 0,
            block_pages: (pages_per_block as u64 / cfg.bits_per_cell as u64).max(1),
            cfg,
        }
    }

    /// Sets the cache's size from the data the FTL holds (`mapped_bytes`).
    pub(crate) fn resize(&mut self, mapped_bytes: u64) {
        let free_bytes = self.physical_bytes.saturating_sub(mapped_bytes);
        let by_free = free_bytes / self.cfg.bits_per_cell as u64 / self.superpage_bytes / self.dies;
        self.limit_pages = by_free.min(self.max_pages_per_die);
    }

    /// The program time of a host page on `die`: SLC if the cache has room (taking it),
    /// else `tlc_program_ns`.
    #[inline]
    pub(crate) fn host_program_ns(&mut self, die: u32, tlc_program_ns: u64) -> u64 {
        let held = &mut self.held_pages[die as usize];
        if *held < self.limit_pages {
            *held += 1;
            self.written_pages += 1;
            self.cfg.program_ns
        } else {
            tlc_program_ns
        }
    }

    /// Folds cached pages into TLC on every die idle since `fold_idle_ns`, up to `now_ns`
    /// (the fold in progress at `now_ns` finishes after it).
    pub(crate) fn fold_idle(
        &mut self,
        die_free_ns: &mut [u64],
        now_ns: u64,
        read_ns: u64,
        tlc_program_ns: u64,
    ) {
        let cost = read_ns + tlc_program_ns;
        for (d, free) in die_free_ns.iter_mut().enumerate() {
            if let Some((start, folds)) = self.idle_folds(d as u32, *free, now_ns, cost) {
                *free = start + folds * cost;
            }
        }
    }

    /// The folds die `die`, idle since `idle_since_ns`, runs up to `now_ns` at `cost_ns`
    /// each (the one in progress at `now_ns` counted): when they start and how many; they
    /// are taken from the cache. `None` if none.
    pub(crate) fn idle_folds(
        &mut self,
        die: u32,
        idle_since_ns: u64,
        now_ns: u64,
        cost_ns: u64,
    ) -> Option<(u64, u64)> {
        let held = &mut self.held_pages[die as usize];
        let start = idle_since_ns + self.cfg.fold_idle_ns;
        if *held == 0 || start >= now_ns {
            return None;
        }
        let folds = (now_ns - start).div_ceil(cost_ns).min(*held);
        *held -= folds;
        self.folded_pages += folds;
        Some((start, folds))
    }

    /// How long die `die`, idle from now, takes to start folding and fold everything it
    /// holds, at `cost_ns` a page.
    pub(crate) fn rest_ns(&self, die: u32, cost_ns: u64) -> u64 {
        match self.held_pages[die as usize] {
            0 => 0,
            held => self.cfg.fold_idle_ns + held * cost_ns,
        }
    }

    /// What one SLC-mode erase is of a P/E cycle, counted in bytes: 1 / bits per cell.
    pub(crate) fn erase_weight(&self) -> f64 {
        1.0 / self.cfg.bits_per_cell as f64
    }

    /// SLC-mode blocks erased after their data was folded.
    pub(crate) fn erased_blocks(&self) -> u64 {
        self.folded_pages / self.block_pages
    }

    pub(crate) fn reset_counters(&mut self) {
        self.written_pages = 0;
        self.folded_pages = 0;
    }

    /// Superpages held in SLC mode now, over all dies.
    pub(crate) fn held_pages(&self) -> u64 {
        self.held_pages.iter().sum()
    }

    /// Bytes held in SLC mode now, awaiting a fold.
    pub(crate) fn held_bytes(&self) -> u64 {
        self.held_pages() * self.superpage_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> SlcCache {
        let cfg = SlcCacheConfig {
            program_ns: 100,
            max_fraction: 0.5,
            bits_per_cell: 3,
            fold_idle_ns: 1_000,
        };
        // 2 dies, 1 KiB superpages, 64 KiB logical, 96 KiB physical.
        SlcCache::new(cfg, 64 << 10, 96 << 10, 1 << 10, 2, 64)
    }

    #[test]
    fn an_empty_drive_caches_up_to_the_maximum() {
        let mut c = cache();
        c.resize(0);
        // max 32 KiB = 16 pages per die; free 96 KiB / 3 = 16 pages per die.
        assert_eq!(c.limit_pages, 16);
        for _ in 0..16 {
            assert_eq!(c.host_program_ns(0, 900), 100);
        }
        assert_eq!(c.host_program_ns(0, 900), 900, "full: TLC direct");
        assert_eq!(c.host_program_ns(1, 900), 100, "the other die has room");
    }

    #[test]
    fn a_full_looking_drive_has_a_small_cache() {
        let mut c = cache();
        c.resize(84 << 10); // 12 KiB free -> 4 KiB in SLC mode -> 2 pages per die
        assert_eq!(c.limit_pages, 2);
        c.resize(200 << 10);
        assert_eq!(c.limit_pages, 0);
        assert_eq!(c.host_program_ns(0, 900), 900);
    }

    #[test]
    fn idle_dies_fold_and_busy_ones_do_not() {
        let mut c = cache();
        c.resize(0);
        for _ in 0..5 {
            c.host_program_ns(0, 900);
            c.host_program_ns(1, 900);
        }
        let mut free = vec![10_000, 50_000];
        // Die 0 idle from 11,000; folds of 1,000 ns each until 13,500: three (the third
        // runs past 13,500). Die 1 is still busy.
        c.fold_idle(&mut free, 13_500, 100, 900);
        assert_eq!(c.held_pages[0], 2);
        assert_eq!(free[0], 14_000);
        assert_eq!(c.held_pages[1], 5);
        assert_eq!(free[1], 50_000);
        assert_eq!(c.folded_pages, 3);
        c.fold_idle(&mut free, 1_000_000, 100, 900);
        assert_eq!(c.held_pages(), 0);
        assert_eq!(c.folded_pages, 10);
    }
}

#[cfg(test)]
mod drive_tests {
    use super::*;
    use crate::{Command, Device, Ssd};

    /// The test drive of `ssd::tests` with an SLC cache of up to a quarter of its capacity,
    /// SLC programs 5x faster than TLC.
    fn drive() -> Ssd {
        let mut cfg = crate::ssd::tests::config();
        cfg.slc_cache = Some(SlcCacheConfig {
            program_ns: cfg.timing.program_ns / 5,
            max_fraction: 0.25,
            bits_per_cell: 3,
            fold_idle_ns: 1_000_000,
        });
        Ssd::new(cfg).unwrap()
    }

    /// Writes `bytes` from `offset` in 64 KiB requests back to back from `t`; returns the
    /// time the last completes.
    fn burst(ssd: &mut Ssd, offset: u64, bytes: u64, mut t: u64) -> u64 {
        let step = 64 << 10;
        for o in (offset..offset + bytes).step_by(step as usize) {
            t = ssd.submit(&Command::write(o, step), t).unwrap();
        }
        t
    }

    #[test]
    fn writes_beyond_the_cache_run_at_tlc_speed() {
        let mut ssd = drive();
        // The cache holds up to 4 MiB (a quarter of 16 MiB): the first 4 MiB land in it.
        let fast = burst(&mut ssd, 0, 4 << 20, 0);
        assert_eq!(ssd.stats().slc_write_bytes, 4 << 20);
        // Written back to back, the next 4 MiB find it full and go to TLC.
        let slow = burst(&mut ssd, 4 << 20, 4 << 20, fast) - fast;
        assert_eq!(ssd.stats().slc_write_bytes, 4 << 20);
        assert!(
            slow as f64 > 2.5 * fast as f64,
            "second burst at TLC speed: {slow} vs {fast} ns"
        );
    }

    #[test]
    fn an_untrimmed_full_drive_has_no_cache_and_trim_gives_it_back() {
        let mut ssd = drive();
        let cap = ssd.logical_bytes();
        let mut t = burst(&mut ssd, 0, cap, 0);
        // Physically free: 25% OP of 16 MiB = 4 MiB -> 1.33 MiB in SLC mode; every die's
        // share fills while the drive fills, so after idle folding the cache is only that.
        t += 1_000_000_000;
        ssd.reset_stats();
        t = burst(&mut ssd, 0, 4 << 20, t);
        let untrimmed = ssd.stats().slc_write_bytes / 4096;
        assert!(untrimmed > 0 && untrimmed <= 352, "{untrimmed}");
        t += 1_000_000_000;
        ssd.submit(&Command::trim(0, cap / 2), t).unwrap();
        t += 1_000_000_000;
        ssd.reset_stats();
        burst(&mut ssd, cap / 2, 4 << 20, t);
        let trimmed = ssd.stats().slc_write_bytes / 4096;
        assert_eq!(trimmed, 1024, "after TRIM the whole 4 MiB lands in SLC");
    }

    #[test]
    fn every_slc_program_and_folded_block_counts_and_the_waf_only_path_agrees() {
        // 8 MiB back to back: the first 4 MiB land in SLC (an SLC program and, at the fold,
        // the TLC program the FTL counts), the rest in TLC. WAF counts both; it was 1.0.
        let mut timed = drive();
        burst(&mut timed, 0, 8 << 20, 0);
        let s = timed.stats();
        assert_eq!(s.slc_program_pages, 1024);
        assert_eq!(s.host_program_pages, 2048);
        assert_eq!(s.flash_write_pages, 2048 + 1024);
        assert_eq!(s.waf, Some(1.5));
        // The same writes on the WAF-only path (no time, so no folds, as here): the same.
        let mut untimed = drive();
        for o in (0..8u64 << 20).step_by(64 << 10) {
            untimed.write_untimed(o, 64 << 10).unwrap();
        }
        let u = untimed.stats();
        assert_eq!(
            (u.waf, u.slc_program_pages, u.flash_write_pages, u.erases),
            (s.waf, s.slc_program_pages, s.flash_write_pages, s.erases)
        );
        // Folding erases the SLC-mode blocks it empties, and those erases count.
        let before = timed.stats().erases;
        timed
            .submit(&Command::read(0, 4096), 10_000_000_000)
            .unwrap();
        let folded = timed.stats();
        assert_eq!(folded.slc_folded_bytes, 4 << 20);
        let c = crate::ssd::tests::config();
        let slc_block_pages = c.geometry.pages_per_block as u64 / 3;
        let superpages = (4u64 << 20) / c.geometry.superpage_bytes();
        assert_eq!(folded.erases - before, superpages / slc_block_pages);
        assert!(folded.erases > before);
    }

    #[test]
    fn idle_time_folds_the_cache() {
        let mut ssd = drive();
        let t = burst(&mut ssd, 0, 1 << 20, 0);
        // A read long after the burst: every die has been idle for 1 s and folded all.
        ssd.submit(&Command::read(0, 4096), t + 1_000_000_000)
            .unwrap();
        let s = ssd.stats();
        assert_eq!(s.slc_folded_bytes, s.slc_write_bytes);
        assert_eq!(ssd.slc.as_ref().unwrap().held_pages(), 0);
    }
}
