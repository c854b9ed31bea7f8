//! Crash testing of the AS store, the way redb and TigerBeetle test theirs: random
//! inserts, updates and deletes with commit points, a crash at a random moment (dropping
//! unsynced writes, applying a random prefix of them, tearing the last one, or losing the
//! fsync of a commit), then recovery, the tree's structure check and a comparison with
//! the reference map of the last commit that reached the medium.

use crate::asstore::{AsConfig, AsStore, Cleaning};
use crate::segments::MemSegments;
use crate::store::NodeStore;
use crate::BTree;
use std::collections::BTreeMap;

/// What one crash test did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashOutcome {
    pub ops: u64,
    pub commits: u64,
    pub pending_writes_at_crash: usize,
    pub applied: usize,
    pub torn_bytes: usize,
    pub fsync_lost: bool,
    /// Recovery started from a checkpoint (not a full scan).
    pub from_checkpoint: bool,
    pub entries_after_recovery: u64,
    pub truncated_bytes: u64,
    /// Segments cleaning emptied and removed before the crash.
    pub segments_cleaned: u64,
    pub segments_removed: u64,
    pub logical_commits: bool,
    /// Logged operations the reopened store handed to the tree to replay.
    pub ops_replayed: u64,
}

/// SplitMix64: the crash tests' own small seeded generator (kv's crash tests use it too).
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

