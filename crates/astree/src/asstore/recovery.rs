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
    map: IdMap<Loc>,
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
    /// The whole superblocks, newest first. One made with another format or geometry is
    /// an error.
    pub(super) fn superblocks(&mut self) -> Result<Vec<Superblock>, TreeError> {
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
            let format = u32::from_le_bytes(b[36..40].try_into().expect("4"));
            let (unit, seg) = (u64_at(&b, 40), u64_at(&b, 48));
            let name = |f: u32| match f {
                FORMAT_FIXED => "fixed slots".to_string(),
                FORMAT_PACKED => "packed records".to_string(),
                f => format!("unknown format {f}"),
            };
            if format != self.format() {
                return Err(TreeError::Config(format!(
                    "the store was made with {}; it cannot be opened with {} (set packed_unit_bytes as it was made)",
                    name(format),
                    name(self.format())
                )));
            }
            if unit != self.layout.unit || seg != self.layout.seg_units {
                let what = |unit: u64| {
                    if format == FORMAT_PACKED {
                        format!("{unit}-byte record units")
                    } else {
                        format!("{unit}-byte nodes")
                    }
                };
                return Err(TreeError::Config(format!(
                    "the store was made with {} and {}-byte segments; it cannot be opened with {} and {}-byte segments",
                    what(unit),
                    seg * unit,
                    what(self.layout.unit),
                    self.layout.seg_units * self.layout.unit
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

    /// Loads the checkpoint at `a` (`records` checkpoint records and a commit; packed
    /// records may put a pad record between them at a segment's end).
    pub(super) fn load_checkpoint(&mut self, a: u64, records: u64) -> Option<Replay> {
        if a == NONE {
            return None; // a new packed store's superblock names no checkpoint
        }
        let mut r = Replay {
            map: IdMap::default(),
            root: None,
            next_id: 0,
            seq: 0,
            end: a,
            discarded: 0,
            ops: Vec::new(),
        };
        let g = self.layout;
        let eb = self.checkpoint_entry_bytes();
        let mut seen = 0u64;
        let mut done = false;
        let mut bad = false;
        let mut pos = a;
        while !done && !bad {
            let walked = walk(
                &mut self.storage,
                g,
                seg_of(pos),
                slot_of(pos),
                &mut |rec| {
                    let f = &rec.found;
                    if r.seq != 0 && f.seq != r.seq + 1 {
                        bad = true;
                        return false;
                    }
                    r.seq = f.seq;
                    let s = rec.bytes;
                    if f.kind == KIND_PAD {
                        return true;
                    }
                    if seen < records {
                        if f.kind != KIND_CHECKPOINT {
                            bad = true;
                            return false;
                        }
                        let n = u32::from_le_bytes(s[HEADER..HEADER + 4].try_into().expect("4"))
                            as usize;
                        if HEADER + 8 + n * eb > s.len() {
                            bad = true;
                            return false;
                        }
                        for k in 0..n {
                            let at = HEADER + 8 + k * eb;
                            let units = if eb > 16 {
                                u64::from(u32::from_le_bytes(
                                    s[at + 16..at + 20].try_into().expect("4"),
                                ))
                            } else {
                                1
                            };
                            r.map.insert(
                                u64_at(s, at),
                                Loc {
                                    at: u64_at(s, at + 8),
                                    units,
                                },
                            );
                        }
                        seen += 1;
                        true
                    } else {
                        if f.kind != KIND_COMMIT {
                            bad = true;
                            return false;
                        }
                        let root = u64_at(s, 32);
                        r.root = (root != NONE).then_some(root);
                        r.next_id = u64_at(s, 40);
                        r.end = rec.next;
                        done = true;
                        false
                    }
                },
            )
            .ok()?;
            self.recovery.slots_scanned += walked.records;
            match walked.end {
                End::Stopped(_) => {}
                End::Segment => pos = addr(seg_of(pos) + 1, 0),
                End::File(_) | End::Broken(_) => return None,
            }
        }
        (done && !bad).then_some(r)
    }

    /// Replays the log from `from` (a checkpoint's end; None: a full scan from the first
    /// segment) on top of `r`. In checkpoint mode a missing segment inside the log means
    /// the checkpoint cannot be trusted: returns None.
    pub(super) fn replay(
        &mut self,
        mut r: Replay,
        from: Option<u64>,
    ) -> Result<Option<Replay>, TreeError> {
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
        let mut pending: Vec<(u8, NodeId, Loc)> = Vec::new();
        // Logged operations not yet committed.
        let mut pending_ops: Vec<u8> = Vec::new();
        // Where the trusted log broke off before its natural end (a record that fails its
        // check or the sequence), and the last sequence number before it.
        let mut broke_at: Option<(u64, u64)> = None;
        let g = self.layout;
        let mut commits = 0u64;
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
            let walked = walk(&mut self.storage, g, seg, slot_of(pos), &mut |rec| {
                let (kind_byte, id, seq) = (rec.found.kind, rec.found.id, rec.found.seq);
                let kind = kind_byte & !COMMIT_FLAG;
                let in_order = if exact {
                    seq == last_seq + 1
                } else {
                    seq > last_seq
                };
                if !in_order {
                    // A stale record (a recycled segment's old content), or a lost write.
                    broke_at = Some((rec.at, last_seq));
                    return false;
                }
                exact = true;
                last_seq = seq;
                let s = rec.bytes;
                match kind {
                    KIND_NODE | KIND_FREE => pending.push((
                        kind,
                        id,
                        Loc {
                            at: rec.at,
                            units: rec.found.units,
                        },
                    )),
                    // A checkpoint repeats the committed mapping and a pad holds nothing:
                    // nothing to replay; a commit record is handled below.
                    KIND_CHECKPOINT | KIND_COMMIT | KIND_PAD => {}
                    KIND_OPS => {
                        let n = u32::from_le_bytes(s[HEADER..HEADER + 4].try_into().expect("4"))
                            as usize;
                        if HEADER + 4 + n > s.len() {
                            broke_at = Some((rec.at, last_seq));
                            return false;
                        }
                        pending_ops.extend_from_slice(&s[HEADER + 4..HEADER + 4 + n]);
                        if kind_byte & COMMIT_FLAG != 0 {
                            // A logical commit: the operations, not the nodes.
                            r.ops.append(&mut pending_ops);
                            r.seq = seq;
                            r.end = rec.next;
                            commits += 1;
                        }
                        return true;
                    }
                    _ => {
                        broke_at = Some((rec.at, last_seq));
                        return false;
                    }
                }
                if kind == KIND_COMMIT || kind_byte & COMMIT_FLAG != 0 {
                    // A node-level commit holds every operation logged before it.
                    pending_ops.clear();
                    r.ops.clear();
                    for (kd, pid, loc) in pending.drain(..) {
                        if kd == KIND_NODE {
                            r.map.insert(pid, loc);
                        } else {
                            r.map.remove(&pid);
                        }
                    }
                    let root = u64_at(s, 32);
                    r.root = (root != NONE).then_some(root);
                    r.next_id = u64_at(s, 40);
                    r.seq = seq;
                    r.end = rec.next;
                    commits += 1;
                }
                true
            })?;
            self.recovery.slots_scanned += walked.records;
            match walked.end {
                End::Stopped(_) => break 'log,
                End::Broken(at) => {
                    broke_at = Some((at, last_seq));
                    break 'log;
                }
                End::File(_) => break, // a segment that is not full ends the log
                End::Segment => {}
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
        self.recovery.commits_found += commits;
        if let Some((at, last)) = broke_at {
            self.check_torn_tail(at, last)?;
        }
        // Node records before the last (logical) commit are not lost: the operations logged
        // after the last node-level commit rebuild them.
        r.discarded =
            (pending.iter().filter(|p| p.2.at >= r.end).count() + pending_ops.len().min(1)) as u64;
        Ok(Some(r))
    }

    /// The log broke off at `at` after sequence number `last`. That is a torn tail, to be
    /// cut, unless a valid record further on was written after a sync that had already
    /// made the broken record durable (each slot carries its distance to the newest record
    /// known durable when it was written): then durable data is damaged. That is an error,
    /// and nothing is cut. (Records of the last, unsynced interval after a hole are a tail:
    /// they landed out of order.)
    pub(super) fn check_torn_tail(&mut self, at: u64, last: u64) -> Result<(), TreeError> {
        let g = self.layout;
        let unit = g.unit;
        let slot_units = g.slot_bytes as u64 / unit;
        let chunk_units = (SCAN_SLOTS * g.slot_bytes) as u64 / unit;
        let mut chunk = Vec::new();
        let segs: Vec<u64> = self
            .storage
            .list()
            .into_iter()
            .filter(|&s| s >= seg_of(at))
            .collect();
        for seg in segs {
            let lim = (self.storage.len(seg) / unit).min(g.seg_units);
            // Every unit is a place a record may start (fixed slots: every slot).
            let mut p = if seg == seg_of(at) {
                slot_of(at) + 1
            } else {
                0
            };
            let (mut lo, mut hi) = (p, p);
            while p < lim {
                if (p + slot_units).min(lim) > hi {
                    lo = p;
                    hi = (p + chunk_units).min(lim);
                    chunk.resize(((hi - lo) * unit) as usize, 0);
                    self.storage.read_at(seg, lo * unit, &mut chunk)?;
                }
                let here = p;
                p += 1;
                let Some(f) = g.check_at(&chunk[((here - lo) * unit) as usize..]) else {
                    continue;
                };
                let s = &chunk[((here - lo) * unit) as usize..];
                let distance = u32::from_le_bytes(s[28..32].try_into().expect("4"));
                let seq = f.seq;
                if seq <= last || distance == 0 {
                    continue; // older than the break (stale content), or unknown
                }
                let durable_then = seq - u64::from(distance);
                if durable_then > last {
                    return Err(TreeError::CorruptLog {
                        segment: seg_of(at),
                        slot: slot_of(at),
                        msg: format!(
                            "the record after sequence number {last} is damaged, but record {seq} (segment {seg} unit {here}) was written after a sync had made everything up to {durable_then} durable: committed data is damaged; the store was left as it is (nothing cut)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    pub(super) fn recover(&mut self) -> Result<(), TreeError> {
        let sbs = self.superblocks()?;
        if let Some(sb) = sbs.first() {
            self.superblock_seq = sb.seq;
        }
        if self.layout.packed && sbs.is_empty() {
            let has_log = self.storage.list().iter().any(|&s| s >= FIRST_LOG_SEGMENT);
            if has_log || self.storage.len(SUPER) > 0 {
                return Err(TreeError::Config(
                    "the store has no whole superblock: it was made with fixed slots (a packed store writes one when it is made), or its superblocks are damaged".into(),
                ));
            }
            // A new packed store: a superblock saying so, before any record is written.
            self.write_superblock(NONE, 0)?;
            return Ok(());
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
        let cp = sbs.first().map(|sb| sb.checkpoint).filter(|&c| c != NONE);
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
        let slot = self.layout.unit;
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
        self.live_units = 0;
        for (&id, &loc) in &self.map {
            self.live_units += loc.units;
            match self.seg_live.get_mut(&seg_of(loc.at)) {
                Some(n) => *n += loc.units,
                None => {
                    return Err(TreeError::Corrupt {
                        id,
                        offset: loc.at,
                        msg: format!(
                            "the node is mapped to log segment {}, which is missing",
                            seg_of(loc.at)
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
