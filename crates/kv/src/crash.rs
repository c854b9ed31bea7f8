//! Crash tests of a database, on the AS B-tree's crash driver
//! ([`astree::crash::run_cycles`]): seeded batches of updates, inserts and deletes with
//! commits; crashes that keep any subset of the unsynced writes (torn at sector
//! granularity), lose or fail a commit's fsync, strike during recovery, or flip a byte of
//! the durable files; recovery, the index's check and a comparison with the documents of
//! the last commit that reached the medium, over several crash/recover cycles.

use crate::{Db, KvConfig};
use astree::crash::{run_cycles, Change, Coverage, CrashSubject, Rng};
use astree::segments::MemSegments;
use astree::store::StoreStats;
use astree::TreeError;

impl CrashSubject for Db<MemSegments> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), TreeError> {
        self.update(key, value)
    }
    fn delete(&mut self, key: &[u8]) -> Result<(), TreeError> {
        Db::delete(self, key).map(|_| ())
    }
    fn commit(&mut self) -> Result<(), TreeError> {
        Db::commit(self)
    }
    fn entries(&mut self) -> Result<Vec<(Vec<u8>, Vec<u8>)>, String> {
        self.check()?;
        self.scan().map_err(|e| e.to_string())
    }
    fn segments(&self) -> &MemSegments {
        Db::segments(self)
    }
    fn segments_mut(&mut self) -> &mut MemSegments {
        Db::segments_mut(self)
    }
    fn last_commit_location(&self) -> Option<(u64, u64, u64)> {
        self.tree.store().inner().last_commit_record()
    }
    fn recovery(&self) -> (bool, u64) {
        let r = &self.tree.store().inner().recovery;
        (r.from_checkpoint.is_some(), r.replayed_ops)
    }
    fn stats(&self) -> StoreStats {
        Db::stats(self)
    }
}

/// The settings of one kv crash test, drawn from its seed: 1 or 4 KiB nodes, 16 to 64
/// nodes per segment, write buffers of 1 to 16 nodes, caches of 0 to 63 nodes, fanout 8
/// (or 16 with 4 KiB nodes), and tight compaction (1.3x), so compaction runs before most crashes.
pub fn crash_config(seed: u64) -> KvConfig {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x4b56);
    let node_bytes = [1024, 4096][rng.below(2) as usize];
    KvConfig {
        node_bytes,
        write_buffer_nodes: 1 + rng.below(16) as usize,
        cache_nodes: rng.below(64) as usize,
        // (Documents are up to 300 bytes: a 1 KiB node holds at most 8 with their keys.)
        fanout: if node_bytes == 1024 {
            8
        } else {
            [8, 16][rng.below(2) as usize]
        },
        segment_bytes: (16 + rng.below(48)) * node_bytes as u64,
        max_space_amp: 1.3,
    }
}

/// Runs one seeded crash test (1 to 4 crash/recover cycles); `Err` describes a mismatch
/// with the seed.
pub fn crash_test(seed: u64) -> Result<Coverage, String> {
    let cfg = crash_config(seed);
    let mut rng = Rng(seed);
    let batch = 1 + rng.below(32);
    let cycles = 1 + rng.below(4) as u32;
    let changes = 100 + rng.below(800);
    let open = |segments: MemSegments| Db::open(segments, &cfg);
    // Updates of 400 documents, a delete now and then, a commit every `batch` changes.
    let mut since_commit = 0;
    let mut workload = |rng: &mut Rng| -> Change {
        if since_commit >= batch {
            since_commit = 0;
            return Change::Commit;
        }
        since_commit += 1;
        let k = crate::ycsb::key(rng.below(400));
        if rng.below(10) == 0 {
            Change::Delete(k)
        } else {
            Change::Put(
                k,
                vec![b'a' + rng.below(26) as u8; 100 + rng.below(200) as usize],
            )
        }
    };
    run_cycles(seed, cycles, changes, &open, None, &mut workload)
        .map_err(|e| format!("kv crash test {e} (settings {cfg:?}, batch {batch})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hundreds_of_seeded_crash_cycles_recover_the_last_commit() {
        let mut total = Coverage::default();
        for seed in 0..120 {
            total.add(&crash_test(seed).unwrap_or_else(|e| panic!("{e}")));
        }
        let t = &total;
        assert!(
            t.torn_writes > 20 && t.writes_lost_out_of_order > 20,
            "{}",
            t.summary()
        );
        assert!(
            t.fsyncs_lost > 20 && t.fsyncs_failed > 10 && t.recovery_crashes > 5,
            "{}",
            t.summary()
        );
        assert!(
            t.corruptions_detected + t.corruptions_harmless > 10,
            "{}",
            t.summary()
        );
        assert!(t.cycles_after_segment_removal > 30, "{}", t.summary());
    }
}