/// Runs one seeded crash test; `Err` describes a mismatch (with the seed to reproduce).
pub fn crash_test(
    seed: u64,
    node_bytes: usize,
    fanout: usize,
    buffer_nodes: usize,
) -> Result<CrashOutcome, String> {
    let mut rng = Rng(seed);
    let fail = |m: String| format!("seed {seed}: {m}");
    // Checkpoints every 1-4 commits, so crashes hit them too; small segments (8-64 nodes)
    // and a tight space limit, so cleaning moves nodes and removes segments all the time.
    let logical = rng.below(2) == 0;
    let cfg = AsConfig {
        checkpoint_every: 1 + rng.below(4),
        segment_bytes: (8 + rng.below(57)) * node_bytes as u64,
        max_space_amp: 1.3,
        cleaning: if rng.below(2) == 0 {
            Cleaning::CostBenefit
        } else {
            Cleaning::Oldest
        },
        // Half the runs commit by logging operations instead of writing nodes (with a
        // larger write buffer, so several logical commits pass between node-level ones).
        logical_commits: logical,
        ..AsConfig::new(
            node_bytes,
            if logical {
                buffer_nodes * 8
            } else {
                buffer_nodes
            },
        )
    };
    let store =
        AsStore::open_with(MemSegments::new(), cfg.clone()).map_err(|e| fail(e.to_string()))?;
    let mut tree = BTree::new(store, fanout).map_err(|e| fail(e.to_string()))?;
    tree.sync().map_err(|e| fail(e.to_string()))?;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut committed = model.clone();
    let mut out = CrashOutcome::default();
    let total_ops = 50 + rng.below(1500);
    for _ in 0..total_ops {
        let k = format!("k{:06}", rng.below(2000)).into_bytes();
        match rng.below(10) {
            0..=5 => {
                let v = vec![rng.below(256) as u8; 1 + rng.below(60) as usize];
                tree.insert(&k, &v).map_err(|e| fail(e.to_string()))?;
                model.insert(k, v);
            }
            6..=8 => {
                tree.remove(&k).map_err(|e| fail(e.to_string()))?;
                model.remove(&k);
            }
            _ => {
                tree.sync().map_err(|e| fail(e.to_string()))?;
                committed = model.clone();
                out.commits += 1;
            }
        }
        out.ops += 1;
    }
    // Sometimes the crash hits during a commit's fsync.
    let mut candidate = committed.clone();
    // With a lost fsync, pending write `commit_write` carries the final commit.
    let mut commit_write = usize::MAX;
    if rng.below(3) == 0 {
        tree.store_mut().storage_mut().sync_is_lost = true;
        let before = tree.store().storage().pending_ops();
        tree.sync().map_err(|e| fail(e.to_string()))?;
        // The write holding the commit record (the flush may be split at a segment end).
        let (seg, off) = tree.store().last_commit_location().expect("just committed");
        commit_write = tree
            .store()
            .storage()
            .pending_write_of(seg, off)
            .filter(|&i| i >= before)
            .ok_or_else(|| fail("the commit record's write is not pending".into()))?;
        candidate = model.clone();
        out.fsync_lost = true;
    }
    let stats = tree.store().stats();
    out.segments_cleaned = stats.segments_cleaned;
    out.segments_removed = stats.segments_removed;
    let storage = tree.store().storage();
    out.pending_writes_at_crash = storage.pending_ops();
    out.applied = rng.below(storage.pending_ops() as u64 + 1) as usize;
    out.torn_bytes = if out.applied < storage.pending_ops() && storage.pending_len(out.applied) > 0
    {
        rng.below(storage.pending_len(out.applied) as u64) as usize
    } else {
        0
    };
    let image = storage.crash(out.applied, out.torn_bytes);
    let pending_ops = storage.describe_pending();
    // With a lost fsync, the commit survives only if its whole write reached the medium
    // (a torn write whose missing bytes equal those already there, in a recycled
    // segment, landed whole).
    let landed = out.applied > commit_write
        || (out.applied == commit_write && storage.write_landed(commit_write, &image));
    let expected = if out.fsync_lost && landed {
        candidate
    } else {
        committed
    };
    // The full scan must agree with the checkpoint-based recovery.
    let scanned = AsStore::open_with(
        MemSegments::from_image(image.clone()),
        AsConfig {
            full_scan: true,
            ..cfg.clone()
        },
    )
    .map_err(|e| fail(format!("full scan: {e}")))?;
    let by_scan = BTree::new(scanned, fanout)
        .and_then(|mut t| t.range(&[], None))
        .map_err(|e| fail(e.to_string()))?;
    let store = AsStore::open_with(MemSegments::from_image(image), cfg.clone())
        .map_err(|e| fail(format!("reopen: {e}")))?;
    out.truncated_bytes = store.recovery.truncated_bytes;
    out.logical_commits = cfg.logical_commits;
    out.ops_replayed = store.pending_replay() as u64;
    out.from_checkpoint = store.recovery.from_checkpoint.is_some();
    let mut tree = BTree::new(store, fanout).map_err(|e| fail(e.to_string()))?;
    let n = tree
        .check()
        .map_err(|e| fail(format!("structure after recovery: {e}")))?;
    let all = tree.range(&[], None).map_err(|e| fail(e.to_string()))?;
    let want: Vec<(Vec<u8>, Vec<u8>)> = expected.into_iter().collect();
    if all != want {
        return Err(fail(format!(
            "recovered {} entries, the last durable commit holds {} ({out:?}, recovery {:?}; the commit's write is pending op {commit_write} of {:?})",
            all.len(),
            want.len(),
            tree.store().recovery,
            pending_ops
        )));
    }
    if by_scan != all {
        return Err(fail(
            "recovery from the checkpoint and the full scan disagree".into(),
        ));
    }
    out.entries_after_recovery = n;
    // The recovered store keeps working: write and commit again.
    tree.insert(b"after-crash", b"ok")
        .map_err(|e| fail(e.to_string()))?;
    tree.sync().map_err(|e| fail(e.to_string()))?;
    let store = AsStore::open_with(
        MemSegments::from_image(tree.store().storage().crash(0, 0)),
        cfg,
    )
    .map_err(|e| fail(e.to_string()))?;
    // (It may remove segments that died since the last checkpoint and cut a recycled
    // segment's stale tail, nothing else.)
    if store.recovery.uncommitted_discarded != 0 {
        return Err(fail(format!(
            "reopening a cleanly committed log cut part of it: {:?}",
            store.recovery
        )));
    }
    let mut again = BTree::new(store, fanout).map_err(|e| fail(e.to_string()))?;
    let mut want = all;
    want.push((b"after-crash".to_vec(), b"ok".to_vec()));
    want.sort();
    if again.range(&[], None).map_err(|e| fail(e.to_string()))? != want {
        return Err(fail(
            "reopening a cleanly committed log changed its entries".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hundreds_of_seeded_crash_points_recover_the_last_commit() {
        let (mut torn, mut lost, mut from_cp, mut cleaned, mut removed, mut replayed) =
            (0, 0, 0, 0, 0, 0);
        for seed in 0..300 {
            let buffer = 1 + (seed % 8) as usize;
            let o = crash_test(seed, 512, 8, buffer).unwrap_or_else(|e| panic!("{e}"));
            torn += (o.torn_bytes > 0) as u32;
            lost += o.fsync_lost as u32;
            from_cp += o.from_checkpoint as u32;
            cleaned += (o.segments_cleaned > 0) as u32;
            removed += (o.segments_removed > 0) as u32;
            replayed += (o.ops_replayed > 0) as u32;
        }
        assert!(
            replayed > 20,
            "many logical-commit runs should recover by replaying operations ({replayed})"
        );
        assert!(
            cleaned > 100 && removed > 100,
            "cleaning should run before many crash points (cleaned {cleaned}, removed {removed})"
        );
        assert!(
            torn > 50 && lost > 50,
            "the crash points should cover torn writes ({torn}) and lost fsyncs ({lost})"
        );
        assert!(
            from_cp > 100,
            "most recoveries should start from a checkpoint ({from_cp})"
        );
    }

    #[test]
    fn checkpoints_bound_the_recovery_scan() {
        let cfg = AsConfig {
            checkpoint_every: 16,
            ..AsConfig::new(512, 4)
        };
        let store = AsStore::open_with(MemSegments::new(), cfg.clone()).unwrap();
        let mut tree = BTree::new(store, 8).unwrap();
        for i in 0..4000u32 {
            tree.insert(format!("k{i:06}").as_bytes(), b"v").unwrap();
            if i % 10 == 0 {
                tree.sync().unwrap();
            }
        }
        tree.sync().unwrap();
        let image = tree.store().storage().crash(0, 0);
        let cp = AsStore::open_with(MemSegments::from_image(image.clone()), cfg.clone()).unwrap();
        let full = AsStore::open_with(
            MemSegments::from_image(image),
            AsConfig {
                full_scan: true,
                ..cfg
            },
        )
        .unwrap();
        assert!(cp.recovery.from_checkpoint.is_some());
        assert!(
            cp.recovery.slots_scanned * 3 < full.recovery.slots_scanned,
            "checkpoint recovery read {} slots, the full scan {}",
            cp.recovery.slots_scanned,
            full.recovery.slots_scanned
        );
        let mut a = BTree::new(cp, 8).unwrap();
        let mut b = BTree::new(full, 8).unwrap();
        assert_eq!(a.range(&[], None).unwrap(), b.range(&[], None).unwrap());
        assert_eq!(a.check().unwrap(), 4000);
    }

    /// Random updates over a fixed key set with small segments: after every commit the
    /// files stay within 1.5× the live node bytes, emptied segments are removed, and a
    /// reopened store holds the same entries.
    fn run_cleaning(cleaning: Cleaning, skewed: bool) -> (AsStore<MemSegments>, u64) {
        let cfg = AsConfig {
            segment_bytes: 32 * 512,
            cleaning,
            ..AsConfig::new(512, 8)
        };
        let store = AsStore::open_with(MemSegments::new(), cfg.clone()).unwrap();
        let mut tree = BTree::new(store, 8).unwrap();
        let mut rng = Rng(7);
        let keys = 3000u64;
        for i in 0..keys {
            tree.insert(format!("k{i:06}").as_bytes(), b"v0").unwrap();
        }
        tree.sync().unwrap();
        let mut worst: f64 = 0.0;
        for round in 0..200u64 {
            for _ in 0..50 {
                // Skewed: 90% of the updates go to 10% of the keys.
                let k = if skewed && rng.below(10) != 0 {
                    rng.below(keys / 10)
                } else {
                    rng.below(keys)
                };
                let v = format!("v{round}-{}", rng.below(1000));
                tree.insert(format!("k{k:06}").as_bytes(), v.as_bytes())
                    .unwrap();
            }
            tree.sync().unwrap();
            worst = worst.max(tree.store().space_amplification());
        }
        let entries = tree.range(&[], None).unwrap();
        let moved = tree.store().stats().nodes_moved;
        let s = tree.store();
        assert!(
            worst <= 1.5,
            "{cleaning:?}: space amplification reached {worst:.2}"
        );
        assert!(s.stats().segments_removed > 10, "{:?}", s.stats());
        let image = s.storage().crash(0, 0);
        let again = AsStore::open_with(MemSegments::from_image(image), cfg).unwrap();
        let mut t2 = BTree::new(again, 8).unwrap();
        assert_eq!(t2.range(&[], None).unwrap(), entries);
        assert_eq!(t2.check().unwrap(), keys);
        let store = tree.into_store();
        (store, moved)
    }

    #[test]
    fn cleaning_keeps_space_amplification_at_most_1_5() {
        let (cb, _) = run_cleaning(Cleaning::CostBenefit, false);
        assert!(cb.stats().segments_cleaned > 0);
        run_cleaning(Cleaning::Oldest, false);
    }

    #[test]
    fn cost_benefit_moves_fewer_nodes_than_oldest_first_under_skew() {
        let (_, cb) = run_cleaning(Cleaning::CostBenefit, true);
        let (_, oldest) = run_cleaning(Cleaning::Oldest, true);
        assert!(
            cb < oldest,
            "cost-benefit moved {cb} nodes, oldest-first {oldest}"
        );
    }

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// A store with 40 commits after its last checkpoint; returns it, the location of
    /// commit 20's record (segment, byte offset) and the entries as of the last commit.
    fn store_with_commits<S: crate::segments::Segments>(
        storage: S,
        cfg: &AsConfig,
    ) -> (BTree<AsStore<S>>, (u64, u64), Entries) {
        let mut tree = BTree::new(AsStore::open_with(storage, cfg.clone()).unwrap(), 8).unwrap();
        let mut at = None;
        for c in 0..40u32 {
            for i in 0..25u32 {
                let k = format!("k{:05}", (c * 37 + i * 11) % 997);
                tree.insert(k.as_bytes(), format!("v{c}").as_bytes())
                    .unwrap();
            }
            tree.sync().unwrap();
            if c == 20 {
                at = tree.store().last_commit_location();
            }
        }
        let entries = tree.range(&[], None).unwrap();
        (tree, at.unwrap(), entries)
    }

    fn corruption_config() -> AsConfig {
        // No cleaning, so the damaged segment stays where it was written.
        AsConfig {
            checkpoint_every: 1000,
            segment_bytes: 64 * 512,
            cleaning: Cleaning::Off,
            ..AsConfig::new(512, 4)
        }
    }

    #[test]
    fn a_damaged_durable_slot_is_an_error_never_a_tail_to_cut() {
        let cfg = corruption_config();
        let (tree, (seg, off), _) = store_with_commits(MemSegments::new(), &cfg);
        let mut image = tree.store().storage().crash(0, 0);
        // One flipped byte in commit 20's record, 19 commits before the end.
        image.get_mut(&seg).unwrap()[off as usize + 100] ^= 0x40;
        for full_scan in [false, true] {
            let err = AsStore::open_with(
                MemSegments::from_image(image.clone()),
                AsConfig {
                    full_scan,
                    ..cfg.clone()
                },
            )
            .err()
            .expect("a damaged durable record must not open");
            assert!(
                matches!(err, crate::TreeError::CorruptLog { .. }),
                "full scan {full_scan}: {err}"
            );
            assert!(err.to_string().contains("nothing cut"), "{err}");
        }
        // The same damage in the last commit's record is a torn tail: the commit before it
        // is recovered.
        let (mut tree, _, _) = store_with_commits(MemSegments::new(), &cfg);
        let before_last = tree.range(&[], None).unwrap();
        tree.insert(b"zz-last", b"x").unwrap();
        tree.sync().unwrap();
        let (seg, off) = tree.store().last_commit_location().unwrap();
        let mut image = tree.store().storage().crash(0, 0);
        image.get_mut(&seg).unwrap()[off as usize + 100] ^= 0x40;
        let store = AsStore::open_with(MemSegments::from_image(image), cfg).unwrap();
        let mut again = BTree::new(store, 8).unwrap();
        assert_eq!(again.range(&[], None).unwrap(), before_last);
    }

    #[test]
    fn real_files_with_a_damaged_durable_slot_are_left_untouched() {
        use crate::segments::FileSegments;
        let dir = tempfile::tempdir().unwrap();
        let cfg = corruption_config();
        let segments = FileSegments::open(dir.path(), "t", false).unwrap();
        let (tree, (seg, off), entries) = store_with_commits(segments, &cfg);
        drop(tree);
        let path = FileSegments::open(dir.path(), "t", false)
            .unwrap()
            .path(seg);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize + 100] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let snapshot = |d: &std::path::Path| {
            let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().to_string(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let before = snapshot(dir.path());
        let err = AsStore::open_with(
            FileSegments::open(dir.path(), "t", false).unwrap(),
            cfg.clone(),
        )
        .err()
        .expect("a damaged durable record must not open");
        assert!(matches!(err, crate::TreeError::CorruptLog { .. }), "{err}");
        assert_eq!(snapshot(dir.path()), before, "no file was cut or removed");
        // Repairing the byte brings every commit back.
        bytes[off as usize + 100] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let store =
            AsStore::open_with(FileSegments::open(dir.path(), "t", false).unwrap(), cfg).unwrap();
        assert_eq!(
            BTree::new(store, 8).unwrap().range(&[], None).unwrap(),
            entries
        );
    }

    #[test]
    fn opening_with_other_geometry_is_a_clear_error() {
        let cfg = AsConfig {
            checkpoint_every: 1,
            ..AsConfig::new(512, 4)
        };
        let mut tree = BTree::new(AsStore::open_with(MemSegments::new(), cfg).unwrap(), 8).unwrap();
        tree.insert(b"a", b"b").unwrap();
        tree.sync().unwrap();
        let image = tree.store().storage().crash(0, 0);
        let err = AsStore::open(MemSegments::from_image(image), 1024, 4)
            .err()
            .expect("other node size")
            .to_string();
        assert!(err.contains("512-byte nodes"), "{err}");
    }
}
