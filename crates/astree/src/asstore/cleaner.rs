//! Cleaning: when the files exceed the space limit at a commit, the live nodes of victim
//! segments move to the log's head; segments no checkpoint needs are removed.

use super::*;

/// The segment cleaning empties next, a pure function of segment usage: `usage` gives
/// (segment, live slots) in log order for the segments before the `active` one, each of
/// `segment_slots` slots. Only segments partly live are candidates (an empty one needs no
/// copying, a full one frees nothing). `Oldest` takes the first (the paper's sliding
/// window); `CostBenefit` the highest `(1 − u) · age / (1 + u)`, u the live fraction and
/// age the segments written since (the first on ties).
pub(super) fn choose_victim(
    policy: Cleaning,
    usage: impl Iterator<Item = (u64, u64)>,
    segment_slots: u64,
    active: u64,
) -> Option<u64> {
    let mut candidates = usage.filter(|&(_, live)| live > 0 && live < segment_slots);
    match policy {
        Cleaning::Off => None,
        Cleaning::Oldest => candidates.next().map(|(s, _)| s),
        Cleaning::CostBenefit => {
            let mut best: Option<(f64, u64)> = None;
            for (s, live) in candidates {
                let u = live as f64 / segment_slots as f64;
                let age = (active - s) as f64;
                let score = (1.0 - u) * age / (1.0 + u);
                if best.is_none_or(|(b, _)| score > b) {
                    best = Some((score, s));
                }
            }
            best.map(|(_, s)| s)
        }
    }
}

impl<S: Segments> AsStore<S> {
    /// At a commit: if the files exceed the space limit, copies the live nodes of victim
    /// segments to the log's head. Returns whether a checkpoint should follow (to commit
    /// the copies and let the emptied segments go).
    pub(super) fn clean(&mut self) -> Result<bool, TreeError> {
        if !self.buffer.is_empty() || !self.over_space_limit() {
            return Ok(false);
        }
        let slot = self.slot_bytes as u64;
        let unit = self.layout.unit;
        let seg_bytes = self.layout.seg_units * unit;
        let live = self.live_bytes();
        let files = self.storage.total_bytes();
        let target = (((self.cfg.max_space_amp - CLEAN_HYSTERESIS) * live as f64) as u64)
            .max(live + (1 + RECYCLE_POOL as u64) * seg_bytes);
        let active = seg_of(self.end);
        let dead: u64 = self
            .seg_live
            .range(..active)
            .filter(|(_, &l)| l == 0)
            .map(|(&s, _)| self.storage.len(s))
            .sum();
        let per_slot = ((self.slot_bytes - HEADER - 8) / self.checkpoint_entry_bytes()) as u64;
        let checkpoint_bytes = (self.map.len() as u64).div_ceil(per_slot).max(1) * slot + slot;
        // Emptied segments refill the recycling pool before any is removed.
        let pool_room = (RECYCLE_POOL - self.recycled.len()) as u64 * seg_bytes;
        let mut projected = files - dead + checkpoint_bytes + pool_room;
        while projected > target {
            let usage = self.seg_live.range(..active).map(|(&s, &l)| (s, l));
            let victim = choose_victim(self.cfg.cleaning, usage, self.layout.seg_units, active);
            let Some(victim) = victim else { break };
            let bytes = self.storage.len(victim);
            let moved = self.move_live_nodes(victim)?;
            projected = projected + moved * unit - bytes.min(projected);
        }
        Ok(true)
    }

