//! The join on several threads: the same answer as the serial join for every budget of the
//! join tests, the same spill volume where both spill each row once, no spill file left,
//! the budget kept; on a simulated drive, threads are users of the one drive and a run is
//! deterministic.

mod common;

use common::*;
use flash::Device;
use hashjoin::store::{OsStore, Store, VfsStore};
use hashjoin::{hash_join, parallel_hash_join, Algorithm, JoinError, MemoryPool};
use trace::Cancel;
use workloads::tpch::{rows, Layout, Record, Table};

const SF: f64 = 0.05;

/// The two tables of `layout` written under `data`; returns (orders rows, lineitem rows).
fn write_tables(data: &std::path::Path, layout: Layout) -> (u64, u64) {
    std::fs::create_dir_all(data).unwrap();
    let o =
        workloads::tpch::write_table(&data.join("orders.tbl"), Table::Orders, SF, layout).unwrap();
    let l = workloads::tpch::write_table(&data.join("lineitem.tbl"), Table::Lineitem, SF, layout)
        .unwrap();
    (o.rows, l.rows)
}

/// `threads` stores in `dir` with the tables of `data` opened in each.
fn os_stores(
    dir: &std::path::Path,
    data: &std::path::Path,
    layout: Layout,
    rows: (u64, u64),
    threads: usize,
    cap: Option<u64>,
) -> (Vec<OsStore>, Vec<(hashjoin::Input, hashjoin::Input)>) {
    let mut stores = Vec::new();
    let mut pairs = Vec::new();
    for _ in 0..threads {
        let mut s = OsStore::in_dir(dir, false, cap, Cancel::new()).unwrap();
        pairs.push(table_inputs_of(&mut s, data, layout, rows.0, rows.1));
        stores.push(s);
    }
    (stores, pairs)
}

