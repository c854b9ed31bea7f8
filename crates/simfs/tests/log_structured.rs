//! The log-structured policy: writes append, overwrites move out of place, cleaning keeps
//! every file's mapping intact, and freed blocks are discarded at sync.

use flash::{Op, Preset, Ssd};
use simfs::fs::{AllocPolicy, BLOCK};
use simfs::{DiscardMode, FsConfig, Recorder, SimFs, Timed};

fn lfs_recorder(size: u64, discard: DiscardMode) -> SimFs<Recorder> {
    let mut cfg = FsConfig::new(size);
    cfg.alloc = AllocPolicy::LogStructured;
    cfg.discard = discard;
    SimFs::mkfs(Recorder::new(size + (1 << 20)), cfg).unwrap()
}

#[test]
fn concurrent_writers_append_to_one_log() {
    let mut fs = lfs_recorder(256 << 20, DiscardMode::None);
    let start = fs.device().requests.len();
    let a = fs.create("a").unwrap();
    let b = fs.create("b").unwrap();
    for i in 0..64u64 {
        fs.write_at(a, i * 65536, 65536).unwrap();
        fs.write_at(b, i * 65536, 65536).unwrap();
    }
    let writes: Vec<u64> = fs.device().requests[start..]
        .iter()
        .filter(|r| r.cmd.op == Op::Write)
        .map(|r| r.cmd.offset_bytes)
        .collect();
    assert!(
        writes.windows(2).all(|w| w[1] == w[0] + 65536),
        "every write continues the log"
    );
    fs.check_invariants().unwrap();
}

#[test]
fn overwrites_move_and_are_discarded_at_sync() {
    let mut fs = lfs_recorder(256 << 20, DiscardMode::Online);
    let f = fs.create("f").unwrap();
    fs.write_at(f, 0, 1 << 20).unwrap();
    let before = fs.extents(f).unwrap();
    fs.write_at(f, 0, 64 << 10).unwrap();
    let after = fs.extents(f).unwrap();
    assert_ne!(
        before[0].start_block, after[0].start_block,
        "the overwritten blocks moved"
    );
    let n = fs.device().requests.len();
    fs.sync().unwrap();
    let trims: Vec<_> = fs.device().requests[n..]
        .iter()
        .filter(|r| r.cmd.op == Op::Trim)
        .collect();
    assert_eq!(trims.len(), 1);
    assert_eq!(trims[0].cmd.offset_bytes, before[0].start_block * BLOCK);
    assert_eq!(trims[0].cmd.len_bytes, 64 << 10);
    fs.check_invariants().unwrap();
}

#[test]
fn cleaning_keeps_files_intact_under_random_overwrites() {
    let mut fs = lfs_recorder(128 << 20, DiscardMode::Online);
    let files: Vec<_> = (0..4)
        .map(|i| fs.create(&format!("f{i}")).unwrap())
        .collect();
    for &f in &files {
        fs.write_at(f, 0, 20 << 20).unwrap();
    }
    let mut x: u64 = 7;
    for round in 0..6000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let f = files[(x >> 60) as usize % files.len()];
        let block = (x >> 20) % ((20 << 20 >> 12) - 4);
        fs.write_at(f, block * BLOCK, 16 << 10).unwrap();
        if round % 500 == 0 {
            fs.sync().unwrap();
            fs.check_invariants().unwrap();
        }
    }
    fs.sync().unwrap();
    fs.check_invariants().unwrap();
    assert!(
        fs.stats().cleaned_segments > 0,
        "80 MiB live in 128 MiB must force cleaning"
    );
    for &f in &files {
        let mapped: u64 = fs.extents(f).unwrap().iter().map(|e| e.len as u64).sum();
        assert_eq!(
            mapped,
            (20 << 20) / BLOCK,
            "every block of the file is still mapped exactly once"
        );
    }
}

#[test]
fn deleting_on_a_simulated_drive_trims_in_every_policy() {
    for alloc in [AllocPolicy::Ext4Like, AllocPolicy::LogStructured] {
        let p = Preset::load("x25e").unwrap().with_capacity(1 << 30);
        let flash::AnyDevice::Ssd(ssd) = p.build().unwrap() else {
            unreachable!()
        };
        let mut cfg = FsConfig::new(512 << 20);
        cfg.alloc = alloc;
        cfg.discard = DiscardMode::VTrim;
        let mut fs = SimFs::mkfs(Timed::new(*ssd as Ssd), cfg).unwrap();
        let f = fs.create("f").unwrap();
        fs.write_at(f, 0, 8 << 20).unwrap();
        fs.sync().unwrap();
        fs.unlink("f").unwrap();
        use flash::Device;
        assert_eq!(fs.device().dev.stats().trimmed_pages, 2048, "{alloc:?}");
    }
}

#[test]
fn filling_the_log_to_the_last_block_is_a_clear_error_and_leaves_no_orphan_blocks() {
    // Blocks an allocation takes have no owner until it returns; cleaning that the same
    // allocation starts must not pick their segment as its victim.
    let mut fs = lfs_recorder(48 << 20, DiscardMode::None);
    let (a, b) = (fs.create("a").unwrap(), fs.create("b").unwrap());
    let mut at = 0u64;
    let err = loop {
        let r = fs
            .write_at(a, at, 1 << 20)
            .and_then(|_| fs.write_at(b, 0, 256 << 10));
        match r {
            Ok(_) => at += 1 << 20,
            Err(e) => break e,
        }
        assert!(at < 1 << 30, "48 MiB took a GiB");
    };
    assert!(matches!(err, simfs::SimfsError::NoSpace { .. }), "{err:?}");
    fs.check_invariants().unwrap();
    fs.unlink("a").unwrap();
    fs.sync().unwrap();
    fs.write_at(b, 0, 16 << 20).unwrap();
    fs.check_invariants().unwrap();
}
