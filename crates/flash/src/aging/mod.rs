//! Errors that grow with age: a raw bit error rate per block from its P/E cycles, the time
//! since its data was programmed and the reads since then ([`model`]), an ECC limit per
//! codeword, read retries when a read exceeds it (each one more array read), uncorrectable
//! reads past the last retry, and read reclaim of blocks whose reads need too many retries
//! or that were read too often since their program (read disturb).
//!
//! A preset enables it with an `[ssd.aging]` table ([`AgingConfig`]); `sim --age` and
//! `replay --age` set the drive's age ([`Age`]: starting P/E cycles of every block, and the
//! retention time of the data present when the timed run starts). Off by default: without
//! the table the drive is timed exactly as before.
//!
//! The state this module keeps per block ([`AgingState`]): when the block was last
//! programmed in virtual time (or "before the run", then its data is `retention` old at the
//! start and ages with the run) and how often it was read since. Its P/E count is the FTL's
//! erase count, which starts at the starting cycles (the drive seeds every block's count
//! with them, so the wear report's life used starts there too). The draws come from a
//! seeded xoshiro256++ (the generator the workloads use), one per array read, so a run
//! depends only on its seed.
//!
//! Limits: no temperature (every number is at the characterisations' conditions), no
//! per-wordline or per-layer variation, one RBER for all pages of a block (MLC/TLC page
//! types differ in reality), SLC-cache blocks of a TLC drive are modelled as TLC, the
//! retry steps' RBER falls by a fixed factor, retries are charged tR each with one transfer
//! at the end (no soft-decode or transfer per retry), and reclaim runs at once when it is
//! due (real controllers defer it to idle time).

pub mod model;

use crate::FlashError;
pub use model::{CellType, Ecc, RberModel};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// `[ssd.aging]`: the error model's parameters. Every field but `cell` has a default per
/// cell type (see [`AgingConfig::resolve`] for the values and their sources).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgingConfig {
    pub cell: CellType,
    /// P/E cycles every block has before the run (`--age pe=`).
    #[serde(default)]
    pub start_pe_cycles: u32,
    /// Age of the data present when the timed run starts (`--age retention=`).
    #[serde(default)]
    pub start_retention_s: u64,
    /// Bytes of data per ECC codeword.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codeword_bytes: Option<u32>,
    /// Bit errors one codeword corrects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correctable_bits: Option<u32>,
    /// Each read retry's RBER as a share of the previous step's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_factor: Option<f64>,
    /// Retries before a read is counted uncorrectable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<u32>,
    /// Reclaim a block once one of its reads needs more than this many retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_retries: Option<u32>,
    /// Reclaim a block once it was read this many times since its program (read disturb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_reads: Option<u64>,
    /// RBER coefficients; default: the cell type's ([`RberModel::for_cell`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rber: Option<RberModel>,
}

/// [`AgingConfig`] with every default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct AgingParams {
    pub cell: CellType,
    pub start_pe_cycles: u32,
    pub start_retention_s: u64,
    pub codeword_bytes: u32,
    pub ecc: Ecc,
    pub reclaim_retries: u32,
    pub reclaim_reads: u64,
    pub rber: RberModel,
}

impl AgingConfig {
    /// The model with the cell type's defaults, at age zero.
    pub fn new(cell: CellType) -> AgingConfig {
        AgingConfig {
            cell,
            start_pe_cycles: 0,
            start_retention_s: 0,
            codeword_bytes: None,
            correctable_bits: None,
            retry_factor: None,
            max_retries: None,
            reclaim_retries: None,
            reclaim_reads: None,
            rber: None,
        }
    }

