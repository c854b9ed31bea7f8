//! BFTL (Wu, Kuo & Chang, 2003), the B-tree layer for flash that paper 004 compares with:
//! a node is never written whole; each change to it becomes an *index unit* (IU) kept in a
//! reservation buffer; a full buffer is written as 512-byte sectors (IUs of one node packed
//! together) appended to the log, and a node translation table (NTT, in RAM) lists the
//! sectors holding each node's IUs. Reading a node reads every sector run on its list and
//! replays the IUs. When a list grows past `max_list` (C, default 3) the node is compacted:
//! its whole content is written again as fresh IUs and its list restarts.
//!
//! The tree hands whole nodes to [`NodeStore::write`]; the store turns the difference from
//! the node's previous version (remembered from the tree's read just before) into IUs.
//! The NTT lives in RAM only, as in BFTL: the store does not survive a reopen.

use crate::node::{IdMap, Node, NodeId, NONE};
use crate::storage::Storage;
use crate::store::{NodeStore, StoreStats};
use crate::TreeError;
use std::collections::BTreeMap;
use std::sync::Arc;

pub const SECTOR_BYTES: usize = 512;
const IU_HEADER: usize = 8 + 1 + 2 + 4;

/// One index unit: a change to one node.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Iu {
    /// Start over: the node's content is what follows.
    Reset {
        leaf: bool,
    },
    /// Key with its value (leaf) or its right child (internal, 8-byte id).
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    Del {
        key: Vec<u8>,
    },
    /// Leaf: next leaf; internal: leftmost child.
    Link(NodeId),
}

impl Iu {
    fn bytes(&self) -> usize {
        IU_HEADER
            + match self {
                Iu::Reset { .. } => 0,
                Iu::Put { key, value } => key.len() + value.len(),
                Iu::Del { key } => key.len(),
                Iu::Link(_) => 8,
            }
    }
}

/// A node as a map (the form IUs replay into): its entries sorted by key, each key once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Content {
    leaf: bool,
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    link: NodeId,
}

impl Content {
    fn of(node: &Node) -> Content {
        let c = match node {
            Node::Leaf { keys, values, next } => Content {
                leaf: true,
                entries: keys
                    .iter()
                    .map(<[u8]>::to_vec)
                    .zip(values.iter().map(<[u8]>::to_vec))
                    .collect(),
                link: *next,
            },
            Node::Internal { keys, children } => Content {
                leaf: false,
                entries: keys
                    .iter()
                    .map(<[u8]>::to_vec)
                    .zip(children[1..].iter().map(|c| c.to_le_bytes().to_vec()))
                    .collect(),
                link: children[0],
            },
        };
        debug_assert!(
            c.entries.windows(2).all(|w| w[0].0 < w[1].0),
            "a node's keys are sorted"
        );
        c
    }

    fn node(&self) -> Node {
        let keys = self.entries.iter().map(|(k, _)| k.clone()).collect();
        if self.leaf {
            Node::Leaf {
                keys,
                values: self.entries.iter().map(|(_, v)| v.clone()).collect(),
                next: self.link,
            }
        } else {
            let mut children = vec![self.link];
            children.extend(
                self.entries.iter().map(|(_, v)| {
                    u64::from_le_bytes(v.as_slice().try_into().expect("8-byte child"))
                }),
            );
            Node::Internal { keys, children }
        }
    }

