//! simfs on a simulated SSD: every discard mode really invalidates the deleted file's
//! pages in the FTL and nothing else; fTrim walks the metadata simfs wrote and fails
//! cleanly when it is broken; allocation fragments concurrent writers unless fallocate.

use flash::{Device, Preset, Ssd};
use simfs::fs::BLOCK;
use simfs::{BlockDev, DiscardKernel, DiscardMode, FsConfig, SimFs, SimfsError, Timed};

fn ssd() -> Ssd {
    let p = Preset::load("x25e").unwrap().with_capacity(1 << 30);
    match p.build().unwrap() {
        flash::AnyDevice::Ssd(s) => *s,
        _ => unreachable!("x25e is an SSD"),
    }
}

fn fs(mode: DiscardMode) -> SimFs<Timed<Ssd>> {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.discard = mode;
    SimFs::mkfs(Timed::new(ssd()), cfg).unwrap()
}

/// Blocks of a file: every physical block of its data and extent tree.
fn blocks_of(fs: &SimFs<Timed<Ssd>>, name: &str) -> Vec<u64> {
    let ino = fs.lookup(name).unwrap();
    let mut v: Vec<u64> = fs
        .extents(ino)
        .unwrap()
        .iter()
        .flat_map(|e| e.start_block..e.start_block + e.len as u64)
        .collect();
    v.extend(fs.tree_blocks(ino).unwrap());
    v
}

fn mapped(fs: &SimFs<Timed<Ssd>>, b: u64) -> bool {
    fs.device().dev.block_content(b).is_some()
}

#[test]
fn every_discard_mode_invalidates_exactly_the_deleted_file() {
    for mode in [
        DiscardMode::None,
        DiscardMode::Online,
        DiscardMode::VTrim,
        DiscardMode::FTrim,
        DiscardMode::Deferred,
    ] {
        let mut fs = fs(mode);
        fs.create_fragmented("victim", 10 << 20, 160).unwrap();
        let keep = fs.create("keep").unwrap();
        fs.write_at(keep, 0, 4 << 20).unwrap();
        fs.sync().unwrap();
        let victim_blocks = blocks_of(&fs, "victim");
        let keep_blocks = blocks_of(&fs, "keep");
        assert_eq!(fs.extents(fs.lookup("victim").unwrap()).unwrap().len(), 160);
        assert_eq!(
            victim_blocks.len(),
            2560 + 1,
            "10 MB of data plus one extent leaf block"
        );
        assert!(victim_blocks.iter().all(|&b| mapped(&fs, b)));

        let trimmed_before = fs.device().dev.stats().trimmed_pages;
        fs.unlink("victim").unwrap();
        if mode == DiscardMode::Deferred {
            assert!(
                victim_blocks.iter().all(|&b| mapped(&fs, b)),
                "deferred: nothing sent yet"
            );
            assert!(fs.fstrim().unwrap() >= 1);
        }
        let gone = victim_blocks.iter().filter(|&&b| !mapped(&fs, b)).count();
        if mode == DiscardMode::None {
            assert_eq!(
                gone, 0,
                "{mode}: no discard, the drive still holds the data"
            );
        } else {
            assert_eq!(
                gone,
                victim_blocks.len(),
                "{mode}: every block of the file is invalid in the FTL"
            );
            let trimmed = fs.device().dev.stats().trimmed_pages - trimmed_before;
            assert_eq!(
                trimmed,
                victim_blocks.len() as u64,
                "{mode}: the FTL invalidated exactly the file's pages"
            );
        }
        assert!(
            keep_blocks.iter().all(|&b| mapped(&fs, b)),
            "{mode}: another file's data is untouched"
        );
        // Reading a trimmed block is defined: no flash read, the drive returns zeros.
        let t0 = fs.device().now_ns();
        let b = victim_blocks[0];
        fs.device_mut()
            .io(flash::Command::read(b * BLOCK, BLOCK))
            .unwrap();
        assert!(fs.device().now_ns() > t0);
        fs.device().dev.check_invariants().unwrap();
        let s = fs.stats();
        match mode {
            DiscardMode::Online => assert_eq!(
                s.trim_commands, 161,
                "one TRIM per extent and one for the extent leaf block"
            ),
            DiscardMode::VTrim => assert_eq!(s.vtrim_commands, 1),
            DiscardMode::FTrim => assert_eq!(s.ftrim_commands, 1),
            _ => {}
        }
    }
}

