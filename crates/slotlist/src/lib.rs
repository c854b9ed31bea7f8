//! A doubly linked list threaded through the slots of one `Vec`: the recency lists of
//! flashlab's caches (the host page cache in `vfs`, the drive's mapping cache in `flash`,
//! the B+tree's node cache in `astree`).
//!
//! Each value lives in a slot whose number stays the same while it is in the list, so a
//! cache's own index (a map, or a plain `Vec` by key) can keep slot numbers and reach an
//! entry without searching. Pushing at the back, removing any slot and moving a slot to the
//! back are a few stores each; slots freed by [`SlotList::remove`] are reused, the last
//! freed first. Front is the least recently used end, back the most recent.
//!
//! `std`'s `LinkedList` cannot unlink a node it is handed without a cursor walk, and the
//! crates that can (such as `lru`) key entries by a hash map of their own; a slot number
//! lets each cache keep the index it already has.

/// No slot (a link's end, or an empty list's front and back).
const NONE: u32 = u32::MAX;

/// A value and its neighbours' slots.
#[derive(Debug, Clone)]
struct Node<T> {
    value: T,
    /// Towards the front (less recently used).
    prev: u32,
    /// Towards the back (more recently used).
    next: u32,
}

/// The list. `T: Default` stands in a freed slot until it is used again.
#[derive(Debug, Clone)]
pub struct SlotList<T> {
    nodes: Vec<Node<T>>,
    /// Freed slots, the last freed at the end.
    free: Vec<u32>,
    front: u32,
    back: u32,
    len: usize,
}

impl<T: Default> Default for SlotList<T> {
    fn default() -> Self {
        SlotList::new()
    }
}

impl<T: Default> SlotList<T> {
    pub fn new() -> Self {
        SlotList::with_capacity(0)
    }

    /// An empty list with room for `slots` values before it reallocates.
    pub fn with_capacity(slots: usize) -> Self {
        SlotList {
            nodes: Vec::with_capacity(slots),
            free: Vec::new(),
            front: NONE,
            back: NONE,
            len: 0,
        }
    }

    /// Values in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots ever used, free ones included: every slot number is below it.
    pub fn slots(&self) -> usize {
        self.nodes.len()
    }

    /// The least recently used value's slot.
    #[inline]
    pub fn front(&self) -> Option<u32> {
        (self.front != NONE).then_some(self.front)
    }

    /// The most recently used value's slot.
    #[inline]
    pub fn back(&self) -> Option<u32> {
        (self.back != NONE).then_some(self.back)
    }

    /// The value in `slot` (a freed slot holds `T::default()`). Panics past [`Self::slots`].
    #[inline]
    pub fn get(&self, slot: u32) -> &T {
        &self.nodes[slot as usize].value
    }

    #[inline]
    pub fn get_mut(&mut self, slot: u32) -> &mut T {
        &mut self.nodes[slot as usize].value
    }

    /// Adds `value` as the most recently used; its slot.
    pub fn push_back(&mut self, value: T) -> u32 {
        let node = Node {
            value,
            prev: NONE,
            next: NONE,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.nodes[s as usize] = node;
                s
            }
            None => {
                assert!(
                    self.nodes.len() < NONE as usize,
                    "a slot list holds under 2^32 slots"
                );
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.len += 1;
        self.link_back(slot);
        slot
    }

    /// Makes the value in `slot`, which must be in the list, the most recently used.
    #[inline]
    pub fn move_to_back(&mut self, slot: u32) {
        if self.back != slot {
            self.unlink(slot);
            self.link_back(slot);
        }
    }

    /// Takes the value in `slot`, which must be in the list, out; the slot is free.
    pub fn remove(&mut self, slot: u32) -> T {
        self.unlink(slot);
        self.free.push(slot);
        self.len -= 1;
        std::mem::take(&mut self.nodes[slot as usize].value)
    }

    /// Takes the least recently used value out: its slot and the value.
    pub fn pop_front(&mut self) -> Option<(u32, T)> {
        let slot = self.front()?;
        Some((slot, self.remove(slot)))
    }

    /// Slots from the least to the most recently used.
    pub fn iter_slots(&self) -> impl Iterator<Item = u32> + '_ {
        let mut s = self.front;
        std::iter::from_fn(move || {
            let slot = (s != NONE).then_some(s)?;
            s = self.nodes[slot as usize].next;
            Some(slot)
        })
    }