    /// Fills in the defaults:
    ///
    /// | | SLC | MLC | TLC |
    /// |---|---|---|---|
    /// | codeword, correctable bits | 512 B, 4 (assumed: SLC-era 4-bit ECC) | 512 B, 15 (Hetzler: 3x-nm MLC's BCH-15 per 512-byte sector) | 1 KiB, 72 (assumed: an LDPC hard-decision limit near 0.9% RBER; no datasheet of the modelled drives gives its ECC) |
    ///
    /// For all: retry factor 0.5 (assumed; see [`model`]), 8 retries at most (assumed:
    /// read-retry tables hold a handful to tens of steps), reclaim after a read of more than
    /// 4 retries (assumed: half the table) or 100,000 reads since the program (assumed: the
    /// order of M-Systems' "1 bit error per ~10^5 repetitive reads" of MLC, in its 2003
    /// white paper on MLC NAND; Cai et al., DSN 2015, show read disturb errors grow with
    /// reads and with wear).
    pub fn resolve(&self) -> AgingParams {
        let (cw, t) = match self.cell {
            CellType::Slc => (512, 4),
            CellType::Mlc => (512, 15),
            CellType::Tlc => (1024, 72),
        };
        let codeword_bytes = self.codeword_bytes.unwrap_or(cw);
        AgingParams {
            cell: self.cell,
            start_pe_cycles: self.start_pe_cycles,
            start_retention_s: self.start_retention_s,
            codeword_bytes,
            ecc: Ecc {
                codeword_bits: codeword_bytes as u64 * 8,
                correctable_bits: self.correctable_bits.unwrap_or(t),
                retry_factor: self.retry_factor.unwrap_or(0.5),
                max_retries: self.max_retries.unwrap_or(8),
            },
            reclaim_retries: self.reclaim_retries.unwrap_or(4),
            reclaim_reads: self.reclaim_reads.unwrap_or(100_000),
            rber: self.rber.unwrap_or_else(|| RberModel::for_cell(self.cell)),
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        let p = self.resolve();
        if p.codeword_bytes == 0 {
            return Err("aging.codeword_bytes must be positive".into());
        }
        if p.ecc.correctable_bits as u64 >= p.ecc.codeword_bits {
            return Err(format!(
                "aging.correctable_bits ({}) must be fewer than the codeword's {} bits",
                p.ecc.correctable_bits, p.ecc.codeword_bits
            ));
        }
        if p.ecc.correctable_bits > 100_000 {
            return Err("aging.correctable_bits must be at most 100000".into());
        }
        if !(p.ecc.retry_factor > 0.0 && p.ecc.retry_factor <= 1.0) {
            return Err(format!(
                "aging.retry_factor {} must be above 0 and at most 1",
                p.ecc.retry_factor
            ));
        }
        if p.ecc.max_retries > 64 {
            return Err(format!(
                "aging.max_retries {} must be at most 64",
                p.ecc.max_retries
            ));
        }
        if p.reclaim_reads == 0 {
            return Err("aging.reclaim_reads must be at least 1".into());
        }
        p.rber.validate()
    }

    /// Sets the age ([`Age`]'s parts that are given).
    pub fn set_age(&mut self, age: &Age) {
        if let Some(pe) = age.pe_cycles {
            self.start_pe_cycles = pe;
        }
        if let Some(r) = age.retention_s {
            self.start_retention_s = r;
        }
    }
}

/// A drive's age, as `--age` gives it: `pe=N` (every block's P/E cycles before the run),
/// `retention=T` (age of the data present at the start: a number and `s`, `h`, `d` or `y`,
/// a year being 365 days) and optionally `cell=slc|mlc|tlc` for a preset that does not say
/// its cell type. Parts are separated by commas; each may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Age {
    pub pe_cycles: Option<u32>,
    pub retention_s: Option<u64>,
    pub cell: Option<CellType>,
}

