//! simfs on a zoned drive: the log's segments are zones written only at their write
//! pointers (the drive refuses anything else, so every run here checks that), cleaning
//! copies on the host, emptied zones are reset, and configurations that cannot work are
//! refused by name.

use flash::{AnyDevice, Device, Preset, ZonedConfig};
use simfs::fs::{AllocPolicy, BLOCK};
use simfs::{DiscardMode, FsConfig, SimFs, Timed, ZoneLayout};

/// An x25e-class zoned drive: zones of a 128 KiB block on each of 20 dies, 2.5 MiB.
fn zoned_drive(capacity: u64, z: ZonedConfig) -> AnyDevice {
    let mut p = Preset::load("x25e").unwrap().with_capacity(capacity);
    p.ssd_config_mut().unwrap().zoned = Some(Box::new(z));
    p.build().unwrap()
}

fn zoned_fs(capacity: u64, z: ZonedConfig) -> SimFs<Timed<AnyDevice>> {
    let dev = zoned_drive(capacity, z);
    let layout = ZoneLayout::of(&dev).expect("a zoned drive");
    SimFs::mkfs(Timed::new(dev), FsConfig::for_zoned(layout)).unwrap()
}

/// Files rewritten at random far beyond the space, some deleted and recreated: the log
/// must clean and reset zones to keep going.
fn churn(fs: &mut SimFs<Timed<AnyDevice>>, rounds: u64) {
    let free = fs.free_bytes();
    let file_bytes = 4u64 << 20;
    let files = (free * 6 / 10 / file_bytes).max(2);
    let mut inos: Vec<u32> = (0..files)
        .map(|i| {
            let ino = fs.create(&format!("f{i}")).unwrap();
            fs.write_at(ino, 0, file_bytes).unwrap();
            ino
        })
        .collect();
    fs.sync().unwrap();
    let mut x = 12345u64;
    for r in 0..rounds {
        for _ in 0..256 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let f = (x >> 33) % files;
            let block = (x >> 13) % (file_bytes / BLOCK);
            fs.write_at(
                inos[f as usize],
                block * BLOCK,
                4 * BLOCK.min(file_bytes - block * BLOCK),
            )
            .unwrap();
        }
        if r % 4 == 3 {
            let victim = (r / 4) % files;
            fs.unlink(&format!("f{victim}")).unwrap();
            let ino = fs.create(&format!("f{victim}")).unwrap();
            fs.fallocate(ino, 0, file_bytes).unwrap();
            fs.write_at(ino, 0, file_bytes).unwrap();
            inos[victim as usize] = ino;
        }
        fs.sync().unwrap();
        fs.check_invariants().unwrap();
    }
}

#[test]
fn the_log_writes_zones_at_their_pointers_cleans_and_resets() {
    let mut fs = zoned_fs(256 << 20, ZonedConfig::default());
    churn(&mut fs, 40);
    let st = fs.stats().clone();
    assert!(st.cleaned_segments > 0, "cleaning ran: {st:?}");
    assert!(st.zone_resets > 0, "zones were reset: {st:?}");
    assert_eq!(st.trim_commands, 0, "no TRIMs of extents");
    let d = fs.device().dev.stats();
    assert_eq!(d.gc_copied_pages, 0, "the drive copies nothing");
    // Every flash write is the host's: the host's copies are in data_write_bytes.
    assert_eq!(
        d.host_write_pages * 4096,
        st.data_write_bytes + st.meta_write_requests * BLOCK
    );
    let zones = d.zoned.clone().expect("a zoned drive's counters");
    assert_eq!(zones.resets, st.zone_resets, "each reset reached the drive");
}

#[test]
fn a_zone_capacity_below_the_size_and_tight_limits_work() {
    let z = ZonedConfig {
        zone_capacity_bytes: Some(2 << 20),
        max_open_zones: 1,
        max_active_zones: 2,
    };
    let mut fs = zoned_fs(256 << 20, z.clone());
    churn(&mut fs, 24);
    assert!(fs.stats().zone_resets > 0);
    // The same run gives the same numbers.
    let mut again = zoned_fs(256 << 20, z);
    churn(&mut again, 24);
    assert_eq!(fs.stats(), again.stats());
    assert_eq!(fs.device().now_ns(), again.device().now_ns());
}

#[test]
fn configurations_that_cannot_work_are_refused_by_name() {
    let dev = zoned_drive(256 << 20, ZonedConfig::default());
    let layout = ZoneLayout::of(&dev).unwrap();
    let err = |cfg: FsConfig| {
        let dev = zoned_drive(256 << 20, ZonedConfig::default());
        SimFs::mkfs(Timed::new(dev), cfg).err().unwrap().to_string()
    };
    let mut c = FsConfig::for_zoned(layout);
    c.alloc = AllocPolicy::Ext4Like;
    assert!(err(c).contains("log-structured"));
    let mut c = FsConfig::for_zoned(layout);
    c.discard = DiscardMode::Online;
    assert!(err(c).contains("discard mode online"));
    let mut c = FsConfig::for_zoned(layout);
    c.zoned = Some(ZoneLayout {
        max_active_zones: 1,
        ..layout
    });
    assert!(err(c).contains("max_active_zones"));
    // Zones too large for the drive: three zones of 2.5 MiB leave the log no room.
    let small = zoned_drive(8 << 20, ZonedConfig::default());
    let l = ZoneLayout::of(&small).unwrap();
    let e = SimFs::mkfs(Timed::new(small), FsConfig::for_zoned(l))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at least 4 zones"), "{e}");
    // A conventional layout on a zoned drive fails at its first write off a pointer.
    let dev = zoned_drive(256 << 20, ZonedConfig::default());
    let e = SimFs::mkfs(Timed::new(dev), FsConfig::for_device(200 << 20))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("Zone"), "{e}");
    // Fragmented files leave gaps.
    let mut fs = zoned_fs(256 << 20, ZonedConfig::default());
    assert!(fs.create_fragmented("x", 1 << 20, 4).is_err());
}

