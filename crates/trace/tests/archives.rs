//! The archive formats (Alibaba, Tencent, SPC, FIU, DiskSim and its MQSim and SSDSim
//! variants, fio iologs v2 and v3) through `TraceFile`, as `flashlab replay` reads them:
//! streaming replays exactly as the whole-text parse, gzip and zstd files as the plain
//! file, `--format auto` picks each (and refuses DiskSim's variants), `--disk` picks each
//! device, and errors name the file and line.

use flash::{Device, Preset};
use std::fmt::Write as _;
use std::io::Write as _;
use trace::{Format, TraceFile};

/// One format's sample: how to write its rows, and lines it must refuse.
struct Case {
    format: Format,
    /// Lines before the rows.
    header: &'static str,
    /// The two devices the rows alternate between, as `--disk` names them.
    devices: [&'static str; 2],
    /// Row `i` of device `dev` at time `tick` (the format's own units derive from it).
    row: fn(i: u64, dev: usize, tick: u64) -> String,
    /// A row with a wrong number of columns, and one with a bad operation.
    bad_columns: &'static str,
    bad_op: &'static str,
    /// What the error for the bad operation says.
    bad_op_says: &'static str,
}

fn offset(i: u64) -> u64 {
    (i * 7_919 % 4_000) * 4096
}

const CASES: &[Case] = &[
    Case {
        format: Format::Alibaba,
        header: "device_id,opcode,offset,length,timestamp\n",
        devices: ["3", "8"],
        row: |i, dev, tick| {
            let op = if i % 3 == 0 { "R" } else { "W" };
            let id = [3, 8][dev];
            format!(
                "{id},{op},{},4096,{}",
                offset(i),
                1_577_808_000_000_000 + tick * 40
            )
        },
        bad_columns: "3,R,0,4096",
        bad_op: "3,T,0,4096,1577808000000000",
        bad_op_says: "opcode \"T\" is neither R nor W",
    },
    Case {
        format: Format::Tencent,
        header: "Timestamp,Offset,Size,IOType,VolumeID\n",
        devices: ["1063", "77"],
        row: |i, dev, tick| {
            let ty = if i % 3 == 0 { 0 } else { 1 };
            let vol = ["1063", "77"][dev];
            format!(
                "{},{},8,{ty},{vol}",
                1_538_323_200 + tick / 100,
                offset(i) / 512
            )
        },
        bad_columns: "1538323200,0,8,1",
        bad_op: "1538323200,0,8,2,1063",
        bad_op_says: "IOType \"2\" is neither 0 (read) nor 1 (write)",
    },
    Case {
        format: Format::Spc,
        header: "",
        devices: ["0", "1"],
        row: |i, dev, tick| {
            let op = ["r", "W", "w"][i as usize % 3];
            let us = tick * 40;
            format!(
                "{dev},{},4096,{op},{}.{:06}",
                offset(i) / 512,
                us / 1_000_000,
                us % 1_000_000
            )
        },
        bad_columns: "0,0,4096,W",
        bad_op: "0,0,4096,X,0.5",
        bad_op_says: "opcode \"X\" is neither r/R nor w/W",
    },
    Case {
        format: Format::Fiu,
        header: "",
        devices: ["8:0", "8:16"],
        row: |i, dev, tick| {
            let rw = if i % 3 == 0 { "R" } else { "W" };
            let (pid, name) = [(100, "gzip"), (200, "kjournald"), (300, "mysqld")][i as usize % 3];
            let minor = [0, 16][dev];
            format!(
                "{} {pid} {name} {} 8 {rw} 8 {minor} 56f11b711d91a065a2b6458eca924523",
                89_968_195_792_462 + tick * 40_000,
                offset(i) / 512
            )
        },
        bad_columns: "1 2 p 0 8 R 8 0",
        bad_op: "1 2 p 0 8 X 8 0 ab",
        bad_op_says: "rw \"X\" is neither R nor W",
    },
    Case {
        format: Format::Disksim,
        header: "",
        devices: ["0", "1"],
        row: |i, dev, tick| {
            let flags = ["1", "0", "0x0"][i as usize % 3];
            let us = tick * 40;
            format!(
                "{}.{:03} {dev} {} 8 {flags}",
                us / 1000,
                us % 1000,
                offset(i) / 512
            )
        },
        bad_columns: "1.0 0 0 8",
        bad_op: "1.0 0 0 8 z",
        bad_op_says: "flags \"z\" are not a hex number",
    },
    Case {
        format: Format::DisksimMqsim,
        header: "",
        devices: ["0", "1"],
        row: |i, dev, tick| {
            let ty = if i % 3 == 0 { 1 } else { 0 };
            format!("{} {dev} {} 8 {ty}", tick * 40_000, offset(i) / 512)
        },
        bad_columns: "1 0 0 8",
        bad_op: "1 0 0 8 2",
        bad_op_says: "type \"2\" is neither 0 (write) nor 1 (read)",
    },
    Case {
        format: Format::DisksimSsdsim,
        header: "",
        devices: ["0", "1"],
        row: |i, dev, tick| {
            let ty = if i % 3 == 0 { 1 } else { 0 };
            format!("{} {dev} {} 8 {ty}", tick * 40_000, offset(i) / 512)
        },
        bad_columns: "1 0 0 8 0 9",
        bad_op: "1 0 0 8 R",
        bad_op_says: "type \"R\" is neither 0 (write) nor 1 (read)",
    },
    Case {
        format: Format::Fio,
        header: "fio version 3 iolog\n0 /dev/nvme0n1 add\n0 /dev/nvme1n1 add\n",
        devices: ["/dev/nvme0n1", "/dev/nvme1n1"],
        row: |i, dev, tick| {
            let op = ["read", "write", "write", "trim", "write", "sync"][i as usize % 6];
            let file = ["/dev/nvme0n1", "/dev/nvme1n1"][dev];
            format!("{} {file} {op} {} 4096", tick * 40, offset(i))
        },
        bad_columns: "1 /dev/nvme0n1 read 0",
        bad_op: "1 /dev/nvme0n1 erase 0 4096",
        bad_op_says: "action \"erase\" is not one of",
    },
    Case {
        format: Format::Fio,
        header: "fio version 2 iolog\n/dev/sda add\n/dev/sdb add\n/dev/sda open\n/dev/sdb open\n",
        devices: ["/dev/sda", "/dev/sdb"],
        row: |i, dev, _| {
            let op = ["read", "write", "write", "trim", "write", "datasync"][i as usize % 6];
            let file = ["/dev/sda", "/dev/sdb"][dev];
            let wait = if i % 7 == 6 {
                format!("{file} wait {} 0\n", 100 + i * 3)
            } else {
                String::new()
            };
            format!("{wait}{file} {op} {} 4096", offset(i))
        },
        bad_columns: "/dev/sda read 0",
        bad_op: "/dev/sda erase 0 4096",
        bad_op_says: "action \"erase\" is not one of",
    },
];

/// `rows` rows of `case`, alternating devices, times a little out of order.
fn sample(case: &Case, rows: u64) -> String {
    let mut t = case.header.to_string();
    for i in 0..rows {
        let jitter = if i % 10 == 3 { 25 } else { 0 };
        let tick = 1_000 + i * 10 - jitter;
        writeln!(t, "{}", (case.row)(i, (i % 2) as usize, tick)).unwrap();
    }
    t
}

fn drive() -> flash::AnyDevice {
    Preset::load("840pro")
        .unwrap()
        .with_capacity(1 << 30)
        .build()
        .unwrap()
}

type Outcome = (u64, u64, serde_json::Value);

fn outcome(dev: &flash::AnyDevice, s: trace::ReplaySummary) -> Outcome {
    (
        s.requests,
        s.end_ns,
        serde_json::to_value(dev.stats()).unwrap(),
    )
}

/// Replays the trace parsed whole.
fn whole(text: &str, format: Format, disk: Option<&str>, open: bool) -> Outcome {
    let t = trace::formats::parse_disk("t", text, format, disk).unwrap();
    let mut dev = drive();
    let s = if open {
        trace::replay_open(&mut dev, t.requests.iter().cloned().map(Ok), 0, &mut |_| {}).unwrap()
    } else {
        let streams: Vec<_> = t.by_stream().into_iter().map(|s| s.into_iter()).collect();
        trace::replay_closed(&mut dev, streams, 2, 0, &mut |_| {}).unwrap()
    };
    outcome(&dev, s)
}

/// Replays a trace file streamed.
fn streamed(path: &std::path::Path, format: Format, disk: Option<&str>, open: bool) -> Outcome {
    let file = TraceFile::open(path, format, disk, None).unwrap();
    let mut dev = drive();
    let s = trace::replay_file(&mut dev, &file, open, 2, 0, &mut |_| {}).unwrap();
    assert_eq!(s.requests, file.info().requests);
    outcome(&dev, s)
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

#[test]
fn each_format_streams_as_it_parses_whole_plain_gzip_or_zstd_on_each_device() {
    let dir = tempfile::tempdir().unwrap();
    for case in CASES {
        let name = case.format.name();
        let text = sample(case, 2_000);
        let plain = write(&dir, "t.txt", text.as_bytes());
        let gz = write(&dir, "t.txt.gz", &gzip(text.as_bytes()));
        let zst = write(
            &dir,
            "t.txt.zst",
            &zstd::stream::encode_all(text.as_bytes(), 3).unwrap(),
        );
        for disk in case.devices {
            for open in [true, false] {
                let want = whole(&text, case.format, Some(disk), open);
                assert_eq!(want.0, 1_000, "{name} --disk {disk}: half the rows");
                for path in [&plain, &gz, &zst] {
                    assert_eq!(
                        streamed(path, case.format, Some(disk), open),
                        want,
                        "{name} {} --disk {disk}, open {open}",
                        path.display()
                    );
                }
            }
        }
        // Both devices at once would collide: an error listing them.
        let e = TraceFile::open(&zst, case.format, None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("({}, {})", case.devices[0], case.devices[1]))
                && e.contains("--disk"),
            "{name}: {e}"
        );
    }
}

#[test]
fn auto_detects_each_format_and_refuses_to_guess_a_disksim_variant() {
    let dir = tempfile::tempdir().unwrap();
    for case in CASES {
        let name = case.format.name();
        let text = sample(case, 200);
        let path = write(&dir, "t.gz", &gzip(text.as_bytes()));
        let disk = Some(case.devices[1]);
        match case.format {
            Format::DisksimMqsim | Format::DisksimSsdsim => {
                let e = TraceFile::open(&path, Format::Auto, disk, None)
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains("several trace formats (disksim, disksim-mqsim, disksim-ssdsim)")
                        && e.contains("--format"),
                    "{name}: {e}"
                );
            }
            f => {
                let auto = TraceFile::open(&path, Format::Auto, disk, None).unwrap();
                let named = TraceFile::open(&path, f, disk, None).unwrap();
                assert_eq!(auto.info(), named.info(), "{name}");
                assert_eq!(auto.info().requests, 100, "{name}");
            }
        }
    }
}

