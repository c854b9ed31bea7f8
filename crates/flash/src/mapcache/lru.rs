//! The cached mapping entries: an LRU list of logical units over a fixed number of slots,
//! each slot with the generation at which its entry became dirty.
//!
//! Dirtiness is kept per translation page by generation: an entry is dirty while the
//! generation it recorded equals its translation page's current one, so writing a
//! translation page cleans every cached entry of that page at once (bump the page's
//! generation) without finding them. Generation 0 means clean.

use slotlist::SlotList;

const NONE: u32 = u32::MAX;

/// A cached entry: its logical unit, and the generation at which it became dirty.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    lpn: u32,
    dirty_gen: u32,
}

pub(crate) struct EntryLru {
    /// Least recently used at the front.
    list: SlotList<Entry>,
    capacity: u32,
    /// Slot of each logical unit's cached entry, or NONE.
    slot_of: Vec<u32>,
}

impl EntryLru {
    /// An empty cache of `capacity` entries (at least 1) over `logical_units` units.
    pub(crate) fn new(capacity: u32, logical_units: u32) -> EntryLru {
        assert!(capacity > 0, "a mapping cache holds at least one entry");
        EntryLru {
            list: SlotList::with_capacity(capacity.min(logical_units) as usize),
            capacity,
            slot_of: vec![NONE; logical_units as usize],
        }
    }

    /// Entries it can hold.
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    pub(crate) fn len(&self) -> u32 {
        self.list.len() as u32
    }

    /// The slot holding `lpn`'s entry, if cached.
    #[inline]
    pub(crate) fn get(&self, lpn: u32) -> Option<u32> {
        let s = self.slot_of[lpn as usize];
        (s != NONE).then_some(s)
    }

    #[cfg(test)]
    pub(crate) fn dirty_gen(&self, slot: u32) -> u32 {
        self.list.get(slot).dirty_gen
    }

    pub(crate) fn set_dirty_gen(&mut self, slot: u32, generation: u32) {
        self.list.get_mut(slot).dirty_gen = generation;
    }

    /// Makes `slot` the most recently used.
    #[inline]
    pub(crate) fn touch(&mut self, slot: u32) {
        self.list.move_to_back(slot);
    }

    /// Caches `lpn`'s entry (clean, most recently used), which must not be cached. If the
    /// cache is full, the least recently used entry leaves first: returns its logical unit
    /// and dirty generation.
    pub(crate) fn insert(&mut self, lpn: u32) -> Option<(u32, u32)> {
        debug_assert_eq!(self.slot_of[lpn as usize], NONE);
        let mut evicted = None;
        if self.len() >= self.capacity {
            let (_, old) = self.list.pop_front().expect("a full cache has entries");
            self.slot_of[old.lpn as usize] = NONE;
            evicted = Some((old.lpn, old.dirty_gen));
        }
        // (The slot just freed is the one used.)
        let slot = self.list.push_back(Entry { lpn, dirty_gen: 0 });
        self.slot_of[lpn as usize] = slot;
        evicted
    }

    /// Full check: the list's links hold, and `slot_of` agrees with the slots.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.list
            .check()
            .map_err(|e| format!("mapping cache: {e}"))?;
        for s in self.list.iter_slots() {
            let lpn = self.list.get(s).lpn;
            if self.slot_of[lpn as usize] != s {
                return Err(format!(
                    "mapping cache: slot {s} holds unit {lpn} whose index says otherwise"
                ));
            }
        }
        let indexed = self.slot_of.iter().filter(|&&s| s != NONE).count();
        if indexed != self.list.len() {
            return Err(format!(
                "mapping cache: {indexed} units indexed, {} slots used",
                self.list.len()
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
