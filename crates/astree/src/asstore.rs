//! The always-sequential (AS) store of paper 004: nodes are addressed by NodeID through a
//! RAM mapping table (NodeID → log address); a modified node never overwrites its old copy
//! but goes to a write buffer of `buffer_nodes` nodes (a node already buffered is replaced
//! in memory; reads look in the buffer first), flushed in one contiguous write at the end
//! of the log.
//!
//! The log is a sequence of segment files ([`Segments`], default 128 MiB each) numbered in
//! log order; file 0 holds two superblocks. Slots are `node_bytes` long (so they stay
//! aligned for O_DIRECT); a node image may use all but the 48-byte slot header. A log
//! address is the segment number in the high 32 bits and the slot index in the low 32.
//!
//! Crash safety: every record (a node, a free, a checkpoint piece or a commit) is a slot
//! with a magic number, a sequence number (consecutive in log order) and a CRC-32 over
//! header and payload. `sync` flushes the buffer together with a commit record (root, next
//! NodeID) and syncs: a commit point. At open the log is replayed: the first slot that
//! fails its check or breaks the sequence ends the trusted log (a torn or half-written
//! tail), records after the last commit are discarded, later copies of a NodeID win, and
//! everything past the trusted end is cut off (durably, before anything new is written).
//! Each slot also records how far it is from the newest record known durable when it was
//! written; a damaged slot followed by a record written after a sync covered it is not a
//! tail but corruption of durable data: opening fails with [`TreeError::CorruptLog`] and
//! nothing is cut.
//!
//! Recovery time is bounded by checkpoints: every `checkpoint_every` commits the mapping
//! table is appended to the log (checkpoint slots followed by a commit), made durable, and
//! only then one of two alternating superblocks (each with its own CRC) is pointed at it.
//! At open the newest whole superblock names the checkpoint; the mapping is loaded from it
//! and only the log after it is replayed. A torn superblock falls back to the other, an
//! unreadable checkpoint to the full scan of every segment, which stays available as a
//! check ([`AsConfig::full_scan`]).
//!
//! Cleaning keeps the files at most `max_space_amp` × the live node bytes (when the tree is
//! large against a segment): at a commit whose files exceed that, victims chosen by
//! cost-benefit ((1−u)·age/(1+u), u = the segment's live fraction, age = segments written
//! since) or oldest-first (the paper's sliding window) have their live nodes copied to the
//! log's head, until the files would be 10% of the live bytes below the limit; a checkpoint
//! then commits the copies. A segment is removed (its file deleted, TRIMmed where the
//! backend supports it) only once it holds no live node and lies before the newest durable
//! checkpoint, so neither that checkpoint's mapping nor its replay ever reads it. Cleaning
//! runs only at commits: a checkpoint is a commit, and a transaction must not be cut in two.

use crate::node::{IdMap, Node, NodeId, NONE};
use crate::segments::Segments;
use crate::store::{LoggedOp, NodeStore, StoreStats};
use crate::TreeError;
use std::collections::BTreeMap;
use std::sync::Arc;

