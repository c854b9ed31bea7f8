//! Preconditioning a drive before a measurement, as SNIA's Solid State Storage Performance
//! Test Specification (PTS) and MQSim do: fill the logical space sequentially up to an
//! occupancy, then age it with random 4 KiB writes over the filled space until write
//! amplification is steady, or a volume cap is reached. A trace replayed on a fresh drive
//! never garbage-collects; on a preconditioned one it meets the GC a used drive has.
//!
//! Runs on the WAF-only path (FTL state only, no timing): fast, and the drive's clock stays
//! where it was. Counters are cleared afterwards, so what is measured next excludes it.
//!
//! Steady state follows the PTS (v2.0.2, section 2.1 "Steady State"): in a window of the
//! last five rounds, the range of the rounds' WAF is within 20% of their average, and the
//! slope of their least-squares line over the window is within 10% of the average.

use flash::{AnyDevice, Device};
use serde::Serialize;
use std::str::FromStr;
use workloads::synthetic::{Pattern, SlotGen};

/// What to do before the measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Precondition {
    /// A fresh drive.
    None,
    /// Sequential writes up to the occupancy.
    Fill,
    /// Fill, then random writes until WAF is steady or `max_x` × the filled bytes are
    /// written.
    Steady { max_x: f64 },
}

impl std::fmt::Display for Precondition {
    /// As `--precondition` takes it: none, fill, steady:5x.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Precondition::None => write!(f, "none"),
            Precondition::Fill => write!(f, "fill"),
            Precondition::Steady { max_x } => write!(f, "steady:{max_x}x"),
        }
    }
}

/// The default cap of `steady`, in multiples of the filled bytes.
pub const DEFAULT_STEADY_MAX_X: f64 = 5.0;

impl FromStr for Precondition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("unknown preconditioning {s:?}: expected none, fill, steady or steady:Nx (e.g. steady:3x)")
        };
        match s {
            "none" => Ok(Precondition::None),
            "fill" => Ok(Precondition::Fill),
            "steady" => Ok(Precondition::Steady {
                max_x: DEFAULT_STEADY_MAX_X,
            }),
            _ => {
                let n = s
                    .strip_prefix("steady:")
                    .and_then(|n| n.strip_suffix('x'))
                    .ok_or_else(bad)?;
                let max_x: f64 = n.parse().map_err(|_| bad())?;
                if !(max_x.is_finite() && max_x > 0.0 && max_x <= 100.0) {
                    return Err(format!(
                        "steady:{n}x: the cap must be above 0 and at most 100 times the filled bytes"
                    ));
                }
                Ok(Precondition::Steady { max_x })
            }
        }
    }
}

/// What preconditioning did (reported beside the measurement).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PreconditionReport {
    pub mode: String,
    pub occupancy: f64,
    pub filled_bytes: u64,
    /// Random writes after the fill.
    pub aging_write_bytes: u64,
    /// Reads run beside the aging writes (a drive whose reads change its state: absent
    /// elsewhere).
    #[serde(skip_serializing_if = "is_zero")]
    pub aging_read_bytes: u64,
    pub rounds: u32,
    /// Whether steady state was reached (false: the cap stopped it; None: not asked).
    pub steady: Option<bool>,
    /// WAF of each aging round.
    pub round_waf: Vec<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether the rounds' WAF values are steady by the PTS's rule over their last five.
pub fn is_steady(wafs: &[f64]) -> bool {
    const WINDOW: usize = 5;
    if wafs.len() < WINDOW {
        return false;
    }
    let w = &wafs[wafs.len() - WINDOW..];
    let avg = w.iter().sum::<f64>() / WINDOW as f64;
    let (lo, hi) = w
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let xm = (WINDOW - 1) as f64 / 2.0;
    let (num, den) = w.iter().enumerate().fold((0.0, 0.0), |(n, d), (i, &y)| {
        let dx = i as f64 - xm;
        (n + dx * (y - avg), d + dx * dx)
    });
    let slope = num / den;
    hi - lo <= 0.2 * avg && (slope * (WINDOW - 1) as f64).abs() <= 0.1 * avg
}

/// Mixed into the seed of the aging rounds' reads, so they are drawn apart from the writes.
const READ_SEED: u64 = 0x005e_ed0f_4ead;

