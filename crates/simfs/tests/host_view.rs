//! mballoc with the host's view of a file (i_size, open for writing): callers that give none
//! allocate as before; i_size picks the size bucket without stretching the window; a closed
//! file whose window ran out gets exactly the rest (found by an independent review).

use flash::{Preset, Ssd};
use simfs::fs::BLOCK;
use simfs::{FsConfig, SimFs, Timed};

fn ssd() -> Ssd {
    match Preset::load("x25e")
        .unwrap()
        .with_capacity(1 << 30)
        .build()
        .unwrap()
    {
        flash::AnyDevice::Ssd(s) => *s,
        _ => unreachable!(),
    }
}

fn prealloc_fs() -> SimFs<Timed<Ssd>> {
    let mut cfg = FsConfig::new(512 << 20);
    cfg.prealloc = true;
    SimFs::mkfs(Timed::new(ssd()), cfg).unwrap()
}

/// A caller that never calls set_host_view: a 4-block file written sparsely (1 block at
/// block 100). Before 47b03b9 (file_blocks + n = 5 <= 16) the block came from the
/// locality-group window, right after the file's first 4 blocks; now `end` (101) makes
/// the file "large" and it gets a window of its own elsewhere.
#[test]
fn host_none_sparse_write_unchanged() {
    let mut fs = prealloc_fs();
    let f = fs.create("f").unwrap();
    fs.write_at(f, 0, 4 * BLOCK).unwrap();
    let e0 = fs.extents(f).unwrap()[0];
    let free = fs.free_bytes() / BLOCK;
    fs.write_at(f, 100 * BLOCK, BLOCK).unwrap();
    let e = fs.extents(f).unwrap();
    assert_eq!(e[1].start_block, e0.start_block + 4, "{e:?}");
    assert_eq!(
        free,
        fs.free_bytes() / BLOCK,
        "taken from the group window already held"
    );
}

/// ext4_mb_normalize_request: size = max(request end, i_size); past 8 MiB the window is
/// 8 MiB (the request being under 8 MiB), aligned at the request's start. The model
/// stretches the window to i_size (normalized_window(.., max(remaining, isize - have))
/// and `.max(want)`): 64 MiB of i_size ahead of writeback takes a 64 MiB window.
#[test]
fn window_capped_by_size_bucket_not_stretched_to_isize() {
    let mut fs = prealloc_fs();
    let f = fs.create("f").unwrap();
    fs.set_host_view(f, 64 << 20, true, true).unwrap();
    let free0 = fs.free_bytes() / BLOCK;
    fs.write_at(f, 0, 128 * BLOCK).unwrap(); // the first 512 KiB written back
    let held = free0 - fs.free_bytes() / BLOCK;
    assert!(held <= 2048, "8 MiB window at most, got {held} blocks");
}

/// A closed file (no writer) whose request runs to i_size gets EXT4_MB_HINT_NOPREALLOC:
/// an inode PA left from when it was open is used (ext4_mb_use_preallocated), but no new
/// window is made for the rest. The model makes a new window once the old one runs out.
#[test]
fn closed_file_gets_no_new_window_after_its_old_one() {
    let mut fs = prealloc_fs();
    let f = fs.create("f").unwrap();
    let free0 = fs.free_bytes() / BLOCK;
    fs.set_host_view(f, 20 * BLOCK, true, true).unwrap();
    fs.write_at(f, 0, 20 * BLOCK).unwrap(); // open: window to 32 blocks, 12 left
    assert_eq!(free0 - fs.free_bytes() / BLOCK, 32);
    // Last writer closes with delalloc blocks left: the PA stays (ext4_release_file).
    fs.set_host_view(f, 100 * BLOCK, false, true).unwrap();
    fs.write_at(f, 20 * BLOCK, 80 * BLOCK).unwrap(); // runs to i_size, nobody writes
    assert_eq!(
        free0 - fs.free_bytes() / BLOCK,
        100,
        "12 from the old PA, then exactly 68: no new window"
    );
}

/// A closed file of `blocks` written back to its size (EXT4_MB_HINT_NOPREALLOC).
fn closed_file(fs: &mut SimFs<Timed<Ssd>>, name: &str, blocks: u64) -> u32 {
    let f = fs.create(name).unwrap();
    fs.set_host_view(f, blocks * BLOCK, false, true).unwrap();
    fs.write_at(f, 0, blocks * BLOCK).unwrap();
    f
}

/// ext4_mb_regular_allocator for a closed file: no exact goal, the goal group scanned
/// from its first free block, an extent of exactly the request taken at once. A 22-block
/// file deleted leaves a 22-block hole; the next closed file of 22 blocks fills it, where
/// next-fit from a cursor put it after the last file.
#[test]
fn a_closed_file_fills_the_hole_of_its_size() {
    let mut fs = prealloc_fs();
    let files: Vec<_> = (0..3)
        .map(|i| closed_file(&mut fs, &format!("f{i}"), 22))
        .collect();
    let first: Vec<_> = files.iter().map(|&f| fs.extents(f).unwrap()).collect();
    assert!(
        first.iter().all(|e| e.len() == 1),
        "one piece each: {first:?}"
    );
    fs.unlink("f1").unwrap();
    fs.sync().unwrap();
    let w = closed_file(&mut fs, "w", 22);
    assert_eq!(fs.extents(w).unwrap(), first[1], "into f1's hole");
}

/// A closed file's rest is not split to start at its goal (mballoc tries no exact goal
/// for an unnormalised request and looks for an extent that holds all of it before it
/// takes a shorter one): 40 more blocks of a file followed by a 22-block hole go in one
/// piece elsewhere, where the goal's free run took 22 and the rest went on after it.
#[test]
fn a_closed_file_s_rest_is_not_split_at_its_goal() {
    let mut fs = prealloc_fs();
    let f0 = closed_file(&mut fs, "f0", 22);
    for i in 1..8 {
        closed_file(&mut fs, &format!("f{i}"), 22);
    }
    fs.unlink("f1").unwrap();
    fs.sync().unwrap();
    fs.set_host_view(f0, 62 * BLOCK, false, true).unwrap();
    fs.write_at(f0, 22 * BLOCK, 40 * BLOCK).unwrap();
    let e = fs.extents(f0).unwrap();
    assert_eq!(
        e.len(),
        2,
        "its first 22 blocks and the 40 in one piece: {e:?}"
    );
    assert_eq!(e[1].len, 40);
}