const MAGIC: u32 = 0x314E_5341; // "ASN1"
/// Slot header: magic u32, kind u8 (+ [`COMMIT_FLAG`]), 3 zero bytes, NodeID u64,
/// sequence u64, CRC-32 u32, sync distance u32 (the slot's sequence number minus that of
/// the newest record known durable when it was written: 0 = unknown), then for a commit
/// the root u64 and the next NodeID u64.
const HEADER: usize = 48;
/// Set on the kind of the last slot a `sync` writes: the slot is also the commit record,
/// so a one-node commit writes one slot.
const COMMIT_FLAG: u8 = 0x80;
/// Dead segment files kept for reuse as new segments (their blocks stay allocated, so a
/// commit into them overwrites instead of growing a file).
const RECYCLE_POOL: usize = 2;
const KIND_NODE: u8 = 1;
const KIND_COMMIT: u8 = 2;
const KIND_FREE: u8 = 3;
const KIND_CHECKPOINT: u8 = 4;
/// Logged tree operations (a byte stream split over consecutive slots; see
/// [`AsConfig::logical_commits`]).
const KIND_OPS: u8 = 5;
const SB_MAGIC: u32 = 0x4253_5341; // "ASSB"
/// The file holding the two superblocks; log segments are numbered from 1.
const SUPER: u64 = 0;
const FIRST_LOG_SEGMENT: u64 = 1;
/// Each superblock takes a 4 KiB block of file 0 (aligned for O_DIRECT).
const SUPERBLOCK_BYTES: usize = 4096;
/// Commits between two checkpoints of the mapping table.
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 64;
/// The paper's segment file size.
pub const DEFAULT_SEGMENT_BYTES: u64 = 128 << 20;
/// Largest file bytes / live node bytes cleaning allows.
pub const DEFAULT_MAX_SPACE_AMP: f64 = 1.5;
/// Cleaning brings the files this far (× live bytes) below the limit, so it runs in bursts.
const CLEAN_HYSTERESIS: f64 = 0.1;
/// Slots read at a time while scanning or cleaning.
const SCAN_SLOTS: usize = 64;

/// How cleaning picks its victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleaning {
    /// No cleaning and no segment removal: the log only grows (the paper's baseline).
    Off,
    /// The oldest segment first (the paper's sliding window).
    Oldest,
    /// The highest (1−u)·age/(1+u) first (Rosenblum and Ousterhout's LFS cleaner).
    CostBenefit,
}

impl std::str::FromStr for Cleaning {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Cleaning::Off),
            "oldest" => Ok(Cleaning::Oldest),
            "cost-benefit" => Ok(Cleaning::CostBenefit),
            _ => Err(format!(
                "unknown cleaning policy {s:?}: expected off, oldest or cost-benefit"
            )),
        }
    }
}

/// Settings of an [`AsStore`].
#[derive(Debug, Clone)]
pub struct AsConfig {
    /// Slot size: a node image plus the 32-byte slot header.
    pub node_bytes: usize,
    /// Nodes in the write buffer (MS).
    pub buffer_nodes: usize,
    pub segment_bytes: u64,
    pub checkpoint_every: u64,
    pub max_space_amp: f64,
    pub cleaning: Cleaning,
    /// Recover by scanning every segment, ignoring the checkpoints (a check of them).
    pub full_scan: bool,
    /// Commit by logging the tree operations since the last commit (a few hundred bytes)
    /// instead of writing the changed nodes; dirty nodes stay in the write buffer until it
    /// fills or the operation log since the last node-level commit outgrows it, when a
    /// node-level commit writes them. Recovery replays the logged operations on top of the
    /// last node-level commit. Off by default (the paper's AS store writes nodes).
    pub logical_commits: bool,
}

impl AsConfig {
    /// Defaults: 128 MiB segments, a checkpoint every 64 commits, cost-benefit cleaning to
    /// at most 1.5× the live bytes.
    pub fn new(node_bytes: usize, buffer_nodes: usize) -> Self {
        AsConfig {
            node_bytes,
            buffer_nodes,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            checkpoint_every: DEFAULT_CHECKPOINT_EVERY,
            max_space_amp: DEFAULT_MAX_SPACE_AMP,
            cleaning: Cleaning::CostBenefit,
            full_scan: false,
            logical_commits: false,
        }
    }
}

/// How the last open went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The log address of the checkpoint recovery started from (none: a full scan).
    pub from_checkpoint: Option<u64>,
    pub slots_scanned: u64,
    pub commits_found: u64,
    /// Valid records after the last commit, discarded (a run of logged operations counts
    /// as one).
    pub uncommitted_discarded: u64,
    /// Bytes past the trusted log that were cut off (a torn or uncommitted tail, or the
    /// stale tail of a recycled segment).
    pub truncated_bytes: u64,
    /// Segments removed at open: past the trusted log, or dead ones a crash left behind.
    pub segments_removed: u64,
    /// Logged operations (logical commits) recovered for the tree to replay.
    pub replayed_ops: u64,
}

