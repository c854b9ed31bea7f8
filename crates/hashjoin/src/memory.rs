//! A hard memory budget shared by every join of a run: operators take memory through
//! reservations; a reservation that does not fit fails, and the caller spills (or plans
//! for less) instead of allocating anyway. Reservations give their memory back on drop.

use std::sync::{Arc, Mutex};

#[derive(Debug)]
struct PoolState {
    limit_bytes: u64,
    used_bytes: u64,
    peak_bytes: u64,
}

/// The budget. Cloning shares it.
#[derive(Debug, Clone)]
pub struct MemoryPool(Arc<Mutex<PoolState>>);

impl MemoryPool {
    pub fn new(limit_bytes: u64) -> Self {
        MemoryPool(Arc::new(Mutex::new(PoolState {
            limit_bytes,
            used_bytes: 0,
            peak_bytes: 0,
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.0
            .lock()
            .expect("no thread panics while holding the memory pool")
    }

    pub fn limit_bytes(&self) -> u64 {
        self.state().limit_bytes
    }

    pub fn used_bytes(&self) -> u64 {
        self.state().used_bytes
    }

    pub fn available_bytes(&self) -> u64 {
        let s = self.state();
        s.limit_bytes - s.used_bytes
    }

    /// Highest use seen.
    pub fn peak_bytes(&self) -> u64 {
        self.state().peak_bytes
    }

    /// An empty reservation.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            pool: self.clone(),
            bytes: 0,
        }
    }

    /// A reservation of `bytes`, or `None` if the budget cannot hold it.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let mut r = self.reservation();
        r.try_grow(bytes).then_some(r)
    }
}

/// Memory held by one operator; returned to the pool on drop.
#[derive(Debug)]
pub struct Reservation {
    pool: MemoryPool,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes `bytes` more if the budget allows; returns whether it did.
    pub fn try_grow(&mut self, bytes: u64) -> bool {
        let mut s = self.pool.state();
        if s.used_bytes + bytes > s.limit_bytes {
            return false;
        }
        s.used_bytes += bytes;
        s.peak_bytes = s.peak_bytes.max(s.used_bytes);
        self.bytes += bytes;
        true
    }

    pub fn shrink(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes);
        self.pool.state().used_bytes -= bytes;
        self.bytes -= bytes;
    }

    pub fn free(&mut self) {
        self.shrink(self.bytes);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_respect_the_limit_and_return_memory() {
        let pool = MemoryPool::new(100);
        let mut a = pool.try_reserve(60).unwrap();
        assert!(pool.try_reserve(50).is_none());
        assert!(!a.try_grow(41));
        assert!(a.try_grow(40));
        assert_eq!(pool.available_bytes(), 0);
        a.shrink(30);
        let b = pool.try_reserve(30).unwrap();
        drop(a);
        drop(b);
        assert_eq!(pool.used_bytes(), 0);
        assert_eq!(pool.peak_bytes(), 100);
    }
}
