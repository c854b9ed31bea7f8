//! Garbage-collection victim policies: pure functions that look at the closed blocks of
//! one die and name the block to clean. The FTL carries the decision out.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
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

/// Greedy's choice without a scan: one die's closed blocks grouped by valid count, each
/// group a two-level bitmap over the die's blocks. Moving a block between groups (a unit of
/// it invalidated) is O(1); the choice — fewest valid units, lowest index on ties, exactly
/// [`choose_greedy`]'s — reads the lowest non-empty group's summary words, O(blocks / 4096).
/// The groups' words are interleaved (word `w` of every group side by side), so moving a
/// block to the next group touches one cache line, not two far apart: on a large drive
/// the move is a cache miss, and the moves are most of a WAF-only run's time.
#[derive(Debug, Clone)]
pub struct GreedyIndex {
    summary_words: usize,
    /// Groups (valid counts 0 to the most).
    groups: usize,
    /// Group `c`'s bitmap: `bits[w * groups + c]` is its word `w`, bit `i % 64` of word
    /// `i / 64` = block `i`.
    bits: Vec<u64>,
    /// Group `c`'s summary: `summary[v * groups + c]` is its word `v`, bit `w % 64` of word
    /// `w / 64` = word `w` of its bitmap is not 0.
    summary: Vec<u64>,
    /// Blocks per group.
    len: Vec<u32>,
    /// No group below this one holds a block.
    min: usize,
}

impl GreedyIndex {
    /// An empty index for `blocks` blocks holding up to `max_valid` units each.
    pub fn new(blocks: usize, max_valid: u32) -> GreedyIndex {
        let words = blocks.div_ceil(64).max(1);
        let summary_words = words.div_ceil(64);
        let groups = max_valid as usize + 1;
        GreedyIndex {
            summary_words,
            groups,
            bits: vec![0; groups * words],
            summary: vec![0; groups * summary_words],
            len: vec![0; groups],
            min: groups,
        }
    }

    /// Adds closed block `block` with `valid` units.
    #[inline]
    pub fn insert(&mut self, block: usize, valid: u32) {
        let c = valid as usize;
        let (w, b) = (block / 64, block % 64);
        let word = &mut self.bits[w * self.groups + c];
        debug_assert!(*word & (1 << b) == 0, "block {block} already in group {c}");
        if *word == 0 {
            self.summary[w / 64 * self.groups + c] |= 1 << (w % 64);
        }
        *word |= 1 << b;
        self.len[c] += 1;
        self.min = self.min.min(c);
    }

    /// Removes block `block`, which is in the group of `valid` units.
    #[inline]
    pub fn remove(&mut self, block: usize, valid: u32) {
        let c = valid as usize;
        let (w, b) = (block / 64, block % 64);
        let word = &mut self.bits[w * self.groups + c];
        debug_assert!(*word & (1 << b) != 0, "block {block} is not in group {c}");
        *word &= !(1 << b);
        if *word == 0 {
            self.summary[w / 64 * self.groups + c] &= !(1 << (w % 64));
        }
        self.len[c] -= 1;
    }

    /// Block `block` lost a valid unit: from the group of `valid + 1` to that of `valid`.
    #[inline]
    pub fn decrement(&mut self, block: usize, valid: u32) {
        self.remove(block, valid + 1);
        self.insert(block, valid);
    }

    /// Whether block `block` is in the group of `valid` units.
    pub fn contains(&self, block: usize, valid: u32) -> bool {
        let c = valid as usize;
        c < self.groups && self.bits[block / 64 * self.groups + c] & (1 << (block % 64)) != 0
    }

