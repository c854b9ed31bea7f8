//! Streaming replay gives exactly the numbers of replaying the trace loaded whole, in every
//! format and both loop modes; an MSR file too far out of order is a clear error.

use flash::{Device, Preset};
use std::fmt::Write as _;
use std::io::Write as _;
use trace::{Format, TraceFile};

/// A small simulated drive, the same for every run.
fn drive() -> flash::AnyDevice {
    Preset::load("840pro")
        .unwrap()
        .with_capacity(1 << 30)
        .build()
        .unwrap()
}

/// Device statistics as JSON (every field compared).
fn stats(d: &flash::AnyDevice) -> serde_json::Value {
    serde_json::to_value(d.stats()).unwrap()
}

/// Replays the trace loaded whole, as `replay` did before it streamed.
fn whole(
    text: &str,
    format: Format,
    disk: Option<&str>,
    open: bool,
) -> (u64, u64, serde_json::Value) {
    let t = trace::formats::parse_disk("t", text, format, disk).unwrap();
    let mut dev = drive();
    let s = if open {
        trace::replay_open(&mut dev, t.requests.iter().cloned().map(Ok), 0, &mut |_| {}).unwrap()
    } else {
        let streams: Vec<_> = t.by_stream().into_iter().map(|s| s.into_iter()).collect();
        trace::replay_closed(&mut dev, streams, 2, 0, &mut |_| {}).unwrap()
    };
    (s.requests, s.end_ns, stats(&dev))
}

/// Replays the trace streamed from a file.
fn streamed(
    text: &str,
    format: Format,
    disk: Option<&str>,
    open: bool,
) -> (u64, u64, serde_json::Value) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    let file = TraceFile::open(f.path(), format, disk, None).unwrap();
    let mut dev = drive();
    let s = trace::replay_file(&mut dev, &file, open, 2, 0, &mut |_| {}).unwrap();
    assert_eq!(s.requests, file.info().requests);
    (s.requests, s.end_ns, stats(&dev))
}

/// Three streams of reads and writes, interleaved unevenly (stream 2 appears late).
fn native(open: bool) -> String {
    let mut t = format!(
        "flashlab-trace v1 {}\n",
        if open { "open" } else { "closed" }
    );
    for i in 0..3_000u64 {
        let stream = if i < 1_000 { i % 2 } else { i % 3 };
        let op = if i % 5 == 0 { "R" } else { "W" };
        let time = if open { i * 7_000 } else { (i % 4) * 3_000 };
        writeln!(
            t,
            "{stream} {op} {} 8192 {time}",
            (i * 7_919 % 4_000) * 8192
        )
        .unwrap();
    }
    t
}

/// MSR rows of two disks, a little out of order.
fn msr() -> String {
    let mut t = String::from("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n");
    for i in 0..2_000u64 {
        let jitter = if i % 10 == 3 { 25 } else { 0 };
        let ticks = 128_166_372_000_000_000 + i * 100 - jitter * 100;
        let disk = i % 2;
        let ty = if i % 3 == 0 { "Read" } else { "Write" };
        writeln!(
            t,
            "{ticks},wdev,{disk},{ty},{},4096,{}",
            (i * 31 % 3_000) * 4096,
            200 + i % 7
        )
        .unwrap();
    }
    t
}

fn blkparse() -> String {
    let mut t = String::new();
    let mut seq = 1;
    for i in 0..500u64 {
        let at = i * 300_000;
        let (pid, rwbs) = if i % 2 == 0 { (100, "W") } else { (200, "R") };
        let sector = (i * 97 % 10_000) * 8;
        writeln!(
            t,
            "  8,0    0 {seq:8} {}.{:09} {pid} D {rwbs} {sector} + 8 [p]",
            at / 1_000_000_000,
            at % 1_000_000_000
        )
        .unwrap();
        seq += 1;
        let done = at + 120_000;
        writeln!(
            t,
            "  8,0    0 {seq:8} {}.{:09} 0 C {rwbs} {sector} + 8 [0]",
            done / 1_000_000_000,
            done % 1_000_000_000
        )
        .unwrap();
        seq += 1;
    }
    t
}

/// Kernel tracefs text: two processes' issues and completions.
fn tracefs() -> String {
    let mut t = String::from("# tracer: nop\n#\n");
    for i in 0..400u64 {
        let at = 100_000_000 + i * 250;
        let (task, rwbs) = if i % 3 == 0 {
            ("dd-4321", "R")
        } else {
            ("cp-77", "WS")
        };
        let sector = (i * 131 % 20_000) * 8;
        writeln!(t, "{task:>16} [001] d..1. {}.{:06}: block_rq_issue: 8,0 {rwbs} 4096 () {sector} + 8 none,0,0 [x]", at / 1_000_000, at % 1_000_000).unwrap();
        let done = at + 90;
        writeln!(t, "          <idle>-0 [001] d.h1. {}.{:06}: block_rq_complete: 8,0 {rwbs} () {sector} + 8 none,0,0 [0]", done / 1_000_000, done % 1_000_000).unwrap();
    }
    t
}

