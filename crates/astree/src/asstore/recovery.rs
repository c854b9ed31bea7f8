//! Opening an AS store: the superblocks, the checkpoint they name, the log replayed after
//! it (or the full scan), the torn-tail check, and adopting what was found.

use super::*;

/// A whole superblock.
#[derive(Debug, Clone, Copy)]
pub(super) struct Superblock {
    seq: u64,
    checkpoint: u64,
    checkpoint_slots: u64,
}

/// What replaying the log found.
pub(super) struct Replay {
    map: IdMap<u64>,
    root: Option<NodeId>,
    next_id: NodeId,
    seq: u64,
    /// The address after the last commit.
    end: u64,
    discarded: u64,
    /// Logged operations committed after the last node-level commit.
    ops: Vec<u8>,
}

impl<S: Segments> AsStore<S> {
    /// The whole superblocks, newest first. One made with other geometry is an error.
    pub(super) fn superblocks(&mut self) -> Result<Vec<Superblock>, TreeError> {
        let slot = self.slot_bytes as u64;
        let sb_bytes = SUPERBLOCK_BYTES as u64;
        let mut out = Vec::new();
        for i in 0..2 {
            if self.storage.len(SUPER) < (i + 1) * sb_bytes {
                continue;
            }
            let mut b = vec![0u8; SUPERBLOCK_BYTES];
            self.storage.read_at(SUPER, i * sb_bytes, &mut b)?;
            if u32::from_le_bytes(b[0..4].try_into().expect("4")) != SB_MAGIC
                || u32::from_le_bytes(b[32..36].try_into().expect("4")) != Self::superblock_crc(&b)
            {
                continue;
            }
            let (node, seg) = (u64_at(&b, 40), u64_at(&b, 48));
            if node != slot || seg != self.segment_slots {
                return Err(TreeError::Config(format!(
                    "the store was made with {node}-byte nodes and {} -byte segments; it cannot be opened with {slot}-byte nodes and {}-byte segments",
                    seg * node,
                    self.segment_slots * slot
                )));
            }
            out.push(Superblock {
                seq: u64_at(&b, 8),
                checkpoint: u64_at(&b, 16),
                checkpoint_slots: u64_at(&b, 24),
            });
        }
        out.sort_by_key(|sb| std::cmp::Reverse(sb.seq));
        Ok(out)
    }

    /// Reads `n` slots from `a` on, across segment boundaries (None if any is missing).
    pub(super) fn read_slots(&mut self, a: u64, n: u64) -> Option<Vec<u8>> {
        let slot = self.slot_bytes;
        let mut out = vec![0u8; n as usize * slot];
        let mut done = 0;
        while done < n {
            let p = self.advance(a, done);
            let k = (self.segment_slots - slot_of(p)).min(n - done);
            self.storage
                .read_at(
                    seg_of(p),
                    slot_of(p) * slot as u64,
                    &mut out[done as usize * slot..(done + k) as usize * slot],
                )
                .ok()?;
            done += k;
        }
        Some(out)
    }

    /// Loads the checkpoint at `a` (`slots` checkpoint slots and a commit).
    pub(super) fn load_checkpoint(&mut self, a: u64, slots: u64) -> Option<Replay> {
        let buf = self.read_slots(a, slots + 1)?;
        let mut r = Replay {
            map: IdMap::default(),
            root: None,
            next_id: 0,
            seq: 0,
            end: self.advance(a, slots + 1),
            discarded: 0,
            ops: Vec::new(),
        };
        for (i, s) in buf.chunks(self.slot_bytes).enumerate() {
            let (kind, _, seq) = Self::check(s)?;
            if r.seq != 0 && seq != r.seq + 1 {
                return None;
            }
            r.seq = seq;
            self.recovery.slots_scanned += 1;
            if (i as u64) < slots {
                if kind != KIND_CHECKPOINT {
                    return None;
                }
                let n = u32::from_le_bytes(s[HEADER..HEADER + 4].try_into().ok()?) as usize;
                if HEADER + 8 + n * 16 > s.len() {
                    return None;
                }
                for k in 0..n {
                    let at = HEADER + 8 + k * 16;
                    r.map.insert(u64_at(s, at), u64_at(s, at + 8));
                }
            } else {
                if kind != KIND_COMMIT {
                    return None;
                }
                let root = u64_at(s, 32);
                r.root = (root != NONE).then_some(root);
                r.next_id = u64_at(s, 40);
            }
        }
        Some(r)
    }

