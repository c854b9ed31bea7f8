//! Tests of the error model against its own theory: the Poisson tail, the retry draw's
//! mean, the RBER's anchors and monotonicity, and a timed drive whose reads slow down with
//! age exactly as the model expects; read reclaim; parsing of `--age`.

use super::model::{ln_factorials, poisson_tail};
use super::*;
use crate::ssd::tests::config;
use crate::{Command, Device, Ssd};

/// `P(X > t)` by summing the head directly (fine for moderate lambda).
fn tail_direct(lambda: f64, t: u32) -> f64 {
    let mut term = (-lambda).exp();
    let mut head = 0.0;
    for i in 0..=t {
        if i > 0 {
            term *= lambda / i as f64;
        }
        head += term;
    }
    1.0 - head
}

#[test]
fn poisson_tail_matches_a_direct_sum_and_stays_accurate_far_out() {
    let lf = ln_factorials(200);
    for &(lambda, t) in &[(5.0, 10), (12.0, 15), (40.0, 30), (80.0, 72), (3.0, 0)] {
        let (a, b) = (poisson_tail(lambda, t, &lf), tail_direct(lambda, t));
        assert!((a - b).abs() < 1e-12, "lambda {lambda} t {t}: {a} vs {b}");
    }
    // Far below double precision's 1 - head: P(X > 72 | lambda 1) = e^-1 / 73! (1 + ...).
    let tiny = poisson_tail(1.0, 72, &lf);
    let first = (-1.0f64 - lf[73]).exp();
    assert!(tiny >= first && tiny < first * 1.02, "{tiny} vs {first}");
    assert_eq!(poisson_tail(0.0, 3, &lf), 0.0);
    assert!((poisson_tail(5000.0, 72, &lf) - 1.0).abs() < 1e-12);
}

/// Mean and variance of the retries per read of [`Ecc::retries`] at `rber`, from the
/// model's step probabilities: `P(R > k) = 1 - P_k` for `k < max`.
fn retry_moments(ecc: &Ecc, rber: f64, codewords: u32, lf: &[f64]) -> (f64, f64) {
    let p = ecc.success_by_step(rber, codewords, lf);
    let (mut m1, mut m2) = (0.0, 0.0);
    for (k, s) in p[..ecc.max_retries as usize].iter().enumerate() {
        m1 += 1.0 - s;
        m2 += (2 * k + 1) as f64 * (1.0 - s);
    }
    (m1, m2 - m1 * m1)
}

#[test]
fn mean_retries_of_uniform_draws_equal_the_model_expectation() {
    let ecc = AgingConfig::new(CellType::Tlc).resolve().ecc;
    let lf = ln_factorials(ecc.correctable_bits as usize + 2);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for &rber in &[5e-3, 1e-2, 2e-2, 4e-2, 0.2] {
        let n = 20_000;
        let (mut sum, mut failed) = (0u64, 0u64);
        for _ in 0..n {
            let (r, f) = ecc.retries(rber, 4, rng.random(), &lf);
            sum += r as u64;
            failed += f as u64;
        }
        let (mean, var) = retry_moments(&ecc, rber, 4, &lf);
        assert!((ecc.expected_retries(rber, 4, &lf) - mean).abs() < 1e-12);
        let got = sum as f64 / n as f64;
        let tol = 4.0 * (var / n as f64).sqrt() + 1e-9;
        assert!(
            (got - mean).abs() <= tol,
            "rber {rber}: mean {got}, model {mean} ± {tol}"
        );
        let p_fail = 1.0 - ecc.success_by_step(rber, 4, &lf)[ecc.max_retries as usize];
        let sd = (p_fail * (1.0 - p_fail) / n as f64).sqrt();
        assert!(
            (failed as f64 / n as f64 - p_fail).abs() <= 4.0 * sd + 1e-9,
            "rber {rber}: uncorrectable {failed}/{n}, model {p_fail}"
        );
    }
}

