//! `--drive fdp|zoned` through the real binary: `sim --separate`, `replay
//! --stream-handles`, the zoned drive's errors, and clear refusals.

mod common;

use common::{flashlab, stdout_json, Scratch};

fn sim(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "sim",
        "--preset",
        "nvme",
        "--capacity",
        "4GiB",
        "--writes",
        "1x",
        "--timing",
        "off",
        "--json",
    ];
    args.extend_from_slice(extra);
    flashlab(&args)
}

#[test]
fn sim_separates_hot_writes_by_handle_and_reports_the_fdp_log() {
    let hot = ["--workload", "hotcold:0.9/0.1"];
    let plain = stdout_json(&sim(&hot));
    let one = stdout_json(&sim(
        &[&hot[..], &["--drive", "fdp", "--handles", "1"]].concat()
    ));
    // One handle is the conventional drive, number for number.
    for k in ["waf", "flash_write_pages", "gc_copied_pages", "erases"] {
        assert_eq!(plain[k], one[k], "{k}");
    }
    assert!(plain.get("fdp").is_none());
    let sep = stdout_json(&sim(&[&hot[..], &["--drive", "fdp", "--separate"]].concat()));
    let (w1, w2) = (plain["waf"].as_f64().unwrap(), sep["waf"].as_f64().unwrap());
    assert!(w2 < w1 * 0.95, "separated {w2} vs one frontier {w1}");
    let f = &sep["fdp"];
    assert_eq!(f["handles"], 2);
    assert_eq!(f["isolation"], "persistent");
    let hosts: u64 = f["per_handle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host_bytes_written"].as_u64().unwrap())
        .sum();
    assert_eq!(
        hosts,
        f["host_bytes_with_metadata_written"].as_u64().unwrap()
    );
    let help = String::from_utf8(flashlab(&["sim", "--help"]).stdout).unwrap();
    for flag in [
        "--drive",
        "--handles",
        "--separate",
        "--isolation",
        "--max-open-zones",
    ] {
        assert!(help.contains(flag), "sim --help lacks {flag}");
    }
}

