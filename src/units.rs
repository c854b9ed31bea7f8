//! Parsing of sizes ("4KiB", "32GB", "4096") and multiples ("2x") on the command line.

/// Parses a byte size: a number with an optional unit K/KB/KiB, M/MB/MiB, G/GB/GiB,
/// T/TB/TiB (binary for K, M, G, T and the *iB forms; decimal for KB, MB, GB, TB).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| {
        format!("size {s:?}: expected a number with an optional unit such as 4KiB, 256GB or 1GiB")
    })?;
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "K" | "k" | "KiB" => 1024.0,
        "KB" | "kB" => 1e3,
        "M" | "MiB" => 1024.0 * 1024.0,
        "MB" => 1e6,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "GB" => 1e9,
        "T" | "TiB" => 1024f64.powi(4),
        "TB" => 1e12,
        other => {
            return Err(format!(
                "size {s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
            ))
        }
    };
    let bytes = value * mult;
    if !(bytes.is_finite() && (0.0..1.8e19).contains(&bytes)) {
        return Err(format!("size {s:?} is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// Parses a duration: a number with ns, us, ms or s (a bare number is nanoseconds).
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        format!("duration {s:?}: expected a number with ns, us, ms or s, e.g. 20us")
    })?;
    let mult = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(format!(
                "duration {s:?}: unknown unit {other:?} (use ns, us, ms or s)"
            ))
        }
    };
    let ns = v * mult;
    if ns.is_finite() && (0.0..1.8e19).contains(&ns) {
        Ok(ns.round() as u64)
    } else {
        Err(format!("duration {s:?} is out of range"))
    }
}

/// Parses a multiple of the capacity: "2x", "0.5x" or a bare number.
pub fn parse_multiple(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches(['x', 'X']);
    let v: f64 = t
        .parse()
        .map_err(|_| format!("{s:?}: expected a multiple of the capacity such as 2x or 0.5x"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("{s:?}: the multiple must be a non-negative number"))
    }
}

/// A write volume: a multiple of the drive's capacity (`2x`) or a size (`1GiB`, `4096`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Volume {
    Multiple(f64),
    Bytes(u64),
}

impl Volume {
    /// The volume as a multiple of `capacity_bytes`.
    pub fn multiple_of(self, capacity_bytes: u64) -> f64 {
        match self {
            Volume::Multiple(m) => m,
            Volume::Bytes(b) => b as f64 / capacity_bytes.max(1) as f64,
        }
    }
}

/// Parses a write volume: `2x`/`0.5x` (multiples of the capacity) or a size (`1GiB`).
pub fn parse_volume(s: &str) -> Result<Volume, String> {
    if s.trim().ends_with(['x', 'X']) {
        return parse_multiple(s).map(Volume::Multiple);
    }
    let bytes = parse_size(s).map_err(|_| {
        format!("{s:?}: expected a multiple of the capacity (2x, 0.5x) or a size (1GiB, 4096)")
    })?;
    // A bare number is bytes; one below a page is far more likely a multiple missing its
    // `x` than a volume anyone means to measure.
    if bytes < 4096 && s.trim().chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "{s:?} is {bytes} bytes, less than one 4 KiB page: for {s} times the capacity write {}x",
            s.trim()
        ));
    }
    Ok(Volume::Bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volumes_are_multiples_or_sizes() {
        assert_eq!(parse_volume("2x"), Ok(Volume::Multiple(2.0)));
        assert_eq!(parse_volume("1GiB"), Ok(Volume::Bytes(1 << 30)));
        assert_eq!(Volume::Bytes(1 << 30).multiple_of(4 << 30), 0.25);
        assert!(parse_volume("lots").unwrap_err().contains("a size (1GiB"));
        assert!(parse_volume("2").unwrap_err().contains("write 2x"));
        assert_eq!(parse_volume("8192"), Ok(Volume::Bytes(8192)));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("32GB"), Ok(32_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(1_610_612_736));
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_size("GB").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("20us"), Ok(20_000));
        assert_eq!(parse_duration_ns("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration_ns("5"), Ok(5));
        assert!(parse_duration_ns("3 fortnights").is_err());
    }

    #[test]
    fn multiples() {
        assert_eq!(parse_multiple("2x"), Ok(2.0));
        assert_eq!(parse_multiple("0.5"), Ok(0.5));
        assert!(parse_multiple("-1x").is_err());
        assert!(parse_multiple("twice").is_err());
    }
}
