//! Where an engine's files live, as the command line and the experiments describe it: one
//! description for the B-tree, the key-value store and the hash join.

use flash::Preset;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub enum Backend {
    /// Files in RAM.
    Mem,
    /// Real files in a fresh private directory made inside `dir` (which must exist) and
    /// removed after the run, whatever happens; an interrupt (`cancel`) stops the run at
    /// its next I/O. The join keeps its spill files in `dir` itself, lock-named.
    Os {
        dir: PathBuf,
        direct_io: bool,
        cancel: trace::Cancel,
    },
    /// simfs on a simulated drive, in virtual time.
    Sim { preset: Box<Preset> },
}

impl Backend {
    /// How results name it: "mem", "os:DIR" or "sim:PRESET".
    pub fn label(&self) -> String {
        match self {
            Backend::Mem => "mem".into(),
            Backend::Os { dir, .. } => format!("os:{}", dir.display()),
            Backend::Sim { preset } => format!("sim:{}", preset.name),
        }
    }

    /// Whether its times are virtual (simulated) rather than wall-clock.
    pub fn virtual_time(&self) -> bool {
        matches!(self, Backend::Sim { .. })
    }
}

/// A fresh simfs (with `alloc`) on 90% of `preset`'s drive, timed in virtual time.
pub fn simulated_fs(
    preset: &Preset,
    alloc: simfs::AllocPolicy,
) -> Result<vfs::SimDrive, crate::LabError> {
    simulated_fs_on(preset, alloc, crate::precondition::Precondition::None, 0)
}

/// [`simulated_fs`] on a drive preconditioned first (its whole logical space, as
/// [`crate::precondition::precondition`] does it, random writes drawn with `seed`;
/// counters cleared), as a used drive meets a new file system.
pub fn simulated_fs_on(
    preset: &Preset,
    alloc: simfs::AllocPolicy,
    precondition: crate::precondition::Precondition,
    seed: u64,
) -> Result<vfs::SimDrive, crate::LabError> {
    let mut dev = preset.build()?;
    crate::precondition::precondition(&mut dev, precondition, 1.0, 0.0, seed)?;
    let logical = flash::Device::logical_bytes(&dev);
    let mut cfg = simfs::FsConfig {
        alloc,
        ..simfs::FsConfig::for_device(logical)
    };
    fit_to_drive(&mut cfg, &dev);
    Ok(simfs::SimFs::mkfs(simfs::Timed::new(dev), cfg)?)
}

/// What to record of an engine's simulated drive over virtual time (`--timeseries`,
/// `--request-log`).
#[derive(Debug, Clone, Copy)]
pub struct TimelineSpec {
    pub interval_ns: u64,
    /// Keep every request (for a request log).
    pub requests: bool,
}

/// Starts recording `fs`'s drive as `spec` asks, from now (nothing if None).
pub fn start_timeline(
    fs: &mut vfs::SimDrive,
    spec: Option<TimelineSpec>,
) -> Result<(), crate::LabError> {
    if let Some(t) = spec {
        let dev = fs.device_mut();
        let (now, stats) = (dev.now_ns(), flash::Device::stats(&dev.dev));
        let r = flash::timeline::Recording::new(t.interval_ns, now, &stats)?;
        dev.timeline = Some(if t.requests { r.keep_requests() } else { r });
    }
    Ok(())
}

/// The recording [`start_timeline`] began on `fs`'s drive, closed with its counters now.
pub fn finish_timeline(
    fs: &mut vfs::SimDrive,
) -> Result<Option<flash::timeline::TimeSeries>, crate::LabError> {
    let dev = fs.device_mut();
    match dev.timeline.take() {
        Some(r) => Ok(Some(r.finish(&flash::Device::stats(&dev.dev))?)),
        None => Ok(None),
    }
}

