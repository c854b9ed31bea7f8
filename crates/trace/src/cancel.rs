//! A cancellation token. The binary owns signal handling: when the user interrupts
//! (SIGINT, SIGTERM or SIGHUP) it sets the token, and library code that runs for long or
//! holds resources (a capture's loop device and mount, a join's spill files, a tree's
//! files) checks it, stops, and cleans up as it returns. Libraries never install signal
//! handlers themselves: a process has one, and a second would silently replace the first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
    fn clones_share_the_state() {
        let a = Cancel::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        a.cancel();
        assert!(b.is_cancelled());
        assert!(!Cancel::new().is_cancelled());
    }
}