fn addr(seg: u64, slot: u64) -> u64 {
    (seg << 32) | slot
}

fn seg_of(a: u64) -> u64 {
    a >> 32
}

fn slot_of(a: u64) -> u64 {
    a & 0xFFFF_FFFF
}

fn crc(slot: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&slot[0..24]);
    h.update(&slot[28..]);
    h.finalize()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A whole superblock.
#[derive(Debug, Clone, Copy)]
struct Superblock {
    seq: u64,
    checkpoint: u64,
    checkpoint_slots: u64,
}

/// A change waiting in the write buffer.
enum Pending {
    Node(Arc<Node>),
    Free,
    /// Handed to the tree by `take` to be changed and written back.
    Taken,
}

/// What replaying the log found.
struct Replay {
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

pub struct AsStore<S: Segments> {
    storage: S,
    cfg: AsConfig,
    /// Node image bytes (slot minus header).
    node_bytes: usize,
    slot_bytes: usize,
    segment_slots: u64,
    map: IdMap<u64>,
    /// Live nodes per log segment (every segment that exists has an entry).
    seg_live: BTreeMap<u64, u64>,
    /// Buffered changes in write order; `buffered` indexes them by NodeID. Nodes are
    /// kept decoded and encoded only when flushed.
    buffer: Vec<(NodeId, Pending)>,
    buffered: IdMap<usize>,
    /// Where the next slot goes.
    end: u64,
    seq: u64,
    root: Option<NodeId>,
    next_id: NodeId,
    stats: StoreStats,
    pub recovery: Recovery,
    commits_since_checkpoint: u64,
    superblock_seq: u64,
    /// Segment where the newest durable checkpoint starts: a segment before it without
    /// live nodes is never read again and may be removed.
    checkpoint_segment: u64,
    /// Address of the last commit record a `sync` wrote (checkpoints repeat it).
    last_commit: Option<u64>,
    /// Dead segments whose files wait to be renamed into new segments.
    recycled: Vec<u64>,
    /// Logical commits: operations logged since the last commit, and the bytes of
    /// operation slots written since the last node-level commit.
    ops: Vec<u8>,
    ops_since_node_commit: u64,
    /// Operations recovered at open, for the tree to replay.
    recovered_ops: Vec<LoggedOp>,
    /// Set when a sync failed: what reached the medium is unknown from then on (Linux
    /// marks the pages of a failed writeback clean, so a later fsync would report success
    /// for data that never arrived), so the store writes and commits nothing more; reopen
    /// it to recover from what is durable.
    sync_failed: Option<String>,
    /// The sequence number of the newest record issued to the files, and of the newest
    /// one a successful sync made durable (each slot records its distance to the latter).
    written_seq: u64,
    synced_seq: u64,
}

impl<S: Segments> AsStore<S> {
    /// Opens the store on `storage` with the default settings, recovering from its log.
    pub fn open(storage: S, node_bytes: usize, buffer_nodes: usize) -> Result<Self, TreeError> {
        Self::open_with(storage, AsConfig::new(node_bytes, buffer_nodes))
    }