    /// Where `key` is, or would go.
    fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|(k, _)| k.as_slice().cmp(key))
    }

    fn apply(&mut self, iu: Iu) {
        match iu {
            Iu::Reset { leaf } => {
                self.leaf = leaf;
                self.entries.clear();
                self.link = NONE;
            }
            Iu::Put { key, value } => {
                // A node's IUs mostly come in key order (a compaction writes them so).
                if self.entries.last().is_none_or(|(last, _)| *last < key) {
                    self.entries.push((key, value));
                    return;
                }
                match self.find(&key) {
                    Ok(i) => self.entries[i].1 = value,
                    Err(i) => self.entries.insert(i, (key, value)),
                }
            }
            Iu::Del { key } => {
                if let Ok(i) = self.find(&key) {
                    self.entries.remove(i);
                }
            }
            Iu::Link(l) => self.link = l,
        }
    }

    /// IUs turning `self` into `new`: the puts of new or changed entries in key order,
    /// then the deletes of entries gone in key order, then the link if it changed (one
    /// merge of the two sorted lists).
    fn diff(&self, new: &Content) -> Vec<Iu> {
        if self.leaf != new.leaf {
            return new.full();
        }
        let mut out = Vec::new();
        let mut gone = Vec::new();
        let (old, new_entries) = (&self.entries, &new.entries);
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new_entries.len() {
            let order = match (old.get(i), new_entries.get(j)) {
                (Some(o), Some(n)) => o.0.cmp(&n.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                _ => std::cmp::Ordering::Greater,
            };
            match order {
                std::cmp::Ordering::Less => {
                    gone.push(Iu::Del {
                        key: old[i].0.clone(),
                    });
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    let (k, v) = &new_entries[j];
                    out.push(Iu::Put {
                        key: k.clone(),
                        value: v.clone(),
                    });
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    if old[i].1 != new_entries[j].1 {
                        let (k, v) = &new_entries[j];
                        out.push(Iu::Put {
                            key: k.clone(),
                            value: v.clone(),
                        });
                    }
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend(gone);
        if self.link != new.link {
            out.push(Iu::Link(new.link));
        }
        out
    }

    fn full(&self) -> Vec<Iu> {
        let mut out = vec![Iu::Reset { leaf: self.leaf }, Iu::Link(self.link)];
        out.extend(self.entries.iter().map(|(k, v)| Iu::Put {
            key: k.clone(),
            value: v.clone(),
        }));
        out
    }
}

pub struct BftlStore<S: Storage> {
    storage: S,
    node_bytes: usize,
    buffer_bytes: usize,
    /// The reservation buffer is also full at this many IUs (`usize::MAX`: bytes only).
    max_ius: usize,
    pending_ius: usize,
    max_list: usize,
    /// Reservation buffer: IUs in arrival order, per node.
    pending: BTreeMap<NodeId, Vec<Iu>>,
    pending_bytes: usize,
    /// NTT: the sector runs (first sector, sectors) holding each node's IUs, oldest first.
    ntt: IdMap<Vec<(u64, u64)>>,
    /// Sector contents by sector number (the log's sectors are immutable once written).
    sectors_written: u64,
    /// Latest content of recently read or written nodes, for diffing.
    recent: IdMap<Content>,
    /// The sectors of the last run read (reused: a read allocates nothing).
    sector_buf: Vec<u8>,
    root: Option<NodeId>,
    next_id: NodeId,
    compactions: u64,
    stats: StoreStats,
}

impl<S: Storage> BftlStore<S> {
    /// BFTL over empty `storage`: `buffer_sectors` sectors of reservation buffer, lists of
    /// at most `max_list` sectors per node before compaction.
    pub fn new(
        storage: S,
        node_bytes: usize,
        buffer_sectors: usize,
        max_list: usize,
    ) -> Result<Self, TreeError> {
        if buffer_sectors == 0 || max_list == 0 || node_bytes < 256 {
            return Err(TreeError::Config("BFTL needs a buffer of at least one sector, C of at least 1 and nodes of at least 256 bytes".into()));
        }
        if storage.len() != 0 {
            return Err(TreeError::Config(
                "BFTL keeps its node translation table in RAM only: it cannot reopen a file".into(),
            ));
        }
        Ok(BftlStore {
            storage,
            node_bytes,
            buffer_bytes: buffer_sectors * SECTOR_BYTES,
            max_ius: usize::MAX,
            pending_ius: 0,
            max_list,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            ntt: IdMap::default(),
            sectors_written: 0,
            recent: IdMap::default(),
            sector_buf: Vec::new(),
            root: None,
            next_id: 0,
            compactions: 0,
            stats: StoreStats::default(),
        })
    }

    /// The reservation buffer also counted in IUs: it is written out when it holds
    /// `ius` of them (or its bytes fill its sectors, whichever comes first). Paper 004
    /// keeps "the most IUs the reservation buffer holds" equal to the fanout F.
    pub fn with_max_ius(mut self, ius: usize) -> Result<Self, TreeError> {
        if ius == 0 {
            return Err(TreeError::Config(
                "BFTL's reservation buffer needs room for at least one index unit".into(),
            ));
        }
        self.max_ius = ius;
        Ok(self)
    }

    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    fn encode_iu(node: NodeId, iu: &Iu, out: &mut Vec<u8>) {
        out.extend_from_slice(&node.to_le_bytes());
        let (op, a, b): (u8, &[u8], Vec<u8>) = match iu {
            Iu::Reset { leaf } => (if *leaf { 1 } else { 2 }, &[], vec![]),
            Iu::Put { key, value } => (3, key, value.clone()),
            Iu::Del { key } => (4, key, vec![]),
            Iu::Link(l) => (5, &[], l.to_le_bytes().to_vec()),
        };
        out.push(op);
        out.extend_from_slice(&(a.len() as u16).to_le_bytes());
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(&b);
    }

    /// The IUs of node `only` in `sector` (sector number `sector_no`), in order; every IU's
    /// frame is checked, the others' bodies are skipped.
    /// The IUs of node `only` in `sector` (sectors from `sector_no` on), in order, to `out`.
    fn decode_ius(
        sector: &[u8],
        sector_no: u64,
        only: NodeId,
        mut out: impl FnMut(Iu),
    ) -> Result<(), TreeError> {
        let mut at = 0;
        while at + IU_HEADER <= sector.len() {
            // An IU never starts where its header would cross into the next sector.
            let room = SECTOR_BYTES - at % SECTOR_BYTES;
            if room < IU_HEADER {
                at += room;
                continue;
            }
            let node = u64::from_le_bytes(sector[at..at + 8].try_into().expect("8"));
            let op = sector[at + 8];
            if op == 0 {
                // Padding: the rest of this sector is empty; go on with the next.
                at = (at / SECTOR_BYTES + 1) * SECTOR_BYTES;
                continue;
            }
            let al = u16::from_le_bytes(sector[at + 9..at + 11].try_into().expect("2")) as usize;
            let bl = u32::from_le_bytes(sector[at + 11..at + 15].try_into().expect("4")) as usize;
            let body = at + IU_HEADER;
            if body + al + bl > sector.len() {
                return Err(TreeError::Corrupt {
                    id: node,
                    offset: sector_no * SECTOR_BYTES as u64,
                    msg: "index unit runs past its sector".into(),
                });
            }
            if node != only && (1..=5).contains(&op) {
                at = body + al + bl;
                continue;
            }
            let (a, b) = (
                sector[body..body + al].to_vec(),
                sector[body + al..body + al + bl].to_vec(),
            );
            let iu = match op {
                1 | 2 => Iu::Reset { leaf: op == 1 },
                3 => Iu::Put { key: a, value: b },
                4 => Iu::Del { key: a },
                5 => Iu::Link(u64::from_le_bytes(b.as_slice().try_into().map_err(
                    |_| TreeError::Corrupt {
                        id: node,
                        offset: 0,
                        msg: "bad link".into(),
                    },
                )?)),
                _ => {
                    return Err(TreeError::Corrupt {
                        id: node,
                        offset: sector_no * SECTOR_BYTES as u64,
                        msg: format!("unknown index unit {op}"),
                    })
                }
            };
            out(iu);
            at = body + al + bl;
        }
        Ok(())
    }

    /// Writes the reservation buffer as sectors, each node's IUs packed together.
    fn commit(&mut self) -> Result<(), TreeError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let by_node = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.pending_ius = 0;
        // Pack each node's IUs together; a node's IUs of one commit form one run of
        // sectors, one entry on its list.
        let mut sectors: Vec<Vec<u8>> = Vec::new();
        let mut cur: Vec<u8> = Vec::new();
        let mut runs: Vec<(NodeId, usize, usize)> = Vec::new(); // node, first, last sector index
        for (n, ius) in &by_node {
            let mut first = None;
            for iu in ius {
                if !cur.is_empty() && cur.len() + iu.bytes() > SECTOR_BYTES {
                    sectors.push(std::mem::take(&mut cur));
                }
                first.get_or_insert(sectors.len());
                Self::encode_iu(*n, iu, &mut cur);
            }
            if let Some(f) = first {
                runs.push((*n, f, sectors.len()));
            }
        }
        if !cur.is_empty() {
            sectors.push(cur);
        }
        // Sector index → first sector number (an IU larger than a sector spans several).
        let first = self.sectors_written;
        let mut start = Vec::with_capacity(sectors.len() + 1);
        let mut out = Vec::with_capacity(sectors.len() * SECTOR_BYTES);
        let mut at = first;
        for sct in &sectors {
            start.push(at);
            let count = sct.len().max(1).div_ceil(SECTOR_BYTES);
            let mut padded = sct.clone();
            padded.resize(count * SECTOR_BYTES, 0);
            out.extend_from_slice(&padded);
            at += count as u64;
        }
        start.push(at);
        self.storage.write_at(first * SECTOR_BYTES as u64, &out)?;
        self.stats.write_requests += 1;
        self.stats.bytes_written += out.len() as u64;
        for (n, f, l) in runs {
            self.ntt
                .entry(n)
                .or_default()
                .push((start[f], start[l + 1] - start[f]));
        }
        self.sectors_written = at;
        // Compact nodes whose lists grew past C.
        let long: Vec<NodeId> = by_node
            .keys()
            .copied()
            .filter(|n| self.ntt.get(n).is_some_and(|l| l.len() > self.max_list))
            .collect();
        for n in long {
            let content = self.load(n)?;
            self.ntt.insert(n, Vec::new());
            self.compactions += 1;
            for iu in content.full() {
                self.pending_bytes += iu.bytes();
                self.pending_ius += 1;
                self.pending.entry(n).or_default().push(iu);
            }
        }
        Ok(())
    }

    /// Replays a node's sectors and pending IUs.
    fn load(&mut self, id: NodeId) -> Result<Content, TreeError> {
        let mut c = Content::default();
        let list = self.ntt.get(&id).map_or(&[][..], Vec::as_slice);
        for &(s, count) in list {
            let sector = &mut self.sector_buf;
            sector.resize(SECTOR_BYTES * count as usize, 0);
            self.storage.read_at(s * SECTOR_BYTES as u64, sector)?;
            self.stats.read_requests += 1;
            self.stats.bytes_read += sector.len() as u64;
            Self::decode_ius(sector, s, id, |iu| c.apply(iu))?;
        }
        for iu in self.pending.get(&id).into_iter().flatten() {
            c.apply(iu.clone());
        }
        Ok(c)
    }
}

impl<S: Storage> NodeStore for BftlStore<S> {
    fn node_bytes(&self) -> usize {
        self.node_bytes
    }

    fn read(&mut self, id: NodeId) -> Result<Arc<Node>, TreeError> {
        if !self.ntt.contains_key(&id) && !self.pending.contains_key(&id) {
            return Err(TreeError::MissingNode(id));
        }
        let c = self.load(id)?;
        self.stats.node_reads += 1;
        let node = c.node();
        self.recent.insert(id, c);
        Ok(Arc::new(node))
    }

    fn write(&mut self, id: NodeId, node: &Node) -> Result<(), TreeError> {
        let new = Content::of(node);
        let known = self.ntt.contains_key(&id) || self.pending.contains_key(&id);
        let ius = if known {
            let old = match self.recent.remove(&id) {
                Some(c) => c,
                None => self.load(id)?,
            };
            old.diff(&new)
        } else {
            new.full()
        };
        for iu in ius {
            self.pending_bytes += iu.bytes();
            self.pending_ius += 1;
            self.pending.entry(id).or_default().push(iu);
        }
        self.ntt.entry(id).or_default();
        self.recent.insert(id, new);
        if self.recent.len() > 64 {
            self.recent.clear();
        }
        self.stats.node_writes += 1;
        if self.pending_bytes >= self.buffer_bytes || self.pending_ius >= self.max_ius {
            self.commit()?;
        }
        Ok(())
    }

    fn allocate(&mut self) -> Result<NodeId, TreeError> {
        self.next_id += 1;
        Ok(self.next_id - 1)
    }

    fn free(&mut self, id: NodeId) -> Result<(), TreeError> {
        self.ntt.remove(&id);
        self.recent.remove(&id);
        if let Some(ius) = self.pending.remove(&id) {
            self.pending_bytes -= ius.iter().map(Iu::bytes).sum::<usize>();
            self.pending_ius -= ius.len();
        }
        Ok(())
    }

    fn root(&self) -> Option<NodeId> {
        self.root
    }

    fn set_root(&mut self, id: NodeId) {
        self.root = Some(id);
    }

    fn sync(&mut self) -> Result<(), TreeError> {
        self.commit()?;
        self.stats.syncs += 1;
        self.storage.sync()
    }

    fn stats(&self) -> StoreStats {
        self.stats.clone()
    }

    fn file_bytes(&self) -> u64 {
        self.storage.len()
    }

    fn io_time(&self) -> crate::storage::IoTime {
        self.storage.io_time()
    }

    fn now_ns(&self) -> u64 {
        self.storage.now_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemStorage;
    use crate::BTree;

    #[test]
    fn inserts_and_reads_back() {
        let store = BftlStore::new(MemStorage::new(), 1024, 2, 3).unwrap();
        let mut t = BTree::new(store, 8).unwrap();
        for i in 0..300u32 {
            let k = format!("k{:05}", (i * 7919) % 1000);
            t.insert(k.as_bytes(), &[i as u8; 5]).unwrap();
            if let Err(e) = t.check() {
                panic!("after insert {i}: {e}");
            }
        }
        assert_eq!(t.check().unwrap(), 300);
        for i in 0..300u32 {
            let k = format!("k{:05}", (i * 7919) % 1000);
            assert!(t.remove(k.as_bytes()).unwrap().is_some(), "remove {i}");
            if let Err(e) = t.check() {
                panic!("after remove {i}: {e}");
            }
        }
    }

    #[test]
    fn a_reservation_buffer_counted_in_ius_commits_sooner_and_reads_back() {
        // Bytes alone: 64 sectors (32 KiB) of buffer; counted in IUs: at most 8 of them.
        let run = |ius: Option<usize>| {
            let mut store = BftlStore::new(MemStorage::new(), 1024, 64, 3).unwrap();
            if let Some(n) = ius {
                store = store.with_max_ius(n).unwrap();
            }
            let mut t = BTree::new(store, 8).unwrap();
            for i in 0..400u32 {
                let k = format!("k{:05}", (i * 7919) % 1000);
                t.insert(k.as_bytes(), &[i as u8; 5]).unwrap();
            }
            assert_eq!(t.check().unwrap(), 400);
            t.store().stats().write_requests
        };
        let (bytes_only, counted) = (run(None), run(Some(8)));
        assert!(
            counted > 4 * bytes_only,
            "{counted} vs {bytes_only} commits"
        );
        assert!(BftlStore::new(MemStorage::new(), 1024, 2, 3)
            .unwrap()
            .with_max_ius(0)
            .is_err());
    }
}
