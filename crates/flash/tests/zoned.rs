//! The zoned drive: each ZNS status where the command set names it, zone append's
//! returned address, resets, limits, WAF 1 and determinism.

use flash::zoned::ZoneDescriptor;
use flash::{
    Command, Device, FlashError, Preset, SsdConfig, ZoneState, ZoneStatus, ZonedConfig, ZonedSsd,
};

/// 4 dies, 16 pages of 4 KiB per block: 256 KiB zones; 8 zones.
fn config(z: ZonedConfig) -> SsdConfig {
    let mut p = Preset::load("nvme").unwrap();
    let c = p.ssd_config_mut().unwrap();
    c.geometry = flash::Geometry {
        channels: 2,
        chips_per_channel: 2,
        dies_per_chip: 1,
        planes_per_die: 1,
        pages_per_block: 16,
        page_size_bytes: 4096,
        mapping_unit_bytes: 4096,
        logical_bytes: 8 * 256 * 1024,
        op: 0.5,
    };
    c.slc_cache = None;
    c.mapping_cache = None;
    c.zoned = Some(Box::new(z));
    c.clone()
}

const ZONE: u64 = 256 * 1024;

fn status(e: FlashError) -> ZoneStatus {
    match e {
        FlashError::Zone { status, .. } => status,
        other => panic!("expected a zone status, got {other}"),
    }
}

fn drive(z: ZonedConfig) -> ZonedSsd {
    ZonedSsd::new(config(z)).unwrap()
}

#[test]
fn zones_are_superblocks_and_start_empty() {
    let d = drive(ZonedConfig::default());
    assert_eq!(d.zones(), 8);
    assert_eq!(d.zone_size_bytes(), ZONE);
    assert_eq!(d.logical_bytes(), 8 * ZONE);
    let r = d.report();
    assert_eq!(r.len(), 8);
    assert_eq!(
        r[3],
        ZoneDescriptor {
            zone: 3,
            state: ZoneState::Empty,
            start_bytes: 3 * ZONE,
            capacity_bytes: ZONE,
            write_pointer_bytes: 3 * ZONE,
        }
    );
}

#[test]
fn writes_off_the_write_pointer_are_zone_invalid_write() {
    let mut d = drive(ZonedConfig::default());
    d.submit(&Command::write(0, 8192), 0).unwrap();
    // Behind, ahead of, and in another zone away from its pointer.
    for off in [0, 4096, 16384, ZONE + 4096] {
        let e = d.submit(&Command::write(off, 4096), 10).unwrap_err();
        assert!(e.to_string().contains("Zone Invalid Write"), "{e}");
        assert!(e.to_string().contains("0xBC"), "{e}");
        assert_eq!(status(e), ZoneStatus::ZoneInvalidWrite);
    }
    d.submit(&Command::write(8192, 4096), 20).unwrap();
    assert_eq!(d.descriptor(0).write_pointer_bytes, 12288);
    assert_eq!(d.descriptor(0).state, ZoneState::ImplicitlyOpened);
}

#[test]
fn a_full_zone_refuses_writes_and_capacity_bounds_them() {
    let mut d = drive(ZonedConfig {
        zone_capacity_bytes: Some(ZONE / 2),
        ..ZonedConfig::default()
    });
    let e = d
        .submit(&Command::write(0, ZONE / 2 + 4096), 0)
        .unwrap_err();
    assert_eq!(status(e), ZoneStatus::ZoneBoundaryError);
    d.submit(&Command::write(0, ZONE / 2), 0).unwrap();
    assert_eq!(d.descriptor(0).state, ZoneState::Full);
    let e = d.submit(&Command::write(ZONE / 2, 4096), 1).unwrap_err();
    assert_eq!(status(e), ZoneStatus::ZoneIsFull);
    let e = d.zone_append(0, 4096, 2).unwrap_err();
    assert_eq!(status(e), ZoneStatus::ZoneIsFull);
    // Reset: writable again from the start.
    d.reset(0, 3).unwrap();
    assert_eq!(d.descriptor(0).state, ZoneState::Empty);
    d.submit(&Command::write(0, 4096), 4).unwrap();
}

