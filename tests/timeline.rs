//! Figures over time from the real binary (`--timeseries`, `--timeseries-plot`,
//! `--histograms`, `--request-log`): rows that add up to the run's totals, the same numbers
//! whatever is recorded, and clear refusals.

mod common;

use common::{assert_refused, flashlab, stdout_json, Scratch};

fn csv_rows(path: &std::path::Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{l}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

fn sum(rows: &[std::collections::HashMap<String, String>], col: &str) -> u64 {
    rows.iter().map(|r| r[col].parse::<u64>().unwrap()).sum()
}

const SIM: &[&str] = &[
    "sim",
    "--preset",
    "mx500",
    "--capacity",
    "1GiB",
    "--workload",
    "uniform",
    "--read-fraction",
    "0.7",
    "--queue-depth",
    "16",
    "--precondition",
    "steady",
    "--occupancy",
    "0.9",
    "--writes",
    "0.1x",
    "--json",
];

/// `replay` of the example trace of the kv store on ext4 on `preset` at 2 GiB after
/// `precondition`, as JSON.
fn replay_example(preset: &str, precondition: &str) -> serde_json::Value {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kv-ext4.trace");
    stdout_json(&flashlab(&[
        "replay",
        trace,
        "--preset",
        preset,
        "--capacity",
        "2GiB",
        "--precondition",
        precondition,
        "--json",
    ]))
}

#[test]
fn sim_time_series_rows_add_up_to_the_runs_totals_and_change_no_number() {
    let dir = Scratch::new("timeline-sim");
    let csv = dir.0.join("ts.csv");
    let json = dir.0.join("ts.json");
    let svg = dir.0.join("ts.svg");
    let log = dir.0.join("req.csv");
    let hist = dir.0.join("lat");
    let plain = stdout_json(&flashlab(SIM));
    let mut args = SIM.to_vec();
    let (c, s, l, h) = (
        csv.to_str().unwrap(),
        svg.to_str().unwrap(),
        log.to_str().unwrap(),
        hist.to_str().unwrap(),
    );
    args.extend([
        "--timeseries",
        c,
        "--timeseries-plot",
        s,
        "--request-log",
        l,
        "--histograms",
        h,
        "--interval",
        "20ms",
    ]);
    let rec = stdout_json(&flashlab(&args));
    for k in [
        "waf",
        "flash_write_pages",
        "read_latency_ns",
        "write_latency_ns",
        "simulated_ns",
    ] {
        assert_eq!(plain[k], rec[k], "{k} changed by recording");
    }
    let rows = csv_rows(&csv);
    assert!(rows.len() > 10, "{} rows", rows.len());
    assert!(rows
        .iter()
        .all(|r| r["run"] == "mx500" && r["interval_s"] == "0.02"));
    assert_eq!(
        sum(&rows, "read_count"),
        rec["read_latency_ns"]["count"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&rows, "write_count"),
        rec["write_latency_ns"]["count"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&rows, "write_bytes"),
        rec["host_write_bytes"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&rows, "read_bytes"),
        rec["host_read_bytes"].as_u64().unwrap()
    );
    for k in [
        "flash_write_pages",
        "gc_copied_pages",
        "erases",
        "host_write_pages",
    ] {
        assert_eq!(sum(&rows, k), rec[k].as_u64().unwrap(), "{k}");
    }
    // The last interval's WAF so far is the run's.
    let last: f64 = rows.last().unwrap()["waf_so_far"].parse().unwrap();
    assert!((last - rec["waf"].as_f64().unwrap()).abs() < 1e-5);
    // One line per request; their latencies give the run's mean.
    let lines = std::fs::read_to_string(&log).unwrap();
    let reqs: Vec<&str> = lines.lines().skip(1).collect();
    assert_eq!(reqs.len() as u64, rec["host_ops"].as_u64().unwrap());
    let read_ns: u64 = reqs
        .iter()
        .filter(|l| l.contains(",read,"))
        .map(|l| l.split(',').nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    let n = rec["read_latency_ns"]["count"].as_u64().unwrap();
    assert_eq!(
        read_ns / n,
        rec["read_latency_ns"]["mean"].as_u64().unwrap()
    );
    // The histograms' total count, and the plot.
    let hr = std::fs::read_to_string(dir.0.join("lat-read.hgrm")).unwrap();
    assert!(hr.contains(&format!("Total count    = {n:>12}")), "{hr}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.starts_with("<svg") && plot.contains("write latency p99"));
    // JSON: the same rows.
    let mut args = SIM.to_vec();
    args.extend(["--timeseries", json.to_str().unwrap(), "--interval", "20ms"]);
    stdout_json(&flashlab(&args));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let jrows = v[0]["rows"].as_array().unwrap();
    assert_eq!(jrows.len(), rows.len());
    let jw: u64 = jrows
        .iter()
        .map(|r| r["write"]["count"].as_u64().unwrap())
        .sum();
    assert_eq!(jw, sum(&rows, "write_count"));
}

#[test]
fn time_series_flags_are_refused_with_the_reason() {
    let dir = Scratch::new("timeline-refused");
    let mut args = SIM.to_vec();
    args.extend(["--interval", "10ms"]);
    assert_refused(&args, "--interval sets the interval of --timeseries");
    let mut args = SIM.to_vec();
    let missing = dir.0.join("no/such/dir/ts.csv");
    args.extend(["--timeseries", missing.to_str().unwrap()]);
    assert_refused(&args, "does not exist");
    let mut args = SIM.to_vec();
    let png = dir.0.join("ts.png");
    args.extend(["--timeseries-plot", png.to_str().unwrap()]);
    assert_refused(&args, "ending in .svg");
    let mut args = SIM.to_vec();
    let ts = dir.0.join("ts.csv");
    args.extend(["--timeseries", ts.to_str().unwrap(), "--timing", "off"]);
    assert_refused(&args, "need --timing on");
    let mut args = SIM.to_vec();
    args.extend(["--timeseries", ts.to_str().unwrap(), "--interval", "0"]);
    assert_refused(&args, "--interval must be positive");
    // A run refused after the request log was opened leaves no partial log.
    let log = dir.0.join("req.csv");
    let mut args = SIM.to_vec();
    args.extend(["--request-log", log.to_str().unwrap(), "--timing", "off"]);
    assert_refused(&args, "need --timing on");
    assert!(!log.exists(), "a failed run left its request log");
    // ... but never removes what was there before: a file, or a symlink and its target.
    std::fs::write(&log, "mine\n").unwrap();
    let link = dir.0.join("link.csv");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    for path in [&log, &link] {
        let mut args = SIM.to_vec();
        args.extend(["--request-log", path.to_str().unwrap(), "--timing", "off"]);
        assert_refused(&args, "need --timing on");
        assert!(path.exists(), "{} was removed", path.display());
    }
    // A path that cannot be created, or one named twice, is refused before the run.
    let mut args = SIM.to_vec();
    args.extend(["--timeseries", "/proc/flashlab-ts.csv"]);
    assert_refused(&args, "cannot create it");
    let mut args = SIM.to_vec();
    args.extend([
        "--timeseries",
        ts.to_str().unwrap(),
        "--request-log",
        ts.to_str().unwrap(),
    ]);
    assert_refused(&args, "is named by two of");
    // sweep records no run over time.
    assert_refused(
        &[
            "sweep",
            "--out",
            dir.0.join("sw").to_str().unwrap(),
            "--preset",
            "x25e",
            "--capacity",
            "256MiB",
            "--workload",
            "uniform",
            "--writes",
            "0.1x",
            "--timeseries",
            ts.to_str().unwrap(),
        ],
        "sweep records none per point",
    );
}

#[test]
fn replay_time_series_count_every_request_of_the_trace() {
    let dir = Scratch::new("timeline-replay");
    let csv = dir.0.join("ts.csv");
    let log = dir.0.join("req.csv");
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kv-ext4.trace");
    let base = [
        "replay",
        trace,
        "--preset",
        "840pro",
        "--capacity",
        "2GiB",
        "--precondition",
        "steady",
        "--json",
    ];
    let plain = stdout_json(&flashlab(&base));
    let mut args = base.to_vec();
    args.extend([
        "--timeseries",
        csv.to_str().unwrap(),
        "--interval",
        "5ms",
        "--request-log",
        log.to_str().unwrap(),
    ]);
    let rec = stdout_json(&flashlab(&args));
    assert_eq!(plain["write_latency_ns"], rec["write_latency_ns"]);
    assert_eq!(plain["waf"], rec["waf"]);
    let rows = csv_rows(&csv);
    let ops = sum(&rows, "read_count")
        + sum(&rows, "write_count")
        + sum(&rows, "trim_count")
        + sum(&rows, "flushes");
    assert_eq!(ops, rec["requests"].as_u64().unwrap());
    assert_eq!(
        sum(&rows, "trim_count"),
        rec["trim_commands"].as_u64().unwrap()
    );
    assert!(sum(&rows, "trim_count") > 0, "the sample trace has TRIMs");
    assert_eq!(
        sum(&rows, "trimmed_pages"),
        rec["trimmed_pages"].as_u64().unwrap()
    );
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert_eq!(lines, rec["requests"].as_u64().unwrap() + 1);
}

#[test]
fn fio_time_series_count_every_job_request() {
    if std::process::Command::new("fio")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED fio_time_series_count_every_job_request: fio is not installed (apt-get install fio)");
        return;
    }
    let dir = Scratch::new("timeline-fio");
    let csv = dir.0.join("ts.csv");
    let job = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/fio/mixed-70-30-zipf.fio"
    );
    let o = flashlab(&[
        "fio",
        job,
        "--preset",
        "840pro",
        "--capacity",
        "2GiB",
        "--output-format",
        "json",
        "--timeseries",
        csv.to_str().unwrap(),
        "--interval",
        "20ms",
    ]);
    let v = stdout_json(&o);
    let rows = csv_rows(&csv);
    let drive = &v["flashlab"]["drive"];
    assert_eq!(
        sum(&rows, "read_count"),
        drive["read_latency_ns"]["count"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&rows, "write_count"),
        drive["write_latency_ns"]["count"].as_u64().unwrap()
    );
    assert_eq!(
        sum(&rows, "flash_write_pages"),
        drive["flash_write_pages"].as_u64().unwrap()
    );
    assert!(v["flashlab"]["recorded"][0]
        .as_str()
        .unwrap()
        .contains("intervals of 20 ms"));
}

#[test]
fn drives_side_by_side_give_each_drives_own_numbers_and_mark_the_better() {
    let dir = Scratch::new("compare");
    let csv = dir.0.join("ts.csv");
    let svg = dir.0.join("ts.svg");
    let base: Vec<&str> = SIM
        .iter()
        .map(|s| if *s == "mx500" { "mx500,840pro" } else { s })
        .collect();
    let mut args = base.clone();
    args.extend([
        "--timeseries",
        csv.to_str().unwrap(),
        "--timeseries-plot",
        svg.to_str().unwrap(),
    ]);
    let v = stdout_json(&flashlab(&args));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    // Each column is the drive's own run, as `sim` gives it alone.
    for (i, name) in ["mx500", "840pro"].iter().enumerate() {
        let alone: Vec<&str> = SIM
            .iter()
            .map(|&s| if s == "mx500" { *name } else { s })
            .collect();
        let one = stdout_json(&flashlab(&alone));
        assert_eq!(runs[i]["run"], *name);
        for k in [
            "waf",
            "read_latency_ns",
            "write_latency_ns",
            "flash_write_pages",
        ] {
            assert_eq!(runs[i][k], one[k], "{name} {k}");
        }
    }
    // The better value of each row is marked: higher IOPS, lower p99.
    let c = &v["compare"];
    let iops = |n: &str| c["IOPS"]["values"][n].as_f64().unwrap();
    let better = if iops("mx500") > iops("840pro") {
        "mx500"
    } else {
        "840pro"
    };
    assert_eq!(c["IOPS"]["better"], serde_json::json!([better]));
    let p99 = |n: &str| c["read p99 (ms)"]["values"][n].as_f64().unwrap();
    let lower = if p99("mx500") < p99("840pro") {
        "mx500"
    } else {
        "840pro"
    };
    assert_eq!(c["read p99 (ms)"]["better"], serde_json::json!([lower]));
    // One CSV with both runs, one plot with both names.
    let rows = csv_rows(&csv);
    assert!(rows.iter().any(|r| r["run"] == "mx500") && rows.iter().any(|r| r["run"] == "840pro"));
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(plot.contains("mx500") && plot.contains("840pro"));
    // As text: a column each, the mark explained.
    let text: Vec<&str> = base.iter().copied().filter(|a| *a != "--json").collect();
    let o = flashlab(&text);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("2 drives side by side") && out.contains("(* the better value of the row)"),
        "{out}"
    );
    // A command that runs one drive says so.
    let job = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/fio/randwrite-qd32.fio"
    );
    assert_refused(
        &["fio", job, "--preset", "mx500,840pro", "--capacity", "1GiB"],
        "this command runs one drive",
    );
}

