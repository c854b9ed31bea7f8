//! Garbage-collection victim policies: pure functions that look at the closed blocks of
//! one die and name the block to clean. The FTL carries the decision out.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GcPolicy {
    /// Fewest valid units first.
    Greedy,
    /// Highest `age × free / used` first (Rosenblum & Ousterhout's cost-benefit, in the
    /// form `age × (1 − u) / u`); age is the time since the block was last written.
    CostBenefit,
    /// Least recently written (closed) block first, whatever its contents.
    Fifo,
}

impl fmt::Display for GcPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GcPolicy::Greedy => "greedy",
            GcPolicy::CostBenefit => "cost-benefit",
            GcPolicy::Fifo => "fifo",
        })
    }
}

impl FromStr for GcPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "greedy" => Ok(GcPolicy::Greedy),
            "cost-benefit" | "costbenefit" | "cb" => Ok(GcPolicy::CostBenefit),
            "fifo" => Ok(GcPolicy::Fifo),
            _ => Err(format!(
                "unknown GC policy {s:?}: expected greedy, cost-benefit or fifo"
            )),
        }
    }
}

/// What a policy may look at: per-block valid counts and last-write stamps of one die's
/// blocks, with a flag saying which are closed (eligible).
pub struct Candidates<'a> {
    pub valid_units: &'a [u32],
    pub closed: &'a [bool],
    pub written_stamp: &'a [u64],
    pub units_per_block: u32,
    pub now_stamp: u64,
}

/// Greedy: index of the closed block with the fewest valid units (lowest index on ties).
/// Two passes (the minimum, then its first position), each a plain loop the compiler
/// vectorises.
pub fn choose_greedy(c: &Candidates) -> Option<usize> {
    let key = |(&v, &closed): (&u32, &bool)| if closed { v } else { u32::MAX };
    let best = c.valid_units.iter().zip(c.closed).map(key).min()?;
    if best == u32::MAX {
        return None;
    }
    c.valid_units
        .iter()
        .zip(c.closed)
        .map(key)
        .position(|k| k == best)
}

/// Cost-benefit: index of the closed block maximising `age × (1 − u) / u`; an empty block
/// wins at once.
pub fn choose_cost_benefit(c: &Candidates) -> Option<usize> {
    let upb = c.units_per_block as f64;
    let mut best = f64::NEG_INFINITY;
    let mut best_i = None;
    for i in 0..c.valid_units.len() {
        if !c.closed[i] {
            continue;
        }
        let valid = c.valid_units[i];
        if valid == 0 {
            return Some(i);
        }
        let u = valid as f64 / upb;
        let age = (c.now_stamp - c.written_stamp[i]) as f64 + 1.0;
        let score = age * (1.0 - u) / u;
        if score > best {
            best = score;
            best_i = Some(i);
        }
    }
    best_i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_picks_fewest_valid_closed_block() {
        let c = Candidates {
            valid_units: &[5, 1, 0, 3],
            closed: &[true, true, false, true],
            written_stamp: &[0, 0, 0, 0],
            units_per_block: 8,
            now_stamp: 10,
        };
        assert_eq!(choose_greedy(&c), Some(1));
    }

    #[test]
    fn cost_benefit_prefers_old_blocks_at_equal_utilisation() {
        let c = Candidates {
            valid_units: &[4, 4, 6],
            closed: &[true, true, true],
            written_stamp: &[90, 10, 0],
            units_per_block: 8,
            now_stamp: 100,
        };
        // Block 1: age 91 × 0.5/0.5 = 91; block 2: 101 × 0.25/0.75 ≈ 33.7; block 0: 11.
        assert_eq!(choose_cost_benefit(&c), Some(1));
    }

    #[test]
    fn no_closed_block_means_no_victim() {
        let c = Candidates {
            valid_units: &[1, 2],
            closed: &[false, false],
            written_stamp: &[0, 0],
            units_per_block: 8,
            now_stamp: 1,
        };
        assert_eq!(choose_greedy(&c), None);
        assert_eq!(choose_cost_benefit(&c), None);
    }

    #[test]
    fn parses_names() {
        assert_eq!(
            "cost-benefit".parse::<GcPolicy>(),
            Ok(GcPolicy::CostBenefit)
        );
        assert!("lru".parse::<GcPolicy>().unwrap_err().contains("greedy"));
    }
}
