//! A real probe target in wall-clock time: a new file (created, used and removed, even on
//! an error or an interrupt) or a whole block device the user said may be erased (refused
//! while it or a partition of it is mounted, swapped on or held by another driver).
//!
//! Every read and write uses O_DIRECT from 4 KiB-aligned buffers, so the page cache is out
//! of the way. A queue depth of N is N threads, each with its own buffer, issuing
//! synchronous `pread`/`pwrite` (with 2 cores here, io_uring would save CPU, not change
//! what the device shows at these rates; threads need no new dependency). A flush is
//! `fdatasync`; a discard is `BLKDISCARD` on a device and a punched hole on a file (the
//! file system's discard, not the drive's: see [`OsTarget::discard_kind`]).

use super::target::{OpTime, ProbeOp, ProbeTarget, Stream};
use anyhow::{anyhow, bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use trace::Cancel;

/// O_DIRECT's alignment: offsets, lengths and buffers (the logical block size of every
/// device here, and a multiple of the rest).
const ALIGN: usize = 4096;
/// `_IOR(0x12, 114, size_t)` from linux/fs.h: the device's size in bytes.
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
/// `_IO(0x12, 119)` from linux/fs.h: discard a byte range `[offset, length]`.
const BLKDISCARD: libc::c_ulong = 0x1277;

/// File systems that keep files in memory: nothing there is a drive.
const MEMORY_FILE_SYSTEMS: [&str; 2] = ["tmpfs", "ramfs"];

/// The size of the file system holding `path`.
fn fs_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a zeroed statvfs is a valid value for statvfs(3) to fill.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs reads a NUL-terminated path and fills the struct it is given.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_blocks as u64 * st.f_frsize as u64)
}

/// Removes the probe's file when dropped: after the probe, on an error, on an interrupt
/// (and says it is left behind if the user insists on exiting first).
struct RemoveOnDrop {
    path: PathBuf,
    _held: trace::leftovers::Held,
}

impl RemoveOnDrop {
    fn new(path: &Path) -> RemoveOnDrop {
        let held = trace::leftovers::hold(format!(
            "file {} (calibrate's probe; remove it before calibrating again)",
            path.display()
        ));
        RemoveOnDrop {
            path: path.to_path_buf(),
            _held: held,
        }
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            eprintln!(
                "flashlab calibrate: could not remove the probe file {}: {e}",
                self.path.display()
            );
        }
    }
}

enum Kind {
    File {
        fs: String,
        discard_mount_option: bool,
    },
    Device,
}

pub struct OsTarget {
    file: File,
    path: PathBuf,
    kind: Kind,
    region_bytes: u64,
    capacity_bytes: u64,
    what: String,
    cancel: Cancel,
    // Declared last: dropped after the file is closed.
    _remove: Option<RemoveOnDrop>,
}

/// A device number's (major, minor), as Linux's `dev_t` packs them.
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// The kernel's name of block device `major:minor` (`vda`, `vda1`, `nvme0n1p2`).
fn block_name(major: u64, minor: u64) -> Option<String> {
    let p = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(p.file_name()?.to_string_lossy().into_owned())
}

/// The whole disk a block device belongs to (itself unless it is a partition).
fn disk_of(name: &str) -> String {
    let sys = PathBuf::from(format!("/sys/class/block/{name}"));
    if sys.join("partition").exists() {
        if let Some(parent) = std::fs::canonicalize(&sys).ok().and_then(|p| {
            p.parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
        }) {
            return parent;
        }
    }
    name.to_string()
}

