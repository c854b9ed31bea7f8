//! The always-sequential (AS) store of paper 004: nodes are addressed by NodeID through a
//! RAM mapping table (NodeID → log address); a modified node never overwrites its old copy
//! but goes to a write buffer of `buffer_nodes` nodes (a node already buffered is replaced
//! in memory; reads look in the buffer first), flushed in one contiguous write at the end
//! of the log.
//!
//! Slots are `node_bytes` long (so they stay aligned for O_DIRECT); a node image may use
//! all but the 32-byte slot header.
//!
//! Crash safety: every record (a node, a free, or a commit) is a fixed-size slot with a
//! magic number, a sequence number and a CRC-32 over header and payload. `sync` flushes the
//! buffer together with a commit record (root, next NodeID) and syncs: a commit point. At
//! open the log is scanned: the first slot that fails its check ends the trusted log (a
//! torn or half-written tail), records after the last commit are discarded, and the mapping
//! table is rebuilt from the rest (a later copy of a NodeID wins).
//!
//! Recovery time is bounded by checkpoints: every `checkpoint_every` commits, the mapping
//! table is appended to the log (checkpoint slots followed by a commit), made durable, and
//! only then one of two alternating superblocks (slots 0 and 1, each with its own CRC) is
//! pointed at it. At open the newest valid superblock names the checkpoint; the mapping is
//! loaded from it and only the log after it is replayed. A torn superblock falls back to the
//! other, an unreadable checkpoint to the full scan, which stays available as a check
//! ([`AsStore::open_full_scan`]).

use crate::node::{Node, NodeId, NONE};
use crate::storage::Storage;
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use std::collections::HashMap;

const MAGIC: u32 = 0x314E_5341; // "ASN1"
const HEADER: usize = 32;
const KIND_NODE: u8 = 1;
const KIND_COMMIT: u8 = 2;
const KIND_FREE: u8 = 3;
const KIND_CHECKPOINT: u8 = 4;
const SB_MAGIC: u32 = 0x4253_5341; // "ASSB"
/// Slots 0 and 1 hold the two superblocks; the log starts after them.
const LOG_START_SLOTS: u64 = 2;
/// Commits between two checkpoints of the mapping table.
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 64;
/// Slots read at a time while scanning the log at open.
const SCAN_SLOTS: usize = 64;

/// How the last open went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The log position of the checkpoint recovery started from (none: a full scan).
    pub from_checkpoint: Option<u64>,
    pub slots_scanned: u64,
    pub commits_found: u64,
    /// Valid records after the last commit, discarded.
    pub uncommitted_discarded: u64,
    /// Bytes past the trusted log that were cut off (torn or uncommitted tail).
    pub truncated_bytes: u64,
}

pub struct AsStore<S: Storage> {
    storage: S,
    node_bytes: usize,
    slot_bytes: usize,
    buffer_nodes: usize,
    map: HashMap<NodeId, u64>,
    /// Pending slots: (NodeID, slot image); `buffered` indexes them by NodeID.
    buffer: Vec<(NodeId, Vec<u8>)>,
    buffered: HashMap<NodeId, usize>,
    log_end: u64,
    seq: u64,
    root: Option<NodeId>,
    next_id: NodeId,
    stats: StoreStats,
    pub recovery: Recovery,
    checkpoint_every: u64,
    commits_since_checkpoint: u64,
    superblock_seq: u64,
}

fn crc(slot: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&slot[0..24]);
    h.update(&slot[28..]);
    h.finalize()
}

impl<S: Storage> AsStore<S> {
    /// Opens the store on `storage`, recovering from its log.
    pub fn open(storage: S, node_bytes: usize, buffer_nodes: usize) -> Result<Self, TreeError> {
        Self::open_with(
            storage,
            node_bytes,
            buffer_nodes,
            DEFAULT_CHECKPOINT_EVERY,
            false,
        )
    }