    /// Full check: the links run through `len` slots once each way, and every other slot
    /// is free exactly once.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = 0usize;
        let mut prev = NONE;
        let mut s = self.front;
        while s != NONE {
            if seen >= self.len {
                return Err(format!(
                    "slot list: more than {} linked slots (a cycle?)",
                    self.len
                ));
            }
            let node = &self.nodes[s as usize];
            if node.prev != prev {
                return Err(format!(
                    "slot list: slot {s} links back to {} not {prev}",
                    node.prev
                ));
            }
            seen += 1;
            prev = s;
            s = node.next;
        }
        if prev != self.back || seen != self.len {
            return Err(format!("slot list: {seen} slots linked of {}", self.len));
        }
        let mut free = self.free.clone();
        free.sort_unstable();
        free.dedup();
        if free.len() != self.free.len() || self.len + free.len() != self.nodes.len() {
            return Err(format!(
                "slot list: {} linked and {} free of {} slots",
                self.len,
                self.free.len(),
                self.nodes.len()
            ));
        }
        Ok(())
    }

    fn unlink(&mut self, slot: u32) {
        let (prev, next) = {
            let n = &self.nodes[slot as usize];
            (n.prev, n.next)
        };
        match prev {
            NONE => self.front = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NONE => self.back = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn link_back(&mut self, slot: u32) {
        let back = self.back;
        let node = &mut self.nodes[slot as usize];
        node.prev = back;
        node.next = NONE;
        match back {
            NONE => self.front = slot,
            b => self.nodes[b as usize].next = slot,
        }
        self.back = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn the_least_recently_used_comes_out_first_and_slots_are_reused() {
        let mut l = SlotList::new();
        let a = l.push_back('a');
        let b = l.push_back('b');
        let c = l.push_back('c');
        l.move_to_back(a);
        assert_eq!(l.iter_slots().collect::<Vec<_>>(), vec![b, c, a]);
        assert_eq!(l.pop_front(), Some((b, 'b')));
        assert_eq!(l.push_back('d'), b, "the freed slot is used again");
        assert_eq!(l.remove(c), 'c');
        assert_eq!(*l.get(c), char::default(), "a freed slot holds the default");
        assert_eq!((l.len(), l.slots()), (2, 3));
        assert_eq!((l.front(), l.back()), (Some(a), Some(b)));
        l.check().unwrap();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u16),
        /// Move the i-th value (modulo the length) to the back.
        Touch(usize),
        /// Remove the i-th value (modulo the length).
        Remove(usize),
        PopFront,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u16>().prop_map(Op::Push),
            2 => any::<usize>().prop_map(Op::Touch),
            2 => any::<usize>().prop_map(Op::Remove),
            1 => Just(Op::PopFront),
        ]
    }

    proptest! {
        /// After every step the list holds what a plain queue of (slot, value) holds, in
        /// the same order, and its links check.
        #[test]
        fn agrees_with_a_queue(ops in proptest::collection::vec(op(), 0..300)) {
            let mut l = SlotList::new();
            let mut q: VecDeque<(u32, u16)> = VecDeque::new();
            for op in ops {
                match op {
                    Op::Push(v) => {
                        let s = l.push_back(v);
                        prop_assert!(q.iter().all(|&(t, _)| t != s), "slot {s} handed out twice");
                        q.push_back((s, v));
                    }
                    Op::Touch(i) if !q.is_empty() => {
                        let e = q.remove(i % q.len()).unwrap();
                        l.move_to_back(e.0);
                        q.push_back(e);
                    }
                    Op::Remove(i) if !q.is_empty() => {
                        let (s, v) = q.remove(i % q.len()).unwrap();
                        prop_assert_eq!(l.remove(s), v);
                    }
                    Op::PopFront => prop_assert_eq!(l.pop_front(), q.pop_front()),
                    _ => {}
                }
                l.check().map_err(TestCaseError::fail)?;
                prop_assert_eq!(l.len(), q.len());
                let order: Vec<(u32, u16)> = l.iter_slots().map(|s| (s, *l.get(s))).collect();
                prop_assert_eq!(order, q.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}
