//! A cancellation token. The binary owns signal handling: when the user interrupts
//! (SIGINT, SIGTERM or SIGHUP) it sets the token, and library code that runs for long or
//! holds resources (a capture's loop device and mount, a join's spill files, a tree's
//! files) checks it, stops, and cleans up as it returns. Libraries never install signal
//! handlers themselves: a process has one, and a second would silently replace the first.

//!
//! A thread may also carry a token of its own ([`with_token`]): the long loops that take no
//! token as an argument (a replay's, a simulation's fill and preconditioning) check it
//! with [`requested`] and stop with an error. A library caller (the Python package) runs
//! each call on its own thread under its own token, so cancelling one call stops that call
//! only.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static CURRENT: RefCell<Option<Cancel>> = const { RefCell::new(None) };
}

/// Runs `f` with `token` as this thread's token (the one before it put back after).
pub fn with_token<T>(token: &Cancel, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Cancel>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let before = CURRENT.with(|c| c.borrow_mut().replace(token.clone()));
    let _restore = Restore(before);
    f()
}

/// Runs `f` carrying `token` where there is one: how a thread hands the workers it spawns
/// its own token (taken with [`current`] before spawning), so their long loops stop too.
pub fn with_current<T>(token: Option<&Cancel>, f: impl FnOnce() -> T) -> T {
    match token {
        Some(t) => with_token(t, f),
        None => f(),
    }
}

/// This thread's token, if it carries one.
pub fn current() -> Option<Cancel> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Whether this thread's token (if it carries one) has been cancelled: long loops check
/// it now and then and stop.
pub fn requested() -> bool {
    CURRENT.with(|c| c.borrow().as_ref().is_some_and(Cancel::is_cancelled))
}

/// The message of a run stopped because its token was cancelled.
pub const INTERRUPTED: &str = "interrupted";

/// Shared by clones: cancelling one cancels them all.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A token nobody has cancelled yet.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_token_is_its_own_and_put_back_after() {
        assert!(current().is_none());
        let t = Cancel::new();
        with_token(&t, || {
            assert!(!requested());
            t.cancel();
            assert!(requested());
            let other = std::thread::spawn(requested).join().unwrap();
            assert!(!other, "another thread does not see this thread's token");
        });
        assert!(current().is_none());
        assert!(!requested());
    }

    #[test]
    fn clones_share_the_state() {
        let a = Cancel::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        a.cancel();
        assert!(b.is_cancelled());
        assert!(!Cancel::new().is_cancelled());
    }
}
