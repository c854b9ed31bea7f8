//! Who writes a file, as the host tells simfs: a close with only overwrites pending returns
//! the window (no delayed-allocation blocks); an unlinked file's writers do not pass to a
//! file that reuses its inode number (found by an independent review).

use flash::Preset;
use simfs::{FsConfig, SimFs, Timed};
use vfs::{HostConfig, OpenMode, SimVfs, Vfs};

fn drive() -> SimVfs {
    let dev = Preset::load("x25e")
        .unwrap()
        .with_capacity(1 << 30)
        .build()
        .unwrap();
    let mut cfg = FsConfig::new(512 << 20);
    cfg.prealloc = true;
    SimVfs::with_host(
        SimFs::mkfs(Timed::new(dev), cfg).unwrap(),
        HostConfig::linux(1 << 30),
    )
}

fn free_blocks(v: &SimVfs) -> u64 {
    v.fs().free_bytes() / 4096
}

/// ext4_release_file keeps the preallocation only while `i_reserved_data_blocks` (delayed
/// allocation: dirty pages over holes) is non-zero. A dirty page over an allocated block
/// reserves nothing, so the last writer's close must give the window back; the model
/// tests "any dirty page" and keeps it (for good: the later writeback sees was_open false).
#[test]
fn rewritten_in_place_file_returns_its_window_at_close() {
    let mut v = drive();
    let fd = v.open("f", OpenMode::create()).unwrap();
    v.write_at(fd, 0, &[1u8; 20 * 4096]).unwrap();
    v.fsync(fd).unwrap(); // 20 blocks + a window to 32
    v.write_at(fd, 0, &[2u8; 4096]).unwrap(); // overwrite: no delalloc reservation
    let before = free_blocks(&v);
    v.close(fd);
    assert_eq!(
        free_blocks(&v) - before,
        12,
        "the 12-block window comes back"
    );
}

/// A file unlinked while open keeps its writer count under its inode number; simfs
/// reuses that number for the next file, which then counts as open for writing after
/// its only writer closed (and gets a window instead of exactly its blocks).
#[test]
fn writers_do_not_survive_unlink_into_a_reused_inode() {
    let mut v = drive();
    let a = v.open("a", OpenMode::create()).unwrap();
    v.unlink("a").unwrap();
    assert_eq!(blocks_of_closed_b(&mut v), 20, "closed: exactly its blocks");
    v.close(a);
}

/// Writes 20 blocks to a new file "b", closes it, and writes it back through a reader:
/// the blocks its writeback took.
fn blocks_of_closed_b(v: &mut SimVfs) -> u64 {
    let b = v.open("b", OpenMode::create()).unwrap();
    v.write_at(b, 0, &[1u8; 20 * 4096]).unwrap();
    v.close(b);
    let r = v.open("b", OpenMode::read_only()).unwrap();
    let free0 = free_blocks(v);
    v.fsync(r).unwrap(); // written back with nobody writing it
    free0 - free_blocks(v)
}

#[test]
fn control_without_rewrite_and_without_unlink() {
    let mut v = drive();
    let fd = v.open("f", OpenMode::create()).unwrap();
    v.write_at(fd, 0, &[1u8; 20 * 4096]).unwrap();
    v.fsync(fd).unwrap();
    let before = free_blocks(&v);
    v.close(fd);
    assert_eq!(free_blocks(&v) - before, 12);
    let mut v = drive();
    let a = v.open("a", OpenMode::create()).unwrap();
    v.close(a);
    v.unlink("a").unwrap();
    assert_eq!(blocks_of_closed_b(&mut v), 20);
}
