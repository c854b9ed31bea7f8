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
//! With packed records ([`AsConfig::packed_unit_bytes`]) a record takes only the units
//! (64 B to 4 KiB) its header and payload need, addresses count units, and every write
//! is padded to whole 4 KiB blocks (the paper's store, and the default, use fixed slots).
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
//!
//! The code, by job: `slot` (the record format and log addresses), `recovery` (opening:
//! superblocks, checkpoint, replay, torn tail), `buffer` (the write buffer, commits and
//! checkpoints), `oplog` (logical commits), `cleaner` (victim choice, a pure function of
//! segment usage, and moving live nodes); this file holds the store's state and its
//! [`NodeStore`] face.

use crate::node::{IdMap, Node, NodeId, NodeImage, NONE};
use crate::segments::Segments;
use crate::store::{LoggedOp, NodeStore, StoreStats};
use crate::TreeError;
use std::collections::BTreeMap;
use std::sync::Arc;

mod buffer;
mod cleaner;
mod oplog;
mod recovery;
mod slot;

use buffer::Pending;
use oplog::{decode_ops, encode_op};
use slot::*;

/// Dead segment files kept for reuse as new segments (their blocks stay allocated, so a
/// commit into them overwrites instead of growing a file).
pub const RECYCLE_POOL: usize = 2;
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
    /// Packed records: each record takes as many units of this many bytes (a power of two
    /// from 64 to 4,096) as its header and payload need, instead of a whole node slot, and
    /// every write is padded to whole 4 KiB blocks. A node of 3 KiB then costs 3 KiB of
    /// log, not `node_bytes`. None (default): fixed slots, the paper's layout (the
    /// simulated experiment's I/O). A store keeps the format it was made with.
    pub packed_unit_bytes: Option<usize>,
    /// When the write buffer fills, the share of it written (the changes buffered first);
    /// the rest stays to absorb its next changes, as a database's background writer
    /// writes only enough dirty pages. 1 (default): all of it, the paper's write buffer.
    pub flush_fraction: f64,
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
            packed_unit_bytes: None,
            flush_fraction: 1.0,
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
    /// Bytes past the trusted log that were cut off (a torn or uncommitted tail, the
    /// stale tail of a recycled segment, or zeros written ahead of the log's end on real
    /// files: [`crate::segments::Segments::zero_fill_ahead_bytes`]).
    pub truncated_bytes: u64,
    /// Segments removed at open: past the trusted log, or dead ones a crash left behind.
    pub segments_removed: u64,
    /// Logged operations (logical commits) recovered for the tree to replay.
    pub replayed_ops: u64,
}

