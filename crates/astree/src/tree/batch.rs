//! Changes applied as a batch: in key order, so that neighbouring keys share the path and
//! the leaf they change (each read and written once while it stays in the cache, where
//! the same changes in arrival order would touch the tree at random); into an empty tree,
//! a bottom-up build of nodes filled as PostgreSQL's index build fills them, written in
//! key order (as LMDB's append mode and redb's bulk paths do).
//!
//! A batch means exactly what the same changes made one after another mean: a stable sort
//! keeps the changes to one key in their order, so the last wins. Each change is logged
//! (logical commits) in the order it is applied, so replaying the log gives the same tree;
//! a bottom-up build is committed as nodes instead ([`NodeStore::commit_nodes_next`]).

use super::BTree;
use crate::node::{Node, NodeId, NODE_HEADER, NONE};
use crate::packed::Packed;
use crate::store::NodeStore;
use crate::TreeError;

/// How full a bottom-up build fills leaves and internal nodes, in percent of their limits
/// (keys and bytes): PostgreSQL's B-tree index build (`BTREE_DEFAULT_FILLFACTOR` 90 and
/// `BTREE_NONLEAF_FILLFACTOR` 70 in src/include/access/nbtree.h), so that inserts after
/// the build find room instead of splitting every node they reach.
pub const LEAF_FILL_PERCENT: usize = 90;
pub const INTERNAL_FILL_PERCENT: usize = 70;

/// What a change does to a leaf ([`BTree::apply_batch`]'s fast path).
enum Effect {
    /// Nothing (a remove of a key the leaf does not hold).
    None,
    /// A change that leaves the leaf within its limits; the key's place in it
    /// (`binary_search`'s answer).
    Fits(Result<usize, usize>),
    /// A change that would split or merge the leaf.
    Breaks,
}

/// Makes change `(key, value)` to `leaf`, the key's place in it being `at_key`
/// (`binary_search`'s answer; a remove only of a key the leaf holds).
fn change_leaf(leaf: &mut Node, at_key: Result<usize, usize>, key: &[u8], value: Option<&[u8]>) {
    let Node::Leaf { keys, values, .. } = leaf else {
        unreachable!("only leaves are changed here")
    };
    match (at_key, value) {
        (Ok(j), Some(v)) => {
            values.replace(j, v);
        }
        (Err(j), Some(v)) => {
            keys.insert(j, key);
            values.insert(j, v);
        }
        (Ok(j), None) => {
            keys.remove(j);
            values.remove(j);
        }
        (Err(_), None) => {}
    }
}

/// One change of a batch: `(key, Some(value))` inserts or updates, `(key, None)` removes.
pub type BatchOp<'a> = (&'a [u8], Option<&'a [u8]>);

/// The positions of `ops` in key order, equal keys in their order in `ops`. Sorted on each
/// key's first eight bytes held beside its position (most comparisons end there, without
/// following the key's pointer), then the key, then the position: unstable sorting of
/// distinct tuples, so stable in effect.
fn key_order(ops: &[BatchOp]) -> Vec<usize> {
    let prefix = |k: &[u8]| {
        let mut b = [0u8; 8];
        let n = k.len().min(8);
        b[..n].copy_from_slice(&k[..n]);
        u64::from_be_bytes(b)
    };
    let mut order: Vec<(u64, usize)> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| (prefix(o.0), i))
        .collect();
    order.sort_unstable_by(|&(pa, a), &(pb, b)| {
        pa.cmp(&pb)
            .then_with(|| ops[a].0.cmp(ops[b].0))
            .then(a.cmp(&b))
    });
    order.into_iter().map(|(_, i)| i).collect()
}

