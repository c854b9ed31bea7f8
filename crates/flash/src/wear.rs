//! Wear: the wear-leveling policies' settings (`[ssd.wear_leveling]`), a drive's rated
//! endurance (`[ssd.endurance]`) and the wear report computed from a run.
//!
//! The mechanisms live in [`crate::ftl::PageFtl`]: *dynamic* wear leveling opens the free
//! block with the fewest erases instead of the pool's oldest; *static* wear leveling, after
//! each GC erase, moves the valid units of the least-worn closed block of the die to GC's
//! frontier once the die's erase-count spread (max − min) reaches a threshold (MQSim's
//! `check_static_wl_required` / `run_static_wearleveling`, CMU-SAFARI/MQSim
//! `src/ssd/GC_and_WL_Unit_Base.cpp`), so the cold block rejoins the pool and takes hot
//! data. Its copies are GC copies: counted in flash writes and WAF, and on the timed path
//! they occupy the die (read, program, erase) like GC's.
//!
//! Endurance numbers come from each preset's datasheet or review (cited in its TOML);
//! [`WearReport`] turns a run's erase counts and WAF into life used and a projected TBW.

use serde::{Deserialize, Serialize};

/// MQSim's default `Static_Wearleveling_Threshold` (its `ssdconfig.xml`): the erase-count
/// spread within a plane at which static wear leveling moves a cold block.
pub const MQSIM_STATIC_THRESHOLD: u32 = 100;

/// Wear-leveling settings; absent (or both off), the FTL behaves exactly as without them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WearLevelingConfig {
    /// Open the free block with the fewest erases (ties: the pool's oldest).
    #[serde(default)]
    pub dynamic: bool,
    /// Move a cold block's data when a die's erase-count spread reaches this; none = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_threshold: Option<u32>,
}

impl WearLevelingConfig {
    pub fn is_off(&self) -> bool {
        !self.dynamic && self.static_threshold.is_none()
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.static_threshold == Some(0) {
            return Err(
                "wear_leveling.static_threshold must be at least 1 (an erase-count spread)".into(),
            );
        }
        Ok(())
    }
}

impl std::str::FromStr for WearLevelingConfig {
    type Err = String;
    /// `off`, `dynamic`, `static[:THRESHOLD]` or `both[:THRESHOLD]` (dynamic and static, as
    /// MQSim's default configuration runs them); the threshold defaults to MQSim's 100.
    fn from_str(s: &str) -> Result<Self, String> {
        let (mode, threshold) = match s.split_once(':') {
            Some((m, t)) => {
                let t: u32 = t.parse().map_err(|_| {
                    format!("--wear-leveling {s:?}: threshold {t:?} is not a whole number")
                })?;
                if t == 0 {
                    return Err(format!(
                        "--wear-leveling {s:?}: the threshold (an erase-count spread) must be at least 1"
                    ));
                }
                (m, Some(t))
            }
            None => (s, None),
        };
        let static_threshold = Some(threshold.unwrap_or(MQSIM_STATIC_THRESHOLD));
        let cfg = match mode {
            "off" | "dynamic" if threshold.is_some() => {
                return Err(format!(
                    "--wear-leveling {s:?}: only static and both take a threshold"
                ))
            }
            "off" => WearLevelingConfig::default(),
            "dynamic" => WearLevelingConfig {
                dynamic: true,
                static_threshold: None,
            },
            "static" => WearLevelingConfig {
                dynamic: false,
                static_threshold,
            },
            "both" => WearLevelingConfig {
                dynamic: true,
                static_threshold,
            },
            _ => {
                return Err(format!(
                "--wear-leveling {s:?}: expected off, dynamic, static[:THRESHOLD] or both[:THRESHOLD]"
            ))
            }
        };
        Ok(cfg)
    }
}

/// A drive's rated endurance. Sources are given per preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnduranceConfig {
    /// Program/erase cycles a block is rated for (per cell type, from the NAND's vendor or
    /// a published table; the preset says which, or that it is assumed).
    pub rated_pe_cycles: u32,
    /// Terabytes written the datasheet or warranty promises (bytes), if it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rated_tbw_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warranty_years: Option<f64>,
    /// The user capacity the ratings are for: set when a preset is scaled (`--capacity`),
    /// so a projection for the scaled drive can be given for the rated one.
    #[serde(skip)]
    pub rated_logical_bytes: Option<u64>,
}

