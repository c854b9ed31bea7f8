//! The write buffer and commits: changed nodes wait in the buffer, a flush writes them in
//! one contiguous append, a commit adds the commit record and syncs, a checkpoint writes
//! the mapping table and points a superblock at it.

use super::*;

/// A change waiting in the write buffer.
pub(super) enum Pending {
    Node(Arc<Node>),
    Free,
    /// Handed to the tree by `take` to be changed and written back.
    Taken,
}

impl<S: Segments> AsStore<S> {
    pub(super) fn push(&mut self, id: NodeId, change: Pending) -> Result<(), TreeError> {
        self.stats.buffer_writes += 1;
        let bytes = self.pending_bytes(&change);
        if let Some(&i) = self.buffered.get(&id) {
            self.buffer_bytes -= self.pending_bytes(&self.buffer[i].1);
            self.buffer_bytes += bytes;
            self.buffer[i].1 = change;
            self.stats.buffer_rewrites += 1;
            return Ok(());
        }
        self.buffered.insert(id, self.buffer.len());
        self.buffer.push((id, change));
        self.buffer_bytes += bytes;
        if self.buffer_full() {
            self.flush_full()?;
        }
        Ok(())
    }

    /// The buffer holds `buffer_nodes` nodes (fixed slots), or records of as many bytes
    /// as that many slots (packed records: smaller nodes, more of them).
    fn buffer_full(&self) -> bool {
        if self.layout.packed {
            self.buffer_bytes >= (self.cfg.buffer_nodes * self.slot_bytes) as u64
        } else {
            self.buffer.len() >= self.cfg.buffer_nodes
        }
    }

    /// Log bytes a buffered change will take (nothing while taken).
    pub(super) fn pending_bytes(&self, p: &Pending) -> u64 {
        let payload = match p {
            Pending::Node(n) => n.encoded_bytes(),
            Pending::Free => 0,
            Pending::Taken => return 0,
        };
        self.layout.units_for(HEADER + payload) * self.layout.unit
    }

    /// Writes the buffer in one contiguous write; with `commit`, its last slot (or a
    /// commit slot, if the buffer is empty) is the commit record.
    pub(super) fn flush(&mut self, commit: bool) -> Result<(), TreeError> {
        self.flush_first(self.buffer.len(), commit)
    }

    /// The buffer is full: writes it all, or with [`AsConfig::flush_fraction`] below 1 the
    /// changes buffered first, until that share of the buffer's budget is written (the
    /// later ones stay to absorb their next changes).
    fn flush_full(&mut self) -> Result<(), TreeError> {
        let f = self.cfg.flush_fraction;
        if f >= 1.0 {
            return self.flush(false);
        }
        let n = if self.layout.packed {
            let want = (f * (self.cfg.buffer_nodes * self.slot_bytes) as f64) as u64;
            let mut bytes = 0;
            let mut n = 0;
            while n < self.buffer.len() && bytes < want {
                bytes += self.pending_bytes(&self.buffer[n].1);
                n += 1;
            }
            n
        } else {
            ((f * self.buffer.len() as f64).ceil() as usize).max(1)
        };
        self.flush_first(n, false)
    }

