//! The B+tree: sorted byte-string keys to byte-string values over any [`NodeStore`].
//!
//! A node splits when it holds more than `fanout` keys or its image outgrows the store's
//! node size; after a delete, a node with fewer than a quarter of the fanout's keys and
//! under a quarter of the node size borrows from a sibling or merges with it. (Half
//! would be the textbook bound, but a node split by bytes can hold fewer than half the
//! fanout's keys, and would then merge again at the next delete; and a node full by
//! bytes at a third of the fanout's keys is not underfull at a sixth.) Nodes on the path that
//! do not change are only read, never copied. Leaves are linked
//! for range scans. Every modified node is written back through the store, which decides
//! where it goes (in place, or appended).

use crate::node::{Node, NodeId, Step, NONE};
use crate::store::{LoggedOp, NodeStore};
use crate::TreeError;
use std::sync::Arc;

mod batch;
mod deferred;

pub use batch::{BatchOp, INTERNAL_FILL_PERCENT, LEAF_FILL_PERCENT};
use deferred::Deferred;
pub use deferred::DEFERRED_ENTRY_OVERHEAD_BYTES;

/// Key-value pairs in key order.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

pub struct BTree<S: NodeStore> {
    store: S,
    fanout: usize,
    /// Committed changes not yet made to the nodes ([`BTree::defer_changes`]).
    deferred: Deferred,
}

enum Insert {
    Done(Option<Vec<u8>>),
    Split {
        old: Option<Vec<u8>>,
        separator: Vec<u8>,
        right: NodeId,
    },
}

impl<S: NodeStore> BTree<S> {
    /// A tree over `store` with at most `fanout` keys per node (the store may already hold
    /// a tree).
    pub fn new(mut store: S, fanout: usize) -> Result<Self, TreeError> {
        if fanout < 4 {
            return Err(TreeError::Config(format!(
                "fanout {fanout} must be at least 4"
            )));
        }
        if store.root().is_none() {
            let id = store.allocate()?;
            store.write(id, &Node::empty_leaf())?;
            store.set_root(id);
        }
        let replay = store.recovered_ops();
        let mut tree = BTree {
            store,
            fanout,
            deferred: Deferred::default(),
        };
        // Operations committed after the store's last node-level commit (they are in the
        // log already: replaying does not log them again).
        for op in replay {
            match op {
                LoggedOp::Insert(k, v) => {
                    tree.apply_insert(&k, &v)?;
                }
                LoggedOp::Remove(k) => {
                    tree.apply_remove(&k)?;
                }
            }
        }
        Ok(tree)
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    pub fn into_store(self) -> S {
        self.store
    }

    /// A node to modify (a copy if the cache shares it).
    fn load(&mut self, id: NodeId) -> Result<Node, TreeError> {
        let node = self.store.read(id)?;
        Ok(self.store.take(id, node))
    }

    fn root(&self) -> NodeId {
        self.store.root().expect("a tree always has a root")
    }

    fn overfull(&self, n: &Node) -> bool {
        self.overfull_at(n.len(), n.encoded_bytes())
    }

    fn underfull(&self, n: &Node) -> bool {
        self.underfull_at(n.len(), n.encoded_bytes())
    }

    /// A node of `len` keys and `bytes` encoded bytes breaks a limit.
    fn overfull_at(&self, len: usize, bytes: usize) -> bool {
        len > self.fanout || bytes > self.store.node_bytes()
    }

    /// A node of `len` keys and `bytes` encoded bytes holds less than a quarter of what
    /// it may: of the fanout's keys and of the node size (a node whose entries fill it by
    /// bytes long before the fanout is not underfull while it holds a quarter of the
    /// bytes).
    fn underfull_at(&self, len: usize, bytes: usize) -> bool {
        len < self.fanout / 4 && bytes < self.store.node_bytes() / 4
    }

    /// Checks that one entry can live in a node with room for its neighbours.
    fn check_entry(&self, key: &[u8], value: &[u8]) -> Result<(), TreeError> {
        let nb = self.store.node_bytes();
        if !entry_fits(nb, key.len(), value.len()) {
            return Err(TreeError::TooLarge {
                key_bytes: key.len(),
                value_bytes: value.len(),
                node_bytes: nb,
            });
        }
        Ok(())
    }

    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        self.get_with(key, <[u8]>::to_vec)
    }