impl EnduranceConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.rated_pe_cycles == 0 {
            return Err("endurance.rated_pe_cycles must be positive".into());
        }
        if self.rated_tbw_bytes == Some(0) {
            return Err("endurance.rated_tbw_bytes must be positive (or left out)".into());
        }
        if let Some(y) = self.warranty_years {
            if !(y > 0.0 && y.is_finite()) {
                return Err(format!(
                    "endurance.warranty_years must be positive, got {y}"
                ));
            }
        }
        Ok(())
    }
}

/// Blocks whose erase counts fall in `[erases_from, erases_to]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HistogramBin {
    pub erases_from: u32,
    pub erases_to: u32,
    pub blocks: u64,
}

/// The most bins [`erase_histogram`] makes.
pub const MAX_BINS: u32 = 40;

/// The erase-count distribution: one bin per count when the counts span at most
/// [`MAX_BINS`] values, else [`MAX_BINS`] bins of equal width.
pub fn erase_histogram(erase_counts: &[u32]) -> Vec<HistogramBin> {
    let (Some(&lo), Some(&hi)) = (erase_counts.iter().min(), erase_counts.iter().max()) else {
        return Vec::new();
    };
    let width = (hi - lo + 1).div_ceil(MAX_BINS);
    let bins = (hi - lo) / width + 1;
    let mut h: Vec<HistogramBin> = (0..bins)
        .map(|i| HistogramBin {
            erases_from: lo + i * width,
            erases_to: (lo + (i + 1) * width - 1).min(hi),
            blocks: 0,
        })
        .collect();
    for &c in erase_counts {
        h[((c - lo) / width) as usize].blocks += 1;
    }
    h
}

/// What a run means for the drive's life. Projections assume the measured WAF holds for
/// the drive's whole life and that every block wears alike (the worst-block variant
/// divides by the measured max/mean erase ratio instead); every flash program counts one
/// cycle of wear, SLC-mode ones included (SLC-mode cycles wear cells less: conservative).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WearReport {
    pub rated_pe_cycles: u32,
    /// The datasheet's TBW for the rated drive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rated_tbw_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warranty_years: Option<f64>,
    /// Rated user capacity / simulated user capacity (1 unless `--capacity` scaled it).
    pub capacity_scale: f64,
    /// Raw flash of the rated drive (simulated raw bytes × `capacity_scale`).
    pub rated_raw_bytes: u64,
    pub blocks: u64,
    pub erase_count_min: u32,
    pub erase_count_max: u32,
    pub erase_count_mean: f64,
    /// Erases of SLC-mode blocks in the measured phase (an SLC cache's account places no
    /// blocks): spread over every block in `life_used`, each counted in bytes as WAF counts
    /// its programs: an SLC-mode block holds 1/bits-per-cell of a block's bytes, so its
    /// erase is that share of a P/E cycle.
    pub slc_mode_erases: u64,
    pub histogram: Vec<HistogramBin>,
    /// Mean erases per block since the drive was new (fill and warm-up included) / rated
    /// P/E cycles.
    pub life_used: f64,
    /// The most-worn block's erases / rated P/E cycles.
    pub life_used_worst_block: f64,
    /// Of the measured phase alone: its erases per block (SLC-mode ones in bytes, as in
    /// `life_used`) / rated P/E cycles, and the block it wore most.
    pub phase_life_used: f64,
    pub phase_life_used_worst_block: f64,
    /// Of the measured phase: host bytes written and flash bytes programmed.
    pub host_write_bytes: u64,
    pub flash_write_bytes: u64,
    /// flash_write_bytes / host_write_bytes: a sub-unit write counts its bytes on the host
    /// side and a whole mapping unit on flash, so this is at least the unit-counted WAF.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waf_bytes: Option<f64>,
    /// Fraction of the rated drive's life one TB (10^12 bytes) of host writes uses at this
    /// WAF: waf_bytes × 10^12 / (rated P/E × rated raw bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub life_used_per_tb_written: Option<f64>,
    /// rated P/E × rated raw bytes / waf_bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_tbw_bytes: Option<f64>,
    /// The same divided by max/mean erases (the most-worn block ends the drive's life).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_tbw_worst_block_bytes: Option<f64>,
    /// Host write rate of the measured phase (simulated bytes per simulated second); only
    /// when timed. The rated drive is assumed as fast (scaling keeps its parallelism).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_write_bytes_per_s: Option<f64>,
    /// projected_tbw_bytes / host_write_bytes_per_s, in days.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected_days: Option<f64>,
    pub formula: &'static str,
}