    /// Writes the first `n` buffered changes in one contiguous write; with `commit` (which
    /// needs the whole buffer), the last record (or a commit record, if the buffer is
    /// empty) is the commit record.
    fn flush_first(&mut self, n: usize, commit: bool) -> Result<(), TreeError> {
        if self.buffer.is_empty() && !commit {
            return Ok(());
        }
        debug_assert!(
            !commit || n == self.buffer.len(),
            "a commit writes the whole buffer"
        );
        let later = self.buffer.split_off(n.min(self.buffer.len()));
        // A node the tree is changing right now (taken, not yet written back) stays in the
        // buffer; a commit never happens in the middle of a change.
        let (taken, buffer): (Vec<_>, Vec<_>) = std::mem::take(&mut self.buffer)
            .into_iter()
            .partition(|(_, p)| matches!(p, Pending::Taken));
        if commit && !taken.is_empty() {
            self.buffer = taken;
            self.buffer.extend(buffer);
            self.reindex();
            return Err(TreeError::Config(
                "commit in the middle of a tree change (a node is taken and not written back)"
                    .into(),
            ));
        }
        // Sequence numbers follow log order (a buffered node replaced in memory keeps its
        // place in the buffer, so it is numbered here, not when written).
        let first_seq = self.seq;
        let mut b = self.batch();
        // The records' bytes (at most a unit of padding each; pads at segment tails
        // aside), reserved at once: grown by doubling, the buffer would be copied again
        // and again while a large flush is laid out.
        let layout = &self.layout;
        let record_bytes = |payload: usize| {
            if layout.packed {
                HEADER + payload + layout.unit as usize
            } else {
                layout.slot_bytes
            }
        };
        b.out.reserve(
            buffer
                .iter()
                .map(|(_, change)| match change {
                    Pending::Node(n) => record_bytes(n.encoded_bytes()),
                    _ => record_bytes(0),
                })
                .sum(),
        );
        let mut locs = Vec::with_capacity(buffer.len());
        for (id, change) in &buffer {
            locs.push(match change {
                Pending::Node(n) => {
                    self.put(&mut b, KIND_NODE, *id, n.encoded_bytes(), |p| n.encode(p))
                }
                Pending::Free => self.put(&mut b, KIND_FREE, *id, 0, |_| {}),
                Pending::Taken => unreachable!("taken nodes were set aside"),
            });
        }
        let last = self.finish(&mut b, commit);
        if let Err(e) = self.append(&b) {
            // Nothing is lost: the buffer stays, and the numbers are handed out again.
            self.seq = first_seq;
            self.buffer = buffer;
            self.buffer.extend(taken);
            self.buffer.extend(later);
            self.reindex();
            return Err(e);
        }
        if commit {
            self.last_commit = last;
        }
        for ((id, change), loc) in buffer.iter().zip(locs) {
            if matches!(change, Pending::Free) {
                self.map_remove(*id);
            } else {
                self.map_set(*id, loc);
                self.stats.node_writes += 1;
            }
        }
        self.buffer = taken;
        self.buffer.extend(later);
        self.reindex();
        Ok(())
    }

    /// Rebuilds the buffer's index and byte count after its changes moved.
    fn reindex(&mut self) {
        self.buffered.clear();
        let mut bytes = 0;
        for (i, (id, p)) in self.buffer.iter().enumerate() {
            self.buffered.insert(*id, i);
            bytes += self.pending_bytes(p);
        }
        self.buffer_bytes = bytes;
    }

