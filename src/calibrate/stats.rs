//! The statistics calibrate reads its probes with: quantiles, a least-squares line, and
//! the periodic waits of 4 KiB writes each followed by a flush (a superpage filling up).
//! Used while probing ([`super::probe`]) and fitting ([`super::fit`]).

/// The `q` quantile (0..=1) of `v`, nearest rank; 0 for an empty slice.
pub fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i.min(s.len() - 1)]
}

pub fn median(v: &[u64]) -> u64 {
    quantile(v, 0.5)
}

/// Least-squares line `y = a + b·x`; `None` with fewer than two distinct x.
pub fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), &(x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|&(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|&(x, y)| (x - mx) * (y - my)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

/// What the 4 KiB write + flush pairs show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncWrites {
    /// One write in this many filled a superpage and waited for its program.
    pub units_per_superpage: u64,
    /// Without a buffer: how much longer such a write took than the others, the wait
    /// `X = S/ch + tP`. With one: how long the flush after it waited, `X` less the time from
    /// the write's data crossing the link to its acknowledgement.
    pub wait_ns: u64,
    /// The wait fell on the flush, not the write: writes are acknowledged from a buffer.
    pub buffered: bool,
    /// A write that waited for nothing.
    pub fast_write_ns: u64,
}

/// Splits latencies into those that waited for something and those that did not: above
/// the lower quartile by half of it (at least 20 µs). A page-mapped drive fills its
/// superpages in the order writes arrive, wherever they land, so the waits come
/// periodically: one in every superpage's worth. Returns (the period, slow, fast), or
/// Latencies that wait at a fixed period: the smallest period `p` (2 to 64, seen at least 8
/// times) with a phase
/// at which at least 90% of the latencies wait (above the lower quartile by half of it, or
/// 20 µs) while at most half of the others do (a TLC drive with an SLC cache and a buffer
/// folds three superpages into one in the gaps, and a flush behind the fold's program
/// waits too: with 8 KiB pages, a third of the others). Returns the period, the waiting
/// latencies at that phase and the others that did not wait. Waits that come at random
/// besides (an SLC cache folding in idle time, a file system's journal) are left out of
/// both; `None` if no period fits (every write waited, none did, or at random).
fn periodic_waits(v: &[u64]) -> Option<(u64, Vec<u64>, Vec<u64>)> {
    let base = quantile(v, 0.25);
    let cut = base + (base / 2).max(20_000);
    let slow: Vec<bool> = v.iter().map(|&l| l > cut).collect();
    for p in 2..=64usize.min(v.len() / 8) {
        for r in 0..p {
            let at: Vec<usize> = (r..v.len()).step_by(p).collect();
            let waited = at.iter().filter(|&&i| slow[i]).count();
            let others = v.len() - at.len();
            let others_waited = slow.iter().filter(|&&s| s).count() - waited;
            if at.len() >= 8 && 10 * waited >= 9 * at.len() && 2 * others_waited <= others {
                let waits: Vec<u64> = at.iter().filter(|&&i| slow[i]).map(|&i| v[i]).collect();
                let fast: Vec<u64> = (0..v.len())
                    .filter(|i| i % p != r && !slow[*i])
                    .map(|i| v[i])
                    .collect();
                return Some((p as u64, waits, fast));
            }
        }
    }
    None
}

/// What the pairs show. Without a buffer, one write in a superpage's worth waits for the
/// program; with one, the flush after it does. Writes are looked at first: a flush waits
/// for every die, so other work (an SLC cache folding in idle time) delays some flushes
/// too, and with both a buffer and such a cache the waits may not be regular enough to
/// read. `None` when neither writes nor flushes wait regularly: every write waited (a
/// superpage of one unit), none did, or they waited for something else.
pub fn sync_writes(pairs: &[(u64, u64)]) -> Option<SyncWrites> {
    let writes: Vec<u64> = pairs.iter().map(|p| p.0).collect();
    let flushes: Vec<u64> = pairs.iter().map(|p| p.1).collect();
    if let Some((period, slow, fast)) = periodic_waits(&writes) {
        return Some(SyncWrites {
            units_per_superpage: period,
            wait_ns: median(&slow).saturating_sub(median(&fast)),
            buffered: false,
            fast_write_ns: median(&fast),
        });
    }
    let (period, slow, _) = periodic_waits(&flushes)?;
    // The lower quartile of the waits: the flushes that waited for nothing else.
    Some(SyncWrites {
        units_per_superpage: period,
        wait_ns: quantile(&slow, 0.25),
        buffered: true,
        fast_write_ns: median(&writes),
    })
}

/// Units per superpage as the sync-write probe shows it (for the probe's own layout).
pub fn superpage_units(pairs: &[(u64, u64)]) -> Option<u64> {
    sync_writes(pairs).map(|s| s.units_per_superpage)
}
