//! Synthetic workloads: address patterns for `flashlab sim` and the experiments.
//!
//! A pattern picks request-aligned slots in `[0, slots)`; every generator is seeded, so the
//! same seed gives the same address sequence on every machine.

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    Uniform,
    Sequential,
    /// `hot_write_fraction` of requests go to the first `hot_space_fraction` of the slots.
    HotCold {
        hot_write_fraction: f64,
        hot_space_fraction: f64,
    },
    /// Zipf over slots with exponent `theta` (slot 0 hottest).
    Zipf {
        theta: f64,
    },
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Uniform => write!(f, "uniform"),
            Pattern::Sequential => write!(f, "sequential"),
            Pattern::HotCold {
                hot_write_fraction,
                hot_space_fraction,
            } => write!(f, "hotcold:{hot_write_fraction}/{hot_space_fraction}"),
            Pattern::Zipf { theta } => write!(f, "zipf:{theta}"),
        }
    }
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let fraction = |v: &str, what: &str| -> Result<f64, String> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("{what} {v:?} in {s:?} is not a number"))?;
            if x > 0.0 && x < 1.0 {
                Ok(x)
            } else {
                Err(format!(
                    "{what} {x} in {s:?} must lie strictly between 0 and 1"
                ))
            }
        };
        match s.split_once(':') {
            None if s == "uniform" => Ok(Pattern::Uniform),
            None if s == "sequential" => Ok(Pattern::Sequential),
            Some(("hotcold", rest)) => {
                let (r, f) = rest
                    .split_once('/')
                    .ok_or_else(|| format!("{s:?}: expected hotcold:R/F, e.g. hotcold:0.9/0.1"))?;
                Ok(Pattern::HotCold {
                    hot_write_fraction: fraction(r, "write fraction R")?,
                    hot_space_fraction: fraction(f, "space fraction F")?,
                })
            }
            Some(("zipf", theta)) => {
                let theta: f64 = theta
                    .parse()
                    .map_err(|_| format!("{s:?}: theta {theta:?} is not a number"))?;
                if !(theta > 0.0 && theta.is_finite()) {
                    return Err(format!("{s:?}: theta must be positive"));
                }
                Ok(Pattern::Zipf { theta })
            }
            _ => Err(format!(
                "unknown workload {s:?}: expected uniform, sequential, hotcold:R/F or zipf:THETA"
            )),
        }
    }
}

/// A seeded stream of slot numbers following a [`Pattern`].
pub struct SlotGen {
    pattern: Pattern,
    slots: u64,
    hot_slots: u64,
    next_sequential: u64,
    zipf: Option<Zipf<f64>>,
    rng: Xoshiro256PlusPlus,
}

impl SlotGen {
    pub fn new(pattern: Pattern, slots: u64, seed: u64) -> Result<Self, String> {
        if slots == 0 {
            return Err(
                "the workload has no slot to address (request size larger than the device?)".into(),
            );
        }
        let hot_slots = match pattern {
            Pattern::HotCold {
                hot_space_fraction, ..
            } => ((slots as f64 * hot_space_fraction) as u64).clamp(1, slots),
            _ => slots,
        };
        let zipf = match pattern {
            Pattern::Zipf { theta } => {
                Some(Zipf::new(slots as f64, theta).map_err(|e| format!("zipf: {e}"))?)
            }
            _ => None,
        };
        Ok(SlotGen {
            pattern,
            slots,
            hot_slots,
            next_sequential: 0,
            zipf,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }

    #[inline]
    pub fn next_slot(&mut self) -> u64 {
        match self.pattern {
            Pattern::Uniform => self.rng.random_range(0..self.slots),
            Pattern::Sequential => {
                let s = self.next_sequential;
                self.next_sequential = (s + 1) % self.slots;
                s
            }
            Pattern::HotCold {
                hot_write_fraction, ..
            } => {
                if self.rng.random_bool(hot_write_fraction) || self.hot_slots == self.slots {
                    self.rng.random_range(0..self.hot_slots)
                } else {
                    self.rng.random_range(self.hot_slots..self.slots)
                }
            }
            Pattern::Zipf { .. } => {
                let z = self
                    .zipf
                    .as_ref()
                    .expect("zipf sampler exists for a zipf pattern");
                (z.sample(&mut self.rng) as u64 - 1).min(self.slots - 1)
            }
        }
    }

    /// A uniform draw in [0, 1), for read/write mixes.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        self.rng.random::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_patterns() {
        assert_eq!("uniform".parse::<Pattern>(), Ok(Pattern::Uniform));
        assert_eq!(
            "hotcold:0.9/0.1".parse::<Pattern>(),
            Ok(Pattern::HotCold {
                hot_write_fraction: 0.9,
                hot_space_fraction: 0.1
            })
        );
        assert!("hotcold:0.9"
            .parse::<Pattern>()
            .unwrap_err()
            .contains("hotcold:R/F"));
        assert!("hotcold:1.5/0.1".parse::<Pattern>().is_err());
        assert!("zipf:-1".parse::<Pattern>().is_err());
        assert!("random".parse::<Pattern>().unwrap_err().contains("uniform"));
    }

    #[test]
    fn hotcold_sends_the_right_share_to_the_hot_region() {
        let p = "hotcold:0.8/0.2".parse().unwrap();
        let mut g = SlotGen::new(p, 1000, 7).unwrap();
        let hot = (0..100_000).filter(|_| g.next_slot() < 200).count();
        assert!((hot as f64 / 100_000.0 - 0.8).abs() < 0.01, "{hot}");
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let mut g = SlotGen::new(Pattern::Zipf { theta: 0.99 }, 10_000, 3).unwrap();
        let draws: Vec<u64> = (0..50_000).map(|_| g.next_slot()).collect();
        assert!(draws.iter().all(|&s| s < 10_000));
        let top = draws.iter().filter(|&&s| s < 100).count();
        assert!(top > 50_000 / 4, "top 1% of slots got only {top} draws");
    }

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u64> = {
            let mut g = SlotGen::new(Pattern::Uniform, 1 << 20, 42).unwrap();
            (0..100).map(|_| g.next_slot()).collect()
        };
        let mut g = SlotGen::new(Pattern::Uniform, 1 << 20, 42).unwrap();
        assert!(a.iter().all(|&s| s == g.next_slot()));
    }
}
