//! Synthetic workloads: address patterns for `flashlab sim` and the experiments.
//!
//! A pattern picks request-aligned slots in `[0, slots)`; every generator is seeded, so the
//! same seed gives the same address sequence on every machine. [`Pattern::Jesd219`] also
//! picks each request's size ([`SlotGen::next_request`]).
//!
//! JESD219 (JEDEC, "Solid-State Drive (SSD) Endurance Workloads", September 2010) defines
//! the enterprise endurance workload vendors rate TBW with: transfer sizes 512 B 4%, 1, 1.5,
//! 2, 2.5, 3 and 3.5 KiB 1% each, 4 KiB 67%, 8 KiB 10%, 16 KiB 7%, 32 KiB 3%, 64 KiB 3%;
//! 50% of accesses to the first 5% of the user LBAs, 30% to the next 15%, 20% to the
//! remaining 80% (as described by Seagate in Tom's Hardware, "SSD Endurance: Endurance
//! Workloads", and written in fio's `examples/jesd219.fio`: `bssplit=512/4:1024/1:...`,
//! `random_distribution=zoned:50/5:30/15:20/80`). Transfers of 4 KiB or more start on
//! 4 KiB boundaries (fio's sample sets `blockalign=4k` for all); smaller ones on a 512-byte
//! sector — assumed (the standard's text on their alignment was not in reach). Within a
//! zone, starts are uniform. JESD219A's client workload is a trace of real client I/O, not
//! a distribution, so there is no synthetic `jesd219-client`.

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
    /// JEDEC JESD219's enterprise endurance workload: its transfer sizes and address zones
    /// (see the module's notes); `next_slot` alone gives its zones at the request size.
    Jesd219,
}

/// JESD219's enterprise transfer sizes (bytes) and their shares in percent.
pub const JESD219_SIZES: [(u64, u32); 12] = [
    (512, 4),
    (1024, 1),
    (1536, 1),
    (2048, 1),
    (2560, 1),
    (3072, 1),
    (3584, 1),
    (4096, 67),
    (8192, 10),
    (16384, 7),
    (32768, 3),
    (65536, 3),
];

