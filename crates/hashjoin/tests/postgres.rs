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
    let mut orders: Vec<Record> = (0..6_000)
        .map(|i| Record {
            key: 7,
            price_cents: i,
        })
        .collect();
    orders.extend((100..20_100).map(|k| Record {
        key: k,
        price_cents: 1,
    }));
    let mut lines: Vec<Record> = (0..3)
        .map(|i| Record {
            key: 7,
            price_cents: i,
        })
        .collect();
    lines.extend((100..20_100).flat_map(|k| {
        (0..4).map(move |_| Record {
            key: k,
            price_cents: 2,
        })
    }));
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