    /// Looks `key` up and hands its value to `f` without copying it.
    pub fn get_with<R>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, TreeError> {
        // The thread's own cancellation (a library call's): stores without a token of
        // their own (in memory, on a simulated drive) stop here.
        if trace::cancel::requested() {
            return Err(TreeError::Interrupted);
        }
        if let Some(change) = self.deferred.get(key) {
            return Ok(change.map(f));
        }
        let mut id = self.root();
        let mut f = Some(f);
        loop {
            match self
                .store
                .find(id, key, |v| (f.take().expect("one leaf per lookup"))(v))?
            {
                Step::Child(child) => id = child,
                Step::Leaf(found) => return Ok(found),
            }
        }
    }

    /// Inserts or updates; returns the previous value.
    pub fn insert(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        if trace::cancel::requested() {
            return Err(TreeError::Interrupted);
        }
        self.check_entry(key, value)?;
        if self.deferred.budget_bytes > 0 {
            let old = self.get(key)?;
            self.defer(key, Some(value))?;
            return Ok(old);
        }
        let old = self.apply_insert(key, value)?;
        self.store.log_insert(key, value)?;
        Ok(old)
    }

    /// Logs a change and defers it (making the changes deferred so far first if it does
    /// not fit beside them).
    fn defer(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), TreeError> {
        if !self.deferred.has_room(Deferred::cost(key, value)) {
            self.make_deferred()?;
        }
        self.log(key, value)?;
        self.deferred.put(key, value);
        Ok(())
    }

    /// Logs a change made to the tree's contents (stores with logical commits keep it).
    fn log(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), TreeError> {
        match value {
            Some(v) => self.store.log_insert(key, v),
            None => self.store.log_remove(key),
        }
    }

    fn apply_insert(&mut self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        let root = self.root();
        match self.insert_at(root, key, value)? {
            Insert::Done(old) => Ok(old),
            Insert::Split {
                old,
                separator,
                right,
            } => {
                let new_root = self.store.allocate()?;
                self.store.write(
                    new_root,
                    &Node::Internal {
                        keys: [separator].iter().collect(),
                        children: vec![root, right],
                    },
                )?;
                self.store.set_root(new_root);
                Ok(old)
            }
        }
    }

    fn insert_at(&mut self, id: NodeId, key: &[u8], value: &[u8]) -> Result<Insert, TreeError> {
        let shared = self.store.read(id)?;
        let step = match &*shared {
            Node::Internal { keys, children } => {
                let i = keys.upper_bound(key);
                Some((i, children[i]))
            }
            Node::Leaf { .. } => None,
        };
        let (mut node, old) = match step {
            // An internal node changes only when its child splits.
            Some((i, child)) => match self.insert_at(child, key, value)? {
                Insert::Done(old) => return Ok(Insert::Done(old)),
                Insert::Split {
                    old,
                    separator,
                    right,
                } => {
                    let mut node = self.store.take(id, shared);
                    if let Node::Internal { keys, children } = &mut node {
                        keys.insert(i, &separator);
                        children.insert(i + 1, right);
                    }
                    (node, old)
                }
            },
            None => {
                let mut node = self.store.take(id, shared);
                let Node::Leaf { keys, values, .. } = &mut node else {
                    unreachable!("checked above")
                };
                let old = match keys.binary_search(key) {
                    Ok(i) => Some(values.replace(i, value)),
                    Err(i) => {
                        keys.insert(i, key);
                        values.insert(i, value);
                        None
                    }
                };
                (node, old)
            }
        };
        if !self.overfull(&node) {
            self.store.write_owned(id, node)?;
            return Ok(Insert::Done(old));
        }
        let (separator, right_node) = self.split(&mut node)?;
        let right = self.store.allocate()?;
        if let Node::Leaf { next, .. } = &mut node {
            *next = right;
        }
        self.store.write_owned(right, right_node)?;
        self.store.write_owned(id, node)?;
        Ok(Insert::Split {
            old,
            separator,
            right,
        })
    }

