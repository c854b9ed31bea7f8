//! The error model as pure functions: raw bit error rate (RBER) from a block's wear,
//! retention time and reads since its last program, and the read retries an ECC codeword
//! needs at that RBER.
//!
//! # RBER
//!
//! `rber = ε + α·c^k + β·c^m·t^n + γ·c^p·r^q` with `c` the block's P/E cycles, `t` hours
//! since it was programmed and `r` reads per page of the block since then (block reads /
//! pages per block), capped at 0.5. The form is the one of Mielke et al., "Bit Error Rate in
//! NAND Flash Memories" (IRPS 2008): write (wear), retention and read-disturb errors all
//! contribute, each growing with P/E cycling; Hetzler's fit to measured MLC surfaces
//! ("The error rate surface for MLC NAND flash", smorgastor.drhetzler.com, 2012, updated
//! 2014: `E = h·A^k·R^g + 1/(1 + (b/C)^d)`) has the same power laws in data age `A` and reads
//! `R`, scaled by the cycle count `C`.
//!
//! Coefficients per cell type ([`RberModel::for_cell`]):
//!
//! - **TLC**: the fit of a 72-layer 3D TLC NAND in MQSim-JW
//!   (`tools/examples/rber_model_example.py` of github.com/jwjeong92/MQSim-JW, an MQSim fork
//!   with read retries and read reclaim): ε = 1.48e-3, α = 3.90e-10, k = 2.05, β = 6.28e-5,
//!   m = 0.14, n = 0.54, γ = 3.73e-9, p = 0.33, q = 1.71. That repository does not name the
//!   measurement the fit comes from: treat it as **assumed** (a published third-party fit of
//!   the right form and magnitude, not a characterisation we could read).
//! - **MLC**: anchored on Hetzler's 3x-nm MLC numbers (same page, part 3): its BCH code
//!   corrects 15 bits per 512-byte sector (4,291 bits with parity), an RBER of 3.4e-4 at the
//!   specified UBER of 1e-15, and the parts are specified for 1 year of retention at 3,000
//!   P/E cycles, so RBER(3,000 cycles, 1 year) = 3.4e-4; the RBER grows ~20,000× from 1
//!   cycle at short age to 3,000 cycles and 1 year, so ε = 3.4e-4 / 20,000 = 1.7e-8. The
//!   exponents are **assumed** equal to the TLC fit's, and the split of the anchor between
//!   wear and retention is the TLC fit's at the same point (retention errors dominate, as
//!   Cai et al., "Data Retention in MLC NAND Flash Memory", HPCA 2015, found); γ is the TLC
//!   fit's scaled as β is (**assumed**).
//! - **SLC**: the MLC model at 3,000/100,000 of the cycles (**assumed**: SLC parts are rated
//!   for ~100,000 P/E cycles where these MLC parts are rated for 3,000).
//!
//! QLC has no coefficients: no characterisation with numbers was found.
//!
//! # ECC and read retries
//!
//! Bit errors in a codeword of `N` bits are Poisson with mean `λ = N·rber` (independent
//! errors, as Hetzler's "assuming errors are random"). A codeword is corrected when it holds
//! at most `t` errors; a read of `w` codewords succeeds when all are. Otherwise the
//! controller retries with shifted read reference voltages: retry `i` reads at
//! `rber·f^i` (**assumed** f = 0.5 by default: Cai et al. HPCA 2015 find the optimal read
//! reference voltage shifts with retention age, and reading closer to it halves RBER in their
//! recovery; each retry is one more array read, tR). After `max` retries the read is
//! uncorrectable. One uniform draw `u` per read decides: retries = the first `i` with
//! `u < P_i`, `P_i = (1 - Q(t; λ·f^i))^w` (`Q` the Poisson tail), so a read that needs `i`
//! retries needs at least as many at a higher RBER (the draw is shared by the steps, as the
//! same cells are read again).

use serde::{Deserialize, Serialize};

/// Bits stored per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellType {
    Slc,
    Mlc,
    Tlc,
}

impl std::fmt::Display for CellType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CellType::Slc => "slc",
            CellType::Mlc => "mlc",
            CellType::Tlc => "tlc",
        })
    }
}