#[test]
fn ftrim_reads_the_metadata_simfs_wrote() {
    let mut fs = fs(DiscardMode::FTrim);
    fs.create_fragmented("f", 10 << 20, 160).unwrap();
    fs.sync().unwrap();
    fs.unlink("f").unwrap();
    // Superblock, group descriptor block, inode-table block and the extent leaf.
    assert_eq!(fs.device().dev.stats().ftrim_metadata_reads, 4);
}

#[test]
fn ftrim_fails_cleanly_on_broken_metadata() {
    let mut fs = fs(DiscardMode::FTrim);
    let ino = fs.create_fragmented("f", 1 << 20, 40).unwrap();
    fs.sync().unwrap();
    // Overwrite the file's extent leaf block with zeros behind the file system's back.
    let leaf = fs.tree_blocks(ino).unwrap()[0];
    fs.device_mut()
        .io(flash::Command::write_data(
            leaf * BLOCK,
            vec![0u8; 4096].into(),
        ))
        .unwrap();
    let before = blocks_of(&fs, "f");
    let err = fs.unlink("f").unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, SimfsError::Device(flash::FlashError::FTrim { .. })),
        "{msg}"
    );
    assert!(
        msg.contains("magic") && msg.contains(&format!("extent block {leaf}")),
        "{msg}"
    );
    // Nothing was lost: the file is still there and its data still mapped.
    assert_eq!(fs.lookup("f").unwrap(), ino);
    assert!(before
        .iter()
        .filter(|&&b| b != leaf)
        .all(|&b| mapped(&fs, b)));
}

#[test]
fn syncing_one_file_while_a_neighbour_has_an_unwritten_extent_tree() {
    // Files a and b share an inode-table block. a gains > 4 extents (it needs a tree
    // block it does not have yet); b's fsync writes that inode-table block, which must
    // carry a's last written root (this panicked: "enough tree blocks"). fTrim then
    // deletes both correctly.
    let mut fs = fs(DiscardMode::FTrim);
    let a = fs.create("a").unwrap();
    let b = fs.create("b").unwrap();
    fs.sync().unwrap();
    for i in 0..16u64 {
        fs.write_at(a, i * 65536, 65536).unwrap();
        fs.write_at(b, i * 65536, 65536).unwrap();
    }
    assert!(fs.extents(a).unwrap().len() > 4);
    fs.sync_file(b).unwrap();
    fs.sync().unwrap();
    let (blocks_a, blocks_b) = (blocks_of(&fs, "a"), blocks_of(&fs, "b"));
    fs.unlink("a").unwrap();
    assert!(blocks_a.iter().all(|&x| !mapped(&fs, x)));
    assert!(blocks_b.iter().all(|&x| mapped(&fs, x)));
    fs.unlink("b").unwrap();
    assert!(blocks_b.iter().all(|&x| !mapped(&fs, x)));
}

#[test]
fn concurrent_writers_fragment_unless_fallocated() {
    for prealloc in [false, true] {
        let mut fs = fs(DiscardMode::None);
        let a = fs.create("a").unwrap();
        let b = fs.create("b").unwrap();
        if prealloc {
            fs.fallocate(a, 0, 8 << 20).unwrap();
            fs.fallocate(b, 0, 8 << 20).unwrap();
        }
        for i in 0..128u64 {
            fs.write_at(a, i * 65536, 65536).unwrap();
            fs.write_at(b, i * 65536, 65536).unwrap();
        }
        let (ea, eb) = (fs.extents(a).unwrap().len(), fs.extents(b).unwrap().len());
        if prealloc {
            assert_eq!((ea, eb), (1, 1));
        } else {
            assert!(
                ea >= 100 && eb >= 100,
                "interleaved writers: {ea} and {eb} extents"
            );
        }
        assert_eq!(fs.size_of(a).unwrap(), 8 << 20);
    }
}