    /// Copies segment `victim`'s live nodes to the log's head (one contiguous write);
    /// returns how many units moved (fixed slots: nodes).
    pub(super) fn move_live_nodes(&mut self, victim: u64) -> Result<u64, TreeError> {
        let mut live: Vec<(NodeId, Vec<u8>)> = Vec::new();
        let map = &self.map;
        let walked = walk(&mut self.storage, self.layout, victim, 0, &mut |r| {
            if r.found.kind & !COMMIT_FLAG == KIND_NODE
                && map.get(&r.found.id).map(|l| l.at) == Some(r.at)
            {
                live.push((r.found.id, r.bytes[HEADER..].to_vec()));
            }
            true
        })?;
        self.stats.read_requests += walked.reads;
        self.stats.bytes_read += walked.bytes;
        let mut b = self.batch();
        let mut locs = Vec::with_capacity(live.len());
        for (id, payload) in &live {
            // A copy is a plain node: the checkpoint that follows commits it.
            locs.push(self.put(&mut b, KIND_NODE, *id, payload.len(), |p| {
                p[..payload.len()].copy_from_slice(payload)
            }));
        }
        self.finish(&mut b, false);
        // Separation by age: the copies survived a cleaning, so they are likely to live
        // long (LONG); fresh nodes and checkpoints die young (SHORT). On a drive with
        // placement each class fills reclaim units of its own.
        self.storage.set_write_hint(vfs::WriteHint::Long)?;
        let appended = self.append(&b);
        self.storage.set_write_hint(vfs::WriteHint::Short)?;
        appended?;
        let mut units = 0;
        for ((id, _), loc) in live.iter().zip(locs) {
            units += loc.units;
            self.map_set(*id, loc);
        }
        self.stats.segments_cleaned += 1;
        self.stats.nodes_moved += live.len() as u64;
        Ok(units)
    }

    /// Whether the files exceed the cleaning limit.
    pub(super) fn over_space_limit(&self) -> bool {
        if self.cfg.cleaning == Cleaning::Off {
            return false;
        }
        let live = self.live_bytes();
        // Never chase a limit the segment size makes unreachable (the active segment, one
        // being emptied and the recycling pool come on top of the live bytes).
        let limit = ((self.cfg.max_space_amp * live as f64) as u64)
            .max(live + (2 + RECYCLE_POOL as u64) * self.layout.seg_units * self.layout.unit);
        live > 0 && self.storage.total_bytes() > limit
    }

    /// Removes the segments before the newest durable checkpoint that hold no live node
    /// (a segment's death is free reclamation, cleaning's first step), keeping up to
    /// [`RECYCLE_POOL`] of them to be renamed into new segments.
    pub(super) fn remove_dead_segments(&mut self) -> Result<(), TreeError> {
        if self.cfg.cleaning == Cleaning::Off {
            return Ok(()); // the paper's baseline: the log only grows
        }
        let dead: Vec<u64> = self
            .seg_live
            .range(..self.checkpoint_segment)
            .filter(|(_, &live)| live == 0)
            .map(|(&s, _)| s)
            .collect();
        for s in dead {
            self.seg_live.remove(&s);
            if self.recycled.len() < RECYCLE_POOL {
                self.recycled.push(s);
            } else {
                self.storage.remove(s)?;
                self.stats.segments_removed += 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn victims_by_policy() {
        // Segments 1..=4 of 100 slots before active segment 10: 100 (full), 30, 0 (empty),
        // 60 live.
        let usage = || [(1, 100), (2, 30), (3, 0), (4, 60)].into_iter();
        assert_eq!(choose_victim(Cleaning::Off, usage(), 100, 10), None);
        assert_eq!(choose_victim(Cleaning::Oldest, usage(), 100, 10), Some(2));
        // Segment 2: 0.7 × 8 / 1.3 ≈ 4.3; segment 4: 0.4 × 6 / 1.6 = 1.5.
        assert_eq!(
            choose_victim(Cleaning::CostBenefit, usage(), 100, 10),
            Some(2)
        );
        // A young, nearly empty segment beats an old, nearly full one.
        let usage = [(1, 95), (9, 5)].into_iter();
        assert_eq!(
            choose_victim(Cleaning::CostBenefit, usage, 100, 10),
            Some(9)
        );
        let none = [(1, 100), (2, 0)].into_iter();
        assert_eq!(choose_victim(Cleaning::CostBenefit, none, 100, 10), None);
    }
}
