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

/// Runs flashlab with `args` and checks that it fails saying `says`.
pub fn assert_refused(args: &[&str], says: &str) {
    let o = flashlab(args);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} ran");
    assert!(e.contains(says), "{args:?}: {e}");
}
