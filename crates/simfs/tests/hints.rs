//! Write-life hints: each file's data writes carry the placement handle its hint maps to,
//! metadata the handles of its hints, cleaning's copies their owner's; without placement
//! every write is on handle 0 and the requests are those of a file system without hints.

use flash::{Device, FdpConfig, Op, Preset};
use simfs::fs::{AllocPolicy, BLOCK};
use simfs::{FsConfig, HintPlacement, Recorder, SimFs, Timed, WriteHint};

fn recorder_fs(alloc: AllocPolicy, placement: Option<HintPlacement>) -> SimFs<Recorder> {
    let size = 128u64 << 20;
    let mut cfg = FsConfig::new(size);
    cfg.alloc = alloc;
    cfg.placement = placement;
    SimFs::mkfs(Recorder::new(size + (1 << 20)), cfg).unwrap()
}

/// Two files with different hints, written interleaved, one rewritten; then a sync.
fn workload<D: simfs::BlockDev>(fs: &mut SimFs<D>, hints: bool) {
    let hot = fs.create("hot").unwrap();
    let cold = fs.create("cold").unwrap();
    if hints {
        fs.set_write_hint(hot, WriteHint::Short).unwrap();
        fs.set_write_hint(cold, WriteHint::Extreme).unwrap();
    }
    for i in 0..32u64 {
        fs.write_at(hot, i * 65536, 65536).unwrap();
        fs.write_at(cold, i * 65536, 65536).unwrap();
    }
    for _ in 0..3 {
        fs.write_at(hot, 0, 32 * 65536).unwrap();
    }
    fs.sync().unwrap();
}

/// Every request's (op, offset, length, handle).
fn requests(fs: &SimFs<Recorder>) -> Vec<(Op, u64, u64, u16)> {
    fs.device()
        .requests
        .iter()
        .map(|r| (r.cmd.op, r.cmd.offset_bytes, r.cmd.len_bytes, r.cmd.handle))
        .collect()
}

#[test]
fn linux_stream_map_follows_the_kernel() {
    let p = HintPlacement::linux_streams(5);
    let handles: Vec<u16> = WriteHint::ALL.iter().map(|&h| p.handle(h)).collect();
    assert_eq!(handles, [0, 0, 1, 2, 3, 4]);
    // Fewer handles: the streams past the last fold onto it.
    let p = HintPlacement::linux_streams(3);
    let handles: Vec<u16> = WriteHint::ALL.iter().map(|&h| p.handle(h)).collect();
    assert_eq!(handles, [0, 0, 1, 2, 2, 2]);
    assert!(WriteHint::ALL
        .iter()
        .all(|&h| HintPlacement::linux_streams(1).handle(h) == 0));
    assert_eq!("short".parse::<WriteHint>().unwrap(), WriteHint::Short);
    assert_eq!("5".parse::<WriteHint>().unwrap(), WriteHint::Extreme);
    let e = "6".parse::<WriteHint>().unwrap_err();
    assert!(e.contains("0-5"), "{e}");
    assert!("warm".parse::<WriteHint>().is_err());
}

#[test]
fn without_placement_hints_change_no_request() {
    for alloc in [AllocPolicy::Ext4Like, AllocPolicy::LogStructured] {
        let mut plain = recorder_fs(alloc, None);
        workload(&mut plain, false);
        let mut hinted = recorder_fs(alloc, None);
        workload(&mut hinted, true);
        assert_eq!(requests(&plain), requests(&hinted), "{alloc}");
        assert!(requests(&hinted).iter().all(|r| r.3 == 0));
        // Placement on, but no hints set and a one-handle map: the same requests too.
        let mut one = recorder_fs(alloc, Some(HintPlacement::linux_streams(1)));
        workload(&mut one, true);
        assert_eq!(requests(&plain), requests(&one), "{alloc}, one handle");
    }
}

#[test]
fn writes_carry_their_files_handles() {
    for alloc in [AllocPolicy::Ext4Like, AllocPolicy::LogStructured] {
        let mut fs = recorder_fs(alloc, Some(HintPlacement::linux_streams(5)));
        let start = fs.device().requests.len();
        workload(&mut fs, true);
        let hot = fs.lookup("hot").unwrap();
        let cold = fs.lookup("cold").unwrap();
        let blocks_of = |ino| -> Vec<u64> {
            fs.extents(ino)
                .unwrap()
                .iter()
                .flat_map(|e| e.start_block..e.start_block + e.len as u64)
                .collect()
        };
        let (hot_blocks, cold_blocks) = (blocks_of(hot), blocks_of(cold));
        let mut tree = fs.tree_blocks(hot).unwrap();
        tree.extend(fs.tree_blocks(cold).unwrap());
        let (mut hot_seen, mut cold_seen, mut meta_seen) = (0, 0, 0);
        for r in &fs.device().requests[start..] {
            if r.cmd.op != Op::Write {
                continue;
            }
            let first = r.cmd.offset_bytes / BLOCK;
            let blocks = first..first + r.cmd.len_bytes / BLOCK;
            if matches!(r.cmd.payload, flash::Payload::Data(_)) && tree.contains(&first) {
                // Extent-tree blocks: NOT_SET, stream 0.
                assert_eq!(r.cmd.handle, 0, "tree block {first}");
            } else if matches!(r.cmd.payload, flash::Payload::Data(_)) {
                // Inode tables and bitmaps: MEDIUM, stream 2.
                meta_seen += 1;
                assert_eq!(r.cmd.handle, 2, "metadata at block {first}");
            } else if blocks.clone().all(|b| hot_blocks.contains(&b)) {
                hot_seen += 1;
                assert_eq!(r.cmd.handle, 1, "{alloc}: hot data at block {first}");
            } else if blocks.clone().all(|b| cold_blocks.contains(&b)) {
                cold_seen += 1;
                assert_eq!(r.cmd.handle, 4, "{alloc}: cold data at block {first}");
            } else {
                // Overwritten hot data (ext4-like rewrites in place; the log moved it).
                assert_eq!(r.cmd.handle, 1, "{alloc}: data at block {first}");
            }
        }
        assert!(hot_seen > 0 && cold_seen > 0 && meta_seen > 0, "{alloc}");
        fs.check_invariants().unwrap();
    }
}

