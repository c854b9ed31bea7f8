//! Helpers the command-line test files share: running the real binary and scratch
//! directories.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn flashlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .output()
        .expect("the flashlab binary runs")
}

pub fn stdout_json(o: &Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "flashlab failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("stdout is one JSON object")
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);
impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("flashlab-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loop device over a file, detached on drop.
pub struct LoopDevice {
    pub dev: String,
}
impl LoopDevice {
    /// None without root or loop devices (the caller says it skips).
    pub fn new(backing: &std::path::Path) -> Option<LoopDevice> {
        let o = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(backing)
            .output()
            .ok()?;
        o.status.success().then(|| LoopDevice {
            dev: String::from_utf8_lossy(&o.stdout).trim().to_string(),
        })
    }
}
impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// Runs `f` with the mount point and device of a fresh 2 GiB ext4 (default `mkfs.ext4`
/// options) on a loop device over an image in a scratch directory `name`, then unmounts
/// it (also when `f` panics, whose panic then goes on) and detaches the device. None,
/// saying why on stderr, without `mkfs.ext4`, `filefrag`, `dumpe2fs`, `losetup`, `mount`
/// or root.
pub fn on_real_ext4<R>(
    name: &str,
    f: impl FnOnce(&std::path::Path, &str) -> R + std::panic::UnwindSafe,
) -> Option<R> {
    let tools = ["mkfs.ext4", "filefrag", "dumpe2fs", "losetup", "mount"];
    let missing = tools.into_iter().find(|p| {
        Command::new("which")
            .arg(p)
            .output()
            .map_or(true, |o| !o.status.success())
    });
    if let Some(p) = missing {
        eprintln!("skipped the real ext4 half: `{p}` is not installed");
        return None;
    }
    let dir = Scratch::new(name);
    let img = dir.0.join("ext4.image");
    let file = std::fs::File::create(&img).unwrap();
    file.set_len(2 << 30).unwrap();
    let Some(lo) = LoopDevice::new(&img) else {
        eprintln!("skipped the real ext4 half: no loop device (needs root)");
        return None;
    };
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F", &lo.dev])
        .status()
        .unwrap()
        .success());
    let mnt = dir.0.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    if !Command::new("mount")
        .arg(&lo.dev)
        .arg(&mnt)
        .status()
        .unwrap()
        .success()
    {
        eprintln!("skipped the real ext4 half: mount failed");
        return None;
    }
    let dev = lo.dev.clone();
    let result = std::panic::catch_unwind(|| f(&mnt, &dev));
    let _ = Command::new("umount").arg(&mnt).status();
    drop(lo);
    match result {
        Ok(r) => Some(r),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// `path`'s extents as (physical start, length) from `filefrag -v`, as it lists them.
pub fn filefrag_extents(path: &std::path::Path) -> Vec<(u64, u64)> {
    let o = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            // "   0:        0..      21:      33065..     33086:     22:  ..."
            let f: Vec<&str> = l.split(':').map(str::trim).collect();
            if f.len() < 4 || f[0].parse::<u32>().is_err() {
                return None;
            }
            let start = f[2].split("..").next()?.trim().parse().ok()?;
            let len = f[3].parse().ok()?;
            Some((start, len))
        })
        .collect()
}

/// The x25e preset at 4 GiB as a bare SSD: a drive for a simfs in a test.
pub fn x25e_4gib() -> flash::Ssd {
    match flash::Preset::load("x25e")
        .unwrap()
        .with_capacity(4 << 30)
        .build()
        .unwrap()
    {
        flash::AnyDevice::Ssd(s) => *s,
        _ => unreachable!("x25e is an SSD preset"),
    }
}

/// Runs flashlab with `args` and checks that it fails saying `says`.
pub fn assert_refused(args: &[&str], says: &str) {
    let o = flashlab(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} ran");
    assert!(e.contains(says), "{args:?}: {e}");
}