    /// Splits `node` in two by count; returns the separator and the right half (a leaf's
    /// right half takes over its `next`; the caller points the left half at it).
    fn split(&self, node: &mut Node) -> Result<(Vec<u8>, Node), TreeError> {
        match node {
            Node::Leaf { keys, values, next } => {
                let mid = keys.len() / 2;
                let rk = keys.split_off(mid);
                let rv = values.split_off(mid);
                Ok((
                    rk[0].to_vec(),
                    Node::Leaf {
                        keys: rk,
                        values: rv,
                        next: *next,
                    },
                ))
            }
            Node::Internal { keys, children } => {
                let mid = keys.len() / 2;
                let mut rk = keys.split_off(mid);
                let separator = rk.remove(0);
                let rc = children.split_off(mid + 1);
                Ok((
                    separator,
                    Node::Internal {
                        keys: rk,
                        children: rc,
                    },
                ))
            }
        }
    }

    /// Deletes `key`; returns its value.
    pub fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        if self.deferred.budget_bytes > 0 {
            let old = self.get(key)?;
            if old.is_some() {
                self.defer(key, None)?;
            }
            return Ok(old);
        }
        let old = self.apply_remove(key)?;
        if old.is_some() {
            self.store.log_remove(key)?;
        }
        Ok(old)
    }

    fn apply_remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        let root = self.root();
        let old = self.remove_at(root, key)?;
        // A root with one child hands over to it.
        if let Node::Internal { keys, children } = &*self.store.read(root)? {
            if keys.is_empty() {
                self.store.set_root(children[0]);
                self.store.free(root)?;
            }
        }
        Ok(old)
    }

    fn remove_at(&mut self, id: NodeId, key: &[u8]) -> Result<Option<Vec<u8>>, TreeError> {
        let shared = self.store.read(id)?;
        let step = match &*shared {
            Node::Internal { keys, children } => {
                let i = keys.upper_bound(key);
                Some((i, children[i]))
            }
            Node::Leaf { keys, .. } => {
                if keys.binary_search(key).is_err() {
                    return Ok(None);
                }
                None
            }
        };
        match step {
            None => {
                let mut node = self.store.take(id, shared);
                let Node::Leaf { keys, values, .. } = &mut node else {
                    unreachable!("checked above")
                };
                let i = keys.binary_search(key).expect("checked above");
                keys.remove(i);
                let v = values.remove(i);
                self.store.write_owned(id, node)?;
                Ok(Some(v))
            }
            // An internal node changes only when its child needs rebalancing.
            Some((i, child)) => {
                let old = self.remove_at(child, key)?;
                if old.is_some() {
                    let c = self.store.read(child)?;
                    if self.underfull(&c) {
                        let node = self.store.take(id, shared);
                        let c = self.store.take(child, c);
                        self.rebalance(id, node, i, c)?;
                    }
                }
                Ok(old)
            }
        }
    }

    /// Fixes the underfull child `i` of `parent` (node `pid`): borrow from a sibling, or
    /// merge with it.
    fn rebalance(
        &mut self,
        pid: NodeId,
        mut parent: Node,
        i: usize,
        child: Node,
    ) -> Result<(), TreeError> {
        let Node::Internal { keys, children } = &mut parent else {
            unreachable!("parents are internal")
        };
        // Work on the pair (left, right) = (i-1, i) or (i, i+1).
        let (li, ri) = if i + 1 < children.len() {
            (i, i + 1)
        } else {
            (i - 1, i)
        };
        let (lid, rid) = (children[li], children[ri]);
        let (mut left, mut right) = if li == i {
            (child, self.load(rid)?)
        } else {
            (self.load(lid)?, child)
        };
        let sep = keys[li].to_vec();
        // Try a merge first; it is the only fix when both are small.
        let merged = Self::merged(&left, &right, &sep);
        if !self.overfull(&merged) {
            self.store.write_owned(lid, merged)?;
            self.store.free(rid)?;
            keys.remove(li);
            children.remove(ri);
            self.store.write_owned(pid, parent)?;
            return Ok(());
        }
        // Otherwise redistribute evenly through the separator.
        let new_sep = Self::redistribute(&mut left, &mut right, sep);
        keys.replace(li, &new_sep);
        self.store.write_owned(lid, left)?;
        self.store.write_owned(rid, right)?;
        self.store.write_owned(pid, parent)?;
        Ok(())
    }

    fn merged(left: &Node, right: &Node, sep: &[u8]) -> Node {
        match (left, right) {
            (
                Node::Leaf {
                    keys: lk,
                    values: lv,
                    ..
                },
                Node::Leaf {
                    keys: rk,
                    values: rv,
                    next,
                },
            ) => {
                let (mut keys, mut values) = (lk.clone(), lv.clone());
                keys.extend_from(rk);
                values.extend_from(rv);
                Node::Leaf {
                    keys,
                    values,
                    next: *next,
                }
            }
            (
                Node::Internal {
                    keys: lk,
                    children: lc,
                },
                Node::Internal {
                    keys: rk,
                    children: rc,
                },
            ) => {
                let mut keys = lk.clone();
                keys.push(sep);
                keys.extend_from(rk);
                Node::Internal {
                    keys,
                    children: lc.iter().chain(rc).copied().collect(),
                }
            }
            _ => unreachable!("siblings are at the same level"),
        }
    }

    /// Moves entries so both halves hold about the same; returns the new separator.
    fn redistribute(left: &mut Node, right: &mut Node, sep: Vec<u8>) -> Vec<u8> {
        match (left, right) {
            (
                Node::Leaf {
                    keys: lk,
                    values: lv,
                    ..
                },
                Node::Leaf {
                    keys: rk,
                    values: rv,
                    ..
                },
            ) => {
                lk.extend_from(rk);
                lv.extend_from(rv);
                let mid = lk.len() / 2;
                *rk = lk.split_off(mid);
                *rv = lv.split_off(mid);
                rk[0].to_vec()
            }
            (
                Node::Internal {
                    keys: lk,
                    children: lc,
                },
                Node::Internal {
                    keys: rk,
                    children: rc,
                },
            ) => {
                lk.push(&sep);
                lk.extend_from(rk);
                lc.append(rc);
                let mid = lk.len() / 2;
                let mut right_keys = lk.split_off(mid);
                let new_sep = right_keys.remove(0);
                *rk = right_keys;
                *rc = lc.split_off(mid + 1);
                new_sep
            }
            _ => unreachable!("siblings are at the same level"),
        }
    }

    /// Entries with `lo <= key < hi` (`hi` = None: to the end), in order.
    pub fn range(&mut self, lo: &[u8], hi: Option<&[u8]>) -> Result<Entries, TreeError> {
        let nodes = self.nodes_range(lo, hi)?;
        if self.deferred.is_empty() {
            return Ok(nodes);
        }
        // The nodes' entries merged with the deferred changes (which win; a removal drops
        // the key).
        use std::ops::Bound;
        let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
        let mut changes = self
            .deferred
            .changes
            .range::<[u8], _>((Bound::Included(lo), upper))
            .peekable();
        let mut out = Vec::with_capacity(nodes.len());
        let mut nodes = nodes.into_iter().peekable();
        loop {
            let take_change = match (nodes.peek(), changes.peek()) {
                (None, None) => return Ok(out),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((nk, _)), Some((ck, _))) => match nk.cmp(ck) {
                    std::cmp::Ordering::Less => false,
                    std::cmp::Ordering::Equal => {
                        nodes.next();
                        true
                    }
                    std::cmp::Ordering::Greater => true,
                },
            };
            if take_change {
                let (k, v) = changes.next().expect("peeked");
                if let Some(v) = v {
                    out.push((k.clone(), v.clone()));
                }
            } else {
                out.push(nodes.next().expect("peeked"));
            }
        }
    }

    /// The entries the nodes hold with `lo <= key < hi`, deferred changes aside.
    fn nodes_range(&mut self, lo: &[u8], hi: Option<&[u8]>) -> Result<Entries, TreeError> {
        let mut id = self.root();
        while let Node::Internal { keys, children } = &*self.store.read(id)? {
            id = children[keys.upper_bound(lo)];
        }
        let mut out = Vec::new();
        while id != NONE {
            let node = self.store.read(id)?;
            let Node::Leaf { keys, values, next } = &*node else {
                return Err(TreeError::Corrupt {
                    id,
                    offset: NONE,
                    msg: "leaf chain reaches an internal node".into(),
                });
            };
            for (k, v) in keys.iter().zip(values.iter()) {
                if hi.is_some_and(|h| k >= h) {
                    return Ok(out);
                }
                if k >= lo {
                    out.push((k.to_vec(), v.to_vec()));
                }
            }
            id = *next;
        }
        Ok(out)
    }

    /// Commit point: every change so far survives a crash (deferred changes by their
    /// logged operations).
    pub fn sync(&mut self) -> Result<(), TreeError> {
        if self.deferred.is_empty() {
            return self.store.sync();
        }
        self.sync_deferred()
    }

    /// Nodes reachable from the root.
    pub fn node_count(&mut self) -> Result<u64, TreeError> {
        let mut stack = vec![self.root()];
        let mut n = 0;
        while let Some(id) = stack.pop() {
            n += 1;
            if let Node::Internal { children, .. } = &*self.store.read(id)? {
                stack.extend(children.iter().copied());
            }
        }
        Ok(n)
    }

    /// Checks the tree's structure: sorted keys, separators bounding their subtrees, all
    /// leaves at one depth, the leaf chain in order. Returns the number of entries the
    /// nodes hold (deferred changes aside).
    pub fn check(&mut self) -> Result<u64, String> {
        let root = self.root();
        let mut leaf_depth = None;
        let n = self.check_node(root, None, None, 0, &mut leaf_depth)?;
        let all = self.nodes_range(&[], None).map_err(|e| e.to_string())?;
        if all.len() as u64 != n {
            return Err(format!(
                "leaf chain holds {} entries, the tree {n}",
                all.len()
            ));
        }
        Ok(n)
    }

    fn check_node(
        &mut self,
        id: NodeId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
        leaf_depth: &mut Option<usize>,
    ) -> Result<u64, String> {
        let node = Arc::unwrap_or_clone(self.store.read(id).map_err(|e| e.to_string())?);
        let keys = match &node {
            Node::Leaf { keys, .. } | Node::Internal { keys, .. } => keys.clone(),
        };
        if (1..keys.len()).any(|i| keys[i - 1] >= keys[i]) {
            return Err(format!("node {id}: keys out of order"));
        }
        if keys
            .iter()
            .any(|k| lo.is_some_and(|l| k < l) || hi.is_some_and(|h| k >= h))
        {
            return Err(format!("node {id}: a key lies outside its separators"));
        }
        match node {
            Node::Leaf { keys, .. } => {
                match leaf_depth {
                    Some(d) if *d != depth => {
                        return Err(format!("leaf {id} at depth {depth}, others at {d}"))
                    }
                    _ => *leaf_depth = Some(depth),
                }
                Ok(keys.len() as u64)
            }
            Node::Internal { keys, children } => {
                if children.len() != keys.len() + 1 {
                    return Err(format!(
                        "node {id}: {} children for {} keys",
                        children.len(),
                        keys.len()
                    ));
                }
                let mut n = 0;
                for (i, &c) in children.iter().enumerate() {
                    let clo = if i == 0 { lo } else { Some(&keys[i - 1]) };
                    let chi = if i == keys.len() { hi } else { Some(&keys[i]) };
                    n += self.check_node(c, clo, chi, depth + 1, leaf_depth)?;
                }
                Ok(n)
            }
        }
    }
}

/// Whether an entry with a key of `key_bytes` and a value of `value_bytes` fits a node of
/// `node_bytes` with room for its neighbours (at most half the node, counting the node's
/// header and room for four keys and child links).
pub fn entry_fits(node_bytes: usize, key_bytes: usize, value_bytes: usize) -> bool {
    key_bytes <= u16::MAX as usize
        && 16 + 4 * (2 + key_bytes + 8) + 4 + value_bytes <= node_bytes / 2
}
