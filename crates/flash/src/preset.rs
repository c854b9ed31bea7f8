//! Device presets: TOML descriptions of real drives (in `presets/` at the repository root,
//! compiled into the binary), loading, scaling and building a device from them.

use crate::{Command, Device, DeviceStats, FlashError, Hdd, HddConfig, Ssd, SsdConfig, ZonedSsd};
use serde::{Deserialize, Serialize};

/// The largest preset file read (the built-in ones are a few KiB).
const MAX_PRESET_BYTES: u64 = 1 << 20;

/// The kind of device a preset describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
// A configuration exists once per preset and per drive, never in bulk: boxing the SSD's
// to even the variants out would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum DeviceConfig {
    Ssd(SsdConfig),
    Hdd(HddConfig),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    pub name: String,
    pub description: String,
    #[serde(flatten)]
    pub device: DeviceConfig,
    /// What scaling changed, for the user to see.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// Scaling a drive down keeps at least this many blocks per die, so that the blocks GC
/// keeps free or open on each die stay a small part of the over-provisioning.
pub const MIN_BLOCKS_PER_DIE: u64 = 256;
/// ...but blocks never shrink below this many pages.
pub const MIN_PAGES_PER_BLOCK: u32 = 16;

/// The presets shipped with flashlab: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = &[
    ("x25e", include_str!("../../../presets/x25e.toml")),
    ("840pro", include_str!("../../../presets/840pro.toml")),
    ("mx500", include_str!("../../../presets/mx500.toml")),
    ("cosmos", include_str!("../../../presets/cosmos.toml")),
    ("openssd", include_str!("../../../presets/openssd.toml")),
    ("ssd2011", include_str!("../../../presets/ssd2011.toml")),
    ("hdd7200", include_str!("../../../presets/hdd7200.toml")),
    ("nvme", include_str!("../../../presets/nvme.toml")),
    ("980", include_str!("../../../presets/980.toml")),
];

impl Preset {
    /// Parses a preset from TOML text; `origin` names the file or preset in errors.
    pub fn from_toml(origin: &str, text: &str) -> Result<Preset, FlashError> {
        let p: Preset = toml::from_str(text).map_err(|e| FlashError::Preset {
            name: origin.to_string(),
            msg: e.to_string(),
        })?;
        p.validate().map_err(|e| FlashError::Preset {
            name: origin.to_string(),
            msg: e.to_string(),
        })?;
        Ok(p)
    }