pub struct AsStore<S: Segments> {
    storage: S,
    cfg: AsConfig,
    /// Node image bytes (slot minus header).
    node_bytes: usize,
    /// The largest record: a node slot.
    slot_bytes: usize,
    layout: Layout,
    /// NodeID → where its newest committed or flushed copy lies.
    map: IdMap<Loc>,
    /// Live units per log segment (every segment that exists has an entry; with fixed
    /// slots, live nodes), and in all.
    seg_live: BTreeMap<u64, u64>,
    live_units: u64,
    /// Buffered changes in write order; `buffered` indexes them by NodeID. Nodes are
    /// kept decoded and encoded only when flushed.
    buffer: Vec<(NodeId, Pending)>,
    buffered: IdMap<usize>,
    /// Log bytes the buffered changes will take.
    buffer_bytes: u64,
    /// Where the next slot goes.
    end: u64,
    seq: u64,
    root: Option<NodeId>,
    next_id: NodeId,
    stats: StoreStats,
    /// The buffer node reads go through.
    read_slot: Vec<u8>,
    pub recovery: Recovery,
    commits_since_checkpoint: u64,
    superblock_seq: u64,
    /// Segment where the newest durable checkpoint starts: a segment before it without
    /// live nodes is never read again and may be removed.
    checkpoint_segment: u64,
    /// Address of the last commit record a `sync` wrote (checkpoints repeat it).
    last_commit: Option<Loc>,
    /// Dead segments whose files wait to be renamed into new segments.
    recycled: Vec<u64>,
    /// Logical commits: operations logged since the last commit, and the bytes of
    /// operation slots written since the last node-level commit.
    ops: Vec<u8>,
    ops_since_node_commit: u64,
    /// The next commit must write the nodes ([`NodeStore::commit_nodes_next`]).
    node_commit_required: bool,
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
        if !(cfg.flush_fraction > 0.0 && cfg.flush_fraction <= 1.0) {
            return Err(TreeError::Config(format!(
                "the share of the write buffer a full buffer writes must be above 0 and at most 1, not {}",
                cfg.flush_fraction
            )));
        }
        let unit = match cfg.packed_unit_bytes {
            None => slot,
            Some(u) => {
                let u = u as u64;
                if !u.is_power_of_two()
                    || !(64..=BLOCK_BYTES).contains(&u)
                    || !slot.is_multiple_of(u)
                    || slot / u > u64::from(u16::MAX)
                    || !cfg.segment_bytes.is_multiple_of(BLOCK_BYTES)
                {
                    return Err(TreeError::Config(format!(
                        "packed records need a unit that is a power of two from 64 to 4096 bytes dividing the node size {} (at most 65,535 units per node) and segments of whole 4 KiB blocks (segment size {}); got a {u}-byte unit",
                        cfg.node_bytes, cfg.segment_bytes
                    )));
                }
                u
            }
        };
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
            layout: Layout {
                unit,
                slot_bytes: cfg.node_bytes,
                seg_units: cfg.segment_bytes / unit,
                packed: cfg.packed_unit_bytes.is_some(),
            },
            cfg: AsConfig {
                checkpoint_every: cfg.checkpoint_every.max(1),
                ..cfg
            },
            map: IdMap::default(),
            seg_live: BTreeMap::new(),
            live_units: 0,
            buffer: Vec::new(),
            buffered: IdMap::default(),
            buffer_bytes: 0,
            end: addr(FIRST_LOG_SEGMENT, 0),
            seq: 0,
            root: None,
            next_id: 0,
            stats: StoreStats::default(),
            read_slot: Vec::new(),
            recovery: Recovery::default(),
            commits_since_checkpoint: 0,
            superblock_seq: 0,
            checkpoint_segment: 0,
            last_commit: None,
            recycled: Vec::new(),
            ops: Vec::new(),
            ops_since_node_commit: 0,
            node_commit_required: false,
            recovered_ops: Vec::new(),
            sync_failed: None,
            written_seq: 0,
            synced_seq: 0,
        };
        // Fresh nodes die young; the cleaner's copies are hinted LONG (cleaner.rs).
        s.storage.set_write_hint(vfs::WriteHint::Short)?;
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

    /// Bytes of the live records (committed or flushed; with fixed slots, a slot each).
    pub fn live_bytes(&self) -> u64 {
        self.live_units * self.layout.unit
    }

    /// File bytes per live node byte.
    pub fn space_amplification(&self) -> f64 {
        let live = if self.layout.packed {
            self.live_bytes() as f64
        } else {
            self.live_nodes() as f64 * self.slot_bytes as f64
        };
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
            .map(|l| (seg_of(l.at), slot_of(l.at) * self.layout.unit))
    }

    /// Where the commit record of the last `sync` lies: (segment, byte offset, bytes).
    pub fn last_commit_record(&self) -> Option<(u64, u64, u64)> {
        self.last_commit.map(|l| {
            (
                seg_of(l.at),
                slot_of(l.at) * self.layout.unit,
                l.units * self.layout.unit,
            )
        })
    }

    /// Logged operations recovered at open and not yet handed to the tree.
    pub fn pending_replay(&self) -> usize {
        self.recovered_ops.len()
    }

    /// Log segments that exist, with their live units (fixed slots: live nodes).
    pub fn segments(&self) -> Vec<(u64, u64)> {
        self.seg_live.iter().map(|(&s, &l)| (s, l)).collect()
    }

    /// Node `id` from the write buffer (None: not buffered; read its record).
    fn read_buffered(&mut self, id: NodeId) -> Result<Option<Arc<Node>>, TreeError> {
        self.stats.buffer_lookups += 1;
        let Some(&i) = self.buffered.get(&id) else {
            return Ok(None);
        };
        self.stats.buffer_hits += 1;
        match &self.buffer[i].1 {
            Pending::Node(n) => Ok(Some(Arc::clone(n))),
            Pending::Free => Err(TreeError::MissingNode(id)),
            Pending::Taken => Err(TreeError::Corrupt {
                id,
                offset: NONE,
                msg: "read while taken to be changed".into(),
            }),
        }
    }

    /// Reads node `id`'s record from its log segment, checks it and hands its image to `f`.
    fn read_record<R>(
        &mut self,
        id: NodeId,
        f: impl FnOnce(NodeImage<'_>) -> Result<R, TreeError>,
    ) -> Result<R, TreeError> {
        let Loc { at, units } = *self.map.get(&id).ok_or(TreeError::MissingNode(id))?;
        let len = units * self.layout.unit;
        let offset = slot_of(at) * self.layout.unit;
        // In place where the storage maps its files; else into one record buffer, reused
        // (a read that succeeds overwrites every byte).
        let s = if self.storage.map(seg_of(at), offset + len)? {
            self.storage
                .mapped(seg_of(at), offset, len as usize)
                .expect("mapped that far")
        } else {
            self.read_slot.resize(len as usize, 0);
            self.storage
                .read_at(seg_of(at), offset, &mut self.read_slot)?;
            &self.read_slot
        };
        self.stats.node_reads += 1;
        self.stats.read_requests += 1;
        self.stats.bytes_read += len;
        match self.layout.check_at(s) {
            Some(found) if found.kind & !COMMIT_FLAG == KIND_NODE && found.id == id => {
                f(NodeImage::new(&s[HEADER..], id, at)?)
            }
            _ => Err(TreeError::Corrupt {
                id,
                offset,
                msg: format!(
                    "the slot in log segment {} fails its checksum or holds another node",
                    seg_of(at)
                ),
            }),
        }
    }

    fn map_set(&mut self, id: NodeId, loc: Loc) {
        self.map_remove(id);
        self.map.insert(id, loc);
        *self.seg_live.entry(seg_of(loc.at)).or_insert(0) += loc.units;
        self.live_units += loc.units;
    }

    fn map_remove(&mut self, id: NodeId) {
        if let Some(old) = self.map.remove(&id) {
            if let Some(n) = self.seg_live.get_mut(&seg_of(old.at)) {
                *n -= old.units;
            }
            self.live_units -= old.units;
        }
    }

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
}