#[test]
fn bad_placement_input_is_refused_by_name() {
    let cases: &[(&[&str], &str)] = &[
        (&["--workload", "uniform", "--handles", "2"], "--drive fdp"),
        (
            &["--workload", "uniform", "--separate", "--drive", "fdp"],
            "hotcold",
        ),
        (
            &["--workload", "hotcold:0.9/0.1", "--separate"],
            "--drive fdp",
        ),
        (
            &["--workload", "uniform", "--drive", "zoned"],
            "--workload sequential",
        ),
        (
            &["--workload", "uniform", "--max-open-zones", "2"],
            "--drive zoned",
        ),
        (
            &[
                "--workload",
                "uniform",
                "--drive",
                "fdp",
                "--handles",
                "900",
            ],
            "spare space",
        ),
    ];
    for (args, want) in cases {
        let o = sim(args);
        assert!(!o.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn zoned_sim_writes_zones_in_turn_with_waf_one() {
    let v = stdout_json(&flashlab(&[
        "sim",
        "--preset",
        "nvme",
        "--capacity",
        "1GiB",
        "--drive",
        "zoned",
        "--workload",
        "sequential",
        "--request-size",
        "64KiB",
        "--writes",
        "2x",
        "--queue-depth",
        "4",
        "--json",
    ]));
    assert_eq!(v["waf"], 1.0);
    assert_eq!(v["gc_copied_pages"], 0);
    let z = &v["zoned"];
    assert!(z["resets"].as_u64().unwrap() >= z["zones"].as_u64().unwrap());
    // --wear: every zone written twice and reset twice; erases are the resets'.
    let v = stdout_json(&flashlab(&[
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--drive",
        "zoned",
        "--workload",
        "sequential",
        "--request-size",
        "64KiB",
        "--writes",
        "2x",
        "--wear",
        "--json",
    ]));
    let w = &v["wear"];
    assert_eq!(w["erase_count_max"], 2, "{w}");
    assert_eq!(w["rated_pe_cycles"], 1500);
    assert!(w["life_used"].as_f64().unwrap() > 0.0, "{w}");
}

#[test]
fn replay_maps_streams_onto_handles_and_a_zoned_drive_names_the_status() {
    let dir = Scratch::new("placement");
    let path = dir.0.join("t.trace");
    let mut text = String::from("flashlab-trace v1 closed\n");
    for i in 0..3000u64 {
        // Stream 0 rewrites a small hot range, stream 1 writes everywhere.
        text.push_str(&format!("0 W {} 4096 0\n", (i * 7919 % 256) * 4096));
        text.push_str(&format!("1 W {} 4096 0\n", (i * 104_729 % 100_000) * 4096));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let base = [
        "replay",
        p,
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--json",
    ];
    let v = stdout_json(&flashlab(
        &[
            &base[..],
            &["--drive", "fdp", "--handles", "2", "--stream-handles"],
        ]
        .concat(),
    ));
    let per = v["fdp"]["per_handle"].as_array().unwrap();
    assert_eq!(per[0]["host_bytes_written"], 3000 * 4096);
    assert_eq!(per[1]["host_bytes_written"], 3000 * 4096);
    let o = flashlab(&[&base[..], &["--stream-handles"]].concat());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--drive fdp"));
    let o = flashlab(&[&base[..], &["--drive", "zoned"]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("Zone Invalid Write") && err.contains("0xBC"),
        "{err}"
    );
}

#[test]
fn replay_placement_is_stream_handles_and_native_traces_keep_their_handles() {
    let dir = Scratch::new("placement-native");
    let path = dir.0.join("t.trace");
    let mut text = String::from("flashlab-trace v1 closed\n");
    for i in 0..1000u64 {
        text.push_str(&format!("0 W {} 4096 0 h=1\n", (i % 64) * 4096));
        text.push_str(&format!("0 W {} 4096 0\n", (1000 + i) * 4096));
    }
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    let base = [
        "replay",
        p,
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--json",
    ];
    let v = stdout_json(&flashlab(
        &[&base[..], &["--drive", "fdp", "--handles", "2"]].concat(),
    ));
    let per = v["fdp"]["per_handle"].as_array().unwrap();
    assert_eq!(per[0]["host_bytes_written"], 1000 * 4096);
    assert_eq!(per[1]["host_bytes_written"], 1000 * 4096, "the trace's h=1");
    // A conventional drive refuses the trace's handle, naming it.
    let o = flashlab(&base);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("handle") && err.contains("FDP"), "{err}");
    // --placement is --stream-handles.
    let a = stdout_json(&flashlab(
        &[
            &base[..],
            &["--drive", "fdp", "--handles", "2", "--placement"],
        ]
        .concat(),
    ));
    let b = stdout_json(&flashlab(
        &[
            &base[..],
            &["--drive", "fdp", "--handles", "2", "--stream-handles"],
        ]
        .concat(),
    ));
    assert_eq!(a["fdp"], b["fdp"]);
    assert_eq!(a["waf"], b["waf"]);
}

#[test]
fn engines_run_on_fdp_and_zoned_drives_with_the_same_answers() {
    let kv = |drive: &str| {
        stdout_json(&flashlab(&[
            "kv",
            "--backend",
            "sim",
            "--preset",
            "x25e",
            "--capacity",
            "1GiB",
            "--drive",
            drive,
            "--docs",
            "2000",
            "--ops",
            "5000",
            "--batch",
            "64",
            "--dbs",
            "1",
            "--json",
        ]))
    };
    let (c, f, z) = (kv("conventional"), kv("fdp"), kv("zoned"));
    // The store does the same work whatever the drive; only the time differs.
    for k in [
        "bytes_written",
        "commits",
        "segments_cleaned",
        "nodes_moved",
        "file_bytes",
    ] {
        assert_eq!(c[k], f[k], "{k}");
        assert_eq!(c[k], z[k], "{k}");
    }
    let o = flashlab(&[
        "kv",
        "--backend",
        "sim",
        "--preset",
        "x25e",
        "--handles",
        "3",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--drive fdp"));
    let o = flashlab(&["kv", "--backend", "mem", "--drive", "zoned"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("simulated drive"));
}