#[test]
fn replay_compares_drives_on_one_trace() {
    let v = replay_example("840pro,980", "fill");
    let one = replay_example("980", "fill");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs[1]["run"], "980");
    assert_eq!(runs[1]["write_latency_ns"], one["write_latency_ns"]);
    assert_eq!(runs[1]["served_iops"], one["served_iops"]);
    assert!(
        v["compare"]["served / offered (%)"]["values"]["840pro"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn the_joins_time_series_add_up_to_its_repetitions() {
    let dir = Scratch::new("timeline-join");
    let csv = dir.0.join("j.csv");
    let v = stdout_json(&flashlab(&[
        "join",
        "--sf",
        "0.1",
        "--memory",
        "2MiB",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--host",
        "direct-io",
        "--discard",
        "online",
        "--repeat",
        "2",
        "--timeseries",
        csv.to_str().unwrap(),
        "--interval",
        "50ms",
        "--json",
    ]));
    let reps = v["repetitions"].as_array().unwrap();
    let total = |k: &str| reps.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
    let rows = csv_rows(&csv);
    assert!(rows.iter().all(|r| r["run"] == "join"));
    assert_eq!(sum(&rows, "trim_count"), total("trim_commands"));
    assert!(total("trim_commands") > 0);
    assert_eq!(sum(&rows, "host_write_pages"), total("host_write_pages"));
    assert_eq!(sum(&rows, "flash_write_pages"), total("flash_write_pages"));
    // Without the flag the same numbers.
    let plain = stdout_json(&flashlab(&[
        "join",
        "--sf",
        "0.1",
        "--memory",
        "2MiB",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--host",
        "direct-io",
        "--discard",
        "online",
        "--repeat",
        "2",
        "--json",
    ]));
    assert_eq!(plain["repetitions"], v["repetitions"]);
    assert_refused(
        &[
            "join",
            "--sf",
            "0.05",
            "--memory",
            "2MiB",
            "--timeseries",
            csv.to_str().unwrap(),
        ],
        "applies to the simulated host (--backend sim)",
    );
}

#[test]
fn btree_and_kv_record_their_simulated_drive() {
    let dir = Scratch::new("timeline-engines");
    let csv = dir.0.join("k.csv");
    let v = stdout_json(&flashlab(&[
        "kv",
        "--docs",
        "5000",
        "--ops",
        "5000",
        "--batch",
        "16",
        "--backend",
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "2GiB",
        "--timeseries",
        csv.to_str().unwrap(),
        "--json",
    ]));
    assert!(v["recorded"][0]
        .as_str()
        .unwrap()
        .contains("intervals of 100 ms"));
    let rows = csv_rows(&csv);
    // Every byte the store wrote reached the drive, with simfs's own metadata and journal.
    assert!(sum(&rows, "write_bytes") >= v["bytes_written"].as_u64().unwrap());
    assert!(rows.iter().all(|r| r["run"] == "kv"));
    let csv = dir.0.join("b.csv");
    let o = flashlab(&[
        "btree",
        "--store",
        "inplace",
        "--fanout",
        "64",
        "--preload",
        "5000",
        "--ops",
        "1000",
        "--backend",
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--timeseries",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(sum(&csv_rows(&csv), "write_count") > 0);
    assert_refused(
        &[
            "kv",
            "--docs",
            "100",
            "--ops",
            "100",
            "--timeseries",
            csv.to_str().unwrap(),
        ],
        "they need --backend sim",
    );
    // The request log: a line per request the drive served, as the rows count them.
    let log = dir.0.join("req.csv");
    let csv = dir.0.join("k2.csv");
    let o = flashlab(&[
        "kv",
        "--docs",
        "2000",
        "--ops",
        "2000",
        "--backend",
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--timeseries",
        csv.to_str().unwrap(),
        "--request-log",
        log.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv_rows(&csv);
    let ops = sum(&rows, "read_count")
        + sum(&rows, "write_count")
        + sum(&rows, "trim_count")
        + sum(&rows, "flushes");
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert_eq!(lines, ops + 1);
}

#[test]
fn replay_compares_preconditionings_of_one_drive() {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kv-ext4.trace");
    let v = replay_example("980", "none,fill");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs[0]["run"], "980/none");
    assert_eq!(runs[1]["run"], "980/fill");
    // Fresh, every read is of never-written space; filled, none is.
    let share = &v["compare"]["unwritten reads (%)"]["values"];
    assert_eq!(share["980/none"], 100.0);
    assert_eq!(share["980/fill"], 0.0);
    let alone = replay_example("980", "fill");
    assert_eq!(runs[1]["read_latency_ns"], alone["read_latency_ns"]);
    assert_refused(
        &[
            "replay",
            trace,
            "--preset",
            "980",
            "--capacity",
            "2GiB",
            "--precondition",
            "none,fill",
            "--wear",
        ],
        "one --precondition",
    );
}

#[test]
fn sim_compares_drive_kinds_of_one_preset() {
    let base = [
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "2GiB",
        "--workload",
        "uniform",
        "--writes",
        "0.5x",
        "--timing",
        "off",
    ];
    let mut args = base.to_vec();
    args.extend(["--drive", "conventional,zoned", "--json"]);
    // A zoned drive takes only sequential writes: the error names the run.
    let o = flashlab(&args);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("drive 840pro/zoned"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut args = base.to_vec();
    args.extend(["--drive", "conventional,fdp", "--handles", "4", "--json"]);
    let v = stdout_json(&flashlab(&args));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs[0]["run"], "840pro/conventional");
    assert_eq!(runs[1]["run"], "840pro/fdp");
    let mut alone = base.to_vec();
    alone.extend(["--drive", "fdp", "--handles", "4", "--json"]);
    let one = stdout_json(&flashlab(&alone));
    assert_eq!(runs[1]["flash_write_pages"], one["flash_write_pages"]);
    assert_eq!(runs[1]["fdp"], one["fdp"]);
}
