//! Who uses a file system or a device, from `/proc`: processes whose working directory,
//! root, executable, open files or mapped files lie on a file system, or that hold a block
//! device open. Used to name what keeps a mount busy and to refuse erasing a device in use;
//! nothing here signals a process.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// A process found using something, for messages: `1234 (sleep)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessUse {
    pub pid: u32,
    /// The process's name (`/proc/PID/comm`).
    pub name: String,
    /// How it uses it: `cwd`, `root`, `exe`, `fd 3`, `map`.
    pub how: String,
}

impl std::fmt::Display for ProcessUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}, {})", self.pid, self.name, self.how)
    }
}

/// What a process's link must point at to count as a use.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A file or directory on the file system with this `st_dev`.
    FileSystem(u64),
    /// The block device with this `st_rdev` (an open fd of the device node).
    BlockDevice(u64),
}

impl Target {
    fn matches(self, link: &Path) -> bool {
        let Ok(m) = std::fs::metadata(link) else {
            return false;
        };
        match self {
            Target::FileSystem(dev) => m.dev() == dev,
            Target::BlockDevice(rdev) => m.file_type().is_block_device() && m.rdev() == rdev,
        }
    }
}

/// The process's name, or `?` once it is gone.
pub fn name_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Every process other than this one using `target`, at most one entry per process.
pub fn users(target: Target) -> Vec<ProcessUse> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let mut how = ["cwd", "root", "exe"]
            .into_iter()
            .find(|l| target.matches(&dir.join(l)))
            .map(str::to_string);
        if how.is_none() {
            how = std::fs::read_dir(dir.join("fd"))
                .into_iter()
                .flat_map(|d| d.flatten())
                .find(|e| target.matches(&e.path()))
                .map(|e| format!("fd {}", e.file_name().to_string_lossy()));
        }
        if how.is_none()
            && std::fs::read_dir(dir.join("map_files"))
                .into_iter()
                .flat_map(|d| d.flatten())
                .any(|e| target.matches(&e.path()))
        {
            how = Some("map".into());
        }
        if let Some(how) = how {
            out.push(ProcessUse {
                pid,
                name: name_of(pid),
                how,
            });
        }
    }
    out
}

/// `pid (name), pid (name), ...`, at most `max` then "and N more".
pub fn list(uses: &[ProcessUse], max: usize) -> String {
    let mut s: Vec<String> = uses.iter().take(max).map(ToString::to_string).collect();
    if uses.len() > max {
        s.push(format!("and {} more", uses.len() - max));
    }
    s.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_its_cwd_on_a_file_system_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let dev = std::fs::metadata(dir.path()).unwrap().dev();
        // The child's cwd is set before exec: wait until /proc shows it.
        let mut found = Vec::new();
        for _ in 0..100 {
            found = users(Target::FileSystem(dev));
            if found.iter().any(|u| u.pid == child.id()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let u = found.iter().find(|u| u.pid == child.id()).expect("found");
        assert_eq!(u.name, "sleep");
        assert!(!found.iter().any(|u| u.pid == std::process::id()));
        assert_eq!(
            list(&[u.clone(), u.clone()], 1),
            format!("{} (sleep, cwd), and 1 more", u.pid)
        );
    }
}