    /// Opens the store on `storage`, recovering from its log.
    pub fn open_with(storage: S, cfg: AsConfig) -> Result<Self, TreeError> {
        if cfg.node_bytes < 256 || cfg.buffer_nodes == 0 {
            return Err(TreeError::Config(format!(
                "node size {} must be at least 256 bytes and the write buffer at least 1 node",
                cfg.node_bytes
            )));
        }
        let slot = cfg.node_bytes as u64;
        if !cfg.segment_bytes.is_multiple_of(slot)
            || cfg.segment_bytes / slot < 4
            || cfg.segment_bytes / slot > u32::MAX as u64
        {
            return Err(TreeError::Config(format!(
                "segment size {} must be a multiple of the node size {} holding 4 to 2^32 nodes",
                cfg.segment_bytes, cfg.node_bytes
            )));
        }
        if !(cfg.max_space_amp.is_finite() && cfg.max_space_amp >= 1.0 + 2.0 * CLEAN_HYSTERESIS) {
            return Err(TreeError::Config(format!(
                "space amplification limit {} must be at least {}",
                cfg.max_space_amp,
                1.0 + 2.0 * CLEAN_HYSTERESIS
            )));
        }
        let mut s = AsStore {
            storage,
            node_bytes: cfg.node_bytes - HEADER,
            slot_bytes: cfg.node_bytes,
            segment_slots: cfg.segment_bytes / slot,
            cfg: AsConfig {
                checkpoint_every: cfg.checkpoint_every.max(1),
                ..cfg
            },
            map: IdMap::default(),
            seg_live: BTreeMap::new(),
            buffer: Vec::new(),
            buffered: IdMap::default(),
            end: addr(FIRST_LOG_SEGMENT, 0),
            seq: 0,
            root: None,
            next_id: 0,
            stats: StoreStats::default(),
            recovery: Recovery::default(),
            commits_since_checkpoint: 0,
            superblock_seq: 0,
            checkpoint_segment: 0,
            last_commit: None,
            recycled: Vec::new(),
            ops: Vec::new(),
            ops_since_node_commit: 0,
            recovered_ops: Vec::new(),
            sync_failed: None,
            written_seq: 0,
            synced_seq: 0,
        };
        s.recover()?;
        Ok(s)
    }

    pub fn storage(&self) -> &S {
        &self.storage
    }

    pub fn storage_mut(&mut self) -> &mut S {
        &mut self.storage
    }

    /// Gives back the storage (e.g. to delete the files).
    pub fn into_storage(self) -> S {
        self.storage
    }

    pub fn config(&self) -> &AsConfig {
        &self.cfg
    }

    /// Live nodes in the mapping table and the write buffer.
    pub fn live_nodes(&self) -> usize {
        self.map.len()
            + self
                .buffer
                .iter()
                .filter(|(id, p)| !matches!(p, Pending::Free) && !self.map.contains_key(id))
                .count()
    }

    /// File bytes per live node byte.
    pub fn space_amplification(&self) -> f64 {
        let live = self.live_nodes() as f64 * self.slot_bytes as f64;
        if live == 0.0 {
            0.0
        } else {
            self.storage.total_bytes() as f64 / live
        }
    }

    /// Where the commit record of the last `sync` lies: (segment, byte offset); a
    /// checkpoint that follows only repeats it.
    pub fn last_commit_location(&self) -> Option<(u64, u64)> {
        self.last_commit
            .map(|a| (seg_of(a), slot_of(a) * self.slot_bytes as u64))
    }

    /// Logged operations recovered at open and not yet handed to the tree.
    pub fn pending_replay(&self) -> usize {
        self.recovered_ops.len()
    }

    /// Log segments that exist, with their live node counts.
    pub fn segments(&self) -> Vec<(u64, u64)> {
        self.seg_live.iter().map(|(&s, &l)| (s, l)).collect()
    }

    /// The address `n` slots after `a`.
    fn advance(&self, a: u64, n: u64) -> u64 {
        let t = slot_of(a) + n;
        addr(seg_of(a) + t / self.segment_slots, t % self.segment_slots)
    }

    fn slot(&self, kind: u8, id: NodeId, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; self.slot_bytes];
        s[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        s[4] = kind;
        s[8..16].copy_from_slice(&id.to_le_bytes());
        s[HEADER..HEADER + payload.len()].copy_from_slice(payload);
        self.stamp(&mut s, seq);
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
        Some((slot[4], u64_at(slot, 8), u64_at(slot, 16)))
    }

