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
    let dev = preset.build()?;
    let logical = flash::Device::logical_bytes(&dev);
    let cfg = simfs::FsConfig {
        alloc,
        ..simfs::FsConfig::for_device(logical)
    };
    Ok(simfs::SimFs::mkfs(simfs::Timed::new(dev), cfg)?)
}