#[test]
fn full_disk_and_bad_names_are_clear_errors() {
    let mut fs = fs(DiscardMode::None);
    let f = fs.create("big").unwrap();
    let err = fs.write_at(f, 0, 1 << 30).unwrap_err();
    assert!(matches!(err, SimfsError::NoSpace { .. }), "{err}");
    assert!(fs.create("big").unwrap_err().to_string().contains("exists"));
    assert!(fs.create("a/b").is_err());
    assert!(matches!(fs.unlink("nope"), Err(SimfsError::NotFound(_))));
    let cfg = FsConfig::new(2 << 30);
    let err = SimFs::mkfs(Timed::new(ssd()), cfg).err().unwrap();
    assert!(err.to_string().contains("does not fit"), "{err}");
    // Room in all, but no single run (groups of 128 MiB each start with metadata): the
    // error says so rather than "no space left".
    let mut fresh = crate::fs(DiscardMode::None);
    let err = fresh.create_fragmented("one", 256 << 20, 1).unwrap_err();
    assert!(
        matches!(err, SimfsError::NoContiguousRun { longest_free_run, .. } if longest_free_run < 65536),
        "{err}"
    );
    assert!(err.to_string().contains("no contiguous run"), "{err}");
}

#[test]
fn tiny_file_systems_are_clear_errors_never_panics() {
    // 0 bytes (no block at all) panicked in mkfs; every size up to a few groups' worth of
    // metadata is either a working file system or a clear error. A device too small for a
    // block gives a 0-byte file system (it underflowed to 18 EB once), which mkfs refuses.
    assert_eq!(FsConfig::for_device(1000).size_bytes, 0);
    assert_eq!(FsConfig::for_device(0).size_bytes, 0);
    for size in [
        0u64,
        1,
        511,
        4095,
        4096,
        8192,
        12 << 10,
        64 << 10,
        1 << 20,
        4 << 20,
    ] {
        match SimFs::mkfs(Timed::new(ssd()), FsConfig::new(size)) {
            Ok(mut fs) => {
                let f = fs.create("x").unwrap();
                let _ = fs.write_at(f, 0, 4096);
            }
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("larger size"), "{size} bytes: {e}");
            }
        }
    }
}

#[test]
fn vtrim_splits_beyond_511_ranges() {
    let mut fs = fs(DiscardMode::VTrim);
    fs.create_fragmented("f", 4 << 20, 1000).unwrap();
    fs.sync().unwrap();
    fs.unlink("f").unwrap();
    assert_eq!(fs.stats().vtrim_commands, 2);
}

#[test]
fn preallocation_windows_give_interleaved_writers_few_growing_extents() {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.prealloc = true;
    let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
    let a = fs.create("a").unwrap();
    let b = fs.create("b").unwrap();
    for i in 0..1024u64 {
        fs.write_at(a, i * 8192, 8192).unwrap();
        fs.write_at(b, i * 8192, 8192).unwrap();
    }
    // 8 MiB per file in windows of 64 KiB, 128 KiB, ... 8 MiB: about a dozen extents.
    let (ea, eb) = (fs.extents(a).unwrap().len(), fs.extents(b).unwrap().len());
    assert!(ea <= 16 && eb <= 16, "{ea} {eb} extents");
    fs.check_invariants().unwrap();
    fs.unlink("a").unwrap();
    fs.check_invariants().unwrap();
}

#[test]
fn journal_discards_wait_for_the_commit_merge_and_are_not_reused_before() {
    // Two files written back to back, then deleted: with ext4's journal-time discard the
    // freed extents are discarded after the commit, merged into one TRIM; the blocks are
    // not handed out again before that commit.
    let count = |mode: DiscardMode| {
        let mut fs = fs(mode);
        let (a, b) = (fs.create("a").unwrap(), fs.create("b").unwrap());
        fs.fallocate(a, 0, 1 << 20).unwrap();
        fs.fallocate(b, 0, 1 << 20).unwrap();
        fs.write_at(a, 0, 1 << 20).unwrap();
        fs.write_at(b, 0, 1 << 20).unwrap();
        fs.sync().unwrap();
        let freed: Vec<u64> = blocks_of(&fs, "a")
            .into_iter()
            .chain(blocks_of(&fs, "b"))
            .collect();
        let free_before = fs.free_bytes();
        fs.unlink("a").unwrap();
        fs.unlink("b").unwrap();
        let trims_before_commit = fs.stats().trim_commands;
        let held = fs.free_bytes() == free_before;
        // A new file written now must not land on the freed blocks.
        let c = fs.create("c").unwrap();
        fs.write_at(c, 0, 1 << 20).unwrap();
        let reused = blocks_of(&fs, "c").iter().any(|b| freed.contains(b));
        fs.sync().unwrap();
        fs.check_invariants().unwrap();
        let unmapped = freed.iter().all(|&b| !mapped(&fs, b));
        (
            trims_before_commit,
            held,
            reused,
            fs.stats().trim_commands,
            unmapped,
        )
    };
    let (before, held, reused, trims, unmapped) = count(DiscardMode::Journal);
    assert_eq!(before, 0, "nothing is discarded before the commit");
    assert!(held && !reused, "freed blocks wait for the commit");
    assert_eq!(trims, 1, "adjacent freed extents merge into one TRIM");
    assert!(unmapped, "the drive dropped every freed block");
    let (before, _, _, trims, _) = count(DiscardMode::Online);
    assert!(
        before >= 2 && trims == before,
        "online: one TRIM per extent at unlink"
    );
}