#[test]
fn rber_meets_its_anchors_and_grows_with_wear_retention_and_reads() {
    let mlc = RberModel::for_cell(CellType::Mlc);
    // Hetzler's 3x-nm MLC: 3.4e-4 at 3,000 cycles and a year, 20,000x a fresh block's.
    let anchor = mlc.rber(3000.0, 8760.0, 0.0);
    assert!((anchor - 3.4e-4).abs() < 1e-12, "{anchor}");
    assert!((mlc.rber(0.0, 0.0, 0.0) - 3.4e-4 / 20_000.0).abs() < 1e-18);
    // SLC at 100,000 cycles is MLC at 3,000.
    let slc = RberModel::for_cell(CellType::Slc);
    assert!((slc.rber(100_000.0, 8760.0, 0.0) - anchor).abs() < 1e-12);
    for cell in [CellType::Slc, CellType::Mlc, CellType::Tlc] {
        let m = RberModel::for_cell(cell);
        let r = |pe: f64, h: f64, reads: f64| m.rber(pe, h, reads);
        assert!(
            r(1000.0, 720.0, 10.0) < r(3000.0, 720.0, 10.0),
            "{cell}: wear"
        );
        assert!(
            r(1000.0, 24.0, 10.0) < r(1000.0, 8760.0, 10.0),
            "{cell}: retention"
        );
        assert!(
            r(1000.0, 720.0, 10.0) < r(1000.0, 720.0, 1000.0),
            "{cell}: reads"
        );
        assert!(r(1e9, 1e9, 1e9) <= 0.5);
    }
    // The TLC fit at 3,000 cycles and a year needs retries with its 72-bit LDPC limit.
    let tlc = RberModel::for_cell(CellType::Tlc).rber(3000.0, 8760.0, 0.0);
    assert!(tlc * 8192.0 > 72.0, "{tlc}");
}

#[test]
fn age_strings_parse_and_bad_ones_name_the_part() {
    let a: Age = "pe=1500,retention=1y".parse().unwrap();
    assert_eq!(a.pe_cycles, Some(1500));
    assert_eq!(a.retention_s, Some(365 * 86_400));
    let a: Age = "retention=30d, cell=MLC".parse().unwrap();
    assert_eq!((a.pe_cycles, a.retention_s), (None, Some(30 * 86_400)));
    assert_eq!(a.cell, Some(CellType::Mlc));
    assert_eq!(
        "retention=12h".parse::<Age>().unwrap().retention_s,
        Some(43_200)
    );
    assert_eq!("retention=0".parse::<Age>().unwrap().retention_s, Some(0));
    assert_eq!(
        "retention=90s".parse::<Age>().unwrap().retention_s,
        Some(90)
    );
    for (bad, needle) in [
        ("", "empty"),
        ("pe=lots", "pe=\"lots\""),
        ("pe=-3", "pe=\"-3\""),
        ("pe=1500,retention=1", "needs a unit"),
        ("retention=3w", "unknown unit \"w\""),
        ("retention=x1y", "retention=\"x1y\""),
        ("retention=1e400y", "retention=\"1e400y\""),
        ("retention=-1d", "must be a number and a unit"),
        ("retention=d", "must be a number and a unit"),
        ("retention=1.5.2d", "not a number"),
        ("retention=99999999999y", "out of range"),
        ("temp=40", "unknown key \"temp\""),
        ("pe", "not key=value"),
        ("cell=qlc", "qlc has no error model"),
        ("cell=plc", "unknown cell type"),
    ] {
        let err = bad.parse::<Age>().unwrap_err();
        assert!(err.contains(needle), "{bad:?}: {err}");
    }
}

fn aged_config(cell: CellType, pe: u32, retention_s: u64) -> crate::SsdConfig {
    let mut cfg = config();
    let mut a = AgingConfig::new(cell);
    a.start_pe_cycles = pe;
    a.start_retention_s = retention_s;
    cfg.aging = Some(Box::new(a));
    cfg
}

/// Fills the drive untimed (data "present at the start"), then reads `n` random 4 KiB
/// units one at a time, 10 ms apart (no queueing). Returns the mean read latency, the
/// model's expected mean retries (summed read by read from each block's state just before
/// the read), the variance bound of that mean, and the measured retries per read.
fn aged_reads(mut cfg: crate::SsdConfig, n: u64, seed: u64) -> (f64, f64, f64, f64) {
    // No reclaim: it would move data and keep dies busy between the reads.
    cfg.aging.as_mut().unwrap().reclaim_retries = Some(u32::MAX);
    let mut ssd = Ssd::new(cfg).unwrap();
    let bytes = ssd.logical_bytes();
    ssd.write_untimed(0, bytes).unwrap();
    ssd.seed_errors(seed);
    let units = bytes / 4096;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 1);
    let (mut expected, mut var) = (0.0, 0.0);
    let mut now = 0;
    let mut latency = 0u64;
    for _ in 0..n {
        now += 10_000_000;
        let lpn = rng.random_range(0..units) as u32;
        let ppn = ssd.ftl().lookup(lpn).unwrap();
        let block = ssd.ftl().page_of(ppn) / 32;
        let erases = ssd.ftl().erase_counts()[block as usize];
        let a = ssd.aging().unwrap();
        // The array read starts once the command's overhead is done (the die is idle).
        let rber = a.rber(block, erases, now + 5_000);
        let ecc = a.params().ecc;
        let lf = ln_factorials(ecc.correctable_bits as usize + 2);
        let codewords = 4096 / a.params().codeword_bytes;
        let (m, v) = retry_moments(&ecc, rber, codewords, &lf);
        let e = a.expected_retries(rber, 1);
        assert!((e - m).abs() < 1e-12, "{e} vs {m} at rber {rber}");
        expected += m;
        var += v;
        let done = ssd
            .submit(&Command::read(lpn as u64 * 4096, 4096), now)
            .unwrap();
        latency += done - now;
    }
    ssd.check_invariants().unwrap();
    let s = ssd.stats();
    let aging = s.aging.unwrap();
    assert_eq!(aging.reads, n);
    // Every retry is one more tR (50 µs) and nothing else changes: the latencies say so.
    let base = 5_000 + 50_000 + 10_240 + 8_192;
    assert_eq!(latency, n * base + aging.retries * 50_000);
    let nf = n as f64;
    (
        latency as f64 / nf,
        expected / nf,
        var.sqrt() / nf,
        aging.retries_per_read.unwrap(),
    )
}