/// Parses a duration such as `30d`, `1y`, `12h`, `3600s` (or `0`) into seconds.
pub fn parse_retention_s(s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(0);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| {
            format!("retention={s:?} needs a unit: s, h, d or y (e.g. retention=30d)")
        })?;
    if split == 0 {
        return Err(format!(
            "retention={s:?} must be a number and a unit (s, h, d or y), e.g. retention=30d"
        ));
    }
    let (num, unit) = s.split_at(split);
    let per: f64 = match unit {
        "s" => 1.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "y" => 365.0 * 86_400.0,
        other => {
            return Err(format!(
                "retention={s:?}: unknown unit {other:?}; use s, h, d or y (e.g. retention=1y)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("retention={s:?}: {num:?} is not a number"))?;
    let secs = v * per;
    if !(secs.is_finite() && (0.0..1e12).contains(&secs)) {
        return Err(format!(
            "retention={s:?} is out of range (0 to ~31,000 years)"
        ));
    }
    Ok(secs.round() as u64)
}

impl std::str::FromStr for Age {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let mut age = Age::default();
        if s.trim().is_empty() {
            return Err(
                "--age is empty: give pe=N and/or retention=T (e.g. --age pe=1500,retention=1y)"
                    .into(),
            );
        }
        let mut seen: Vec<&str> = Vec::new();
        for part in s.split(',') {
            // A key given twice would leave only the last: say so instead.
            if let Some((key, _)) = part.split_once('=') {
                let key = key.trim();
                if seen.contains(&key) {
                    return Err(format!(
                        "--age {s:?}: {key} is given twice; give each of pe, retention and cell at most once"
                    ));
                }
                seen.push(key);
            }
            let part = part.trim();
            let Some((key, value)) = part.split_once('=') else {
                return Err(format!(
                    "--age part {part:?} is not key=value: use pe=N, retention=T (s, h, d, y) or cell=slc|mlc|tlc"
                ));
            };
            match key.trim() {
                "pe" => {
                    let pe: u32 = value.trim().parse().map_err(|_| {
                        format!(
                            "--age pe={value:?}: P/E cycles must be a whole number from 0 to {}",
                            u32::MAX
                        )
                    })?;
                    age.pe_cycles = Some(pe);
                }
                "retention" => age.retention_s = Some(parse_retention_s(value)?),
                "cell" => age.cell = Some(value.trim().parse()?),
                other => {
                    return Err(format!(
                        "--age part {part:?}: unknown key {other:?}; use pe, retention or cell"
                    ))
                }
            }
        }
        Ok(age)
    }
}

/// A block programmed before the timed run (by preconditioning or the untimed path): its
/// data is `start_retention_s` old at time 0.
const BEFORE_RUN: u64 = u64::MAX;

/// Counters of the error model, reported as `aging` in the statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgingCounters {
    /// Array reads of host data the model decided (one per superpage read).
    pub reads: u64,
    /// Read retries, each one more tR.
    pub retries: u64,
    /// Reads still uncorrectable after the last retry.
    pub uncorrectable: u64,
    /// Reads that needed at least one retry.
    pub retried_reads: u64,
    /// Blocks relocated and erased by read reclaim.
    pub reclaimed_blocks: u64,
    /// Of those, reclaimed for reads since their program (read disturb), not retries.
    pub reclaimed_for_reads: u64,
    /// Units the reclaims copied (also among GC's copies).
    pub reclaim_copied_pages: u64,
}

/// The per-block state and the random draws of the error model in a running drive.
pub struct AgingState {
    params: AgingParams,
    pages_per_block: u32,
    unit_bytes: u64,
    /// When each block was last programmed (its first page after an erase), or [`BEFORE_RUN`].
    programmed_ns: Vec<u64>,
    /// Array reads of each block since its last program.
    reads: Vec<u64>,
    rng: Xoshiro256PlusPlus,
    ln_fact: Vec<f64>,
    /// Blocks due for reclaim, with whether read disturb (not retries) put them there.
    due: Vec<(u32, bool)>,
    counters: AgingCounters,
    /// Histogram of retries per read: `retry_histogram[i]` reads needed `i` retries.
    retry_histogram: Vec<u64>,
}

impl AgingState {
    pub fn new(
        cfg: &AgingConfig,
        total_blocks: usize,
        pages_per_block: u32,
        unit_bytes: u64,
    ) -> AgingState {
        let params = cfg.resolve();
        let max = params.ecc.max_retries as usize;
        AgingState {
            ln_fact: model::ln_factorials(params.ecc.correctable_bits as usize + 2),
            retry_histogram: vec![0; max + 1],
            params,
            pages_per_block,
            unit_bytes,
            programmed_ns: vec![BEFORE_RUN; total_blocks],
            reads: vec![0; total_blocks],
            rng: Xoshiro256PlusPlus::seed_from_u64(0),
            due: Vec::new(),
            counters: AgingCounters::default(),
        }
    }

    /// Seeds the draws (from the run's seed).
    pub fn seed(&mut self, seed: u64) {
        self.rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    }

    pub fn params(&self) -> &AgingParams {
        &self.params
    }

    pub fn counters(&self) -> AgingCounters {
        self.counters
    }

    pub fn retry_histogram(&self) -> &[u64] {
        &self.retry_histogram
    }

    pub fn reset_counters(&mut self) {
        self.counters = AgingCounters::default();
        self.retry_histogram.iter_mut().for_each(|c| *c = 0);
    }

    /// Block `block` starts a new program at `now_ns` (it was erased since its last data).
    #[inline]
    pub fn block_opened(&mut self, block: u32, now_ns: u64) {
        self.programmed_ns[block as usize] = now_ns;
        self.reads[block as usize] = 0;
    }

    /// Hours block `block`'s data has aged at `now_ns`.
    pub fn retention_hours(&self, block: u32, now_ns: u64) -> f64 {
        let secs = match self.programmed_ns[block as usize] {
            BEFORE_RUN => self.params.start_retention_s as f64 + now_ns as f64 / 1e9,
            at => now_ns.saturating_sub(at) as f64 / 1e9,
        };
        secs / 3600.0
    }

    /// RBER of block `block`, erased `erases` times since new (the FTL's count, which
    /// [`crate::Ssd::new`] starts at the starting P/E cycles), at `now_ns`.
    pub fn rber(&self, block: u32, erases: u32, now_ns: u64) -> f64 {
        let pe = erases as f64;
        let reads_per_page = self.reads[block as usize] as f64 / self.pages_per_block as f64;
        self.params
            .rber
            .rber(pe, self.retention_hours(block, now_ns), reads_per_page)
    }

    /// An array read of `units` mapping units of block `block` at `now_ns`: draws its
    /// retries (returned), counts it, and marks the block due for reclaim if it needs to be.
    pub fn read(&mut self, block: u32, erases: u32, units: u64, now_ns: u64) -> u32 {
        let rber = self.rber(block, erases, now_ns);
        let bytes = units * self.unit_bytes;
        let codewords = bytes.div_ceil(self.params.codeword_bytes as u64).max(1) as u32;
        let u: f64 = self.rng.random();
        let (retries, failed) = self.params.ecc.retries(rber, codewords, u, &self.ln_fact);
        let b = block as usize;
        self.reads[b] += 1;
        let c = &mut self.counters;
        c.reads += 1;
        c.retries += retries as u64;
        c.retried_reads += (retries > 0) as u64;
        c.uncorrectable += failed as u64;
        self.retry_histogram[retries as usize] += 1;
        let for_retries = retries > self.params.reclaim_retries;
        let for_reads = self.reads[b] >= self.params.reclaim_reads;
        if (for_retries || for_reads) && !self.due.iter().any(|&(d, _)| d == block) {
            self.due.push((block, !for_retries));
        }
        retries
    }

    /// Mean retries the model expects of a read of `units` units at `rber`.
    pub fn expected_retries(&self, rber: f64, units: u64) -> f64 {
        let codewords = (units * self.unit_bytes)
            .div_ceil(self.params.codeword_bytes as u64)
            .max(1) as u32;
        self.params
            .ecc
            .expected_retries(rber, codewords, &self.ln_fact)
    }

    /// Takes the blocks due for reclaim.
    pub fn take_due(&mut self, out: &mut Vec<(u32, bool)>) {
        out.clear();
        out.append(&mut self.due);
    }

    #[inline]
    pub fn has_due(&self) -> bool {
        !self.due.is_empty()
    }

    /// Counts a reclaim of a block that held `copied` valid units.
    pub fn reclaimed(&mut self, copied: u64, for_reads: bool) {
        self.counters.reclaimed_blocks += 1;
        self.counters.reclaimed_for_reads += for_reads as u64;
        self.counters.reclaim_copied_pages += copied;
    }
}

/// The error model's report (`aging` in `--json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgingStats {
    pub cell: String,
    pub start_pe_cycles: u32,
    pub start_retention_s: u64,
    /// Array reads of host data the model decided (one per superpage read; a request
    /// spanning superpages makes several).
    pub reads: u64,
    /// Read retries in all (each one more tR).
    pub retries: u64,
    /// `retries / reads`; `None` without reads.
    pub retries_per_read: Option<f64>,
    /// Reads that needed at least one retry.
    pub retried_reads: u64,
    /// Reads still uncorrectable after the last retry.
    pub uncorrectable_reads: u64,
    /// Blocks relocated and erased by read reclaim (their copies are among
    /// `gc_copied_pages`, their erases among `erases`).
    pub reclaimed_blocks: u64,
    /// Of those, reclaimed for their read count (read disturb) rather than retries.
    pub reclaimed_for_reads: u64,
    pub reclaim_copied_pages: u64,
    /// `retry_histogram[i]`: reads that needed `i` retries (the last bin holds the
    /// uncorrectable ones too).
    pub retry_histogram: Vec<u64>,
}

impl AgingStats {
    pub fn of(a: &AgingState) -> AgingStats {
        let c = a.counters();
        let p = a.params();
        AgingStats {
            cell: p.cell.to_string(),
            start_pe_cycles: p.start_pe_cycles,
            start_retention_s: p.start_retention_s,
            reads: c.reads,
            retries: c.retries,
            retries_per_read: (c.reads > 0).then(|| c.retries as f64 / c.reads as f64),
            retried_reads: c.retried_reads,
            uncorrectable_reads: c.uncorrectable,
            reclaimed_blocks: c.reclaimed_blocks,
            reclaimed_for_reads: c.reclaimed_for_reads,
            reclaim_copied_pages: c.reclaim_copied_pages,
            retry_histogram: a.retry_histogram().to_vec(),
        }
    }
}

/// Checks an `[ssd.aging]` table.
pub(crate) fn validate(cfg: &AgingConfig) -> Result<(), FlashError> {
    cfg.validate().map_err(FlashError::Config)
}

#[cfg(test)]
mod tests;
