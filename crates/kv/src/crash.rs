//! Crash tests of a database, the way the AS B-tree's are run: seeded batches of updates,
//! inserts and deletes with commits, a crash at a random moment (dropping unsynced
//! writes, applying a random prefix of them, tearing the last one, or losing the fsync of
//! a commit), then recovery and a comparison with the documents of the last commit that
//! reached the medium.

use crate::{Db, KvConfig};
use astree::crash::Rng;
use astree::segments::MemSegments;
use std::collections::BTreeMap;

/// What one crash test did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KvCrash {
    pub commits: u64,
    pub pending_ops: usize,
    pub applied: usize,
    pub torn_bytes: usize,
    pub fsync_lost: bool,
    pub documents_after: u64,
    pub segments_removed: u64,
}

/// Runs one seeded crash test; `Err` describes a mismatch (with the seed).
pub fn crash_test(seed: u64) -> Result<KvCrash, String> {
    let mut rng = Rng(seed);
    let fail = |m: String| format!("kv crash test seed {seed}: {m}");
    // Small nodes and segments, so compaction runs before most crashes.
    let cfg = KvConfig {
        node_bytes: 1024,
        write_buffer_nodes: 1 + rng.below(16) as usize,
        cache_nodes: rng.below(64) as usize,
        fanout: 8,
        segment_bytes: (16 + rng.below(48)) * 1024,
        max_space_amp: 1.3,
    };
    let mut db = Db::open(MemSegments::new(), &cfg).map_err(|e| fail(e.to_string()))?;
    let batch = 1 + rng.below(32);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut committed = model.clone();
    let mut out = KvCrash::default();
    let ops = 100 + rng.below(1500);
    for _ in 0..ops {
        let k = crate::ycsb::key(rng.below(400));
        if rng.below(10) == 0 {
            db.delete(&k).map_err(|e| fail(e.to_string()))?;
            model.remove(&k);
        } else {
            let doc = vec![b'a' + rng.below(26) as u8; 100 + rng.below(200) as usize];
            db.update(&k, &doc).map_err(|e| fail(e.to_string()))?;
            model.insert(k, doc);
        }
        if db.uncommitted() >= batch {
            db.commit().map_err(|e| fail(e.to_string()))?;
            committed = model.clone();
            out.commits += 1;
        }
    }
    // Sometimes the crash hits the last commit's fsync.
    let mut candidate = committed.clone();
    let mut commit_write = usize::MAX;
    if rng.below(3) == 0 {
        let before = db.segments().pending_ops();
        db.segments_mut().sync_is_lost = true;
        db.commit().map_err(|e| fail(e.to_string()))?;
        candidate = model.clone();
        out.fsync_lost = true;
        // The write holding the commit record.
        commit_write = db
            .last_commit_write(before)
            .ok_or_else(|| fail("the commit record's write is not pending".into()))?;
    }
    out.segments_removed = db.stats().segments_removed;
    let s = db.segments();
    out.pending_ops = s.pending_ops();
    out.applied = rng.below(s.pending_ops() as u64 + 1) as usize;
    out.torn_bytes = if out.applied < s.pending_ops() && s.pending_len(out.applied) > 0 {
        rng.below(s.pending_len(out.applied) as u64) as usize
    } else {
        0
    };
    let image = s.crash(out.applied, out.torn_bytes);
    let landed = out.applied > commit_write
        || (out.applied == commit_write && s.write_landed(commit_write, &image));
    let expected = if out.fsync_lost && landed {
        candidate
    } else {
        committed
    };
    let mut again =
        Db::open(MemSegments::from_image(image), &cfg).map_err(|e| fail(format!("reopen: {e}")))?;
    out.documents_after = again
        .check()
        .map_err(|e| fail(format!("index after recovery: {e}")))?;
    let got = again.scan().map_err(|e| fail(e.to_string()))?;
    let want: Vec<_> = expected.into_iter().collect();
    if got != want {
        return Err(fail(format!(
            "recovered {} documents, the last durable commit holds {} ({out:?})",
            got.len(),
            want.len()
        )));
    }
    Ok(out)
}

impl Db<MemSegments> {
    /// Tests: the pending operation (from `from` on) that writes the last commit record.
    fn last_commit_write(&self, from: usize) -> Option<usize> {
        let (seg, off) = self.tree.store().inner().last_commit_location()?;
        self.segments()
            .pending_write_of(seg, off)
            .filter(|&i| i >= from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hundreds_of_seeded_crash_points_recover_the_last_commit() {
        let (mut torn, mut lost, mut removed) = (0, 0, 0);
        for seed in 0..200 {
            let o = crash_test(seed).unwrap_or_else(|e| panic!("{e}"));
            torn += (o.torn_bytes > 0) as u32;
            lost += o.fsync_lost as u32;
            removed += (o.segments_removed > 0) as u32;
        }
        assert!(torn > 30 && lost > 30, "torn {torn}, lost fsyncs {lost}");
        assert!(
            removed > 30,
            "compaction removed segments before {removed} crashes"
        );
    }
}