#[test]
fn cleaning_copies_keep_their_owners_handles() {
    // A small log: rewrites force cleaning, which moves cold blocks among hot ones.
    let size = 32u64 << 20;
    let mut cfg = FsConfig::new(size);
    cfg.alloc = AllocPolicy::LogStructured;
    cfg.placement = Some(HintPlacement::linux_streams(5));
    let mut fs = SimFs::mkfs(Recorder::new(size + (1 << 20)), cfg).unwrap();
    let hot = fs.create("hot").unwrap();
    let cold = fs.create("cold").unwrap();
    fs.set_write_hint(hot, WriteHint::Short).unwrap();
    fs.set_write_hint(cold, WriteHint::Extreme).unwrap();
    // Segments half cold, half hot.
    for i in 0..2048u64 {
        fs.write_at(cold, i * BLOCK, BLOCK).unwrap();
        fs.write_at(hot, i * BLOCK, BLOCK).unwrap();
    }
    let start = fs.device().requests.len();
    for round in 0..4u64 {
        for i in 0..2048u64 {
            fs.write_at(hot, ((i * 7 + round) % 2048) * BLOCK, BLOCK)
                .unwrap();
        }
    }
    assert!(fs.stats().cleaned_blocks > 0, "the log cleaned");
    let cold_blocks: Vec<u64> = fs
        .extents(cold)
        .unwrap()
        .iter()
        .flat_map(|e| e.start_block..e.start_block + e.len as u64)
        .collect();
    // The cold file is never written after `start`: each of its blocks written since was
    // last written by cleaning, on the cold file's handle.
    let mut last_handle = std::collections::HashMap::new();
    for r in &fs.device().requests[start..] {
        if r.cmd.op == Op::Write {
            let first = r.cmd.offset_bytes / BLOCK;
            for b in first..first + r.cmd.len_bytes / BLOCK {
                last_handle.insert(b, r.cmd.handle);
            }
        }
    }
    let mut moved = 0;
    for b in &cold_blocks {
        if let Some(&h) = last_handle.get(b) {
            moved += 1;
            assert_eq!(h, 4, "cold copy at block {b}");
        }
    }
    assert!(moved > 0, "cleaning moved cold blocks");
    fs.check_invariants().unwrap();
}

#[test]
fn an_fdp_drive_keeps_the_hinted_files_apart() {
    let mut preset = Preset::load("nvme").unwrap().with_capacity(4 << 30);
    preset.ssd_config_mut().unwrap().fdp = Some(Box::new(FdpConfig::new(5)));
    let dev = preset.build().unwrap();
    let mut cfg = FsConfig::for_device(dev.logical_bytes());
    cfg.placement = Some(HintPlacement::linux_streams(5));
    let mut fs = SimFs::mkfs(Timed::new(dev), cfg).unwrap();
    workload(&mut fs, true);
    let st = fs.device().dev.stats();
    let fdp = st.fdp.expect("an FDP drive");
    let host = |h: usize| fdp.per_handle[h].host_bytes_written;
    assert_eq!(host(1), 4 * 32 * 65536, "hot data, written 4 times");
    assert_eq!(host(4), 32 * 65536, "cold data");
    assert!(host(2) > 0, "metadata on MEDIUM's handle");
    assert_eq!(host(3), 0, "no LONG hint");
    // A hint needs an FDP drive with the handles: a conventional drive refuses handle 1.
    let dev = Preset::load("nvme")
        .unwrap()
        .with_capacity(1 << 30)
        .build()
        .unwrap();
    let mut cfg = FsConfig::for_device(dev.logical_bytes());
    cfg.placement = Some(HintPlacement::linux_streams(5));
    // (mkfs writes the metadata, on MEDIUM's handle 2.)
    let e = SimFs::mkfs(Timed::new(dev), cfg).err().unwrap().to_string();
    assert!(e.contains("handle 2") && e.contains("no FDP"), "{e}");
}
