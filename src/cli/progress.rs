//! Progress for people. On a terminal: a bar that names the command and its phase, with
//! done/total, elapsed time and an ETA. Off a terminal (a pipe, a log file, CI): nothing
//! for a command that ends within 5 s, then a line on stderr every 10 s until it ends —
//! the phase, done/total, the elapsed time and an ETA — printed by a ticker thread, so a
//! phase that reports nothing for a while (preconditioning a large drive) still shows.
//!
//! `FLASHLAB_PROGRESS_SECS=FIRST,EVERY` (e.g. `0.2,0.5`) changes the 5 s and 10 s (for
//! tests, and for logs that want more or fewer lines).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Off a terminal: the first line after this long, then one every `EVERY`.
const FIRST: Duration = Duration::from_secs(5);
const EVERY: Duration = Duration::from_secs(10);

/// What the ticker thread prints from.
struct Shared {
    what: String,
    started: Instant,
    done: AtomicU64,
    total: AtomicU64,
    /// The phase, when it began and the count done then (for the phase's ETA).
    phase: Mutex<(String, Instant, u64)>,
    stopped: Mutex<bool>,
    wake: Condvar,
}

pub(crate) struct Progress {
    bar: ProgressBar,
    shared: Arc<Shared>,
    ticker: Option<std::thread::JoinHandle<()>>,
    terminal: bool,
}

/// The ticker's first wait and interval (`FLASHLAB_PROGRESS_SECS`, else 5 s and 10 s).
pub(crate) fn periods() -> (Duration, Duration) {
    let parse = |v: &str| {
        v.trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s > 0.0 && s.is_finite())
    };
    std::env::var("FLASHLAB_PROGRESS_SECS")
        .ok()
        .and_then(|v| {
            let (a, b) = v.split_once(',')?;
            Some((
                Duration::from_secs_f64(parse(a)?),
                Duration::from_secs_f64(parse(b)?),
            ))
        })
        .unwrap_or((FIRST, EVERY))
}

/// `secs` as people read a duration: 42 s, 3 min 20 s, 1 h 05 min.
pub(crate) fn duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

impl Shared {
    /// The progress line: "flashlab sim: measuring: 65536/218454 (30%), 12 s elapsed, ETA 28 s".
    fn line(&self) -> String {
        let (done, total) = (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        );
        let (phase, phase_start, phase_done) = self.phase.lock().expect("not poisoned").clone();
        let elapsed = self.started.elapsed().as_secs_f64();
        let mut out = format!("flashlab {}", self.what);
        if !phase.is_empty() {
            out.push_str(&format!(": {phase}"));
        }
        if total > 0 {
            let pct = 100.0 * done.min(total) as f64 / total as f64;
            out.push_str(&format!(": {done}/{total} ({pct:.0}%)"));
        }
        out.push_str(&format!(", {} elapsed", duration(elapsed)));
        let (in_phase, phase_secs) = (
            done.saturating_sub(phase_done),
            phase_start.elapsed().as_secs_f64(),
        );
        if total > done && in_phase > 0 && phase_secs > 0.0 {
            let eta = phase_secs * (total - done) as f64 / in_phase as f64;
            out.push_str(&format!(", ETA {}", duration(eta)));
        }
        out
    }
}

impl Progress {
    /// Progress of command `what` over `total` steps (0 if not known yet).
    pub(crate) fn new(what: &str, total: u64) -> Progress {
        // A library call (the Python package) shows no progress: its caller has its own.
        let quiet = super::emit::is_capturing();
        let terminal = !quiet && std::io::stderr().is_terminal();
        let shared = Arc::new(Shared {
            what: what.to_string(),
            started: Instant::now(),
            done: AtomicU64::new(0),
            total: AtomicU64::new(total),
            phase: Mutex::new((String::new(), Instant::now(), 0)),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        });
        let bar = if terminal {
            let pb = ProgressBar::new(total);
            pb.set_style(
                ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, ETA {eta})")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            pb.set_message(what.to_string());
            pb
        } else {
            ProgressBar::hidden()
        };
        let ticker = (!terminal && !quiet).then(|| {
            let s = Arc::clone(&shared);
            let (first, every) = periods();
            std::thread::spawn(move || {
                let mut stopped = s.stopped.lock().expect("not poisoned");
                // None: a period too long for the clock, so never.
                let mut due = Instant::now().checked_add(first);
                // The flag is checked before every wait: a stop that came before this
                // thread first waited is not missed.
                while !*stopped {
                    let now = Instant::now();
                    stopped = match due {
                        Some(d) if now >= d => {
                            eprintln!("{}", s.line());
                            due = now.checked_add(every);
                            continue;
                        }
                        Some(d) => {
                            s.wake
                                .wait_timeout(stopped, d - now)
                                .expect("not poisoned")
                                .0
                        }
                        None => s.wake.wait(stopped).expect("not poisoned"),
                    };
                }
            })
        });
        Progress {
            bar,
            shared,
            ticker,
            terminal,
        }
    }

    /// Names what the command does now ("preconditioning", "measuring", ...); the same
    /// phase again changes nothing.
    pub(crate) fn set_phase(&self, phase: &str) {
        let done = self.shared.done.load(Ordering::Relaxed);
        let mut p = self.shared.phase.lock().expect("not poisoned");
        if p.0 == phase {
            return;
        }
        *p = (phase.to_string(), Instant::now(), done);
        if self.terminal {
            self.bar
                .set_message(format!("{}: {phase}", self.shared.what));
        }
    }

    pub(crate) fn set_length(&self, total: u64) {
        self.shared.total.store(total, Ordering::Relaxed);
        self.bar.set_length(total);
    }

    pub(crate) fn set_position(&self, done: u64) {
        self.shared.done.store(done, Ordering::Relaxed);
        self.bar.set_position(done);
    }

    /// Clears the bar (on a terminal) and stops the lines.
    pub(crate) fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
        *self.shared.stopped.lock().expect("not poisoned") = true;
        self.shared.wake.notify_all();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish_and_clear();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_phase_the_count_and_an_eta() {
        let p = Progress::new("sim", 200);
        p.set_phase("measuring");
        p.set_position(50);
        std::thread::sleep(Duration::from_millis(20));
        let line = p.shared.line();
        assert!(
            line.starts_with("flashlab sim: measuring: 50/200 (25%), "),
            "{line}"
        );
        assert!(line.contains(" elapsed, ETA "), "{line}");
        assert_eq!(duration(42.0), "42 s");
        assert_eq!(duration(200.0), "3 min 20 s");
        assert_eq!(duration(3900.0), "1 h 05 min");
    }
}
