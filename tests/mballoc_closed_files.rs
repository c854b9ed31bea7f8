//! Where real ext4 puts a closed file's blocks at writeback (`EXT4_MB_HINT_NOPREALLOC`),
//! beside simfs's model of it (`SimFs::alloc_unnormalized`): no exact goal is tried (40
//! blocks appended to a file go into a 40-block hole before it, not after it), and the
//! request is not split over a shorter free run at the goal (they go in one piece past a
//! 30-block hole that follows the file). The real half needs root, loop devices,
//! `mkfs.ext4` and `filefrag`; without them it says why on stderr and checks nothing.

mod common;

use simfs::fs::BLOCK;
use simfs::{FsConfig, SimFs, Timed};
use std::path::Path;
use std::process::Command;

/// Appends `blocks` 4 KiB blocks to `path` and closes it, then syncs (the flusher's
/// writeback of a closed file).
fn append_closed(path: &Path, blocks: usize) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(&vec![b'x'; blocks * 4096]).unwrap();
    drop(f);
    assert!(Command::new("sync").status().unwrap().success());
}

/// Removes `path` and syncs (the journal commit that gives its blocks back).
fn remove(path: &Path) {
    std::fs::remove_file(path).unwrap();
    assert!(Command::new("sync").status().unwrap().success());
}

/// `path`'s extents as (physical start, length) from `filefrag -v`.
fn extents(path: &Path) -> Vec<(u64, u64)> {
    common::filefrag_extents(path)
}

/// What the two cases found: the appended extent of case A and of case B, and the
/// extents they had to land beside.
#[derive(Debug)]
struct Placement {
    /// Case A: the hole's start (the deleted file's) and the file's extents after the
    /// append.
    hole_a: u64,
    file_a: Vec<(u64, u64)>,
    /// Case B: the file's extents after the append (its first ends where a 30-block
    /// hole begins).
    file_b: Vec<(u64, u64)>,
}

fn check(p: &Placement, who: &str) {
    assert_eq!(p.file_a.len(), 2, "{who}: {p:?}");
    assert_eq!(
        p.file_a[1],
        (p.hole_a, 40),
        "{who}: the 40 blocks fill the 40-block hole before the file (no goal tried): {p:?}"
    );
    assert_eq!(p.file_b.len(), 2, "{who}: {p:?}");
    assert_eq!(
        p.file_b[1].1, 40,
        "{who}: one piece of 40, not 30 at the goal: {p:?}"
    );
    assert_ne!(
        p.file_b[1].0,
        p.file_b[0].0 + p.file_b[0].1,
        "{who}: not at the goal: {p:?}"
    );
}

/// The two cases on a mounted ext4 at `mnt`.
fn real_placement(mnt: &Path) -> Placement {
    let at = |n: &str| mnt.join(n);
    append_closed(&at("g1"), 40);
    append_closed(&at("f"), 22);
    let hole_a = extents(&at("g1"))[0].0;
    remove(&at("g1"));
    append_closed(&at("f"), 40);
    let file_a = extents(&at("f"));
    for (name, blocks) in [("h1", 22), ("f2", 22), ("h2", 30), ("h3", 22)] {
        append_closed(&at(name), blocks);
    }
    remove(&at("h2"));
    append_closed(&at("f2"), 40);
    Placement {
        hole_a,
        file_a,
        file_b: extents(&at("f2")),
    }
}

/// The same two cases on simfs, each file closed when written back.
fn model_placement() -> Placement {
    let ssd = common::x25e_4gib();
    let mut cfg = FsConfig::new(2 << 30);
    cfg.prealloc = true;
    let mut fs = SimFs::mkfs(Timed::new(ssd), cfg).unwrap();
    let append_closed = |fs: &mut SimFs<Timed<flash::Ssd>>, name: &str, blocks: u64| {
        let f = fs.lookup(name).or_else(|_| fs.create(name)).unwrap();
        let size = fs.size_of(f).unwrap();
        fs.set_host_view(f, size + blocks * BLOCK, false, true)
            .unwrap();
        fs.write_at(f, size, blocks * BLOCK).unwrap();
        fs.sync().unwrap();
        f
    };
    let run = |e: &[flash::fslayout::Extent]| -> Vec<(u64, u64)> {
        e.iter().map(|e| (e.start_block, e.len as u64)).collect()
    };
    let g1 = append_closed(&mut fs, "g1", 40);
    let f = append_closed(&mut fs, "f", 22);
    let hole_a = fs.extents(g1).unwrap()[0].start_block;
    fs.unlink("g1").unwrap();
    fs.sync().unwrap();
    append_closed(&mut fs, "f", 40);
    let file_a = run(&fs.extents(f).unwrap());
    for (name, blocks) in [("h1", 22), ("f2", 22), ("h2", 30), ("h3", 22)] {
        append_closed(&mut fs, name, blocks);
    }
    fs.unlink("h2").unwrap();
    fs.sync().unwrap();
    let f2 = append_closed(&mut fs, "f2", 40);
    Placement {
        hole_a,
        file_a,
        file_b: run(&fs.extents(f2).unwrap()),
    }
}

#[test]
fn closed_files_are_placed_as_real_ext4_places_them() {
    check(&model_placement(), "simfs");
    let Some(real) = common::on_real_ext4("mballoc", |mnt, _| real_placement(mnt)) else {
        return;
    };
    eprintln!("real ext4: {real:?}");
    check(&real, "ext4");
}
