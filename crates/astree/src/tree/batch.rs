//! Changes applied as a batch: in key order, so that neighbouring keys share the path and
//! the leaf they change (each read and written once while it stays in the cache, where
//! the same changes in arrival order would touch the tree at random); into an empty tree,
//! a bottom-up build of full nodes written in key order (as LMDB's append mode and redb's
//! bulk paths do).
//!
//! A batch means exactly what the same changes made one after another mean: a stable sort
//! keeps the changes to one key in their order, so the last wins. Each change is logged
//! (logical commits) in the order it is applied, so replaying the log gives the same tree.

use super::BTree;
use crate::node::{Node, NodeId, NODE_HEADER, NONE};
use crate::packed::Packed;
use crate::store::NodeStore;
use crate::TreeError;

/// One change of a batch: `(key, Some(value))` inserts or updates, `(key, None)` removes.
pub type BatchOp<'a> = (&'a [u8], Option<&'a [u8]>);

impl<S: NodeStore> BTree<S> {
    /// Applies `ops` as if one after another (see the module's note), in key order. Into
    /// an empty tree, a batch of inserts only is built bottom-up with full nodes. Checks
    /// every entry's size before changing anything.
    pub fn apply_batch(&mut self, ops: &[BatchOp]) -> Result<(), TreeError> {
        for &(k, v) in ops {
            self.check_entry(k, v.unwrap_or(&[]))?;
        }
        let mut order: Vec<usize> = (0..ops.len()).collect();
        order.sort_by(|&a, &b| ops[a].0.cmp(ops[b].0));
        if ops.iter().all(|o| o.1.is_some()) && self.is_empty()? {
            let mut entries: Vec<(&[u8], &[u8])> = Vec::with_capacity(ops.len());
            for &i in &order {
                let (k, v) = (ops[i].0, ops[i].1.expect("inserts only"));
                match entries.last_mut() {
                    Some(last) if last.0 == k => last.1 = v,
                    _ => entries.push((k, v)),
                }
            }
            return self.build(&entries);
        }
        for &i in &order {
            match ops[i] {
                (k, Some(v)) => {
                    self.insert(k, v)?;
                }
                (k, None) => {
                    self.remove(k)?;
                }
            }
        }
        Ok(())
    }

    /// The tree holds no entry (its root is an empty leaf).
    fn is_empty(&mut self) -> Result<bool, TreeError> {
        let root = self.root();
        Ok(matches!(&*self.store.read(root)?, Node::Leaf { keys, .. } if keys.is_empty()))
    }

    /// Replaces the empty tree by one holding `entries` (sorted, keys unique): leaves
    /// filled as far as a node may be (at most `fanout` keys and the store's node size),
    /// then each level of internal nodes above them, every node written once, in key
    /// order. The last two nodes of a level share their entries when the last alone would
    /// be underfull, so no node starts out needing a merge.
    fn build(&mut self, entries: &[(&[u8], &[u8])]) -> Result<(), TreeError> {
        if entries.is_empty() {
            return Ok(());
        }
        for &(k, v) in entries {
            self.store.log_insert(k, v)?;
        }
        let node_bytes = self.store.node_bytes();
        let leaf_cost = |i: usize| 2 + entries[i].0.len() + 4 + entries[i].1.len();
        let leaves = self.chunks(entries.len(), false, leaf_cost);
        // Leaves, each written once the next one's ID is known (its `next`).
        let mut level: Vec<(Vec<u8>, NodeId)> = Vec::with_capacity(leaves.len());
        let mut pending: Option<(NodeId, Node)> = None;
        for range in leaves {
            let id = self.store.allocate()?;
            let mut keys = Packed::with_capacity(range.len(), node_bytes);
            let mut values = Packed::with_capacity(range.len(), node_bytes);
            for &(k, v) in &entries[range.clone()] {
                keys.push(k);
                values.push(v);
            }
            if let Some((pid, mut prev)) = pending.take() {
                if let Node::Leaf { next, .. } = &mut prev {
                    *next = id;
                }
                self.store.write_owned(pid, prev)?;
            }
            level.push((entries[range.start].0.to_vec(), id));
            pending = Some((
                id,
                Node::Leaf {
                    keys,
                    values,
                    next: NONE,
                },
            ));
        }
        if let Some((pid, prev)) = pending {
            self.store.write_owned(pid, prev)?;
        }
        // Internal levels: a node's keys are the smallest keys of its children but the
        // first (children[i] holds keys below keys[i]).
        while level.len() > 1 {
            let cost = |i: usize| 2 + level[i].0.len() + 8;
            let nodes = self.chunks(level.len(), true, cost);
            let mut up = Vec::with_capacity(nodes.len());
            for range in nodes {
                let id = self.store.allocate()?;
                let mut keys = Packed::with_capacity(range.len(), node_bytes);
                for (first, _) in &level[range.start + 1..range.end] {
                    keys.push(first);
                }
                let children = level[range.clone()].iter().map(|&(_, c)| c).collect();
                self.store
                    .write_owned(id, Node::Internal { keys, children })?;
                up.push((std::mem::take(&mut level[range.start].0), id));
            }
            level = up;
        }
        let old_root = self.root();
        self.store.set_root(level[0].1);
        self.store.free(old_root)
    }

    /// Splits items `0..n` (a leaf level's entries, or an internal level's children) into
    /// consecutive nodes, each as full as it may be: at most `fanout` keys and the node
    /// size, item `i` taking `cost(i)` bytes (an internal node's first child's key is not
    /// in it: counting it anyway errs on the safe side). When the last node would be
    /// underfull, the last two split their items evenly (if both halves fit).
    fn chunks(
        &self,
        n: usize,
        internal: bool,
        cost: impl Fn(usize) -> usize,
    ) -> Vec<std::ops::Range<usize>> {
        let (limit_bytes, fanout) = (self.store.node_bytes(), self.fanout);
        // An internal node's keys are its children but one.
        let keys = |r: &std::ops::Range<usize>| r.len() - usize::from(internal);
        let bytes = |r: &std::ops::Range<usize>| NODE_HEADER + r.clone().map(&cost).sum::<usize>();
        let fits = |r: &std::ops::Range<usize>| keys(r) <= fanout && bytes(r) <= limit_bytes;
        let mut out = Vec::new();
        let mut start = 0;
        while start < n {
            let (mut end, mut used) = (start, NODE_HEADER);
            while end < n && keys(&(start..end + 1)) <= fanout && used + cost(end) <= limit_bytes {
                used += cost(end);
                end += 1;
            }
            // (Entries are checked to fit a node: at least one item always does.)
            let end = end.max(start + 1);
            out.push(start..end);
            start = end;
        }
        if let [.., before, last] = &mut out[..] {
            if keys(last) < fanout / 4 || bytes(last) < limit_bytes / 4 {
                let (from, to) = (before.start, last.end);
                let mid = from + (to - from).div_ceil(2);
                if fits(&(from..mid)) && fits(&(mid..to)) {
                    (*before, *last) = (from..mid, mid..to);
                }
            }
        }
        out
    }
}
