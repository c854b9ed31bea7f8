//! Property test of placement handles (FDP): random writes on random handles, trims and
//! reads against a reference model, as `ftl_model.rs` does for one frontier, and after
//! every run the isolation invariant: every block holds the data of one handle only (the
//! handle whose frontier opened it), under persistent isolation including GC's copies.

use flash::ftl::{FlashSink, PageFtl, ProgramKind};
use flash::{GcPolicy, Geometry};
use proptest::prelude::*;
use std::collections::HashMap;

struct Payloads {
    by_ppn: Vec<u64>,
}

impl FlashSink for Payloads {
    fn page_read(&mut self, _die: u32) {}
    fn page_program(&mut self, _die: u32, _kind: ProgramKind) {}
    fn block_erase(&mut self, _die: u32, _block: u32) {}
    fn unit_moved(&mut self, from_ppn: u32, to_ppn: u32) {
        self.by_ppn[to_ppn as usize] = self.by_ppn[from_ppn as usize];
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write(u32, u16),
    Trim(u32, u32),
    Read(u32),
}

fn op_strategy(units: u32, handles: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..units, 0..handles).prop_map(|(l, h)| Op::Write(l, h)),
        // A hot spot written on the last handle, as a host separating hot data would.
        3 => (0..units / 16).prop_map(move |l| Op::Write(l, handles - 1)),
        1 => (0..units, 1..64u32).prop_map(|(a, n)| Op::Trim(a, n)),
        2 => (0..units).prop_map(Op::Read),
    ]
}

fn geometry(op: f64) -> Geometry {
    Geometry {
        channels: 2,
        chips_per_channel: 1,
        dies_per_chip: 2,
        planes_per_die: 1,
        pages_per_block: 4,
        page_size_bytes: 8192,
        mapping_unit_bytes: 4096,
        logical_bytes: 4 << 20,
        op,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn handles_never_mix_and_data_survives(
        policy in prop_oneof![Just(GcPolicy::Greedy), Just(GcPolicy::CostBenefit), Just(GcPolicy::Fifo)],
        gc_free_blocks in 1u32..3,
        op in 0.45f64..0.8,
        handles in 1u16..5,
        persistent in any::<bool>(),
        paced in any::<bool>(),
        ops in prop::collection::vec(op_strategy(1024, 4), 1..6000),
    ) {
        let g = geometry(op);
        let mut ftl = PageFtl::new(&g, policy, gc_free_blocks).unwrap().with_pacing(paced);
        ftl.set_placement(handles, persistent).unwrap();
        let units = ftl.logical_units();
        let mut sink = Payloads { by_ppn: vec![u64::MAX; (g.total_blocks() * g.units_per_block() as u64) as usize] };
        // Per logical unit: (version, handle) of its last write.
        let mut model: HashMap<u32, (u64, u16)> = HashMap::new();
        // Fill the drive first (each unit on a handle of its own), so that GC runs.
        let fill = (0..units).map(|l| Op::Write(l, (l % 4) as u16));
        for (version, o) in fill.chain(ops.iter().cloned()).enumerate() {
            match o {
                Op::Write(lpn, h) => {
                    let h = h % handles;
                    ftl.write_placed(lpn, h, &mut sink).unwrap();
                    let ppn = ftl.lookup(lpn).unwrap();
                    sink.by_ppn[ppn as usize] = version as u64;
                    model.insert(lpn, (version as u64, h));
                }
                Op::Trim(first, n) => {
                    for lpn in first..(first + n).min(units) {
                        let had = ftl.trim(lpn);
                        prop_assert_eq!(had, model.remove(&lpn).is_some());
                    }
                }
                Op::Read(lpn) => {
                    let got = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
                    prop_assert_eq!(got, model.get(&lpn).map(|v| v.0), "lpn {}", lpn);
                }
            }
        }
        ftl.check_invariants().map_err(TestCaseError::fail)?;
        for lpn in 0..units {
            let got = ftl.lookup(lpn).map(|p| sink.by_ppn[p as usize]);
            prop_assert_eq!(got, model.get(&lpn).map(|v| v.0), "final lpn {}", lpn);
        }
        // Isolation: every block holds one handle's data. Under initial isolation, GC's
        // shared frontier (blocks tagged 0) may mix handles; host frontiers never do.
        for b in 0..ftl.total_blocks() {
            let tag = ftl.block_handle(b);
            let owners: std::collections::BTreeSet<u16> =
                ftl.valid_lpns(b).iter().map(|l| model[l].1).collect();
            if persistent || tag != 0 {
                prop_assert!(
                    owners.iter().all(|&h| h == tag),
                    "block {} tagged {} holds data of handles {:?}", b, tag, owners
                );
            }
        }
        let p = ftl.placement_counters().unwrap();
        let c = ftl.counters();
        prop_assert_eq!(p.host_units.iter().sum::<u64>(), c.host_write_units);
        prop_assert_eq!(p.gc_units.iter().sum::<u64>(), c.gc_copied_units);
        // Long runs on a full drive must have run GC (else the isolation check above
        // checked host frontiers only).
        prop_assert!(ops.len() < 3000 || c.erases > 0, "no GC in {} ops", ops.len());
    }
}
