//! One block device's own limit on dirty page cache, so that writeback to it behaves as on
//! a host with less memory: its backing device info (`/sys/class/bdi/MAJ:MIN`) gets
//! `strict_limit` and `min_bytes` = `max_bytes` = the limit (Linux 6.2+,
//! Documentation/ABI/testing/sysfs-class-bdi). With `strict_limit` the device is throttled
//! by its own share of the dirty limits alone, and background writeback to it starts at
//! its share of the background threshold (mm/page-writeback.c, `wb_dirty_limits` and
//! `balance_dirty_pages`): half the limit with Linux's default ratios (10% and 20%). A
//! 1 GiB host's 20% is then what a 24 GiB machine's loop device sees.
//!
//! The device's earlier settings are read first and put back by [`DirtyLimit::restore`]
//! (or on drop); a loop device left limited by a run killed outright is reset to the
//! kernel's defaults by [`reset_to_defaults`] when its leftovers are reclaimed.

use std::path::{Path, PathBuf};

/// The files this module writes, in the order they are restored (the bounds before the
/// switch, the lower bound cleared first so that no write ever puts it above the upper).
const STRICT: &str = "strict_limit";
const MIN_FINE: &str = "min_ratio_fine";
const MAX_FINE: &str = "max_ratio_fine";

/// The smallest limit [`DirtyLimit::set`] takes (a share of the kernel's dirty limit that
/// rounds to nothing would stop writes to the device).
pub const MIN_LIMIT_BYTES: u64 = 16 << 20;

/// The dirty-memory limit (bytes) Linux gives a host of `ram_bytes` by its default
/// `dirty_ratio` of 20% (Documentation/admin-guide/sysctl/vm.rst), as the simulated host
/// (`vfs::HostConfig::linux`) computes it.
pub fn host_dirty_bytes(ram_bytes: u64) -> u64 {
    ram_bytes / 4096 * 20 / 100 * 4096
}

/// The `/sys/class/bdi` directory of the block device with device number `rdev`.
pub fn bdi_dir(rdev: u64) -> PathBuf {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    Path::new("/sys/class/bdi").join(format!("{major}:{minor}"))
}

/// A device's limit while it is set; restores the earlier settings when dropped.
#[derive(Debug)]
pub struct DirtyLimit {
    dir: PathBuf,
    /// (file, value) as they were before.
    saved: Vec<(&'static str, String)>,
    restored: bool,
}

fn read(dir: &Path, file: &str) -> Result<String, String> {
    std::fs::read_to_string(dir.join(file))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{}: {e}", dir.join(file).display()))
}

fn write(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    std::fs::write(dir.join(file), value)
        .map_err(|e| format!("{} <- {value}: {e}", dir.join(file).display()))
}

impl DirtyLimit {
    /// Limits the device with number `rdev` to `bytes` of dirty pages.
    pub fn set(rdev: u64, bytes: u64) -> Result<DirtyLimit, String> {
        let dir = bdi_dir(rdev);
        if !dir.join("max_bytes").exists() {
            return Err(format!(
                "{} has no max_bytes: a byte limit per device needs Linux 6.2 or later",
                dir.display()
            ));
        }
        if bytes < MIN_LIMIT_BYTES {
            return Err(format!(
                "a dirty limit of {bytes} bytes is too small: at least {} MiB (a host of at least 80 MiB)",
                MIN_LIMIT_BYTES >> 20
            ));
        }
        let mut saved = Vec::new();
        for file in [STRICT, MIN_FINE, MAX_FINE] {
            saved.push((file, read(&dir, file)?));
        }
        let limit = DirtyLimit {
            dir,
            saved,
            restored: false,
        };
        // The kernel refuses an upper bound below the lower one: the lower is cleared
        // first, then the upper set in bytes (the kernel keeps it as a share of its dirty
        // limit), and the lower set to exactly that share, then the switch. A failure part
        // way is undone by the drop.
        write(&limit.dir, MIN_FINE, "0")?;
        write(&limit.dir, "max_bytes", &bytes.to_string())?;
        let share = read(&limit.dir, MAX_FINE)?;
        write(&limit.dir, MIN_FINE, &share)?;
        write(&limit.dir, STRICT, "1")?;
        Ok(limit)
    }

    /// Where the limit is set (for messages).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Puts the earlier settings back.
    pub fn restore(&mut self) -> Result<(), String> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        put_back(&self.dir, &self.saved)
    }
}

impl Drop for DirtyLimit {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("flashlab: could not restore a device's dirty limit: {e}");
        }
    }
}

/// Writes `saved` back: the lower bound cleared, the upper set, then the lower and the
/// switch; every step is tried, the first failure returned.
fn put_back(dir: &Path, saved: &[(&'static str, String)]) -> Result<(), String> {
    let get = |f: &str| saved.iter().find(|s| s.0 == f).map(|s| s.1.as_str());
    let mut first = None;
    let steps = [
        (MIN_FINE, Some("0")),
        (MAX_FINE, get(MAX_FINE)),
        (MIN_FINE, get(MIN_FINE)),
        (STRICT, get(STRICT)),
    ];
    for (file, value) in steps {
        if let Some(v) = value {
            if let Err(e) = write(dir, file, v) {
                first.get_or_insert(e);
            }
        }
    }
    first.map_or(Ok(()), Err)
}

/// The kernel's defaults for a device (no strict limit, 0% to 100% of the dirty limits):
/// for a loop device a killed run left limited.
pub fn reset_to_defaults(rdev: u64) -> Result<(), String> {
    let dir = bdi_dir(rdev);
    if !dir.join(STRICT).exists() {
        return Ok(());
    }
    put_back(
        &dir,
        &[
            (STRICT, "0".into()),
            (MIN_FINE, "0".into()),
            (MAX_FINE, "1000000".into()),
        ],
    )
}

/// Whether the device's settings are not the kernel's defaults (`strict_limit` on, or a
/// lower or upper bound set): what a run killed outright leaves on a loop device.
pub fn is_limited(rdev: u64) -> bool {
    let dir = bdi_dir(rdev);
    read(&dir, STRICT).is_ok_and(|v| v != "0")
        || read(&dir, MIN_FINE).is_ok_and(|v| v != "0")
        || read(&dir, MAX_FINE).is_ok_and(|v| v != "1000000")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_1_gib_host_may_hold_a_fifth_of_it_dirty() {
        assert_eq!(host_dirty_bytes(1 << 30), 214_745_088);
        assert_eq!(host_dirty_bytes(0), 0);
    }

    #[test]
    fn a_device_number_names_its_bdi_directory() {
        // /dev/null is 1:3.
        let rdev = std::fs::metadata("/dev/null")
            .map(|m| std::os::unix::fs::MetadataExt::rdev(&m))
            .unwrap();
        assert_eq!(bdi_dir(rdev), Path::new("/sys/class/bdi/1:3"));
    }
}