#[test]
fn zone_append_returns_the_address_it_wrote() {
    let mut d = drive(ZonedConfig::default());
    let mut now = 0;
    let mut at = Vec::new();
    for len in [4096u64, 8192, 4096, 16384] {
        let (lba, done) = d.zone_append(2 * ZONE, len, now).unwrap();
        assert!(done > now);
        at.push(lba);
        now = done;
    }
    assert_eq!(
        at,
        vec![
            2 * ZONE,
            2 * ZONE + 4096,
            2 * ZONE + 12288,
            2 * ZONE + 16384
        ]
    );
    assert_eq!(d.descriptor(2).write_pointer_bytes, 2 * ZONE + 32768);
    // A plain write continues at the pointer the appends left.
    d.submit(&Command::write(2 * ZONE + 32768, 4096), now)
        .unwrap();
    // Append names the zone by its start.
    assert!(d.zone_append(2 * ZONE + 4096, 4096, now).is_err());
}

#[test]
fn open_limit_closes_an_implicitly_opened_zone_or_refuses() {
    let mut d = drive(ZonedConfig {
        max_open_zones: 2,
        ..ZonedConfig::default()
    });
    d.submit(&Command::write(0, 4096), 0).unwrap();
    d.submit(&Command::write(ZONE, 4096), 1).unwrap();
    // A third zone: the drive closes the implicitly opened zone opened first.
    d.submit(&Command::write(2 * ZONE, 4096), 2).unwrap();
    assert_eq!(d.descriptor(0).state, ZoneState::Closed);
    assert_eq!(d.descriptor(2).state, ZoneState::ImplicitlyOpened);
    assert_eq!(d.stats().zoned.unwrap().implicit_closes, 1);
    // Explicitly opened zones are not closed for another: Too Many Open Zones.
    d.open(3 * ZONE, 3).unwrap();
    d.open(4 * ZONE, 4).unwrap();
    let e = d.submit(&Command::write(5 * ZONE, 4096), 5).unwrap_err();
    assert_eq!(status(e.clone()), ZoneStatus::TooManyOpenZones);
    assert!(e.to_string().contains("Too Many Open Zones"), "{e}");
    let e = d.open(0, 6).unwrap_err();
    assert_eq!(status(e), ZoneStatus::TooManyOpenZones);
    d.close(3 * ZONE, 7).unwrap();
    // Closing an Empty zone is not a state transition the spec allows.
    let e = d.close(6 * ZONE, 7).unwrap_err();
    assert_eq!(status(e), ZoneStatus::InvalidZoneStateTransition);
    assert_eq!(
        d.descriptor(3).state,
        ZoneState::Empty,
        "nothing written: Empty"
    );
    d.submit(&Command::write(5 * ZONE, 4096), 8).unwrap();
}

#[test]
fn active_limit_refuses_a_new_zone_until_one_is_finished() {
    let mut d = drive(ZonedConfig {
        max_active_zones: 2,
        ..ZonedConfig::default()
    });
    d.submit(&Command::write(0, 4096), 0).unwrap();
    d.submit(&Command::write(ZONE, 4096), 1).unwrap();
    d.close(0, 2).unwrap();
    let e = d.submit(&Command::write(2 * ZONE, 4096), 3).unwrap_err();
    assert_eq!(status(e.clone()), ZoneStatus::TooManyActiveZones);
    assert!(e.to_string().contains("Too Many Active Zones"), "{e}");
    d.finish(0, 4).unwrap();
    assert_eq!(d.descriptor(0).state, ZoneState::Full);
    assert_eq!(d.descriptor(0).write_pointer_bytes, ZONE);
    d.submit(&Command::write(2 * ZONE, 4096), 5).unwrap();
    let s = d.stats().zoned.unwrap();
    assert_eq!((s.active_zones, s.full_zones, s.finishes), (2, 1, 1));
}

