//! `flashlab calibrate`: probe a drive with a fixed sequence of reads, writes, discards and
//! flushes, fit flashlab's SSD model to what it shows, and write a preset whose every value
//! says which probe set it (or that it is assumed).
//!
//! - [`target`]: the narrow trait the probes run against;
//! - [`os_target`]: a real file or block device, O_DIRECT, in wall-clock time;
//! - [`sim_target`]: a simulated drive in virtual time (so the fit can be checked against
//!   the preset it ran on: `recovery_tests`);
//! - [`probe`]: the sequence, written once;
//! - [`fit`]: measurements to parameters, through the model's equations;
//! - [`render`]: the preset TOML with a comment on every value.

pub mod fit;
pub mod os_target;
pub mod probe;
pub mod render;
pub mod sim_target;
pub mod stats;
pub mod target;

#[cfg(test)]
mod recovery_tests;

/// Today's date in UTC, as YYYY-MM-DD (for the preset's comments).
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(secs / 86_400)
}

/// The proleptic Gregorian date of day `days` since 1970-01-01.
fn civil_date(days: u64) -> String {
    lab::report::civil_date(days as i64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil_date(0), "1970-01-01");
        assert_eq!(super::civil_date(11_016), "2000-02-29");
        assert_eq!(super::civil_date(20_416), "2025-11-24");
    }
}