    /// Sets a slot's sequence number, its distance to the newest durable record, and its
    /// checksum.
    fn stamp(&self, slot: &mut [u8], seq: u64) {
        slot[16..24].copy_from_slice(&seq.to_le_bytes());
        let distance = u32::try_from(seq.saturating_sub(self.synced_seq)).unwrap_or(u32::MAX);
        slot[28..32].copy_from_slice(&distance.to_le_bytes());
        let c = crc(slot);
        slot[24..28].copy_from_slice(&c.to_le_bytes());
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    fn superblock_crc(b: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&b[0..32]);
        h.update(&b[36..56]);
        h.finalize()
    }

    /// The whole superblocks, newest first. One made with other geometry is an error.
    fn superblocks(&mut self) -> Result<Vec<Superblock>, TreeError> {
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
    fn read_slots(&mut self, a: u64, n: u64) -> Option<Vec<u8>> {
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
    fn load_checkpoint(&mut self, a: u64, slots: u64) -> Option<Replay> {
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
    fn replay(&mut self, mut r: Replay, from: Option<u64>) -> Result<Option<Replay>, TreeError> {
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
    fn check_torn_tail(&mut self, at: u64, last: u64) -> Result<(), TreeError> {
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

    fn recover(&mut self) -> Result<(), TreeError> {
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
    fn adopt(&mut self, r: Replay, checkpoint: Option<u64>) -> Result<(), TreeError> {
        let slot = self.slot_bytes as u64;
        let (tseg, tslot) = (seg_of(r.end), slot_of(r.end));
        let mut cut = false;
        for s in self.storage.list() {
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

    /// Removes the segments before the newest durable checkpoint that hold no live node
    /// (a segment's death is free reclamation, cleaning's first step), keeping up to
    /// [`RECYCLE_POOL`] of them to be renamed into new segments.
    fn remove_dead_segments(&mut self) -> Result<(), TreeError> {
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

    fn map_set(&mut self, id: NodeId, a: u64) {
        if let Some(old) = self.map.insert(id, a) {
            if let Some(n) = self.seg_live.get_mut(&seg_of(old)) {
                *n -= 1;
            }
        }
        *self.seg_live.entry(seg_of(a)).or_insert(0) += 1;
    }

    fn map_remove(&mut self, id: NodeId) {
        if let Some(old) = self.map.remove(&id) {
            if let Some(n) = self.seg_live.get_mut(&seg_of(old)) {
                *n -= 1;
            }
        }
    }

    /// Appends whole slots at the log's end, split at segment boundaries.
    /// Syncs the files; a failure poisons the store (see `sync_failed`).
    fn sync_storage(&mut self) -> Result<(), TreeError> {
        self.check_usable()?;
        self.storage.sync().inspect_err(|e| {
            self.sync_failed = Some(e.to_string());
        })?;
        self.synced_seq = self.written_seq;
        Ok(())
    }

    /// Fails once a sync has failed: nothing more may be written or committed.
    fn check_usable(&self) -> Result<(), TreeError> {
        match &self.sync_failed {
            Some(why) => Err(TreeError::SyncFailed(why.clone())),
            None => Ok(()),
        }
    }

    fn append(&mut self, out: &[u8]) -> Result<(), TreeError> {
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
    fn checkpoint(&mut self) -> Result<(), TreeError> {
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

    /// Makes `slot` a commit record too: sets the flag (unless it is a commit slot) and
    /// the root and next NodeID, and stamps it with `seq`.
    fn mark_commit(&self, slot: &mut [u8], seq: u64) {
        if slot[4] != KIND_COMMIT {
            slot[4] |= COMMIT_FLAG;
        }
        slot[32..40].copy_from_slice(&self.root.unwrap_or(NONE).to_le_bytes());
        slot[40..48].copy_from_slice(&self.next_id.to_le_bytes());
        self.stamp(slot, seq);
    }

    /// A stand-alone commit record.
    fn commit_slot(&self, seq: u64) -> Vec<u8> {
        let mut s = self.slot(KIND_COMMIT, NONE, seq, &[]);
        self.mark_commit(&mut s, seq);
        s
    }

    /// At a commit: if the files exceed the space limit, copies the live nodes of victim
    /// segments to the log's head. Returns whether a checkpoint should follow (to commit
    /// the copies and let the emptied segments go).
    fn clean(&mut self) -> Result<bool, TreeError> {
        if !self.buffer.is_empty() || !self.over_space_limit() {
            return Ok(false);
        }
        let slot = self.slot_bytes as u64;
        let seg_bytes = self.segment_slots * slot;
        let live = self.map.len() as u64 * slot;
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
        let per_slot = ((self.slot_bytes - HEADER - 8) / 16) as u64;
        let checkpoint_bytes = (self.map.len() as u64).div_ceil(per_slot).max(1) * slot + slot;
        // Emptied segments refill the recycling pool before any is removed.
        let pool_room = (RECYCLE_POOL - self.recycled.len()) as u64 * seg_bytes;
        let mut projected = files - dead + checkpoint_bytes + pool_room;
        while projected > target {
            let candidates = self
                .seg_live
                .range(..active)
                .filter(|(_, &l)| l > 0 && l < self.segment_slots);
            let victim = match self.cfg.cleaning {
                Cleaning::Off => None,
                Cleaning::Oldest => candidates.map(|(&s, _)| s).next(),
                Cleaning::CostBenefit => {
                    let mut best: Option<(f64, u64)> = None;
                    for (&s, &l) in candidates {
                        let u = l as f64 / self.segment_slots as f64;
                        let age = (active - s) as f64;
                        let score = (1.0 - u) * age / (1.0 + u);
                        if best.is_none_or(|(b, _)| score > b) {
                            best = Some((score, s));
                        }
                    }
                    best.map(|(_, s)| s)
                }
            };
            let Some(victim) = victim else { break };
            let bytes = self.storage.len(victim);
            let moved = self.move_live_nodes(victim)?;
            projected = projected + moved * slot - bytes.min(projected);
        }
        Ok(true)
    }

    /// Copies segment `victim`'s live nodes to the log's head (one contiguous write);
    /// returns how many moved.
    fn move_live_nodes(&mut self, victim: u64) -> Result<u64, TreeError> {
        let slot = self.slot_bytes;
        let n = self.storage.len(victim) / slot as u64;
        let mut out = Vec::new();
        let mut ids = Vec::new();
        let mut chunk = vec![0u8; slot * SCAN_SLOTS];
        let mut i = 0;
        while i < n {
            let k = (n - i).min(SCAN_SLOTS as u64) as usize;
            let buf = &mut chunk[..k * slot];
            self.storage.read_at(victim, i * slot as u64, buf)?;
            self.stats.read_requests += 1;
            self.stats.bytes_read += buf.len() as u64;
            for (j, s) in buf.chunks(slot).enumerate() {
                let Some((kind, id, _)) = Self::check(s) else {
                    continue;
                };
                if kind & !COMMIT_FLAG == KIND_NODE
                    && self.map.get(&id) == Some(&addr(victim, i + j as u64))
                {
                    ids.push(id);
                    out.extend_from_slice(s);
                    // A copy is a plain node: the checkpoint that follows commits it.
                    let at = out.len() - slot;
                    out[at + 4] = KIND_NODE;
                }
            }
            i += k as u64;
        }
        let first = self.end;
        for image in out.chunks_mut(slot) {
            let seq = self.next_seq();
            self.stamp(image, seq);
        }
        self.append(&out)?;
        for (k, id) in ids.iter().enumerate() {
            let a = self.advance(first, k as u64);
            self.map_set(*id, a);
        }
        self.stats.segments_cleaned += 1;
        self.stats.nodes_moved += ids.len() as u64;
        Ok(ids.len() as u64)
    }

    /// A node-level commit: writes the buffered nodes (the last one marked as the commit
    /// record) and syncs; then cleans or checkpoints when due. With logical commits,
    /// `sync` does this only now and then; calling it writes every dirty node now.
    pub fn commit_nodes(&mut self) -> Result<(), TreeError> {
        self.flush(true)?;
        self.ops.clear();
        self.ops_since_node_commit = 0;
        self.sync_storage()?;
        self.commits_since_checkpoint += 1;
        if self.clean()? || self.commits_since_checkpoint >= self.cfg.checkpoint_every {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Logical commits: whether this commit should write the dirty nodes instead (they are
    /// fewer bytes than the operations, the operation log since the last node-level commit
    /// would outgrow the write buffer, or cleaning is due, which needs one).
    fn node_commit_due(&self) -> bool {
        let slot = self.slot_bytes as u64;
        let ops_bytes =
            (self.ops.len() as u64).div_ceil((self.slot_bytes - HEADER - 4) as u64) * slot;
        let dirty_bytes = self.buffer.len() as u64 * slot;
        self.ops.is_empty()
            || ops_bytes >= dirty_bytes
            || self.ops_since_node_commit + ops_bytes > self.cfg.buffer_nodes as u64 * slot
            || self.over_space_limit()
    }

    /// Whether the files exceed the cleaning limit.
    fn over_space_limit(&self) -> bool {
        if self.cfg.cleaning == Cleaning::Off {
            return false;
        }
        let slot = self.slot_bytes as u64;
        let live = self.map.len() as u64 * slot;
        // Never chase a limit the segment size makes unreachable (the active segment, one
        // being emptied and the recycling pool come on top of the live bytes).
        let limit = ((self.cfg.max_space_amp * live as f64) as u64)
            .max(live + (2 + RECYCLE_POOL as u64) * self.segment_slots * slot);
        live > 0 && self.storage.total_bytes() > limit
    }

    /// Appends the logged operations as slots, the last one marked as a (logical) commit.
    fn commit_ops(&mut self) -> Result<(), TreeError> {
        let room = self.slot_bytes - HEADER - 4;
        let ops = std::mem::take(&mut self.ops);
        let mut out = Vec::with_capacity(ops.len().div_ceil(room) * self.slot_bytes);
        let chunks: Vec<&[u8]> = ops.chunks(room).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let mut payload = Vec::with_capacity(4 + chunk.len());
            payload.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            payload.extend_from_slice(chunk);
            let seq = self.next_seq();
            // The last slot is also the (logical) commit record.
            let kind = if i + 1 == chunks.len() {
                KIND_OPS | COMMIT_FLAG
            } else {
                KIND_OPS
            };
            out.extend_from_slice(&self.slot(kind, NONE, seq, &payload));
        }
        let first = self.end;
        let first_seq = self.seq - chunks.len() as u64;
        if let Err(e) = self.append(&out) {
            self.seq = first_seq;
            self.ops = ops;
            return Err(e);
        }
        self.last_commit = Some(self.advance(first, chunks.len() as u64 - 1));
        self.ops_since_node_commit += out.len() as u64;
        Ok(())
    }

    fn push(&mut self, id: NodeId, change: Pending) -> Result<(), TreeError> {
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
    fn flush(&mut self, commit: bool) -> Result<(), TreeError> {
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
}

impl<S: Segments> NodeStore for AsStore<S> {
    fn node_bytes(&self) -> usize {
        self.node_bytes
    }

    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        self.stats.buffer_lookups += 1;
        if let Some(&i) = self.buffered.get(&id) {
            self.stats.buffer_hits += 1;
            return match &self.buffer[i].1 {
                Pending::Node(n) => Ok(Arc::clone(n)),
                Pending::Free => Err(TreeError::MissingNode(id)),
                Pending::Taken => Err(TreeError::Corrupt {
                    id,
                    offset: NONE,
                    msg: "read while taken to be changed".into(),
                }),
            };
        }
        let at = *self.map.get(&id).ok_or(TreeError::MissingNode(id))?;
        let mut s = vec![0u8; self.slot_bytes];
        self.storage
            .read_at(seg_of(at), slot_of(at) * self.slot_bytes as u64, &mut s)?;
        self.stats.node_reads += 1;
        self.stats.read_requests += 1;
        self.stats.bytes_read += self.slot_bytes as u64;
        match Self::check(&s) {
            Some((kind, sid, _)) if kind & !COMMIT_FLAG == KIND_NODE && sid == id => {
                Node::decode(&s[HEADER..], id, at).map(Arc::new)
            }
            _ => Err(TreeError::Corrupt {
                id,
                offset: slot_of(at) * self.slot_bytes as u64,
                msg: format!(
                    "the slot in log segment {} fails its checksum or holds another node",
                    seg_of(at)
                ),
            }),
        }
    }

    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        self.write_shared(id, Arc::new(node.clone()))
    }

    fn write_shared(&mut self, id: NodeId, node: Arc<Node>) -> Result<(), TreeError> {
        if node.encoded_bytes() > self.node_bytes {
            return Err(TreeError::Config(format!(
                "node {id} encodes to {} bytes, more than the {} a slot holds",
                node.encoded_bytes(),
                self.node_bytes
            )));
        }
        // A node already buffered is replaced in place (its slot keeps its position).
        self.push(id, Pending::Node(node))
    }

    fn write_owned(&mut self, id: NodeId, node: Node) -> Result<(), TreeError> {
        self.write_shared(id, Arc::new(node))
    }

    fn take(&mut self, id: NodeId, node: Arc<Node>) -> Node {
        // Let go of the buffer's copy too, so the node is handed over without a clone;
        // the tree writes it back.
        if let Some(&i) = self.buffered.get(&id) {
            if matches!(self.buffer[i].1, Pending::Node(_)) {
                self.buffer[i].1 = Pending::Taken;
            }
        }
        Arc::unwrap_or_clone(node)
    }

    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.push(id, Pending::Free)
    }

    fn root(&self) -> Option<NodeId> {
        self.root
    }

    fn set_root(&mut self, id: NodeId) {
        self.root = Some(id);
    }

    fn sync(&mut self) -> Result<(), TreeError> {
        self.check_usable()?;
        self.stats.syncs += 1;
        if self.cfg.logical_commits && !self.node_commit_due() {
            self.commit_ops()?;
            return self.sync_storage();
        }
        self.commit_nodes()
    }

    fn log_insert(&mut self, key: &[u8], value: &[u8]) -> Result<(), TreeError> {
        if self.cfg.logical_commits {
            encode_op(&mut self.ops, 1, key, value);
        }
        Ok(())
    }

    fn log_remove(&mut self, key: &[u8]) -> Result<(), TreeError> {
        if self.cfg.logical_commits {
            encode_op(&mut self.ops, 2, key, &[]);
        }
        Ok(())
    }

    fn recovered_ops(&mut self) -> Vec<LoggedOp> {
        std::mem::take(&mut self.recovered_ops)
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
        self.storage.total_bytes()
    }
}

/// Appends one logged operation: kind (1 insert, 2 remove), key length u16, value length
/// u32, key, value.
fn encode_op(out: &mut Vec<u8>, kind: u8, key: &[u8], value: &[u8]) {
    out.push(kind);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

fn decode_ops(mut b: &[u8]) -> Result<Vec<LoggedOp>, TreeError> {
    let bad = || TreeError::Corrupt {
        id: NONE,
        offset: 0,
        msg: "a committed operation record is cut short".into(),
    };
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 7 {
            return Err(bad());
        }
        let kl = u16::from_le_bytes([b[1], b[2]]) as usize;
        let vl = u32::from_le_bytes(b[3..7].try_into().expect("4")) as usize;
        if b.len() < 7 + kl + vl {
            return Err(bad());
        }
        let key = b[7..7 + kl].to_vec();
        out.push(match b[0] {
            1 => LoggedOp::Insert(key, b[7 + kl..7 + kl + vl].to_vec()),
            2 => LoggedOp::Remove(key),
            k => {
                return Err(TreeError::Corrupt {
                    id: NONE,
                    offset: 0,
                    msg: format!("unknown operation kind {k} in a committed record"),
                })
            }
        });
        b = &b[7 + kl + vl..];
    }
    Ok(out)
}