    /// A node-level commit: writes the buffered nodes (the last one marked as the commit
    /// record) and syncs; then cleans or checkpoints when due. With logical commits,
    /// `sync` does this only now and then; calling it writes every dirty node now.
    pub fn commit_nodes(&mut self) -> Result<(), TreeError> {
        self.flush(true)?;
        self.ops.clear();
        self.ops_since_node_commit = 0;
        self.node_commit_required = false;
        self.sync_storage()?;
        self.commits_since_checkpoint += 1;
        if self.clean()? || self.commits_since_checkpoint >= self.cfg.checkpoint_every {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Writes a batch at the log's end, split at segment boundaries (records never cross
    /// one).
    pub(super) fn append(&mut self, b: &Batch) -> Result<(), TreeError> {
        self.check_usable()?;
        debug_assert_eq!(
            b.start, self.end,
            "a batch is written where it was laid out"
        );
        let g = self.layout;
        let unit = g.unit as usize;
        let n = (b.out.len() / unit) as u64;
        let mut done = 0;
        while done < n {
            let p = g.after(self.end, done);
            let k = (g.seg_units - slot_of(p)).min(n - done);
            if slot_of(p) == 0 && !self.seg_live.contains_key(&seg_of(p)) {
                if let Some(old) = self.recycled.pop() {
                    self.storage.rename(old, seg_of(p))?;
                    // The new name must be durable before anything is written into the
                    // file: a write can reach the medium while a rename does not, and new
                    // log records under the old, dead segment's name would sit in front
                    // of the log for a full scan to read.
                    self.sync_storage()?;
                    self.stats.segments_recycled += 1;
                }
            }
            let chunk = &b.out[done as usize * unit..(done + k) as usize * unit];
            self.storage
                .write_at(seg_of(p), slot_of(p) * g.unit, chunk)?;
            if (chunk.len() as u64) < crate::segments::ZERO_FILL_AFTER_WRITES_BELOW_BYTES {
                self.zero_fill_ahead(seg_of(p), (slot_of(p) + k) * g.unit)?;
            }
            self.written_seq = g.last_seq(chunk);
            self.seg_live.entry(seg_of(p)).or_insert(0);
            self.stats.write_requests += 1;
            done += k;
        }
        self.stats.bytes_written += b.out.len() as u64;
        self.end = b.next;
        Ok(())
    }

    /// After a small write ending at byte `end` of segment `seg`: if it grew the file, writes
    /// zeros from `end` to the next multiple of the storage's
    /// [`Segments::zero_fill_ahead_bytes`] (within the segment), so the next small writes
    /// overwrite written blocks. Recovery reads zeros as the log's end, as it reads a
    /// recycled segment's stale tail.
    fn zero_fill_ahead(&mut self, seg: u64, end: u64) -> Result<(), TreeError> {
        let ahead = self.storage.zero_fill_ahead_bytes();
        if ahead == 0 || self.storage.len(seg) > end {
            return Ok(());
        }
        let seg_bytes = self.layout.seg_units * self.layout.unit;
        let to = end.next_multiple_of(ahead).min(seg_bytes);
        if to <= end {
            return Ok(());
        }
        let zeros = vec![0u8; (to - end) as usize];
        self.storage.write_at(seg, end, &zeros)?;
        self.stats.bytes_zero_filled += to - end;
        Ok(())
    }

    /// Appends the mapping table as a checkpoint (then a commit), makes it durable, points
    /// the next superblock at it, and removes the segments nothing reads any more.
    pub(super) fn checkpoint(&mut self) -> Result<(), TreeError> {
        let per_record = (self.slot_bytes - HEADER - 8) / self.checkpoint_entry_bytes();
        let mut entries: Vec<(NodeId, Loc)> = self.map.iter().map(|(&k, &v)| (k, v)).collect();
        entries.sort_unstable_by_key(|e| e.0);
        let chunks: Vec<&[(NodeId, Loc)]> = if entries.is_empty() {
            vec![&[][..]]
        } else {
            entries.chunks(per_record).collect()
        };
        let eb = self.checkpoint_entry_bytes();
        let mut b = self.batch();
        let mut start = None;
        for chunk in &chunks {
            let loc = self.put(&mut b, KIND_CHECKPOINT, NONE, 8 + chunk.len() * eb, |p| {
                p[0..4].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
                for (k, (id, loc)) in chunk.iter().enumerate() {
                    let e = &mut p[8 + k * eb..8 + (k + 1) * eb];
                    e[0..8].copy_from_slice(&id.to_le_bytes());
                    e[8..16].copy_from_slice(&loc.at.to_le_bytes());
                    if eb > 16 {
                        e[16..20].copy_from_slice(&(loc.units as u32).to_le_bytes());
                    }
                }
            });
            start.get_or_insert(loc.at);
        }
        self.put(&mut b, KIND_COMMIT, NONE, 0, |_| {});
        self.finish(&mut b, true);
        let start = start.expect("at least one checkpoint record");
        self.append(&b)?;
        self.sync_storage()?;
        // Only a durable checkpoint may be named by a superblock.
        self.write_superblock(start, chunks.len() as u64)?;
        self.commits_since_checkpoint = 0;
        self.checkpoint_segment = seg_of(start);
        self.remove_dead_segments()
    }

    /// Points the next superblock at the checkpoint at `start` (`records` checkpoint
    /// records and a commit; NONE: none yet) and makes it durable.
    pub(super) fn write_superblock(&mut self, start: u64, records: u64) -> Result<(), TreeError> {
        self.superblock_seq += 1;
        let mut sb = vec![0u8; SUPERBLOCK_BYTES];
        sb[0..4].copy_from_slice(&SB_MAGIC.to_le_bytes());
        sb[8..16].copy_from_slice(&self.superblock_seq.to_le_bytes());
        sb[16..24].copy_from_slice(&start.to_le_bytes());
        sb[24..32].copy_from_slice(&records.to_le_bytes());
        sb[36..40].copy_from_slice(&self.format().to_le_bytes());
        sb[40..48].copy_from_slice(&self.layout.unit.to_le_bytes());
        sb[48..56].copy_from_slice(&self.layout.seg_units.to_le_bytes());
        let c = Self::superblock_crc(&sb);
        sb[32..36].copy_from_slice(&c.to_le_bytes());
        self.storage.write_at(
            SUPER,
            (self.superblock_seq % 2) * SUPERBLOCK_BYTES as u64,
            &sb,
        )?;
        self.stats.write_requests += 1;
        self.sync_storage()
    }

    /// Bytes of one mapping entry in a checkpoint: NodeID and address, and for packed
    /// records the record's units.
    pub(super) fn checkpoint_entry_bytes(&self) -> usize {
        if self.layout.packed {
            20
        } else {
            16
        }
    }

    /// The superblock's format field.
    pub(super) fn format(&self) -> u32 {
        if self.layout.packed {
            FORMAT_PACKED
        } else {
            FORMAT_FIXED
        }
    }
}
