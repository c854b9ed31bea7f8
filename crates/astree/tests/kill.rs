//! The AS B-tree on real files, killed with SIGKILL at random points while it commits: the
//! reopened store holds every commit it acknowledged (and at most the one in flight), and
//! it keeps working across kill/reopen cycles.
//!
//! The test re-runs its own binary as the child (`child_commits_until_killed`, which does
//! nothing unless FLASHLAB_KILL_DIR is set): the child opens the store in that directory,
//! goes on from the commit it finds there, and prints `ACK n` after commit n's sync
//! returned.

use astree::asstore::{AsConfig, AsStore, Cleaning};
use astree::segments::FileSegments;
use astree::BTree;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const DIR_VAR: &str = "FLASHLAB_KILL_DIR";
const SHAPE_VAR: &str = "FLASHLAB_KILL_SHAPE";

/// Node size, fanout, segment nodes and write buffer of one run.
fn shape(i: u64) -> (usize, usize, u64, usize) {
    let node = [512, 1024, 4096][(i % 3) as usize];
    let fanout = [4, 8, 16][(i / 3 % 3) as usize];
    (node, fanout, 8 + (i * 7) % 40, 1 + (i % 6) as usize)
}

fn config(i: u64) -> AsConfig {
    let (node, _, segment_nodes, buffer) = shape(i);
    // Every fourth run with packed records (segments of whole 4 KiB blocks).
    let packed = (i % 4 == 1).then_some(256);
    let segment_bytes = segment_nodes * node as u64;
    AsConfig {
        checkpoint_every: 1 + i % 4,
        segment_bytes: if packed.is_some() {
            segment_bytes.next_multiple_of(4096)
        } else {
            segment_bytes
        },
        packed_unit_bytes: packed,
        flush_fraction: if i % 3 == 2 { 0.25 } else { 1.0 },
        max_space_amp: 1.3,
        cleaning: if i.is_multiple_of(2) {
            Cleaning::CostBenefit
        } else {
            Cleaning::Oldest
        },
        logical_commits: i % 5 == 4,
        ..AsConfig::new(node, buffer)
    }
}

/// The entries after commit `n`: commit c puts keys c-0..c-4 and removes commit c-3's.
fn model(n: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = BTreeMap::new();
    for c in 1..=n {
        for j in 0..5 {
            m.insert(
                format!("k{c:06}-{j}").into_bytes(),
                format!("v{c}").into_bytes(),
            );
        }
        if c > 3 {
            for j in 0..5 {
                m.remove(format!("k{:06}-{j}", c - 3).as_bytes());
            }
        }
        m.insert(b"count".to_vec(), c.to_string().into_bytes());
    }
    m
}

fn open(dir: &std::path::Path, i: u64) -> BTree<AsStore<FileSegments>> {
    let segments = FileSegments::open(dir, "t", false).unwrap();
    let mut tree =
        BTree::new(AsStore::open_with(segments, config(i)).unwrap(), shape(i).1).unwrap();
    // Half the runs with logical commits defer changes (a budget of about 40 commits').
    if i % 10 == 9 {
        tree.defer_changes(16 << 10).unwrap();
    }
    tree
}

fn commits_in(tree: &mut BTree<AsStore<FileSegments>>) -> u64 {
    tree.get(b"count")
        .unwrap()
        .map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap())
}

#[test]
fn child_commits_until_killed() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return; // only as the child of the test below
    };
    let i: u64 = std::env::var(SHAPE_VAR).unwrap().parse().unwrap();
    let mut tree = open(std::path::Path::new(&dir), i);
    let mut out = std::io::stdout().lock();
    for c in commits_in(&mut tree) + 1.. {
        for j in 0..5 {
            tree.insert(
                format!("k{c:06}-{j}").as_bytes(),
                format!("v{c}").as_bytes(),
            )
            .unwrap();
        }
        if c > 3 {
            for j in 0..5 {
                tree.remove(format!("k{:06}-{j}", c - 3).as_bytes())
                    .unwrap();
            }
        }
        tree.insert(b"count", c.to_string().as_bytes()).unwrap();
        tree.sync().unwrap();
        writeln!(out, "ACK {c}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn killed_at_random_points_the_store_holds_every_acknowledged_commit() {
    let exe = std::env::current_exe().unwrap();
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let (mut kills, mut total) = (0, 0);
    for i in 0..12u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut acknowledged = 0;
        // Several kill/reopen cycles on the same files.
        for _cycle in 0..4 {
            let mut child = Command::new(&exe)
                .args(["--exact", "child_commits_until_killed", "--nocapture"])
                .env(DIR_VAR, dir.path())
                .env(SHAPE_VAR, i.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let target = 1 + next(40);
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut seen = 0;
            while let Some(Ok(line)) = lines.next() {
                if let Some(n) = line.strip_prefix("ACK ") {
                    acknowledged = n.trim().parse().unwrap();
                    seen += 1;
                    if seen >= target {
                        break;
                    }
                }
            }
            if next(2) == 0 {
                std::thread::sleep(std::time::Duration::from_micros(next(3000)));
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            kills += 1;
            // Commits acknowledged after we stopped reading still count.
            for line in lines.map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("ACK ") {
                    acknowledged = n.trim().parse().unwrap();
                }
            }
            let mut tree = open(dir.path(), i);
            tree.check().unwrap();
            let n = commits_in(&mut tree);
            assert!(
                n == acknowledged || n == acknowledged + 1,
                "shape {i}: {n} commits recovered, {acknowledged} acknowledged"
            );
            let want: Vec<_> = model(n).into_iter().collect();
            assert_eq!(tree.range(&[], None).unwrap(), want, "shape {i}");
            acknowledged = n;
        }
        total += acknowledged;
    }
    assert_eq!(kills, 48);
    assert!(
        total > 100,
        "the children committed ({total} commits in all)"
    );
}
