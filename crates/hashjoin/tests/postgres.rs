//! PostgreSQL 12's hash join: the answer against an independent computation for every
//! layout and work_mem, and its batch files as PostgreSQL writes them.

mod common;

use common::*;
use hashjoin::postgres::{choose_hash_table_size, hashint8, BLCKSZ};
use hashjoin::store::{MemStore, Store};
use hashjoin::{hash_join, Algorithm, JoinError, MemoryPool};
use workloads::tpch::{rows, Layout, Record, Table};

fn run(
    orders: &[Record],
    lines: &[Record],
    layout: Layout,
    work_mem: u64,
) -> (hashjoin::JoinResult, MemStore) {
    let mut store = MemStore::default();
    let o = store.add_input("orders", &encode(orders, layout)).unwrap();
    let l = store.add_input("lineitem", &encode(lines, layout)).unwrap();
    let (a, b) = inputs(o, l, orders, lines, layout, 0);
    let pool = MemoryPool::new(work_mem);
    let r = hash_join(&mut store, &pool, &spec(Algorithm::Postgres), a, b).unwrap();
    assert_eq!(pool.used_bytes(), 0);
    (r, store)
}

#[test]
fn every_layout_and_work_mem_gives_the_right_answer_and_leaves_no_file() {
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let want = expected(&orders, &lines);
    for layout in [Layout::Columns, Layout::Fixed128] {
        for work_mem in [64u64 << 10, 256 << 10, 1 << 20, 4 << 20, 64 << 20] {
            let (r, store) = run(&orders, &lines, layout, work_mem);
            check(&r, want);
            assert_eq!(store.live_spill_files(), 0, "{layout} {work_mem}");
            let width = layout.record_bytes() as u64;
            let plan = choose_hash_table_size(orders.len() as u64, width, work_mem);
            assert_eq!(r.initial_batches as u64, plan.nbatch, "{layout} {work_mem}");
            assert_eq!(
                r.bytes_spilled > 0,
                plan.nbatch > 1,
                "{layout} {work_mem}: {r:?}"
            );
            // Every tuple written is read back once: reads equal writes.
            assert_eq!(r.bytes_read_back, r.bytes_spilled, "{layout} {work_mem}");
        }
    }
}

#[test]
fn batch_files_hold_every_tuple_outside_batch_zero_in_8_kib_writes() {
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let layout = Layout::Columns;
    let work_mem = 256 << 10;
    let (r, store) = run(&orders, &lines, layout, work_mem);
    let plan = choose_hash_table_size(orders.len() as u64, 16, work_mem);
    assert!(plan.nbatch >= 2, "{plan:?}");
    assert_eq!(r.nbatch_doublings, 0, "uniform keys: the plan holds {r:?}");
    // Each tuple outside batch 0 is written once: its 4-byte hash, a 16-byte header and
    // 16 bytes of data.
    let log2_nbuckets = plan.nbuckets.trailing_zeros();
    let batch = |k: u64| ((hashint8(k as i64) >> log2_nbuckets) as u64) & (plan.nbatch - 1);
    let spilled = orders
        .iter()
        .chain(&lines)
        .filter(|r| batch(r.key) != 0)
        .count() as u64;
    assert_eq!(r.bytes_spilled, spilled * 36);
    // One file per batch and side (every batch has tuples of both at this size).
    let files = 2 * (plan.nbatch - 1);
    assert_eq!(r.spill_files, files);
    // Full 8 KiB writes, and one last partial write per file.
    let s = store.stats();
    let full = r.bytes_spilled / BLCKSZ as u64;
    assert!(
        s.write_calls >= full && s.write_calls <= full + files,
        "{} writes for {} bytes in {files} files",
        s.write_calls,
        r.bytes_spilled
    );
    assert_eq!(s.deletes, files, "each batch file deleted once");
}

#[test]
fn a_batch_that_outgrows_work_mem_doubles_nbatch_until_it_cannot_split() {
    // 6,000 orders on one key (they can never be split) beside 20,000 ordinary ones:
    // batch 0 holds the hot key and overflows 256 kB, nbatch doubles while doubling
    // moves tuples out, then stops growing; the answer is still right.
    let (orders, lines) = hot_key(6_000, 3, 20_000);
    let want = expected(&orders, &lines);
    let (r, store) = run(&orders, &lines, Layout::Columns, 256 << 10);
    check(&r, want);
    assert!(r.nbatch_doublings >= 1, "{r:?}");
    assert!(r.partitions > r.initial_batches, "{r:?}");
    assert_eq!(store.live_spill_files(), 0);
}

