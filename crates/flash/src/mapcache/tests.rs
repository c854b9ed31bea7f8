//! The cached mapping table against theory (LRU hit ratios), its translation writes as the
//! cache shrinks, translation-block GC, and its costs in the timed drive.

use super::*;
use crate::ftl::{NoTiming, ProgramKind};
use crate::ssd::tests::config as ssd_config;
use crate::{Command, Device, Ssd};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn geometry(logical_bytes: u64, op: f64) -> Geometry {
    Geometry {
        channels: 2,
        chips_per_channel: 2,
        dies_per_chip: 1,
        planes_per_die: 1,
        pages_per_block: 16,
        page_size_bytes: 8192,
        mapping_unit_bytes: 4096,
        logical_bytes,
        op,
    }
}

fn cached(g: &Geometry, entries: u64, entry_bytes: u32) -> CachedFtl {
    let cfg = MappingCacheConfig {
        cache_bytes: entries * entry_bytes as u64,
        entry_bytes,
        location: CacheLocation::Dram,
        hmb_access_ns: 0,
        granularity: CacheGranularity::Entry,
    };
    CachedFtl::new(g, GcPolicy::Greedy, 2, true, &cfg).unwrap()
}

/// A cache of `pages` whole translation pages (4-byte entries).
fn cached_pages(g: &Geometry, pages: u64) -> CachedFtl {
    let cfg = MappingCacheConfig {
        cache_bytes: pages * g.mapping_unit_bytes as u64,
        granularity: CacheGranularity::Page,
        ..MappingCacheConfig::dram(4)
    };
    CachedFtl::new(g, GcPolicy::Greedy, 2, true, &cfg).unwrap()
}

/// Hit ratio of `lookups` reads of units drawn by `draw` after `warmup` unmeasured ones.
fn read_hit_ratio(
    ftl: &mut CachedFtl,
    warmup: u64,
    lookups: u64,
    mut draw: impl FnMut() -> u32,
) -> f64 {
    for _ in 0..warmup {
        ftl.translate(draw(), &mut NoTiming).unwrap();
    }
    let before = ftl.cache_counters();
    for _ in 0..lookups {
        ftl.translate(draw(), &mut NoTiming).unwrap();
    }
    let after = ftl.cache_counters();
    let hits = after.hits - before.hits;
    assert_eq!(hits + after.misses - before.misses, lookups);
    hits as f64 / lookups as f64
}