impl std::str::FromStr for CellType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "slc" => Ok(CellType::Slc),
            "mlc" => Ok(CellType::Mlc),
            "tlc" => Ok(CellType::Tlc),
            "qlc" => Err("cell type qlc has no error model (no published RBER fit with numbers was found); use slc, mlc or tlc".into()),
            other => Err(format!("unknown cell type {other:?}: use slc, mlc or tlc")),
        }
    }
}

/// RBER coefficients (see the module's notes): `ε + α·c^k + β·c^m·t^n + γ·c^p·r^q`, `t` in
/// hours, `r` reads per page since the block's program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RberModel {
    pub epsilon: f64,
    pub alpha: f64,
    pub k: f64,
    pub beta: f64,
    pub m: f64,
    pub n: f64,
    pub gamma: f64,
    pub p: f64,
    pub q: f64,
}

/// The TLC fit (MQSim-JW's 72-layer TLC; see the module's notes).
const TLC: RberModel = RberModel {
    epsilon: 1.48e-3,
    alpha: 3.90e-10,
    k: 2.05,
    beta: 6.28e-5,
    m: 0.14,
    n: 0.54,
    gamma: 3.73e-9,
    p: 0.33,
    q: 1.71,
};

/// Hetzler's 3x-nm MLC anchor: RBER at the specified 1 year of retention after 3,000 P/E
/// cycles (the BCH-15-per-512-byte limit), and the growth from a fresh block to it.
const MLC_ANCHOR_CYCLES: f64 = 3000.0;
const MLC_ANCHOR_HOURS: f64 = 8760.0;
const MLC_ANCHOR_RBER: f64 = 3.4e-4;
const MLC_ANCHOR_GROWTH: f64 = 20_000.0;
/// SLC's cycles as MLC's: rated endurance 100,000 vs 3,000 (assumed).
const SLC_CYCLE_SCALE: f64 = 3000.0 / 100_000.0;

impl RberModel {
    /// The default coefficients of a cell type.
    pub fn for_cell(cell: CellType) -> RberModel {
        match cell {
            CellType::Tlc => TLC,
            CellType::Mlc => Self::mlc(),
            CellType::Slc => {
                let m = Self::mlc();
                let s = SLC_CYCLE_SCALE;
                RberModel {
                    alpha: m.alpha * s.powf(m.k),
                    beta: m.beta * s.powf(m.m),
                    gamma: m.gamma * s.powf(m.p),
                    ..m
                }
            }
        }
    }

    fn mlc() -> RberModel {
        let t = TLC;
        let (c, h) = (MLC_ANCHOR_CYCLES, MLC_ANCHOR_HOURS);
        let wear = t.alpha * c.powf(t.k);
        let retention = t.beta * c.powf(t.m) * h.powf(t.n);
        let retention_share = retention / (wear + retention);
        let epsilon = MLC_ANCHOR_RBER / MLC_ANCHOR_GROWTH;
        let grown = MLC_ANCHOR_RBER - epsilon;
        let beta = grown * retention_share / (c.powf(t.m) * h.powf(t.n));
        RberModel {
            epsilon,
            alpha: grown * (1.0 - retention_share) / c.powf(t.k),
            beta,
            gamma: t.gamma * beta / t.beta,
            ..t
        }
    }

    /// Raw bit error rate after `pe_cycles` P/E cycles, `retention_hours` since the
    /// program and `reads_per_page` reads per page of the block since then.
    pub fn rber(&self, pe_cycles: f64, retention_hours: f64, reads_per_page: f64) -> f64 {
        let c = pe_cycles.max(0.0);
        let r = self.epsilon
            + self.alpha * c.powf(self.k)
            + self.beta * c.powf(self.m) * retention_hours.max(0.0).powf(self.n)
            + self.gamma * c.powf(self.p) * reads_per_page.max(0.0).powf(self.q);
        r.min(0.5)
    }

    pub fn validate(&self) -> Result<(), String> {
        let all = [
            ("epsilon", self.epsilon),
            ("alpha", self.alpha),
            ("k", self.k),
            ("beta", self.beta),
            ("m", self.m),
            ("n", self.n),
            ("gamma", self.gamma),
            ("p", self.p),
            ("q", self.q),
        ];
        for (name, v) in all {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "aging.rber.{name} = {v} must be a finite number at least 0"
                ));
            }
        }
        Ok(())
    }
}