#[test]
fn read_latency_rises_with_wear_and_retention_as_the_model_expects() {
    let n = 4000;
    let mut last = 0.0;
    for (pe, retention_s) in [(0, 2_592_000), (1000, 2_592_000), (3000, 2_592_000)] {
        let (lat, expected, sd, got) =
            aged_reads(aged_config(CellType::Tlc, pe, retention_s), n, 9);
        assert!(
            (got - expected).abs() <= 4.0 * sd + 1e-9,
            "pe {pe}: {got} retries per read, model {expected} ± {}",
            4.0 * sd
        );
        assert!(lat > last, "pe {pe}: mean latency {lat} not above {last}");
        last = lat;
    }
    let mut last = 0.0;
    for retention_s in [0, 2_592_000, 31_536_000] {
        let (lat, expected, sd, got) =
            aged_reads(aged_config(CellType::Tlc, 1000, retention_s), n, 9);
        assert!(
            (got - expected).abs() <= 4.0 * sd + 1e-9,
            "retention {retention_s}: {got} retries per read, model {expected} ± {}",
            4.0 * sd
        );
        assert!(
            lat > last,
            "retention {retention_s}: {lat} not above {last}"
        );
        last = lat;
    }
    // MLC with its BCH-15 per 512 bytes: the anchor's RBER (3.4e-4, 1.4 errors per
    // codeword) needs no retries; ten times the wear does.
    let (_, young, _, _) = aged_reads(aged_config(CellType::Mlc, 3000, 31_536_000), 500, 3);
    let (_, old, _, _) = aged_reads(aged_config(CellType::Mlc, 30_000, 31_536_000), 500, 3);
    assert!(young < 0.01 && old > 1.0, "mlc: {young} vs {old}");
}

#[test]
fn a_model_without_errors_times_reads_as_a_drive_without_one_and_seeds_decide_the_draws() {
    let run = |aging: Option<AgingConfig>, seed: u64| {
        let mut cfg = config();
        cfg.aging = aging.map(Box::new);
        let mut ssd = Ssd::new(cfg).unwrap();
        let bytes = ssd.logical_bytes();
        ssd.write_untimed(0, bytes).unwrap();
        ssd.seed_errors(seed);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let units = ssd.logical_bytes() / 4096;
        let mut now = 0;
        let mut out = Vec::new();
        for i in 0..6000u64 {
            let lpn = rng.random_range(0..units);
            let cmd = if i % 3 == 0 {
                Command::write(lpn * 4096, 8192.min((units - lpn) * 4096))
            } else {
                Command::read(lpn * 4096, 4096)
            };
            now += 20_000;
            out.push(ssd.submit(&cmd, now).unwrap());
        }
        ssd.check_invariants().unwrap();
        (out, ssd.stats())
    };
    let mut zero = AgingConfig::new(CellType::Tlc);
    zero.rber = Some(RberModel {
        epsilon: 0.0,
        alpha: 0.0,
        k: 1.0,
        beta: 0.0,
        m: 1.0,
        n: 1.0,
        gamma: 0.0,
        p: 1.0,
        q: 1.0,
    });
    let (plain, s) = run(None, 1);
    let (with_zero, z) = run(Some(zero), 1);
    assert!(
        plain == with_zero,
        "a model without errors changed the timing"
    );
    assert_eq!(z.aging.as_ref().unwrap().retries, 0);
    assert!(s.aging.is_none());
    let mut old = AgingConfig::new(CellType::Tlc);
    old.start_pe_cycles = 2000;
    old.start_retention_s = 31_536_000;
    let (a, sa) = run(Some(old.clone()), 7);
    let (b, sb) = run(Some(old.clone()), 7);
    let (c, _) = run(Some(old), 8);
    assert!(a == b, "same seed, same numbers");
    assert_eq!(sa.aging, sb.aging);
    assert!(a != c, "another seed, other draws");
    assert!(sa.aging.unwrap().retries > 0);
}

