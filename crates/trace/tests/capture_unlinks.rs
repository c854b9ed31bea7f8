//! A capture of ext4 records its unlinks (and the extents they free) beside its journal
//! commits, and `commits_after_unlinks` places each commit among the deletes (what
//! tempfiles-pg's model follows). Needs root and loop devices; without them it says so and skips.

use trace::capture::{self, CaptureSpec, FsKind};

#[test]
fn an_ext4_capture_places_its_commits_among_its_unlinks() {
    if let Err(e) = capture::check_support(FsKind::Ext4) {
        eprintln!("skipped an_ext4_capture_places_its_commits_among_its_unlinks: {e}");
        return;
    }
    let work = std::env::temp_dir().join(format!("flashlab-unlinks-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    // Three files removed before a sync (one commit after them), then two more and a sync.
    let script = "cd \"$FLASHLAB_DIR\"; \
        for f in a b c d e; do head -c 65536 /dev/zero > $f; done; sync; \
        rm a b c; sync; rm d e; sync";
    let spec = CaptureSpec {
        fs: FsKind::Ext4,
        size_bytes: 64 << 20,
        discard: true,
        mkfs_opts: vec![],
        mount_opts: vec![],
        command: vec!["sh".into(), "-c".into(), script.into()],
        work_dir: work.clone(),
        stdout: None,
        out: None,
        cancel: trace::Cancel::new(),
        runs: 1,
        cpu: None,
        think_on_cpu: false,
        realtime: false,
        dirty_limit_bytes: None,
        others_traverse: false,
    };
    let c = capture::capture(&spec).unwrap();
    std::fs::remove_dir_all(&work).unwrap();
    assert_eq!(c.exit_code, Some(0));
    // Each 64 KiB file is one extent, freed when it is removed.
    match &c.freed_extent_at_ns {
        Some(freed) => assert_eq!(freed.len(), 5, "one extent freed per file: {freed:?}"),
        None => eprintln!("not checked: this kernel has no ext4_mballoc_free event"),
    }
    let Some(u) = c.unlinks else {
        eprintln!("skipped: this kernel has no ext4_unlink_enter or jbd2_commit_locking event");
        return;
    };
    assert_eq!(u.unlink_at_ns.len(), 5, "one event per removed file");
    assert!(
        u.unlink_at_ns.windows(2).all(|w| w[0] <= w[1]),
        "in time order"
    );
    assert!(
        u.commit_locked_at_ns.len() >= 2,
        "a commit at each sync: {:?}",
        u.commit_locked_at_ns
    );
    let points = capture::commits_after_unlinks(&u.commit_locked_at_ns, &u.unlink_at_ns);
    assert!(points.windows(2).all(|w| w[0] <= w[1]), "{points:?}");
    assert!(
        points.contains(&3),
        "a commit after the first three: {points:?}"
    );
    assert_eq!(
        points.last(),
        Some(&5),
        "the last sync's commit after all five"
    );
}

#[test]
fn commits_are_placed_by_the_unlinks_before_them() {
    let commits = [5, 10, 10, 40];
    let unlinks = [1, 5, 6, 9, 30];
    // An unlink at the commit's own time counts as after it.
    assert_eq!(
        capture::commits_after_unlinks(&commits, &unlinks),
        vec![1, 4, 4, 5]
    );
    assert_eq!(capture::commits_after_unlinks(&commits, &[]), vec![0; 4]);
}
