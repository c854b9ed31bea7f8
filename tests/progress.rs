//! Progress off a terminal: a command that runs for a while prints lines on stderr naming
//! its phase, done/total, the elapsed time and an ETA (the periods shortened by
//! FLASHLAB_PROGRESS_SECS), and nothing on stdout.

use std::process::Command;

fn run(args: &[&str], secs: &str) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .env("FLASHLAB_PROGRESS_SECS", secs)
        .output()
        .expect("the flashlab binary runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const SIM: &[&str] = &[
    "sim",
    "--preset",
    "mx500",
    "--capacity",
    "4GiB",
    "--workload",
    "uniform",
    "--read-fraction",
    "0.7",
    "--queue-depth",
    "32",
    "--precondition",
    "steady",
    "--occupancy",
    "0.9",
    "--writes",
    "0.3x",
    "--json",
];

#[test]
fn a_long_run_off_a_terminal_prints_progress_lines_on_stderr() {
    let (out, err) = run(SIM, "0.05,0.1");
    serde_json::from_str::<serde_json::Value>(&out).expect("stdout stays one JSON object");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("flashlab sim"))
        .collect();
    assert!(lines.len() >= 2, "{err}");
    let measuring = lines
        .iter()
        .find(|l| l.contains(": measuring: "))
        .unwrap_or_else(|| panic!("no measuring line: {err}"));
    assert!(
        measuring.contains("% ") || measuring.contains("%)"),
        "{measuring}"
    );
    assert!(measuring.contains(" elapsed"), "{measuring}");
    assert!(lines.iter().any(|l| l.contains(", ETA ")), "{err}");
}

#[test]
fn a_short_run_off_a_terminal_prints_no_progress() {
    // The default periods: nothing before 5 s.
    let (_, err) = run(
        &[
            "sim",
            "--preset",
            "x25e",
            "--capacity",
            "512MiB",
            "--workload",
            "uniform",
            "--writes",
            "0.2x",
        ],
        "5,10",
    );
    assert!(!err.contains("flashlab sim"), "{err}");
}