fn sys_text(path: impl AsRef<Path>) -> Option<String> {
    let t = std::fs::read_to_string(path).ok()?;
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The disk's model string (`device/model`), or its driver and vendor:device ids where it
/// has none (virtio disks), and whether the kernel calls it rotational.
pub fn disk_model(disk: &str) -> String {
    let dev = PathBuf::from(format!("/sys/class/block/{disk}/device"));
    let model = sys_text(dev.join("model")).or_else(|| {
        let driver = std::fs::read_link(dev.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let ids = match (sys_text(dev.join("vendor")), sys_text(dev.join("device"))) {
            (Some(v), Some(d)) => Some(format!("{v}:{d}")),
            _ => None,
        };
        match (driver, ids) {
            (None, None) => None,
            (d, i) => Some(
                [d, i.map(|i| format!("vendor:device {i}"))]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        }
    });
    let rotational =
        sys_text(format!("/sys/class/block/{disk}/queue/rotational")).is_some_and(|r| r == "1");
    format!(
        "/dev/{disk}: {}{}",
        model.unwrap_or_else(|| "no model string".into()),
        if rotational { ", rotational" } else { "" }
    )
}

fn disk_bytes(disk: &str) -> Option<u64> {
    sys_text(format!("/sys/class/block/{disk}/size"))?
        .parse::<u64>()
        .ok()
        .map(|sectors| sectors * 512)
}

/// One line of /proc/self/mountinfo: (major, minor, mount point, file system type, source,
/// mount options and super options).
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub major: u64,
    pub minor: u64,
    pub point: String,
    pub fs: String,
    pub source: String,
    pub options: String,
}

/// Parses /proc/self/mountinfo's text (proc(5)); lines it cannot read are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let f: Vec<&str> = head.split(' ').collect();
            let (major, minor) = f.get(2)?.split_once(':')?;
            let t: Vec<&str> = tail.split(' ').collect();
            Some(Mount {
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
                point: f.get(4)?.to_string(),
                fs: t.first()?.to_string(),
                source: t.get(1).unwrap_or(&"").to_string(),
                options: format!("{},{}", f.get(5)?, t.get(2).unwrap_or(&"")),
            })
        })
        .collect()
}

/// Why a block device must not be erased, if it must not: it or one of its partitions
/// (`devices`: name, major, minor) is mounted (mountinfo, or by source in /proc/mounts),
/// used as swap, or has holders (device mapper, RAID).
pub fn in_use(
    devices: &[(String, u64, u64)],
    mountinfo: &str,
    mounts: &str,
    swaps: &str,
    holders: &dyn Fn(&str) -> Vec<String>,
) -> Option<String> {
    let mi = parse_mountinfo(mountinfo);
    for (name, major, minor) in devices {
        if let Some(m) = mi.iter().find(|m| m.major == *major && m.minor == *minor) {
            return Some(format!("/dev/{name} is mounted on {}", m.point));
        }
        let dev = format!("/dev/{name}");
        if let Some(l) = mounts
            .lines()
            .find(|l| l.split(' ').next() == Some(dev.as_str()))
        {
            return Some(format!(
                "/dev/{name} is mounted ({})",
                l.split(' ').nth(1).unwrap_or("?")
            ));
        }
        if swaps
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().next() == Some(dev.as_str()))
        {
            return Some(format!("/dev/{name} is used as swap"));
        }
        let h = holders(name);
        if !h.is_empty() {
            return Some(format!("/dev/{name} is held by {}", h.join(", ")));
        }
    }
    None
}

/// A device and its partitions: (name, major, minor).
fn device_and_partitions(name: &str, major: u64, minor: u64) -> Vec<(String, u64, u64)> {
    let mut v = vec![(name.to_string(), major, minor)];
    if let Ok(entries) = std::fs::read_dir(format!("/sys/class/block/{name}")) {
        for e in entries.flatten() {
            let child = e.file_name().to_string_lossy().into_owned();
            if !e.path().join("partition").exists() {
                continue;
            }
            if let Some((ma, mi)) = sys_text(e.path().join("dev")).and_then(|d| {
                let (a, b) = d.split_once(':')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            }) {
                v.push((child, ma, mi));
            }
        }
    }
    v
}

/// Loop devices whose backing file is one of `devices` (a loop device stacked on it, which
/// sysfs does not list as a holder), as the kernel reports their backing (a node since
/// deleted or in another mount namespace counts as well).
fn loops_over(devices: &[(String, u64, u64)]) -> Vec<String> {
    trace::loopdev::attached()
        .into_iter()
        .filter(|(_, b)| {
            let (ma, mi) = major_minor(b.rdev);
            b.rdev != 0 && devices.iter().any(|(_, a, c)| (*a, *c) == (ma, mi))
        })
        .map(|(d, _)| format!("{d} (a loop device over it)"))
        .collect()
}

/// Why the device must not be erased because of what runs here: loop devices stacked on it
/// or a partition, or processes holding one of them open (`sleep 60 < /dev/loop0`).
fn used_now(devices: &[(String, u64, u64)]) -> Option<String> {
    let loops = loops_over(devices);
    if !loops.is_empty() {
        return Some(format!("it is used by {}", loops.join(", ")));
    }
    for (name, major, minor) in devices {
        let rdev = libc::makedev(*major as u32, *minor as u32);
        let users = trace::procs::users(trace::procs::Target::BlockDevice(rdev));
        if !users.is_empty() {
            return Some(format!(
                "/dev/{name} is open in process {}",
                trace::procs::list(&users, 8)
            ));
        }
    }
    None
}

