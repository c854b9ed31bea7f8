//! Scratch directories in the temp directory named after the process that made them
//! (`<prefix><pid>-<random>`), so that a later run can remove those of runs that were
//! killed before they could clean up (a benchmark's trace, fio's I/O logs: hundreds of MB).

use std::path::Path;

/// The name prefix of this process's scratch directories for `prefix`.
pub fn own_prefix(prefix: &str) -> String {
    format!("{prefix}{}-", std::process::id())
}

/// Removes scratch directories `<prefix><pid>-*` in `tmp` whose process is gone; returns
/// how many.
pub fn remove_stale_dirs(tmp: &Path, prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir
            && pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_dir_all(e.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dead_processes_directories_go() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid beyond the kernel's limit (4194304) is never alive.
        let dead = tmp.path().join("flashlab-x-4194399-abc");
        let mine = tmp.path().join(format!("{}abc", own_prefix("flashlab-x-")));
        let other = tmp.path().join("flashlab-y-4194399-abc");
        for d in [&dead, &mine, &other] {
            std::fs::create_dir(d).unwrap();
        }
        assert_eq!(remove_stale_dirs(tmp.path(), "flashlab-x-"), 1);
        assert!(!dead.exists() && mine.exists() && other.exists());
    }
}