#[test]
fn work_mem_below_64_kb_is_refused_as_postgresql_refuses_it() {
    let orders: Vec<Record> = rows(Table::Orders, 0.001).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.001).collect();
    let mut store = MemStore::default();
    let o = store
        .add_input("orders", &encode(&orders, Layout::Columns))
        .unwrap();
    let l = store
        .add_input("lineitem", &encode(&lines, Layout::Columns))
        .unwrap();
    let (a, b) = inputs(o, l, &orders, &lines, Layout::Columns, 0);
    let err = hash_join(
        &mut store,
        &MemoryPool::new(32 << 10),
        &spec(Algorithm::Postgres),
        a,
        b,
    )
    .unwrap_err();
    assert!(matches!(err, JoinError::Config(_)), "{err}");
    assert!(err.to_string().contains("64 kB"), "{err}");
}

/// Tuples in batches 1 to 127 of a PostgreSQL join of int8 keys 1..=100,000 with
/// themselves at work_mem 64 kB (128 batches, 2,048 buckets), from the sizes of the
/// temporary files real PostgreSQL (15.18, hash_mem_multiplier 1, whose limits are
/// PostgreSQL 12's) logged at their deletion (`log_temp_files = 0`), each 36 bytes a tuple:
/// each batch's inner file, then its outer file, batch after batch.
const POSTGRES_BATCH_TUPLES: [u64; 127] = [
    780, 772, 799, 767, 757, 794, 815, 855, 802, 764, 776, 765, 799, 787, 810, 726, 762, 770, 760,
    767, 756, 805, 794, 782, 810, 799, 777, 765, 735, 806, 742, 790, 790, 769, 802, 801, 758, 786,
    775, 759, 771, 783, 788, 783, 791, 776, 760, 752, 806, 779, 803, 764, 743, 816, 806, 760, 804,
    741, 740, 762, 783, 824, 785, 775, 778, 779, 776, 786, 801, 809, 752, 856, 740, 828, 759, 757,
    762, 760, 802, 791, 761, 741, 802, 757, 781, 798, 756, 771, 781, 785, 773, 764, 776, 771, 813,
    771, 806, 843, 762, 831, 800, 764, 749, 804, 784, 798, 826, 856, 748, 720, 789, 751, 805, 767,
    777, 740, 782, 830, 849, 764, 739, 773, 786, 787, 729, 813, 746,
];

/// A store that remembers every file's size when it is deleted.
#[derive(Default)]
struct Recording {
    inner: MemStore,
    deleted_bytes: Vec<u64>,
}

impl Store for Recording {
    fn create(&mut self) -> Result<hashjoin::store::FileId, JoinError> {
        self.inner.create()
    }
    fn fallocate(&mut self, f: hashjoin::store::FileId, bytes: u64) -> Result<(), JoinError> {
        self.inner.fallocate(f, bytes)
    }
    fn append(&mut self, f: hashjoin::store::FileId, data: &[u8]) -> Result<(), JoinError> {
        self.inner.append(f, data)
    }
    fn read_at(
        &mut self,
        f: hashjoin::store::FileId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, JoinError> {
        self.inner.read_at(f, offset, buf)
    }
    fn len(&self, f: hashjoin::store::FileId) -> u64 {
        self.inner.len(f)
    }
    fn delete(&mut self, f: hashjoin::store::FileId) -> Result<(), JoinError> {
        self.deleted_bytes.push(self.inner.len(f));
        self.inner.delete(f)
    }
    fn elapsed_ns(&self) -> u64 {
        self.inner.elapsed_ns()
    }
    fn compute(&mut self, ns: u64) {
        self.inner.compute(ns)
    }
    fn stats(&self) -> hashjoin::store::StoreStats {
        self.inner.stats()
    }
    fn hand_over(
        &mut self,
        _: hashjoin::store::FileId,
        _: &mut Self,
    ) -> Result<hashjoin::store::FileId, JoinError> {
        Err(JoinError::Config("not used by the serial join".into()))
    }
}

#[test]
fn the_batch_files_are_real_postgresql_s_in_number_size_and_deletion_order() {
    let keys: Vec<Record> = (1..=100_000)
        .map(|k| Record {
            key: k,
            price_cents: 1,
        })
        .collect();
    let plan = choose_hash_table_size(100_000, 16, 64 << 10);
    assert_eq!(
        (plan.nbatch, plan.nbuckets),
        (128, 2048),
        "EXPLAIN's Batches, Buckets"
    );
    let mut store = Recording::default();
    let i = store
        .inner
        .add_input("i", &encode(&keys, Layout::Columns))
        .unwrap();
    let o = store
        .inner
        .add_input("o", &encode(&keys, Layout::Columns))
        .unwrap();
    let (a, b) = inputs(i, o, &keys, &keys, Layout::Columns, 0);
    let pool = MemoryPool::new(64 << 10);
    let r = hash_join(&mut store, &pool, &spec(Algorithm::Postgres), a, b).unwrap();
    assert_eq!(r.rows, 100_000);
    assert_eq!(r.nbatch_doublings, 0);
    let want: Vec<u64> = POSTGRES_BATCH_TUPLES
        .iter()
        .flat_map(|&n| [n * 36, n * 36])
        .collect();
    assert_eq!(store.deleted_bytes, want);
}
