//! Where real ext4 puts the preallocation windows of files written back while open
//! (a normalised request: `CR_POWER2_ALIGNED` from the file's stream goal, or the block
//! after the file's last one when the whole window is free there), beside simfs's model
//! of it (`SimFs::place_window`). Each window of a power of two blocks goes to the lowest
//! free buddy of the lowest order that holds it, so a 32-block window takes a 32-block
//! hole before a larger free run, and a file deleted leaves a hole the next window of its
//! size fills. The real half needs root, loop devices, `mkfs.ext4` and `filefrag`; without
//! them it says why on stderr and checks nothing. Both file systems' group 1 starts with a
//! backup superblock, a descriptor block and 255 reserved ones (simfs lays out as mke2fs
//! does); each first fills it to block 1,024 of the group with a closed file, and the
//! windows are compared by their place in the group.

mod common;

use simfs::fs::BLOCK;
use simfs::{FsConfig, SimFs, Timed};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The steps: append `blocks` to a file kept open and fsync it, or close and delete one.
enum Step {
    Write(&'static str, u64),
    Remove(&'static str),
}

const STEPS: &[Step] = &[
    Step::Write("a", 22),
    Step::Write("b", 22),
    Step::Write("a", 22),
    Step::Write("d", 100),
    Step::Remove("d"),
    Step::Write("e", 22),
    Step::Write("f", 40),
    Step::Write("g", 300),
];

/// Group 1's first block (ext4's 32,768 blocks a group, simfs's the same).
const GROUP_1: u64 = 32_768;

/// Where the closed filler file ends group 1's used blocks: a block aligned to 1,024.
const FILLED_TO: u64 = GROUP_1 + 1_024;

/// Each file left, its extents as (block in group 1, length).
type Layout = BTreeMap<&'static str, Vec<(i64, u64)>>;

fn in_group_1(files: BTreeMap<&'static str, Vec<(u64, u64)>>) -> Layout {
    files
        .into_iter()
        .map(|(n, e)| {
            let e = e.iter().map(|&(s, l)| (s as i64 - GROUP_1 as i64, l));
            (n, e.collect())
        })
        .collect()
}

/// Group 1's first free block on the real file system, from `dumpe2fs`
/// ("Free blocks: 33025-65535").
fn real_first_free(dev: &str) -> u64 {
    let o = Command::new("dumpe2fs").arg(dev).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let group = text
        .split("\nGroup 1:")
        .nth(1)
        .expect("dumpe2fs lists group 1");
    let free = group
        .lines()
        .find_map(|l| l.trim().strip_prefix("Free blocks: "))
        .expect("group 1's free blocks");
    free.split('-').next().unwrap().trim().parse().unwrap()
}

/// `path`'s extents from `filefrag -v`, merged where they touch.
fn extents(path: &Path) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (start, len) in common::filefrag_extents(path) {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 += len,
            _ => out.push((start, len)),
        }
    }
    out
}

fn real_layout(mnt: &Path, first_free: u64) -> Layout {
    use std::io::Write;
    let filler = mnt.join("filler");
    std::fs::write(
        &filler,
        vec![b'x'; ((FILLED_TO - first_free) * BLOCK) as usize],
    )
    .unwrap();
    assert!(Command::new("sync").status().unwrap().success());
    assert_eq!(extents(&filler), vec![(first_free, FILLED_TO - first_free)]);
    let mut open: BTreeMap<&str, std::fs::File> = BTreeMap::new();
    for step in STEPS {
        match *step {
            Step::Write(name, blocks) => {
                let f = open.entry(name).or_insert_with(|| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(mnt.join(name))
                        .unwrap()
                });
                f.write_all(&vec![b'x'; (blocks * BLOCK) as usize]).unwrap();
                f.sync_all().unwrap();
            }
            Step::Remove(name) => {
                open.remove(name);
                std::fs::remove_file(mnt.join(name)).unwrap();
                assert!(Command::new("sync").status().unwrap().success());
            }
        }
    }
    let files = open.keys().map(|&n| (n, extents(&mnt.join(n)))).collect();
    drop(open);
    in_group_1(files)
}

