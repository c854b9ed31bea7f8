//! The AS store's slot format: every record (a node, a free, a checkpoint piece, logged
//! operations or a commit) is one slot of `slot_bytes`, a 48-byte header and a payload; log
//! addresses; the superblocks' fixed places.

use super::*;

pub(super) const MAGIC: u32 = 0x314E_5341; // "ASN1"
/// Slot header: magic u32, kind u8 (+ [`COMMIT_FLAG`]), 3 zero bytes, NodeID u64,
/// sequence u64, CRC-32 u32, sync distance u32 (the slot's sequence number minus that of
/// the newest record known durable when it was written: 0 = unknown), then for a commit
/// the root u64 and the next NodeID u64.
pub(super) const HEADER: usize = 48;
/// Set on the kind of the last slot a `sync` writes: the slot is also the commit record,
/// so a one-node commit writes one slot.
pub(super) const COMMIT_FLAG: u8 = 0x80;
pub(super) const KIND_NODE: u8 = 1;
pub(super) const KIND_COMMIT: u8 = 2;
pub(super) const KIND_FREE: u8 = 3;
pub(super) const KIND_CHECKPOINT: u8 = 4;
/// Logged tree operations (a byte stream split over consecutive slots; see
/// [`AsConfig::logical_commits`]).
pub(super) const KIND_OPS: u8 = 5;
pub(super) const SB_MAGIC: u32 = 0x4253_5341; // "ASSB"
/// The file holding the two superblocks; log segments are numbered from 1.
pub(super) const SUPER: u64 = 0;
pub(super) const FIRST_LOG_SEGMENT: u64 = 1;
/// Each superblock takes a 4 KiB block of file 0 (aligned for O_DIRECT).
pub(super) const SUPERBLOCK_BYTES: usize = 4096;

pub(super) fn addr(seg: u64, slot: u64) -> u64 {
    (seg << 32) | slot
}

pub(super) fn seg_of(a: u64) -> u64 {
    a >> 32
}

pub(super) fn slot_of(a: u64) -> u64 {
    a & 0xFFFF_FFFF
}

pub(super) fn crc(slot: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&slot[0..24]);
    h.update(&slot[28..]);
    h.finalize()
}

pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl<S: Segments> AsStore<S> {
    /// The address `n` slots after `a`.
    pub(super) fn advance(&self, a: u64, n: u64) -> u64 {
        let t = slot_of(a) + n;
        addr(seg_of(a) + t / self.segment_slots, t % self.segment_slots)
    }

    pub(super) fn slot(&self, kind: u8, id: NodeId, seq: u64, payload: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; self.slot_bytes];
        s[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        s[4] = kind;
        s[8..16].copy_from_slice(&id.to_le_bytes());
        s[HEADER..HEADER + payload.len()].copy_from_slice(payload);
        self.stamp(&mut s, seq);
        s
    }

    /// Checks a slot; returns (kind, id, seq) if it is whole.
    pub(super) fn check(slot: &[u8]) -> Option<(u8, NodeId, u64)> {
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
    pub(super) fn stamp(&self, slot: &mut [u8], seq: u64) {
        slot[16..24].copy_from_slice(&seq.to_le_bytes());
        let distance = u32::try_from(seq.saturating_sub(self.synced_seq)).unwrap_or(u32::MAX);
        slot[28..32].copy_from_slice(&distance.to_le_bytes());
        let c = crc(slot);
        slot[24..28].copy_from_slice(&c.to_le_bytes());
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub(super) fn superblock_crc(b: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&b[0..32]);
        h.update(&b[36..56]);
        h.finalize()
    }

    /// Makes `slot` a commit record too: sets the flag (unless it is a commit slot) and
    /// the root and next NodeID, and stamps it with `seq`.
    pub(super) fn mark_commit(&self, slot: &mut [u8], seq: u64) {
        if slot[4] != KIND_COMMIT {
            slot[4] |= COMMIT_FLAG;
        }
        slot[32..40].copy_from_slice(&self.root.unwrap_or(NONE).to_le_bytes());
        slot[40..48].copy_from_slice(&self.next_id.to_le_bytes());
        self.stamp(slot, seq);
    }

    /// A stand-alone commit record.
    pub(super) fn commit_slot(&self, seq: u64) -> Vec<u8> {
        let mut s = self.slot(KIND_COMMIT, NONE, seq, &[]);
        self.mark_commit(&mut s, seq);
        s
    }
}