#[test]
fn parallel_join_gives_the_serial_answer_and_spill_volume_for_every_budget() {
    let dir = scratch("parallel");
    let orders: Vec<Record> = rows(Table::Orders, SF).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, SF).collect();
    let want = expected(&orders, &lines);
    let mut parallel_runs = 0;
    for layout in [Layout::Columns, Layout::Fixed128] {
        let data = dir.join(format!("data-{layout}"));
        let n = write_tables(&data, layout);
        for algorithm in [Algorithm::Grace, Algorithm::Hybrid] {
            for memory in [256u64 << 10, 1 << 20, 4 << 20, 64 << 20] {
                let (mut one, pairs) = os_stores(&dir, &data, layout, n, 1, None);
                let pool = MemoryPool::new(memory);
                let serial =
                    hash_join(&mut one[0], &pool, &spec(algorithm), pairs[0].0, pairs[0].1)
                        .unwrap();
                drop(one);
                for threads in [2, 3] {
                    let (mut stores, pairs) = os_stores(&dir, &data, layout, n, threads, None);
                    let pool = MemoryPool::new(memory);
                    let r =
                        parallel_hash_join(&mut stores, &pool, &spec(algorithm), &pairs).unwrap();
                    let what = format!("{layout} {algorithm:?} {memory} B, {threads} threads");
                    check(&r, want);
                    assert!(pool.peak_bytes() <= memory, "{what}");
                    assert_eq!(pool.used_bytes(), 0, "{what}");
                    assert!(r.threads >= 1 && r.threads as usize <= threads, "{what}");
                    assert_eq!(
                        stores.iter().map(|s| s.live_spill_files()).sum::<usize>(),
                        0,
                        "{what}: every spill file deleted once read"
                    );
                    assert_eq!(spill_files_in(&dir), 0, "{what}");
                    if r.threads > 1 {
                        parallel_runs += 1;
                        assert_eq!(r.partitions % r.threads, 0, "{what}: equal shares");
                        if algorithm == Algorithm::Grace {
                            // Every row spilled once by one thread: the serial volume.
                            assert_eq!(r.bytes_spilled, serial.bytes_spilled, "{what}");
                            if serial.repartitioned_pairs == 0 && r.repartitioned_pairs == 0 {
                                assert_eq!(r.bytes_read_back, serial.bytes_read_back, "{what}");
                            }
                        } else {
                            // Hybrid: what stays resident is not spilled.
                            assert_eq!(
                                r.bytes_spilled < r.input_bytes,
                                r.resident_partitions > 0,
                                "{what}: {r:?}"
                            );
                        }
                    } else {
                        // One thread is the serial join (times apart: they are wall times).
                        let untimed = |r: &hashjoin::JoinResult| hashjoin::JoinResult {
                            partition_ns: 0,
                            join_ns: 0,
                            ..r.clone()
                        };
                        assert_eq!(untimed(&r), untimed(&serial), "{what}");
                    }
                }
            }
        }
    }
    assert!(
        parallel_runs >= 8,
        "most budgets leave room for more than one thread ({parallel_runs})"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_thread_stops_the_join_with_its_error_and_leaves_no_file() {
    let dir = scratch("parallel-cap");
    let data = dir.join("data");
    let n = write_tables(&data, Layout::Columns);
    // Each of two stores may hold 64 KiB of spill files: far below the spill volume.
    let (mut stores, pairs) = os_stores(&dir, &data, Layout::Columns, n, 2, Some(64 << 10));
    let err = parallel_hash_join(
        &mut stores,
        &MemoryPool::new(1 << 20),
        &spec(Algorithm::Grace),
        &pairs,
    )
    .unwrap_err();
    assert!(matches!(err, JoinError::DiskCap { .. }), "{err}");
    drop(stores);
    assert_eq!(spill_files_in(&dir), 0, "the stores removed every file");
    // Mismatched stores and inputs are a clear error.
    let (mut stores, pairs) = os_stores(&dir, &data, Layout::Columns, n, 2, None);
    let err = parallel_hash_join(
        &mut stores,
        &MemoryPool::new(1 << 20),
        &spec(Algorithm::Grace),
        &pairs[..1],
    )
    .unwrap_err();
    assert!(err.to_string().contains("one store and one pair"), "{err}");
    drop(stores);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The join of SF 0.05 on `threads` users of one simulated drive; returns the result, the
/// drive's write count and every thread's end time.
fn on_drive(threads: usize, cpu_ns_per_row: u64) -> (hashjoin::JoinResult, u64, u64) {
    let orders: Vec<Record> = rows(Table::Orders, SF).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, SF).collect();
    let dev = flash::Preset::load("mx500")
        .unwrap()
        .with_capacity(4 << 30)
        .build()
        .unwrap();
    let fs = simfs::SimFs::mkfs(simfs::Timed::new(dev), simfs::FsConfig::new(2 << 30)).unwrap();
    let drive = vfs::SimVfs::with_host(fs, vfs::HostConfig::linux(64 << 20));
    let turns = vfs::Turns::in_groups(drive, 1, threads);
    let od = std::sync::Arc::new(encode(&orders, Layout::Columns));
    let ld = std::sync::Arc::new(encode(&lines, Layout::Columns));
    let mut stores = Vec::new();
    let mut pairs = Vec::new();
    for t in 0..threads {
        let mut s = VfsStore::on(turns.user(t), "the simulated drive", None)
            .with_prefix(&format!("spill-{t}-"));
        let o = s.add_memory_input("orders", od.clone()).unwrap();
        let l = s.add_memory_input("lineitem", ld.clone()).unwrap();
        pairs.push(inputs(o, l, &orders, &lines, Layout::Columns, 0));
        stores.push(s);
    }
    let mut sp = spec(Algorithm::Grace);
    sp.cpu_ns_per_row = cpu_ns_per_row;
    let r = parallel_hash_join(&mut stores, &MemoryPool::new(1 << 20), &sp, &pairs).unwrap();
    check(&r, expected(&orders, &lines));
    let end = stores.iter().map(|s| s.elapsed_ns()).max().unwrap();
    drop(stores);
    let writes = turns.with_vfs(|v| v.fs().device().dev.stats().host_write_pages);
    (r, writes, end)
}

#[test]
fn on_a_simulated_drive_threads_share_it_in_virtual_time_deterministically() {
    let first = on_drive(2, 1_000);
    assert_eq!(first.0.threads, 2);
    for _ in 0..3 {
        assert_eq!(on_drive(2, 1_000), first, "same inputs, same run");
    }
    // Computation bound (1 µs a row): two threads finish well before one.
    let serial = on_drive(1, 1_000);
    assert_eq!(serial.0.threads, 1);
    assert!(
        (first.2 as f64) < 0.75 * serial.2 as f64,
        "2 threads {} ns, 1 thread {} ns",
        first.2,
        serial.2
    );
    assert_eq!(first.0.bytes_spilled, serial.0.bytes_spilled);
}
