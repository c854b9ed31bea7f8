//! Byte counts as people read them in messages: `8.0 GiB (8588591104 bytes)`.

const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];

/// `bytes` in the largest binary unit that keeps it at least 1, one decimal (`8.0 GiB`,
/// `512 bytes`).
pub fn binary(bytes: u64) -> String {
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `binary(bytes)` with the exact count after it where the unit rounds it.
pub fn exact(bytes: u64) -> String {
    if bytes < 1024 {
        binary(bytes)
    } else {
        format!("{} ({bytes} bytes)", binary(bytes))
    }
}

/// The smallest whole number of GiB holding `bytes`, as `--capacity` takes it (`9GiB`).
pub fn whole_gib_at_least(bytes: u64) -> String {
    format!("{}GiB", bytes.div_ceil(1 << 30).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(binary(512), "512 bytes");
        assert_eq!(binary(8_588_591_104), "8.0 GiB");
        assert_eq!(binary(1536), "1.5 KiB");
        assert_eq!(exact(8_588_591_104), "8.0 GiB (8588591104 bytes)");
        assert_eq!(whole_gib_at_least(8_588_591_104), "8GiB");
        assert_eq!(whole_gib_at_least((8 << 30) + 1), "9GiB");
        assert_eq!(whole_gib_at_least(1 << 30), "1GiB");
    }
}