/// The projection's formula, printed with it.
pub const TBW_FORMULA: &str = "projected TBW = rated P/E cycles x raw flash bytes of the rated drive / WAF (flash bytes programmed / host bytes written, measured); assumes that WAF for the drive's whole life, even wear (the worst-block variant divides by max/mean erases), and wear counted in bytes programmed: an SLC-mode program wears as many bytes as it writes (an SLC-mode erase is 1/bits-per-cell of a cycle), as WAF counts it";

/// What the report is computed from.
#[derive(Debug, Clone, Copy)]
pub struct WearInputs<'a> {
    pub endurance: &'a EnduranceConfig,
    /// Per-block erase counts since the drive was new.
    pub erase_counts: &'a [u32],
    /// Per-block erase counts when the measured phase began (empty: the drive was new).
    pub phase_start_counts: &'a [u32],
    pub slc_mode_erases: u64,
    /// What one SLC-mode erase is of a P/E cycle: 1 / bits per cell.
    pub slc_erase_weight: f64,
    pub simulated_logical_bytes: u64,
    pub simulated_raw_bytes: u64,
    /// Of the measured phase.
    pub host_write_bytes: u64,
    pub flash_write_bytes: u64,
    /// Of the measured phase; 0 when untimed.
    pub simulated_ns: u64,
}

impl WearReport {
    pub fn new(i: WearInputs<'_>) -> WearReport {
        let e = i.endurance;
        let pe = e.rated_pe_cycles as f64;
        let scale = e
            .rated_logical_bytes
            .map_or(1.0, |r| r as f64 / i.simulated_logical_bytes.max(1) as f64);
        let rated_raw = i.simulated_raw_bytes as f64 * scale;
        let blocks = i.erase_counts.len() as u64;
        let sum: u64 = i.erase_counts.iter().map(|&c| c as u64).sum();
        let mean_blocks = sum as f64 / blocks.max(1) as f64;
        let slc = i.slc_mode_erases as f64 * i.slc_erase_weight;
        let mean = (sum as f64 + slc) / blocks.max(1) as f64;
        let base = |b: usize| i.phase_start_counts.get(b).copied().unwrap_or(0);
        let phase_sum: u64 = i
            .erase_counts
            .iter()
            .enumerate()
            .map(|(b, &c)| (c - base(b).min(c)) as u64)
            .sum();
        let phase_max = i
            .erase_counts
            .iter()
            .enumerate()
            .map(|(b, &c)| c - base(b).min(c))
            .max()
            .unwrap_or(0);
        let max = i.erase_counts.iter().copied().max().unwrap_or(0);
        let waf = (i.host_write_bytes > 0)
            .then(|| i.flash_write_bytes as f64 / i.host_write_bytes as f64)
            .filter(|w| *w > 0.0);
        let tbw = waf.map(|w| projected_tbw_bytes(e.rated_pe_cycles, rated_raw, w));
        let rate = (i.simulated_ns > 0 && i.host_write_bytes > 0)
            .then(|| i.host_write_bytes as f64 / (i.simulated_ns as f64 / 1e9));
        let spread = (mean_blocks > 0.0).then(|| max as f64 / mean_blocks);
        WearReport {
            rated_pe_cycles: e.rated_pe_cycles,
            rated_tbw_bytes: e.rated_tbw_bytes,
            warranty_years: e.warranty_years,
            capacity_scale: scale,
            rated_raw_bytes: rated_raw.round() as u64,
            blocks,
            erase_count_min: i.erase_counts.iter().copied().min().unwrap_or(0),
            erase_count_max: max,
            erase_count_mean: mean_blocks,
            slc_mode_erases: i.slc_mode_erases,
            histogram: erase_histogram(i.erase_counts),
            life_used: mean / pe,
            life_used_worst_block: max as f64 / pe,
            phase_life_used: (phase_sum as f64 + slc) / blocks.max(1) as f64 / pe,
            phase_life_used_worst_block: phase_max as f64 / pe,
            host_write_bytes: i.host_write_bytes,
            flash_write_bytes: i.flash_write_bytes,
            waf_bytes: waf,
            life_used_per_tb_written: waf.map(|w| w * 1e12 / (pe * rated_raw)),
            projected_tbw_bytes: tbw,
            projected_tbw_worst_block_bytes: tbw.zip(spread).map(|(t, s)| t / s),
            host_write_bytes_per_s: rate,
            projected_days: tbw.zip(rate).map(|(t, r)| t / r / 86_400.0),
            formula: TBW_FORMULA,
        }
    }
}