    /// Opens by scanning the whole log, ignoring checkpoints (a check of the checkpoints).
    pub fn open_full_scan(
        storage: S,
        node_bytes: usize,
        buffer_nodes: usize,
    ) -> Result<Self, TreeError> {
        Self::open_with(
            storage,
            node_bytes,
            buffer_nodes,
            DEFAULT_CHECKPOINT_EVERY,
            true,
        )
    }

    /// Opens with a checkpoint every `checkpoint_every` commits; `full_scan` ignores the
    /// checkpoints at recovery.
    pub fn open_with(
        storage: S,
        node_bytes: usize,
        buffer_nodes: usize,
        checkpoint_every: u64,
        full_scan: bool,
    ) -> Result<Self, TreeError> {
        if node_bytes < 256 || buffer_nodes == 0 {
            return Err(TreeError::Config(format!("node size {node_bytes} must be at least 256 bytes and the write buffer at least 1 node")));
        }
        let mut s = AsStore {
            storage,
            node_bytes: node_bytes - HEADER,
            slot_bytes: node_bytes,
            buffer_nodes,
            map: HashMap::new(),
            buffer: Vec::new(),
            buffered: HashMap::new(),
            log_end: 0,
            seq: 0,
            root: None,
            next_id: 0,
            stats: StoreStats::default(),
            recovery: Recovery::default(),
            checkpoint_every: checkpoint_every.max(1),
            commits_since_checkpoint: 0,
            superblock_seq: 0,
        };
        s.recover(full_scan)?;
        Ok(s)
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }

    pub fn storage_mut(&mut self) -> &mut S {
        &mut self.storage
    }

    /// Live nodes in the mapping table.
    pub fn live_nodes(&self) -> usize {
        self.map.len()
            + self
                .buffered
                .keys()
                .filter(|id| !self.map.contains_key(id))
                .count()
    }

    /// File bytes per live node byte.
    pub fn space_amplification(&self) -> f64 {
        let live = self.live_nodes() as f64 * self.slot_bytes as f64;
        if live == 0.0 {
            0.0
        } else {
            self.log_end as f64 / live
        }
    }

    fn slot(&self, kind: u8, id: NodeId, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; self.slot_bytes];
        s[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        s[4] = kind;
        s[8..16].copy_from_slice(&id.to_le_bytes());
        s[16..24].copy_from_slice(&seq.to_le_bytes());
        s[HEADER..HEADER + payload.len()].copy_from_slice(payload);
        let c = crc(&s);
        s[24..28].copy_from_slice(&c.to_le_bytes());
        s
    }

    /// Checks a slot; returns (kind, id, seq) if it is whole.
    fn check(slot: &[u8]) -> Option<(u8, NodeId, u64)> {
        if u32::from_le_bytes(slot[0..4].try_into().ok()?) != MAGIC {
            return None;
        }
        if u32::from_le_bytes(slot[24..28].try_into().ok()?) != crc(slot) {
            return None;
        }
        Some((
            slot[4],
            u64::from_le_bytes(slot[8..16].try_into().ok()?),
            u64::from_le_bytes(slot[16..24].try_into().ok()?),
        ))
    }

    /// Reads superblock `i`: (its sequence, checkpoint offset, checkpoint slots) if whole.
    fn read_superblock(&mut self, i: u64) -> Option<(u64, u64, u64)> {
        let mut b = vec![0u8; self.slot_bytes];
        self.storage
            .read_at(i * self.slot_bytes as u64, &mut b)
            .ok()?;
        if u32::from_le_bytes(b[0..4].try_into().ok()?) != SB_MAGIC {
            return None;
        }
        if u32::from_le_bytes(b[32..36].try_into().ok()?) != crc32fast::hash(&b[0..32]) {
            return None;
        }
        let f = |a: usize| u64::from_le_bytes(b[a..a + 8].try_into().expect("8"));
        Some((f(8), f(16), f(24)))
    }