#[test]
fn a_full_file_system_commits_to_get_back_the_blocks_freed_in_the_running_transaction() {
    // Journal discard holds freed blocks until the next commit; an allocation that only
    // fits with them forces that commit (ext4_should_retry_alloc) instead of failing.
    let mut fs = fs(DiscardMode::Journal);
    let free = fs.free_bytes();
    let big = free / 4096 * 4096 * 3 / 4;
    let a = fs.create("a").unwrap();
    fs.fallocate(a, 0, big).unwrap();
    fs.unlink("a").unwrap();
    assert_eq!(fs.stats().trim_commands, 0, "held until a commit");
    let b = fs.create("b").unwrap();
    fs.fallocate(b, 0, big).unwrap();
    assert!(
        fs.stats().trim_commands >= 1,
        "the forced commit discarded a's blocks"
    );
    fs.check_invariants().unwrap();
    // Without anything freed to wait for, a full file system is still an error.
    let c = fs.create("c").unwrap();
    assert!(matches!(
        fs.fallocate(c, 0, big),
        Err(SimfsError::NoSpace { .. })
    ));
}

#[test]
fn since_linux_6_8_a_journal_discard_runs_to_the_end_of_the_free_space() {
    // Two fallocated files side by side at the start of a group with free space after.
    let run = |to_end: bool, delete: &[&str]| {
        let mut cfg = FsConfig::new(512 << 20);
        cfg.discard = DiscardMode::Journal;
        cfg.kernel = if to_end {
            DiscardKernel::Linux6_8
        } else {
            DiscardKernel::Linux3_10
        };
        let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
        for name in ["a", "b"] {
            let f = fs.create(name).unwrap();
            fs.fallocate(f, 0, 1 << 20).unwrap();
        }
        fs.sync().unwrap();
        let (a, b) = (blocks_of(&fs, "a"), blocks_of(&fs, "b"));
        let before = fs.stats().discarded_bytes;
        for name in delete {
            fs.unlink(name).unwrap();
        }
        fs.sync().unwrap();
        fs.finish_discards().unwrap();
        fs.check_invariants().unwrap();
        (fs.stats().discarded_bytes - before, a, b)
    };
    // Up to 6.7: exactly what was freed.
    let (bytes, _, _) = run(false, &["b"]);
    assert_eq!(bytes, 1 << 20);
    // Since 6.8: b's blocks are followed by free space to the end of the group, and the
    // TRIM covers all of it.
    let (bytes, _, b) = run(true, &["b"]);
    let group_end = (b[0] / 32768 + 1) * 32768;
    assert_eq!(bytes, (group_end - b[0]) * BLOCK, "to the end of the group");
    // a is followed by b (still in use): exactly a.
    let (bytes, _, _) = run(true, &["a"]);
    assert_eq!(bytes, 1 << 20);
}

#[test]
fn small_files_share_the_locality_group_window_and_large_ones_get_their_own() {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.prealloc = true;
    let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
    let (a, b) = (fs.create("a").unwrap(), fs.create("b").unwrap());
    // Two small files appended in turn, 8 KiB at a time, up to 64 KiB each: their blocks
    // alternate within one shared window.
    for i in 0..8u64 {
        fs.write_at(a, i * 8192, 8192).unwrap();
        fs.write_at(b, i * 8192, 8192).unwrap();
    }
    let (ea, eb) = (fs.extents(a).unwrap(), fs.extents(b).unwrap());
    assert_eq!(ea.len(), 8, "one 2-block extent per append: {ea:?}");
    assert_eq!(
        eb[0].start_block,
        ea[0].start_block + 2,
        "b's first right after a's"
    );
    // Grown past 16 blocks, a file takes a window of its own: the next appends are
    // contiguous however the two interleave.
    for i in 8..24u64 {
        fs.write_at(a, i * 8192, 8192).unwrap();
        fs.write_at(b, i * 8192, 8192).unwrap();
    }
    let ea = fs.extents(a).unwrap();
    assert!(
        ea.len() <= 8 + 3,
        "a few windows after the small part: {ea:?}"
    );
    fs.check_invariants().unwrap();
}

