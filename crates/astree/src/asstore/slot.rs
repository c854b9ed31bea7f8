//! The AS store's record format: every record (a node, a free, a checkpoint piece, logged
//! operations, a commit or a pad) has a 48-byte header and a payload. With fixed slots (the
//! paper's layout, the default) every record is one slot of `node_bytes`; with packed
//! records ([`AsConfig::packed_unit_bytes`]) a record takes as many units as its header and
//! payload need, a pad record fills a segment's tail a record does not fit, and every write
//! ends on a 4 KiB block (its last record says how many units of padding follow it), so no
//! later write touches a block that holds records already written. Log addresses count
//! units (fixed slots: slots); the superblocks' fixed places.

use super::*;

pub(super) const MAGIC: u32 = 0x314E_5341; // "ASN1"
/// Record header: magic u32, kind u8 (+ [`COMMIT_FLAG`]), for packed records the record's
/// units u16 and the padding units after it u8 (fixed slots: zero), NodeID u64, sequence
/// u64, CRC-32 u32 (over the whole record but itself), sync distance u32 (the record's
/// sequence number minus that of the newest record known durable when it was written:
/// 0 = unknown), then for a commit the root u64 and the next NodeID u64.
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
/// Packed records: fills the tail of a segment the next record does not fit.
pub(super) const KIND_PAD: u8 = 6;
pub(super) const SB_MAGIC: u32 = 0x4253_5341; // "ASSB"
/// The file holding the two superblocks; log segments are numbered from 1.
pub(super) const SUPER: u64 = 0;
pub(super) const FIRST_LOG_SEGMENT: u64 = 1;
/// Each superblock takes a 4 KiB block of file 0 (aligned for O_DIRECT).
pub(super) const SUPERBLOCK_BYTES: usize = 4096;
/// Packed records: every write covers whole blocks of this size.
pub(super) const BLOCK_BYTES: u64 = 4096;
/// A superblock's format field: fixed slots or packed records.
pub(super) const FORMAT_FIXED: u32 = 0;
pub(super) const FORMAT_PACKED: u32 = 1;

/// Where a record lies: its log address and how many units it takes (1 with fixed slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Loc {
    pub at: u64,
    pub units: u64,
}

/// The log's geometry: its unit (a slot, or a packed record's unit), the largest record
/// (`slot_bytes`, a node slot) and the units per segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    pub unit: u64,
    pub slot_bytes: usize,
    pub seg_units: u64,
    pub packed: bool,
}

/// A record found in the log.
pub(super) struct Found {
    pub kind: u8,
    pub id: NodeId,
    pub seq: u64,
    pub units: u64,
    /// Units of padding after it (packed records).
    pub pad: u64,
}

impl Layout {
    /// Units a record of `bytes` (header and payload) takes.
    pub fn units_for(&self, bytes: usize) -> u64 {
        if self.packed {
            (bytes as u64).div_ceil(self.unit)
        } else {
            1
        }
    }

    /// The address `n` units after `a`, moved to the next segment's start at a segment's end
    /// (records never cross one).
    pub fn after(&self, a: u64, n: u64) -> u64 {
        let t = slot_of(a) + n;
        addr(seg_of(a) + t / self.seg_units, t % self.seg_units)
    }

    /// The units a record header says its record takes, and the padding units after it
    /// (fixed slots: one, none).
    fn units_and_pad(&self, h: &[u8]) -> (u64, u64) {
        if self.packed {
            (u64::from(u16::from_le_bytes([h[5], h[6]])), u64::from(h[7]))
        } else {
            (1, 0)
        }
    }

    /// Checks the record at the start of `b` (which may run on past it): whole, with its
    /// magic number and checksum.
    pub fn check_at(&self, b: &[u8]) -> Option<Found> {
        if b.len() < HEADER || u32::from_le_bytes(b[0..4].try_into().ok()?) != MAGIC {
            return None;
        }
        let (units, pad) = self.units_and_pad(b);
        let len = units * self.unit;
        if units == 0 || len > self.slot_bytes as u64 || len > b.len() as u64 {
            return None;
        }
        let r = &b[..len as usize];
        if u32::from_le_bytes(r[24..28].try_into().ok()?) != crc(r) {
            return None;
        }
        Some(Found {
            kind: r[4],
            id: u64_at(r, 8),
            seq: u64_at(r, 16),
            units,
            pad,
        })
    }

    /// The sequence number of the last record in `out`, a run of whole records.
    pub fn last_seq(&self, out: &[u8]) -> u64 {
        let mut at = 0usize;
        let mut seq = 0;
        while at + HEADER <= out.len() {
            seq = u64_at(out, at + 16);
            let (units, pad) = self.units_and_pad(&out[at..]);
            at += ((units + pad) * self.unit) as usize;
        }
        seq
    }
}