/// The type of the file system with `st_dev` `dev` (mountinfo), if mounted.
fn fs_type_of_dev(dev: u64) -> Option<String> {
    let (major, minor) = major_minor(dev);
    parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
        .into_iter()
        .find(|m| m.major == major && m.minor == minor)
        .map(|m| m.fs)
}

fn holders_of(name: &str) -> Vec<String> {
    std::fs::read_dir(format!("/sys/class/block/{name}/holders"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn open_direct(path: &Path, extra_flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | extra_flags)
        .open(path)
}

impl OsTarget {
    /// Creates `path` (it must not exist), reserves `size_bytes` and opens it with
    /// O_DIRECT. The file is removed when the target is dropped.
    pub fn create_file(path: &Path, size_bytes: u64, cancel: Cancel) -> Result<OsTarget> {
        // A file system in memory is refused before --size bytes of RAM are reserved.
        let parent = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Some(fs) = std::fs::metadata(parent)
            .ok()
            .and_then(|m| fs_type_of_dev(m.dev()))
            .filter(|fs| MEMORY_FILE_SYSTEMS.contains(&fs.as_str()))
        {
            bail!(
                "{} is on {fs}, in memory: flashlab measures a drive here, put the file on a disk's file system",
                path.display()
            );
        }
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => anyhow!(
                    "{} exists: flashlab uses a new file only (it writes, discards and removes it), give a path that does not exist",
                    path.display()
                ),
                _ => anyhow!("cannot create {}: {e}", path.display()),
            })?;
        let remove = RemoveOnDrop::new(path);
        // SAFETY: fallocate on an open descriptor with in-range arguments.
        let rc = unsafe { libc::fallocate(created.as_raw_fd(), 0, 0, size_bytes as libc::off_t) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            bail!(
                "cannot reserve {size_bytes} bytes for {}: {e}",
                path.display()
            );
        }
        drop(created);
        let file = open_direct(path, 0).map_err(|e| {
            anyhow!(
                "{}: O_DIRECT is not available here ({e}); calibrate needs it to measure the drive, not the page cache: put the file on a file system that has it",
                path.display()
            )
        })?;
        let dev = std::fs::metadata(path)?.dev();
        let (major, minor) = major_minor(dev);
        let mounts =
            parse_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default());
        let mount = mounts.iter().find(|m| m.major == major && m.minor == minor);
        let fs = mount.map_or("an unknown file system".to_string(), |m| m.fs.clone());
        let discard_mount_option =
            mount.is_some_and(|m| m.options.split(',').any(|o| o == "discard"));
        if MEMORY_FILE_SYSTEMS.contains(&fs.as_str()) {
            bail!(
                "{} is on {fs}, in memory: flashlab measures a drive here, put the file on a disk's file system",
                path.display()
            );
        }
        let disk = block_name(major, minor).map(|n| disk_of(&n));
        let (what, capacity) = match &disk {
            Some(d) => (format!("file on {fs} ({})", disk_model(d)), disk_bytes(d)),
            // btrfs, overlay and network file systems have no one block device behind
            // them: the file system's size stands for the drive's.
            None => (
                format!("file on {fs} (no single block device behind it)"),
                fs_bytes(path),
            ),
        };
        Ok(OsTarget {
            file,
            path: path.to_path_buf(),
            kind: Kind::File {
                fs,
                discard_mount_option,
            },
            region_bytes: size_bytes,
            capacity_bytes: capacity.unwrap_or(size_bytes).max(size_bytes),
            what,
            cancel,
            _remove: Some(remove),
        })
    }

    /// Opens block device `path` to probe (and erase) its first `size_bytes`. Refused if
    /// it is not a block device, or it or a partition of it is in use; the open is
    /// exclusive (O_EXCL), so the kernel refuses too if anything holds it.
    pub fn open_device(path: &Path, size_bytes: u64, cancel: Cancel) -> Result<OsTarget> {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
        if !meta.file_type().is_block_device() {
            bail!(
                "{} is not a block device (to probe a file, use --file with a path that does not exist)",
                path.display()
            );
        }
        let (major, minor) = major_minor(meta.rdev());
        let name = block_name(major, minor)
            .with_context(|| format!("{}: no /sys/dev/block/{major}:{minor}", path.display()))?;
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let devices = device_and_partitions(&name, major, minor);
        if let Some(why) = in_use(
            &devices,
            &read("/proc/self/mountinfo"),
            &read("/proc/mounts"),
            &read("/proc/swaps"),
            &holders_of,
        ) {
            bail!("refusing to erase {}: {why}", path.display());
        }
        let file = open_direct(path, libc::O_EXCL).map_err(|e| {
            anyhow!(
                "cannot open {} exclusively with O_DIRECT: {e} (EBUSY means something holds it)",
                path.display()
            )
        })?;
        // The exclusive open keeps mounts and device mappers off from here on; what it
        // does not keep off (a loop device over it, a plain open) is checked now that it
        // is held.
        if let Some(why) = used_now(&devices) {
            bail!("refusing to erase {}: {why}", path.display());
        }
        let mut bytes: u64 = 0;
        // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
        if unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut bytes as *mut u64) } != 0 {
            bail!(
                "cannot read the size of {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        if size_bytes > bytes {
            bail!(
                "--size {size_bytes} is larger than {} ({bytes} bytes)",
                path.display()
            );
        }
        let disk = disk_of(&name);
        Ok(OsTarget {
            file,
            path: path.to_path_buf(),
            kind: Kind::Device,
            region_bytes: size_bytes,
            capacity_bytes: bytes,
            what: if disk == name {
                disk_model(&disk)
            } else {
                format!("partition /dev/{name} of {}", disk_model(&disk))
            },
            cancel,
            _remove: None,
        })
    }

    fn op(&self, op: &ProbeOp, buf: &mut [u8]) -> Result<()> {
        let fd = self.file.as_raw_fd();
        let r = match *op {
            ProbeOp::Read {
                offset_bytes,
                len_bytes,
            } => self
                .file
                .read_exact_at(&mut buf[..len_bytes as usize], offset_bytes),
            ProbeOp::Write {
                offset_bytes,
                len_bytes,
            } => self
                .file
                .write_all_at(&buf[..len_bytes as usize], offset_bytes),
            ProbeOp::Flush => self.file.sync_data(),
            ProbeOp::Discard {
                offset_bytes,
                len_bytes,
            } => {
                let rc = match self.kind {
                    // SAFETY: fallocate on an open descriptor with in-range arguments.
                    Kind::File { .. } => unsafe {
                        libc::fallocate(
                            fd,
                            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                            offset_bytes as libc::off_t,
                            len_bytes as libc::off_t,
                        )
                    },
                    Kind::Device => {
                        let range: [u64; 2] = [offset_bytes, len_bytes];
                        // SAFETY: BLKDISCARD reads two u64 through the pointer.
                        unsafe { libc::ioctl(fd, BLKDISCARD, range.as_ptr()) }
                    }
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            }
        };
        r.with_context(|| format!("{op:?} on {}", self.path.display()))
    }
}