    /// Replays the log from `from` (a checkpoint's end; None: a full scan from the first
    /// segment) on top of `r`. In checkpoint mode a missing segment inside the log means
    /// the checkpoint cannot be trusted: returns None.
    pub(super) fn replay(
        &mut self,
        mut r: Replay,
        from: Option<u64>,
    ) -> Result<Option<Replay>, TreeError> {
        let slot = self.slot_bytes as u64;
        let segs: Vec<u64> = self
            .storage
            .list()
            .into_iter()
            .filter(|&s| s >= FIRST_LOG_SEGMENT)
            .collect();
        let full = from.is_none();
        let mut pos = from.unwrap_or_else(|| addr(*segs.first().unwrap_or(&FIRST_LOG_SEGMENT), 0));
        r.end = pos;
        let mut last_seq = r.seq;
        // Sequence numbers are consecutive in log order, except across a gap a full scan
        // jumps (segments removed by cleaning).
        let mut exact = last_seq != 0;
        let mut pending: Vec<(u8, NodeId, u64)> = Vec::new();
        // Logged operations not yet committed.
        let mut pending_ops: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; self.slot_bytes * SCAN_SLOTS];
        // Where the trusted log broke off before its natural end (a slot that fails its
        // check or the sequence), and the last sequence number before it.
        let mut broke_at: Option<(u64, u64)> = None;
        'log: loop {
            let seg = seg_of(pos);
            if segs.binary_search(&seg).is_err() {
                // No segment where the log goes on: the log ends here only if none comes
                // later. (A checkpoint's log ending at a segment boundary whose next
                // segment was cleaned away is not the end: a newer checkpoint, unusable
                // now, had let cleaning remove it.)
                match segs.iter().find(|&&s| s > seg) {
                    None => break,
                    Some(&s) if full => {
                        pos = addr(s, 0);
                        exact = false;
                        continue;
                    }
                    Some(_) => return Ok(None),
                }
            }
            let len_slots = self.storage.len(seg) / slot;
            let mut i = slot_of(pos);
            while i < len_slots {
                let n = (len_slots - i).min(SCAN_SLOTS as u64) as usize;
                let buf = &mut chunk[..n * self.slot_bytes];
                self.storage.read_at(seg, i * slot, buf)?;
                for k in 0..n {
                    let s = &buf[k * self.slot_bytes..(k + 1) * self.slot_bytes];
                    self.recovery.slots_scanned += 1;
                    let Some((kind_byte, id, seq)) = Self::check(s) else {
                        broke_at = Some((addr(seg, i + k as u64), last_seq));
                        break 'log;
                    };
                    let kind = kind_byte & !COMMIT_FLAG;
                    let in_order = if exact {
                        seq == last_seq + 1
                    } else {
                        seq > last_seq
                    };
                    if !in_order {
                        // A stale slot (a recycled segment's old content), or a lost write.
                        broke_at = Some((addr(seg, i + k as u64), last_seq));
                        break 'log;
                    }
                    exact = true;
                    last_seq = seq;
                    let at = addr(seg, i + k as u64);
                    match kind {
                        KIND_NODE | KIND_FREE => pending.push((kind, id, at)),
                        // A checkpoint repeats the committed mapping: nothing to replay;
                        // a commit record is handled below.
                        KIND_CHECKPOINT | KIND_COMMIT => {}
                        KIND_OPS => {
                            let n = u32::from_le_bytes(s[HEADER..HEADER + 4].try_into().expect("4"))
                                as usize;
                            if HEADER + 4 + n > s.len() {
                                broke_at = Some((addr(seg, i + k as u64), last_seq));
                                break 'log;
                            }
                            pending_ops.extend_from_slice(&s[HEADER + 4..HEADER + 4 + n]);
                            if kind_byte & COMMIT_FLAG != 0 {
                                // A logical commit: the operations, not the nodes.
                                r.ops.append(&mut pending_ops);
                                r.seq = seq;
                                r.end = self.advance(at, 1);
                                self.recovery.commits_found += 1;
                            }
                            continue;
                        }
                        _ => {
                            broke_at = Some((addr(seg, i + k as u64), last_seq));
                            break 'log;
                        }
                    }
                    if kind == KIND_COMMIT || kind_byte & COMMIT_FLAG != 0 {
                        // A node-level commit holds every operation logged before it.
                        pending_ops.clear();
                        r.ops.clear();
                        for (kd, pid, pat) in pending.drain(..) {
                            if kd == KIND_NODE {
                                r.map.insert(pid, pat);
                            } else {
                                r.map.remove(&pid);
                            }
                        }
                        let root = u64_at(s, 32);
                        r.root = (root != NONE).then_some(root);
                        r.next_id = u64_at(s, 40);
                        r.seq = seq;
                        r.end = self.advance(at, 1);
                        self.recovery.commits_found += 1;
                    }
                }
                i += n as u64;
            }
            if len_slots < self.segment_slots {
                break; // a segment that is not full ends the log
            }
            let next = seg + 1;
            if segs.binary_search(&next).is_ok() {
                pos = addr(next, 0);
                continue;
            }
            match segs.iter().find(|&&s| s > next) {
                None => break,
                Some(&s) if full => {
                    pos = addr(s, 0);
                    exact = false;
                }
                Some(_) => return Ok(None),
            }
        }
        if let Some((at, last)) = broke_at {
            self.check_torn_tail(at, last)?;
        }
        // Node records before the last (logical) commit are not lost: the operations logged
        // after the last node-level commit rebuild them.
        r.discarded =
            (pending.iter().filter(|p| p.2 >= r.end).count() + pending_ops.len().min(1)) as u64;
        Ok(Some(r))
    }

    /// The log broke off at `at` after sequence number `last`. That is a torn tail, to be
    /// cut, unless a valid record further on was written after a sync that had already
    /// made the broken record durable (each slot carries its distance to the newest record
    /// known durable when it was written): then durable data is damaged. That is an error,
    /// and nothing is cut. (Records of the last, unsynced interval after a hole are a tail:
    /// they landed out of order.)
    pub(super) fn check_torn_tail(&mut self, at: u64, last: u64) -> Result<(), TreeError> {
        let slot = self.slot_bytes as u64;
        let mut chunk = vec![0u8; self.slot_bytes * SCAN_SLOTS];
        let segs: Vec<u64> = self
            .storage
            .list()
            .into_iter()
            .filter(|&s| s >= seg_of(at))
            .collect();
        for seg in segs {
            let len_slots = self.storage.len(seg) / slot;
            let mut i = if seg == seg_of(at) {
                slot_of(at) + 1
            } else {
                0
            };
            while i < len_slots {
                let n = (len_slots - i).min(SCAN_SLOTS as u64) as usize;
                let buf = &mut chunk[..n * self.slot_bytes];
                self.storage.read_at(seg, i * slot, buf)?;
                for k in 0..n {
                    let s = &buf[k * self.slot_bytes..(k + 1) * self.slot_bytes];
                    let Some((_, _, seq)) = Self::check(s) else {
                        continue;
                    };
                    let distance = u32::from_le_bytes(s[28..32].try_into().expect("4"));
                    if seq <= last || distance == 0 {
                        continue; // older than the break (stale content), or unknown
                    }
                    let durable_then = seq - u64::from(distance);
                    if durable_then > last {
                        return Err(TreeError::CorruptLog {
                            segment: seg_of(at),
                            slot: slot_of(at),
                            msg: format!(
                                "the record after sequence number {last} is damaged, but record {seq} (segment {seg} slot {}) was written after a sync had made everything up to {durable_then} durable: committed data is damaged; the store was left as it is (nothing cut)",
                                i + k as u64
                            ),
                        });
                    }
                }
                i += n as u64;
            }
        }
        Ok(())
    }

    pub(super) fn recover(&mut self) -> Result<(), TreeError> {
        let sbs = self.superblocks()?;
        if let Some(sb) = sbs.first() {
            self.superblock_seq = sb.seq;
        }
        if !self.cfg.full_scan {
            for sb in &sbs {
                let Some(r) = self.load_checkpoint(sb.checkpoint, sb.checkpoint_slots) else {
                    continue;
                };
                let from = r.end;
                if let Some(r) = self.replay(r, Some(from))? {
                    self.recovery.commits_found += 1;
                    return self.adopt(r, Some(sb.checkpoint));
                }
            }
        }
        let empty = Replay {
            map: IdMap::default(),
            root: None,
            next_id: 0,
            seq: 0,
            end: addr(FIRST_LOG_SEGMENT, 0),
            discarded: 0,
            ops: Vec::new(),
        };
        let r = self.replay(empty, None)?.expect("a full scan always ends");
        // Segments before the newest checkpoint without live nodes are still garbage.
        let cp = sbs.first().map(|sb| sb.checkpoint);
        self.adopt(r, None)?;
        if let Some(cp) = cp {
            if seg_of(cp) <= seg_of(self.end) {
                self.checkpoint_segment = seg_of(cp);
            }
        }
        Ok(())
    }

    /// Takes a replay's result as the store's state: cuts the log after its end (durably),
    /// counts live nodes per segment and removes dead segments before the checkpoint.
    pub(super) fn adopt(&mut self, r: Replay, checkpoint: Option<u64>) -> Result<(), TreeError> {
        let slot = self.slot_bytes as u64;
        let (tseg, tslot) = (seg_of(r.end), slot_of(r.end));
        let mut cut = false;
        // From the newest segment down: a crash keeps a prefix of these removals (and the
        // truncation), so whatever it keeps is still a log that ends early, never a log
        // with a hole in front of uncommitted records, which a later recovery would have
        // to call damage.
        for s in self.storage.list().into_iter().rev() {
            if s < FIRST_LOG_SEGMENT {
                continue;
            }
            let len = self.storage.len(s);
            if s > tseg || (s == tseg && tslot == 0) {
                self.recovery.truncated_bytes += len;
                self.recovery.segments_removed += 1;
                self.storage.remove(s)?;
                cut = true;
            } else if s == tseg && len > tslot * slot {
                self.recovery.truncated_bytes += len - tslot * slot;
                self.storage.truncate(s, tslot * slot)?;
                cut = true;
            }
        }
        if cut {
            // New records reuse the cut-off sequence numbers: the cut must be durable first.
            self.sync_storage()?;
        }
        self.recovery.uncommitted_discarded = r.discarded;
        self.recovery.from_checkpoint = checkpoint;
        self.recovered_ops = decode_ops(&r.ops)?;
        self.recovery.replayed_ops = self.recovered_ops.len() as u64;
        self.map = r.map;
        self.root = r.root;
        self.next_id = r.next_id;
        self.seq = r.seq;
        // The trusted log came off the medium, and any cut is durable.
        self.written_seq = r.seq;
        self.synced_seq = r.seq;
        self.end = r.end;
        self.seg_live = self
            .storage
            .list()
            .into_iter()
            .filter(|&s| s >= FIRST_LOG_SEGMENT)
            .map(|s| (s, 0))
            .collect();
        for (&id, &a) in &self.map {
            match self.seg_live.get_mut(&seg_of(a)) {
                Some(n) => *n += 1,
                None => {
                    return Err(TreeError::Corrupt {
                        id,
                        offset: a,
                        msg: format!(
                            "the node is mapped to log segment {}, which is missing",
                            seg_of(a)
                        ),
                    })
                }
            }
        }
        self.checkpoint_segment = checkpoint.map_or(0, seg_of);
        let before = self.stats.segments_removed;
        self.remove_dead_segments()?;
        self.recovery.segments_removed += self.stats.segments_removed - before;
        Ok(())
    }
}
