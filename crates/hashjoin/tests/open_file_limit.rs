//! A store that keeps at most N spill files open, as PostgreSQL's virtual file descriptors
//! do: the least recently used file is closed and reopened by name when next used, and
//! nothing it holds changes.

use hashjoin::store::{MemStore, Store};

#[test]
fn files_past_the_limit_are_closed_and_reopened_with_their_bytes_intact() {
    let mut s = MemStore::default().with_open_file_limit(2);
    let files: Vec<_> = (0..5).map(|_| s.create().unwrap()).collect();
    assert_eq!(s.open_spill_files(), 2, "only the two made last stay open");
    assert_eq!(s.limit_closes(), 3);
    // Appends in turn: each reopens a file the one before closed.
    for round in 0..4u8 {
        for (i, &f) in files.iter().enumerate() {
            s.append(f, &[round * 10 + i as u8; 100]).unwrap();
            assert!(s.open_spill_files() <= 2);
        }
    }
    assert!(s.limit_closes() >= 3 + 4 * 5 - 2, "{}", s.limit_closes());
    for (i, &f) in files.iter().enumerate() {
        assert_eq!(s.len(f), 400);
        let mut buf = vec![0u8; 400];
        assert_eq!(s.read_at(f, 0, &mut buf).unwrap(), 400);
        for round in 0..4u8 {
            let want = round * 10 + i as u8;
            assert!(buf[round as usize * 100..][..100]
                .iter()
                .all(|&b| b == want));
        }
    }
    // The most recently used stays open; deleting open and closed files alike works.
    for &f in &files {
        s.delete(f).unwrap();
    }
    assert_eq!((s.open_spill_files(), s.live_spill_files()), (0, 0));
}

#[test]
fn without_a_limit_every_file_stays_open() {
    let mut s = MemStore::default();
    let files: Vec<_> = (0..50).map(|_| s.create().unwrap()).collect();
    for &f in &files {
        s.append(f, b"x").unwrap();
    }
    assert_eq!((s.open_spill_files(), s.limit_closes()), (50, 0));
}