    /// The block greedy cleans next: fewest valid units, lowest index among them.
    pub fn lowest(&mut self) -> Option<usize> {
        while self.min < self.len.len() && self.len[self.min] == 0 {
            self.min += 1;
        }
        let c = self.min;
        if c == self.len.len() {
            return None;
        }
        let (sw, s) = (0..self.summary_words)
            .map(|v| (v, self.summary[v * self.groups + c]))
            .find(|&(_, s)| s != 0)?;
        let w = sw * 64 + s.trailing_zeros() as usize;
        let word = self.bits[w * self.groups + c];
        Some(w * 64 + word.trailing_zeros() as usize)
    }
}

/// Cost-benefit's choice without a scan: one die's closed blocks grouped by valid count,
/// each group ordered oldest first (by the stamp of its closing, then index). The blocks of
/// a group share their utilisation, so its oldest scores highest: the choice compares one
/// block per group, O(units per block) instead of O(blocks), and is exactly
/// [`choose_cost_benefit`]'s, ties included (an empty block: the lowest index; equal scores:
/// the lowest index). Moving a block between groups is O(log blocks).
#[derive(Debug, Clone)]
pub struct CostBenefitIndex {
    /// Group `v`: the closed blocks with `v` valid units, as (stamp, block); in the groups
    /// of empty and of full blocks, whose scores do not depend on age, as (0, block).
    groups: Vec<BTreeSet<(u64, u32)>>,
}

impl CostBenefitIndex {
    /// An empty index for blocks of up to `max_valid` units.
    pub fn new(max_valid: u32) -> CostBenefitIndex {
        CostBenefitIndex {
            groups: vec![BTreeSet::new(); max_valid as usize + 1],
        }
    }

    fn key(&self, block: usize, valid: u32, stamp: u64) -> (u64, u32) {
        let by_age = valid != 0 && valid as usize + 1 != self.groups.len();
        (if by_age { stamp } else { 0 }, block as u32)
    }

    /// Adds closed block `block` with `valid` units, closed at `stamp`.
    pub fn insert(&mut self, block: usize, valid: u32, stamp: u64) {
        let k = self.key(block, valid, stamp);
        let added = self.groups[valid as usize].insert(k);
        debug_assert!(added, "block {block} already in group {valid}");
    }

    /// Removes block `block`, in the group of `valid` units.
    pub fn remove(&mut self, block: usize, valid: u32, stamp: u64) {
        let k = self.key(block, valid, stamp);
        let removed = self.groups[valid as usize].remove(&k);
        debug_assert!(removed, "block {block} is not in group {valid}");
    }

    /// Block `block` lost a valid unit: from the group of `valid + 1` to that of `valid`.
    pub fn decrement(&mut self, block: usize, valid: u32, stamp: u64) {
        self.remove(block, valid + 1, stamp);
        self.insert(block, valid, stamp);
    }

    /// Whether block `block` is in the group of `valid` units.
    pub fn contains(&self, block: usize, valid: u32, stamp: u64) -> bool {
        (valid as usize) < self.groups.len()
            && self.groups[valid as usize].contains(&self.key(block, valid, stamp))
    }

    /// The block cost-benefit cleans next at `now_stamp`: as [`choose_cost_benefit`].
    pub fn choose(&self, now_stamp: u64, units_per_block: u32) -> Option<usize> {
        if let Some(&(_, b)) = self.groups[0].first() {
            return Some(b as usize);
        }
        let upb = units_per_block as f64;
        let mut best: Option<(f64, u32)> = None;
        for (valid, group) in self.groups.iter().enumerate().skip(1) {
            let Some(&(stamp, b)) = group.first() else {
                continue;
            };
            let u = valid as f64 / upb;
            let age = (now_stamp - stamp) as f64 + 1.0;
            let score = age * (1.0 - u) / u;
            let better = match best {
                None => true,
                Some((s, i)) => score > s || (score == s && b < i),
            };
            if better {
                best = Some((score, b));
            }
        }
        best.map(|(_, b)| b as usize)
    }
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