#[test]
fn uniform_reads_hit_in_proportion_to_the_cached_share_of_the_footprint() {
    // LRU under independent uniform references over F units holds C of them at random:
    // a reference hits with probability C / F.
    let g = geometry(64 << 20, 0.25);
    let footprint = 8192u32;
    for cache_entries in [512u64, 2048, 6144] {
        let mut ftl = cached(&g, cache_entries, 4);
        for lpn in 0..footprint {
            ftl.write(lpn, &mut NoTiming).unwrap();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let ratio = read_hit_ratio(&mut ftl, 4 * footprint as u64, 200_000, || {
            rng.random_range(0..footprint)
        });
        let theory = cache_entries as f64 / footprint as f64;
        println!(
            "uniform, cache {cache_entries} of {footprint}: hit ratio {ratio:.4}, C/F {theory:.4}"
        );
        // 200,000 lookups: a standard error under 0.0011; 0.005 is over 4 of them.
        assert!(
            (ratio - theory).abs() < 0.005,
            "cache {cache_entries} of {footprint}: hit ratio {ratio:.4}, theory {theory:.4}"
        );
        ftl.check_invariants().unwrap();
    }
}

/// Che's approximation of LRU's hit ratio (Che, Tung and Wang, IEEE JSAC 2002; Fricker,
/// Robert and Roberts, ITC 2012): with reference probabilities `p`, the characteristic
/// time T solves sum(1 - exp(-p_i T)) = C, and the hit ratio is sum(p_i (1 - exp(-p_i T))).
fn che_hit_ratio(p: &[f64], cache_entries: f64) -> f64 {
    let filled = |t: f64| p.iter().map(|&pi| 1.0 - (-pi * t).exp()).sum::<f64>();
    let (mut lo, mut hi) = (0.0, 1.0);
    while filled(hi) < cache_entries {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if filled(mid) < cache_entries {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    p.iter().map(|&pi| pi * (1.0 - (-pi * lo).exp())).sum()
}

#[test]
fn zipf_reads_hit_as_ches_approximation_predicts() {
    let g = geometry(64 << 20, 0.25);
    let footprint = 8192usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    // Popularity ranks scattered over the footprint (a shuffled permutation), so hot units
    // do not share translation pages by construction.
    let mut unit_of_rank: Vec<u32> = (0..footprint as u32).collect();
    for i in (1..footprint).rev() {
        unit_of_rank.swap(i, rng.random_range(0..=i));
    }
    for theta in [0.8, 0.99] {
        let weights: Vec<f64> = (1..=footprint)
            .map(|r| 1.0 / (r as f64).powf(theta))
            .collect();
        let total: f64 = weights.iter().sum();
        let p: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let cdf: Vec<f64> = p
            .iter()
            .scan(0.0, |acc, &pi| {
                *acc += pi;
                Some(*acc)
            })
            .collect();
        for cache_entries in [256u64, 1024, 4096] {
            let mut ftl = cached(&g, cache_entries, 4);
            for lpn in 0..footprint as u32 {
                ftl.write(lpn, &mut NoTiming).unwrap();
            }
            let ratio = read_hit_ratio(&mut ftl, 4 * footprint as u64, 200_000, || {
                let u: f64 = rng.random();
                let rank = cdf.partition_point(|&c| c < u).min(footprint - 1);
                unit_of_rank[rank]
            });
            let theory = che_hit_ratio(&p, cache_entries as f64);
            println!("zipf {theta}, cache {cache_entries} of {footprint}: hit ratio {ratio:.4}, Che {theory:.4}");
            // Che's approximation is within a few thousandths of exact LRU for Zipf
            // popularity at these sizes (Fricker et al.); with the sampling error, 0.01.
            assert!(
                (ratio - theory).abs() < 0.01,
                "zipf {theta}, cache {cache_entries} of {footprint}: hit ratio {ratio:.4}, Che {theory:.4}"
            );
        }
    }
}

/// Translation pages' share of flash writes over `rounds` footprints of uniform random
/// writes after a fill and one footprint of warm-up.
fn translation_share(g: &Geometry, cache_entries: u64, rounds: u32) -> (f64, FtlCounters) {
    let mut ftl = cached(g, cache_entries, 4);
    let n = ftl.logical_units();
    for lpn in 0..n {
        ftl.write(lpn, &mut NoTiming).unwrap();
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for _ in 0..n {
        ftl.write(rng.random_range(0..n), &mut NoTiming).unwrap();
    }
    ftl.reset_counters();
    for _ in 0..rounds * n {
        ftl.write(rng.random_range(0..n), &mut NoTiming).unwrap();
    }
    ftl.check_invariants().unwrap();
    let c = ftl.counters();
    (c.map_write_units as f64 / c.flash_write_units() as f64, c)
}

#[test]
fn translation_writes_take_a_growing_share_of_flash_writes_as_the_cache_shrinks() {
    // Blocks of 256 units, so that a GC victim's batch updates (a translation page for
    // each page its uncached units belong to) are not most of the translation writes.
    let g = Geometry {
        channels: 1,
        chips_per_channel: 1,
        pages_per_block: 64,
        page_size_bytes: 16384,
        ..geometry(64 << 20, 0.25)
    };
    let n = g.logical_units();
    let mut shares = vec![];
    for cache_entries in [n, n / 2, n / 8, n / 32, n / 128, n / 1024] {
        let (share, c) = translation_share(&g, cache_entries, 3);
        println!(
            "cache {cache_entries} of {n} entries: translation writes {:.4} of flash writes, WAF {:.3}",
            share,
            c.flash_write_units() as f64 / c.host_write_units as f64
        );
        shares.push((cache_entries, share, c));
    }
    for w in shares.windows(2) {
        assert!(
            w[1].1 >= w[0].1,
            "a smaller cache wrote a smaller share of translation pages: {:?}",
            shares.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>()
        );
    }
    // A cache holding the whole footprint never evicts: no translation page is written.
    assert_eq!(shares[0].2.map_write_units, 0);
    assert!(shares.last().unwrap().1 > 0.1, "{shares:?}");
}

#[test]
fn a_cache_that_holds_the_whole_map_changes_nothing() {
    let g = geometry(32 << 20, 0.25);
    let (_, with_cache) = translation_share(&g, g.logical_units(), 2);
    let mut ftl = PageFtl::new(&g, GcPolicy::Greedy, 2)
        .unwrap()
        .with_pacing(true);
    let n = ftl.logical_units();
    for lpn in 0..n {
        ftl.write(lpn, &mut NoTiming).unwrap();
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for _ in 0..n {
        ftl.write(rng.random_range(0..n), &mut NoTiming).unwrap();
    }
    ftl.reset_counters();
    for _ in 0..2 * n {
        ftl.write(rng.random_range(0..n), &mut NoTiming).unwrap();
    }
    assert_eq!(with_cache, ftl.counters());
}

/// Carries each unit's payload (the version written) through GC, as `tests/ftl_model.rs`
/// does, and counts programs by kind.
struct Payloads {
    by_ppn: Vec<u64>,
    map_programs: u64,
    map_reads: u64,
}

impl FlashSink for Payloads {
    fn page_read(&mut self, _die: u32) {}
    fn page_program(&mut self, _die: u32, kind: ProgramKind) {
        if kind == ProgramKind::Map {
            self.map_programs += 1;
        }
    }
    fn block_erase(&mut self, _die: u32, _block: u32) {}
    fn map_read(&mut self, _die: u32) {
        self.map_reads += 1;
    }
    fn unit_moved(&mut self, from_ppn: u32, to_ppn: u32) {
        self.by_ppn[to_ppn as usize] = self.by_ppn[from_ppn as usize];
    }
}

#[test]
fn translation_blocks_are_collected_and_every_unit_keeps_its_data() {
    // 64-byte entries: 64 per translation page, so translation pages are 1/64 of the
    // data and a tiny cache rewrites them all the time; their blocks need cleaning.
    let g = geometry(16 << 20, 0.3);
    let mut ftl = cached(&g, 32, 64);
    let n = ftl.logical_units();
    let mut sink = Payloads {
        by_ppn: vec![0; (g.total_blocks() * g.units_per_block() as u64) as usize],
        map_programs: 0,
        map_reads: 0,
    };
    let mut version = vec![0u64; n as usize];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for step in 1..=12 * n as u64 {
        let lpn = if step <= n as u64 {
            (step - 1) as u32
        } else if step % 4 == 0 {
            rng.random_range(0..n / 8) // a hot eighth
        } else {
            rng.random_range(0..n)
        };
        if step % 97 == 0 {
            for l in lpn..(lpn + 16).min(n) {
                ftl.trim(l);
                version[l as usize] = 0;
            }
            continue;
        }
        ftl.write(lpn, &mut sink).unwrap();
        version[lpn as usize] = step;
        sink.by_ppn[ftl.lookup(lpn).unwrap() as usize] = step;
        if step % (2 * n as u64) == 0 {
            ftl.check_invariants().unwrap();
        }
    }
    ftl.check_invariants().unwrap();
    let c = ftl.counters();
    assert!(
        c.gc_copied_map_units > 0,
        "no translation page was copied by GC: {c:?}"
    );
    assert!(c.map_write_units > 0 && sink.map_programs > 0 && sink.map_reads > 0);
    for lpn in 0..n {
        let held = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
        let want = (version[lpn as usize] > 0).then_some(version[lpn as usize]);
        assert_eq!(held, want, "unit {lpn}");
        // Reads through the cache find the same place.
        assert_eq!(ftl.translate(lpn, &mut sink).unwrap().ppn, ftl.lookup(lpn));
    }
    // Every translation page is on flash or was never needed.
    let written = (0..ftl.page_ftl().translation_pages())
        .filter(|&t| ftl.page_ftl().lookup_translation_page(t).is_some())
        .count();
    assert!(written > 0);
}

#[test]
fn the_same_run_gives_the_same_numbers() {
    let g = geometry(16 << 20, 0.25);
    let run = || {
        let (share, c) = translation_share(&g, 300, 2);
        (share.to_bits(), c)
    };
    assert_eq!(run(), run());
}

fn hmb_drive(cache_entries: u64) -> Ssd {
    let mut cfg = ssd_config();
    cfg.mapping_cache = Some(MappingCacheConfig {
        cache_bytes: cache_entries * 4,
        entry_bytes: 4,
        location: CacheLocation::Hmb,
        hmb_access_ns: 1_000,
        granularity: CacheGranularity::Entry,
    });
    Ssd::new(cfg).unwrap()
}

#[test]
fn a_read_pays_the_hmb_round_trip_and_a_miss_its_translation_page_read() {
    let plain = {
        let mut ssd = Ssd::new(ssd_config()).unwrap();
        ssd.write_untimed(0, 16 << 20).unwrap();
        let at = 1_000_000_000;
        ssd.submit(&Command::read(5 * 4096, 4096), at).unwrap() - at
    };
    let mut ssd = hmb_drive(64);
    ssd.write_untimed(0, 16 << 20).unwrap();
    // Reading 64 other units leaves the cache full of clean entries (their misses write
    // back the dirty ones the fill left), so the next miss evicts for free.
    let mut at = 1_000_000_000;
    for lpn in 2000..2064u64 {
        at = ssd.submit(&Command::read(lpn * 4096, 4096), at).unwrap();
    }
    let at = at + 1_000_000_000;
    // Unit 5 left the cache during the fill: a miss.
    let miss = ssd.submit(&Command::read(5 * 4096, 4096), at).unwrap() - at;
    let at = at + 1_000_000_000;
    let hit = ssd.submit(&Command::read(5 * 4096, 4096), at).unwrap() - at;
    assert_eq!(hit, plain + 1_000, "a hit costs one HMB round trip");
    // The miss reads a translation page first: tR and one 4 KiB unit over the channel.
    assert_eq!(miss, hit + 50_000 + 10_240);
    let s = ssd.stats().mapping_cache.unwrap();
    assert_eq!(
        (s.hits, s.misses),
        (1, 4096 + 65),
        "the fill's writes miss too"
    );
    assert_eq!(s.location, "hmb");
    ssd.check_invariants().unwrap();
}

#[test]
fn translation_writes_count_in_waf_and_the_stats() {
    let mut ssd = hmb_drive(16);
    let units = (16u64 << 20) / 4096;
    ssd.write_untimed(0, 16 << 20).unwrap();
    ssd.reset_stats();
    let mut now = 0;
    for i in 0..units {
        let lpn = (i * 7919) % units;
        now = ssd.submit(&Command::write(lpn * 4096, 4096), now).unwrap();
    }
    let s = ssd.stats();
    let m = s.mapping_cache.clone().unwrap();
    assert!(m.translation_writes > 0 && m.translation_reads > 0);
    assert_eq!(
        s.flash_write_pages,
        s.host_write_pages + s.gc_copied_pages + m.translation_writes
    );
    assert_eq!(m.hits + m.misses, units);
    assert!(s.waf.unwrap() > 1.0);
    ssd.check_invariants().unwrap();
}

#[test]
fn bad_settings_name_the_field() {
    let mut c = MappingCacheConfig::dram(1 << 20);
    c.entry_bytes = 3;
    assert!(c.validate(4096).unwrap_err().contains("entry_bytes"));
    let mut c = MappingCacheConfig::dram(2);
    assert!(c.validate(4096).unwrap_err().contains("cache_bytes"));
    c.cache_bytes = 1 << 20;
    c.location = CacheLocation::Hmb;
    assert!(c.validate(4096).unwrap_err().contains("hmb_access_ns"));
    let mut c = MappingCacheConfig::dram(2048);
    c.granularity = CacheGranularity::Page;
    assert!(c.validate(4096).unwrap_err().contains("granularity"));
    let parsed: MappingCacheConfig =
        toml::from_str("cache_bytes = 8192\ngranularity = \"page\"").unwrap();
    assert_eq!(parsed.granularity, CacheGranularity::Page);
    assert_eq!(parsed.entries(4096), 2048);
    let e = toml::from_str::<MappingCacheConfig>("cache_bytes = 8192\ngranularity = \"segment\"");
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("unknown variant `segment`"));
    let mut cfg = ssd_config();
    cfg.ftl = crate::mapping::FtlKind::Fast;
    cfg.mapping_cache = Some(MappingCacheConfig::dram(1 << 20));
    assert!(cfg.validate().unwrap_err().to_string().contains("page"));
}

/// One die, 4 KiB pages (every write programs at once), an HMB cache of `entries`, under
/// `scheduler`; filled without timing, so the cache holds the fill's last entries, dirty.
fn one_die_drive(entries: u64, scheduler: Option<crate::ssd::SchedulerConfig>) -> Ssd {
    let mut cfg = ssd_config();
    cfg.geometry.channels = 1;
    cfg.geometry.chips_per_channel = 1;
    cfg.mapping_cache = (entries > 0).then(|| MappingCacheConfig {
        cache_bytes: entries * 4,
        entry_bytes: 4,
        location: CacheLocation::Hmb,
        hmb_access_ns: 1_000,
        granularity: CacheGranularity::Entry,
    });
    cfg.scheduler = scheduler;
    let mut ssd = Ssd::new(cfg).unwrap();
    ssd.write_untimed(0, 16 << 20).unwrap();
    ssd.reset_stats();
    ssd
}

#[test]
fn translation_page_work_is_maintenance_under_the_priority_scheduler() {
    // A write whose miss evicts a dirty entry writes that entry's translation page back
    // (read-modify-write: a page read and a program). Nobody waits for that page: under
    // the priority scheduler it queues as maintenance, so the write costs what it costs on
    // a drive with the whole map in DRAM, and a read arriving as the write completes
    // (submitted then on every drive, so at queue depth 2 in submission order) overtakes
    // the queued program or suspends it; in submission order both wait for it.
    let at = 1_000_000_000;
    let write = Command::write(100 * 4096, 4096);
    let read = Command::read(2000 * 4096, 4096);
    let run = |entries: u64, scheduler: Option<crate::ssd::SchedulerConfig>, read_at: u64| {
        let mut ssd = one_die_drive(entries, scheduler);
        let w = ssd.submit(&write, at).unwrap();
        let read_at = if read_at == 0 { w } else { read_at };
        let r = ssd.submit(&read, read_at).unwrap();
        let tw = ssd.stats().mapping_cache.map(|m| m.translation_writes);
        (w - at, r - read_at, tw)
    };
    let (w_dram, r_dram, _) = run(0, None, 0);
    let read_at = at + w_dram;
    let (w_pri, r_pri, tw_pri) = run(16, None, read_at);
    let fifo = Some(crate::ssd::SchedulerConfig::fifo());
    let (w_fifo, r_fifo, tw_fifo) = run(16, fifo, read_at);
    assert_eq!((tw_pri, tw_fifo), (Some(1), Some(1)), "one dirty eviction");
    assert_eq!(
        w_pri, w_dram,
        "the write does not wait for the translation page"
    );
    assert!(
        w_fifo >= w_dram + 500_000,
        "in submission order the write waits for the translation program: {w_fifo} vs {w_dram}"
    );
    // The read misses too: an HMB round trip and its translation page read first.
    let own = r_dram + 1_000 + 50_000 + 10_240;
    assert!(
        r_pri < own + 250_000,
        "under priority a read meets at most a step's start and a suspension: {r_pri} ns, its own work {own} ns"
    );
    assert!(
        r_fifo >= own + 500_000,
        "in submission order it waits out the translation program: {r_fifo} ns"
    );
}

#[test]
fn page_granularity_misses_once_per_translation_page_on_a_scan_and_every_first_miss_is_cold() {
    let g = geometry(64 << 20, 0.25);
    let units = 16 * 1024u32; // 16 translation pages of 1,024 entries
    let mut pages = cached_pages(&g, 4);
    let mut entries = cached(&g, 4 * 1024, 4); // the same bytes, as entries
    for ftl in [&mut pages, &mut entries] {
        for lpn in 0..units {
            ftl.write(lpn, &mut NoTiming).unwrap();
        }
        ftl.reset_counters();
        for lpn in 0..units {
            ftl.translate(lpn, &mut NoTiming).unwrap();
        }
        ftl.check_invariants().unwrap();
    }
    let (p, e) = (pages.cache_counters(), entries.cache_counters());
    // A page brings its 1,024 neighbours in: 16 misses; entries miss on every unit.
    assert_eq!((p.hits, p.misses), (units as u64 - 16, 16));
    assert_eq!((e.hits, e.misses), (0, units as u64));
    // Counters were reset, not the record of what was cached: the scan's misses are
    // capacity misses now (every page and entry was cached during the writes).
    assert_eq!((p.cold_misses, e.cold_misses), (0, 0));
    assert_eq!(pages.cache_entries(), entries.cache_entries());
    // On a fresh drive every first lookup is cold.
    let mut fresh = cached_pages(&g, 4);
    for lpn in 0..units {
        fresh.translate(lpn, &mut NoTiming).unwrap();
    }
    let f = fresh.cache_counters();
    assert_eq!((f.misses, f.cold_misses), (16, 16));
}

#[test]
fn uniform_reads_hit_in_proportion_to_the_cached_share_of_translation_pages() {
    // LRU over pages: a uniform reference over F units falls on one of F/E pages uniformly,
    // so with P pages cached it hits with probability P / (F/E).
    let g = geometry(64 << 20, 0.25);
    let footprint = 16 * 1024u32; // 16 pages
    for cached_p in [2u64, 8, 12] {
        let mut ftl = cached_pages(&g, cached_p);
        for lpn in 0..footprint {
            ftl.write(lpn, &mut NoTiming).unwrap();
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let ratio = read_hit_ratio(&mut ftl, 50_000, 200_000, || rng.random_range(0..footprint));
        let theory = cached_p as f64 / 16.0;
        assert!(
            (ratio - theory).abs() < 0.005,
            "{cached_p} of 16 pages: hit ratio {ratio:.4}, theory {theory:.4}"
        );
        ftl.check_invariants().unwrap();
    }
}

#[test]
fn a_whole_cached_page_is_written_back_without_reading_it_first() {
    // Writes cycling over 8 pages with 1 cached: every miss evicts a dirty page. Entries
    // read the victim's page before writing it back (read-modify-write); a whole cached
    // page goes out as it is, so its reads are only the misses' own.
    let g = geometry(64 << 20, 0.25);
    let units = 8 * 1024u32;
    let run = |mut ftl: CachedFtl| {
        for round in 0..3 {
            for lpn in (0..units).step_by(4) {
                ftl.write(lpn + round, &mut NoTiming).unwrap();
            }
        }
        ftl.check_invariants().unwrap();
        (ftl.cache_counters(), ftl.counters().map_write_units)
    };
    let (p, p_writes) = run(cached_pages(&g, 1));
    let (e, e_writes) = run(cached(&g, 1024, 4));
    assert!(p.misses > 0 && p_writes > 0);
    // Each page miss reads its page at most once (none the first time: never written).
    assert!(p.translation_reads <= p.misses, "{p:?}");
    // Entries: a read for the miss and another for the write-back of a different page.
    assert!(e.translation_reads > p.translation_reads, "{e:?} vs {p:?}");
    // Both write each dirty page back about once a round (entries: the first eviction
    // of a page's entry cleans all of them).
    assert!(
        e_writes > 0 && e_writes.abs_diff(p_writes) <= 8,
        "{e_writes} vs {p_writes}"
    );
}