    /// Loads the checkpoint at `off` (`slots` checkpoint slots and a commit): the mapping,
    /// the commit's root and next id, and the commit's sequence number.
    fn load_checkpoint(&mut self, off: u64, slots: u64) -> Option<(HashMap<NodeId, u64>, u64)> {
        let mut buf = vec![0u8; self.slot_bytes * (slots as usize + 1)];
        self.storage.read_at(off, &mut buf).ok()?;
        let mut map = HashMap::new();
        let mut last = 0u64;
        for i in 0..=slots as usize {
            let s = &buf[i * self.slot_bytes..(i + 1) * self.slot_bytes];
            let (kind, _, seq) = Self::check(s)?;
            if seq <= last && last != 0 {
                return None;
            }
            last = seq;
            self.recovery.slots_scanned += 1;
            if (i as u64) < slots {
                if kind != KIND_CHECKPOINT {
                    return None;
                }
                let n = u32::from_le_bytes(s[HEADER..HEADER + 4].try_into().ok()?) as usize;
                for k in 0..n {
                    let at = HEADER + 8 + k * 16;
                    map.insert(
                        u64::from_le_bytes(s[at..at + 8].try_into().ok()?),
                        u64::from_le_bytes(s[at + 8..at + 16].try_into().ok()?),
                    );
                }
            } else {
                if kind != KIND_COMMIT {
                    return None;
                }
                let root = u64::from_le_bytes(s[HEADER..HEADER + 8].try_into().ok()?);
                self.root = (root != NONE).then_some(root);
                self.next_id = u64::from_le_bytes(s[HEADER + 8..HEADER + 16].try_into().ok()?);
            }
        }
        Some((map, last))
    }