#[test]
fn files_nobody_writes_to_get_exactly_their_blocks_and_lose_their_window_at_close() {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.prealloc = true;
    cfg.kernel = DiscardKernel::Linux6_17;
    let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg.clone()).unwrap();
    let (open, closed) = (fs.create("open").unwrap(), fs.create("closed").unwrap());
    // Both 20 blocks in the page cache, written back whole: the open file gets a window
    // to its size bucket's end (32 blocks), the closed one exactly its 20 blocks
    // (ext4_mb_group_or_file: EXT4_MB_HINT_NOPREALLOC).
    let free0 = fs.free_bytes() / BLOCK;
    fs.set_host_view(open, 20 * BLOCK, true, true).unwrap();
    fs.write_at(open, 0, 20 * BLOCK).unwrap();
    let free1 = fs.free_bytes() / BLOCK;
    fs.set_host_view(closed, 20 * BLOCK, false, true).unwrap();
    fs.write_at(closed, 0, 20 * BLOCK).unwrap();
    let free2 = fs.free_bytes() / BLOCK;
    assert!(
        free0 - free1 >= 32,
        "open: a window held: {}",
        free0 - free1
    );
    assert_eq!(free1 - free2, 20, "closed: exactly its blocks");
    // A closed file written back only in part (i_size runs past the request) keeps its
    // window: the kernel skips it only for a request that runs to i_size.
    let part = fs.create("part").unwrap();
    fs.set_host_view(part, 40 * BLOCK, false, true).unwrap();
    fs.write_at(part, 0, 20 * BLOCK).unwrap();
    assert!(
        free2 - fs.free_bytes() / BLOCK > 20,
        "a partial writeback still preallocates"
    );
    // The last writer's close with nothing left to allocate gives the window back
    // (ext4_release_file); with dirty data left, it stays.
    let before = fs.free_bytes() / BLOCK;
    fs.set_host_view(open, 20 * BLOCK, false, false).unwrap();
    assert_eq!(
        fs.free_bytes() / BLOCK - before,
        12,
        "32 - 20 blocks returned"
    );
    let kept = fs.free_bytes();
    fs.set_host_view(part, 40 * BLOCK, false, true).unwrap();
    assert_eq!(fs.free_bytes(), kept, "dirty pages wait: the window stays");
    // Since 6.0, small files (at most 16 blocks by i_size) share the locality-group
    // window open or closed: two closed ones side by side in it.
    let (s1, s2) = (fs.create("s1").unwrap(), fs.create("s2").unwrap());
    for s in [s1, s2] {
        fs.set_host_view(s, 2 * BLOCK, false, true).unwrap();
        fs.write_at(s, 0, 2 * BLOCK).unwrap();
    }
    let (e1, e2) = (fs.extents(s1).unwrap(), fs.extents(s2).unwrap());
    assert_eq!(e2[0].start_block, e1[0].start_block + 2, "{e1:?} {e2:?}");
    fs.check_invariants().unwrap();
    // Before (paper 000's 3.10), a closed small file got no window either: exactly its
    // blocks, and no locality-group window is taken.
    cfg.kernel = DiscardKernel::Linux3_10;
    let mut old = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
    let free0 = old.free_bytes();
    for name in ["s1", "s2"] {
        let s = old.create(name).unwrap();
        old.set_host_view(s, 2 * BLOCK, false, true).unwrap();
        old.write_at(s, 0, 2 * BLOCK).unwrap();
    }
    assert!(
        free0 - old.free_bytes() < 16 * BLOCK,
        "no 512-block window taken"
    );
    old.check_invariants().unwrap();
}

