//! Drives the real `flashlab` binary: determinism, JSON fields, replay of every trace
//! format, clear errors on bad input, and the report.

mod common;

use common::{flashlab, stdout_json, Scratch};
use std::path::PathBuf;
use std::process::Command;

const SIM: &[&str] = &[
    "sim",
    "--preset",
    "x25e",
    "--capacity",
    "512MiB",
    "--workload",
    "hotcold:0.8/0.2",
    "--writes",
    "1x",
    "--warmup",
    "1x",
    "--queue-depth",
    "8",
    "--read-fraction",
    "0.3",
    "--seed",
    "42",
    "--json",
];

#[test]
fn sim_json_is_deterministic_and_complete() {
    let mut a = stdout_json(&flashlab(SIM));
    let mut b = stdout_json(&flashlab(SIM));
    for key in [
        "waf",
        "host_write_pages",
        "flash_write_pages",
        "gc_copied_pages",
        "erases",
        "trim_commands",
        "simulated_ns",
        "iops",
        "read_latency_ns",
        "write_latency_ns",
        "host_ops",
        "wall_s",
        "seed",
    ] {
        assert!(a.get(key).is_some(), "missing {key} in {a}");
    }
    for lat in ["read_latency_ns", "write_latency_ns"] {
        for k in ["mean", "p50", "p99", "p999"] {
            assert!(a[lat][k].as_u64().unwrap() > 0, "{lat}.{k} is zero");
        }
    }
    assert_eq!(a["seed"], 42);
    assert!(a["waf"].as_f64().unwrap() > 1.0);
    a.as_object_mut().unwrap().remove("wall_s");
    b.as_object_mut().unwrap().remove("wall_s");
    assert_eq!(a, b, "same seed and arguments must give the same numbers");

    let mut other = SIM.to_vec();
    let n = other.len();
    other[n - 2] = "43";
    let mut c = stdout_json(&flashlab(&other));
    c.as_object_mut().unwrap().remove("wall_s");
    assert_ne!(
        a["flash_write_pages"], c["flash_write_pages"],
        "a different seed should change the run"
    );
}