    fn recover(&mut self, full_scan: bool) -> Result<(), TreeError> {
        let len = self.storage.len();
        let slot = self.slot_bytes as u64;
        let log_start = LOG_START_SLOTS * slot;
        let mut committed: HashMap<NodeId, u64> = HashMap::new();
        let mut pending: Vec<(u8, NodeId, u64)> = Vec::new();
        let mut trusted_end = log_start;
        let mut last_seq = 0u64;
        let mut off = log_start;
        // Start from the newest checkpoint a whole superblock points at.
        if !full_scan && len >= log_start {
            let mut sbs: Vec<(u64, u64, u64)> = (0..LOG_START_SLOTS)
                .filter_map(|i| self.read_superblock(i))
                .collect();
            sbs.sort_unstable();
            if let Some(&(sb_seq, cp_off, cp_slots)) = sbs.last() {
                self.superblock_seq = sb_seq;
                if cp_off + (cp_slots + 1) * slot <= len {
                    if let Some((map, seq)) = self.load_checkpoint(cp_off, cp_slots) {
                        committed = map;
                        last_seq = seq;
                        self.seq = seq;
                        off = cp_off + (cp_slots + 1) * slot;
                        trusted_end = off;
                        self.recovery.from_checkpoint = Some(cp_off);
                        self.recovery.commits_found += 1;
                    }
                }
            }
        }
        let mut chunk = vec![0u8; self.slot_bytes * SCAN_SLOTS];
        'scan: while off + slot <= len {
            let n = ((len - off) / slot).min(SCAN_SLOTS as u64) as usize;
            let buf = &mut chunk[..n * self.slot_bytes];
            self.storage.read_at(off, buf)?;
            for i in 0..n {
                let s = &buf[i * self.slot_bytes..(i + 1) * self.slot_bytes];
                self.recovery.slots_scanned += 1;
                let Some((kind, id, seq)) = Self::check(s) else {
                    break 'scan;
                };
                if seq <= last_seq && last_seq != 0 {
                    break 'scan; // a stale slot from an older, longer log
                }
                last_seq = seq;
                let at = off + (i as u64) * slot;
                match kind {
                    KIND_NODE | KIND_FREE => pending.push((kind, id, at)),
                    // A checkpoint repeats the committed mapping: nothing to replay.
                    KIND_CHECKPOINT => {}
                    KIND_COMMIT => {
                        for (k, pid, pat) in pending.drain(..) {
                            if k == KIND_NODE {
                                committed.insert(pid, pat);
                            } else {
                                committed.remove(&pid);
                            }
                        }
                        let root = u64::from_le_bytes(s[HEADER..HEADER + 8].try_into().expect("8"));
                        self.root = (root != NONE).then_some(root);
                        self.next_id =
                            u64::from_le_bytes(s[HEADER + 8..HEADER + 16].try_into().expect("8"));
                        self.seq = seq;
                        trusted_end = at + slot;
                        self.recovery.commits_found += 1;
                    }
                    _ => break 'scan,
                }
            }
            off += n as u64 * slot;
        }
        self.recovery.uncommitted_discarded = pending.len() as u64;
        self.recovery.truncated_bytes = len.saturating_sub(trusted_end);
        if trusted_end < len {
            self.storage.truncate(trusted_end)?;
        }
        self.map = committed;
        self.log_end = trusted_end;
        Ok(())
    }

    /// Appends the mapping table as a checkpoint (then a commit), makes it durable, and
    /// points the next superblock at it.
    fn checkpoint(&mut self) -> Result<(), TreeError> {
        let per_slot = (self.slot_bytes - HEADER - 8) / 16;
        let mut entries: Vec<(NodeId, u64)> = self.map.iter().map(|(&k, &v)| (k, v)).collect();
        entries.sort_unstable();
        let start = self.log_end;
        let mut out = Vec::new();
        let chunks: Vec<&[(NodeId, u64)]> = if entries.is_empty() {
            vec![&[][..]]
        } else {
            entries.chunks(per_slot).collect()
        };
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
        let mut commit = [0u8; 16];
        commit[0..8].copy_from_slice(&self.root.unwrap_or(NONE).to_le_bytes());
        commit[8..16].copy_from_slice(&self.next_id.to_le_bytes());
        let seq = self.next_seq();
        out.extend_from_slice(&self.slot(KIND_COMMIT, NONE, seq, &commit));
        self.storage.write_at(start, &out)?;
        self.stats.write_requests += 1;
        self.stats.bytes_written += out.len() as u64;
        self.log_end += out.len() as u64;
        self.storage.sync()?;
        // Only a durable checkpoint may be named by a superblock.
        self.superblock_seq += 1;
        let mut sb = vec![0u8; self.slot_bytes];
        sb[0..4].copy_from_slice(&SB_MAGIC.to_le_bytes());
        sb[8..16].copy_from_slice(&self.superblock_seq.to_le_bytes());
        sb[16..24].copy_from_slice(&start.to_le_bytes());
        sb[24..32].copy_from_slice(&(chunks.len() as u64).to_le_bytes());
        let c = crc32fast::hash(&sb[0..32]);
        sb[32..36].copy_from_slice(&c.to_le_bytes());
        self.storage.write_at(
            (self.superblock_seq % LOG_START_SLOTS) * self.slot_bytes as u64,
            &sb,
        )?;
        self.stats.write_requests += 1;
        self.storage.sync()?;
        self.commits_since_checkpoint = 0;
        Ok(())
    }

    fn push(&mut self, id: NodeId, slot: Vec<u8>) -> Result<(), TreeError> {
        if let Some(&i) = self.buffered.get(&id) {
            self.buffer[i].1 = slot;
            self.stats.buffer_hits += 1;
            return Ok(());
        }
        self.buffered.insert(id, self.buffer.len());
        self.buffer.push((id, slot));
        if self.buffer.len() >= self.buffer_nodes {
            self.flush(None)?;
        }
        Ok(())
    }

    /// Writes the buffer (and a commit record, if given) in one contiguous write.
    fn flush(&mut self, commit: Option<Vec<u8>>) -> Result<(), TreeError> {
        if self.buffer.is_empty() && commit.is_none() {
            return Ok(());
        }
        let slot = self.slot_bytes as u64;
        let mut out = Vec::with_capacity((self.buffer.len() + 1) * self.slot_bytes);
        // Sequence numbers follow log order (a buffered node replaced in memory keeps its
        // place in the buffer, so it is numbered here, not when written).
        let mut buffer = std::mem::take(&mut self.buffer);
        for (_, image) in buffer.iter_mut() {
            let seq = self.next_seq();
            Self::stamp(image, seq);
        }
        let commit = commit.map(|mut c| {
            let seq = self.next_seq();
            Self::stamp(&mut c, seq);
            c
        });
        for (i, (id, image)) in buffer.iter().enumerate() {
            out.extend_from_slice(image);
            let at = self.log_end + i as u64 * slot;
            if image[4] == KIND_FREE {
                self.map.remove(id);
            } else {
                self.map.insert(*id, at);
                self.stats.node_writes += 1;
            }
        }
        if let Some(c) = commit {
            out.extend_from_slice(&c);
        }
        self.storage.write_at(self.log_end, &out)?;
        self.stats.write_requests += 1;
        self.stats.bytes_written += out.len() as u64;
        self.log_end += out.len() as u64;
        self.buffered.clear();
        Ok(())
    }

    /// Sets a slot's sequence number and checksum.
    fn stamp(slot: &mut [u8], seq: u64) {
        slot[16..24].copy_from_slice(&seq.to_le_bytes());
        let c = crc(slot);
        slot[24..28].copy_from_slice(&c.to_le_bytes());
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

impl<S: Storage> NodeStore for AsStore<S> {
    fn node_bytes(&self) -> usize {
        self.node_bytes
    }

    fn read(&mut self, id: NodeId) -> Result<Node, TreeError> {
        self.stats.buffer_lookups += 1;
        if let Some(&i) = self.buffered.get(&id) {
            self.stats.buffer_hits += 1;
            let image = &self.buffer[i].1;
            if image[4] == KIND_FREE {
                return Err(TreeError::MissingNode(id));
            }
            return Node::decode(&image[HEADER..], id, NONE);
        }
        let at = *self.map.get(&id).ok_or(TreeError::MissingNode(id))?;
        let mut s = vec![0u8; self.slot_bytes];
        self.storage.read_at(at, &mut s)?;
        self.stats.node_reads += 1;
        self.stats.read_requests += 1;
        self.stats.bytes_read += self.slot_bytes as u64;
        match Self::check(&s) {
            Some((KIND_NODE, sid, _)) if sid == id => Node::decode(&s[HEADER..], id, at),
            _ => Err(TreeError::Corrupt {
                id,
                offset: at,
                msg: "slot fails its checksum or holds another node".into(),
            }),
        }
    }

    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        let mut payload = vec![0u8; self.node_bytes];
        node.encode(&mut payload);
        let slot = self.slot(KIND_NODE, id, 0, &payload);
        self.push(id, slot)
    }

    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        let slot = self.slot(KIND_FREE, id, 0, &[]);
        self.push(id, slot)
    }

    fn root(&self) -> Option<NodeId> {
        self.root
    }

    fn set_root(&mut self, id: NodeId) {
        self.root = Some(id);
    }

    fn sync(&mut self) -> Result<(), TreeError> {
        let mut payload = [0u8; 16];
        payload[0..8].copy_from_slice(&self.root.unwrap_or(NONE).to_le_bytes());
        payload[8..16].copy_from_slice(&self.next_id.to_le_bytes());
        let commit = self.slot(KIND_COMMIT, NONE, 0, &payload);
        self.flush(Some(commit))?;
        self.stats.syncs += 1;
        self.storage.sync()?;
        self.commits_since_checkpoint += 1;
        if self.commits_since_checkpoint >= self.checkpoint_every {
            self.checkpoint()?;
        }
        Ok(())
    }

    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }

    fn io_time(&self) -> crate::storage::IoTime {
        self.storage.io_time()
    }
    fn now_ns(&self) -> u64 {
        self.storage.now_ns()
    }
    fn file_bytes(&self) -> u64 {
        self.log_end
    }
}