    /// A built-in preset by name, or a TOML file if `name_or_path` ends in `.toml`.
    pub fn load(name_or_path: &str) -> Result<Preset, FlashError> {
        if name_or_path.ends_with(".toml") {
            let bad = |msg: String| FlashError::Preset {
                name: name_or_path.to_string(),
                msg,
            };
            // A device or FIFO named *.toml would never end (or never start): only a
            // regular file of a sane size is read.
            let meta =
                std::fs::metadata(name_or_path).map_err(|e| bad(format!("cannot read: {e}")))?;
            if !meta.is_file() {
                return Err(bad(
                    "not a regular file (a device, FIFO or directory); a preset is a TOML file"
                        .into(),
                ));
            }
            if meta.len() > MAX_PRESET_BYTES {
                return Err(bad(format!(
                    "{} bytes; a preset file is at most {MAX_PRESET_BYTES} bytes",
                    meta.len()
                )));
            }
            let text = std::fs::read_to_string(name_or_path)
                .map_err(|e| bad(format!("cannot read: {e}")))?;
            return Self::from_toml(name_or_path, &text);
        }
        match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, text)) => Self::from_toml(n, text),
            None => Err(FlashError::Preset {
                name: name_or_path.to_string(),
                msg: format!(
                    "no such preset; built-in presets are {} (or give a path ending in .toml)",
                    BUILTIN
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    pub fn validate(&self) -> Result<(), FlashError> {
        match &self.device {
            DeviceConfig::Ssd(c) => c.validate(),
            DeviceConfig::Hdd(c) => c.validate(),
        }
    }

    pub fn logical_bytes(&self) -> u64 {
        match &self.device {
            DeviceConfig::Ssd(c) => c.geometry.logical_bytes,
            DeviceConfig::Hdd(c) => c.logical_bytes,
        }
    }

    /// The same drive with a different user-visible capacity; parallelism, page size,
    /// over-provisioning and timing are kept. A smaller page-mapped drive halves its pages
    /// per block (down to [`MIN_PAGES_PER_BLOCK`]) until it has the full drive's blocks per
    /// die, so GC's per-die reserve and the open frontiers keep their share of the flash
    /// (other FTLs, and any drive, until [`MIN_BLOCKS_PER_DIE`]);
    /// a mapping cache keeps its share of the map (so a scaled-down DRAM-less drive still
    /// misses as often); `notes` records the changes.
    pub fn with_capacity(self, logical_bytes: u64) -> Preset {
        self.resized(logical_bytes, true)
    }

    /// The same drive with a different user-visible capacity and exactly the preset's
    /// block shape (for a user who chose the pages per block).
    pub fn with_capacity_same_blocks(self, logical_bytes: u64) -> Preset {
        self.resized(logical_bytes, false)
    }

    fn resized(mut self, logical_bytes: u64, scale_blocks: bool) -> Preset {
        match &mut self.device {
            DeviceConfig::Ssd(c) => {
                let g = &mut c.geometry;
                let before_bytes = g.logical_bytes;
                let full_blocks_per_die = g.blocks_per_die();
                g.logical_bytes = logical_bytes;
                if let Some(e) = &mut c.endurance {
                    // The ratings stay those of the drive the preset describes.
                    e.rated_logical_bytes.get_or_insert(before_bytes);
                }
                if let Some(mc) = &mut c.mapping_cache {
                    let scaled = (mc.cache_bytes as u128 * logical_bytes as u128
                        / before_bytes.max(1) as u128) as u64;
                    let least = match mc.granularity {
                        crate::CacheGranularity::Entry => mc.entry_bytes,
                        crate::CacheGranularity::Page => g.mapping_unit_bytes,
                    };
                    let scaled = scaled.max(least as u64);
                    if scaled != mc.cache_bytes {
                        self.notes.push(format!(
                            "scaled to {logical_bytes} bytes: mapping cache {} -> {scaled} bytes, the same share of the map",
                            mc.cache_bytes
                        ));
                        mc.cache_bytes = scaled;
                    }
                }
                if c.slc_cache.is_some() && logical_bytes < before_bytes {
                    self.notes.push(format!(
                        "scaled to {logical_bytes} bytes: the SLC cache scales with capacity, and how full it is after preconditioning depends on the idle time since; compare sizes after a timed warm-up (sim --timed-warmup, docs/timing.md)"
                    ));
                }
                if !scale_blocks {
                    return self;
                }
                let before = g.pages_per_block;
                // A page-mapped drive keeps the full drive's blocks per die (as near as
                // halving the pages per block reaches, down to MIN_PAGES_PER_BLOCK): every
                // count of blocks, GC's free reserve and each die's open frontiers (the
                // host's, GC's, the translation pages'), keeps its share of the flash, and
                // so WAF and a cached map's translation GC keep theirs (docs/timing.md,
                // "Blocks per die kept"). A log-block FTL maps whole blocks, so its blocks
                // keep their size down to the floor alone.
                let target =
                    if c.ftl == crate::mapping::FtlKind::Page && logical_bytes < before_bytes {
                        full_blocks_per_die.max(MIN_BLOCKS_PER_DIE)
                    } else {
                        MIN_BLOCKS_PER_DIE
                    };
                while g.blocks_per_die() < target && g.pages_per_block / 2 >= MIN_PAGES_PER_BLOCK {
                    g.pages_per_block /= 2;
                }
                if g.pages_per_block != before {
                    self.notes.push(format!(
                        "scaled to {logical_bytes} bytes: pages per block {before} -> {} to keep {} blocks per die",
                        g.pages_per_block,
                        g.blocks_per_die()
                    ));
                    // A block of 1/k the pages is erased k times as often per byte
                    // written: one erase in k takes the full erase time, so the dies spend
                    // the full drive's erase time per byte, each erase as long as its
                    // (docs/timing.md).
                    let t = &mut c.timing;
                    t.erase_every = (t.erase_every * before / g.pages_per_block).max(1);
                    self.notes.push(format!(
                        "scaled to {logical_bytes} bytes: one erase in {} takes the full {} us (the others none), the full drive's erase time per byte",
                        t.erase_every,
                        t.erase_ns / 1000
                    ));
                }
            }
            DeviceConfig::Hdd(c) => c.logical_bytes = logical_bytes,
        }
        self
    }

    pub fn ssd_config(&self) -> Option<&SsdConfig> {
        match &self.device {
            DeviceConfig::Ssd(c) => Some(c),
            DeviceConfig::Hdd(_) => None,
        }
    }

    pub fn ssd_config_mut(&mut self) -> Option<&mut SsdConfig> {
        match &mut self.device {
            DeviceConfig::Ssd(c) => Some(c),
            DeviceConfig::Hdd(_) => None,
        }
    }

    pub fn build(&self) -> Result<AnyDevice, FlashError> {
        Ok(match &self.device {
            DeviceConfig::Ssd(c) if c.zoned.is_some() => {
                AnyDevice::Zoned(Box::new(ZonedSsd::new(c.clone())?))
            }
            DeviceConfig::Ssd(c) => AnyDevice::Ssd(Box::new(Ssd::new(c.clone())?)),
            DeviceConfig::Hdd(c) => AnyDevice::Hdd(Box::new(Hdd::new(c.clone())?)),
        })
    }
}

/// A zoned drive's submit, out of the way of the conventional drive's dispatch (the
/// replay loop calls [`AnyDevice::submit`] once per request).
#[cold]
#[inline(never)]
fn zoned_submit(d: &mut ZonedSsd, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
    d.submit(cmd, now_ns)
}

/// Any device model, behind one type.
pub enum AnyDevice {
    Ssd(Box<Ssd>),
    Hdd(Box<Hdd>),
    /// An SSD with `[ssd.zoned]` ([`crate::zoned`]).
    Zoned(Box<ZonedSsd>),
}

impl AnyDevice {
    /// The wear report of the measured phase ([`Ssd::wear_report`]); None for a disk or a
    /// drive without a rated endurance.
    pub fn wear_report(&self) -> Option<crate::WearReport> {
        match self {
            AnyDevice::Ssd(d) => d.wear_report(None),
            AnyDevice::Zoned(d) => d.wear_report(),
            AnyDevice::Hdd(_) => None,
        }
    }

    /// Host bytes written since the last [`Device::reset_stats`], cheaply.
    pub fn host_write_bytes(&self) -> u64 {
        match self {
            AnyDevice::Ssd(d) => d.host_write_bytes(),
            AnyDevice::Hdd(d) => d.stats().host_write_bytes,
            AnyDevice::Zoned(d) => d.stats().host_write_bytes,
        }
    }
}

impl Device for AnyDevice {
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        match self {
            AnyDevice::Ssd(d) => d.submit(cmd, now_ns),
            AnyDevice::Hdd(d) => d.submit(cmd, now_ns),
            AnyDevice::Zoned(d) => zoned_submit(d, cmd, now_ns),
        }
    }
    fn stats(&self) -> DeviceStats {
        match self {
            AnyDevice::Ssd(d) => d.stats(),
            AnyDevice::Hdd(d) => d.stats(),
            AnyDevice::Zoned(d) => d.stats(),
        }
    }
    fn reset_stats(&mut self) {
        match self {
            AnyDevice::Ssd(d) => d.reset_stats(),
            AnyDevice::Hdd(d) => d.reset_stats(),
            AnyDevice::Zoned(d) => d.reset_stats(),
        }
    }
    fn logical_bytes(&self) -> u64 {
        match self {
            AnyDevice::Ssd(d) => d.logical_bytes(),
            AnyDevice::Hdd(d) => d.logical_bytes(),
            AnyDevice::Zoned(d) => d.logical_bytes(),
        }
    }
    #[inline]
    fn prefetch(&self, cmd: &Command) {
        if let AnyDevice::Ssd(d) = self {
            d.prefetch(cmd);
        }
    }
    #[inline]
    fn prefetch_mapped(&self, cmd: &Command) {
        if let AnyDevice::Ssd(d) = self {
            d.prefetch_mapped(cmd);
        }
    }
    fn settle(&mut self) -> u64 {
        match self {
            AnyDevice::Ssd(d) => d.settle(),
            AnyDevice::Hdd(d) => d.settle(),
            AnyDevice::Zoned(d) => d.settle(),
        }
    }
    fn rested_ns(&mut self) -> u64 {
        match self {
            AnyDevice::Ssd(d) => d.rested_ns(),
            AnyDevice::Hdd(d) => d.rested_ns(),
            AnyDevice::Zoned(d) => d.rested_ns(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_preset_loads_and_builds_scaled_down() {
        for (name, _) in BUILTIN {
            let p = Preset::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&p.name, name);
            let small = p.with_capacity(16 << 30);
            small
                .build()
                .unwrap_or_else(|e| panic!("{name} at 16 GiB: {e}"));
        }
    }

    #[test]
    fn scaling_down_keeps_enough_blocks_per_die() {
        let p = Preset::load("840pro").unwrap().with_capacity(4 << 30);
        let DeviceConfig::Ssd(c) = &p.device else {
            panic!("840pro is an SSD")
        };
        assert!(c.geometry.blocks_per_die() >= MIN_BLOCKS_PER_DIE);
        assert_eq!(c.geometry.dies(), 32, "parallelism is kept");
        assert!(
            (c.geometry.op - 0.0737).abs() < 1e-9,
            "over-provisioning is kept"
        );
        // Pages per block and, with them, how often an erase costs time: the same erase
        // time per page.
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        let whole = Preset::load("840pro").unwrap();
        let w = whole.ssd_config().unwrap();
        assert!(c.geometry.pages_per_block < w.geometry.pages_per_block);
        assert_eq!(c.timing.erase_ns, w.timing.erase_ns);
        assert_eq!(
            c.timing.erase_every * c.geometry.pages_per_block,
            w.geometry.pages_per_block
        );
        let full = Preset::load("840pro")
            .unwrap()
            .with_capacity(256_000_000_000);
        assert!(full.notes.is_empty());
    }

    #[test]
    fn scaling_down_keeps_the_mapping_caches_share_of_the_map() {
        let full = Preset::load("980").unwrap();
        let DeviceConfig::Ssd(c) = &full.device else {
            panic!("980 is an SSD")
        };
        let full_bytes = c.mapping_cache.as_ref().unwrap().cache_bytes;
        let small = full.clone().with_capacity(c.geometry.logical_bytes / 100);
        let DeviceConfig::Ssd(s) = &small.device else {
            panic!("980 is an SSD")
        };
        assert_eq!(
            s.mapping_cache.as_ref().unwrap().cache_bytes,
            full_bytes / 100
        );
        assert!(small.notes.iter().any(|n| n.contains("mapping cache")));
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let err = Preset::load("floppy").err().unwrap().to_string();
        assert!(err.contains("x25e") && err.contains("floppy"), "{err}");
    }

    #[test]
    fn bad_toml_names_the_origin_and_field() {
        let text = BUILTIN[0].1.replace("channels", "chanels");
        let err = Preset::from_toml("broken.toml", &text)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("broken.toml") && err.contains("chanels"),
            "{err}"
        );
    }
}
