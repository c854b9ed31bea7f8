//! Drives `flashlab fio` with the example job files: fio's JSON shape and sane numbers,
//! determinism, the text report, and clear errors (an unsupported option, fio missing, a
//! job fio refuses, a job larger than the drive). The tests that run fio skip, and say so,
//! where fio is not installed.

mod common;

use common::{flashlab, stdout_json, LoopDevice, Scratch};
use serde_json::Value;
use std::process::Command;

const DRIVE: &[&str] = &["--preset", "mx500", "--capacity", "1GiB"];

fn fio_installed(test: &str) -> bool {
    let ok = Command::new("fio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("{test}: SKIPPED: fio is not installed (apt-get install fio)");
    }
    ok
}

fn fio_json(job: &str, extra: &[&str]) -> Value {
    let mut args = vec!["fio", job];
    args.extend_from_slice(DRIVE);
    args.extend_from_slice(extra);
    args.push("--output-format=json");
    stdout_json(&flashlab(&args))
}

fn stderr(args: &[&str]) -> String {
    let o = flashlab(args);
    assert!(!o.status.success(), "expected {args:?} to fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Checks one direction's object has fio's fields and consistent values.
fn check_direction(job: &Value, dir: &str) {
    let d = &job[dir];
    for key in [
        "io_bytes",
        "io_kbytes",
        "bw_bytes",
        "bw",
        "iops",
        "runtime",
        "total_ios",
        "slat_ns",
        "clat_ns",
        "lat_ns",
    ] {
        assert!(d.get(key).is_some(), "{dir}.{key} missing in {job}");
    }
    let n = d["total_ios"].as_u64().unwrap();
    assert_eq!(d["clat_ns"]["N"], n);
    assert_eq!(d["io_kbytes"], d["io_bytes"].as_u64().unwrap() / 1024);
    if n == 0 {
        assert_eq!(d["iops"], 0.0);
        assert!(d["clat_ns"].get("percentile").is_none());
        return;
    }
    assert!(d["iops"].as_f64().unwrap() > 0.0 && d["runtime"].as_u64().unwrap() > 0);
    assert_eq!(d["bw"], d["bw_bytes"].as_u64().unwrap() / 1024);
    let p = d["clat_ns"]["percentile"].as_object().unwrap();
    assert_eq!(p.len(), 17, "fio's default percentile list");
    let mut last = d["clat_ns"]["min"].as_u64().unwrap();
    for key in [
        "1.000000",
        "5.000000",
        "10.000000",
        "20.000000",
        "30.000000",
        "40.000000",
        "50.000000",
        "60.000000",
        "70.000000",
        "80.000000",
        "90.000000",
        "95.000000",
        "99.000000",
        "99.500000",
        "99.900000",
        "99.950000",
        "99.990000",
    ] {
        let v = p[key].as_u64().unwrap();
        assert!(
            v >= last,
            "{dir} percentile {key} = {v} below the one before ({last})"
        );
        last = v;
    }
    assert!(last <= d["clat_ns"]["max"].as_u64().unwrap());
}

fn share(job: &Value, dir: &str) -> f64 {
    let r = job["read"]["total_ios"].as_f64().unwrap();
    let w = job["write"]["total_ios"].as_f64().unwrap();
    job[dir]["total_ios"].as_f64().unwrap() / (r + w)
}

#[test]
fn the_three_example_jobs_give_fios_json_with_sane_numbers() {
    if !fio_installed("the_three_example_jobs_give_fios_json_with_sane_numbers") {
        return;
    }
    let w = fio_json("examples/fio/randwrite-qd32.fio", &[]);
    assert!(w["fio version"].as_str().unwrap().starts_with("fio-"));
    let jobs = w["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job["jobname"], "randwrite");
    for dir in ["read", "write", "trim"] {
        check_direction(job, dir);
    }
    assert!(job["write"]["iops"].as_f64().unwrap() > 0.0);
    assert_eq!(job["write"]["total_ios"], 65_536, "256 MiB in 4 KiB writes");
    assert_eq!(job["write"]["io_bytes"], 256u64 << 20);
    assert_eq!(job["read"]["total_ios"], 0);
    assert_eq!(job["trim"]["total_ios"], 0);
    assert_eq!(job["job options"]["iodepth"], "32");
    assert_eq!(w["global options"]["bs"], "4k");

    let m = fio_json("examples/fio/mixed-70-30-zipf.fio", &[]);
    let jobs = m["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "numjobs=2: two jobs, as fio reports them");
    for job in jobs {
        assert_eq!(job["jobname"], "mixed");
        check_direction(job, "read");
        check_direction(job, "write");
        let r = share(job, "read");
        assert!(
            (0.67..=0.73).contains(&r),
            "read share {r} is not about 70%"
        );
        let total = job["read"]["total_ios"].as_u64().unwrap()
            + job["write"]["total_ios"].as_u64().unwrap();
        assert_eq!(total, 32_768, "128 MiB in 4 KiB requests per job");
    }
    assert_ne!(
        jobs[0]["read"]["io_bytes"], jobs[1]["read"]["io_bytes"],
        "each clone has its own random sequence, as in fio"
    );

    // On a filled drive (a fresh one reads its unwritten blocks without touching flash),
    // random 4 KiB reads at queue depth 1 are far slower than the sequential 128 KiB ones.
    let filled = ["--precondition", "fill"];
    let s = fio_json("examples/fio/seqread-128k.fio", &filled);
    let job = &s["jobs"][0];
    check_direction(job, "read");
    assert_eq!(job["read"]["total_ios"], 2048, "256 MiB in 128 KiB reads");
    assert_eq!(job["write"]["total_ios"], 0);
    assert_eq!(s["flashlab"]["precondition"]["mode"], "fill");
    let dir = Scratch::new("fio-randread");
    let path = dir.0.join("randread.fio");
    std::fs::write(
        &path,
        "[r]\nrw=randread\nbs=4k\nsize=256m\nnumber_ios=4000\n",
    )
    .unwrap();
    let r = fio_json(path.to_str().unwrap(), &filled);
    let seq_bw = job["read"]["bw_bytes"].as_u64().unwrap();
    let rand_bw = r["jobs"][0]["read"]["bw_bytes"].as_u64().unwrap();
    assert_eq!(
        r["jobs"][0]["read"]["total_ios"], 4000,
        "number_ios honoured"
    );
    assert!(
        seq_bw > 4 * rand_bw,
        "sequential 128 KiB QD4 {seq_bw} B/s vs random 4 KiB QD1 {rand_bw} B/s"
    );
}

#[test]
fn runs_are_deterministic_and_leave_no_files() {
    if !fio_installed("runs_are_deterministic_and_leave_no_files") {
        return;
    }
    let tmp = Scratch::new("fio-tmp");
    let run = || {
        let mut args = vec!["fio", "examples/fio/mixed-70-30-zipf.fio"];
        args.extend_from_slice(DRIVE);
        args.push("--output-format=json");
        let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(&args)
            .env("TMPDIR", &tmp.0)
            .output()
            .unwrap();
        stdout_json(&o)
    };
    let (a, b) = (run(), run());
    assert_eq!(a, b, "the same job file gives the same numbers");
    let left: Vec<_> = std::fs::read_dir(&tmp.0).unwrap().collect();
    assert!(left.is_empty(), "fio's files were left behind: {left:?}");
}

#[test]
fn the_text_report_reads_like_fios() {
    if !fio_installed("the_text_report_reads_like_fios") {
        return;
    }
    let mut args = vec!["fio", "examples/fio/seqread-128k.fio"];
    args.extend_from_slice(DRIVE);
    let o = flashlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8(o.stdout).unwrap();
    for part in [
        "no host software stack",
        "seqread: (groupid=0, jobs=1): err= 0: iodepth=4\n",
        "  read: IOPS=",
        "(256MiB/",
        "    clat (usec): min=",
        "     lat (usec): min=",
        "    clat percentiles (usec):\n     |  1.00th=[",
        "99.99th=[",
        "Run status group 0 (all jobs):\n   READ: bw=",
    ] {
        assert!(t.contains(part), "{part:?} missing in\n{t}");
    }
    assert!(!t.contains("write:"));
}

#[test]
fn an_unsupported_option_is_an_error_naming_it() {
    // Checked before fio runs: no fio needed.
    let dir = Scratch::new("fio-unsupported");
    let path = dir.0.join("verify.fio");
    std::fs::write(
        &path,
        "[global]\nbs=4k\n[w]\nrw=write\nsize=1m\nverify=crc32c\n",
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let e = stderr(&["fio", p, "--preset", "mx500"]);
    assert!(
        e.contains("verify.fio:6: option `verify` is not supported by flashlab fio"),
        "{e}"
    );
    std::fs::write(&path, "[w]\nrw=write\nsize=1m\nruntime=10\ntime_based\n").unwrap();
    let e = stderr(&["fio", p, "--preset", "mx500"]);
    assert!(
        e.contains("option `runtime`") && e.contains("number_ios"),
        "{e}"
    );
}

#[test]
fn a_missing_fio_says_how_to_get_it() {
    let e = stderr(&[
        "fio",
        "examples/fio/seqread-128k.fio",
        "--preset",
        "mx500",
        "--fio",
        "/nonexistent/fio",
    ]);
    assert!(
        e.contains("fio is not installed") && e.contains("apt-get install fio"),
        "{e}"
    );
}

#[test]
fn jobs_fio_refuses_or_the_drive_cannot_hold_are_clear_errors() {
    if !fio_installed("jobs_fio_refuses_or_the_drive_cannot_hold_are_clear_errors") {
        return;
    }
    let dir = Scratch::new("fio-refused");
    let path = dir.0.join("j.fio");
    let p = path.to_str().unwrap();
    std::fs::write(&path, "[w]\nrw=sideways\nsize=1m\n").unwrap();
    let e = stderr(&["fio", p, "--preset", "mx500", "--capacity", "1GiB"]);
    assert!(
        e.contains("j.fio:2: rw=sideways: expected one of read, write"),
        "flashlab checks the pattern before fio runs: {e}"
    );
    std::fs::write(
        &path,
        "[w]\nrw=randwrite\nsize=1m\nrandom_distribution=zipf:1.0\n",
    )
    .unwrap();
    let e = stderr(&["fio", p, "--preset", "mx500", "--capacity", "1GiB"]);
    assert!(
        e.contains("fio failed on the job file") && e.contains("zipf theta"),
        "{e}"
    );
    std::fs::write(&path, "[w]\nrw=write\nbs=1m\nsize=2g\n").unwrap();
    let e = stderr(&["fio", p, "--preset", "mx500", "--capacity", "1GiB"]);
    assert!(
        e.contains("job w reaches byte 2147483648") && e.contains("--capacity"),
        "{e}"
    );
}

#[test]
fn trims_syncs_and_group_reporting_reach_the_report() {
    if !fio_installed("trims_syncs_and_group_reporting_reach_the_report") {
        return;
    }
    let dir = Scratch::new("fio-trim");
    let path = dir.0.join("j.fio");
    std::fs::write(
        &path,
        "[t]\nrw=randtrim\nbs=64k\nsize=16m\n\
         [f]\nrw=randwrite\nbs=4k\nsize=1m\nfsync=4\niodepth=4\n\
         [tw]\nrw=trimwrite\nbs=128k\noffset=32m\nsize=1m\n",
    )
    .unwrap();
    let v = fio_json(path.to_str().unwrap(), &[]);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs[0]["trim"]["total_ios"], 256, "16 MiB in 64 KiB trims");
    check_direction(&jobs[0], "trim");
    let syncs = jobs[1]["sync"]["total_ios"].as_u64().unwrap();
    // fio syncs after every 4th write but the last (the job has ended).
    assert_eq!(syncs, 63, "fsync=4 over 256 writes");
    assert_eq!(jobs[1]["sync"]["lat_ns"]["N"], syncs);
    assert_eq!(
        jobs[2]["trim"]["total_ios"], 8,
        "trimwrite trims each block"
    );
    assert_eq!(jobs[2]["write"]["total_ios"], 8, "then writes it");
    let drive = &v["flashlab"]["drive"];
    assert_eq!(drive["trim_commands"], 264);
    assert_eq!(drive["flush_latency_ns"]["count"], syncs);

    std::fs::write(
        &path,
        "[g]\nrw=randwrite\nbs=4k\nsize=1m\nnumjobs=3\ngroup_reporting\n",
    )
    .unwrap();
    let v = fio_json(path.to_str().unwrap(), &[]);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "group_reporting: one entry for all jobs");
    assert_eq!(jobs[0]["write"]["total_ios"], 768);
}

#[test]
fn wear_prints_the_drives_wear_report_after_fios() {
    if !fio_installed("wear_prints_the_drives_wear_report_after_fios") {
        return;
    }
    let v = fio_json("examples/fio/randwrite-qd32.fio", &["--wear"]);
    let w = &v["flashlab"]["wear"];
    assert_eq!(w["rated_pe_cycles"].as_u64(), Some(1500));
    assert!(w["host_write_bytes"].as_u64().unwrap() > 0, "{w}");
    // Without --wear the JSON is as it was; with it, the text report ends with the lines
    // `sim --wear` prints.
    assert!(fio_json("examples/fio/randwrite-qd32.fio", &[])["flashlab"]
        .get("wear")
        .is_none());
    let mut args = vec!["fio", "examples/fio/randwrite-qd32.fio", "--wear"];
    args.extend_from_slice(DRIVE);
    let o = flashlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(
        t.contains("life used") && t.contains("projected TBW"),
        "{t}"
    );
}

#[test]
fn values_padded_past_fios_line_buffer_never_reach_fio() {
    if !fio_installed("values_padded_past_fios_line_buffer_never_reach_fio") {
        return;
    }
    let dir = Scratch::new("fio-inject");
    let tmp = dir.0.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let marker = dir.0.join("PWNED");
    let bw_log = dir.0.join("bw");
    // A file and (as root) a loop device fio's psync engine would overwrite.
    let pattern = vec![0xA5u8; 4 << 20];
    let target = dir.0.join("target.img");
    std::fs::write(&target, &pattern).unwrap();
    let backing = dir.0.join("loop.img");
    std::fs::write(&backing, &pattern).unwrap();
    let lo = LoopDevice::new(&backing);
    if lo.is_none() {
        eprintln!("values_padded_past_fios_line_buffer_never_reach_fio: the loop-device part SKIPPED: needs root and loop devices");
    }
    let mut targets = vec![target.display().to_string()];
    targets.extend(lo.as_ref().map(|l| l.dev.clone()));

    let pad = " ".repeat(10_000);
    let mut payloads = vec![
        format!(
            "[a]\nsize=1m\nbs=4k\nrw=write{pad}exec_prerun=touch {}\n",
            marker.display()
        ),
        format!(
            "[a]\nsize=1m\nbs=4k\nrw=write{pad}write_bw_log={}\n",
            bw_log.display()
        ),
    ];
    for t in &targets {
        payloads.push(format!(
            "[a]\nsize=1m\nbs=4k\nrw=write{pad}[evil]\nioengine=psync\nfilename={t}\nrw=write\nsize=1m\n"
        ));
        payloads.push(format!(
            "[a]\nsize=1m\nrw=write\nfilename=x{pad}[evil]\n[b]\nioengine=psync\nfilename={t}\nsize=1m\n"
        ));
    }
    for (i, payload) in payloads.iter().enumerate() {
        let job = dir.0.join(format!("inject{i}.fio"));
        std::fs::write(&job, payload).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_flashlab"))
            .args(["fio", job.to_str().unwrap()])
            .args(DRIVE)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "payload {i} was run: {e}");
        assert!(
            e.contains(&format!("inject{i}.fio:4:")) && e.contains("a value of"),
            "payload {i}: the error names the line and the value's length: {e}"
        );
        assert!(!marker.exists(), "payload {i} ran a command");
        assert!(!bw_log.exists(), "payload {i} wrote a log outside");
        assert!(
            std::fs::read(&target).unwrap() == pattern,
            "payload {i} wrote the file"
        );
        if let Some(l) = &lo {
            let now = std::fs::read(&l.dev).unwrap();
            assert!(
                now[..pattern.len()] == pattern[..],
                "payload {i} wrote {}",
                l.dev
            );
        }
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "payload {i} left {left:?}");
    }
}

#[test]
fn a_signal_repeated_at_once_still_removes_fios_directory() {
    if !fio_installed("a_signal_repeated_at_once_still_removes_fios_directory") {
        return;
    }
    let dir = Scratch::new("fio-signal");
    let tmp = dir.0.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A killed run's directory (its pid is past the kernel's limit, never alive) is
    // removed by the next run.
    std::fs::create_dir(tmp.join("flashlab-fio-4194399-abc")).unwrap();
    let job = dir.0.join("big.fio");
    std::fs::write(&job, "[w]\nrw=randwrite\nbs=4k\nsize=1g\n").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["fio", job.to_str().unwrap()])
        .args(DRIVE)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once fio's directory exists: the signal to the process, and at once again (as GNU
    // timeout sends it to the process group too).
    while std::fs::read_dir(&tmp).unwrap().count() != 1
        || tmp.join("flashlab-fio-4194399-abc").exists()
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for _ in 0..2 {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{e}");
    assert!(!e.contains("exiting now"), "{e}");
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn fio_dies_with_a_killed_flashlab() {
    if !fio_installed("fio_dies_with_a_killed_flashlab") {
        return;
    }
    let dir = Scratch::new("fio-orphan");
    let job = dir.0.join("endless.fio");
    std::fs::write(
        &job,
        "[a]\nrw=randwrite\nbs=512\nsize=1g\nloops=100000000\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args(["fio", job.to_str().unwrap()])
        .args(DRIVE)
        .env("TMPDIR", &dir.0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // fio's pid, once flashlab has started it.
    let children = format!("/proc/{}/task/{}/children", child.id(), child.id());
    let fio = loop {
        let c = std::fs::read_to_string(&children).unwrap_or_default();
        // The fio that runs the jobs (not `fio --version`, run first).
        let running = c.split_whitespace().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains("flashlab.fio"))
        });
        if let Some(p) = running {
            break p.to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // The kernel kills it with its parent (PR_SET_PDEATHSIG); give it a moment to go.
    let gone = (0..500).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{fio}/stat")).unwrap_or_default();
        let dead = state.is_empty() || state.contains(") Z ");
        if !dead {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        dead
    });
    assert!(gone, "fio {fio} outlived the flashlab that started it");
}
