//! The process's one signal handler. SIGINT, SIGTERM and SIGHUP cancel the token every
//! command hands its libraries ([`trace::Cancel`]): a capture stops its command and tears
//! down its loop device, a join removes its spill files, a tree run its files, each as it
//! returns. A second signal exits at once (code 130), for code that is stuck.

use std::sync::OnceLock;
use trace::Cancel;

/// The exit code of a run the user interrupted (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

fn token() -> &'static Cancel {
    static TOKEN: OnceLock<Cancel> = OnceLock::new();
    TOKEN.get_or_init(Cancel::new)
}

/// Installs the handler (once, first thing in `main`, for commands whose code checks the
/// token).
pub fn install() {
    let cancel = token().clone();
    let result = ctrlc::set_handler(move || {
        if cancel.is_cancelled() {
            eprintln!("flashlab: interrupted again; exiting now");
            std::process::exit(EXIT_INTERRUPTED);
        }
        eprintln!("flashlab: interrupting: cleaning up (interrupt again to exit at once)");
        cancel.cancel();
    });
    if let Err(e) = result {
        eprintln!(
            "flashlab: warning: cannot handle interrupts ({e}); Ctrl-C may leave files behind"
        );
    }
}

/// The token the handler cancels.
pub fn cancel_token() -> Cancel {
    token().clone()
}
