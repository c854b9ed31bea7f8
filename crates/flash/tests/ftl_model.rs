//! Property test: random writes, trims and reads against a reference model (a map from
//! logical unit to its last write, minus trims). Each write carries a payload (its
//! version number) stored per physical unit; GC relocations move the payload, so a read
//! returning the wrong version means GC or mapping lost or mixed up data.
//! The cached mapping table runs the same model: reads through its cache, translation
//! pages sharing the flash and their blocks cleaned by the same GC.

use flash::ftl::{FlashSink, PageFtl, ProgramKind};
use flash::mapcache::CachedFtl;
use flash::{GcPolicy, Geometry, MappingCacheConfig};
use proptest::prelude::*;
use std::collections::HashMap;

struct Payloads {
    by_ppn: Vec<u64>,
    programs: u64,
    erases: u64,
}

impl FlashSink for Payloads {
    fn page_read(&mut self, _die: u32) {}
    fn page_program(&mut self, _die: u32, _kind: ProgramKind) {
        self.programs += 1;
    }
    fn block_erase(&mut self, _die: u32, _block: u32) {
        self.erases += 1;
    }
    fn unit_moved(&mut self, from_ppn: u32, to_ppn: u32) {
        self.by_ppn[to_ppn as usize] = self.by_ppn[from_ppn as usize];
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write(u32),
    Trim(u32, u32),
    Read(u32),
}

fn op_strategy(units: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..units).prop_map(Op::Write),
        // Hot spot: a quarter of writes go to 1/16 of the space, to skew block validity.
        2 => (0..units / 16).prop_map(Op::Write),
        1 => (0..units, 1..64u32).prop_map(|(a, n)| Op::Trim(a, n)),
        2 => (0..units).prop_map(Op::Read),
    ]
}

