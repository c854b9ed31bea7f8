//! Running the real fio on a job file with its null engine, so that fio itself writes each
//! job's I/O log (the offsets, sizes and mix its job describes), and reading those logs
//! back as request streams. Everything fio writes goes into a temporary directory that
//! is removed however the run ends.

use super::jobfile::{fio_job_text, Instance, JobFile};
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use trace::{Request, TraceError};

/// Most bytes of I/O logs fio may write (about 50 million requests): a job larger than
/// that is stopped with an error before it fills the disk.
pub(crate) const MAX_IOLOG_BYTES: u64 = 2 << 30;

/// How to get fio, for the error when it is missing.
pub(crate) const INSTALL_HINT: &str = "install it with `apt-get install fio` (Debian, Ubuntu), \
    `dnf install fio` (Fedora), `brew install fio` (macOS), or build it from \
    https://github.com/axboe/fio; or pass its path with --fio PATH";

/// `fio --version` (e.g. `fio-3.33`), or an error saying how to install fio.
pub(crate) fn version(fio: &Path) -> Result<String> {
    let out = match Command::new(fio).arg("--version").stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "fio is not installed (no `{}` found): flashlab fio runs the real fio, whose null engine writes the I/O the job describes; {INSTALL_HINT}",
            fio.display()
        ),
        Err(e) => bail!("cannot run `{} --version`: {e}", fio.display()),
    };
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || !v.starts_with("fio-") {
        bail!(
            "`{} --version` did not print fio's version (it printed {v:?}): is it fio? {INSTALL_HINT}",
            fio.display()
        );
    }
    Ok(v)
}

/// Runs `fio` on `file`'s jobs in `dir` (a job covers `drive_bytes` unless it gives a
/// size); returns each job's and clone's I/O log, in fio's job order.
pub(crate) fn write_iologs(
    fio: &Path,
    file: &JobFile,
    dir: &Path,
    drive_bytes: u64,
    cancel: &trace::Cancel,
) -> Result<Vec<Instance>> {
    // fio runs in `dir`: a relative path to it (`./fio`) must not be looked up there.
    let fio = if fio.components().count() > 1 {
        std::path::absolute(fio).with_context(|| format!("resolving {}", fio.display()))?
    } else {
        fio.to_path_buf()
    };
    let (text, instances) = fio_job_text(file, dir, drive_bytes);
    let job_path = dir.join("flashlab.fio");
    std::fs::write(&job_path, text).context("writing the job file for fio")?;
    let out_path = dir.join("fio.out");
    let err_path = dir.join("fio.err");
    let mut command = Command::new(&fio);
    // fio dies with flashlab: only flashlab's watch bounds how much it logs, so a fio
    // outliving a killed flashlab would write until the disk is full.
    crate::signals::dies_with_flashlab(&mut command);
    let mut child = command
        .arg(format!("--output={}", out_path.display()))
        .arg(&job_path)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err_path)?)
        .spawn()
        .with_context(|| format!("starting {}", fio.display()))?;
    let _held = trace::leftovers::hold(format!("process {} (fio)", child.id()));
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        let logged: u64 = instances
            .iter()
            .filter_map(|i| std::fs::metadata(&i.iolog).ok())
            .map(|m| m.len())
            .sum();
        let stop = if cancel.is_cancelled() {
            Some("interrupted while fio wrote the I/O logs".to_string())
        } else if logged > MAX_IOLOG_BYTES {
            Some(format!(
                "the jobs' I/O logs passed {} MiB (about {} million requests) and fio was stopped: give the jobs a smaller size, io_size or number_ios (a job without size covers the whole drive; --capacity makes the drive smaller)",
                MAX_IOLOG_BYTES >> 20,
                MAX_IOLOG_BYTES / 40 / 1_000_000
            ))
        } else {
            None
        };
        if let Some(why) = stop {
            let _ = child.kill();
            let _ = child.wait();
            bail!(why);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() {
        let said = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let mut text = said(&err_path);
        text.push_str(&said(&out_path));
        // fio's own complaints start with "fio:"; otherwise its last lines.
        // fio's own complaints start with "fio:" (it may write them both to its output
        // and to stderr: each is said once); otherwise its last lines.
        let mut lines: Vec<&str> = Vec::new();
        for l in text.lines().filter(|l| l.starts_with("fio:")) {
            if !lines.contains(&l) {
                lines.push(l);
            }
        }
        if lines.is_empty() {
            lines = text.lines().filter(|l| !l.trim().is_empty()).collect();
        }
        let said = lines[lines.len().saturating_sub(12)..].join("\n  ");
        bail!(
            "fio failed on the job file ({status}); it said:\n  {said}\n(flashlab ran each job with the null engine at iodepth=1 and a filename of its own: see `flashlab fio --help`)"
        );
    }
    Ok(instances)
}

/// One job's requests from its I/O log, for the closed-loop replay: the null engine's
/// timestamps (its own speed) are dropped, every request belongs to `stream`. The first
/// error reading the log, or an interrupt, ends the stream and is kept in `error`.
pub(crate) struct JobStream {
    requests: trace::stream::Requests,
    stream: u32,
    error: std::rc::Rc<std::cell::RefCell<Option<anyhow::Error>>>,
    cancel: trace::Cancel,
    read: u64,
    done: bool,
}

/// Requests read between checks for an interrupt.
const CANCEL_EVERY: u64 = 4096;

impl JobStream {
    pub(crate) fn open(
        file: &trace::TraceFile,
        stream: u32,
        error: std::rc::Rc<std::cell::RefCell<Option<anyhow::Error>>>,
        cancel: trace::Cancel,
    ) -> Result<JobStream, TraceError> {
        Ok(JobStream {
            requests: file.requests()?,
            stream,
            error,
            cancel,
            read: 0,
            done: false,
        })
    }
}

impl Iterator for JobStream {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.done {
            return None;
        }
        self.read += 1;
        if self.read.is_multiple_of(CANCEL_EVERY) && self.cancel.is_cancelled() {
            self.done = true;
            let mut e = self.error.borrow_mut();
            e.get_or_insert_with(|| anyhow::anyhow!("interrupted during the replay"));
            return None;
        }
        match self.requests.next()? {
            Ok(mut r) => {
                r.stream = self.stream;
                r.at_ns = 0;
                r.think_ns = 0;
                Some(r)
            }
            Err(e) => {
                self.done = true;
                self.error.borrow_mut().get_or_insert(e.into());
                None
            }
        }
    }
}