/// A file system on the SSD with journal discards as `kernel` does them, and `n` files of
/// `blocks` blocks each, fallocated side by side and committed.
fn side_by_side(
    kernel: DiscardKernel,
    n: usize,
    blocks: u64,
) -> (SimFs<Timed<flash::Ssd>>, Vec<String>) {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.discard = DiscardMode::Journal;
    cfg.kernel = kernel;
    let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
    let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
    for name in &names {
        let f = fs.create(name).unwrap();
        fs.fallocate(f, 0, blocks * BLOCK).unwrap();
    }
    fs.sync().unwrap();
    (fs, names)
}

#[test]
fn since_linux_5_15_blocks_allocated_before_the_worker_reaches_them_are_not_discarded() {
    // Two runs freed in one transaction (f0 and f2, f1 live between them). 3.10 discards
    // both at the commit, before anything can reuse them. From 5.15 the worker takes one
    // run at a time after the commit (f0's first); f1, appended meanwhile, continues
    // into f2's blocks, and those are left out of f2's TRIM.
    for kernel in [DiscardKernel::Linux3_10, DiscardKernel::Linux5_15] {
        let (mut fs, _) = side_by_side(kernel, 3, 256);
        let freed: Vec<u64> = ["f0", "f2"]
            .iter()
            .flat_map(|n| blocks_of(&fs, n))
            .collect();
        for name in ["f0", "f2"] {
            fs.unlink(name).unwrap();
        }
        let before = fs.stats().discarded_bytes;
        fs.sync().unwrap();
        // f1 grows at once, at the host's clock, 8 KiB at a time.
        let f1 = fs.lookup("f1").unwrap();
        for i in 0..16 {
            fs.write_at(f1, (256 + 2 * i) * BLOCK, 8192).unwrap();
        }
        let reused = blocks_of(&fs, "f1")
            .iter()
            .filter(|b| freed.contains(b))
            .count() as u64;
        fs.finish_discards().unwrap();
        fs.check_invariants().unwrap();
        let discarded = (fs.stats().discarded_bytes - before) / BLOCK;
        match kernel {
            DiscardKernel::Linux3_10 => assert_eq!(discarded, 512, "both runs, whole"),
            _ => {
                assert!(
                    reused > 0,
                    "the new file takes freed blocks before their TRIM"
                );
                assert_eq!(discarded, 512 - reused, "all but the reused blocks");
            }
        }
    }
}

#[test]
fn the_discard_worker_trims_one_run_at_a_time_and_keeps_its_blocks_until_done() {
    // Three files with a live one between each: three runs, so three TRIMs, issued one
    // after another (each after the previous completes), in the background.
    let (mut fs, _) = side_by_side(DiscardKernel::Linux5_15, 5, 256);
    fs.device_mut().record = true;
    for name in ["f0", "f2", "f4"] {
        fs.unlink(name).unwrap();
    }
    let now = fs.device().now_ns();
    fs.sync().unwrap();
    assert_eq!(fs.device().now_ns(), now.max(fs.device().now_ns()));
    fs.finish_discards().unwrap();
    fs.check_invariants().unwrap();
    let trims: Vec<&trace::Request> = fs
        .device()
        .requests
        .iter()
        .filter(|r| r.cmd.op == flash::Op::Trim)
        .collect();
    assert_eq!(trims.len(), 3, "one per run");
    assert!(
        trims.windows(2).all(|w| w[1].at_ns > w[0].at_ns),
        "each TRIM after the one before: {:?}",
        trims.iter().map(|r| r.at_ns).collect::<Vec<_>>()
    );
}

#[test]
fn since_linux_6_17_adjacent_freed_extents_can_stay_apart() {
    // Files side by side, freed in the order 4, 0, 7, 3: f3 is adjacent to f4, but its
    // tree search goes left from f4 and ends at f0, which it does not touch. 6.8 merges
    // f3 with f4 (three entries, three discards); 6.17 keeps all four.
    let order = [4usize, 0, 7, 3];
    let mut counts = Vec::new();
    for kernel in [DiscardKernel::Linux6_8, DiscardKernel::Linux6_17] {
        let (mut fs, names) = side_by_side(kernel, 8, 16);
        let before = fs.stats().trim_commands;
        for &i in &order {
            fs.unlink(&names[i]).unwrap();
        }
        fs.sync().unwrap();
        fs.finish_discards().unwrap();
        fs.check_invariants().unwrap();
        counts.push(fs.stats().trim_commands - before);
    }
    assert_eq!(counts, vec![3, 4], "6.8 and 6.17");
}