impl<S: Segments> NodeStore for AsStore<S> {
    fn node_bytes(&self) -> usize {
        self.node_bytes
    }

    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        if let Some(node) = self.read_buffered(id)? {
            return Ok(node);
        }
        self.read_record(id, |img| img.decode().map(Arc::new))
    }
    fn with_image<R>(
        &mut self,
        id: NodeId,
        f: impl FnOnce(NodeImage<'_>) -> Result<R, TreeError>,
    ) -> Result<Option<R>, TreeError> {
        // A buffered node's newest version is not on storage yet.
        if self.buffered.contains_key(&id) {
            return Ok(None);
        }
        self.read_record(id, f).map(Some)
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
                self.buffer_bytes -= self.pending_bytes(&self.buffer[i].1);
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
        if self.cfg.logical_commits && !self.node_commit_required {
            encode_op(&mut self.ops, 1, key, value);
        }
        Ok(())
    }

    fn log_remove(&mut self, key: &[u8]) -> Result<(), TreeError> {
        if self.cfg.logical_commits && !self.node_commit_required {
            encode_op(&mut self.ops, 2, key, &[]);
        }
        Ok(())
    }

    fn commit_nodes_next(&mut self) {
        self.node_commit_required = true;
        self.ops.clear();
    }

    fn recovered_ops(&mut self) -> Vec<LoggedOp> {
        std::mem::take(&mut self.recovered_ops)
    }

    fn logical_commits(&self) -> bool {
        self.cfg.logical_commits
    }

    fn node_commit_forced(&self) -> bool {
        !self.cfg.logical_commits || self.node_commit_forced_now()
    }

    fn commit_ops_only(&mut self) -> Result<(), TreeError> {
        self.check_usable()?;
        if !self.cfg.logical_commits || self.node_commit_forced_now() {
            return Err(TreeError::Config(
                "a commit of logged operations only, while the store must write its nodes".into(),
            ));
        }
        self.stats.syncs += 1;
        self.commit_ops()?;
        self.sync_storage()
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
    fn segment_live_nodes(&self) -> Vec<(u64, u64)> {
        self.segments()
    }
}