#[test]
fn read_disturb_reclaims_a_block_read_too_often_and_its_data_stays() {
    let mut cfg = aged_config(CellType::Tlc, 0, 0);
    cfg.aging.as_mut().unwrap().reclaim_reads = Some(64);
    let mut ssd = Ssd::new(cfg).unwrap();
    let bytes = ssd.logical_bytes();
    ssd.write_untimed(0, bytes).unwrap();
    let before = ssd.ftl().lookup(0).unwrap();
    let mut now = 0;
    for _ in 0..63 {
        now += 1_000_000;
        ssd.submit(&Command::read(0, 4096), now).unwrap();
    }
    assert_eq!(ssd.stats().aging.unwrap().reclaimed_blocks, 0);
    assert_eq!(ssd.ftl().lookup(0), Some(before));
    now += 1_000_000;
    let done = ssd.submit(&Command::read(0, 4096), now).unwrap();
    let s = ssd.stats();
    let a = s.aging.as_ref().unwrap();
    assert_eq!((a.reclaimed_blocks, a.reclaimed_for_reads), (1, 1));
    // The block was full of valid data: all of it moved, as GC copies, and it was erased.
    assert_eq!(a.reclaim_copied_pages, 32);
    assert_eq!(s.gc_copied_pages, 32);
    assert_eq!(s.erases, 1);
    let after = ssd.ftl().lookup(0).unwrap();
    assert_ne!(after, before);
    ssd.check_invariants().unwrap();
    // The relocation is queued on the die (32 reads, 32 programs and an erase): under the
    // priority scheduler (the default) the next read of the same unit goes before it; in
    // submission order it waits for all of it.
    let next = ssd.submit(&Command::read(0, 4096), done).unwrap();
    assert!(next - done < 1_000_000, "{}", next - done);
    let mut fifo = aged_config(CellType::Tlc, 0, 0);
    fifo.aging.as_mut().unwrap().reclaim_reads = Some(64);
    fifo.scheduler = Some(crate::ssd::SchedulerConfig::fifo());
    let mut in_order = Ssd::new(fifo).unwrap();
    in_order.write_untimed(0, bytes).unwrap();
    let mut t = 0;
    for _ in 0..64 {
        t += 1_000_000;
        t = in_order.submit(&Command::read(0, 4096), t).unwrap();
    }
    let waited = in_order.submit(&Command::read(0, 4096), t).unwrap() - t;
    assert!(waited > 32 * 500_000, "{waited}");
    // The moved data is freshly programmed: its read count starts again.
    let block = ssd.ftl().page_of(after) / 32;
    let rber_new = ssd.aging().unwrap().rber(block, 0, next);
    assert!(rber_new < 1.49e-3, "{rber_new}");
}

#[test]
fn a_read_needing_too_many_retries_reclaims_its_block_and_the_moved_data_reads_faster() {
    let mut cfg = aged_config(CellType::Tlc, 3000, 31_536_000);
    cfg.aging.as_mut().unwrap().reclaim_retries = Some(1);
    let mut ssd = Ssd::new(cfg).unwrap();
    let bytes = ssd.logical_bytes();
    ssd.write_untimed(0, bytes).unwrap();
    ssd.seed_errors(2);
    let first = ssd.submit(&Command::read(0, 4096), 1_000_000).unwrap() - 1_000_000;
    let a = ssd.stats().aging.unwrap();
    assert!(a.retries > 1, "{a:?}");
    assert_eq!((a.reclaimed_blocks, a.reclaimed_for_reads), (1, 0));
    // A second after the reclaim the data is a second old: no retention errors to speak of.
    let second = ssd.submit(&Command::read(0, 4096), 1_000_000_000).unwrap() - 1_000_000_000;
    assert!(second < first, "{second} vs {first}");
    ssd.check_invariants().unwrap();
}