#[test]
fn a_full_zoned_file_system_is_a_clear_error_and_stays_consistent() {
    let mut fs = zoned_fs(64 << 20, ZonedConfig::default());
    let f = fs.create("big").unwrap();
    let mut at = 0u64;
    let err = loop {
        match fs.write_at(f, at, 1 << 20) {
            Ok(_) => at += 1 << 20,
            Err(e) => break e,
        }
        assert!(at < 1 << 30, "a 64 MiB drive took a GiB");
    };
    assert!(matches!(err, simfs::SimfsError::NoSpace { .. }), "{err:?}");
    // What was written before the error is intact, and overwrites still find room once
    // a file is gone.
    fs.check_invariants().unwrap();
    let g = fs.create("small").unwrap();
    fs.unlink("big").unwrap();
    fs.sync().unwrap();
    fs.write_at(g, 0, 8 << 20).unwrap();
    fs.sync().unwrap();
    fs.check_invariants().unwrap();
}

fn zoned_fs_with_logs(
    capacity: u64,
    z: ZonedConfig,
) -> Result<SimFs<Timed<AnyDevice>>, simfs::SimfsError> {
    let dev = zoned_drive(capacity, z);
    let layout = ZoneLayout::of(&dev).expect("a zoned drive");
    let mut cfg = FsConfig::for_zoned(layout);
    cfg.placement = Some(simfs::HintPlacement::linux_streams(5));
    SimFs::mkfs(Timed::new(dev), cfg)
}

/// The zones holding a file's blocks.
fn zones_of(fs: &SimFs<Timed<AnyDevice>>, name: &str) -> std::collections::BTreeSet<u64> {
    let zone_blocks = (2560u64 << 10) / BLOCK;
    let ino = fs.lookup(name).unwrap();
    fs.extents(ino)
        .unwrap()
        .iter()
        .flat_map(|e| e.start_block..e.start_block + e.len as u64)
        .map(|b| b / zone_blocks)
        .collect()
}

#[test]
fn hints_pick_logs_so_files_of_different_lives_share_no_zone() {
    let mut fs = zoned_fs_with_logs(64 << 20, ZonedConfig::default()).unwrap();
    let hot = fs.create("hot").unwrap();
    let cold = fs.create("cold").unwrap();
    fs.set_write_hint(hot, simfs::WriteHint::Short).unwrap();
    fs.set_write_hint(cold, simfs::WriteHint::Extreme).unwrap();
    for i in 0..256u64 {
        fs.write_at(hot, i * 65536, 65536).unwrap();
        fs.write_at(cold, i * 65536, 65536).unwrap();
    }
    fs.sync().unwrap();
    let (h, c) = (zones_of(&fs, "hot"), zones_of(&fs, "cold"));
    assert!(h.is_disjoint(&c), "hot {h:?} cold {c:?}");
    // Every write is on handle 0: a zoned drive has no placement handles.
    // Rewrites of the hot file force cleaning; copies go to the coldest log.
    let mut x = 99u64;
    for round in 0..30 {
        for _ in 0..512 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            fs.write_at(hot, ((x >> 33) % 4096) * BLOCK, BLOCK).unwrap();
        }
        if round % 5 == 4 {
            fs.sync().unwrap();
            fs.check_invariants().unwrap();
        }
    }
    fs.sync().unwrap();
    fs.check_invariants().unwrap();
    assert!(
        fs.stats().cleaned_segments > 0 && fs.stats().zone_resets > 0,
        "{:?}",
        fs.stats()
    );
    // (Cleaning sends every copy to the coldest log, as F2FS's GC does: the hot blocks it
    // moves then share zones with the cold file.)
    // The same with one log mixes them.
    let mut one = zoned_fs(64 << 20, ZonedConfig::default());
    let hot = one.create("hot").unwrap();
    let cold = one.create("cold").unwrap();
    for i in 0..256u64 {
        one.write_at(hot, i * 65536, 65536).unwrap();
        one.write_at(cold, i * 65536, 65536).unwrap();
    }
    assert!(!zones_of(&one, "hot").is_disjoint(&zones_of(&one, "cold")));
}

#[test]
fn several_logs_need_an_active_zone_each_and_one_more() {
    let tight = ZonedConfig {
        max_active_zones: 5,
        ..ZonedConfig::default()
    };
    let e = zoned_fs_with_logs(256 << 20, tight)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("at least 6"), "{e}");
    let enough = ZonedConfig {
        max_open_zones: 2,
        max_active_zones: 6,
        ..ZonedConfig::default()
    };
    let mut fs = zoned_fs_with_logs(256 << 20, enough).unwrap();
    let a = fs.create("a").unwrap();
    let b = fs.create("b").unwrap();
    fs.set_write_hint(a, simfs::WriteHint::Short).unwrap();
    fs.set_write_hint(b, simfs::WriteHint::Long).unwrap();
    for round in 0..8u64 {
        for i in 0..512u64 {
            fs.write_at(a, i * 16384, 16384).unwrap();
            fs.write_at(b, ((i * 7 + round) % 512) * 16384, 16384)
                .unwrap();
        }
        fs.sync().unwrap();
    }
    fs.check_invariants().unwrap();
}