/// Records laid out from a log address, to be written in one [`AsStore::append`].
pub(super) struct Batch {
    pub out: Vec<u8>,
    pub start: u64,
    /// Where the next record goes.
    pub next: u64,
    /// The last record: its byte offset in `out` and where it lies.
    last: Option<(usize, Loc)>,
}

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
    /// A batch starting at the log's end.
    pub(super) fn batch(&self) -> Batch {
        Batch {
            out: Vec::new(),
            start: self.end,
            next: self.end,
            last: None,
        }
    }

    /// Lays out a record of `payload` bytes at the batch's end (packed records: after a pad
    /// record if it does not fit in the segment), numbered with the next sequence number;
    /// `fill` writes the payload.
    pub(super) fn put(
        &mut self,
        b: &mut Batch,
        kind: u8,
        id: NodeId,
        payload: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Loc {
        let g = self.layout;
        let units = g.units_for(HEADER + payload);
        if g.packed && slot_of(b.next) + units > g.seg_units {
            let rest = g.seg_units - slot_of(b.next);
            self.put_units(b, KIND_PAD, NONE, rest, |_| {});
        }
        self.put_units(b, kind, id, units, fill)
    }

    fn put_units(
        &mut self,
        b: &mut Batch,
        kind: u8,
        id: NodeId,
        units: u64,
        fill: impl FnOnce(&mut [u8]),
    ) -> Loc {
        let g = self.layout;
        let off = b.out.len();
        // (Fixed slots: one unit, of the slot's size.)
        b.out.resize(off + (units * g.unit) as usize, 0);
        let r = &mut b.out[off..];
        r[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        r[4] = kind;
        if g.packed {
            r[5..7].copy_from_slice(&(units as u16).to_le_bytes());
        }
        r[8..16].copy_from_slice(&id.to_le_bytes());
        fill(&mut r[HEADER..]);
        let seq = self.next_seq();
        self.stamp(r, seq);
        let loc = Loc { at: b.next, units };
        b.last = Some((off, loc));
        b.next = g.after(b.next, units);
        loc
    }

    /// Ends a batch: with `commit`, its last record (a commit record if it has none) is
    /// also the commit record; packed records pad the batch to the end of its last block.
    /// Returns where the last record lies.
    pub(super) fn finish(&mut self, b: &mut Batch, commit: bool) -> Option<Loc> {
        if commit && b.last.is_none() {
            self.put(b, KIND_COMMIT, NONE, 0, |_| {});
        }
        let (off, loc) = b.last?;
        let g = self.layout;
        let seq = u64_at(&b.out[off..], 16);
        let per_block = (BLOCK_BYTES / g.unit).max(1);
        let pad = if g.packed && !slot_of(b.next).is_multiple_of(per_block) {
            per_block - slot_of(b.next) % per_block
        } else {
            0
        };
        let root = self.root.unwrap_or(NONE);
        let next_id = self.next_id;
        let r = &mut b.out[off..];
        if commit {
            if r[4] != KIND_COMMIT {
                r[4] |= COMMIT_FLAG;
            }
            r[32..40].copy_from_slice(&root.to_le_bytes());
            r[40..48].copy_from_slice(&next_id.to_le_bytes());
        }
        if pad > 0 {
            r[7] = pad as u8;
        }
        if commit || pad > 0 {
            self.stamp(r, seq);
        }
        if pad > 0 {
            b.out.resize(b.out.len() + (pad * g.unit) as usize, 0);
            b.next = g.after(b.next, pad);
        }
        Some(loc)
    }

    /// Sets a record's sequence number, its distance to the newest durable record, and its
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
}

/// A whole record [`walk`] found.
pub(super) struct Rec<'a> {
    pub at: u64,
    /// Where the next record starts (after this one's padding).
    pub next: u64,
    pub found: Found,
    /// The record's bytes (header and payload, without padding).
    pub bytes: &'a [u8],
}

/// Why a [`walk`] ended, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The segment's last record was read: the log goes on in the next segment.
    Segment,
    /// The file ends before the segment does: the log ends here.
    File(u64),
    /// The record here fails its check.
    Broken(u64),
    /// The visitor stopped at the record here.
    Stopped(u64),
}

pub(super) struct Walked {
    pub end: End,
    /// Read requests and bytes read, and records looked at (the last one included).
    pub reads: u64,
    pub bytes: u64,
    pub records: u64,
}

/// Reads segment `seg`'s records in order from unit `from` on (in reads of
/// `SCAN_SLOTS` slots) and hands each whole one to `visit`, until it returns false, a
/// record fails its check, or the file or the segment ends.
pub(super) fn walk<S: Segments>(
    storage: &mut S,
    g: Layout,
    seg: u64,
    from: u64,
    visit: &mut dyn FnMut(Rec) -> bool,
) -> Result<Walked, TreeError> {
    let unit = g.unit;
    let lim = (storage.len(seg) / unit).min(g.seg_units);
    let chunk_units = (SCAN_SLOTS * g.slot_bytes) as u64 / unit;
    let slot_units = g.slot_bytes as u64 / unit;
    let mut buf = Vec::new();
    let mut w = Walked {
        end: End::Segment,
        reads: 0,
        bytes: 0,
        records: 0,
    };
    let (mut p, mut lo, mut hi) = (from, from, from);
    loop {
        if p >= g.seg_units {
            w.end = End::Segment;
            break;
        }
        if p >= lim {
            w.end = End::File(addr(seg, p));
            break;
        }
        if p < lo || (p + slot_units).min(lim) > hi {
            lo = p;
            hi = (p + chunk_units).min(lim);
            buf.resize(((hi - lo) * unit) as usize, 0);
            storage.read_at(seg, lo * unit, &mut buf)?;
            w.reads += 1;
            w.bytes += buf.len() as u64;
        }
        let b = &buf[((p - lo) * unit) as usize..];
        w.records += 1;
        let Some(found) = g.check_at(b) else {
            w.end = End::Broken(addr(seg, p));
            break;
        };
        let step = found.units + found.pad;
        if p + step > g.seg_units {
            w.end = End::Broken(addr(seg, p));
            break;
        }
        let at = addr(seg, p);
        let len = (found.units * unit) as usize;
        let rec = Rec {
            at,
            next: g.after(at, step),
            found,
            bytes: &b[..len],
        };
        if !visit(rec) {
            w.end = End::Stopped(at);
            break;
        }
        p += step;
    }
    Ok(w)
}
