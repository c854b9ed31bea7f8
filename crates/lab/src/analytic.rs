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
    fn fifo_waf_known_values() {
        // α = 1.1: W₀(−1.1 e^−1.1) ≈ −0.9063, WAF ≈ 5.68.
        let w = fifo_waf(0.1);
        assert!((w - 5.677).abs() < 0.005, "{w}");
        // More spare space, less amplification, tending to 1.
        assert!(fifo_waf(0.4) < fifo_waf(0.2));
        assert!(fifo_waf(10.0) < 1.01);
    }
}