#[test]
fn the_dram_less_preset_caches_its_map_and_the_flag_sets_or_removes_a_cache() {
    let help = flashlab(&["sim", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--mapping-cache"));
    let presets = String::from_utf8_lossy(&flashlab(&["presets"]).stdout).into_owned();
    assert!(presets.contains("980") && presets.contains("mapping cache 64 MiB in hmb"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--preset",
            "980",
            "--capacity",
            "1GiB",
            "--workload",
            "uniform",
            "--read-fraction",
            "0.5",
            "--writes",
            "0.2x",
            "--queue-depth",
            "4",
            "--json",
        ];
        args.extend_from_slice(extra);
        let mut v = stdout_json(&flashlab(&args));
        v.as_object_mut().unwrap().remove("wall_s");
        v
    };
    let hmb = run(&[]);
    assert_eq!(hmb, run(&[]), "same arguments, same numbers");
    let m = &hmb["mapping_cache"];
    assert_eq!(m["location"], "hmb");
    assert_eq!(m["granularity"], "page");
    // The preset's 64 MiB for 1 TB keeps its share of the map at 1 GiB (6.9%: 72,057 bytes,
    // 17 whole translation pages of 1,024 entries), and uniform lookups over the whole drive
    // hit in that proportion (LRU over pages: C/F).
    let bytes = (64u64 << 20) * (1 << 30) / 1_000_000_000_000;
    let entries = bytes / 4096 * 1024;
    assert_eq!(m["cache_entries"], entries);
    // By entry, the same bytes hold every whole entry.
    let by_entry = run(&["--mapping-cache-granularity", "entry"]);
    assert_eq!(by_entry["mapping_cache"]["granularity"], "entry");
    assert_eq!(by_entry["mapping_cache"]["cache_entries"], bytes / 4);
    let refused = flashlab(&[
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--workload",
        "uniform",
        "--mapping-cache-granularity",
        "page",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a mapping cache"));
    let hit = m["hit_ratio"].as_f64().unwrap();
    let share = entries as f64 / ((1u64 << 30) / 4096) as f64;
    assert!((hit - share).abs() < 0.01, "hit ratio {hit}, C/F {share}");
    assert!(m["translation_writes"].as_u64().unwrap() > 0);
    let dram = run(&["--mapping-cache", "0"]);
    assert!(dram.get("mapping_cache").is_none());
    // (The mean: under the priority scheduler the median read on a busy die sits on a
    // program's suspension latency either way.)
    assert!(
        dram["read_latency_ns"]["mean"].as_f64() < hmb["read_latency_ns"]["mean"].as_f64(),
        "misses read a translation page first"
    );
    assert!(dram["waf"].as_f64() < hmb["waf"].as_f64());
}

#[test]
fn the_wear_report_projects_tbw_beside_the_datasheets_under_jesd219() {
    let help = String::from_utf8_lossy(&flashlab(&["sim", "--help"]).stdout).into_owned();
    assert!(
        help.contains("jesd219") && help.contains("--wear-leveling") && help.contains("--wear")
    );
    let scratch = Scratch::new("wear");
    let plot = scratch.0.join("wear.svg");
    let args = [
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--workload",
        "jesd219",
        "--timing",
        "off",
        "--wear",
        "--wear-plot",
        plot.to_str().unwrap(),
    ];
    let out = flashlab(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("projected TBW") && text.contains("(datasheet: 100.0 TB, 5 years)"),
        "{text}"
    );
    assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
    let mut json_args = args[..10].to_vec();
    json_args.push("--json");
    let v = stdout_json(&flashlab(&json_args));
    let w = &v["wear"];
    assert_eq!(w["rated_tbw_bytes"], 100_000_000_000_000u64);
    let (pe, raw, waf) = (
        w["rated_pe_cycles"].as_f64().unwrap(),
        w["rated_raw_bytes"].as_f64().unwrap(),
        w["waf_bytes"].as_f64().unwrap(),
    );
    let tbw = w["projected_tbw_bytes"].as_f64().unwrap();
    assert!((tbw - pe * raw / waf).abs() / tbw < 1e-6, "{w}");
    let blocks: u64 = w["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["blocks"].as_u64().unwrap())
        .sum();
    assert_eq!(blocks, w["blocks"].as_u64().unwrap());
    // Wear leveling is off unless asked for; the flag turns it on and it reports its work.
    assert!(v.get("wear_leveling").is_none());
    let mut wl_args = json_args.clone();
    wl_args.extend(["--wear-leveling", "both:2"]);
    let wl = stdout_json(&flashlab(&wl_args));
    assert!(wl["wear_leveling"]["moves"].as_u64().unwrap() > 0);
    let bad = flashlab(&[
        "sim",
        "--preset",
        "mx500",
        "--workload",
        "jesd219",
        "--wear-leveling",
        "static:0",
    ]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("threshold"));
    let bad = flashlab(&[
        "sim",
        "--preset",
        "ssd2011",
        "--capacity",
        "1GiB",
        "--workload",
        "uniform",
        "--wear-leveling",
        "dynamic",
    ]);
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("FAST"),
        "{bad:?}"
    );
}

#[test]
fn sim_on_a_scaled_drive_names_the_latency_its_capacity_is_not_known_to_keep() {
    let run_with = |capacity: Option<&str>, preset: &str, queue_depth: &str, extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--preset",
            preset,
            "--workload",
            "hotcold:0.7/0.3",
            "--read-fraction",
            "0.7",
            "--queue-depth",
            queue_depth,
            "--writes",
            "1MiB",
            "--warmup",
            "1MiB",
            "--json",
        ];
        if let Some(c) = capacity {
            args.extend(["--capacity", c]);
        }
        args.extend(extra);
        let notes = stdout_json(&flashlab(&args))["scaling_notes"].clone();
        notes
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let run = |capacity: Option<&str>, preset: &str, queue_depth: &str| {
        run_with(capacity, preset, queue_depth, &[])
    };
    // The MX500 at 16 GiB missed its QD32 hot/cold write p99.9 (bench/results): named,
    // with where it is kept; at 4 GiB, below every capacity measured, that is said too.
    // These runs are not preconditioned as the scaling runs were, so each note says the
    // runs were unlike this one.
    let at16 = run(Some("16GiB"), "mx500", "32");
    assert!(
        at16.iter().any(|n| n.contains("write p99.9 ")
            && n.contains("58 GiB")
            && n.contains("unlike this one")),
        "{at16:?}"
    );
    // Run as the scaling runs were: the miss is this run's own; at a queue depth whose
    // figures 16 GiB kept, nothing.
    let steady = ["--precondition", "steady", "--occupancy", "0.9", "--rest"];
    let own = run_with(Some("16GiB"), "mx500", "32", &steady);
    assert!(
        own.iter().any(|n| n.contains("write p99.9 ")) && own.iter().all(|n| !n.contains("unlike")),
        "{own:?}"
    );
    assert!(run_with(Some("16GiB"), "mx500", "1", &steady).is_empty());
    // An FDP drive was never measured: nothing, even as the one drive of the run.
    let fdp = [&steady[..], &["--drive", "fdp"]].concat();
    assert!(run_with(Some("16GiB"), "mx500", "32", &fdp).is_empty());
    let at4 = run(Some("4GiB"), "mx500", "32");
    assert!(at4.iter().any(|n| n.contains("from 16 GiB up")), "{at4:?}");
    // At a queue depth whose figures 16 GiB kept, the misses measured at another are
    // named with the configuration they were measured under.
    let qd1 = run(Some("16GiB"), "mx500", "1");
    assert!(
        !qd1.is_empty() && qd1.iter().all(|n| n.contains("--queue-depth 32")),
        "{qd1:?}"
    );
    // At a capacity whose runs kept every figure, and on a preset never measured: no note.
    assert!(run(Some("64GiB"), "mx500", "32").is_empty());
    assert!(run(Some("1GiB"), "x25e", "1").is_empty());
}

#[test]
fn replays_a_native_trace_with_trims() {
    let dir = Scratch::new("replay");
    let path = dir.0.join("t.trace");
    let mut text = String::from("flashlab-trace v1 closed\n");
    for i in 0..2000u64 {
        text.push_str(&format!("0 W {} 4096 0\n", (i * 7919 % 4096) * 4096));
    }
    text.push_str("1 T 0 8388608 0\n1 F 0 0 0\n");
    for i in 0..100u64 {
        text.push_str(&format!("2 R {} 4096 1000\n", i * 4096));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let v = stdout_json(&flashlab(&[
        "replay",
        p,
        "--preset",
        "840pro",
        "--capacity",
        "4GiB",
        "--json",
    ]));
    assert_eq!(v["requests"], 2102);
    assert_eq!(v["trim_commands"], 1);
    assert!(v["trimmed_pages"].as_u64().unwrap() > 0);
    assert_eq!(v["host_write_pages"], 2000);
    assert_eq!(v["mode"], "closed");
    // The 100 reads all land in the 8 MiB just trimmed: answered without flash.
    assert_eq!(v["unwritten_read_bytes"], 100 * 4096);
}

#[test]
fn an_open_loop_replay_the_drive_cannot_keep_up_with_says_so_and_how_to_rerun() {
    // 20,000 random 4 KiB writes 5 us apart offer 200,000 IOPS; the 840 Pro's flash takes
    // about 124,000. At half the pace it keeps up.
    let dir = Scratch::new("replay-saturated");
    let path = dir.0.join("w.trace");
    let mut text = String::from("flashlab-trace v1 open\n");
    for i in 0..20_000u64 {
        text.push_str(&format!(
            "0 W {} 4096 {}\n",
            (i * 7919 % 262_144) * 4096,
            i * 5000
        ));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let base = ["replay", p, "--preset", "840pro", "--capacity", "1GiB"];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        flashlab(&args)
    };
    let o = run(&[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("the trace offers 200010 IOPS"), "{out}");
    assert!(out.contains("warning           saturated"), "{out}");
    assert!(
        out.contains("--mode closed`") && out.contains("--speed 0."),
        "{out}"
    );
    let v = stdout_json(&run(&["--json"]));
    assert_eq!(v["saturated"], true);
    assert!(v["served_iops"].as_f64().unwrap() < 0.95 * v["offered_iops"].as_f64().unwrap());
    // The backlog, read at each tenth of the replay, grows through it.
    let tenths: Vec<u64> = v["backlog_by_tenth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(tenths.len(), 10);
    assert!(tenths[9] > 2 * tenths[4] && tenths[9] > 1000, "{tenths:?}");
    assert_eq!(v["backlog_grows"], true);
    // Just above the drive's rate (128,000 offered): served within 5% of it, so only the
    // backlog, growing through the run, says the drive is not keeping up.
    let v = stdout_json(&run(&["--speed", "0.64", "--json"]));
    assert!(v["served_iops"].as_f64().unwrap() >= 0.95 * v["offered_iops"].as_f64().unwrap());
    assert_eq!(v["backlog_grows"], true, "{v}");
    assert_eq!(v["saturated"], true, "{v}");
    let o = run(&["--speed", "0.64"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("saturated: the requests outstanding grew"),
        "{out}"
    );
    let v = stdout_json(&run(&["--speed", "0.5", "--json"]));
    assert_eq!(v["saturated"], false, "{v}");
    assert_eq!(v["backlog_grows"], false, "{v}");
    assert!(
        v["backlog_by_tenth"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x.as_u64().unwrap() < 100),
        "{v}"
    );
    assert!(
        (v["offered_iops"].as_f64().unwrap() - 100_005.0).abs() < 10.0,
        "{v}"
    );
    // --speed means nothing in closed loop, and must be above 0.
    let o = run(&["--mode", "closed", "--speed", "2"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("closed loop"));
    let o = run(&["--speed", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a speed"));
}

#[test]
fn replay_says_how_much_it_read_of_unwritten_space_and_warns() {
    // 1,000 reads of 4 KiB: on a fresh drive none of it was ever written (the drive
    // answers with zeros, fast); after --precondition fill all of it was.
    let dir = Scratch::new("replay-unwritten");
    let path = dir.0.join("r.trace");
    let mut text = String::from("flashlab-trace v1 closed\n");
    for i in 0..1000u64 {
        text.push_str(&format!("0 R {} 4096 0\n", i * 4096));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["replay", p, "--preset", "840pro", "--capacity", "1GiB"];
        args.extend_from_slice(extra);
        let o = flashlab(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let fresh = run(&[]);
    assert!(
        fresh.contains("unwritten reads   4.1 MB (100.0% of the bytes read)"),
        "{fresh}"
    );
    assert!(
        fresh.contains("warning") && fresh.contains("--precondition fill"),
        "{fresh}"
    );
    let filled = run(&["--precondition", "fill"]);
    assert!(!filled.contains("unwritten reads"), "{filled}");
    assert!(!filled.contains("warning"), "{filled}");
    // Served from flash instead: counted, not warned about, and each costs the flash read
    // the filled drive's reads cost.
    let flash = run(&["--unwritten-reads", "flash"]);
    assert!(flash.contains("each served as a flash read"), "{flash}");
    assert!(!flash.contains("warning"), "{flash}");
    let p50 = |out: &str| {
        out.lines()
            .find(|l| l.contains("read  latency"))
            .and_then(|l| l.split("p50 ").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .map(String::from)
    };
    assert!(p50(&flash).is_some());
    assert_eq!(p50(&flash), p50(&filled), "{flash}\n{filled}");
    assert_ne!(p50(&flash), p50(&fresh));
}

#[test]
fn replays_blkparse_tracefs_and_msr() {
    let dir = Scratch::new("formats");
    let files = [
        ("a.blk", "  8,0 1 1 0.000000000 12 D WS 2048 + 8 [dd]\n  8,0 1 2 0.000100000 0 C WS 2048 + 8 [0]\n  8,0 1 3 0.000200000 12 D DS 0 + 64 [dd]\n"),
        ("b.txt", " dd-12 [000] ..... 1.000000: block_rq_issue: 7,0 W 4096 () 8 + 8 none,0,0 [dd]\n dd-12 [000] ..... 1.000100: block_rq_issue: 7,0 R 4096 () 8 + 8 none,0,0 [dd]\n"),
        ("c.csv", "128166372003061629,wdev,0,Write,4096,4096,1331\n128166372003161629,wdev,0,Read,4096,4096,500\n"),
    ];
    for (name, text) in files {
        let path = dir.0.join(name);
        std::fs::write(&path, text).unwrap();
        let v = stdout_json(&flashlab(&[
            "replay",
            path.to_str().unwrap(),
            "--preset",
            "nvme",
            "--capacity",
            "16GiB",
            "--json",
        ]));
        assert_eq!(v["mode"], "open", "{name}");
        assert!(v["requests"].as_u64().unwrap() >= 2, "{name}");
    }
}

#[test]
fn an_msr_trace_of_several_disks_replays_one_disk_at_a_time() {
    let dir = Scratch::new("msr-disks");
    let path = dir.0.join("mix.csv");
    std::fs::write(
        &path,
        "1,wdev,0,Write,0,4096,1\n2,wdev,1,Write,0,4096,1\n3,wdev,1,Write,4096,4096,1\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let args = ["replay", p, "--preset", "nvme", "--capacity", "16GiB"];
    let o = flashlab(&args);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("2 disks (wdev:0, wdev:1)") && err.contains("--disk"),
        "{err}"
    );
    let one = |disk: &str| {
        let mut a = args.to_vec();
        a.extend(["--disk", disk, "--json"]);
        stdout_json(&flashlab(&a))["requests"].as_u64().unwrap()
    };
    assert_eq!(one("0"), 1);
    assert_eq!(one("wdev:1"), 2);
}

#[test]
fn replays_every_archive_format_plain_gzip_or_zstd_one_device_at_a_time() {
    use std::io::Write;
    let dir = Scratch::new("archives");
    // (format, --disk, two devices' rows: each format's columns as its documentation has them)
    let samples = [
        ("alibaba", "3", "device_id,opcode,offset,length,timestamp\n3,W,0,4096,1577808000000626\n3,R,0,4096,1577808000001626\n8,W,0,4096,1577808000002000\n"),
        ("tencent", "1063", "Timestamp,Offset,Size,IOType,VolumeID\n1538323200,0,8,1,1063\n1538323201,0,8,0,1063\n1538323201,8,8,1,77\n"),
        ("spc", "0", "0,0,4096,W,0.551706\n0,0,4096,r,0.554041,opt\n1,8,4096,W,0.556202\n"),
        ("fiu", "8:0", "89968195792462 20782 gzip 0 8 W 8 0 56f1\n89968196792462 20782 gzip 0 8 R 8 0 56f1\n89968197792462 1 cp 0 8 W 8 16 56f1\n"),
        ("disksim", "0", "13.191135 0 0 8 0\n17.829285 0 0 8 1\n18.0 1 0 8 0\n"),
        ("fio", "/dev/sdb", "fio version 3 iolog\n0 /dev/sdb add\n878 /dev/sdb write 0 4096\n888 /dev/sdb read 0 4096\n890 /dev/sdc write 0 4096\n"),
    ];
    for (format, disk, text) in samples {
        let plain = dir.0.join(format!("{format}.txt"));
        std::fs::write(&plain, text).unwrap();
        let gz = dir.0.join(format!("{format}.txt.gz"));
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let zst = dir.0.join(format!("{format}.txt.zst"));
        std::fs::write(&zst, zstd::stream::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
        let run = |path: &std::path::Path, extra: &[&str]| {
            let mut a = vec![
                "replay",
                path.to_str().unwrap(),
                "--preset",
                "nvme",
                "--capacity",
                "16GiB",
            ];
            a.extend_from_slice(extra);
            flashlab(&a)
        };
        // Auto-detected, from each file: the same replay.
        let mut seen = Vec::new();
        for path in [&plain, &gz, &zst] {
            let mut v = stdout_json(&run(path, &["--disk", disk, "--json"]));
            assert_eq!(v["requests"], 2, "{format} {}", path.display());
            assert_eq!(v["mode"], "open", "{format}");
            v.as_object_mut()
                .unwrap()
                .retain(|k, _| k != "wall_s" && k != "trace" && k != "peak_rss_bytes");
            seen.push(v);
        }
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "{format}: {seen:?}");
        // Named explicitly, too; and without --disk, an error naming both devices.
        let v = stdout_json(&run(&zst, &["--format", format, "--disk", disk, "--json"]));
        assert_eq!(v["requests"], 2, "{format}");
        let o = run(&zst, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("2 ") && err.contains("--disk"),
            "{format}: {err}"
        );
    }
    // MQSim's and SSDSim's rows fit DiskSim's three readings: auto refuses, naming them.
    let mq = dir.0.join("mqsim.trace");
    std::fs::write(&mq, "4851300 1 524288 16 0\n4864300 1 524304 16 1\n").unwrap();
    let o = flashlab(&["replay", mq.to_str().unwrap(), "--preset", "nvme"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("(disksim, disksim-mqsim, disksim-ssdsim)"),
        "{err}"
    );
    for f in ["disksim-mqsim", "disksim-ssdsim"] {
        let v = stdout_json(&flashlab(&[
            "replay",
            mq.to_str().unwrap(),
            "--format",
            f,
            "--preset",
            "nvme",
            "--capacity",
            "16GiB",
            "--json",
        ]));
        assert_eq!(
            (v["requests"].as_u64(), v["host_write_pages"].as_u64()),
            (Some(2), Some(2)),
            "{f}"
        );
    }
    // fio's version 2 has no times: closed loop.
    let v2 = dir.0.join("v2.log");
    std::fs::write(&v2, "fio version 2 iolog\n/dev/sdb add\n/dev/sdb write 0 4096\n/dev/sdb wait 1000 0\n/dev/sdb sync 0 0\n").unwrap();
    let v = stdout_json(&flashlab(&[
        "replay",
        v2.to_str().unwrap(),
        "--preset",
        "nvme",
        "--json",
    ]));
    assert_eq!(
        (v["requests"].as_u64(), v["mode"].as_str()),
        (Some(2), Some("closed"))
    );
    // --disk with a format of one device, and an unknown format, say what works.
    let native = dir.0.join("n.trace");
    std::fs::write(&native, "flashlab-trace v1 closed\n0 W 0 4096 0\n").unwrap();
    let o = flashlab(&[
        "replay",
        native.to_str().unwrap(),
        "--disk",
        "0",
        "--preset",
        "nvme",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains("--disk picks a device of a trace that holds several (msr, alibaba"),
        "{err}"
    );
    let o = flashlab(&[
        "replay",
        v2.to_str().unwrap(),
        "--format",
        "zip",
        "--preset",
        "nvme",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("disksim-ssdsim, fio"),
        "{err}"
    );
}

#[test]
fn preconditioning_ages_the_drive_before_a_trace_and_is_not_measured() {
    let dir = Scratch::new("precondition");
    let path = dir.0.join("w.trace");
    let mut text = String::from("flashlab-trace v1 closed\n");
    for i in 0..4000u64 {
        text.push_str(&format!("0 W {} 4096 0\n", (i * 7919 % 16384) * 4096));
    }
    std::fs::write(&path, text).unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            path.to_str().unwrap(),
            "--preset",
            "x25e",
            "--capacity",
            "256MiB",
            "--json",
        ];
        a.extend_from_slice(extra);
        stdout_json(&flashlab(&a))
    };
    let fresh = run(&[]);
    assert_eq!(
        fresh["waf"].as_f64().unwrap(),
        1.0,
        "a fresh drive never collects garbage"
    );
    assert_eq!(fresh["precondition"]["mode"], "none");
    let aged = run(&["--precondition", "steady:3x", "--seed", "7"]);
    assert!(aged["waf"].as_f64().unwrap() > 1.5, "{aged}");
    assert_eq!(
        aged["host_write_pages"], fresh["host_write_pages"],
        "preconditioning is not counted"
    );
    assert!(aged["precondition"]["rounds"].as_u64().unwrap() >= 5);
    assert_eq!(aged, {
        let mut again = run(&["--precondition", "steady:3x", "--seed", "7"]);
        // Wall time and the process's memory are measurements of this machine.
        again["wall_s"] = aged["wall_s"].clone();
        again["peak_rss_bytes"] = aged["peak_rss_bytes"].clone();
        again
    });
    let half = run(&["--precondition", "fill", "--occupancy", "0.5"]);
    assert_eq!(
        half["precondition"]["filled_bytes"].as_u64().unwrap(),
        128 << 20
    );
    for (args, needle) in [
        (
            vec!["--precondition", "warm"],
            "expected none, fill, steady",
        ),
        (
            vec!["--precondition", "fill", "--occupancy", "0"],
            "--occupancy",
        ),
    ] {
        let mut a = vec![
            "replay",
            path.to_str().unwrap(),
            "--preset",
            "x25e",
            "--capacity",
            "256MiB",
        ];
        a.extend(args);
        let o = flashlab(&a);
        assert!(!o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(needle),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = flashlab(&[
        "replay",
        path.to_str().unwrap(),
        "--preset",
        "hdd7200",
        "--precondition",
        "fill",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("hard disk"));
}

#[test]
fn replay_repeats_a_trace_back_to_back_and_stops_after_max_requests() {
    let dir = Scratch::new("repeat");
    let path = dir.0.join("w.trace");
    let mut text = String::from("flashlab-trace v1 open\n");
    for i in 0..100u64 {
        text.push_str(&format!("0 W {} 4096 {}\n", i * 4096, i * 1_000_000));
    }
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "replay",
            p,
            "--preset",
            "x25e",
            "--capacity",
            "256MiB",
            "--json",
        ];
        a.extend_from_slice(extra);
        stdout_json(&flashlab(&a))
    };
    let once = run(&[]);
    let thrice = run(&["--repeat", "3"]);
    assert_eq!(thrice["requests"], 300);
    assert_eq!(thrice["host_write_pages"], 300);
    let t1 = once["simulated_ns"].as_u64().unwrap();
    let t3 = thrice["simulated_ns"].as_u64().unwrap();
    assert!(
        t3 >= 3 * 99_000_000,
        "each pass starts when the previous ends: {t1} vs {t3}"
    );
    assert_eq!(run(&["--max-requests", "10"])["requests"], 10);
    let o = flashlab(&[
        "replay",
        p,
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
        "--repeat",
        "0",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--repeat must be at least 1"));
}

#[test]
fn a_grid_run_in_shards_and_merged_is_the_grid_run_whole() {
    let dir = Scratch::new("sweep-shards");
    let grid = [
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
        "--op",
        "0.07,0.15,0.28",
        "--gc",
        "greedy,fifo",
        "--workload",
        "uniform",
        "--writes",
        "0.5x",
        "--timing",
        "off",
    ];
    let sweep = |out: &str, shard: Option<&str>| {
        let out = dir.0.join(out);
        let mut a = vec!["sweep", "--out", out.to_str().unwrap()];
        if let Some(s) = shard {
            a.extend(["--shard", s]);
        }
        a.push("--");
        a.extend(grid);
        let o = flashlab(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let whole = sweep("whole", None);
    let shards: Vec<PathBuf> = (0..4)
        .map(|k| sweep(&format!("s{k}"), Some(&format!("{k}/4"))))
        .collect();
    let rows = |d: &PathBuf| {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap())
                .unwrap();
        v["points"].as_array().unwrap().len()
    };
    // Six points over four shards: 2, 2, 1, 1.
    assert_eq!(shards.iter().map(rows).collect::<Vec<_>>(), [2, 2, 1, 1]);
    let merged = dir.0.join("merged");
    let mut a = vec!["sweep", "merge"];
    let names: Vec<String> = shards.iter().map(|p| p.display().to_string()).collect();
    a.extend(names.iter().map(String::as_str));
    a.extend(["--out", merged.to_str().unwrap()]);
    let o = flashlab(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["results.csv", "results.json", "waf.svg"] {
        assert_eq!(
            std::fs::read_to_string(whole.join(f)).unwrap(),
            std::fs::read_to_string(merged.join(f)).unwrap(),
            "{f}: merged shards and the whole grid differ"
        );
    }
    // A shard left out, or given twice, is refused by name; so is a bad shard.
    let o = flashlab(&[
        "sweep",
        "merge",
        &names[0],
        &names[1],
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("2 of the grid's 6 points are in none of the shards"),
        "{err}"
    );
    let o = flashlab(&[
        "sweep",
        "merge",
        &names[0],
        &names[0],
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("the shards overlap"));
    let o = flashlab(&["sweep", "merge", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("flashlab sweep merge"));
    // The fixed flags in another order are the same grid.
    let again = dir.0.join("s0-again");
    let mut reordered = vec![
        "sweep",
        "--shard",
        "0/4",
        "--out",
        again.to_str().unwrap(),
        "--",
    ];
    let mut flags = grid.to_vec();
    flags.rotate_left(2); // --capacity first, --preset after the axes
    reordered.extend(flags);
    let o = flashlab(&reordered);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged2 = dir.0.join("merged2");
    let o = flashlab(&[
        "sweep",
        "merge",
        again.to_str().unwrap(),
        &names[1],
        &names[2],
        &names[3],
        "--out",
        merged2.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = flashlab(&[
        "sweep",
        "--shard",
        "4/4",
        "--out",
        merged.to_str().unwrap(),
        "--",
        "--preset",
        "x25e",
        "--workload",
        "uniform",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("K must be from 0 to N-1"));
}

#[test]
fn sweep_runs_a_grid_of_sim_points_the_same_on_any_number_of_cores() {
    let dir = Scratch::new("sweep");
    let grid = [
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
        "--op",
        "0.15,0.28",
        "--gc",
        "greedy,fifo",
        "--workload",
        "uniform",
        "--writes",
        "1x",
        "--timing",
        "off",
    ];
    let run = |jobs: &str, out: &str| {
        let out = dir.0.join(out);
        let mut a = vec![
            "sweep",
            "--out",
            out.to_str().unwrap(),
            "--jobs",
            jobs,
            "--",
        ];
        a.extend(grid);
        let o = flashlab(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let (one, two) = (run("1", "a"), run("2", "b"));
    let csv = std::fs::read_to_string(one.join("results.csv")).unwrap();
    assert_eq!(
        csv,
        std::fs::read_to_string(two.join("results.csv")).unwrap()
    );
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "a header and four points");
    assert!(
        lines[0].starts_with("op,gc,") && lines[0].contains(",waf,"),
        "{}",
        lines[0]
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(one.join("results.json")).unwrap()).unwrap();
    let wafs: Vec<f64> = json["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["result"]["waf"].as_f64().unwrap())
        .collect();
    assert!(
        wafs[0] > wafs[2],
        "more over-provisioning, less amplification: {wafs:?}"
    );
    assert!(std::fs::read_to_string(one.join("waf.svg"))
        .unwrap()
        .contains("gc greedy"));
    let o = flashlab(&[
        "sweep",
        "--out",
        dir.0.join("c").to_str().unwrap(),
        "--",
        "--preset",
        "x25e",
        "--op",
        "0.1,zero,-0.1,nine",
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    // Every invalid point is named, a negative value read as a value.
    assert!(err.contains("3 of 4 points are invalid"), "{err}");
    assert!(
        err.contains("point --op zero") && err.contains("point --op nine"),
        "{err}"
    );
    assert!(err.contains("point --op -0.1: invalid geometry"), "{err}");
    assert!(!dir.0.join("c").join("results.csv").exists(), "nothing ran");
}

#[test]
fn age_slows_reads_reports_retries_and_bad_ages_name_the_wrong_part() {
    let help = String::from_utf8_lossy(&flashlab(&["sim", "--help"]).stdout).into_owned();
    assert!(help.contains("--age"), "{help}");
    let sim = |age: &[&str]| {
        let mut args = vec![
            "sim",
            "--preset",
            "mx500",
            "--capacity",
            "512MiB",
            "--workload",
            "uniform",
            "--read-fraction",
            "1",
            "--writes",
            "0.05x",
            "--warmup",
            "0x",
            "--seed",
            "5",
            "--json",
        ];
        args.extend_from_slice(age);
        let mut v = stdout_json(&flashlab(&args));
        v.as_object_mut().unwrap().remove("wall_s");
        v
    };
    let off = sim(&[]);
    assert!(off.get("aging").is_none());
    let old = sim(&["--age", "pe=3000,retention=1y"]);
    assert_eq!(
        old,
        sim(&["--age", "pe=3000,retention=1y"]),
        "same seed, same numbers"
    );
    let a = &old["aging"];
    for key in [
        "cell",
        "start_pe_cycles",
        "start_retention_s",
        "reads",
        "retries",
        "retries_per_read",
        "uncorrectable_reads",
        "reclaimed_blocks",
        "retry_histogram",
    ] {
        assert!(a.get(key).is_some(), "missing aging.{key} in {a}");
    }
    assert_eq!(a["cell"], "tlc");
    assert_eq!(a["start_retention_s"], 31_536_000);
    assert!(a["retries_per_read"].as_f64().unwrap() > 1.0, "{a}");
    assert!(
        old["read_latency_ns"]["p50"].as_u64() > off["read_latency_ns"]["p50"].as_u64(),
        "{old} vs {off}"
    );

    // replay takes --age too.
    let o = flashlab(&[
        "replay",
        "examples/kv-ext4.trace",
        "--preset",
        "840pro",
        "--capacity",
        "2GiB",
        "--age",
        "pe=5000,retention=30d,cell=mlc",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = stdout_json(&o);
    assert_eq!(r["aging"]["cell"], "mlc", "{r}");

    for (age, needle) in [
        ("pe=many", "pe=\"many\""),
        ("pe=1500,retention=1", "needs a unit"),
        ("retention=2w", "unknown unit \"w\""),
        ("temperature=40", "unknown key \"temperature\""),
        ("cell=qlc", "qlc has no error model"),
    ] {
        let o = flashlab(&[
            "sim",
            "--preset",
            "mx500",
            "--workload",
            "uniform",
            "--writes",
            "1x",
            "--age",
            age,
        ]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "--age {age}: {err}");
    }
    let o = flashlab(&[
        "sim",
        "--preset",
        "840pro",
        "--workload",
        "uniform",
        "--writes",
        "1x",
        "--age",
        "pe=10",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cell=mlc"), "{err}");

    // A preset file's [ssd.aging] table turns the model on without --age; --age then sets
    // the age of that model (its parameters kept).
    let dir = Scratch::new("aging-preset");
    let toml = std::fs::read_to_string("presets/840pro.toml").unwrap()
        + "\n[ssd.aging]\ncell = \"mlc\"\nstart_pe_cycles = 30000\nstart_retention_s = 31536000\nmax_retries = 4\n";
    let path = dir.0.join("aged840.toml");
    std::fs::write(&path, toml).unwrap();
    let p = path.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--preset",
            p,
            "--capacity",
            "512MiB",
            "--workload",
            "uniform",
            "--read-fraction",
            "1",
            "--writes",
            "0.05x",
            "--warmup",
            "0x",
            "--json",
        ];
        args.extend_from_slice(extra);
        stdout_json(&flashlab(&args))
    };
    let v = run(&[]);
    assert_eq!(v["aging"]["cell"], "mlc");
    assert_eq!(v["aging"]["start_pe_cycles"], 30000);
    assert_eq!(v["aging"]["retry_histogram"].as_array().unwrap().len(), 5);
    assert!(
        v["aging"]["retries_per_read"].as_f64().unwrap() > 1.0,
        "{v}"
    );
    let v = run(&["--age", "pe=0"]);
    assert_eq!(v["aging"]["start_pe_cycles"], 0);
    assert_eq!(v["aging"]["start_retention_s"], 31_536_000);
    assert_eq!(v["aging"]["retries"], 0);
    let bad = std::fs::read_to_string("presets/840pro.toml").unwrap()
        + "\n[ssd.aging]\ncell = \"mlc\"\nretry_steps = 3\n";
    std::fs::write(&path, bad).unwrap();
    let o = flashlab(&[
        "sim",
        "--preset",
        p,
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("retry_steps"), "{err}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = Scratch::new("errors");
    let path = dir.0.join("bad.trace");
    std::fs::write(
        &path,
        "flashlab-trace v1 closed\n0 W 0 4096 0\n0 W zero 4096 0\n",
    )
    .unwrap();
    let o = flashlab(&["replay", path.to_str().unwrap(), "--preset", "x25e"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.trace:3") && err.contains("offset_bytes"),
        "{err}"
    );

    let o = flashlab(&[
        "sim",
        "--preset",
        "floppy",
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such preset"));
    let o = flashlab(&[
        "sim",
        "--preset",
        "x25e",
        "--workload",
        "zipf",
        "--writes",
        "1x",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown workload"));
    let o = flashlab(&[
        "sim",
        "--preset",
        "x25e",
        "--capacity",
        "1MiB",
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("spare space"));
    let missing = dir.0.join("missing.trace");
    let o = flashlab(&["replay", missing.to_str().unwrap(), "--preset", "x25e"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));

    let big = dir.0.join("big.trace");
    std::fs::write(&big, "flashlab-trace v1 closed\n0 W 1099511627776 4096 0\n").unwrap();
    let o = flashlab(&["replay", big.to_str().unwrap(), "--preset", "x25e"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--capacity"));
}

/// Inputs a hostile test found to panic, abort or mislead: each is now a clear error
/// naming what was wrong.
#[test]
fn hostile_inputs_are_clear_errors() {
    let dir = Scratch::new("hostile");
    let stderr = |o: &std::process::Output| {
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(!o.status.success(), "expected a failure: {e} {out}");
        assert!(!e.contains("panicked"), "a panic: {e}");
        e
    };
    // A short `sim` of uniform writes on `preset` with `extra` flags.
    let sim = |preset: &str, extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--preset",
            preset,
            "--workload",
            "uniform",
            "--writes",
            "0.01x",
        ];
        args.extend_from_slice(extra);
        flashlab(&args)
    };
    // A capacity that is not whole mapping units (panicked in the fill).
    let o = sim("mx500", &["--capacity", "1073741825", "--timing", "off"]);
    let e = stderr(&o);
    assert!(
        e.contains("not a multiple of the 4096-byte mapping unit"),
        "{e}"
    );
    // The same in a preset file.
    let text = std::fs::read_to_string("presets/mx500.toml")
        .unwrap()
        .replace(
            "logical_bytes = 250059350016",
            "logical_bytes = 250059350017",
        );
    let bad_preset = dir.0.join("odd.toml");
    std::fs::write(&bad_preset, text).unwrap();
    let o = sim(bad_preset.to_str().unwrap(), &["--timing", "off"]);
    let e = stderr(&o);
    assert!(e.contains("odd.toml") && e.contains("mapping unit"), "{e}");
    // An HDD whose media rate leaves less than a sector per track (divided by zero).
    let text = std::fs::read_to_string("presets/hdd7200.toml")
        .unwrap()
        .replace("media_bytes_per_s = 100000000", "media_bytes_per_s = 1");
    let slow = dir.0.join("slow.toml");
    std::fs::write(&slow, text).unwrap();
    let o = sim(slow.to_str().unwrap(), &[]);
    let e = stderr(&o);
    assert!(e.contains("media_bytes_per_s"), "{e}");
    // A file system of no blocks (panicked in mkfs).
    for size in ["0", "1", "4095"] {
        let o = flashlab(&[
            "simfs",
            "--preset",
            "x25e",
            "--capacity",
            "1GiB",
            "--fs-size",
            size,
        ]);
        let e = stderr(&o);
        assert!(e.contains("larger size"), "{size}: {e}");
    }
    // A run that would take days is refused up front.
    let o = flashlab(&[
        "sim",
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
        "--workload",
        "uniform",
        "--writes",
        "1x",
        "--read-fraction",
        "0.9999999999",
        "--timing",
        "off",
    ]);
    assert!(stderr(&o).contains("limited"));
    // An OS error is said once, not once per layer.
    let missing = dir.0.join("missing.trace");
    let o = flashlab(&["replay", missing.to_str().unwrap(), "--preset", "x25e"]);
    let e = stderr(&o);
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
}

#[test]
fn reproduce_writes_report_and_results() {
    let dir = Scratch::new("report");
    let out = dir.0.join("r");
    let o = flashlab(&[
        "reproduce",
        "--only",
        "waf,trim",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(
        html.contains("Write amplification versus over-provisioning")
            && html.contains("<img src=\"waf/waf_uniform.svg\"")
    );
    assert!(std::fs::read_to_string(out.join("waf/waf_uniform.svg"))
        .unwrap()
        .starts_with("<svg"));
    assert!(std::fs::read_to_string(out.join("waf/waf.csv"))
        .unwrap()
        .starts_with("workload,op,greedy"));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let verdicts = results["experiments"]["waf"]["verdicts"]
        .as_array()
        .unwrap();
    assert!(!verdicts.is_empty());
    assert!(verdicts
        .iter()
        .all(|v| v["holds"].is_boolean() && v["measured"].is_string()));
    assert!(
        results["experiments"]["waf"]["results"]["points"]
            .as_array()
            .unwrap()
            .len()
            >= 14
    );
    let trim = &results["experiments"]["trim"];
    assert!(trim["verdicts"].as_array().unwrap().len() >= 6);
    assert_eq!(trim["results"]["delete"][0]["commands"], 160);
    assert!(html.contains("Calibrated or predicted") && html.contains("trim/delete.svg"));

    let o = flashlab(&[
        "reproduce",
        "--only",
        "nosuch",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown experiment"));
}

#[test]
fn sim_fifo_waf_matches_the_analytic_model() {
    // The full 32 GB X25-E shape: 20 dies, blocks of 128 mapping units, 10% over-provisioning.
    let v = stdout_json(&flashlab(&[
        "sim",
        "--preset",
        "x25e",
        "--op",
        "0.1",
        "--gc",
        "fifo",
        "--gc-free-blocks",
        "1",
        "--workload",
        "uniform",
        "--writes",
        "1x",
        "--warmup",
        "2x",
        "--timing",
        "off",
        "--json",
    ]));
    let waf = v["waf"].as_f64().unwrap();
    let model = lab::analytic::fifo_waf(0.1);
    assert!(
        (waf - model).abs() / model < 0.03,
        "sim {waf:.3} vs analytic {model:.3}"
    );
    assert_eq!(v["host_write_pages"], v["host_ops"]);
}

#[test]
fn simfs_command_deletes_with_each_discard_mode_and_writes_a_replayable_trace() {
    let dir = Scratch::new("simfs");
    let mut pages = Vec::new();
    for mode in ["none", "online", "vtrim", "ftrim", "deferred"] {
        let v = stdout_json(&flashlab(&[
            "simfs",
            "--preset",
            "openssd",
            "--fs-size",
            "2GiB",
            "--file-size",
            "1MiB",
            "--extents",
            "16",
            "--discard",
            mode,
            "--reads",
            "5",
            "--json",
        ]));
        pages.push((
            mode,
            v["trimmed_pages"].as_u64().unwrap(),
            v["trim_commands"].as_u64().unwrap(),
        ));
    }
    assert_eq!(pages[0], ("none", 0, 0));
    for &(mode, p, _) in &pages[1..] {
        assert_eq!(
            p, 257,
            "{mode}: 256 data blocks and one extent leaf become invalid"
        );
    }
    assert_eq!(
        pages[1].2, 16,
        "online: one TRIM per extent (the leaf merges with the last)"
    );
    assert_eq!((pages[2].2, pages[3].2), (1, 1));

    let trace = dir.0.join("del.trace");
    let o = flashlab(&[
        "simfs",
        "--preset",
        "openssd",
        "--fs-size",
        "2GiB",
        "--discard",
        "online",
        "--trace-out",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = trace.to_str().unwrap();
    let plain = stdout_json(&flashlab(&["replay", t, "--preset", "cosmos", "--json"]));
    let vec = stdout_json(&flashlab(&[
        "replay",
        t,
        "--preset",
        "cosmos",
        "--trim-as",
        "vtrim",
        "--json",
    ]));
    assert_eq!(plain["trim_commands"], 160);
    assert_eq!(vec["trim_commands"], 1);
    assert_eq!(plain["trim_ranges"], vec["trim_ranges"]);

    // An fTrim trace carries the metadata bytes the drive parses, so it replays with the
    // same result as the run that wrote it (it failed: "block 0 holds data").
    let ftrace = dir.0.join("ftrim.trace");
    let run = stdout_json(&flashlab(&[
        "simfs",
        "--preset",
        "openssd",
        "--fs-size",
        "2GiB",
        "--discard",
        "ftrim",
        "--trace-out",
        ftrace.to_str().unwrap(),
        "--json",
    ]));
    let replayed = stdout_json(&flashlab(&[
        "replay",
        ftrace.to_str().unwrap(),
        "--preset",
        "openssd",
        "--json",
    ]));
    assert_eq!(replayed["trim_commands"], 1);
    assert_eq!(replayed["ftrim_metadata_reads"], run["metadata_reads"]);
    assert_eq!(replayed["trimmed_pages"], run["trimmed_pages"]);
}

/// Rows, sum of l_extendedprice and of o_totalprice over the join, computed directly from
/// the generator with a map from order key to total price.
fn independent_join(sf: f64) -> (u64, i64, i64) {
    use workloads::tpch::{rows, Table};
    let price: std::collections::HashMap<u64, i64> = rows(Table::Orders, sf)
        .map(|o| (o.key, o.price_cents))
        .collect();
    let mut out = (0u64, 0i64, 0i64);
    for l in rows(Table::Lineitem, sf) {
        if let Some(p) = price.get(&l.key) {
            out.0 += 1;
            out.1 += l.price_cents;
            out.2 += p;
        }
    }
    out
}

#[test]
fn join_matches_an_independent_computation_at_sf_0_1_and_1() {
    let dir = Scratch::new("join");
    let d = dir.0.to_str().unwrap();
    for (sf, memory, layout) in [("0.1", "4MiB", "fixed128"), ("1", "16MiB", "columns")] {
        let want = independent_join(sf.parse().unwrap());
        for algorithm in ["grace", "hybrid"] {
            let v = stdout_json(&flashlab(&[
                "join",
                "--sf",
                sf,
                "--memory",
                memory,
                "--layout",
                layout,
                "--algorithm",
                algorithm,
                "--dir",
                d,
                "--json",
            ]));
            let got = (
                v["rows"].as_u64().unwrap(),
                v["sum_l_extendedprice_cents"].as_i64().unwrap(),
                v["sum_o_totalprice_cents"].as_i64().unwrap(),
            );
            assert_eq!(got, want, "SF {sf} {algorithm}");
            assert!(
                v["bytes_spilled"].as_u64().unwrap() > 0,
                "SF {sf} {algorithm}: the budget forces spilling"
            );
            if algorithm == "grace" {
                assert_eq!(
                    v["spill_ratio"].as_f64().unwrap(),
                    1.0,
                    "grace optimum: each input spilled once"
                );
            }
        }
    }
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("flashlab-spill-")
        })
        .collect();
    assert!(left.is_empty(), "no spill files are left behind");
}

#[test]
fn join_on_a_simulated_drive_reports_trims_and_waf_per_repetition() {
    let v = stdout_json(&flashlab(&[
        "join",
        "--sf",
        "0.05",
        "--memory",
        "1MiB",
        "--read-buffer",
        "64KiB",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "4GiB",
        "--discard",
        "online",
        "--fallocate",
        "on",
        "--host",
        "none",
        "--repeat",
        "2",
        "--json",
    ]));
    let reps = v["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 2);
    for r in reps {
        assert!(r["trim_commands"].as_u64().unwrap() > 0);
        assert!(r["total_ns"].as_u64().unwrap() > 0);
        assert!(r["waf"].as_f64().unwrap() >= 1.0);
    }
    assert_eq!(v["rows"].as_u64().unwrap(), independent_join(0.05).0);
}

#[test]
fn join_threads_give_the_same_answer_and_on_a_drive_the_same_numbers_every_run() {
    let dir = Scratch::new("join-threads");
    let d = dir.0.to_str().unwrap();
    let want = independent_join(0.1);
    let answer = |v: &serde_json::Value| {
        (
            v["rows"].as_u64().unwrap(),
            v["sum_l_extendedprice_cents"].as_i64().unwrap(),
            v["sum_o_totalprice_cents"].as_i64().unwrap(),
        )
    };
    let os = |threads: &str| {
        stdout_json(&flashlab(&[
            "join",
            "--sf",
            "0.1",
            "--memory",
            "4MiB",
            "--dir",
            d,
            "--threads",
            threads,
            "--json",
        ]))
    };
    let (one, two) = (os("1"), os("2"));
    assert_eq!((answer(&one), answer(&two)), (want, want));
    assert_eq!(
        (one["threads"].as_u64(), two["threads"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(
        one["bytes_spilled"], two["bytes_spilled"],
        "each row spilled once"
    );
    let sim = |threads: &str| {
        let mut v = stdout_json(&flashlab(&[
            "join",
            "--sf",
            "0.1",
            "--memory",
            "4MiB",
            "--backend",
            "sim",
            "--preset",
            "mx500",
            "--capacity",
            "4GiB",
            "--threads",
            threads,
            "--json",
        ]));
        // Wall time, and the pool's peak: threads' reservations overlap as the machine
        // schedules them (the budget bounds it either way).
        v.as_object_mut().unwrap().remove("wall_s");
        let peak = v
            .as_object_mut()
            .unwrap()
            .remove("peak_memory_bytes")
            .unwrap();
        assert!(peak.as_u64().unwrap() <= 4 << 20);
        v
    };
    let (a, b) = (sim("2"), sim("2"));
    assert_eq!(a, b, "a simulated parallel join is deterministic");
    assert_eq!((answer(&a), a["threads"].as_u64()), (want, Some(2)));
    let serial = sim("1");
    let total = |v: &serde_json::Value| v["repetitions"][0]["total_ns"].as_u64().unwrap();
    assert!(
        total(&a) < total(&serial),
        "two threads share the CPU work per row"
    );
}

/// Runs flashlab with `args`; a run that does not end within `limit_s` is killed and
/// fails the test as a hang (not a speed check: the runs take about a second).
fn flashlab_or_hang(args: &[&str], limit_s: u64) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(limit_s);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!(
                "flashlab {} hung (killed after {limit_s} s)",
                args.join(" ")
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn pipes_devices_and_endless_lines_are_refused_clearly() {
    let dir = Scratch::new("nonregular");
    let replay = |trace: &str| {
        let args = [
            "replay",
            trace,
            "--format",
            "msr",
            "--preset",
            "840pro",
            "--capacity",
            "1GiB",
        ];
        flashlab_or_hang(&args, 60)
    };
    let refused = |o: &std::process::Output, what: &str, says: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{what}: accepted");
        assert!(err.contains(says), "{what}: {err}");
        assert!(
            err.len() < 1000,
            "{what}: the error is {} bytes long",
            err.len()
        );
    };
    // A pipe on stdin (it was read twice: 0 requests replayed, exit 0).
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args([
            "replay",
            "/dev/stdin",
            "--preset",
            "840pro",
            "--capacity",
            "1GiB",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(b"128166372003061629,hm,0,Write,0,4096,100\n");
    }
    refused(
        &child.wait_with_output().unwrap(),
        "a pipe",
        "not a regular file",
    );
    // A FIFO (it waited forever for a writer) and an endless device (it grew without bound).
    let fifo = dir.0.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    refused(
        &replay(fifo.to_str().unwrap()),
        "a FIFO",
        "not a regular file",
    );
    refused(&replay("/dev/zero"), "/dev/zero", "not a regular file");
    // One endless line: an error quoting its first bytes, not the line.
    let long = dir.0.join("long.csv");
    std::fs::write(&long, vec![b'x'; 3 << 20]).unwrap();
    refused(
        &replay(long.to_str().unwrap()),
        "a long line",
        "longer than 65536 bytes",
    );
    let o = flashlab_or_hang(
        &[
            "replay",
            long.to_str().unwrap(),
            "--format",
            "blkparse",
            "--preset",
            "840pro",
        ],
        60,
    );
    refused(&o, "a long blkparse line", "longer than 65536 bytes");
    // A preset that is a device.
    let preset = dir.0.join("zero.toml");
    std::os::unix::fs::symlink("/dev/zero", &preset).unwrap();
    let o = flashlab_or_hang(
        &[
            "sim",
            "--preset",
            preset.to_str().unwrap(),
            "--workload",
            "uniform",
            "--writes",
            "1x",
        ],
        60,
    );
    refused(&o, "a device preset", "not a regular file");
    // A time past what u64 nanoseconds hold is said to be that, not "not decimal".
    let bp = dir.0.join("late.blkparse");
    std::fs::write(
        &bp,
        "  8,0    1        1 99999999999.000000000  1234  D  WS 0 + 8 [dd]\n  8,0    1        2 99999999999.000100000  1234  C  WS 0 + 8 [0]\n",
    )
    .unwrap();
    let o = flashlab(&[
        "replay",
        bp.to_str().unwrap(),
        "--format",
        "blkparse",
        "--preset",
        "840pro",
    ]);
    refused(&o, "a late time", "past the latest time");
}

#[test]
fn interrupted_or_killed_benchmarks_and_table_writers_leave_nothing_behind() {
    // A killed benchmark's trace (its process long gone: no pid is this high) goes at the
    // next run; an interrupted one removes its own.
    let tmp = std::env::temp_dir();
    let stale = tmp.join("flashlab-bench-4194305-killed");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("bench.trace"), b"flashlab-trace v1 open\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args([
            "bench",
            "--only",
            "replay",
            "--replay-million-requests",
            "200",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mine = format!("flashlab-bench-{}-", child.id());
    let find = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&mine))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let dir = loop {
        if let Some(d) = find().filter(|d| d.join("bench.trace").exists()) {
            break d;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the benchmark never started its trace"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!stale.exists(), "a killed run's directory is removed");
    // SAFETY: kill on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(!dir.exists(), "the interrupted run left {}", dir.display());

    // A table writer killed mid-table leaves a temporary file; the next run removes it.
    let d = Scratch::new("stale-table");
    let leftover = d.0.join(".tpch-sf0.01-columns-orders.tbl.AbC123.tmp");
    std::fs::write(&leftover, vec![0u8; 4096]).unwrap();
    let o = flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "8MiB",
        "--dir",
        d.0.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !leftover.exists(),
        "a killed table writer's temporary file is removed"
    );
}

#[test]
fn second_hostile_pass_errors_say_what_happened() {
    let fails = |args: &[&str], says: &str| {
        let o = flashlab_or_hang(args, 300);
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!o.status.success(), "{args:?} succeeded: {e}");
        assert!(!e.contains("panicked"), "{args:?}: a panic: {e}");
        assert!(e.contains(says), "{args:?}: expected {says:?} in: {e}");
    };
    let dir = Scratch::new("second-pass");
    let d = dir.0.to_str().unwrap();
    // Threads: a clear maximum; a plan of one thread makes one store, however many asked.
    fails(
        &[
            "join",
            "--sf",
            "0.01",
            "--memory",
            "8MiB",
            "--dir",
            d,
            "--threads",
            "10000",
        ],
        "at most 256 threads",
    );
    let v = stdout_json(&flashlab_or_hang(
        &[
            "join",
            "--sf",
            "0.01",
            "--memory",
            "64MiB",
            "--dir",
            d,
            "--threads",
            "256",
            "--json",
        ],
        300,
    ));
    assert_eq!(v["threads"].as_u64(), Some(1), "{v}");
    // A thread's share of the spill cap is said to be a share of the run's cap.
    fails(
        &[
            "join",
            "--sf",
            "0.1",
            "--memory",
            "4MiB",
            "--dir",
            d,
            "--threads",
            "2",
            "--spill-cap",
            "5MiB",
        ],
        "the run's cap of 5242880 bytes split among 2 threads",
    );
    // Flags that would be ignored or changed silently.
    let trace = dir.0.join("t.csv");
    std::fs::write(&trace, "128166372003061629,hm,0,Write,0,4096,100\n").unwrap();
    let t = trace.to_str().unwrap();
    fails(
        &[
            "replay",
            t,
            "--preset",
            "840pro",
            "--capacity",
            "1GiB",
            "--occupancy",
            "0.5",
        ],
        "--occupancy 0.5 has no effect without --precondition",
    );
    fails(
        &[
            "replay",
            t,
            "--preset",
            "840pro",
            "--capacity",
            "1GiB",
            "--queue-depth",
            "0",
        ],
        "--queue-depth",
    );
    let sim = [
        "sim",
        "--preset",
        "840pro",
        "--workload",
        "uniform",
        "--writes",
        "0.01x",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        sim.iter().chain(extra).copied().collect()
    };
    fails(
        &with(&["--capacity", "1GiB", "--queue-depth", "0"]),
        "--queue-depth",
    );
    fails(
        &with(&["--capacity", "1GiB", "--request-size", "2GiB"]),
        "--request-size 2147483648 is larger than the drive's 1073741824 logical bytes",
    );
    fails(
        &["simfs", "--preset", "openssd", "--file-size", "0"],
        "has no blocks to spread",
    );
    // Crash tests: no empty runs, no seed ranges that wrap.
    fails(
        &["btree", "crash-test", "--iterations", "0"],
        "--iterations 0",
    );
    fails(
        &[
            "kv",
            "crash-test",
            "--iterations",
            "3",
            "--seed",
            "18446744073709551615",
        ],
        "start lower",
    );
    fails(
        &["bench", "--only", "waf", "--million-writes", "0"],
        "--million-writes",
    );
    // A sweep whose every point fails lists the points' errors.
    let out = dir.0.join("sweep");
    fails(
        &[
            "sweep",
            "--out",
            out.to_str().unwrap(),
            "--",
            "--preset",
            "mx500",
            "--capacity",
            "1GiB",
            "--workload",
            "uniform",
            "--writes",
            "0.01x",
            "--timing",
            "off",
            "--read-fraction",
            "1.5,2",
        ],
        "--read-fraction 2 must lie in [0, 1]",
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.starts_with("read-fraction,error\n"), "{csv}");
}

#[test]
fn an_interrupted_sweep_keeps_every_finished_point() {
    let dir = Scratch::new("sweep-int");
    let out = dir.0.join("sw");
    let ops: Vec<String> = (0..40)
        .map(|i| format!("{:.2}", 0.07 + 0.01 * i as f64))
        .collect();
    let ops = ops.join(",");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args([
            "sweep",
            "--jobs",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--",
            "--preset",
            "840pro",
            "--capacity",
            "1GiB",
            "--workload",
            "uniform",
            "--writes",
            "2x",
            "--op",
            &ops,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let csv = out.join("results.csv");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while std::fs::read_to_string(&csv).map_or(0, |c| c.lines().count()) < 2 {
        assert!(std::time::Instant::now() < deadline, "no point finished");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert!((1..40).contains(&rows), "{rows} of 40 points kept");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["points"].as_array().unwrap().len(), rows);
    assert_eq!(json["points_total"], 40);
}

#[test]
fn a_preconditioned_drive_measures_its_steady_state_from_the_first_gc_cycle() {
    // After steady preconditioning, a window of N random writes gives the drive's steady
    // WAF for any N of a GC cycle or more, and no stall of GC falling due on every die at
    // once; a window shorter than a cycle says so. Unpaced GC (all of a host block's
    // cleaning at once, every die in step) misses both: it is the null model here.
    let dir = Scratch::new("steady-window");
    let unpaced = dir.0.join("unpaced.toml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/presets/840pro.toml"))
        .unwrap()
        .replace("free_blocks = 2\n", "free_blocks = 2\npaced = false\n");
    assert!(text.contains("paced = false"));
    std::fs::write(&unpaced, text).unwrap();
    let run = |preset: &str, writes: &str| {
        stdout_json(&flashlab(&[
            "sim",
            "--preset",
            preset,
            "--capacity",
            "4GiB",
            "--precondition",
            "steady",
            "--workload",
            "uniform",
            "--writes",
            writes,
            "--json",
        ]))
    };
    let cycle = run("840pro", "0.001x")["gc_cycle_pages"].as_f64().unwrap();
    assert!(cycle > 0.0);
    let mut worst_unpaced: f64 = 0.0;
    for cycles in [1.5, 2.0, 3.0, 5.0] {
        let writes = format!("{}x", cycles * cycle / (1u64 << 20) as f64);
        for (preset, paced) in [("840pro", true), (unpaced.to_str().unwrap(), false)] {
            let v = run(preset, &writes);
            let steady = v["precondition"]["round_waf"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .as_f64()
                .unwrap();
            let off = v["waf"].as_f64().unwrap() / steady - 1.0;
            let p99_ms = v["write_latency_ns"]["p99"].as_f64().unwrap() / 1e6;
            assert_eq!(v["window_shorter_than_gc_cycle"], false, "{cycles} cycles");
            if paced {
                assert!(
                    off.abs() < 0.05,
                    "{cycles} cycles: WAF {off:+.3} from steady {steady}"
                );
                assert!(p99_ms < 100.0, "{cycles} cycles: write p99 {p99_ms} ms");
            } else {
                worst_unpaced = worst_unpaced.max(off.abs());
            }
        }
    }
    assert!(
        worst_unpaced > 0.15,
        "the null model should miss: {worst_unpaced}"
    );
    // Shorter than a cycle: said in the JSON and the summary.
    let v = run("840pro", "0.001x");
    assert_eq!(v["window_shorter_than_gc_cycle"], true, "{v}");
    let o = flashlab(&[
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "4GiB",
        "--precondition",
        "steady",
        "--workload",
        "uniform",
        "--writes",
        "0.001x",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("fewer than one GC cycle"), "{text}");
}

#[test]
fn a_run_ends_with_the_journal_s_final_commit_so_freed_extents_are_discarded() {
    // With journal discard and O_DIRECT spill files, every extent the join freed waited
    // for a commit that never came before the run ended: 0 TRIMs in 12 repetitions.
    let v = stdout_json(&flashlab(&[
        "join",
        "--sf",
        "0.05",
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
        "journal",
        "--repeat",
        "2",
        "--json",
    ]));
    assert!(v["bytes_spilled"].as_u64().unwrap() > 0, "{v}");
    for r in v["repetitions"].as_array().unwrap() {
        assert!(r["trim_commands"].as_u64().unwrap() > 0, "{r}");
    }
}

#[test]
fn the_shipped_sample_trace_replays_as_the_readme_says() {
    let trace = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/kv-ext4.trace");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "replay",
            trace,
            "--preset",
            "840pro",
            "--capacity",
            "2GiB",
            "--json",
        ];
        args.extend_from_slice(extra);
        stdout_json(&flashlab(&args))
    };
    let fresh = run(&[]);
    assert_eq!(fresh["requests"], 3140);
    assert!(fresh["trim_commands"].as_u64().unwrap() > 0, "{fresh}");
    assert!(
        fresh["waf"].as_f64().unwrap() < 1.05,
        "a fresh drive: {fresh}"
    );
    let aged = run(&["--precondition", "steady"]);
    assert!(
        aged["waf"].as_f64().unwrap() > 2.0,
        "an aged drive collects garbage: {aged}"
    );
}

#[test]
fn threaded_simulated_joins_give_the_same_numbers_run_after_run_and_never_hang() {
    // The order of the threads' calls on the drive once depended on which thread the OS
    // woke first at a barrier (8 runs, 7 different times), and inputs on the device made a
    // store wait for one not yet created (a hang).
    let base = [
        "join",
        "--sf",
        "0.02",
        "--memory",
        "512KiB",
        "--read-buffer",
        "64KiB",
        "--write-buffer",
        "4KiB",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--json",
    ];
    for (extra, runs) in [
        (&["--host", "none", "--threads", "2"][..], 20),
        (&["--host", "direct-io", "--threads", "2"][..], 5),
        (&["--users", "2", "--threads", "2"][..], 5),
        (
            &["--host", "none", "--threads", "2", "--inputs-on-device"][..],
            5,
        ),
        (
            &["--users", "2", "--threads", "2", "--inputs-on-device"][..],
            5,
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let run = || {
            let mut v = stdout_json(&flashlab_or_hang(&args, 300));
            let o = v.as_object_mut().unwrap();
            o.remove("wall_s");
            o.remove("peak_memory_bytes");
            v
        };
        let first = run();
        assert_eq!(first["threads"].as_u64(), Some(2), "{extra:?}: {first}");
        for i in 1..runs {
            assert_eq!(run(), first, "{extra:?}: run {i} differs from the first");
        }
    }
}

#[test]
fn join_errors_are_clear_and_leave_nothing_behind() {
    let dir = Scratch::new("join-errors");
    let d = dir.0.to_str().unwrap();
    let missing = dir.0.join("nope");
    let o = flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "1MiB",
        "--dir",
        missing.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not exist"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = flashlab(&[
        "join",
        "--sf",
        "0.1",
        "--memory",
        "4MiB",
        "--dir",
        d,
        "--spill-cap",
        "1MiB",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("spill cap"), "{err}");
    let o = flashlab(&["join", "--sf", "0.1", "--memory", "100KiB", "--dir", d]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("memory budget"));
    let left = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("flashlab-spill-")
        })
        .count();
    assert_eq!(left, 0);
}

/// A join's files in `dir`: its spill files (`flashlab-spill-RUN-N.tmp`) and, with
/// `with_locks`, its run's lock (`flashlab-spill-RUN.lock`, made before the first spill
/// file: a run killed between the two leaves a lock and no spill file).
fn join_files(dir: &std::path::Path, with_locks: bool) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("flashlab-spill-") && (with_locks || name.ends_with(".tmp"))
        })
        .count()
}

/// Spill files in `dir`, and locks.
fn spill_files(dir: &std::path::Path) -> usize {
    join_files(dir, true)
}

/// Starts a long join and waits until it has spill files on disk.
fn start_spilling_join(dir: &std::path::Path) -> std::process::Child {
    let d = dir.to_str().unwrap();
    // Generate the inputs first so the spilling starts at once.
    let o = flashlab(&["join", "--sf", "0.5", "--memory", "64MiB", "--dir", d]);
    assert!(o.status.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args([
            "join",
            "--sf",
            "0.5",
            "--memory",
            "1MiB",
            "--read-buffer",
            "64KiB",
            "--write-buffer",
            "4KiB",
            "--dir",
            d,
            "--repeat",
            "1000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Spill files proper, not only the run's lock (which comes first); a busy machine may
    // take a while to get there, and the wait ends as soon as one is there.
    for _ in 0..6000 {
        if join_files(dir, false) > 0 {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the join exited early with {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        join_files(dir, false) > 0,
        "the join should be spilling by now"
    );
    child
}

#[test]
fn ctrl_c_removes_spill_files_and_a_killed_runs_files_go_at_the_next_start() {
    let dir = Scratch::new("sigint");
    let mut child = start_spilling_join(&dir.0);
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        spill_files(&dir.0),
        0,
        "Ctrl-C removed the run's spill files"
    );

    let mut child = start_spilling_join(&dir.0);
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert!(
        join_files(&dir.0, false) > 0,
        "a killed process leaves its spill files"
    );
    let v = stdout_json(&flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "64MiB",
        "--dir",
        dir.0.to_str().unwrap(),
        "--json",
    ]));
    assert!(v["stale_spill_files_removed"].as_u64().unwrap() > 0);
    assert_eq!(spill_files(&dir.0), 0, "the next run removed them");
}

#[test]
fn concurrent_users_on_a_simulated_drive_are_deterministic() {
    let args = [
        "join",
        "--sf",
        "0.02",
        "--layout",
        "fixed128",
        "--memory",
        "2MiB",
        "--read-buffer",
        "256KiB",
        "--write-buffer",
        "8KiB",
        "--backend",
        "sim",
        "--preset",
        "x25e",
        "--capacity",
        "4GiB",
        "--inputs-on-device",
        "--host",
        "none",
        "--users",
        "3",
        "--json",
    ];
    let a = stdout_json(&flashlab(&args));
    let b = stdout_json(&flashlab(&args));
    assert_eq!(
        a["repetitions"], b["repetitions"],
        "same inputs, same virtual times, whatever the thread scheduling"
    );
    assert_eq!(a["rows"].as_u64().unwrap(), 3 * independent_join(0.02).0);
    let mut one = args.to_vec();
    let users = one.len() - 2;
    one[users] = "1";
    let single = stdout_json(&flashlab(&one));
    assert!(
        a["repetitions"][0]["total_ns"].as_u64().unwrap()
            > single["repetitions"][0]["total_ns"].as_u64().unwrap(),
        "three users sharing a drive take longer than one"
    );
}

#[test]
fn a_full_disk_is_a_clear_error_and_leaves_no_spill_files() {
    // Needs root to mount a small tmpfs; says so and skips otherwise.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED a_full_disk_is_a_clear_error_and_leaves_no_spill_files: needs root to mount a tmpfs");
        return;
    }
    let data = Scratch::new("fulldisk-data");
    let mnt = Scratch::new("fulldisk-mnt");
    let m = mnt.0.to_str().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs", m])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIPPED a_full_disk_is_a_clear_error_and_leaves_no_spill_files: mounting a tmpfs failed");
        return;
    }
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(m.to_string());
    for fallocate in ["off", "on"] {
        let o = flashlab(&[
            "join",
            "--sf",
            "0.1",
            "--memory",
            "4MiB",
            "--dir",
            m,
            "--data-dir",
            data.0.to_str().unwrap(),
            "--fallocate",
            fallocate,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "the 12 MB of spill cannot fit 4 MB");
        assert!(err.contains("disk full") && err.contains(m), "{err}");
        assert_eq!(
            spill_files(&mnt.0),
            0,
            "fallocate {fallocate}: nothing left behind"
        );
    }
}

#[test]
fn btree_runs_on_every_backend_and_crash_tests_pass() {
    let dir = Scratch::new("btree");
    for (store, backend) in [
        ("as", "mem"),
        ("inplace", "mem"),
        ("as", "os"),
        ("inplace", "sim"),
    ] {
        let mut args = vec![
            "btree",
            "--store",
            store,
            "--fanout",
            "64",
            "--preload",
            "3000",
            "--ops",
            "1000",
            "--backend",
            backend,
            "--json",
        ];
        // The in-place store has no write buffer (the flag is refused there).
        if store == "as" {
            args.extend(["--write-buffer", "8"]);
        }
        let d = dir.0.to_str().unwrap().to_string();
        if backend == "os" {
            args.extend(["--dir", d.as_str()]);
        }
        if backend == "sim" {
            args.extend(["--preset", "x25e", "--capacity", "1GiB"]);
        }
        let v = stdout_json(&flashlab(&args));
        assert_eq!(v["entries"], 4000, "{store} on {backend}");
        assert!(
            v["insert_s"].as_f64().unwrap() > 0.0 && v["search_node_reads"].as_u64().unwrap() > 0
        );
        if store == "as" {
            assert!(
                v["insert_write_requests"].as_u64().unwrap()
                    < v["insert_node_writes"].as_u64().unwrap(),
                "the write buffer batches node writes"
            );
        }
    }
    let left = std::fs::read_dir(&dir.0).unwrap().count();
    assert_eq!(left, 0, "the B+tree file is removed after the run");
    let o = flashlab(&[
        "btree",
        "crash-test",
        "--iterations",
        "40",
        "--seed",
        "1000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("40 seeded tests") && out.contains("reordered") && out.contains("EIO"),
        "the crash test says what it covered: {out}"
    );
    let o = flashlab(&["btree", "--store", "btrfs"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected as, inplace or bftl"));
    // Deferred changes: only with the AS store's logical commits; every entry is there.
    let o = flashlab(&["btree", "--store", "as", "--defer", "1MiB"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && e.contains("--defer needs the AS store with --logical-commits"),
        "{e}"
    );
    let o = flashlab(&[
        "btree",
        "--store",
        "as",
        "--logical-commits",
        "--defer",
        "256KiB",
        "--preload",
        "3000",
        "--ops",
        "2000",
        "--commit-every",
        "50",
        "--write-buffer",
        "64",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["entries"].as_u64(), Some(5_000), "{v}");
    // One backend flag group for every engine: an unknown backend is refused (it fell
    // through to the simulated one), and each engine says which it cannot run on.
    let o = flashlab(&["btree", "--backend", "floppy"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("mem, os, sim"), "{e}");
    let o = flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "4MiB",
        "--backend",
        "mem",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("the join needs files"));
    let o = flashlab(&["btree", "--backend", "os"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--backend os needs --dir DIR"));
}

#[test]
fn kv_runs_the_update_workload_on_real_files_and_cleans_up() {
    let dir = Scratch::new("kv");
    let d = dir.0.to_str().unwrap();
    let v = stdout_json(&flashlab(&[
        "kv",
        "--docs",
        "4000",
        "--ops",
        "4000",
        "--batch",
        "8",
        "--dbs",
        "4",
        "--backend",
        "os",
        "--dir",
        d,
        "--json",
    ]));
    assert_eq!(v["ops"], 4000);
    assert_eq!(v["commits"], 4 * 125);
    assert!(v["ops_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["syncs"].as_u64().unwrap() >= 500);
    assert!(v["bytes_written"].as_u64().unwrap() > 4000 * 1024);
    assert_eq!(
        std::fs::read_dir(&dir.0).unwrap().count(),
        0,
        "database files removed"
    );
    let o = flashlab(&["kv", "--docs", "2", "--dbs", "4"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot fill 4 databases"));
    // On a simulated drive the databases take turns in virtual time: the same numbers
    // every run.
    let sim = |_: u8| {
        stdout_json(&flashlab(&[
            "kv",
            "--backend",
            "sim",
            "--preset",
            "840pro",
            "--capacity",
            "2GiB",
            "--docs",
            "2000",
            "--ops",
            "800",
            "--batch",
            "4",
            "--json",
        ]))
    };
    let (a, b) = (sim(0), sim(1));
    assert_eq!(a["commits"], 200);
    assert_eq!(a["update_s"], b["update_s"]);
    assert!(a["update_s"].as_f64().unwrap() > 0.0);
    let o = flashlab(&["kv", "crash-test", "--iterations", "20"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Starts `flashlab ARGS` in the background and waits until it has made a directory
/// whose name starts with `prefix` in `dir`.
fn start_and_wait_for(args: &[&str], dir: &std::path::Path, prefix: &str) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..1000 {
        let made = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| {
                e.file_name().to_string_lossy().starts_with(prefix)
                    && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_some())
            });
        if made {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("flashlab {args:?} never made its files");
}

#[test]
fn tree_and_kv_runs_on_real_files_never_share_and_always_clean_up() {
    let dir = Scratch::new("own-files");
    let d = dir.0.to_str().unwrap();
    // What a killed earlier run left under the old, PID-only names: never opened.
    let old = dir.0.join(format!(
        "flashlab-btree-{}-as-00000000.seg",
        std::process::id()
    ));
    std::fs::write(&old, vec![0xAB; 8192]).unwrap();
    let run = |store: &str| {
        stdout_json(&flashlab(&[
            "btree",
            "--store",
            store,
            "--preload",
            "1000",
            "--ops",
            "100",
            "--backend",
            "os",
            "--dir",
            d,
            "--json",
        ]))
    };
    for store in ["as", "inplace"] {
        assert_eq!(
            run(store)["entries"],
            1100,
            "{store}: a fresh store every run"
        );
        assert_eq!(
            run(store)["entries"],
            1100,
            "{store}: a fresh store every run"
        );
    }
    std::fs::remove_file(&old).unwrap();
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 0);
    // An interrupt (SIGINT or SIGTERM) mid-run: exit 130 and no files left.
    for (args, prefix, signal) in [
        (
            vec![
                "btree",
                "--store",
                "as",
                "--preload",
                "50000000",
                "--ops",
                "10",
                "--commit-every",
                "100",
                "--backend",
                "os",
                "--dir",
                d,
            ],
            "flashlab-btree-",
            libc::SIGINT,
        ),
        (
            vec![
                "kv",
                "--docs",
                "4000",
                "--ops",
                "100000000",
                "--batch",
                "1",
                "--backend",
                "os",
                "--dir",
                d,
            ],
            "flashlab-kv-",
            libc::SIGTERM,
        ),
    ] {
        let mut child = start_and_wait_for(&args, &dir.0, prefix);
        // SAFETY: sending a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{args:?}");
        let left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
}

#[test]
fn concurrent_joins_sharing_a_data_dir_all_answer_correctly() {
    // Four runs start at once on an empty data directory: one generates the tables while
    // the others wait for it, and none reads a table being rewritten (one printed 3,248,707
    // rows instead of 6,001,215 when tables were regenerated in place).
    let dir = Scratch::new("shared-data");
    let d = dir.0.to_str().unwrap();
    let want = independent_join(0.1);
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_flashlab"))
                .args([
                    "join", "--sf", "0.1", "--memory", "4MiB", "--layout", "fixed128", "--dir", d,
                    "--json",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let v = stdout_json(&c.wait_with_output().unwrap());
        let got = (
            v["rows"].as_u64().unwrap(),
            v["sum_l_extendedprice_cents"].as_i64().unwrap(),
            v["sum_o_totalprice_cents"].as_i64().unwrap(),
        );
        assert_eq!(got, want);
    }
}

#[test]
fn a_join_on_simfs_with_ftrim_and_two_users_answers_correctly() {
    // fTrim made simfs encode the inode-table block of a neighbour whose extent tree was
    // not written yet: a panic, then a poisoned mutex for the second user.
    let v = stdout_json(&flashlab(&[
        "join",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "4GiB",
        "--discard",
        "ftrim",
        "--users",
        "2",
        "--sf",
        "0.05",
        "--memory",
        "4MiB",
        "--json",
    ]));
    let (rows, l, o) = independent_join(0.05);
    assert_eq!(
        v["rows"].as_u64().unwrap(),
        2 * rows,
        "two users, each the whole join"
    );
    assert_eq!(v["sum_l_extendedprice_cents"].as_i64().unwrap(), 2 * l);
    assert_eq!(v["sum_o_totalprice_cents"].as_i64().unwrap(), 2 * o);
    assert!(v["repetitions"][0]["trim_commands"].as_u64().unwrap() > 0);
}

#[test]
fn a_join_through_the_host_path_is_deterministic_and_its_cache_absorbs_spill_files() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "join",
            "--backend",
            "sim",
            "--preset",
            "mx500",
            "--capacity",
            "4GiB",
            "--discard",
            "online",
            "--sf",
            "0.1",
            "--memory",
            "2MiB",
            "--write-buffer",
            "8KiB",
            "--json",
        ];
        args.extend_from_slice(extra);
        let v = stdout_json(&flashlab(&args));
        let r = &v["repetitions"][0];
        (
            v["rows"].as_u64().unwrap(),
            r["total_ns"].as_u64().unwrap(),
            r["trim_commands"].as_u64().unwrap(),
        )
    };
    let plain = run(&["--host", "none"]);
    let small = run(&["--host-ram", "32MiB"]);
    assert_eq!(
        small,
        run(&["--host-ram", "32MiB"]),
        "same numbers every run"
    );
    let large = run(&["--host-ram", "4GiB"]);
    assert_eq!(plain.0, small.0);
    assert_eq!(plain.0, large.0);
    assert!(plain.2 > 0, "without a cache the spill files are trimmed");
    assert_eq!(
        large.2, 0,
        "a cache larger than the spill files keeps them off the drive"
    );
    assert!(large.1 < plain.1, "and the join is faster");
}

#[test]
fn a_join_with_too_little_memory_per_user_says_each_user_has_a_share() {
    let o = flashlab(&[
        "join",
        "--sf",
        "0.02",
        "--memory",
        "1MiB",
        "--users",
        "8",
        "--backend",
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("memory budget of 131072 bytes is too small")
            && err.contains("each of the 8 users has its share of --memory"),
        "{err}"
    );
    let o = flashlab(&[
        "sim",
        "--preset",
        "x25e",
        "--workload",
        "uniform",
        "--writes",
        "2",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("write 2x"), "{err}");
}

#[test]
fn the_postgres_join_reports_its_batches() {
    let o = flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "64KiB",
        "--algorithm",
        "postgres",
        "--backend",
        "sim",
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["algorithm"], "postgres");
    // 15,000 orders of 16 bytes at 64 kB: PostgreSQL's rule plans 16 batches.
    assert_eq!(j["initial_batches"], 16, "{j}");
    assert_eq!(j["partitions"], 16);
    let o = flashlab(&[
        "join",
        "--sf",
        "0.01",
        "--memory",
        "32KiB",
        "--algorithm",
        "postgres",
        "--backend",
        "sim",
        "--preset",
        "x25e",
        "--capacity",
        "256MiB",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("64 kB"), "{err}");
}

#[test]
fn engines_print_the_drive_s_wear_and_age_seeds_its_erase_counts() {
    // The join on a simulated MX500: --wear adds the report sim --wear prints; with --json,
    // a `wear` object whose host bytes are the repetitions'.
    let join = |extra: &[&str]| {
        let mut args = vec![
            "join",
            "--sf",
            "0.05",
            "--memory",
            "1MiB",
            "--read-buffer",
            "64KiB",
            "--backend",
            "sim",
            "--preset",
            "mx500",
            "--capacity",
            "1GiB",
            "--host",
            "none",
            "--repeat",
            "2",
        ];
        args.extend_from_slice(extra);
        flashlab(&args)
    };
    let v = stdout_json(&join(&["--wear", "--json"]));
    let host: u64 = v["repetitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host_write_bytes"].as_u64().unwrap())
        .sum();
    assert!(host > 0);
    assert_eq!(v["wear"]["host_write_bytes"].as_u64().unwrap(), host);
    assert_eq!(v["wear"]["rated_pe_cycles"].as_u64().unwrap(), 1500);
    // Without --wear the JSON is as it was.
    assert!(stdout_json(&join(&["--json"])).get("wear").is_none());
    // --age pe=N: every block starts at N erases, so life used starts at N / rated.
    let o = join(&["--wear", "--age", "pe=150"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("life used") && out.contains("projected TBW") && out.contains("min 150"),
        "{out}"
    );

    // The B-tree and kv store on a simulated drive, the same report.
    let o = flashlab(&[
        "btree",
        "--store",
        "inplace",
        "--fanout",
        "64",
        "--preload",
        "2000",
        "--ops",
        "500",
        "--backend",
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--wear",
        "--json",
    ]);
    let v = stdout_json(&o);
    assert!(v["wear"]["host_write_bytes"].as_u64().unwrap() > 0);
    assert!(v["wear"]["life_used"].as_f64().unwrap() >= 0.0);
    let o = flashlab(&[
        "kv",
        "--docs",
        "500",
        "--ops",
        "500",
        "--backend",
        "sim",
        "--preset",
        "840pro",
        "--capacity",
        "1GiB",
        "--wear",
        "--age",
        "pe=300,cell=mlc",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("life used") && out.contains("10.0"), "{out}");

    // A disk has no flash to wear; --wear and --age need a simulated drive; a bad age is
    // named.
    let o = flashlab(&[
        "btree",
        "--preload",
        "100",
        "--ops",
        "100",
        "--backend",
        "sim",
        "--preset",
        "hdd7200",
        "--capacity",
        "1GiB",
        "--wear",
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("hard disk: no flash to wear"));
    for args in [
        &["btree", "--preload", "10", "--ops", "10", "--wear"][..],
        &["kv", "--docs", "10", "--ops", "10", "--age", "pe=10"][..],
    ] {
        let o = flashlab(args);
        assert!(!o.status.success());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("applies to a simulated drive"), "{e}");
    }
    let o = join(&["--age", "pe=lots"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("pe="));
}

#[test]
fn reproduce_against_a_baseline_fails_when_a_verdict_changes_outcome() {
    let stderr = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let dir = Scratch::new("baseline");
    let (first, second) = (dir.0.join("a"), dir.0.join("b"));
    let run = |out: &std::path::Path, baseline: Option<&std::path::Path>| {
        let mut args = vec![
            "reproduce",
            "--only",
            "trim",
            "--out",
            out.to_str().unwrap(),
        ];
        if let Some(b) = baseline {
            args.extend(["--baseline", b.to_str().unwrap()]);
        }
        flashlab(&args)
    };
    assert!(run(&first, None).status.success());
    let results = first.join("results.json");
    // The same run against itself: every outcome the same, exit 0.
    let o = run(&second, Some(&results));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("every verdict has the baseline's outcome"));
    // A baseline where one verdict had the other outcome: named, and a non-zero exit.
    let mut old: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let v = &mut old["experiments"]["trim"]["verdicts"][0];
    let id = v["id"].as_str().unwrap().to_string();
    let holds = v["holds"].as_bool().unwrap();
    v["holds"] = serde_json::Value::Bool(!holds);
    let flipped = dir.0.join("flipped.json");
    std::fs::write(&flipped, old.to_string()).unwrap();
    std::fs::remove_dir_all(&second).unwrap();
    let o = run(&second, Some(&flipped));
    assert!(!o.status.success());
    let e = stderr(&o);
    // A verdict that is not a prediction carries its role beside its outcome.
    let role = match old["experiments"]["trim"]["verdicts"][0]["role"].as_str() {
        None | Some("predicted") => String::new(),
        Some(r) => format!(" ({r})"),
    };
    let word = |h: bool| if h { "holds" } else { "fails" };
    assert!(
        e.contains(&format!(
            "{id}: {}{role} -> {}{role}",
            word(!holds),
            word(holds)
        )),
        "{e}"
    );
    assert!(e.contains("1 verdict(s) changed outcome"), "{e}");
    // Not a report's results.json: refused before anything runs.
    let o = run(&dir.0.join("c"), Some(&dir.0.join("a/index.html")));
    assert!(
        stderr(&o).contains("is not a report's results.json"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.0.join("c").exists());
}

#[test]
fn reproduce_keeps_what_it_did_not_write() {
    let stderr = |o: &std::process::Output| {
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let dir = Scratch::new("report-keep");
    // A directory flashlab did not make, with something in it: refused before any run,
    // as `--out DIR` and as `--out .`.
    let theirs = dir.0.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::write(theirs.join("index.html"), "mine").unwrap();
    for (cwd, out) in [(&dir.0, theirs.to_str().unwrap()), (&theirs, ".")] {
        let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(["reproduce", "--only", "waf", "--out", out])
            .current_dir(cwd)
            .output()
            .unwrap();
        let e = stderr(&o);
        assert!(e.contains("not a report flashlab made"), "{e}");
        assert!(
            !e.contains("[holds]"),
            "refused before the experiment ran: {e}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(theirs.join("index.html")).unwrap(),
        "mine"
    );
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 1);
    // One that cannot be written fails first too.
    let o = flashlab(&["reproduce", "--only", "waf", "--out", "/proc/no/report"]);
    let e = stderr(&o);
    assert!(e.contains("--out /proc/no/report: cannot create it"), "{e}");
    // --only without --out writes report-IDS, never over report/.
    std::fs::create_dir(dir.0.join("report")).unwrap();
    std::fs::write(
        dir.0.join("report/index.html"),
        "<title>flashlab report</title>",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["reproduce", "--only", "waf"])
        .current_dir(&dir.0)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(dir.0.join("report-waf/waf/waf.csv").is_file());
    assert!(dir.0.join("report-waf/.flashlab-report").is_file());
    assert_eq!(
        std::fs::read_to_string(dir.0.join("report/index.html")).unwrap(),
        "<title>flashlab report</title>"
    );
    // A report from before the mark may be replaced, but its other directories are not
    // known to be flashlab's: they stay.
    std::fs::create_dir(dir.0.join("report/trim")).unwrap();
    std::fs::write(dir.0.join("report/trim/notes.txt"), "mine").unwrap();
    let run = |out: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(["reproduce", "--only", "waf", "--out", out])
            .current_dir(&dir.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    run("report");
    assert!(dir.0.join("report/waf/waf.csv").is_file());
    assert!(dir.0.join("report/trim/notes.txt").is_file());
    // A marked report's other sections go, but only what flashlab wrote in them.
    let marked = dir.0.join("marked");
    std::fs::create_dir_all(marked.join("trim")).unwrap();
    std::fs::create_dir_all(marked.join("astree")).unwrap();
    std::fs::write(
        marked.join(".flashlab-report"),
        "made by flashlab reproduce\nsection trim\nsection astree\n",
    )
    .unwrap();
    std::fs::write(marked.join("trim/delete.svg"), "<svg/>").unwrap();
    std::fs::write(marked.join("astree/a.csv"), "x").unwrap();
    std::fs::write(marked.join("astree/notes.txt"), "mine").unwrap();
    // A symlink in it is replaced, never written through.
    let victim = dir.0.join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, marked.join("results.json")).unwrap();
    // A FIFO and a hard link are replaced too (a FIFO once hung the write).
    assert!(Command::new("mkfifo")
        .arg(marked.join("index.html"))
        .status()
        .unwrap()
        .success());
    std::fs::create_dir(marked.join("waf")).unwrap();
    std::fs::hard_link(&victim, marked.join("waf/waf.csv")).unwrap();
    let e = run("marked");
    assert!(
        !marked.join("trim").exists(),
        "a stale section of ours goes"
    );
    assert!(!marked.join("astree/a.csv").exists());
    assert!(
        marked.join("astree/notes.txt").is_file(),
        "what flashlab did not write stays"
    );
    assert!(e.contains("kept") && e.contains("notes.txt"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::read_to_string(marked.join("results.json"))
        .unwrap()
        .contains("\"waf\""));
    let mark = std::fs::read_to_string(marked.join(".flashlab-report")).unwrap();
    assert!(
        mark.contains("section waf") && !mark.contains("section trim"),
        "{mark}"
    );
    // A mark that is a symlink: refused, its target untouched.
    let linked = dir.0.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(&victim, linked.join(".flashlab-report")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["reproduce", "--only", "waf", "--out"])
        .arg(&linked)
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(e.contains("is not a regular file"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

/// A compressed file of `members` copies of one member holding 64 MiB of `line`s (gzip
/// members and zstd frames decode as their concatenation): 2 GiB of text in a few MB.
fn bomb(path: &std::path::Path, zstd: bool, line: &str, members: usize) {
    use std::io::Write;
    let text = line.repeat((64 << 20) / line.len());
    let member = if zstd {
        zstd::encode_all(text.as_bytes(), 1).unwrap()
    } else {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    let mut f = std::fs::File::create(path).unwrap();
    for _ in 0..members {
        f.write_all(&member).unwrap();
    }
}

#[test]
fn kernel_traces_stream_so_a_decompression_bomb_is_an_error_not_an_allocation() {
    use std::os::unix::process::CommandExt;
    let dir = Scratch::new("bomb");
    for (format, zstd) in [("blkparse", false), ("tracefs", true)] {
        let path = dir.0.join(format!("bomb.{format}"));
        bomb(&path, zstd, "not an event\n", 32);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_flashlab"));
        cmd.args(["replay", path.to_str().unwrap(), "--format", format])
            .args(["--preset", "x25e", "--capacity", "1GiB"]);
        // 1 GiB of address space: reading the 2 GiB of text whole could not fit.
        // SAFETY: setrlimit in the child before exec, on a value on its stack.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 1 << 30,
                    rlim_max: 1 << 30,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = cmd.output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{format}: a clean error, not an abort: {e}"
        );
        assert!(
            e.contains(&format!("bomb.{format}:1:")),
            "{format}: the first line is the error: {e}"
        );
    }
}

#[test]
fn empty_or_header_only_traces_are_refused_in_every_format() {
    let dir = Scratch::new("empty-traces");
    for (name, text, format) in [
        ("e.blk", "", "blkparse"),
        ("e.txt", "# tracer: nop\n#\n", "tracefs"),
        ("h.trace", "flashlab-trace v1 closed\n", "native"),
        ("e.csv", "", "msr"),
    ] {
        let path = dir.0.join(name);
        std::fs::write(&path, text).unwrap();
        let o = flashlab(&[
            "replay",
            path.to_str().unwrap(),
            "--format",
            format,
            "--preset",
            "x25e",
            "--capacity",
            "1GiB",
        ]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{format}: an empty trace replayed");
        assert!(
            e.contains("no requests") || e.contains("empty trace"),
            "{format}: {e}"
        );
    }
    // A kernel trace whose time goes back names the line.
    let path = dir.0.join("back.blk");
    std::fs::write(
        &path,
        "  8,0    1        3     0.000002000  1234  D  WS 2048 + 8 [dd]\n  8,0    1        4     0.000001000  1234  D  WS 4096 + 8 [dd]\n",
    )
    .unwrap();
    let o = flashlab(&[
        "replay",
        path.to_str().unwrap(),
        "--preset",
        "x25e",
        "--capacity",
        "1GiB",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("back.blk:2: this issue at 0.000001000 s is earlier"),
        "{e}"
    );
}

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

#[test]
fn a_signal_repeated_at_once_as_timeout_sends_it_still_cleans_up() {
    use std::time::Duration;
    let dir = Scratch::new("signals");
    // As GNU timeout does: the signal to the process, at once again (to its group).
    let out = dir.0.join("r");
    let spawn = |out: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(["reproduce", "--only", "waf", "--scale", "full", "--out"])
            .arg(out)
            .stderr(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let child = spawn(&out);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(20));
    signal(&child, libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !e.contains("exiting now"),
        "the repeat was taken as 'exit now': {e}"
    );
    assert!(e.contains("interrupting: cleaning up"), "{e}");
    // The report of what finished (here nothing) is still written.
    assert!(out.join("index.html").is_file(), "{e}");
}

#[test]
fn flags_that_would_do_nothing_are_refused_by_name() {
    let dir = Scratch::new("nothing-flags");
    let d = dir.0.to_str().unwrap();
    let sweep_out = dir.0.join("sweep");
    let s = sweep_out.to_str().unwrap();
    for (args, says) in [
        (
            vec![
                "join",
                "--sf",
                "0.01",
                "--memory",
                "1MiB",
                "--dir",
                d,
                "--algorithm",
                "postgres",
                "--partitions",
                "3",
            ],
            "--partitions does nothing with --algorithm postgres",
        ),
        (
            vec![
                "join",
                "--sf",
                "0.01",
                "--memory",
                "1MiB",
                "--backend",
                "os",
                "--dir",
                d,
                "--cores",
                "2",
            ],
            "--cores applies to the simulated host (--backend sim); with --backend os",
        ),
        (
            vec![
                "join",
                "--sf",
                "0.01",
                "--memory",
                "1MiB",
                "--backend",
                "os",
                "--dir",
                d,
                "--io-scheduler",
                "cfq",
            ],
            "--io-scheduler applies to the simulated host",
        ),
        (
            vec![
                "join",
                "--sf",
                "0.01",
                "--memory",
                "1MiB",
                "--backend",
                "sim",
                "--preset",
                "mx500",
                "--spill-cap",
                "1",
            ],
            "--spill-cap applies to real files (--backend os); with --backend sim",
        ),
        (
            vec!["btree", "--store", "inplace", "--logical-commits"],
            "--logical-commits applies to the AS store (--store as); with --store inplace",
        ),
        (
            vec!["btree", "--store", "as", "--bftl-list", "4"],
            "--bftl-list applies to BFTL",
        ),
        (
            vec![
                "sim",
                "--preset",
                "mx500",
                "--capacity",
                "1GiB",
                "--drive",
                "zoned",
                "--mapping-cache",
                "4KiB",
                "--workload",
                "uniform",
                "--writes",
                "1x",
            ],
            "--mapping-cache does nothing with --drive zoned",
        ),
        (
            vec![
                "sim",
                "--preset",
                "mx500",
                "--capacity",
                "1GiB",
                "--drive",
                "zoned",
                "--wear-leveling",
                "static",
                "--workload",
                "uniform",
                "--writes",
                "1x",
            ],
            "--wear-leveling does nothing with --drive zoned",
        ),
        (
            vec![
                "sim",
                "--preset",
                "hdd7200",
                "--drive",
                "zoned",
                "--workload",
                "uniform",
                "--writes",
                "1x",
            ],
            "--drive, --scheduler and --unwritten-reads apply to SSDs only",
        ),
        (
            vec![
                "sweep",
                "--out",
                s,
                "--preset",
                "mx500",
                "--capacity",
                "1GiB",
                "--op",
                "0.07,0.2",
                "--workload",
                "uniform",
                "--writes",
                "1x",
                "--wear-plot",
                "x.svg",
            ],
            "--wear-plot writes one run's wear plot, and sweep writes none per point",
        ),
        (
            vec![
                "sim",
                "--preset",
                "mx500",
                "--capacity",
                "1GiB",
                "--age",
                "pe=1500,retention=1y,pe=3",
                "--workload",
                "uniform",
                "--writes",
                "1x",
            ],
            "pe is given twice",
        ),
    ] {
        common::assert_refused(&args, says);
    }
    // Given where they apply, the same flags run.
    let o = flashlab(&[
        "btree",
        "--store",
        "as",
        "--logical-commits",
        "--preload",
        "1000",
        "--ops",
        "100",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn messages_say_what_happened_in_words_people_read() {
    let dir = Scratch::new("messages");
    // A document too large for a node: said before any document is made.
    let o = flashlab(&["kv", "--doc-size", "1GiB"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && e.contains(
                "--doc-size 1.0 GiB: a document and its 16-byte key must fit half a 4.0 KiB node"
            ),
        "{e}"
    );
    // A decimal capacity: the message says what to give.
    let o = flashlab(&[
        "sim",
        "--preset",
        "mx500",
        "--capacity",
        "4GB",
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("3.7 GiB (4000000000 bytes)") && e.contains("4GiB is 4,294,967,296"),
        "{e}"
    );
    // One database, and times that say which clock.
    let o = flashlab(&["kv", "--dbs", "1", "--docs", "100", "--ops", "10"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("flashlab kv: 1 database, 100 documents"), "{t}");
    let o = flashlab(&["btree", "--preload", "1000", "--ops", "100"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains(" s wall (reads") && t.contains(" s wall, "),
        "{t}"
    );
    // A trace past the drive's end: sizes in binary units, and a --capacity that fits.
    let trace = dir.0.join("far.trace");
    std::fs::write(&trace, "flashlab-trace v1 closed\n0 W 8588587008 4096 0\n").unwrap();
    let o = flashlab(&[
        "replay",
        trace.to_str().unwrap(),
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("(8.0 GiB)") && e.contains("--capacity 8GiB"),
        "{e}"
    );
    // Sweep points without timing: not measured is empty (CSV) and null (JSON), not 0.
    let out = dir.0.join("sweep");
    let o = flashlab(&[
        "sweep",
        "--out",
        out.to_str().unwrap(),
        "--preset",
        "mx500",
        "--capacity",
        "1GiB",
        "--timing",
        "off,on",
        "--workload",
        "uniform",
        "--writes",
        "1x",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let iops = head.iter().position(|h| *h == "iops").unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0][iops], "", "timing off: {csv}");
    assert!(
        rows[1][iops].parse::<f64>().unwrap() > 0.0,
        "timing on: {csv}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert!(json["points"][0]["result"]["iops"].is_null());
    assert!(json["points"][0]["result"]["write_latency_ns"]["p99"].is_null());
    assert!(json["points"][1]["result"]["iops"].as_f64().unwrap() > 0.0);
}

#[test]
fn more_flags_that_would_do_nothing_are_refused() {
    let dir = Scratch::new("more-nothing-flags");
    let trace = dir.0.join("t.trace");
    std::fs::write(&trace, "flashlab-trace v1 closed\n0 W 0 4096 0\n").unwrap();
    let timed = dir.0.join("o.trace");
    std::fs::write(&timed, "flashlab-trace v1 open\n0 W 0 4096 0\n").unwrap();
    let (t, o) = (trace.to_str().unwrap(), timed.to_str().unwrap());
    let out = dir.0.join("p.toml");
    let out = out.to_str().unwrap();
    for (args, says) in [
        (
            vec!["replay", t, "--preset", "x25e", "--coalesce-window", "5ms"],
            "--coalesce-window groups TRIMs",
        ),
        (
            vec!["replay", t, "--preset", "x25e", "--seed", "5"],
            "--seed seeds steady preconditioning's random writes",
        ),
        (
            vec!["replay", o, "--preset", "x25e", "--queue-depth", "8"],
            "the trace is timestamped",
        ),
        (
            vec![
                "calibrate",
                "--file",
                "/nonexistent/x.bin",
                "--size",
                "64MiB",
                "--out",
                out,
                "--capacity",
                "8GiB",
            ],
            "--capacity sizes the simulated drive",
        ),
        (
            vec!["calibrate", "--sim-preset", "x25e", "--name", "foo"],
            "--name names the preset written to --out",
        ),
        (
            vec![
                "fio",
                "examples/fio/seqread-128k.fio",
                "--preset",
                "mx500",
                "--seed",
                "3",
            ],
            "--seed seeds steady preconditioning's random writes",
        ),
    ] {
        common::assert_refused(&args, says);
    }
    // The same flags where they apply run.
    let r = flashlab(&[
        "replay",
        o,
        "--preset",
        "x25e",
        "--mode",
        "closed",
        "--queue-depth",
        "8",
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

#[test]
fn validate_runs_its_jobs_on_a_new_file_and_removes_it_and_refuses_what_it_cannot_do() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("SKIPPED: validate needs fio (apt-get install fio)");
        return;
    }
    let scratch = Scratch::new("validate");
    let target = scratch.0.join("target.bin");
    let t = target.to_str().unwrap();
    let out = flashlab(&[
        "validate", "--preset", "840pro", "--file", t, "--size", "64MiB", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = stdout_json(&out);
    // 9 jobs in 2 phases, the 70/30 mix a row per direction: every row has both sides.
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    for r in rows {
        assert!(r["target"]["iops"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["model"]["p99_ns"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(!target.exists(), "the target file is removed");
    // A file that exists is refused, and left as it was.
    std::fs::write(&target, b"keep").unwrap();
    let out = flashlab(&["validate", "--preset", "840pro", "--file", t]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists: flashlab uses a new file only"));
    // fio's own syntax in a file name (':' separates files, '$' expands) is refused, and
    // nothing is written under either name.
    for bad in ["x:victim", "${HOME}"] {
        let p = scratch.0.join(bad);
        let out = flashlab(&[
            "validate",
            "--preset",
            "840pro",
            "--file",
            p.to_str().unwrap(),
        ]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("fio would read"));
        assert!(!p.exists() && !scratch.0.join("victim").exists());
    }
    // In memory is refused (a drive is what is measured); a model smaller than the region
    // is refused before the target is touched.
    let shm = std::path::Path::new("/dev/shm/flashlab-validate-test.bin");
    let out = flashlab(&[
        "validate",
        "--preset",
        "840pro",
        "--file",
        shm.to_str().unwrap(),
    ]);
    assert!(!out.status.success() && !shm.exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in memory"));
    let out = flashlab(&[
        "validate", "--preset", "x25e", "--file", t, "--size", "40GiB",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("larger than --preset x25e"));
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    for (args, says) in [
        (vec!["--file", t, "--capacity", "1GiB"], "--capacity"),
        (
            vec!["--sim-preset", "mx500", "--tolerance", "0"],
            "--tolerance",
        ),
        (vec!["--sim-preset", "mx500", "--size", "1MiB"], "--size"),
        (
            vec![
                "--sim-preset",
                "mx500",
                "--capacity",
                "1GiB",
                "--size",
                "2GiB",
            ],
            "--size",
        ),
    ] {
        let mut a = vec!["validate", "--preset", "840pro"];
        a.extend(args);
        let out = flashlab(&a);
        assert!(!out.status.success(), "{a:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{a:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn validate_runs_on_a_block_device_only_when_told_it_may_erase_it() {
    if Command::new("fio").arg("--version").output().is_err() {
        eprintln!("SKIPPED: validate needs fio (apt-get install fio)");
        return;
    }
    let scratch = Scratch::new("validate-dev");
    let backing = scratch.0.join("disk.img");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(96 << 20)
        .unwrap();
    let Some(lo) = common::LoopDevice::new(&backing) else {
        eprintln!("SKIPPED: validate --device needs root and a loop device");
        return;
    };
    let dev = lo.dev.as_str();
    // Without the confirmation clap refuses, naming it.
    common::assert_refused(
        &["validate", "--preset", "840pro", "--device", dev],
        "--i-understand-this-erases",
    );
    // A region larger than the device is refused before anything is written.
    common::assert_refused(
        &[
            "validate",
            "--preset",
            "840pro",
            "--device",
            dev,
            "--i-understand-this-erases",
            "--size",
            "128MiB",
        ],
        "larger than",
    );
    let out = flashlab(&[
        "validate",
        "--preset",
        "840pro",
        "--device",
        dev,
        "--i-understand-this-erases",
        "--size",
        "64MiB",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = stdout_json(&out);
    assert_eq!(v["rows"].as_array().unwrap().len(), 20);
    assert!(v["target"].as_str().unwrap().contains("device"));
}
