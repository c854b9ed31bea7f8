//! Property test: random creates, writes, fallocates, unlinks and syncs under both
//! allocation policies and every discard mode keep the file system consistent, and each
//! file maps exactly the blocks a reference model says it has.

use proptest::prelude::*;
use simfs::fs::{AllocPolicy, BLOCK};
use simfs::{DiscardMode, FsConfig, Recorder, SimFs, SimfsError};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
enum Op {
    Create(u8),
    Write(u8, u32, u32),
    Fallocate(u8, u32, u32),
    Unlink(u8),
    Sync,
    Fstrim,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0u8..6).prop_map(Op::Create),
        8 => (0u8..6, 0u32..3000, 1u32..300).prop_map(|(f, b, n)| Op::Write(f, b, n)),
        1 => (0u8..6, 0u32..3000, 1u32..600).prop_map(|(f, b, n)| Op::Fallocate(f, b, n)),
        1 => (0u8..6).prop_map(Op::Unlink),
        1 => Just(Op::Sync),
        1 => Just(Op::Fstrim),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn simfs_matches_model(
        lfs in any::<bool>(),
        prealloc in any::<bool>(),
        discard in prop_oneof![Just(DiscardMode::None), Just(DiscardMode::Online), Just(DiscardMode::Journal), Just(DiscardMode::VTrim), Just(DiscardMode::Deferred)],
        ops in prop::collection::vec(op(), 1..250),
    ) {
        let mut cfg = FsConfig::new(64 << 20);
        cfg.blocks_per_group = 8192;
        cfg.alloc = if lfs { AllocPolicy::LogStructured } else { AllocPolicy::Ext4Like };
        cfg.discard = discard;
        cfg.prealloc = prealloc;
        let mut fs = SimFs::mkfs(Recorder::new(65 << 20), cfg).unwrap();
        // Reference: per file name, the set of logical blocks that hold data.
        let mut model: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for o in ops {
            let name = |f: u8| format!("file{f}");
            let r: Result<(), SimfsError> = match o {
                Op::Create(f) => fs.create(&name(f)).map(|_| { model.insert(name(f), BTreeSet::new()); }),
                Op::Write(f, b, n) | Op::Fallocate(f, b, n) => match fs.lookup(&name(f)) {
                    Ok(ino) => {
                        let r = if matches!(o, Op::Write(..)) {
                            fs.write_at(ino, b as u64 * BLOCK, n as u64 * BLOCK).map(|_| ())
                        } else {
                            fs.fallocate(ino, b as u64 * BLOCK, n as u64 * BLOCK)
                        };
                        if r.is_ok() {
                            model.get_mut(&name(f)).unwrap().extend(b..b + n);
                        }
                        r
                    }
                    Err(e) => Err(e),
                },
                Op::Unlink(f) => fs.unlink(&name(f)).map(|_| { model.remove(&name(f)); }),
                Op::Sync => fs.sync().map(|_| ()),
                Op::Fstrim => fs.fstrim().map(|_| ()),
            };
            match r {
                Ok(()) | Err(SimfsError::NotFound(_)) | Err(SimfsError::Exists(_)) => {}
                // A full file system may refuse a write; nothing may change then.
                Err(SimfsError::NoSpace { .. }) => {}
                Err(e) => return Err(TestCaseError::fail(format!("{o:?}: {e}"))),
            }
            fs.check_invariants().map_err(TestCaseError::fail)?;
        }
        for (name, blocks) in &model {
            let ino = fs.lookup(name).unwrap();
            let mapped: BTreeSet<u32> = fs.extents(ino).unwrap().iter().flat_map(|e| e.logical_block..e.logical_block + e.len).collect();
            prop_assert_eq!(&mapped, blocks, "{}", name);
        }
    }
}