/// Host bytes the drive can take before its blocks reach their rated cycles:
/// `rated_pe_cycles × raw_bytes / waf`.
pub fn projected_tbw_bytes(rated_pe_cycles: u32, raw_bytes: f64, waf: f64) -> f64 {
    rated_pe_cycles as f64 * raw_bytes / waf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projected_tbw_is_cycles_times_raw_over_waf() {
        // 1,000 cycles of 256 GiB raw at WAF 2: 500 x 256 GiB of host writes.
        let t = projected_tbw_bytes(1000, (256u64 << 30) as f64, 2.0);
        assert_eq!(t, (500u64 * (256 << 30)) as f64);
        let e = EnduranceConfig {
            rated_pe_cycles: 1000,
            rated_tbw_bytes: Some(100_000_000_000_000),
            warranty_years: Some(5.0),
            rated_logical_bytes: Some(4 << 30),
        };
        // A drive scaled to 1 GiB: the projection is for the rated 4 GiB drive.
        let counts = vec![2u32, 4, 4, 6];
        let r = WearReport::new(WearInputs {
            endurance: &e,
            erase_counts: &counts,
            phase_start_counts: &[1, 1, 4, 2],
            slc_mode_erases: 0,
            slc_erase_weight: 1.0,
            simulated_logical_bytes: 1 << 30,
            simulated_raw_bytes: 5 << 28,
            host_write_bytes: 1 << 30,
            flash_write_bytes: 3 << 29,
            simulated_ns: 2_000_000_000,
        });
        assert_eq!(r.capacity_scale, 4.0);
        assert_eq!(r.rated_raw_bytes, 5 << 30);
        assert_eq!(r.waf_bytes, Some(1.5));
        let tbw = 1000.0 * (5u64 << 30) as f64 / 1.5;
        assert_eq!(r.projected_tbw_bytes, Some(tbw));
        assert_eq!(r.projected_tbw_worst_block_bytes, Some(tbw / 1.5));
        assert_eq!(r.life_used, 4.0 / 1000.0);
        // The measured phase alone: 1 + 3 + 0 + 4 erases, the fourth block the most worn.
        assert_eq!(r.phase_life_used, 2.0 / 1000.0);
        assert_eq!(r.phase_life_used_worst_block, 4.0 / 1000.0);
        assert!((r.life_used_per_tb_written.unwrap() * tbw - 1e12).abs() < 1e-3);
        let rate = (1u64 << 30) as f64 / 2.0;
        assert!((r.projected_days.unwrap() - tbw / rate / 86_400.0).abs() < 1e-9);
    }

    #[test]
    fn histogram_bins_cover_every_block_once() {
        let counts: Vec<u32> = (0..1000).map(|i| (i * 7919 % 500) as u32 + 3).collect();
        let h = erase_histogram(&counts);
        assert!(h.len() as u32 <= MAX_BINS);
        assert_eq!(h.iter().map(|b| b.blocks).sum::<u64>(), 1000);
        assert_eq!(h[0].erases_from, 3);
        assert_eq!(h.last().unwrap().erases_to, 502);
        for w in h.windows(2) {
            assert_eq!(w[0].erases_to + 1, w[1].erases_from);
        }
        let small = erase_histogram(&[5, 5, 7]);
        assert_eq!(
            small.iter().map(|b| b.blocks).collect::<Vec<_>>(),
            vec![2, 0, 1]
        );
    }

    #[test]
    fn parses_the_flag() {
        assert!("off".parse::<WearLevelingConfig>().unwrap().is_off());
        assert_eq!(
            "static"
                .parse::<WearLevelingConfig>()
                .unwrap()
                .static_threshold,
            Some(MQSIM_STATIC_THRESHOLD)
        );
        let b: WearLevelingConfig = "both:8".parse().unwrap();
        assert!(b.dynamic && b.static_threshold == Some(8));
        for bad in ["static:0", "dynamic:3", "static:x", "sometimes"] {
            let e = bad.parse::<WearLevelingConfig>().unwrap_err();
            assert!(e.contains("--wear-leveling"), "{e}");
        }
    }
}