/// Writes the first `bytes` of the logical space sequentially in 1 MiB writes, on the
/// WAF-only path.
pub fn fill(ssd: &mut flash::Ssd, bytes: u64) -> Result<(), flash::FlashError> {
    let chunk = 1 << 20;
    let mut off = 0;
    while off < bytes {
        if off % (1 << 30) == 0 && trace::cancel::requested() {
            return Err(flash::FlashError::Config(trace::cancel::INTERRUPTED.into()));
        }
        let len = chunk.min(bytes - off);
        ssd.write_untimed(off, len)?;
        off += len;
    }
    Ok(())
}

/// Preconditions `dev` (an SSD) as `mode` asks: `occupancy` of the logical space (0 < F
/// ≤ 1) filled, then aged; random writes drawn with `seed`. Clears the drive's counters.
///
/// `read_fraction` is the share of reads in the workload measured next (0 for none). On a
/// drive whose reads change its state (a mapping cache: a read's miss evicts entries and
/// writes back translation pages), the aging rounds carry the workload's reads beside its
/// writes, uniform over the filled space as the writes are: the PTS's workload-dependent
/// preconditioning (WDPC: the test stimulus itself, run until steady state; SNIA SSSI's PTS
/// test descriptions, snia.org/forums/sssi/pts). Aged by
/// writes alone, such a drive enters the measurement with its translation pages written at
/// the write-only rate, and a window of fixed length sees a transient whose length grows
/// with capacity. Elsewhere reads change nothing and none are run. (The reads change the
/// cache only: an aged drive's read-disturb counts and read reclaim are not aged by them.)
pub fn precondition(
    dev: &mut AnyDevice,
    mode: Precondition,
    occupancy: f64,
    read_fraction: f64,
    seed: u64,
) -> Result<PreconditionReport, crate::LabError> {
    if !(0.0..=1.0).contains(&read_fraction) {
        return Err(format!(
            "preconditioning's read fraction {read_fraction} must be between 0 and 1"
        )
        .into());
    }
    if !(occupancy > 0.0 && occupancy <= 1.0) {
        return Err(format!(
            "--occupancy {occupancy} must be above 0 and at most 1 (a share of the logical space)"
        )
        .into());
    }
    let mut report = PreconditionReport {
        mode: match mode {
            Precondition::None => "none".into(),
            Precondition::Fill => "fill".into(),
            Precondition::Steady { max_x } => format!("steady:{max_x}x"),
        },
        occupancy,
        filled_bytes: 0,
        aging_write_bytes: 0,
        aging_read_bytes: 0,
        rounds: 0,
        steady: None,
        round_waf: vec![],
    };
    if mode == Precondition::None {
        return Ok(report);
    }
    if let AnyDevice::Zoned(_) = dev {
        return Err(
            "a zoned drive keeps no mapping to age and takes writes at its zones' write pointers only (use --precondition none)".into(),
        );
    }
    let AnyDevice::Ssd(ssd) = dev else {
        return Err(
            "preconditioning ages an SSD's mapping and garbage collection; this preset is a hard disk (use --precondition none)".into(),
        );
    };
    let err = |e: flash::FlashError| e.to_string();
    let unit = ssd.config().geometry.mapping_unit_bytes as u64;
    let logical = ssd.logical_bytes();
    let filled = ((logical as f64 * occupancy) as u64 / unit * unit).max(unit);
    fill(ssd, filled).map_err(err)?;
    report.filled_bytes = filled;
    if let Precondition::Steady { max_x } = mode {
        age(
            ssd,
            filled / unit,
            unit,
            max_x,
            read_fraction,
            seed,
            &mut report,
        )?;
    }
    ssd.reset_stats();
    Ok(report)
}

/// Refills `out` with the next slots of `gen`, at most 4,096 and at most `left` (which it
/// counts down): one batch of the ageing's untimed calls.
fn draw_batch(gen: &mut SlotGen, left: &mut u64, out: &mut Vec<u32>) {
    out.clear();
    while *left > 0 && out.len() < 4096 {
        out.push(gen.next_slot() as u32);
        *left -= 1;
    }
}