/// JESD219's address zones: (end of the zone as a share of the user LBAs, share of the
/// accesses in percent).
pub const JESD219_ZONES: [(f64, u32); 3] = [(0.05, 50), (0.20, 30), (1.0, 20)];

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
            Pattern::Jesd219 => write!(f, "jesd219"),
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
            None if s == "jesd219" => Ok(Pattern::Jesd219),
            None if s == "jesd219-client" => Err(
                "jesd219-client: JESD219A's client workload is a trace of real client I/O, not a distribution; replay a client trace with `flashlab replay` (jesd219 is the enterprise workload)".into(),
            ),
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
                "unknown workload {s:?}: expected uniform, sequential, hotcold:R/F, zipf:THETA or jesd219"
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

    /// Slots of the hot region (the first ones) under [`Pattern::HotCold`]; all slots
    /// under other patterns.
    pub fn hot_slots(&self) -> u64 {
        self.hot_slots
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
            Pattern::Jesd219 => {
                let (lo, hi) = self.jesd219_zone(self.slots * 512);
                let (lo, hi) = (lo / 512, (hi / 512).max(lo / 512 + 1));
                self.rng.random_range(lo..hi).min(self.slots - 1)
            }
        }
    }

    /// The next request's (offset, length) in bytes over a space of `slots ×
    /// request_bytes`: a slot of [`SlotGen::next_slot`] at `request_bytes`, or under
    /// [`Pattern::Jesd219`] one of its transfer sizes in one of its zones.
    #[inline]
    pub fn next_request(&mut self, request_bytes: u64) -> (u64, u64) {
        if self.pattern != Pattern::Jesd219 {
            return (self.next_slot() * request_bytes, request_bytes);
        }
        let space = self.slots * request_bytes;
        let pick = self.rng.random_range(0..100u32);
        let mut acc = 0;
        let len = JESD219_SIZES
            .iter()
            .find(|&&(_, p)| {
                acc += p;
                pick < acc
            })
            .map_or(4096, |&(b, _)| b);
        let len = len.min(space);
        let align = if len >= 4096 { 4096 } else { 512 };
        let (lo, hi) = self.jesd219_zone(space);
        let (lo, hi) = (lo.next_multiple_of(align), hi.max(lo + 1));
        let positions = (hi.saturating_sub(lo)).div_ceil(align).max(1);
        let mut offset = lo + self.rng.random_range(0..positions) * align;
        if offset + len > space {
            offset = (space - len) / align * align;
        }
        (offset, len)
    }

    /// A JESD219 zone, drawn by its share of accesses: its byte range in `space`.
    #[inline]
    fn jesd219_zone(&mut self, space: u64) -> (u64, u64) {
        let pick = self.rng.random_range(0..100u32);
        let (mut acc, mut start) = (0, 0.0);
        for (end, share) in JESD219_ZONES {
            acc += share;
            if pick < acc || end >= 1.0 {
                let at = |f: f64| ((space / 512) as f64 * f) as u64 * 512;
                return (at(start), at(end));
            }
            start = end;
        }
        (0, space)
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

    /// Pearson's chi-square statistic of `observed` counts against `expected` shares.
    fn chi_square(observed: &[u64], expected_share: &[f64]) -> f64 {
        let n: u64 = observed.iter().sum();
        observed
            .iter()
            .zip(expected_share)
            .map(|(&o, &p)| {
                let e = n as f64 * p;
                (o as f64 - e).powi(2) / e
            })
            .sum()
    }

    #[test]
    fn jesd219_sizes_and_zones_match_the_standard() {
        // 1 GiB at 4 KiB slots; 200,000 requests.
        let space = 1u64 << 30;
        let mut g = SlotGen::new(Pattern::Jesd219, space / 4096, 11).unwrap();
        let n = 200_000;
        let mut sizes = [0u64; 12];
        let mut zones = [0u64; 3];
        for _ in 0..n {
            let (offset, len) = g.next_request(4096);
            let i = JESD219_SIZES.iter().position(|&(b, _)| b == len).unwrap();
            sizes[i] += 1;
            assert!(offset + len <= space);
            assert_eq!(
                offset % if len >= 4096 { 4096 } else { 512 },
                0,
                "{offset} {len}"
            );
            let f = offset as f64 / space as f64;
            zones[JESD219_ZONES.iter().position(|&(end, _)| f < end).unwrap()] += 1;
        }
        // Chi-square against the published shares: the 0.1% critical values are 31.26 for
        // 11 degrees of freedom and 13.82 for 2; a generator off by one percentage point
        // in a 1% class would give ~200 here at this n.
        let size_shares: Vec<f64> = JESD219_SIZES
            .iter()
            .map(|&(_, p)| p as f64 / 100.0)
            .collect();
        let x2 = chi_square(&sizes, &size_shares);
        assert!(x2 < 31.26, "sizes {sizes:?}: chi-square {x2}");
        let zone_shares: Vec<f64> = JESD219_ZONES
            .iter()
            .map(|&(_, p)| p as f64 / 100.0)
            .collect();
        let x2 = chi_square(&zones, &zone_shares);
        assert!(x2 < 13.82, "zones {zones:?}: chi-square {x2}");
        // Within the hottest zone, starts are uniform: its two halves get equal shares
        // within 4 standard deviations of a binomial at n/2 (sqrt(n/2 * 1/4)).
        let mut g = SlotGen::new(Pattern::Jesd219, space / 4096, 12).unwrap();
        let (mut first, mut hot) = (0i64, 0i64);
        for _ in 0..n {
            let (offset, _) = g.next_request(4096);
            if offset < space / 20 {
                hot += 1;
                first += (offset < space / 40) as i64;
            }
        }
        let sd = (hot as f64 / 4.0).sqrt();
        assert!(
            ((first - hot / 2) as f64).abs() < 4.0 * sd,
            "{first} of {hot}"
        );
    }

    #[test]
    fn jesd219_parses_and_other_patterns_keep_their_request_size() {
        assert_eq!("jesd219".parse::<Pattern>(), Ok(Pattern::Jesd219));
        assert_eq!(Pattern::Jesd219.to_string(), "jesd219");
        let e = "jesd219-client".parse::<Pattern>().unwrap_err();
        assert!(e.contains("trace"), "{e}");
        let mut a = SlotGen::new(Pattern::Uniform, 1000, 5).unwrap();
        let mut b = SlotGen::new(Pattern::Uniform, 1000, 5).unwrap();
        for _ in 0..100 {
            assert_eq!(a.next_request(8192), (b.next_slot() * 8192, 8192));
        }
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