#[test]
fn errors_name_the_file_and_line_and_time_going_back_says_to_sort() {
    let dir = tempfile::tempdir().unwrap();
    for case in CASES {
        let name = case.format.name();
        let open = |text: &str| {
            let path = write(&dir, "bad.txt", text.as_bytes());
            let e = TraceFile::open(&path, case.format, Some(case.devices[0]), None)
                .unwrap_err()
                .to_string();
            (path.display().to_string(), e)
        };
        // Two good rows, then the bad one.
        let good = sample(case, 2);
        let line = good.lines().count() + 1;
        let (origin, e) = open(&format!("{good}{}\n", case.bad_columns));
        assert!(
            e.starts_with(&format!("{origin}:{line}: expected")) && e.contains("found"),
            "{name}: {e}"
        );
        let (origin, e) = open(&format!("{good}{}\n", case.bad_op));
        assert!(
            e.starts_with(&format!("{origin}:{line}:")) && e.contains(case.bad_op_says),
            "{name}: {e}"
        );
        // fio's version 2 keeps time by its waits, which never go back.
        if case.header.starts_with("fio version 2") {
            continue;
        }
        // Times falling row after row: past the reorder window, an error at that row.
        let rows = trace::stream::REORDER_WINDOW as u64 + 200;
        let mut text = case.header.to_string();
        for i in 0..rows {
            writeln!(text, "{}", (case.row)(i, 0, 2 * rows - i)).unwrap();
        }
        let (origin, e) = open(&text);
        assert!(
            e.starts_with(&origin) && e.contains("time goes back") && e.contains("sort"),
            "{name}: {e}"
        );
        // Loaded whole, the same file sorts.
        let t = trace::formats::parse_disk("t", &text, case.format, Some(case.devices[0]));
        assert_eq!(t.unwrap().requests.len() as u64, rows, "{name}");
    }
}