/// A buffer of `len` bytes at a 4 KiB-aligned address, filled with bytes that do not
/// compress (a drive that compresses or deduplicates would otherwise write nothing).
struct Aligned {
    v: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize, seed: u64) -> Aligned {
        let mut v = vec![0u8; len + ALIGN];
        let start = v.as_ptr().align_offset(ALIGN);
        let mut x = seed | 1;
        for b in v.iter_mut() {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        Aligned { v, start, len }
    }

    fn slice(&mut self) -> &mut [u8] {
        &mut self.v[self.start..self.start + self.len]
    }
}

impl ProbeTarget for OsTarget {
    fn describe(&self) -> String {
        self.what.clone()
    }

    fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    fn region_bytes(&self) -> u64 {
        self.region_bytes
    }

    fn discards_are_trims(&self) -> bool {
        matches!(self.kind, Kind::Device)
    }

    fn discard_kind(&self) -> String {
        match &self.kind {
            Kind::Device => format!(
                "BLKDISCARD on {}: the kernel sends the drive TRIM (deallocate) commands",
                self.path.display()
            ),
            Kind::File {
                fs,
                discard_mount_option: true,
            } => format!(
                "holes punched in a file on {fs} mounted with discard: the file system frees the blocks and sends the drive discards after its journal commits, so the times are the file system's work, not the drive's TRIM"
            ),
            Kind::File { fs, .. } => format!(
                "holes punched in a file on {fs} without the discard mount option: the drive sees no discard; the times are the file system's work"
            ),
        }
    }