#[test]
fn streaming_replays_exactly_as_the_whole_trace_in_every_format() {
    for open in [true, false] {
        let n = native(open);
        assert_eq!(
            streamed(&n, Format::Native, None, open),
            whole(&n, Format::Native, None, open),
            "native, open {open}"
        );
        let m = msr();
        for disk in ["0", "wdev:1"] {
            assert_eq!(
                streamed(&m, Format::Msr, Some(disk), open),
                whole(&m, Format::Msr, Some(disk), open),
                "msr disk {disk}, open {open}"
            );
        }
        let k = tracefs();
        assert_eq!(
            streamed(&k, Format::Tracefs, None, open),
            whole(&k, Format::Tracefs, None, open),
            "tracefs, open {open}"
        );
        assert!(
            whole(&k, Format::Tracefs, None, open).0 == 400,
            "every issue is a request"
        );
        let b = blkparse();
        assert_eq!(
            streamed(&b, Format::Blkparse, None, open),
            whole(&b, Format::Blkparse, None, open),
            "blkparse, open {open}"
        );
    }
}

#[test]
fn the_first_reading_describes_the_trace_and_a_limit_cuts_it() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(native(false).as_bytes()).unwrap();
    let file = TraceFile::open(f.path(), Format::Auto, None, None).unwrap();
    let info = file.info();
    assert_eq!(info.requests, 3_000);
    assert_eq!(info.streams, vec![0, 1, 2]);
    assert!(!info.timestamped);
    assert_eq!(info.max_end_bytes, 3_999 * 8192 + 8192);
    let cut = TraceFile::open(f.path(), Format::Auto, None, Some(10)).unwrap();
    assert_eq!(cut.info().requests, 10);
    assert_eq!(cut.info().streams, vec![0, 1]);
    assert_eq!(cut.requests().unwrap().count(), 10);
}

#[test]
fn errors_name_the_file_and_line_and_an_msr_file_far_out_of_order_says_to_sort_it() {
    let write = |text: &str| {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    };
    let f = write("flashlab-trace v1 open\n0 W 0 4096 10\n0 W 0 4096 5\n");
    let e = TraceFile::open(f.path(), Format::Native, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains(":3:") && e.contains("must not decrease"), "{e}");
    // Several disks without --disk: named, as when loaded whole.
    let f = write(&msr());
    let e = TraceFile::open(f.path(), Format::Msr, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("2 disks") && e.contains("--disk"), "{e}");
    // Rows in falling time order: beyond the reorder window, an error saying to sort.
    let mut text = String::new();
    let rows = trace::stream::REORDER_WINDOW as u64 + 10;
    for i in 0..rows {
        writeln!(text, "{},h,0,Write,0,4096,1", 1_000_000 + rows - i).unwrap();
    }
    let f = write(&text);
    let e = TraceFile::open(f.path(), Format::Msr, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sort -t, -k1,1n"), "{e}");
    // Loaded whole, the same file sorts.
    assert_eq!(
        trace::formats::parse("t", &text, Format::Msr)
            .unwrap()
            .requests
            .len() as u64,
        rows
    );
    // Not text.
    let f = write("flashlab-trace v1 open\n\u{0}\u{ff}");
    let mut bytes = std::fs::read(f.path()).unwrap();
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    std::fs::write(f.path(), bytes).unwrap();
    let e = TraceFile::open(f.path(), Format::Native, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("UTF-8"), "{e}");
}

#[test]
fn a_device_error_mid_stream_ends_the_replay_with_the_request_named() {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(
        b"flashlab-trace v1 closed\n0 W 0 4096 0\n1 W 0 4096 0\n0 W 1099511627776 4096 0\n",
    )
    .unwrap();
    let file = TraceFile::open(f.path(), Format::Native, None, None).unwrap();
    let mut dev = drive();
    let e = trace::replay_file(&mut dev, &file, false, 1, 0, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("request") && e.contains("1099511627776"), "{e}");
    let _ = dev.logical_bytes();
}

/// Writes `text` to a temporary file.
fn file_of(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn a_request_limit_does_not_merge_devices() {
    // Two Alibaba devices interleaved over more rows than the reorder window holds: a
    // limit stops the reading early, and the devices read so far must still be refused
    // as one address space.
    let mut text = String::from("device_id,opcode,offset,length,timestamp\n");
    for i in 0..100_000u64 {
        let _ = writeln!(
            text,
            "{},W,{},4096,{}",
            3 + 2 * (i % 2),
            (i % 1000) * 4096,
            i
        );
    }
    let f = file_of(&text);
    let e = TraceFile::open(f.path(), Format::Alibaba, None, Some(100))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("2 devices (3, 5)") && e.contains("--disk"),
        "{e}"
    );
    let one = TraceFile::open(f.path(), Format::Alibaba, Some("5"), Some(100)).unwrap();
    assert_eq!((one.info().requests, one.info().streams.len()), (100, 1));
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_header_and_an_empty_trace_is_an_error() {
    let f = file_of("\u{feff}device_id,opcode,offset,length,timestamp\r\n0,R,0,4096,1\r\n");
    let t = TraceFile::open(f.path(), Format::Auto, None, None).unwrap();
    assert_eq!(t.info().requests, 1);
    let f = file_of("device_id,opcode,offset,length,timestamp\n# nothing else\n");
    let e = TraceFile::open(f.path(), Format::Alibaba, None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no requests") && e.contains("replay as nothing"),
        "{e}"
    );
}
