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
        if let Some(&i) = self.buffered.get(&id) {
            self.buffer[i].1 = change;
            self.stats.buffer_rewrites += 1;
            return Ok(());
        }
        self.buffered.insert(id, self.buffer.len());
        self.buffer.push((id, change));
        if self.buffer.len() >= self.cfg.buffer_nodes {
            self.flush(false)?;
        }
        Ok(())
    }

    /// Writes the buffer in one contiguous write; with `commit`, its last slot (or a
    /// commit slot, if the buffer is empty) is the commit record.
    pub(super) fn flush(&mut self, commit: bool) -> Result<(), TreeError> {
        if self.buffer.is_empty() && !commit {
            return Ok(());
        }
        // A node the tree is changing right now (taken, not yet written back) stays in the
        // buffer; a commit never happens in the middle of a change.
        let taken: Vec<(NodeId, Pending)> =
            if self.buffer.iter().any(|(_, p)| matches!(p, Pending::Taken)) {
                if commit {
                    return Err(TreeError::Config(
                    "commit in the middle of a tree change (a node is taken and not written back)"
                        .into(),
                ));
                }
                let (t, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.buffer)
                    .into_iter()
                    .partition(|(_, p)| matches!(p, Pending::Taken));
                self.buffer = rest;
                t
            } else {
                Vec::new()
            };
        // Sequence numbers follow log order (a buffered node replaced in memory keeps its
        // place in the buffer, so it is numbered here, not when written).
        let slot = self.slot_bytes;
        let mut out = vec![0u8; self.buffer.len() * slot];
        let first_seq = self.seq;
        for k in 0..self.buffer.len() {
            let seq = self.next_seq();
            let s = &mut out[k * slot..(k + 1) * slot];
            s[0..4].copy_from_slice(&MAGIC.to_le_bytes());
            s[8..16].copy_from_slice(&self.buffer[k].0.to_le_bytes());
            match &self.buffer[k].1 {
                Pending::Node(n) => {
                    s[4] = KIND_NODE;
                    n.encode(&mut s[HEADER..]);
                }
                Pending::Free => s[4] = KIND_FREE,
                Pending::Taken => unreachable!("taken nodes were set aside"),
            }
            self.stamp(s, seq);
        }
        if commit {
            if out.is_empty() {
                let seq = self.next_seq();
                out = self.commit_slot(seq);
            } else {
                let at = out.len() - slot;
                let seq = self.seq;
                let mut last = out.split_off(at);
                self.mark_commit(&mut last, seq);
                out.extend_from_slice(&last);
            }
        }
        let first = self.end;
        if let Err(e) = self.append(&out) {
            // Nothing is lost: the buffer stays, and the numbers are handed out again.
            self.seq = first_seq;
            self.buffer.extend(taken);
            return Err(e);
        }
        if commit {
            self.last_commit = Some(self.advance(first, (out.len() / slot) as u64 - 1));
        }
        let buffer = std::mem::take(&mut self.buffer);
        for (i, (id, change)) in buffer.iter().enumerate() {
            if matches!(change, Pending::Free) {
                self.map_remove(*id);
            } else {
                let a = self.advance(first, i as u64);
                self.map_set(*id, a);
                self.stats.node_writes += 1;
            }
        }
        self.buffered.clear();
        for (i, (id, _)) in taken.iter().enumerate() {
            self.buffered.insert(*id, i);
        }
        self.buffer = taken;
        Ok(())
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

    pub(super) fn append(&mut self, out: &[u8]) -> Result<(), TreeError> {
        self.check_usable()?;
        let slot = self.slot_bytes;
        let n = (out.len() / slot) as u64;
        let mut done = 0;
        while done < n {
            let p = self.advance(self.end, done);
            let k = (self.segment_slots - slot_of(p)).min(n - done);
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
            let chunk = &out[done as usize * slot..(done + k) as usize * slot];
            self.storage
                .write_at(seg_of(p), slot_of(p) * slot as u64, chunk)?;
            self.written_seq = u64_at(&chunk[chunk.len() - slot..], 16);
            self.seg_live.entry(seg_of(p)).or_insert(0);
            self.stats.write_requests += 1;
            done += k;
        }
        self.stats.bytes_written += out.len() as u64;
        self.end = self.advance(self.end, n);
        Ok(())
    }

    /// Appends the mapping table as a checkpoint (then a commit), makes it durable, points
    /// the next superblock at it, and removes the segments nothing reads any more.
    pub(super) fn checkpoint(&mut self) -> Result<(), TreeError> {
        let per_slot = (self.slot_bytes - HEADER - 8) / 16;
        let mut entries: Vec<(NodeId, u64)> = self.map.iter().map(|(&k, &v)| (k, v)).collect();
        entries.sort_unstable();
        let start = self.end;
        let chunks: Vec<&[(NodeId, u64)]> = if entries.is_empty() {
            vec![&[][..]]
        } else {
            entries.chunks(per_slot).collect()
        };
        let mut out = Vec::with_capacity((chunks.len() + 1) * self.slot_bytes);
        for chunk in &chunks {
            let mut payload = vec![0u8; 8 + chunk.len() * 16];
            payload[0..4].copy_from_slice(&(chunk.len() as u32).to_le_bytes());
            for (k, (id, at)) in chunk.iter().enumerate() {
                payload[8 + k * 16..16 + k * 16].copy_from_slice(&id.to_le_bytes());
                payload[16 + k * 16..24 + k * 16].copy_from_slice(&at.to_le_bytes());
            }
            let seq = self.next_seq();
            out.extend_from_slice(&self.slot(KIND_CHECKPOINT, NONE, seq, &payload));
        }
        let seq = self.next_seq();
        out.extend_from_slice(&self.commit_slot(seq));
        self.append(&out)?;
        self.sync_storage()?;
        // Only a durable checkpoint may be named by a superblock.
        self.superblock_seq += 1;
        let mut sb = vec![0u8; SUPERBLOCK_BYTES];
        sb[0..4].copy_from_slice(&SB_MAGIC.to_le_bytes());
        sb[8..16].copy_from_slice(&self.superblock_seq.to_le_bytes());
        sb[16..24].copy_from_slice(&start.to_le_bytes());
        sb[24..32].copy_from_slice(&(chunks.len() as u64).to_le_bytes());
        sb[40..48].copy_from_slice(&(self.slot_bytes as u64).to_le_bytes());
        sb[48..56].copy_from_slice(&self.segment_slots.to_le_bytes());
        let c = Self::superblock_crc(&sb);
        sb[32..36].copy_from_slice(&c.to_le_bytes());
        self.storage.write_at(
            SUPER,
            (self.superblock_seq % 2) * SUPERBLOCK_BYTES as u64,
            &sb,
        )?;
        self.stats.write_requests += 1;
        self.sync_storage()?;
        self.commits_since_checkpoint = 0;
        self.checkpoint_segment = seg_of(start);
        self.remove_dead_segments()
    }
}