#[test]
fn a_delete_counts_each_extent_and_tree_block_it_frees_in_every_discard_mode() {
    // ext4's `ext4:ext4_mballoc_free` fires once per extent (a block group's piece) a delete
    // frees, tree blocks included, whatever the mount's discard option: the count
    // tempfiles-pg sets beside the real kernel's.
    for mode in [
        DiscardMode::None,
        DiscardMode::Online,
        DiscardMode::Deferred,
        DiscardMode::Journal,
    ] {
        let mut fs = fs(mode);
        fs.create_fragmented("victim", 10 << 20, 160).unwrap();
        let keep = fs.create("keep").unwrap();
        fs.write_at(keep, 0, 4 << 20).unwrap();
        fs.sync().unwrap();
        assert_eq!(fs.stats().freed_extents, 0, "{mode}: nothing deleted yet");
        fs.unlink("victim").unwrap();
        assert_eq!(
            fs.stats().freed_extents,
            160 + 1,
            "{mode}: 160 extents in one group and one extent leaf block"
        );
    }
}

#[test]
fn a_delete_before_any_commit_counts_the_tree_blocks_ext4_would_have() {
    // ext4 allocates an extent leaf when the 5th extent goes in (at writeback,
    // ext4_ext_create_new_leaf), not at the next commit, and ext4_ext_rm_idx frees it at
    // the delete: 160 + 1 frees whether or not a commit came between (a real 162-extent
    // file removed before any commit gave 163 ext4_mballoc_free events).
    for mode in [DiscardMode::None, DiscardMode::Journal] {
        let mut fs = fs(mode);
        fs.create_fragmented("victim", 10 << 20, 160).unwrap();
        fs.unlink("victim").unwrap();
        assert_eq!(
            fs.stats().freed_extents,
            161,
            "{mode}: 160 extents + 1 leaf"
        );
    }
    // A tree grown past one leaf since its last commit frees the two leaves its extents
    // need (their index fits in the inode).
    let mut fs = fs(DiscardMode::None);
    let ino = fs.create_fragmented("victim", 4 << 20, 300).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.tree_blocks(ino).unwrap().len(), 1);
    let keep = fs.create("keep").unwrap();
    let mut off = 4u64 << 20;
    for _ in 0..100 {
        // Interleaved with another file's writes, so the new extents do not merge.
        fs.write_at(ino, off, 4096).unwrap();
        fs.write_at(keep, off, 4096).unwrap();
        off += 4096;
    }
    let n = fs.extents(ino).unwrap().len() as u64;
    assert!(n > 340, "{n} extents");
    fs.unlink("victim").unwrap();
    assert_eq!(
        fs.stats().freed_extents,
        n + 2,
        "{n} extents and two leaves"
    );
}

