//! Drives `flashlab calibrate`: a simulated drive's preset that `sim` then loads, a real
//! file on this machine's disk (a smoke test: skipped where O_DIRECT is unavailable), the
//! probe file removed on success and on an interrupt, and refusals that name the problem.

mod common;

use common::{flashlab, LoopDevice, Scratch};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_simulated_drive_gives_a_preset_that_sim_loads() {
    let d = Scratch::new("calibrate-sim");
    let out = d.0.join("mx500cal.toml");
    let o = flashlab(&[
        "calibrate",
        "--sim-preset",
        "mx500",
        "--capacity",
        "4GiB",
        "--size",
        "1GiB",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    // What was recovered, beside the truth.
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| {
                // The fitted table's row: the name, recovered, true, basis.
                let t: Vec<&str> = l.split_whitespace().collect();
                t.len() == 4 && t[0] == name
            })
            .unwrap_or_else(|| panic!("no {name} row in {stdout}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // The MX500's SLC writes run within 10% of its link's rate, so its dies come from the
    // QD32 reads, tied to a bus per die.
    assert_eq!(row("dies")[1..], ["8", "8", "tied"]);
    assert_eq!(row("superpage_bytes")[1..], ["32768", "32768", "measured"]);
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(toml.contains("name = \"mx500cal\""), "{toml}");
    assert!(toml.contains("[ssd.slc_cache]"), "{toml}");
    assert!(
        toml.contains("probe: sequential 1 MiB writes at QD8 over the region"),
        "{toml}"
    );
    // `sim` loads it as any preset file.
    let o = flashlab(&[
        "sim",
        "--preset",
        out.to_str().unwrap(),
        "--capacity",
        "512MiB",
        "--workload",
        "uniform",
        "--writes",
        "0.2x",
        "--warmup",
        "0.2x",
        "--json",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    let j: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(j["preset"], "mx500cal");
    assert!(j["simulated_ns"].as_u64().unwrap() > 0);
}

#[test]
fn a_real_file_is_probed_and_removed() {
    let d = Scratch::new("calibrate-file");
    let probe = d.0.join("probe.bin");
    let out = d.0.join("here.toml");
    let o = flashlab(&[
        "calibrate",
        "--file",
        probe.to_str().unwrap(),
        "--size",
        "64MiB",
        "--out",
        out.to_str().unwrap(),
        "--name",
        "thisdisk",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(!probe.exists(), "the probe file is removed");
    if stderr.contains("O_DIRECT is not available") || stderr.contains("in memory") {
        eprintln!(
            "SKIPPED: {} is not on a drive with O_DIRECT ({stderr})",
            d.0.display()
        );
        return;
    }
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("file on "), "{stdout}");
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(toml.contains("name = \"thisdisk\""));
    // Every value names its basis.
    for l in toml.lines() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with('[') {
            continue;
        }
        assert!(
            l.contains("  # measured by calibrate ")
                || l.contains("  # assumed (not identifiable by calibrate)")
                || l.starts_with("name =")
                || l.starts_with("description ="),
            "{l}"
        );
    }
    // And the preset is a preset.
    let o = flashlab(&[
        "sim",
        "--preset",
        out.to_str().unwrap(),
        "--capacity",
        "16GiB",
        "--workload",
        "uniform",
        "--writes",
        "0.01x",
        "--warmup",
        "0x",
        "--timing",
        "off",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
}

#[test]
fn an_interrupted_probe_removes_its_file() {
    let d = Scratch::new("calibrate-interrupt");
    let probe = d.0.join("probe.bin");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flashlab"))
        .args([
            "calibrate",
            "--file",
            probe.to_str().unwrap(),
            "--size",
            "64MiB",
            "--out",
            d.0.join("x.toml").to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !probe.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            // Finished or failed before the file showed up (no O_DIRECT): nothing to stop.
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(
                err.contains("O_DIRECT is not available")
                    || err.contains("in memory")
                    || status.success(),
                "{err}"
            );
            eprintln!("SKIPPED: the probe ended before it could be interrupted ({err})");
            return;
        }
        assert!(Instant::now() < deadline, "the probe file never appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(!probe.exists(), "the interrupted probe left its file");
    assert!(
        !d.0.join("x.toml").exists(),
        "no preset from an interrupted probe"
    );
    assert!(!status.success());
}

#[test]
fn refusals_name_what_was_wrong() {
    let d = Scratch::new("calibrate-refuse");
    let existing = d.0.join("precious.dat");
    std::fs::write(&existing, b"keep me").unwrap();
    let out = d.0.join("p.toml");
    let fails = |args: &[&str], says: &str| {
        let o = flashlab(args);
        let (_, err) = text(&o);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    let (e, o) = (existing.to_str().unwrap(), out.to_str().unwrap());
    fails(
        &["calibrate", "--file", e, "--size", "64MiB", "--out", o],
        "exists: flashlab uses a new file only",
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    fails(
        &["calibrate", "--device", e, "--size", "64MiB", "--out", o],
        "--i-understand-this-erases",
    );
    fails(
        &[
            "calibrate",
            "--device",
            e,
            "--i-understand-this-erases",
            "--size",
            "64MiB",
            "--out",
            o,
        ],
        "is not a block device",
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
    let new = d.0.join("new.bin");
    let n = new.to_str().unwrap();
    fails(
        &["calibrate", "--file", n, "--size", "1MiB", "--out", o],
        "at least 64MiB",
    );
    fails(
        &[
            "calibrate",
            "--file",
            n,
            "--size",
            "64MiB",
            "--out",
            "p.txt",
        ],
        "ends in .toml",
    );
    fails(&["calibrate", "--file", n, "--out", o], "needs --size");
    let nowhere = d.0.join("no-such-dir").join("p.toml");
    fails(
        &[
            "calibrate",
            "--file",
            n,
            "--size",
            "64MiB",
            "--out",
            nowhere.to_str().unwrap(),
        ],
        "not a file in an existing directory",
    );
    fails(&["calibrate", "--size", "64MiB"], "required");
    assert!(!new.exists());
}

#[test]
fn a_device_anything_else_uses_is_not_erased() {
    let d = Scratch::new("calibrate-in-use");
    let backing = d.0.join("lower.img");
    let pattern = vec![0x5Au8; 80 << 20];
    std::fs::write(&backing, &pattern).unwrap();
    let Some(lower) = LoopDevice::new(&backing) else {
        eprintln!(
            "a_device_anything_else_uses_is_not_erased: SKIPPED: needs root and loop devices"
        );
        return;
    };
    let out = d.0.join("p.toml");
    let erase = |dev: &str| {
        flashlab(&[
            "calibrate",
            "--device",
            dev,
            "--i-understand-this-erases",
            "--size",
            "64MiB",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let untouched = || {
        let now = std::fs::read(&lower.dev).unwrap();
        assert!(now == pattern, "{} was written", lower.dev);
        assert!(!out.exists());
    };
    // A loop device stacked on it (sysfs lists no holder for that), attached through the
    // device's own node and through a node since deleted (its backing path then names
    // nothing).
    let alias = d.0.join("alias");
    let rdev = std::os::unix::fs::MetadataExt::rdev(&std::fs::metadata(&lower.dev).unwrap());
    let c = std::ffi::CString::new(alias.to_str().unwrap()).unwrap();
    // SAFETY: mknod reads a NUL-terminated path.
    assert_eq!(
        unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, rdev) },
        0
    );
    for via in [std::path::PathBuf::from(&lower.dev), alias.clone()] {
        let upper = LoopDevice::new(&via).unwrap();
        if via == alias {
            std::fs::remove_file(&alias).unwrap();
        }
        let o = erase(&lower.dev);
        let (_, err) = text(&o);
        assert!(!o.status.success());
        assert!(
            err.contains(&format!(
                "refusing to erase {}: it is used by {} (a loop device over it)",
                lower.dev, upper.dev
            )),
            "via {}: {err}",
            via.display()
        );
        untouched();
    }
    // A process holding it open.
    let f = std::fs::File::open(&lower.dev).unwrap();
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .stdin(f)
        .spawn()
        .unwrap();
    let o = erase(&lower.dev);
    let (_, err) = text(&o);
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(!o.status.success());
    assert!(
        err.contains(&format!("is open in process {} (sleep, fd 0)", holder.id())),
        "{err}"
    );
    untouched();
}

#[test]
fn out_is_a_regular_file_written_whole_never_through_a_link() {
    let d = Scratch::new("calibrate-out");
    let run = |out: &std::path::Path, extra: &[&str]| {
        let mut args = vec![
            "calibrate",
            "--sim-preset",
            "mx500",
            "--capacity",
            "1GiB",
            "--size",
            "64MiB",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = flashlab(&args);
        (o.status.success(), text(&o).1)
    };
    // A symlink to a file (or a device): refused, the target untouched.
    let target = d.0.join("target.dat");
    std::fs::write(&target, b"keep me").unwrap();
    let link = d.0.join("link.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let devlink = d.0.join("dev.toml");
    std::os::unix::fs::symlink("/dev/null", &devlink).unwrap();
    for (path, extra) in [
        (&link, &[][..]),
        (&link, &["--replace"][..]),
        (&devlink, &["--replace"][..]),
    ] {
        let (ok, err) = run(path, extra);
        assert!(!ok && err.contains("a symlink"), "{err}");
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    // A FIFO: refused before the probe (it used to hang on the open).
    let fifo = d.0.join("f.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (ok, err) = run(&fifo, &[]);
    assert!(!ok && err.contains("not a regular file"), "{err}");
    // An existing file: kept unless --replace.
    let out = d.0.join("p.toml");
    std::fs::write(&out, b"mine").unwrap();
    let (ok, err) = run(&out, &[]);
    assert!(!ok && err.contains("exists; pass --replace"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"mine");
    let (ok, err) = run(&out, &["--replace"]);
    assert!(ok, "{err}");
    assert!(std::fs::read_to_string(&out).unwrap().contains("[ssd"));
    let temps: Vec<_> = std::fs::read_dir(&d.0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".flashlab-"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

#[test]
fn calibrate_refuses_a_simulated_hard_disk_by_name() {
    common::assert_refused(&["calibrate", "--sim-preset", "hdd7200"], "is a hard disk");
}