/// Fits a file system's configuration to the drive it is made on, as Linux does: on an FDP
/// drive with more than one handle, write-life hints map onto its handles with the
/// kernel's stream map ([`simfs::HintPlacement::linux_streams`]; Linux 4.13-5.17 turned
/// streams on when the drive had them); on a zoned drive, simfs runs its zoned log (as
/// `mkfs.f2fs -m` does) over as many whole zones as the configured size holds, without a
/// discard mode, with a log (an open zone) per class of the same map, as F2FS keeps
/// several logs (`active_logs`, 6 by default): 5, or fewer when the drive's active-zone
/// limit allows fewer (one zone more than the logs stays active). Nothing changes on any
/// other drive.
pub fn fit_to_drive(cfg: &mut simfs::FsConfig, dev: &flash::AnyDevice) {
    match dev {
        flash::AnyDevice::Ssd(s) if s.config().fdp.is_some() && s.handles() > 1 => {
            cfg.placement = Some(simfs::HintPlacement::linux_streams(s.handles()));
        }
        flash::AnyDevice::Zoned(_) => {
            if let Some(mut z) = simfs::ZoneLayout::of(dev) {
                let fit = (cfg.size_bytes / z.zone_bytes) as u32;
                z.zones = z.zones.min(fit.max(1));
                let logs = match z.max_active_zones {
                    0 => 5,
                    n => (n - 1).min(5) as u16,
                };
                *cfg = simfs::FsConfig {
                    placement: (logs > 1).then(|| simfs::HintPlacement::linux_streams(logs)),
                    ..simfs::FsConfig::for_zoned(z)
                };
            }
        }
        _ => {}
    }
}

/// A file system an engine owns while the caller keeps a handle on it (to read the
/// simulated drive after the run, e.g. its wear): every call is forwarded unchanged, so a
/// run gives the numbers it gives without the handle.
pub struct Watched<V>(std::rc::Rc<std::cell::RefCell<V>>);

impl<V> Watched<V> {
    /// The file system to give the engine, and the caller's handle on it.
    pub fn new(v: V) -> (Watched<V>, std::rc::Rc<std::cell::RefCell<V>>) {
        let inner = std::rc::Rc::new(std::cell::RefCell::new(v));
        (Watched(inner.clone()), inner)
    }
}

impl<V: vfs::Vfs> vfs::Vfs for Watched<V> {
    fn open(&mut self, name: &str, mode: vfs::OpenMode) -> Result<vfs::Fd, vfs::VfsError> {
        self.0.borrow_mut().open(name, mode)
    }
    fn close(&mut self, fd: vfs::Fd) {
        self.0.borrow_mut().close(fd)
    }
    fn len(&self, fd: vfs::Fd) -> u64 {
        self.0.borrow().len(fd)
    }
    fn read_at(
        &mut self,
        fd: vfs::Fd,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, vfs::VfsError> {
        self.0.borrow_mut().read_at(fd, offset, buf)
    }
    fn write_at(&mut self, fd: vfs::Fd, offset: u64, data: &[u8]) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().write_at(fd, offset, data)
    }
    fn set_write_hint(&mut self, fd: vfs::Fd, hint: vfs::WriteHint) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().set_write_hint(fd, hint)
    }
    fn fallocate(&mut self, fd: vfs::Fd, offset: u64, len: u64) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().fallocate(fd, offset, len)
    }
    fn truncate(&mut self, fd: vfs::Fd, len: u64) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().truncate(fd, len)
    }
    fn fsync(&mut self, fd: vfs::Fd) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().fsync(fd)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().rename(from, to)
    }
    fn unlink(&mut self, name: &str) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().unlink(name)
    }
    fn sync_dir(&mut self) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().sync_dir()
    }
    fn sync_files(&mut self, fds: &[vfs::Fd], dir: bool) -> Result<(), vfs::VfsError> {
        self.0.borrow_mut().sync_files(fds, dir)
    }
    fn list(&self) -> Vec<String> {
        self.0.borrow().list()
    }
    fn exists(&self, name: &str) -> bool {
        self.0.borrow().exists(name)
    }
    fn now_ns(&self) -> u64 {
        self.0.borrow().now_ns()
    }
    fn think(&mut self, ns: u64) {
        self.0.borrow_mut().think(ns)
    }
    fn idle(&mut self, ns: u64) {
        self.0.borrow_mut().idle(ns)
    }
    fn park(&mut self) {
        self.0.borrow_mut().park()
    }
    fn resume(&mut self) {
        self.0.borrow_mut().resume()
    }
    fn io_time(&self) -> vfs::IoTime {
        self.0.borrow().io_time()
    }
}