/// Ages a filled drive (`slots` mapping units of `unit` bytes filled) in rounds of random
/// writes until WAF is steady or `max_x` × the filled bytes are written, with the
/// workload's reads beside them where reads change the drive ([`precondition`]).
fn age(
    ssd: &mut flash::Ssd,
    slots: u64,
    unit: u64,
    max_x: f64,
    read_fraction: f64,
    seed: u64,
    report: &mut PreconditionReport,
) -> Result<(), crate::LabError> {
    let err = |e: flash::FlashError| e.to_string();
    // Rounds of a quarter of the filled bytes, in 4 KiB random writes over them.
    let per_round = (slots / 4).max(1);
    let max_rounds = ((max_x * 4.0).ceil() as u32).max(1);
    let mut gen = SlotGen::new(Pattern::Uniform, slots, seed)?;
    let mut lpns: Vec<u32> = Vec::with_capacity(4096);
    // The reads, drawn apart (so the writes are the same with or without them), as many
    // per write as the workload has: a running sum keeps the share exact without draws.
    // A read-only workload: the drive is still aged by writes (its garbage collection's
    // state), and its reads follow them (below).
    let reads_change_state = ssd.reads_change_state();
    let read_only = read_fraction >= 1.0;
    let reads_per_write = if reads_change_state && !read_only {
        read_fraction / (1.0 - read_fraction)
    } else {
        0.0
    };
    let mut read_gen = SlotGen::new(Pattern::Uniform, slots, seed ^ READ_SEED)?;
    let mut reads_owed = 0.0f64;
    let mut read_lpns: Vec<u32> = Vec::with_capacity(4096);
    report.steady = Some(false);
    // Steady state begins once garbage collection has run: before the first erase a
    // drive with room to spare writes at WAF 1.0 round after round, which would look
    // steady and is not (the rounds before it do not count towards the window).
    let mut first_gc_round: Option<usize> = None;
    let erases_at_fill = ssd.stats().erases;
    while report.rounds < max_rounds {
        let before = ssd.stats();
        let mut left = per_round;
        while left > 0 {
            if trace::cancel::requested() {
                return Err(trace::cancel::INTERRUPTED.into());
            }
            draw_batch(&mut gen, &mut left, &mut lpns);
            if reads_per_write == 0.0 {
                ssd.write_units_untimed(&lpns).map_err(err)?;
                continue;
            }
            // Each write followed by the reads owed so far, one batch call per write.
            for &lpn in &lpns {
                ssd.write_units_untimed(&[lpn]).map_err(err)?;
                reads_owed += reads_per_write;
                read_lpns.clear();
                while reads_owed >= 1.0 {
                    read_lpns.push(read_gen.next_slot() as u32);
                    reads_owed -= 1.0;
                }
                ssd.read_units_untimed(&read_lpns).map_err(err)?;
                report.aging_read_bytes += read_lpns.len() as u64 * unit;
            }
        }
        let after = ssd.stats();
        let host = after.host_write_pages - before.host_write_pages;
        let flash_pages = after.flash_write_pages - before.flash_write_pages;
        report
            .round_waf
            .push(flash_pages as f64 / host.max(1) as f64);
        report.rounds += 1;
        report.aging_write_bytes += per_round * unit;
        if first_gc_round.is_none() && after.erases > erases_at_fill {
            first_gc_round = Some(report.round_waf.len() - 1);
        }
        if first_gc_round.is_some_and(|r| is_steady(&report.round_waf[r..])) {
            report.steady = Some(true);
            break;
        }
    }
    if read_only && reads_change_state {
        // The workload's own state for what reads change: a round of its reads (the
        // cache, a few percent of the map, turns over many times).
        let mut left = per_round;
        while left > 0 {
            draw_batch(&mut read_gen, &mut left, &mut read_lpns);
            ssd.read_units_untimed(&read_lpns).map_err(err)?;
            report.aging_read_bytes += read_lpns.len() as u64 * unit;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flash::Preset;

    fn drive() -> AnyDevice {
        Preset::load("x25e")
            .unwrap()
            .with_capacity(256 << 20)
            .build()
            .unwrap()
    }

    #[test]
    fn words_parse_and_bad_ones_are_named() {
        assert_eq!("none".parse(), Ok(Precondition::None));
        assert_eq!("fill".parse(), Ok(Precondition::Fill));
        assert_eq!("steady:3x".parse(), Ok(Precondition::Steady { max_x: 3.0 }));
        let e = "steady:x".parse::<Precondition>().unwrap_err();
        assert!(e.contains("steady:Nx"), "{e}");
        assert!("steady:0x".parse::<Precondition>().is_err());
        assert!("warm".parse::<Precondition>().is_err());
    }

    #[test]
    fn the_pts_rule_wants_a_flat_window_of_five() {
        assert!(!is_steady(&[2.0, 2.0, 2.0, 2.0]), "four rounds are too few");
        assert!(is_steady(&[1.0, 1.5, 2.0, 2.01, 2.0, 1.99, 2.0]));
        assert!(!is_steady(&[1.0, 1.2, 1.4, 1.6, 1.8]), "still climbing");
        assert!(!is_steady(&[2.0, 1.5, 2.5, 2.0, 2.0]), "range too wide");
    }

    #[test]
    fn a_fill_writes_the_occupancy_and_steady_ageing_makes_gc_show() {
        let mut d = drive();
        let r = precondition(&mut d, Precondition::Fill, 0.5, 0.0, 1).unwrap();
        assert_eq!(r.filled_bytes, 128 << 20);
        assert_eq!(d.stats().host_write_pages, 0, "counters cleared");
        let mut d = drive();
        let r = precondition(&mut d, Precondition::Steady { max_x: 5.0 }, 1.0, 0.0, 1).unwrap();
        assert!(r.rounds >= 5, "{r:?}");
        let last = *r.round_waf.last().unwrap();
        assert!(
            last > 1.5,
            "a full drive aged by random writes collects garbage: {r:?}"
        );
        if r.steady == Some(true) {
            assert!(is_steady(&r.round_waf));
        }
        // Deterministic.
        let mut again = drive();
        assert_eq!(
            precondition(&mut again, Precondition::Steady { max_x: 5.0 }, 1.0, 0.0, 1).unwrap(),
            r
        );
        // A cap of 1x: four rounds at most.
        let mut d = drive();
        let r = precondition(&mut d, Precondition::Steady { max_x: 1.0 }, 1.0, 0.0, 1).unwrap();
        assert_eq!((r.rounds, r.steady), (4, Some(false)));
        assert!(precondition(&mut drive(), Precondition::Fill, 1.5, 0.0, 1).is_err());
    }

    #[test]
    fn a_drive_with_room_is_not_steady_before_it_collects_garbage() {
        // 30% full: its free space takes about ten rounds (each 7.5% of the capacity) to
        // use up, and WAF is 1.0 all that time; five flat rounds of it are not steady.
        let mut d = drive();
        let r = precondition(&mut d, Precondition::Steady { max_x: 5.0 }, 0.3, 0.0, 1).unwrap();
        assert!(r.rounds >= 10, "{r:?}");
        let mut d = drive();
        let r = precondition(&mut d, Precondition::Steady { max_x: 1.0 }, 0.3, 0.0, 1).unwrap();
        assert_eq!(r.steady, Some(false), "the cap came first: {r:?}");
    }

    #[test]
    fn a_mapping_cache_is_aged_by_the_workloads_reads_and_other_drives_ignore_them() {
        let steady = Precondition::Steady { max_x: 2.0 };
        // No mapping cache: reads change nothing, so none are run and the ageing is the
        // same with or without them.
        let mut a = drive();
        let mut b = drive();
        let without = precondition(&mut a, steady, 0.9, 0.0, 3).unwrap();
        let with = precondition(&mut b, steady, 0.9, 0.7, 3).unwrap();
        assert_eq!(with, without);
        assert_eq!(with.aging_read_bytes, 0);
        // The 980 (a host memory buffer maps 7% of the drive): 70% reads are 7/3 of the
        // writes, and their misses evict dirty entries, so the rounds write more
        // translation pages, and more flash, per host write.
        let dram_less = || {
            Preset::load("980")
                .unwrap()
                .with_capacity(1 << 30)
                .build()
                .unwrap()
        };
        let (mut a, mut b) = (dram_less(), dram_less());
        let without = precondition(&mut a, steady, 0.9, 0.0, 3).unwrap();
        let with = precondition(&mut b, steady, 0.9, 0.7, 3).unwrap();
        assert_eq!(without.aging_read_bytes, 0);
        let share =
            with.aging_read_bytes as f64 / (with.aging_read_bytes + with.aging_write_bytes) as f64;
        assert!((share - 0.7).abs() < 1e-3, "read share {share}: {with:?}");
        let last = |r: &PreconditionReport| *r.round_waf.last().unwrap();
        assert!(
            last(&with) > last(&without),
            "reads' dirty evictions add translation writes: {} against {}",
            last(&with),
            last(&without)
        );
        // The same writes were drawn: only the reads were added.
        assert_eq!(
            with.aging_write_bytes / with.rounds as u64,
            without.aging_write_bytes / without.rounds as u64
        );
        assert!(precondition(&mut dram_less(), steady, 0.9, 1.5, 3).is_err());
        // Read only: aged by the same writes, then a round of reads.
        let mut c = dram_less();
        let reads = precondition(&mut c, steady, 0.9, 1.0, 3).unwrap();
        assert_eq!(reads.round_waf, without.round_waf);
        assert_eq!(reads.aging_read_bytes, reads.filled_bytes / 4096 / 4 * 4096);
    }
}
