//! What this process holds that an exit now would leave behind: loop devices, mounts,
//! directories, files, processes. Code that makes such a thing holds it here (a [`Held`]
//! guard, let go when the thing is cleaned up); the binary's signal handler, when the
//! user insists on exiting before cleanup is done, prints [`list`] so nothing is left
//! unsaid.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static HELD: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One thing held; let go when dropped.
#[derive(Debug)]
pub struct Held(u64);

/// Holds `what` (said as "loop device /dev/loop3 (attached to ...)") until the guard
/// is dropped.
pub fn hold(what: impl Into<String>) -> Held {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    HELD.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, what.into()));
    Held(id)
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| *id != self.0);
    }
}

/// Everything held now, oldest first.
pub fn list() -> Vec<String> {
    // try_lock: called from a signal-handling thread while another may hold the lock for
    // an instant; an empty answer is better than a hang.
    match HELD.try_lock() {
        Ok(v) => v.iter().map(|(_, w)| w.clone()).collect(),
        Err(std::sync::TryLockError::Poisoned(e)) => {
            e.into_inner().iter().map(|(_, w)| w.clone()).collect()
        }
        Err(std::sync::TryLockError::WouldBlock) => {
            std::thread::sleep(std::time::Duration::from_millis(50));
            HELD.lock()
                .map(|v| v.iter().map(|(_, w)| w.clone()).collect())
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_held_is_listed_until_let_go() {
        let a = hold("directory /tmp/test-a");
        let b = hold("loop device /dev/loop99");
        assert!(list().contains(&"directory /tmp/test-a".to_string()));
        drop(a);
        let now = list();
        assert!(!now.contains(&"directory /tmp/test-a".to_string()));
        assert!(now.contains(&"loop device /dev/loop99".to_string()));
        drop(b);
        assert!(!list().contains(&"loop device /dev/loop99".to_string()));
    }
}