#[test]
fn bad_tables_are_clear_errors() {
    let mut a = AgingConfig::new(CellType::Tlc);
    a.retry_factor = Some(1.5);
    assert!(a.validate().unwrap_err().contains("retry_factor"));
    let mut a = AgingConfig::new(CellType::Mlc);
    a.correctable_bits = Some(5000);
    assert!(a.validate().unwrap_err().contains("correctable_bits"));
    let mut cfg = aged_config(CellType::Tlc, 0, 0);
    cfg.ftl = crate::mapping::FtlKind::Fast;
    cfg.log_blocks = 4;
    let err = Ssd::new(cfg).err().unwrap().to_string();
    assert!(err.contains("aging needs ftl"), "{err}");
    let toml_err = toml::from_str::<AgingConfig>("cell = \"tlc\"\nretries = 3\n").unwrap_err();
    assert!(toml_err.to_string().contains("retries"), "{toml_err}");
}

#[test]
fn reclaim_keeps_the_ftl_consistent_under_every_gc_policy_and_a_mapping_cache() {
    for (policy, cached) in [
        (crate::GcPolicy::Greedy, false),
        (crate::GcPolicy::CostBenefit, false),
        (crate::GcPolicy::Fifo, false),
        (crate::GcPolicy::Greedy, true),
    ] {
        let mut cfg = aged_config(CellType::Tlc, 3000, 31_536_000);
        cfg.gc.policy = policy;
        if cached {
            cfg.mapping_cache = Some(crate::MappingCacheConfig::dram(8 << 10));
        }
        let a = cfg.aging.as_mut().unwrap();
        a.reclaim_reads = Some(40);
        a.reclaim_retries = Some(2);
        let mut ssd = Ssd::new(cfg).unwrap();
        let units = ssd.logical_bytes() / 4096;
        ssd.write_untimed(0, units * 4096).unwrap();
        ssd.seed_errors(11);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
        let mut now = 0;
        for i in 0..20_000u64 {
            // Reads favour a small hot range, so its blocks pass the read limit.
            let lpn = if i % 2 == 0 {
                rng.random_range(0..64)
            } else {
                rng.random_range(0..units)
            };
            let cmd = if i % 5 == 0 {
                Command::write(lpn * 4096, 4096)
            } else {
                Command::read(lpn * 4096, 4096)
            };
            now = ssd.submit(&cmd, now).unwrap();
        }
        ssd.check_invariants().unwrap();
        let s = ssd.stats();
        let a = s.aging.as_ref().unwrap();
        assert!(
            a.reclaimed_blocks > 0
                && a.reclaimed_for_reads > 0
                && a.reclaimed_for_reads < a.reclaimed_blocks,
            "{policy} cached {cached}: {a:?}"
        );
        assert!(s.gc_copied_pages >= a.reclaim_copied_pages);
        for lpn in 0..units as u32 {
            assert!(ssd.ftl().lookup(lpn).is_some(), "unit {lpn} lost its data");
        }
    }
}

#[test]
fn age_pe_seeds_every_block_s_erase_count_so_life_used_starts_at_n_over_rated() {
    let endurance = crate::wear::EnduranceConfig {
        rated_pe_cycles: 3000,
        rated_tbw_bytes: None,
        warranty_years: None,
        rated_logical_bytes: None,
    };
    let aged = |pe: u32| {
        let mut cfg = aged_config(CellType::Mlc, pe, 0);
        cfg.endurance = Some(Box::new(endurance.clone()));
        Ssd::new(cfg).unwrap()
    };
    let fresh = aged(0);
    let old = aged(1500);
    assert!(fresh.ftl().erase_counts().iter().all(|&c| c == 0));
    assert!(old.ftl().erase_counts().iter().all(|&c| c == 1500));
    let w = old.wear_report(None).unwrap();
    assert_eq!(w.life_used, 0.5);
    assert_eq!((w.erase_count_min, w.erase_count_max), (1500, 1500));
    assert_eq!(fresh.wear_report(None).unwrap().life_used, 0.0);
    // The error model reads the seeded count: at 1,500 cycles a block's RBER is the
    // model's at 1,500, not 3,000.
    let a = old.aging().unwrap();
    let model = RberModel::for_cell(CellType::Mlc);
    let rber = a.rber(0, old.ftl().erase_counts()[0], 0);
    assert!(
        (rber - model.rber(1500.0, 0.0, 0.0)).abs() < 1e-15,
        "{rber}"
    );
    // Writes that erase blocks add to the seeded counts.
    let mut old = old;
    let bytes = old.logical_bytes();
    for _ in 0..3 {
        old.write_untimed(0, bytes).unwrap();
    }
    let w = old.wear_report(None).unwrap();
    assert!(w.erase_count_max > 1500 && w.life_used > 0.5, "{w:?}");
    old.check_invariants().unwrap();
}
