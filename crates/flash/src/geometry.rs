//! Flash geometry: how many channels, dies, planes, blocks and pages a drive has, and how
//! its logical capacity and over-provisioning turn into a number of physical blocks.
//!
//! The FTL manages *superblocks*: one erase block in every plane of a die, programmed a
//! multi-plane *superpage* (`page_size_bytes × planes_per_die`) at a time. Data is mapped
//! in *mapping units* (`mapping_unit_bytes`, e.g. 4 KiB on 16 KiB pages), so one superpage
//! holds `units_per_page()` units. Everywhere in the FTL a "page" count means mapping units
//! unless the name says superpage.

use crate::FlashError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub pages_per_block: u32,
    pub page_size_bytes: u32,
    pub mapping_unit_bytes: u32,
    /// User-visible capacity.
    pub logical_bytes: u64,
    /// Over-provisioning: (physical − logical) / logical.
    pub op: f64,
}

impl Geometry {
    pub fn dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }

    /// Mapping units per multi-plane superpage (the program unit of the FTL).
    pub fn units_per_page(&self) -> u32 {
        self.page_size_bytes / self.mapping_unit_bytes * self.planes_per_die
    }

    /// Mapping units per superblock (the erase unit of the FTL).
    pub fn units_per_block(&self) -> u32 {
        self.units_per_page() * self.pages_per_block
    }

    pub fn superpage_bytes(&self) -> u64 {
        self.page_size_bytes as u64 * self.planes_per_die as u64
    }

    pub fn block_bytes(&self) -> u64 {
        self.superpage_bytes() * self.pages_per_block as u64
    }

    /// Logical mapping units (the logical capacity rounded down to whole units).
    pub fn logical_units(&self) -> u64 {
        self.logical_bytes / self.mapping_unit_bytes as u64
    }

    /// Superblocks per die: enough that physical ≥ logical × (1 + op).
    pub fn blocks_per_die(&self) -> u64 {
        let physical_bytes = self.logical_bytes as f64 * (1.0 + self.op);
        let per_die_bytes = physical_bytes / self.dies() as f64;
        (per_die_bytes / self.block_bytes() as f64).ceil() as u64
    }

    pub fn total_blocks(&self) -> u64 {
        self.blocks_per_die() * self.dies() as u64
    }

    pub fn physical_bytes(&self) -> u64 {
        self.total_blocks() * self.block_bytes()
    }

    /// Die index → channel index (dies are numbered channel-first, so consecutive dies sit
    /// on different channels and a striped write uses every channel before reusing one).
    pub fn channel_of_die(&self, die: u32) -> u32 {
        die % self.channels
    }

    /// Returns the same geometry with a different logical capacity (over-provisioning,
    /// parallelism and page/block shape are kept).
    pub fn with_logical_bytes(&self, logical_bytes: u64) -> Geometry {
        Geometry {
            logical_bytes,
            ..self.clone()
        }
    }

    pub fn validate(&self) -> Result<(), FlashError> {
        let err = |m: String| Err(FlashError::Geometry(m));
        for (name, v) in [
            ("channels", self.channels),
            ("chips_per_channel", self.chips_per_channel),
            ("dies_per_chip", self.dies_per_chip),
            ("planes_per_die", self.planes_per_die),
            ("pages_per_block", self.pages_per_block),
            ("page_size_bytes", self.page_size_bytes),
            ("mapping_unit_bytes", self.mapping_unit_bytes),
        ] {
            if v == 0 {
                return err(format!("{name} must be at least 1"));
            }
        }
        // Bounds far above any real drive, so the derived sizes below cannot overflow.
        for (name, v, max) in [
            ("channels", self.channels, 1 << 10),
            ("chips_per_channel", self.chips_per_channel, 1 << 10),
            ("dies_per_chip", self.dies_per_chip, 1 << 6),
            ("planes_per_die", self.planes_per_die, 1 << 6),
            ("pages_per_block", self.pages_per_block, 1 << 16),
            ("page_size_bytes", self.page_size_bytes, 1 << 20),
        ] {
            if v > max {
                return err(format!("{name} {v} is above {max}, beyond any real drive"));
            }
        }
        if !self.mapping_unit_bytes.is_multiple_of(512) {
            return err(format!(
                "mapping_unit_bytes {} is not a multiple of 512",
                self.mapping_unit_bytes
            ));
        }
        if !self.page_size_bytes.is_multiple_of(self.mapping_unit_bytes) {
            return err(format!(
                "page_size_bytes {} is not a multiple of mapping_unit_bytes {}",
                self.page_size_bytes, self.mapping_unit_bytes
            ));
        }
        if !(self.op.is_finite() && self.op > 0.0 && self.op <= 10.0) {
            return err(format!(
                "over-provisioning {} must be in (0, 10] (a fraction: 0.07 = 7%)",
                self.op
            ));
        }
        if self.logical_bytes < self.mapping_unit_bytes as u64 {
            return err(format!(
                "logical capacity {} bytes is smaller than one mapping unit",
                self.logical_bytes
            ));
        }
        if !self
            .logical_bytes
            .is_multiple_of(self.mapping_unit_bytes as u64)
        {
            let down = self.logical_bytes / self.mapping_unit_bytes as u64
                * self.mapping_unit_bytes as u64;
            return err(format!(
                "logical capacity {} is not a multiple of the {}-byte mapping unit: give a multiple, such as {down} (the nearest below), or a size in binary units (GiB, MiB: 4GB is 4,000,000,000 bytes, 4GiB is 4,294,967,296)",
                crate::bytes::exact(self.logical_bytes),
                self.mapping_unit_bytes
            ));
        }
        if self.total_blocks() * self.units_per_block() as u64 >= u32::MAX as u64 {
            return err(format!(
                "{} physical mapping units exceed the 2^32 the FTL addresses; use a larger mapping unit or a smaller capacity",
                self.total_blocks() * self.units_per_block() as u64
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn small() -> Geometry {
        Geometry {
            channels: 2,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 2,
            pages_per_block: 64,
            page_size_bytes: 8192,
            mapping_unit_bytes: 4096,
            logical_bytes: 64 << 20,
            op: 0.25,
        }
    }

    #[test]
    fn derived_sizes() {
        let g = small();
        assert_eq!(g.dies(), 4);
        assert_eq!(g.units_per_page(), 4);
        assert_eq!(g.units_per_block(), 256);
        assert_eq!(g.block_bytes(), 1 << 20);
        // 64 MiB × 1.25 = 80 MiB over 4 dies = 20 blocks of 1 MiB each.
        assert_eq!(g.blocks_per_die(), 20);
        assert!(g.physical_bytes() as f64 >= g.logical_bytes as f64 * 1.25);
    }

    #[test]
    fn rejects_bad_shapes() {
        let mut g = small();
        g.mapping_unit_bytes = 3000;
        assert!(g.validate().unwrap_err().to_string().contains("512"));
        let mut g = small();
        g.op = 0.0;
        assert!(g.validate().is_err());
        // A capacity that is not whole mapping units (the FTL's fill and lookups assumed
        // it and panicked on the tail).
        for extra in [1, 512, 4095] {
            let mut g = small();
            g.logical_bytes += extra;
            let e = g.validate().unwrap_err().to_string();
            assert!(
                e.contains("not a multiple of the 4096-byte mapping unit"),
                "{e}"
            );
        }
        let mut g = small();
        g.channels = 0;
        assert!(g.validate().unwrap_err().to_string().contains("channels"));
    }
}
