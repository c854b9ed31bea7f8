//! Loop devices and what backs them, asked of the kernel (`LOOP_GET_STATUS64`), never
//! inferred from the backing file's path: a path can be shadowed by a mount or name a
//! file since deleted or in another mount namespace, but the device and inode the kernel
//! reports cannot.

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;

/// `LOOP_GET_STATUS64` (linux/loop.h).
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// `struct loop_info64` (linux/loop.h).
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// What backs an attached loop device, as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backing {
    /// `st_dev` of the backing file (the file system it lies on), as `stat` gives it.
    pub dev: u64,
    /// Its inode number.
    pub ino: u64,
    /// `st_rdev` of the backing file: the device, when the backing file is a device node.
    pub rdev: u64,
}

/// The kernel's "huge" device encoding (`huge_encode_dev`) as `stat`'s `st_dev`.
fn from_kernel(dev: u64) -> u64 {
    let major = (dev & 0xfff00) >> 8;
    let minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
    libc::makedev(major as u32, minor as u32)
}

/// What backs `/dev/NAME`, or None if it is not an attached loop device.
pub fn backing(name: &str) -> Option<Backing> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(format!("/dev/{name}"))
        .ok()?;
    // SAFETY: an all-zero loop_info64 is a valid value of the plain-data struct.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 through the pointer.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) };
    (rc == 0).then(|| Backing {
        dev: from_kernel(info.lo_device),
        ino: info.lo_inode,
        rdev: from_kernel(info.lo_rdevice),
    })
}

/// Every attached loop device: (`/dev/loopN`, what backs it), by name.
pub fn attached() -> Vec<(String, Backing)> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<(String, Backing)> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            // Only attached ones have a backing file.
            if !name.starts_with("loop") || !e.path().join("loop/backing_file").exists() {
                return None;
            }
            Some((format!("/dev/{name}"), backing(&name)?))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_kernel_encoding_decodes_as_stat_encodes() {
        // 7:0 and a minor past 255 (259:65536 is how NVMe partitions can number).
        assert_eq!(from_kernel(7 << 8), libc::makedev(7, 0));
        let (major, minor) = (259u64, 65_537u64);
        let huge = (major << 8) | (minor & 0xff) | ((minor & !0xff) << 12);
        assert_eq!(from_kernel(huge), libc::makedev(259, 65_537));
    }

    #[test]
    fn a_loop_device_reports_its_backing_file() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("b.img");
        std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
        let Ok(o) = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
        else {
            eprintln!("a_loop_device_reports_its_backing_file: SKIPPED: no losetup");
            return;
        };
        if !o.status.success() {
            eprintln!(
                "a_loop_device_reports_its_backing_file: SKIPPED: needs root and loop devices"
            );
            return;
        }
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let found = attached().into_iter().find(|(d, _)| *d == dev);
        let _ = std::process::Command::new("losetup")
            .args(["-d", &dev])
            .status();
        let m = std::fs::metadata(&img).unwrap();
        let (_, b) = found.expect("listed");
        assert_eq!((b.dev, b.ino), (m.dev(), m.ino()));
    }
}
