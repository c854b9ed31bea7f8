//! Reservations on a bus: a flash channel or the host link. Under submission order (the
//! null model) a transfer starts after the last one booked, so a read whose die is busy for
//! milliseconds holds back every later transfer on its channel and on the host link, even
//! one whose data is ready at once. Under the priority scheduler a transfer takes the
//! earliest gap that fits from when its data is ready: SATA's NCQ and NVMe return data in
//! any order, and an ONFI channel serves whichever die is ready.

/// A bus's bookings.
#[derive(Debug, Clone)]
pub(crate) enum Bus {
    /// Free from this time: each transfer starts after the last one booked.
    InOrder(u64),
    /// Reserved intervals `[start, end)`, sorted and disjoint (none ending before the
    /// last [`Bus::forget_before`]).
    Gaps(Vec<(u64, u64)>),
}

impl Bus {
    pub(crate) fn new(gaps: bool) -> Bus {
        if gaps {
            Bus::Gaps(Vec::new())
        } else {
            Bus::InOrder(0)
        }
    }

    /// Books a transfer of `len_ns` whose data is ready at `ready_ns`; returns when it
    /// ends.
    #[inline]
    pub(crate) fn book(&mut self, ready_ns: u64, len_ns: u64) -> u64 {
        match self {
            Bus::InOrder(free) => {
                *free = (*free).max(ready_ns) + len_ns;
                *free
            }
            Bus::Gaps(busy) => {
                let start = earliest_gap(busy, ready_ns, len_ns);
                let end = start + len_ns;
                if len_ns > 0 {
                    insert(busy, start, end);
                }
                end
            }
        }
    }

    /// Drops bookings that end at or before `t_ns` (no later booking can be ready before
    /// the time of the command being submitted, so nothing can fit before them).
    #[inline]
    pub(crate) fn forget_before(&mut self, t_ns: u64) {
        if let Bus::Gaps(busy) = self {
            // Most calls find nothing to drop (an idle bus, or its first booking still on).
            if busy.first().is_none_or(|&(_, e)| e > t_ns) {
                return;
            }
            let n = busy.partition_point(|&(_, e)| e <= t_ns);
            if n > 0 {
                busy.drain(..n);
            }
        }
    }
}

/// The earliest start at or after `ready_ns` where `len_ns` fits between the intervals.
fn earliest_gap(busy: &[(u64, u64)], ready_ns: u64, len_ns: u64) -> u64 {
    // Intervals are disjoint and sorted, so their ends increase too.
    let mut i = busy.partition_point(|&(_, e)| e <= ready_ns);
    let mut start = ready_ns;
    while let Some(&(s, e)) = busy.get(i) {
        if start + len_ns <= s {
            break;
        }
        start = start.max(e);
        i += 1;
    }
    start
}

/// Inserts `[start, end)` (which overlaps nothing), merging with neighbours it touches.
fn insert(busy: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    let i = busy.partition_point(|&(s, _)| s < start);
    let joins_prev = i > 0 && busy[i - 1].1 == start;
    let joins_next = busy.get(i).is_some_and(|&(s, _)| s == end);
    match (joins_prev, joins_next) {
        (true, true) => {
            busy[i - 1].1 = busy[i].1;
            busy.remove(i);
        }
        (true, false) => busy[i - 1].1 = end,
        (false, true) => busy[i].0 = start,
        (false, false) => busy.insert(i, (start, end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_waits_for_the_last_booking() {
        let mut b = Bus::new(false);
        assert_eq!(b.book(5_000, 10), 5_010);
        // Ready at 0, but the bus is booked until 5,010.
        assert_eq!(b.book(0, 10), 5_020);
    }

    #[test]
    fn a_ready_transfer_fills_a_gap_before_a_later_booking() {
        let mut b = Bus::new(true);
        assert_eq!(b.book(5_000, 10), 5_010);
        assert_eq!(b.book(0, 10), 10, "fits before the booking at 5,000");
        assert_eq!(b.book(4_995, 10), 5_020, "too long for the gap: after it");
        assert_eq!(b.book(4_990, 10), 5_000, "exactly fills 4,990-5,000");
        let Bus::Gaps(busy) = &b else { unreachable!() };
        assert_eq!(busy, &[(0, 10), (4_990, 5_020)], "touching intervals merge");
    }

    #[test]
    fn forgetting_the_past_keeps_later_bookings() {
        let mut b = Bus::new(true);
        b.book(0, 10);
        b.book(100, 10);
        b.forget_before(50);
        let Bus::Gaps(busy) = &b else { unreachable!() };
        assert_eq!(busy, &[(100, 110)]);
        assert_eq!(b.book(60, 50), 160, "60-110 overlaps 100-110: after it");
    }

    #[test]
    fn bookings_never_overlap() {
        // A small pseudo-random stream of bookings; every pair of booked intervals is
        // disjoint, and each starts at or after its ready time.
        let mut b = Bus::new(true);
        let mut booked: Vec<(u64, u64)> = Vec::new();
        let mut x: u64 = 12345;
        for _ in 0..500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let ready = (x >> 33) % 10_000;
            let len = 1 + (x >> 20) % 200;
            let end = b.book(ready, len);
            assert!(end - len >= ready);
            booked.push((end - len, end));
        }
        booked.sort();
        for w in booked.windows(2) {
            assert!(w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
        }
    }
}