impl<S: NodeStore> BTree<S> {
    /// Applies `ops` as if one after another (see the module's note), in key order. Into
    /// an empty tree, a batch of inserts only is built bottom-up. Checks
    /// every entry's size before changing anything.
    ///
    /// A tree that defers changes ([`BTree::defer_changes`]) logs the batch and defers it
    /// when it fits the budget (after making the changes deferred so far, if it does not
    /// fit beside them); a larger batch, or one of inserts only into an empty tree, is
    /// made to the nodes at once.
    pub fn apply_batch(&mut self, ops: &[BatchOp]) -> Result<(), TreeError> {
        for &(k, v) in ops {
            self.check_entry(k, v.unwrap_or(&[]))?;
        }
        let inserts_only = ops.iter().all(|o| o.1.is_some());
        if self.deferred.budget_bytes > 0 {
            let bulk = inserts_only && self.deferred.is_empty() && self.is_empty()?;
            let cost = super::Deferred::batch_cost(ops);
            if !bulk && cost <= self.deferred.budget_bytes {
                if !self.deferred.has_room(cost) {
                    self.make_deferred()?;
                }
                for &(k, v) in ops {
                    self.log(k, v)?;
                }
                self.deferred.put_batch(ops);
                return Ok(());
            }
            self.make_deferred()?;
        }
        let order = key_order(ops);
        if inserts_only && self.is_empty()? {
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
        self.apply_in_order(ops, &order, true)
    }

    /// Makes `ops` to the nodes in the order `order` gives (key order, equal keys in
    /// their order in `ops`), logging each change if `log` (deferred changes were logged
    /// when they were made).
    pub(super) fn apply_in_order(
        &mut self,
        ops: &[BatchOp],
        order: &[usize],
        log: bool,
    ) -> Result<(), TreeError> {
        // Leaf by leaf: the changes that fall in one leaf and leave it neither overfull nor
        // underfull are made to it at once (one descent, one write); a change that would
        // split or merge takes the general path.
        let mut at = 0;
        while at < order.len() {
            let (leaf_id, hi) = self.leaf_for(ops[order[at]].0)?;
            let mut shared = Some(self.store.read(leaf_id)?);
            let mut owned: Option<Node> = None;
            let first = at;
            while let Some(&i) = order.get(at) {
                let (k, v) = ops[i];
                if hi.as_deref().is_some_and(|h| k >= h) {
                    break;
                }
                let leaf = owned.as_ref().or(shared.as_deref()).expect("one of them");
                match self.effect(leaf, k, v) {
                    Effect::None => {}
                    Effect::Breaks => break,
                    Effect::Fits(at_key) => {
                        if owned.is_none() {
                            let s = shared.take().expect("not taken yet");
                            owned = Some(self.store.take(leaf_id, s));
                        }
                        change_leaf(owned.as_mut().expect("taken above"), at_key, k, v);
                        if log {
                            self.log(k, v)?;
                        }
                    }
                }
                at += 1;
            }
            drop(shared);
            if let Some(node) = owned {
                self.store.write_owned(leaf_id, node)?;
            }
            if at == first {
                // The first change splits or merges: the general path.
                match ops[order[at]] {
                    (k, Some(v)) => {
                        self.apply_insert(k, v)?;
                        if log {
                            self.log(k, Some(v))?;
                        }
                    }
                    (k, None) => {
                        if self.apply_remove(k)?.is_some() && log {
                            self.log(k, None)?;
                        }
                    }
                }
                at += 1;
            }
        }
        Ok(())
    }

    /// The leaf whose range holds `key`, and the range's end (exclusive; None: the last
    /// leaf).
    fn leaf_for(&mut self, key: &[u8]) -> Result<(NodeId, Option<Vec<u8>>), TreeError> {
        let (mut id, mut hi) = (self.root(), None);
        loop {
            match &*self.store.read(id)? {
                Node::Internal { keys, children } => {
                    let c = keys.upper_bound(key);
                    if c < keys.len() {
                        hi = Some(keys[c].to_vec());
                    }
                    id = children[c];
                }
                Node::Leaf { .. } => return Ok((id, hi)),
            }
        }
    }

    /// What a change does to `leaf`: nothing (a remove of a missing key), or leaves it
    /// within its limits, or would split or merge it.
    fn effect(&self, leaf: &Node, key: &[u8], value: Option<&[u8]>) -> Effect {
        let Node::Leaf { keys, values, .. } = leaf else {
            return Effect::Breaks;
        };
        let (len, bytes) = (keys.len(), leaf.encoded_bytes());
        // An entry's share of the image: its two lengths (2 + 4 bytes), key and value.
        let at_key = keys.binary_search(key);
        let (len, bytes) = match (at_key, value) {
            (Ok(j), Some(v)) => (len, bytes - values[j].len() + v.len()),
            (Err(_), Some(v)) => (len + 1, bytes + 6 + key.len() + v.len()),
            (Ok(j), None) => (len - 1, bytes - 6 - key.len() - values[j].len()),
            (Err(_), None) => return Effect::None,
        };
        if self.overfull_at(len, bytes) || (value.is_none() && self.underfull_at(len, bytes)) {
            Effect::Breaks
        } else {
            Effect::Fits(at_key)
        }
    }

    /// The tree holds no entry (its root is an empty leaf).
    fn is_empty(&mut self) -> Result<bool, TreeError> {
        let root = self.root();
        Ok(matches!(&*self.store.read(root)?, Node::Leaf { keys, .. } if keys.is_empty()))
    }

    /// Replaces the empty tree by one holding `entries` (sorted, keys unique): leaves
    /// filled to [`LEAF_FILL_PERCENT`] of what a node may hold (`fanout` keys, the store's
    /// node size),
    /// then each level of internal nodes above them, every node written once, in key
    /// order. The last two nodes of a level share their entries when the last alone would
    /// be underfull, so no node starts out needing a merge.
    fn build(&mut self, entries: &[(&[u8], &[u8])]) -> Result<(), TreeError> {
        if entries.is_empty() {
            return Ok(());
        }
        // Its nodes are fewer bytes than its operations: committed as nodes.
        self.store.commit_nodes_next();
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
    /// consecutive nodes, each filled to [`LEAF_FILL_PERCENT`] or [`INTERNAL_FILL_PERCENT`]
    /// of the fanout's keys and the node size (but never fewer than one entry or two
    /// children, which fit a node: entries are checked), item `i` taking `cost(i)` bytes
    /// (an internal node's first child's key is not in it: counting it anyway errs on the
    /// safe side). When the last node would be underfull, the last two split their items
    /// evenly (if both halves fit).
    fn chunks(
        &self,
        n: usize,
        internal: bool,
        cost: impl Fn(usize) -> usize,
    ) -> Vec<std::ops::Range<usize>> {
        let (node_bytes, fanout) = (self.store.node_bytes(), self.fanout);
        let fill = if internal {
            INTERNAL_FILL_PERCENT
        } else {
            LEAF_FILL_PERCENT
        };
        // Filled to `fill` percent of the limits (at least two children, one entry).
        let (limit_bytes, limit_keys) = (node_bytes * fill / 100, (fanout * fill / 100).max(1));
        // An internal node's keys are its children but one.
        let keys = |r: &std::ops::Range<usize>| r.len() - usize::from(internal);
        let bytes = |r: &std::ops::Range<usize>| NODE_HEADER + r.clone().map(&cost).sum::<usize>();
        let fits = |r: &std::ops::Range<usize>| keys(r) <= limit_keys && bytes(r) <= limit_bytes;
        let mut out = Vec::new();
        let mut start = 0;
        while start < n {
            let (mut end, mut used) = (start, NODE_HEADER);
            while end < n
                && (keys(&(start..end + 1)) <= limit_keys && used + cost(end) <= limit_bytes
                    || end - start < 1 + usize::from(internal))
            {
                used += cost(end);
                end += 1;
            }
            out.push(start..end);
            start = end;
        }
        if let [.., before, last] = &mut out[..] {
            if self.underfull_at(keys(last), bytes(last)) {
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
