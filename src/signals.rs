//! The process's one signal handler. SIGINT, SIGTERM and SIGHUP cancel the token every
//! command hands its libraries ([`trace::Cancel`]): a capture stops its command and tears
//! down its loop device, a join removes its spill files, a tree run its files, each as it
//! returns.
//!
//! A signal that comes again within [`REPEAT_WINDOW`] of the first is the same request
//! (GNU `timeout` signals the child and then its whole group; a terminal's Ctrl-C may reach
//! every process of the group) and is ignored, so cleanup goes on. One that comes later is
//! the user insisting: flashlab exits at once (code 130), after printing exactly what it
//! leaves behind ([`trace::leftovers`]).

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use trace::Cancel;

/// The exit code of a run the user interrupted (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

/// A signal this soon after the first is taken as a repeat of it, not as "exit now".
pub const REPEAT_WINDOW: Duration = Duration::from_secs(2);

fn token() -> &'static Cancel {
    static TOKEN: OnceLock<Cancel> = OnceLock::new();
    TOKEN.get_or_init(Cancel::new)
}

/// What to do with a signal, given when the first one came (None: this is the first).
#[derive(Debug, PartialEq, Eq)]
enum Action {
    CleanUp,
    Ignore,
    ExitNow,
}

fn action(first: Option<Instant>, now: Instant) -> Action {
    match first {
        None => Action::CleanUp,
        Some(t) if now.duration_since(t) < REPEAT_WINDOW => Action::Ignore,
        Some(_) => Action::ExitNow,
    }
}

/// Installs the handler (once, first thing in `main`, for commands whose code checks the
/// token).
pub fn install() {
    let cancel = token().clone();
    let first: Mutex<Option<Instant>> = Mutex::new(None);
    let result = ctrlc::set_handler(move || {
        let now = Instant::now();
        let mut first = first.lock().unwrap_or_else(|e| e.into_inner());
        match action(*first, now) {
            Action::CleanUp => {
                *first = Some(now);
                eprintln!(
                    "flashlab: interrupting: cleaning up (interrupt again, after {} s, to exit at once)",
                    REPEAT_WINDOW.as_secs()
                );
                cancel.cancel();
            }
            Action::Ignore => {}
            Action::ExitNow => {
                let left = trace::leftovers::list();
                if left.is_empty() {
                    eprintln!("flashlab: interrupted again; exiting now (nothing is left behind)");
                } else {
                    eprintln!(
                        "flashlab: interrupted again; exiting now, leaving behind:\n  {}",
                        left.join("\n  ")
                    );
                }
                std::process::exit(EXIT_INTERRUPTED);
            }
        }
    });
    if let Err(e) = result {
        eprintln!(
            "flashlab: warning: cannot handle interrupts ({e}); Ctrl-C may leave files behind"
        );
    }
}

/// The token a command checks: its thread's own where it has one (a library call's,
/// [`trace::cancel::with_token`]), otherwise the one the handler cancels.
pub fn cancel_token() -> Cancel {
    trace::cancel::current().unwrap_or_else(|| token().clone())
}

/// Makes the child `command` starts die with flashlab (SIGKILL when flashlab's process
/// ends, however it ends, or the thread that spawned it does: spawn it from the thread
/// that waits for it): a fio left behind would go on writing.
pub fn dies_with_flashlab(command: &mut std::process::Command) {
    pgserver::dies_with_parent(command);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_within_the_window_is_ignored_and_a_later_one_exits() {
        let t0 = Instant::now();
        assert_eq!(action(None, t0), Action::CleanUp);
        assert_eq!(
            action(Some(t0), t0 + Duration::from_millis(5)),
            Action::Ignore
        );
        assert_eq!(action(Some(t0), t0 + REPEAT_WINDOW), Action::ExitNow);
    }
}