    /// A small deterministic generator: `rnd(n)` is below `n`.
    fn xorshift(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |n| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        }
    }

    #[test]
    fn the_cost_benefit_index_chooses_as_the_scan_does() {
        // Random closes, invalidations and removals over 300 blocks of up to 16 units, the
        // clock running: after each, the index's choice is the scan's (ties included: many
        // blocks share stamps and valid counts).
        let (blocks, upb) = (300, 16u32);
        let mut valid = vec![0u32; blocks];
        let mut closed = vec![false; blocks];
        let mut stamp = vec![0u64; blocks];
        let mut idx = CostBenefitIndex::new(upb);
        let mut now = 0u64;
        let mut rnd = xorshift(987654321u64);
        for step in 0..30_000 {
            if step % 7 == 0 {
                now += 1;
            }
            let b = rnd(blocks as u64) as usize;
            match rnd(3) {
                0 if !closed[b] => {
                    valid[b] = rnd(upb as u64 + 1) as u32;
                    closed[b] = true;
                    stamp[b] = now;
                    idx.insert(b, valid[b], now);
                }
                1 if closed[b] && valid[b] > 0 => {
                    valid[b] -= 1;
                    idx.decrement(b, valid[b], stamp[b]);
                }
                2 if closed[b] => {
                    idx.remove(b, valid[b], stamp[b]);
                    closed[b] = false;
                }
                _ => {}
            }
            let c = Candidates {
                valid_units: &valid,
                closed: &closed,
                written_stamp: &stamp,
                units_per_block: upb,
                now_stamp: now,
            };
            assert_eq!(idx.choose(now, upb), choose_cost_benefit(&c), "step {step}");
        }
    }

    /// Random inserts, moves and removals over `blocks` blocks of up to `max_valid` units
    /// (the first `skewed` steps among the highest 300 blocks, so a low group's words sit in
    /// a later summary word): after each, the index's choice is the scan's, and every 997
    /// steps its membership too.
    fn index_against_scan(blocks: usize, max_valid: u32, seed: u64, steps: usize, skewed: usize) {
        let mut valid = vec![0u32; blocks];
        let mut closed = vec![false; blocks];
        let mut idx = GreedyIndex::new(blocks, max_valid);
        let mut rnd = xorshift(seed);
        for step in 0..steps {
            let b = if step < skewed {
                blocks - 1 - rnd((blocks as u64).min(300)) as usize
            } else {
                rnd(blocks as u64) as usize
            };
            match rnd(3) {
                0 if !closed[b] => {
                    valid[b] = rnd(max_valid as u64 + 1) as u32;
                    closed[b] = true;
                    idx.insert(b, valid[b]);
                }
                1 if closed[b] && valid[b] > 0 => {
                    valid[b] -= 1;
                    idx.decrement(b, valid[b]);
                }
                2 if closed[b] => {
                    idx.remove(b, valid[b]);
                    closed[b] = false;
                }
                _ => {}
            }
            let c = Candidates {
                valid_units: &valid,
                closed: &closed,
                written_stamp: &vec![0; blocks],
                units_per_block: max_valid,
                now_stamp: 0,
            };
            assert_eq!(
                idx.lowest(),
                choose_greedy(&c),
                "blocks {blocks} step {step}"
            );
            if step % 997 == 0 {
                for bb in 0..blocks {
                    for v in 0..=max_valid + 1 {
                        assert_eq!(idx.contains(bb, v), closed[bb] && valid[bb] == v);
                    }
                }
            }
        }
    }

    #[test]
    fn the_index_chooses_as_the_scan_does() {
        index_against_scan(300, 64, 12345, 20_000, 0);
    }

    #[test]
    fn the_index_matches_a_scan_over_several_summary_words() {
        // More than 4096 blocks (several summary words a group), a count not a multiple of
        // 64, few groups (max_valid 0 to 3).
        for (blocks, max_valid) in [(8229usize, 3u32), (4097, 0), (64 * 64 * 3, 1), (1, 2)] {
            index_against_scan(blocks, max_valid, 777 + blocks as u64, 40_000, 20_000);
        }
    }
}