    fn run(&mut self, streams: &[Stream]) -> Result<Vec<Vec<OpTime>>> {
        let start = Instant::now();
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
        let next: Vec<AtomicUsize> = streams.iter().map(|_| AtomicUsize::new(0)).collect();
        let this = &*self;
        let done: Vec<Vec<(usize, OpTime)>> = std::thread::scope(|s| {
            let mut handles = Vec::new();
            for (si, stream) in streams.iter().enumerate() {
                // Reads and writes move data; discards and flushes need no buffer.
                let buf_len = stream
                    .ops
                    .iter()
                    .filter(|o| matches!(o, ProbeOp::Read { .. } | ProbeOp::Write { .. }))
                    .map(ProbeOp::len_bytes)
                    .max()
                    .unwrap_or(0);
                let workers = (stream.queue_depth.max(1) as usize).min(stream.ops.len());
                for w in 0..workers {
                    let (next, failed, first_error) = (&next[si], &failed, &first_error);
                    handles.push(s.spawn(move || {
                        let mut buf = Aligned::new(buf_len as usize, (si * 1000 + w) as u64 + 1);
                        let mut times = Vec::new();
                        let begin = start + Duration::from_nanos(stream.start_delay_ns);
                        if let Some(wait) = begin.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                        loop {
                            if this.cancel.is_cancelled() || failed.load(Ordering::SeqCst) {
                                break;
                            }
                            let i = next.fetch_add(1, Ordering::SeqCst);
                            let Some(op) = stream.ops.get(i) else { break };
                            let t0 = start.elapsed().as_nanos() as u64;
                            if let Err(e) = this.op(op, buf.slice()) {
                                failed.store(true, Ordering::SeqCst);
                                first_error.lock().expect("not poisoned").get_or_insert(e);
                                break;
                            }
                            let t1 = start.elapsed().as_nanos() as u64;
                            times.push((
                                i,
                                OpTime {
                                    submit_ns: t0,
                                    complete_ns: t1.max(t0),
                                },
                            ));
                        }
                        (si, times)
                    }));
                }
            }
            let mut per_stream: Vec<Vec<(usize, OpTime)>> = vec![Vec::new(); streams.len()];
            for h in handles {
                let (si, t) = h.join().expect("a probe thread panicked");
                per_stream[si].extend(t);
            }
            per_stream
        });
        if let Some(e) = first_error.into_inner().expect("not poisoned") {
            return Err(e);
        }
        if self.cancel.is_cancelled() {
            bail!("interrupted");
        }
        Ok(done
            .into_iter()
            .map(|mut v| {
                v.sort_by_key(|(i, _)| *i);
                v.into_iter().map(|(_, t)| t).collect()
            })
            .collect())
    }

    fn idle(&mut self, ns: u64) -> Result<()> {
        let end = Instant::now() + Duration::from_nanos(ns);
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            if self.cancel.is_cancelled() {
                bail!("interrupted");
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
30 22 8:17 / /mnt/data rw,relatime shared:2 - xfs /dev/sdb1 rw
";

    #[test]
    fn mountinfo_lines_give_device_point_and_options() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].major, m[0].minor, m[0].fs.as_str()), (253, 0, "ext4"));
        assert!(m[0].options.split(',').any(|o| o == "discard"));
        assert_eq!(m[1].point, "/mnt/data");
    }

    #[test]
    fn a_device_with_a_mounted_partition_is_refused() {
        let none = |_: &str| Vec::new();
        let sdb = vec![("sdb".to_string(), 8, 16), ("sdb1".to_string(), 8, 17)];
        let why = in_use(&sdb, MOUNTINFO, "", "", &none).unwrap();
        assert!(
            why.contains("/dev/sdb1") && why.contains("/mnt/data"),
            "{why}"
        );
        // Mounted as /proc/mounts says, swap, holders.
        let sdc = vec![("sdc".to_string(), 8, 32)];
        let why = in_use(&sdc, "", "/dev/sdc /srv ext4 rw 0 0\n", "", &none).unwrap();
        assert!(why.contains("mounted (/srv)"), "{why}");
        let swaps = "Filename Type Size Used Priority\n/dev/sdc partition 1 0 -2\n";
        assert!(in_use(&sdc, "", "", swaps, &none).unwrap().contains("swap"));
        let dm = |_: &str| vec!["dm-0".to_string()];
        assert!(in_use(&sdc, "", "", "", &dm).unwrap().contains("dm-0"));
        assert!(in_use(&sdc, MOUNTINFO, "", "", &none).is_none());
    }

    #[test]
    fn device_numbers_unpack_as_linux_packs_them() {
        assert_eq!(major_minor(libc::makedev(253, 0)), (253, 0));
        assert_eq!(major_minor(libc::makedev(259, 70_000)), (259, 70_000));
    }
}