/// The ECC and read-retry settings of a drive, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ecc {
    /// Bits of one codeword's data (its parity is not counted: RBER applies to what is read,
    /// and the limit `t` is per codeword).
    pub codeword_bits: u64,
    /// Bit errors one codeword corrects.
    pub correctable_bits: u32,
    /// Each retry reads at this share of the previous step's RBER.
    pub retry_factor: f64,
    pub max_retries: u32,
}

/// `ln(i!)` for `i` in `0..n`.
pub(crate) fn ln_factorials(n: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(n);
    let mut acc = 0.0f64;
    v.push(0.0);
    for i in 1..n {
        acc += (i as f64).ln();
        v.push(acc);
    }
    v
}

/// `P(X > t)` for `X ~ Poisson(lambda)`, accurate for tails far below 1e-16 too.
/// `ln_fact` must hold `ln(i!)` up to at least `t + 1`.
pub(crate) fn poisson_tail(lambda: f64, t: u32, ln_fact: &[f64]) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    let t = t as usize;
    let ln_l = lambda.ln();
    if lambda < t as f64 + 1.0 {
        // Sum the tail upward from t + 1: its terms fall at least by lambda / (t + 2).
        let mut term = (-lambda + (t + 1) as f64 * ln_l - ln_fact[t + 1]).exp();
        let mut sum = 0.0;
        let mut i = t + 1;
        while term > 0.0 && term > sum * 1e-17 {
            sum += term;
            i += 1;
            term *= lambda / i as f64;
            if i > t + 100_000 {
                break;
            }
        }
        sum.min(1.0)
    } else {
        // The head is the small part: sum it downward from t, 1 minus it.
        let mut term = (-lambda + t as f64 * ln_l - ln_fact[t]).exp();
        let mut sum = 0.0;
        let mut i = t;
        loop {
            sum += term;
            if i == 0 || term < sum * 1e-17 {
                break;
            }
            term *= i as f64 / lambda;
            i -= 1;
        }
        (1.0 - sum).clamp(0.0, 1.0)
    }
}

impl Ecc {
    /// `P_i` for each retry step `i` in `0..=max_retries`: the chance that a read of
    /// `codewords` codewords at `rber` succeeds by step `i` (non-decreasing in `i`).
    pub fn success_by_step(&self, rber: f64, codewords: u32, ln_fact: &[f64]) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.max_retries as usize + 1);
        let mut r = rber;
        for _ in 0..=self.max_retries {
            out.push(self.success(r, codewords, ln_fact));
            r *= self.retry_factor;
        }
        out
    }

    /// The chance that every one of `codewords` codewords read at `rber` is correctable.
    pub fn success(&self, rber: f64, codewords: u32, ln_fact: &[f64]) -> f64 {
        let q = poisson_tail(
            rber * self.codeword_bits as f64,
            self.correctable_bits,
            ln_fact,
        );
        (codewords as f64 * (-q).ln_1p()).exp()
    }

    /// Retries of a read whose uniform draw is `u` (in `[0, 1)`), and whether it stayed
    /// uncorrectable after the last one. Computes the steps lazily: most reads of a young
    /// drive stop at the first.
    pub fn retries(&self, rber: f64, codewords: u32, u: f64, ln_fact: &[f64]) -> (u32, bool) {
        let mut r = rber;
        for i in 0..=self.max_retries {
            if u < self.success(r, codewords, ln_fact) {
                return (i, false);
            }
            r *= self.retry_factor;
        }
        (self.max_retries, true)
    }

    /// Mean retries per read at `rber` (uncorrectable reads count `max_retries`): what
    /// [`Ecc::retries`] averages to over uniform draws.
    pub fn expected_retries(&self, rber: f64, codewords: u32, ln_fact: &[f64]) -> f64 {
        let p = self.success_by_step(rber, codewords, ln_fact);
        p[..self.max_retries as usize].iter().map(|s| 1.0 - s).sum()
    }
}
