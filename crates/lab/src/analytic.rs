//! Closed-form models the experiments compare against.

/// Principal branch W₀ of the Lambert W function for `x >= -1/e` (Halley's iteration).
pub fn lambert_w0(x: f64) -> f64 {
    let min = -(-1.0f64).exp();
    assert!(x >= min - 1e-12, "lambert_w0 undefined below -1/e: {x}");
    if x <= min {
        return -1.0;
    }
    // Start near the branch point with its series, elsewhere with ln(1 + x).
    let mut w = if x < -0.25 {
        let p = (2.0 * (1.0 + std::f64::consts::E * x)).sqrt();
        -1.0 + p - p * p / 3.0
    } else {
        (1.0 + x).ln()
    };
    for _ in 0..64 {
        let ew = w.exp();
        let f = w * ew - x;
        let wp1 = w + 1.0;
        let denom = ew * wp1 - (w + 2.0) * f / (2.0 * wp1);
        let step = f / denom;
        w -= step;
        if step.abs() <= 1e-15 * (1.0 + w.abs()) {
            break;
        }
    }
    w
}

/// Write amplification of FIFO (LRU) cleaning under uniform random writes, from
/// Desnoyers, "Analytic modeling of SSD write performance" (SYSTOR 2012):
/// `WAF = α / (α + W₀(−α e^{−α}))` with `α = physical / logical = 1 + op`.
pub fn fifo_waf(op: f64) -> f64 {
    let alpha = 1.0 + op;
    alpha / (alpha + lambert_w0(-alpha * (-alpha).exp()))
}

/// The over-provisioning GC actually works with on a drive of geometry `g`: the physical
/// blocks (whole blocks per die: `g.blocks_per_die()`, so a little above `g.op`) less the
/// blocks that hold no reclaimable data in steady state, per die: the free pool, which the
/// FTL keeps at `gc_free_blocks` (GC runs until it is above, and the next host block takes
/// it back to the threshold; paced GC hovers at it), and the `open_frontiers` (host and
/// GC, two per placement handle in use), each half-written on average. Desnoyers' model
/// assumes none of this (a drive of infinitely many blocks); with few blocks per die the
/// reserve is a visible share of the spare space. Derived from the FTL's rules, not fitted:
/// `flashlab sim --preset nvme --capacity 4GiB` (183 blocks of 1.5 MiB per die at op 0.07,
/// reserve 3 blocks) has effective op 0.055, and uniform FIFO's WAF (9.94) is within 1.2%
/// of `fifo_waf(effective_op)` and 27% above `fifo_waf(op)` (tests in sim.rs).
pub fn effective_op(g: &flash::Geometry, gc_free_blocks: u32, open_frontiers: u32) -> f64 {
    let reserve = gc_free_blocks as f64 + open_frontiers as f64 / 2.0;
    let data_blocks = (g.blocks_per_die() as f64 - reserve) * g.dies() as f64;
    data_blocks * g.block_bytes() as f64 / g.logical_bytes as f64 - 1.0
}

/// One stream of a drive that keeps its streams apart (FDP placement handles, persistently
/// isolated): its share of the host writes and of the logical space. Writes are uniform
/// random within the stream's space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stream {
    pub write_share: f64,
    pub space_share: f64,
}

/// WAF of a drive whose streams are written to blocks of their own, each stream cleaned
/// FIFO within its blocks, with `spare_shares[i]` of the spare space (`op` × logical)
/// behind stream `i`: stream `i` is then a drive of its own at over-provisioning
/// `op × spare_share / space_share`, and its WAF is [`fifo_waf`]'s (Desnoyers 2012, as
/// for one stream); the drive's is the streams' weighted by their write shares.
pub fn separated_fifo_waf(op: f64, streams: &[Stream], spare_shares: &[f64]) -> f64 {
    assert_eq!(
        streams.len(),
        spare_shares.len(),
        "a spare share per stream"
    );
    streams
        .iter()
        .zip(spare_shares)
        .map(|(s, &x)| s.write_share * fifo_waf(op * x / s.space_share))
        .sum()
}

/// [`separated_fifo_waf`] with the spare space split as greedy cleaning across the
/// streams splits it: greedy always takes the block with the least valid data whichever
/// stream it holds, so in steady state every stream's victims hold the same share of
/// valid data; under FIFO's model (victim share `u` with `u = e^{−α(1−u)}`) that share
/// fixes `α`, so every stream has the drive's own `α` (spare in proportion to space) and
/// the drive amplifies as it would under uniform random writes: [`fifo_waf`]`(op)`,
/// whatever the streams' skew. Separation removes the penalty of mixing hot and cold data
/// in one block; it does not beat uniform writes unless the split is tuned
/// ([`optimal_separated_fifo_waf`]).
pub fn separated_waf(op: f64, streams: &[Stream]) -> f64 {
    let spares: Vec<f64> = streams.iter().map(|s| s.space_share).collect();
    separated_fifo_waf(op, streams, &spares)
}

/// The least [`separated_fifo_waf`] of two streams over every split of the spare space
/// (golden-section search): the bound a drive tuning its split per stream could reach
/// (Stoica and Ailamaki, "Improving flash write performance by using update frequency",
/// VLDB 2013, derive the same optimum).
pub fn optimal_separated_fifo_waf(op: f64, streams: &[Stream; 2]) -> f64 {
    let f = |x: f64| separated_fifo_waf(op, streams, &[x, 1.0 - x]);
    let (mut lo, mut hi) = (1e-6, 1.0 - 1e-6);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..200 {
        let (a, b) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if f(a) < f(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    f((lo + hi) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_solves_its_equation() {
        for x in [-0.36, -0.3, -0.1, 0.0, 0.5, 1.0, 10.0] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-12, "x {x} w {w}");
        }
        assert!((lambert_w0(1.0) - 0.567_143_290_409_783_8).abs() < 1e-14);
    }

    #[test]
    fn separation_models_reduce_to_one_stream_and_bound_each_other() {
        let one = [Stream {
            write_share: 1.0,
            space_share: 1.0,
        }];
        for op in [0.07, 0.15, 0.28] {
            assert!((separated_waf(op, &one) - fifo_waf(op)).abs() < 1e-12);
            let hc = [
                Stream {
                    write_share: 0.9,
                    space_share: 0.1,
                },
                Stream {
                    write_share: 0.1,
                    space_share: 0.9,
                },
            ];
            let eq = separated_waf(op, &hc);
            assert!(
                (eq - fifo_waf(op)).abs() < 1e-9,
                "equal utilization is uniform's"
            );
            let best = optimal_separated_fifo_waf(op, &hc);
            assert!(best < eq, "op {op}: optimum {best} vs equal {eq}");
            // An even split of a uniform workload is already optimal.
            let even = [
                Stream {
                    write_share: 0.5,
                    space_share: 0.5,
                },
                Stream {
                    write_share: 0.5,
                    space_share: 0.5,
                },
            ];
            assert!((optimal_separated_fifo_waf(op, &even) - fifo_waf(op)).abs() < 1e-6);
        }
    }

    #[test]
    fn fifo_waf_known_values() {
        // α = 1.1: W₀(−1.1 e^−1.1) ≈ −0.9063, WAF ≈ 5.68.
        let w = fifo_waf(0.1);
        assert!((w - 5.677).abs() < 0.005, "{w}");
        // More spare space, less amplification, tending to 1.
        assert!(fifo_waf(0.4) < fifo_waf(0.2));
        assert!(fifo_waf(10.0) < 1.01);
    }
}