#[test]
fn a_writeback_that_merges_back_to_four_extents_frees_the_tree_block_its_unwritten_extent_grew() {
    // Since 5.6 (dioread_nolock) writeback maps an unwritten extent, which cannot merge with
    // the written one before it until its I/O is done: a file holding the inode's four
    // extents grows a leaf for it (ext4_ext_grow_indepth), and the conversion, merging it
    // back into four, frees that leaf (ext4_ext_try_to_merge_up): one freed extent,
    // discarded after the commit. A real 13 MB PostgreSQL batch file on this machine's
    // kernel did this ~2.8 times before its delete. Under 3.10's rules writeback maps a
    // written extent at once: nothing grows, nothing is freed.
    for kernel in [DiscardKernel::Linux3_10, DiscardKernel::Linux6_17] {
        let mut cfg = FsConfig::new(512 << 20);
        cfg.discard = DiscardMode::Journal;
        cfg.kernel = kernel;
        let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
        let a = fs.create("a").unwrap();
        let b = fs.create("b").unwrap();
        // a's blocks interleaved with b's: four extents, the last with free space after it.
        for i in 0..4 {
            fs.write_at(a, i * BLOCK, BLOCK).unwrap();
            if i < 3 {
                fs.write_at(b, i * BLOCK, BLOCK).unwrap();
            }
        }
        assert_eq!(fs.extents(a).unwrap().len(), 4);
        fs.sync().unwrap();
        let (freed_before, discarded_before) =
            (fs.stats().freed_extents, fs.stats().discarded_bytes);
        // A writeback of two more blocks: mapped, written, converted.
        fs.map_for_writeback(a, 4 * BLOCK, 2 * BLOCK).unwrap();
        let grown = fs.tree_blocks(a).unwrap().len();
        fs.write_at(a, 4 * BLOCK, 2 * BLOCK).unwrap();
        fs.convert_unwritten(a).unwrap();
        assert_eq!(fs.extents(a).unwrap().len(), 4, "{kernel}: merged");
        assert!(fs.tree_blocks(a).unwrap().is_empty(), "{kernel}");
        fs.sync().unwrap();
        fs.finish_discards().unwrap();
        fs.check_invariants().unwrap();
        let freed = fs.stats().freed_extents - freed_before;
        let discarded = fs.stats().discarded_bytes - discarded_before;
        if kernel.writes_unwritten_extents() {
            assert_eq!(grown, 1, "{kernel}: a leaf for the unwritten fifth");
            assert_eq!(freed, 1, "{kernel}: the leaf given back");
            assert!(
                discarded >= BLOCK,
                "{kernel}: and discarded after the commit"
            );
        } else {
            assert_eq!((grown, freed, discarded), (0, 0, 0), "{kernel}");
        }

        // A direct append gets a written extent, which merges at once (ext4_iomap_alloc
        // maps unwritten only inside the file's size): no leaf.
        let freed_before = fs.stats().freed_extents;
        fs.write_at(a, 6 * BLOCK, BLOCK).unwrap();
        assert_eq!(fs.extents(a).unwrap().len(), 4, "{kernel}");
        assert!(fs.tree_blocks(a).unwrap().is_empty(), "{kernel}");
        assert_eq!(fs.stats().freed_extents, freed_before, "{kernel}");

        // A fifth extent that cannot merge (a hole before it) keeps its leaf.
        fs.map_for_writeback(a, 100 * BLOCK, 2 * BLOCK).unwrap();
        fs.write_at(a, 100 * BLOCK, 2 * BLOCK).unwrap();
        fs.convert_unwritten(a).unwrap();
        assert_eq!(fs.extents(a).unwrap().len(), 5, "{kernel}");
        fs.sync().unwrap();
        assert_eq!(fs.tree_blocks(a).unwrap().len(), 1, "{kernel}");
        assert_eq!(fs.stats().freed_extents, freed_before, "{kernel}");
        fs.check_invariants().unwrap();
    }
}

#[test]
fn a_writeback_s_unwritten_pieces_grow_the_tree_together_and_convert_once() {
    // ext4 does not merge unwritten pieces as it inserts them (EXT4_GET_BLOCKS_PRE_IO):
    // a file of three extents whose writeback is mapped in two allocations holds five
    // entries until the I/O is done, so it grows a leaf even though the pieces end up
    // merged into four; and a file's several mappings in one writeback convert once.
    let mut cfg = FsConfig::new(512 << 20);
    cfg.kernel = DiscardKernel::Linux6_17;
    let mut fs = SimFs::mkfs(Timed::new(ssd()), cfg).unwrap();
    let a = fs.create("a").unwrap();
    let b = fs.create("b").unwrap();
    for i in 0..3 {
        fs.write_at(a, i * BLOCK, BLOCK).unwrap();
        if i < 2 {
            fs.write_at(b, i * BLOCK, BLOCK).unwrap();
        }
    }
    assert_eq!(fs.extents(a).unwrap().len(), 3);
    let freed_before = fs.stats().freed_extents;
    // Two mappings of one writeback (as ext4 maps more than 2,048 blocks), one conversion.
    fs.map_for_writeback(a, 3 * BLOCK, 2 * BLOCK).unwrap();
    fs.map_for_writeback(a, 5 * BLOCK, 2 * BLOCK).unwrap();
    assert_eq!(
        fs.tree_blocks(a).unwrap().len(),
        1,
        "3 written + 2 unwritten entries"
    );
    fs.write_at(a, 3 * BLOCK, 4 * BLOCK).unwrap();
    fs.convert_unwritten(a).unwrap();
    assert_eq!(fs.extents(a).unwrap().len(), 3, "all merged");
    assert!(fs.tree_blocks(a).unwrap().is_empty());
    assert_eq!(
        fs.stats().freed_extents - freed_before,
        1,
        "one leaf, freed once"
    );
    fs.check_invariants().unwrap();
}