#[test]
fn resets_erase_cost_time_and_the_device_never_amplifies() {
    let run = || {
        let mut d = drive(ZonedConfig::default());
        let mut now = 0;
        let mut resets = Vec::new();
        for round in 0..3 {
            for z in 0..8u64 {
                for i in 0..ZONE / 65536 {
                    now = d
                        .submit(&Command::write(z * ZONE + i * 65536, 65536), now)
                        .unwrap();
                }
            }
            now = d.submit(&Command::read(3 * ZONE, 65536), now).unwrap();
            if round < 2 {
                for z in 0..8u64 {
                    let t = d.reset(z * ZONE, now).unwrap();
                    resets.push(t - now);
                    now = t;
                }
            }
        }
        (now, resets, d.stats())
    };
    let (end, resets, s) = run();
    let erase_ns = Preset::load("nvme")
        .unwrap()
        .ssd_config()
        .unwrap()
        .timing
        .erase_ns;
    assert!(resets.iter().all(|&r| r >= erase_ns), "{resets:?}");
    assert_eq!(s.waf, Some(1.0));
    assert_eq!(s.host_write_pages, s.flash_write_pages);
    assert_eq!(s.gc_copied_pages, 0);
    assert_eq!(
        s.erases,
        2 * 8 * 4,
        "each reset erases its block on every die"
    );
    assert_eq!(s.zoned.as_ref().unwrap().resets, 16);
    // Deterministic: the same commands give the same times and counts.
    let (end2, resets2, s2) = run();
    assert_eq!((end, resets), (end2, resets2));
    assert_eq!(s.erases, s2.erases);
}

#[test]
fn a_trim_over_whole_zones_resets_them_and_others_are_refused() {
    let mut d = drive(ZonedConfig::default());
    d.submit(&Command::write(0, 8192), 0).unwrap();
    d.submit(&Command::write(ZONE, 8192), 1).unwrap();
    d.submit(&Command::trim(0, 2 * ZONE), 2).unwrap();
    assert_eq!(d.descriptor(1).state, ZoneState::Empty);
    assert!(d.submit(&Command::trim(0, 4096), 3).is_err());
    let e = d
        .submit(&Command::write(0, 4096).on_handle(1), 4)
        .unwrap_err();
    assert!(matches!(e, FlashError::Placement { .. }), "{e}");
}

#[test]
fn impossible_zone_settings_are_clear_errors() {
    let e = ZonedSsd::new(config(ZonedConfig {
        zone_capacity_bytes: Some(ZONE + 4096),
        ..ZonedConfig::default()
    }))
    .err()
    .unwrap();
    assert!(e.to_string().contains("zone_capacity_bytes"), "{e}");
    let e = ZonedSsd::new(config(ZonedConfig {
        max_open_zones: 4,
        max_active_zones: 2,
        ..ZonedConfig::default()
    }))
    .err()
    .unwrap();
    assert!(e.to_string().contains("max_open_zones"), "{e}");
    // A preset with [ssd.zoned] builds the zoned drive.
    let p = Preset {
        name: "z".into(),
        description: String::new(),
        device: flash::DeviceConfig::Ssd(config(ZonedConfig::default())),
        notes: vec![],
    };
    assert!(matches!(p.build().unwrap(), flash::AnyDevice::Zoned(_)));
}

#[test]
fn the_wear_report_counts_each_reset_as_an_erase_of_the_blocks_it_reached() {
    let mut c = config(ZonedConfig::default());
    c.endurance = Some(Box::new(flash::EnduranceConfig {
        rated_pe_cycles: 100,
        rated_tbw_bytes: None,
        warranty_years: None,
        rated_logical_bytes: None,
    }));
    let mut d = ZonedSsd::new(c).unwrap();
    let mut now = 0;
    // Zone 0 written whole and reset twice; zone 1 written on its first die only, reset once.
    for _ in 0..2 {
        for i in 0..ZONE / 65536 {
            now = d.submit(&Command::write(i * 65536, 65536), now).unwrap();
        }
        now = d.reset(0, now).unwrap();
    }
    now = d.submit(&Command::write(ZONE, 4096), now).unwrap();
    d.reset(ZONE, now).unwrap();
    let w = d.wear_report().expect("rated endurance gives a report");
    // 4 dies x 8 zones = 32 blocks of the zones, plus the spare the op leaves.
    assert!(w.blocks >= 32, "{}", w.blocks);
    assert_eq!(w.erase_count_max, 2);
    let erases = 2 * 4 + 1;
    let mean = erases as f64 / w.blocks as f64;
    assert!(
        (w.erase_count_mean - mean).abs() < 1e-9,
        "{} vs {mean}",
        w.erase_count_mean
    );
    assert!((w.life_used - mean / 100.0).abs() < 1e-9);
    assert!((w.life_used_worst_block - 0.02).abs() < 1e-9);
    // Without rated endurance there is no report.
    let mut c = config(ZonedConfig::default());
    c.endurance = None;
    assert!(ZonedSsd::new(c).unwrap().wear_report().is_none());
}
