//! The join's answer against an independent computation (a map from order key to total
//! price), for every algorithm, memory size and backend; spill files are gone afterwards.

mod common;

use common::*;
use hashjoin::store::{MemStore, OsStore, SimStore, Store};
use hashjoin::{hash_join, Algorithm, JoinError, MemoryPool};
use trace::Cancel;
use workloads::tpch::{rows, Layout, Record, Table};

#[test]
fn every_algorithm_and_memory_size_gives_the_right_answer() {
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let want = expected(&orders, &lines);
    assert_eq!(want.0, lines.len() as u64, "every lineitem has its order");
    for layout in [Layout::Columns, Layout::Fixed128] {
        for algorithm in [Algorithm::Grace, Algorithm::Hybrid] {
            for memory in [256u64 << 10, 1 << 20, 4 << 20, 64 << 20] {
                let mut store = MemStore::default();
                let o = store.add_input("orders", &encode(&orders, layout)).unwrap();
                let l = store
                    .add_input("lineitem", &encode(&lines, layout))
                    .unwrap();
                let (a, b) = inputs(o, l, &orders, &lines, layout, 0);
                let pool = MemoryPool::new(memory);
                let r = hash_join(&mut store, &pool, &spec(algorithm), a, b).unwrap();
                check(&r, want);
                assert_eq!(
                    store.live_spill_files(),
                    0,
                    "spill files are deleted once read"
                );
                assert!(pool.peak_bytes() <= memory);
                assert_eq!(pool.used_bytes(), 0);
                if memory == 64 << 20 && layout == Layout::Columns {
                    assert_eq!(r.bytes_spilled, 0, "fits in memory: no spill");
                }
                let need =
                    hashjoin::table::table_bytes(orders.len() as u64, layout.record_bytes() as u64);
                assert_eq!(
                    r.bytes_spilled > 0,
                    need > memory - (64 << 10),
                    "{layout} {memory}"
                );
                if r.bytes_spilled > 0 {
                    // Grace optimum: both inputs written once and read once, no repartitioning.
                    if r.repartitioned_pairs == 0 && algorithm == Algorithm::Grace {
                        assert_eq!(r.bytes_spilled, r.input_bytes, "{layout} {memory}");
                        assert_eq!(r.bytes_read_back, r.input_bytes);
                    }
                }
                if algorithm == Algorithm::Hybrid && memory == 4 << 20 {
                    assert!(
                        r.resident_partitions > 0 && r.bytes_spilled < r.input_bytes,
                        "{r:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn skew_falls_back_to_nested_loops_without_running_out_of_memory() {
    // 8,000 orders and 8,000 lineitems on one key (64 million output rows), plus normal rows.
    let (orders, lines) = hot_key(8_000, 8_000, 5_000);
    let want = expected(&orders, &lines);
    let mut store = MemStore::default();
    let o = store
        .add_input("orders", &encode(&orders, Layout::Columns))
        .unwrap();
    let l = store
        .add_input("lineitem", &encode(&lines, Layout::Columns))
        .unwrap();
    let (a, b) = inputs(o, l, &orders, &lines, Layout::Columns, 0);
    let pool = MemoryPool::new(200 << 10);
    let r = hash_join(&mut store, &pool, &spec(Algorithm::Grace), a, b).unwrap();
    check(&r, want);
    assert!(r.nested_loop_pairs >= 1, "{r:?}");
    assert_eq!(store.live_spill_files(), 0);
}

#[test]
fn memory_too_small_is_a_clear_error() {
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
        &MemoryPool::new(70 << 10),
        &spec(Algorithm::Grace),
        a,
        b,
    )
    .unwrap_err();
    assert!(matches!(err, JoinError::Memory { .. }), "{err}");
    assert!(err.to_string().contains("write buffer"), "{err}");
}

#[test]
fn os_backend_uses_real_files_and_removes_them() {
    let dir = scratch("os");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let ho = workloads::tpch::write_table(
        &data.join("orders.tbl"),
        Table::Orders,
        0.01,
        Layout::Fixed128,
    )
    .unwrap();
    let hl = workloads::tpch::write_table(
        &data.join("lineitem.tbl"),
        Table::Lineitem,
        0.01,
        Layout::Fixed128,
    )
    .unwrap();
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let want = expected(&orders, &lines);
    for fallocate in [false, true] {
        let mut store = OsStore::in_dir(&dir, false, None, Cancel::new()).unwrap();
        let (a, b) = table_inputs(&mut store, &data, ho.rows, hl.rows);
        let mut s = spec(Algorithm::Grace);
        s.fallocate = fallocate;
        let r = hash_join(&mut store, &MemoryPool::new(2 << 20), &s, a, b).unwrap();
        check(&r, want);
        assert!(r.spill_files > 2);
        assert_eq!(
            spill_files_in(&dir),
            0,
            "each spill file is deleted once read"
        );
        assert_eq!(store.stats().fallocate_calls > 0, fallocate);
    }
    // A cap smaller than the spill volume: a clear error, and nothing left behind.
    {
        let mut store = OsStore::in_dir(&dir, false, Some(1 << 20), Cancel::new()).unwrap();
        let (a, b) = table_inputs(&mut store, &data, ho.rows, hl.rows);
        let err = hash_join(
            &mut store,
            &MemoryPool::new(2 << 20),
            &spec(Algorithm::Grace),
            a,
            b,
        )
        .unwrap_err();
        assert!(matches!(err, JoinError::DiskCap { .. }), "{err}");
    }
    assert_eq!(
        spill_files_in(&dir),
        0,
        "dropping the store removes the spill files of a failed run"
    );
    // An interrupt: the join stops with Interrupted and its files are gone.
    {
        let cancel = Cancel::new();
        let mut store = OsStore::in_dir(&dir, false, None, cancel.clone()).unwrap();
        let (a, b) = table_inputs(&mut store, &data, ho.rows, hl.rows);
        let f = store.create().unwrap();
        store.append(f, &[1u8; 4096]).unwrap();
        cancel.cancel();
        assert!(matches!(
            store.append(f, &[1u8; 4096]),
            Err(JoinError::Interrupted)
        ));
        let err = hash_join(
            &mut store,
            &MemoryPool::new(2 << 20),
            &spec(Algorithm::Grace),
            a,
            b,
        )
        .unwrap_err();
        assert!(matches!(err, JoinError::Interrupted), "{err}");
        // Deleting a file on the way out is not cancellable: it is gone at once (it once
        // left the store's table and then refused to unlink, so nothing removed it).
        let g = store.create();
        assert!(matches!(g, Err(JoinError::Interrupted)), "{g:?}");
        store.delete(f).unwrap();
        assert_eq!(spill_files_in(&dir), 0, "a delete after the interrupt");
    }
    assert_eq!(spill_files_in(&dir), 0, "an interrupted run leaves nothing");
    // Liveness is a run's lock, not a process id: a run whose process is invisible here
    // (another PID namespace) but holds its lock keeps its files; once its lock is free,
    // the next run removes them, and files of an old PID-named run without a lock too.
    let live_lock = dir.join("flashlab-spill-0123456789abcdef.lock");
    let held = std::fs::File::create(&live_lock).unwrap();
    // SAFETY: flock on a descriptor this test holds open.
    assert_eq!(
        unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) },
        0
    );
    std::fs::write(dir.join("flashlab-spill-0123456789abcdef-0.tmp"), b"x").unwrap();
    std::fs::write(dir.join("flashlab-spill-999999999-3.tmp"), b"x").unwrap();
    let store = OsStore::in_dir(&dir, false, None, Cancel::new()).unwrap();
    assert_eq!(store.stale_removed, 1, "only the lock-less run's file");
    assert!(dir.join("flashlab-spill-0123456789abcdef-0.tmp").exists());
    drop(store);
    drop(held);
    let store = OsStore::in_dir(&dir, false, None, Cancel::new()).unwrap();
    assert_eq!(store.stale_removed, 1, "the released run's file");
    assert!(!live_lock.exists(), "and its lock file");
    drop(store);
    assert!(
        OsStore::in_dir(&dir.join("missing"), false, None, Cancel::new())
            .err()
            .unwrap()
            .to_string()
            .contains("does not exist")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sim_backend_times_spill_io_on_a_drive() {
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let want = expected(&orders, &lines);
    let mut times = vec![];
    for discard in [simfs::DiscardMode::None, simfs::DiscardMode::Online] {
        let dev = flash::Preset::load("mx500")
            .unwrap()
            .with_capacity(4 << 30)
            .build()
            .unwrap();
        let mut cfg = simfs::FsConfig::new(2 << 30);
        cfg.discard = discard;
        let mut store = SimStore::simulated(dev, cfg, vfs::HostConfig::uncached()).unwrap();
        let o = store
            .add_input("orders", &encode(&orders, Layout::Columns))
            .unwrap();
        let l = store
            .add_input("lineitem", &encode(&lines, Layout::Columns))
            .unwrap();
        store.start_clock();
        let (a, b) = inputs(o, l, &orders, &lines, Layout::Columns, 0);
        let r = hash_join(
            &mut store,
            &MemoryPool::new(256 << 10),
            &spec(Algorithm::Grace),
            a,
            b,
        )
        .unwrap();
        check(&r, want);
        let total = store.finish().unwrap();
        assert!(total > 0 && r.partition_ns > 0 && r.join_ns > 0);
        let d = store.device_stats();
        assert_eq!(d.trim_commands > 0, discard == simfs::DiscardMode::Online);
        times.push(total);
    }
    assert_ne!(times[0], times[1]);
}

#[test]
fn each_pass_spills_on_its_own_handle_and_the_answer_stays() {
    // An FDP drive with 5 handles: simfs maps the join's hints onto them (SHORT on 1 for
    // the first pass, MEDIUM on 2 for repartitioning); without placement everything is on
    // handle 0. The answer is the same either way.
    let orders: Vec<Record> = rows(Table::Orders, 0.01).collect();
    let lines: Vec<Record> = rows(Table::Lineitem, 0.01).collect();
    let want = expected(&orders, &lines);
    let run = |placement: bool| {
        let mut preset = flash::Preset::load("nvme").unwrap().with_capacity(4 << 30);
        preset.ssd_config_mut().unwrap().fdp = Some(Box::new(flash::FdpConfig::new(5)));
        let dev = preset.build().unwrap();
        let mut cfg = simfs::FsConfig::new(2 << 30);
        cfg.placement = placement.then(|| simfs::HintPlacement::linux_streams(5));
        let mut store = SimStore::simulated(dev, cfg, vfs::HostConfig::uncached()).unwrap();
        let o = store
            .add_input("orders", &encode(&orders, Layout::Columns))
            .unwrap();
        let l = store
            .add_input("lineitem", &encode(&lines, Layout::Columns))
            .unwrap();
        let (a, b) = inputs(o, l, &orders, &lines, Layout::Columns, 0);
        let r = hash_join(
            &mut store,
            &MemoryPool::new(128 << 10),
            &spec(Algorithm::Grace),
            a,
            b,
        )
        .unwrap();
        check(&r, want);
        let fdp = store.device_stats().fdp.unwrap();
        let per: Vec<u64> = fdp
            .per_handle
            .iter()
            .map(|h| h.host_bytes_written)
            .collect();
        (r, per)
    };
    let (r_on, on) = run(true);
    let (r_off, off) = run(false);
    assert_eq!(
        (
            r_on.rows,
            r_on.sum_o_totalprice_cents,
            r_on.sum_l_extendedprice_cents
        ),
        (
            r_off.rows,
            r_off.sum_o_totalprice_cents,
            r_off.sum_l_extendedprice_cents
        )
    );
    assert_eq!(r_on.bytes_spilled, r_off.bytes_spilled);
    assert_eq!(off[1..].iter().sum::<u64>(), 0, "{off:?}");
    assert!(
        r_on.repartitioned_pairs > 0,
        "this memory repartitions: {r_on:?}"
    );
    // First-pass spill files on handle 1, repartitioned ones on handle 2 (with the
    // file system's inode tables and bitmaps, MEDIUM too); the inputs on handle 0.
    assert!(on[1] >= r_on.input_bytes / 4096 * 4096, "{on:?} {r_on:?}");
    assert!(
        on[2] > 0 && on[0] >= r_on.input_bytes / 4096 * 4096,
        "{on:?}"
    );
    assert_eq!(on.iter().sum::<u64>(), off.iter().sum::<u64>());
}
