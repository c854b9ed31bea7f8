//! The cached mapping entries: an LRU list of logical units over a fixed number of slots,
//! each slot with the generation at which its entry became dirty.
//!
//! Dirtiness is kept per translation page by generation: an entry is dirty while the
//! generation it recorded equals its translation page's current one, so writing a
//! translation page cleans every cached entry of that page at once (bump the page's
//! generation) without finding them. Generation 0 means clean.

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    lpn: u32,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
    dirty_gen: u32,
}

pub(crate) struct EntryLru {
    slots: Vec<Slot>,
    capacity: u32,
    /// Slot of each logical unit's cached entry, or NONE.
    slot_of: Vec<u32>,
    /// Most and least recently used slots (NONE when empty).
    head: u32,
    tail: u32,
}

impl EntryLru {
    /// An empty cache of `capacity` entries (at least 1) over `logical_units` units.
    pub(crate) fn new(capacity: u32, logical_units: u32) -> EntryLru {
        assert!(capacity > 0, "a mapping cache holds at least one entry");
        EntryLru {
            slots: Vec::with_capacity(capacity.min(logical_units) as usize),
            capacity,
            slot_of: vec![NONE; logical_units as usize],
            head: NONE,
            tail: NONE,
        }
    }

    /// Entries it can hold.
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    pub(crate) fn len(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The slot holding `lpn`'s entry, if cached.
    #[inline]
    pub(crate) fn get(&self, lpn: u32) -> Option<u32> {
        let s = self.slot_of[lpn as usize];
        (s != NONE).then_some(s)
    }

    #[cfg(test)]
    pub(crate) fn dirty_gen(&self, slot: u32) -> u32 {
        self.slots[slot as usize].dirty_gen
    }

    pub(crate) fn set_dirty_gen(&mut self, slot: u32, generation: u32) {
        self.slots[slot as usize].dirty_gen = generation;
    }

    /// Makes `slot` the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, slot: u32) {
        if self.head == slot {
            return;
        }
        self.unlink(slot);
        self.push_front(slot);
    }

    /// Caches `lpn`'s entry (clean, most recently used), which must not be cached. If the
    /// cache is full, the least recently used entry leaves first: returns its logical unit
    /// and dirty generation.
    pub(crate) fn insert(&mut self, lpn: u32) -> Option<(u32, u32)> {
        debug_assert_eq!(self.slot_of[lpn as usize], NONE);
        let mut evicted = None;
        let slot = if self.len() < self.capacity {
            self.slots.push(Slot {
                lpn,
                prev: NONE,
                next: NONE,
                dirty_gen: 0,
            });
            self.len() - 1
        } else {
            let slot = self.tail;
            self.unlink(slot);
            let old = self.slots[slot as usize];
            self.slot_of[old.lpn as usize] = NONE;
            evicted = Some((old.lpn, old.dirty_gen));
            self.slots[slot as usize].lpn = lpn;
            self.slots[slot as usize].dirty_gen = 0;
            slot
        };
        self.slot_of[lpn as usize] = slot;
        self.push_front(slot);
        evicted
    }

    fn unlink(&mut self, slot: u32) {
        let Slot { prev, next, .. } = self.slots[slot as usize];
        match prev {
            NONE => self.head = next,
            p => self.slots[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.slots[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, slot: u32) {
        let old_head = self.head;
        self.slots[slot as usize].prev = NONE;
        self.slots[slot as usize].next = old_head;
        match old_head {
            NONE => self.tail = slot,
            h => self.slots[h as usize].prev = slot,
        }
        self.head = slot;
    }

    /// Full check: the list runs through every slot once, both ways, and `slot_of` agrees.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut seen = 0u32;
        let mut prev = NONE;
        let mut s = self.head;
        while s != NONE {
            if seen >= self.len() {
                return Err("mapping cache: the LRU list has a cycle".into());
            }
            let slot = &self.slots[s as usize];
            if slot.prev != prev {
                return Err(format!(
                    "mapping cache: slot {s} links back to the wrong slot"
                ));
            }
            if self.slot_of[slot.lpn as usize] != s {
                return Err(format!(
                    "mapping cache: slot {s} holds unit {} whose index says otherwise",
                    slot.lpn
                ));
            }
            seen += 1;
            prev = s;
            s = slot.next;
        }
        if prev != self.tail || seen != self.len() {
            return Err(format!(
                "mapping cache: the LRU list reaches {seen} of {} slots",
                self.len()
            ));
        }
        let indexed = self.slot_of.iter().filter(|&&s| s != NONE).count();
        if indexed != self.len() as usize {
            return Err(format!(
                "mapping cache: {indexed} units indexed, {} slots used",
                self.len()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used() {
        let mut lru = EntryLru::new(3, 10);
        assert_eq!(lru.insert(1), None);
        assert_eq!(lru.insert(2), None);
        assert_eq!(lru.insert(3), None);
        lru.touch(lru.get(1).unwrap());
        let s2 = lru.get(2).unwrap();
        lru.set_dirty_gen(s2, 7);
        assert_eq!(lru.insert(4), Some((2, 7)), "2 was least recently used");
        assert_eq!(lru.get(2), None);
        assert_eq!(
            lru.dirty_gen(lru.get(4).unwrap()),
            0,
            "a new entry is clean"
        );
        assert_eq!(lru.insert(5), Some((3, 0)));
        assert_eq!(lru.insert(6), Some((1, 0)));
        lru.check().unwrap();
        assert_eq!(lru.len(), 3);
    }
}