fn geometry(op: f64, planes: u32) -> Geometry {
    Geometry {
        channels: 2,
        chips_per_channel: 1,
        dies_per_chip: 2,
        planes_per_die: planes,
        pages_per_block: 4,
        page_size_bytes: 8192,
        mapping_unit_bytes: 4096,
        logical_bytes: 4 << 20,
        op,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ftl_matches_reference_model(
        policy in prop_oneof![Just(GcPolicy::Greedy), Just(GcPolicy::CostBenefit), Just(GcPolicy::Fifo)],
        gc_free_blocks in 1u32..4,
        op in 0.35f64..0.8,
        planes in 1u32..3,
        paced in any::<bool>(),
        ops in prop::collection::vec(op_strategy(1024), 1..8000),
    ) {
        let g = geometry(op, planes);
        let mut ftl = PageFtl::new(&g, policy, gc_free_blocks).unwrap().with_pacing(paced);
        let units = ftl.logical_units();
        prop_assert_eq!(units, 1024);
        let mut sink = Payloads { by_ppn: vec![u64::MAX; (g.total_blocks() * g.units_per_block() as u64) as usize], programs: 0, erases: 0 };
        let mut model: HashMap<u32, u64> = HashMap::new();
        for (version, o) in ops.iter().enumerate() {
            match *o {
                Op::Write(lpn) => {
                    ftl.write(lpn, &mut sink).unwrap();
                    let ppn = ftl.lookup(lpn).unwrap();
                    sink.by_ppn[ppn as usize] = version as u64;
                    model.insert(lpn, version as u64);
                }
                Op::Trim(first, n) => {
                    for lpn in first..(first + n).min(units) {
                        let had = ftl.trim(lpn);
                        prop_assert_eq!(had, model.remove(&lpn).is_some());
                    }
                }
                Op::Read(lpn) => {
                    let got = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
                    prop_assert_eq!(got, model.get(&lpn).copied(), "lpn {}", lpn);
                }
            }
        }
        ftl.check_invariants().map_err(TestCaseError::fail)?;
        for lpn in 0..units {
            let got = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
            prop_assert_eq!(got, model.get(&lpn).copied(), "final lpn {}", lpn);
        }
        let c = ftl.counters();
        prop_assert_eq!(c.erases, sink.erases);
        prop_assert_eq!(ftl.mapped_units(), model.len() as u64);
        // Every unit is programmed with its superpage, except those in the open superpages
        // of the host and GC frontiers (at most two per die).
        let upp = g.units_per_page() as u64;
        let open_max = 2 * g.dies() as u64 * (upp - 1);
        prop_assert!(sink.programs * upp <= c.flash_write_units());
        prop_assert!(c.flash_write_units() <= sink.programs * upp + open_max);
    }

    /// The same with a cached mapping table: translation pages share the flash, their
    /// blocks are cleaned too, and reads go through the cache; no unit may lose its data.
    #[test]
    fn cached_ftl_matches_reference_model(
        policy in prop_oneof![Just(GcPolicy::Greedy), Just(GcPolicy::CostBenefit), Just(GcPolicy::Fifo)],
        gc_free_blocks in 1u32..4,
        op in 0.5f64..0.8,
        planes in 1u32..3,
        paced in any::<bool>(),
        cache_entries in 1u64..1100,
        entry_bytes in prop_oneof![Just(4u32), Just(64), Just(512)],
        ops in prop::collection::vec(op_strategy(1024), 1..8000),
    ) {
        let g = geometry(op, planes);
        let mut cfg = MappingCacheConfig::dram(cache_entries * entry_bytes as u64);
        cfg.entry_bytes = entry_bytes;
        let mut ftl = CachedFtl::new(&g, policy, gc_free_blocks, paced, &cfg).unwrap();
        let units = ftl.logical_units();
        let mut sink = Payloads { by_ppn: vec![u64::MAX; (g.total_blocks() * g.units_per_block() as u64) as usize], programs: 0, erases: 0 };
        let mut model: HashMap<u32, u64> = HashMap::new();
        for (version, o) in ops.iter().enumerate() {
            match *o {
                Op::Write(lpn) => {
                    ftl.write(lpn, &mut sink).unwrap();
                    let ppn = ftl.lookup(lpn).unwrap();
                    sink.by_ppn[ppn as usize] = version as u64;
                    model.insert(lpn, version as u64);
                }
                Op::Trim(first, n) => {
                    for lpn in first..(first + n).min(units) {
                        let had = ftl.trim(lpn);
                        prop_assert_eq!(had, model.remove(&lpn).is_some());
                    }
                }
                Op::Read(lpn) => {
                    let t = ftl.translate(lpn, &mut sink).unwrap();
                    let got = t.ppn.map(|p| sink.by_ppn[p as usize]);
                    prop_assert_eq!(got, model.get(&lpn).copied(), "lpn {}", lpn);
                }
            }
        }
        ftl.check_invariants().map_err(TestCaseError::fail)?;
        for lpn in 0..units {
            let got = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
            prop_assert_eq!(got, model.get(&lpn).copied(), "final lpn {}", lpn);
        }
        let c = ftl.counters();
        prop_assert_eq!(c.erases, sink.erases);
        let tpages = (0..ftl.page_ftl().translation_pages())
            .filter(|&t| ftl.page_ftl().lookup_translation_page(t).is_some())
            .count() as u64;
        prop_assert_eq!(ftl.mapped_units(), model.len() as u64 + tpages);
        let k = ftl.cache_counters();
        let lookups = ops.iter().filter(|o| !matches!(o, Op::Trim(..))).count() as u64;
        prop_assert_eq!(k.hits + k.misses, lookups);
        // Three frontiers per die now: host, GC and translation pages.
        let upp = g.units_per_page() as u64;
        let open_max = 3 * g.dies() as u64 * (upp - 1);
        prop_assert!(sink.programs * upp <= c.flash_write_units());
        prop_assert!(c.flash_write_units() <= sink.programs * upp + open_max);
    }
}