fn model_layout(rotational: bool) -> Layout {
    let ssd = common::x25e_4gib();
    let mut cfg = FsConfig::new(2 << 30);
    cfg.prealloc = true;
    cfg.kernel = simfs::DiscardKernel::Linux6_17;
    cfg.rotational = rotational;
    // Group 1 of a 2 GiB file system starts with a backup superblock, a descriptor block
    // and 255 reserved ones, as the real one's (`real_first_free`).
    let first_free = GROUP_1 + 257;
    let mut fs = SimFs::mkfs(Timed::new(ssd), cfg).unwrap();
    let filler = fs.create("filler").unwrap();
    let filler_bytes = (FILLED_TO - first_free) * BLOCK;
    fs.set_host_view(filler, filler_bytes, false, true).unwrap();
    fs.write_at(filler, 0, filler_bytes).unwrap();
    fs.sync().unwrap();
    let placed: Vec<(u64, u64)> = fs
        .extents(filler)
        .unwrap()
        .iter()
        .map(|e| (e.start_block, e.len as u64))
        .collect();
    assert_eq!(placed, vec![(first_free, FILLED_TO - first_free)]);
    let mut open: BTreeMap<&'static str, simfs::fs::Ino> = BTreeMap::new();
    for step in STEPS {
        match *step {
            Step::Write(name, blocks) => {
                let f = *open.entry(name).or_insert_with(|| fs.create(name).unwrap());
                let size = fs.size_of(f).unwrap();
                fs.set_host_view(f, size + blocks * BLOCK, true, true)
                    .unwrap();
                fs.write_at(f, size, blocks * BLOCK).unwrap();
                fs.sync().unwrap();
            }
            Step::Remove(name) => {
                let f = open.remove(name).unwrap();
                let size = fs.size_of(f).unwrap();
                fs.set_host_view(f, size, false, false).unwrap();
                fs.unlink(name).unwrap();
                fs.sync().unwrap();
            }
        }
    }
    let files = open
        .iter()
        .map(|(&n, &f)| {
            let mut out: Vec<(u64, u64)> = Vec::new();
            for e in fs.extents(f).unwrap() {
                match out.last_mut() {
                    Some(last) if last.0 + last.1 == e.start_block => last.1 += e.len as u64,
                    _ => out.push((e.start_block, e.len as u64)),
                }
            }
            (n, out)
        })
        .collect();
    in_group_1(files)
}

/// Where this kernel (6.18, a 2 GiB ext4 on a loop device) put the windows in group 1,
/// free from block 1,024 on (`a`, `b`, `d`, `e`, ... are inodes 13 to 17): `a`'s 32-block
/// window at 1,024 (the first free buddy of order 5 or more: 1,024-2,047 is one of order
/// 10), `b`'s at 1,056 (the lowest then: 1,056-1,087, order 5), `a`'s next window at 1,088
/// (its own end taken by `b`; 1,088-1,151 is of order 6, the lowest), `d`'s 128 at 1,152,
/// then `e`'s 32 at 1,120 (the order-5 buddy `a`'s window left, before `d`'s hole),
/// `f`'s 64 at 1,152 (in `d`'s hole) and `g`'s 512 at 1,536.
fn expected() -> Layout {
    [
        ("a", vec![(1024, 32), (1088, 12)]),
        ("b", vec![(1056, 22)]),
        ("e", vec![(1120, 22)]),
        ("f", vec![(1152, 40)]),
        ("g", vec![(1536, 300)]),
    ]
    .into_iter()
    .collect()
}

#[test]
fn open_files_windows_are_placed_as_real_ext4_places_them() {
    for rotational in [false, true] {
        assert_eq!(
            model_layout(rotational),
            expected(),
            "simfs (rotational {rotational})"
        );
    }
    let Some((first_free, real)) = common::on_real_ext4("mballoc-open", |mnt, dev| {
        let first_free = real_first_free(dev);
        (first_free, real_layout(mnt, first_free))
    }) else {
        return;
    };
    eprintln!("real ext4: {real:?}");
    assert_eq!(
        first_free,
        GROUP_1 + 257,
        "real ext4's group 1 starts as simfs's"
    );
    assert_eq!(real, expected(), "real ext4");
}
