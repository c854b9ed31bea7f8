//! The extents one journal transaction frees, as ext4 keeps them until its commit: per
//! block group, a red-black tree of `ext4_free_data` entries (fs/ext4/mballoc.c,
//! `ext4_mb_free_metadata`), an entry per discard after the commit.
//!
//! How a freed extent merges with the entries already there depends on the kernel:
//! - up to Linux 6.16, it is inserted and then merged with both its neighbours in block
//!   order (`ext4_try_merge_freed_extent` on `rb_prev` and `rb_next`): adjacent extents
//!   always end up in one entry, whatever the order they were freed in;
//! - since Linux 6.17 (Baokun Li's 2025 allocator series, "ext4: merge freed extent with
//!   existing extents before insertion"), it is merged only with the last entry the
//!   tree search visited — the parent of the place it would be inserted — and that
//!   entry then with its own neighbour on the far side. An extent adjacent to its other
//!   neighbour (an ancestor further up) stays an entry of its own, so how many entries
//!   a transaction ends with depends on the tree's shape: on this machine's 6.18, a join
//!   that freed 18,260 extents in one transaction (1,019 runs once merged) got 3,708
//!   entries, and ext4 sent exactly 3,708 discards; this tree gives 3,708 for the same
//!   extents in the same order.
//!
//! The tree is the textbook red-black tree (insertion fix-up and deletion by the
//! successor, as lib/rbtree.c), so its shapes are the kernel's.

/// A node index in the arena.
type Idx = usize;
const NIL: Idx = usize::MAX;

#[derive(Debug, Clone)]
struct Node {
    start: u64,
    len: u64,
    left: Idx,
    right: Idx,
    parent: Idx,
    red: bool,
    /// Order of insertion (the entry's place in ext4's freed-data list).
    seq: u64,
}

/// One group's freed extents of one transaction.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreedTree {
    nodes: Vec<Node>,
    free_slots: Vec<Idx>,
    root: Option<Idx>,
}

impl FreedTree {
    fn n(&self, i: Idx) -> &Node {
        &self.nodes[i]
    }

    fn nm(&mut self, i: Idx) -> &mut Node {
        &mut self.nodes[i]
    }

    fn is_red(&self, i: Idx) -> bool {
        i != NIL && self.nodes[i].red
    }

    /// Frees `[start, start + len)` as Linux 6.17 and later do (see the module doc);
    /// `seq` orders the entry in ext4's list if it becomes one.
    pub(crate) fn free_merging_with_parent(&mut self, start: u64, len: u64, seq: u64) {
        // The search: the last node visited is the would-be parent.
        let mut at = self.root.unwrap_or(NIL);
        let (mut parent, mut go_left) = (NIL, false);
        while at != NIL {
            parent = at;
            let n = self.n(at);
            if start < n.start {
                go_left = true;
                at = n.left;
            } else {
                debug_assert!(start >= n.start + n.len, "a block freed twice");
                go_left = false;
                at = n.right;
            }
        }
        if parent != NIL {
            let (ps, pl) = (self.n(parent).start, self.n(parent).len);
            if start + len == ps {
                // The new extent joins the parent from the left; then the parent its
                // predecessor, if adjacent (the predecessor keeps its place).
                self.nm(parent).start = start;
                self.nm(parent).len += len;
                let prev = self.prev(parent);
                if prev != NIL && self.n(prev).start + self.n(prev).len == start {
                    self.nm(prev).len += self.n(parent).len;
                    self.erase(parent);
                }
                return;
            }
            if ps + pl == start {
                self.nm(parent).len += len;
                let next = self.next(parent);
                if next != NIL && start + len == self.n(next).start {
                    self.nm(parent).len += self.n(next).len;
                    self.erase(next);
                }
                return;
            }
        }
        self.insert_at(start, len, parent, go_left, seq);
    }

    /// The entries as `(seq, start, len)`, in list order (by `seq`).
    pub(crate) fn entries(&self) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        let mut stack = Vec::new();
        let mut at = self.root.unwrap_or(NIL);
        while at != NIL || !stack.is_empty() {
            while at != NIL {
                stack.push(at);
                at = self.n(at).left;
            }
            let i = stack.pop().expect("non-empty");
            out.push((self.n(i).seq, self.n(i).start, self.n(i).len));
            at = self.n(i).right;
        }
        out.sort_unstable();
        out
    }

    fn alloc_node(&mut self, node: Node) -> Idx {
        match self.free_slots.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        }
    }

    fn insert_at(&mut self, start: u64, len: u64, parent: Idx, go_left: bool, seq: u64) {
        let z = self.alloc_node(Node {
            start,
            len,
            left: NIL,
            right: NIL,
            parent,
            red: true,
            seq,
        });
        if parent == NIL {
            self.root = Some(z);
        } else if go_left {
            self.nm(parent).left = z;
        } else {
            self.nm(parent).right = z;
        }
        self.insert_fixup(z);
    }

    fn insert_fixup(&mut self, mut z: Idx) {
        while self.is_red(self.n(z).parent) {
            let p = self.n(z).parent;
            let g = self.n(p).parent;
            if p == self.n(g).left {
                let u = self.n(g).right;
                if self.is_red(u) {
                    self.nm(p).red = false;
                    self.nm(u).red = false;
                    self.nm(g).red = true;
                    z = g;
                } else {
                    if z == self.n(p).right {
                        z = p;
                        self.rotate_left(z);
                    }
                    let p = self.n(z).parent;
                    let g = self.n(p).parent;
                    self.nm(p).red = false;
                    self.nm(g).red = true;
                    self.rotate_right(g);
                }
            } else {
                let u = self.n(g).left;
                if self.is_red(u) {
                    self.nm(p).red = false;
                    self.nm(u).red = false;
                    self.nm(g).red = true;
                    z = g;
                } else {
                    if z == self.n(p).left {
                        z = p;
                        self.rotate_right(z);
                    }
                    let p = self.n(z).parent;
                    let g = self.n(p).parent;
                    self.nm(p).red = false;
                    self.nm(g).red = true;
                    self.rotate_left(g);
                }
            }
        }
        let root = self.root.expect("just inserted");
        self.nm(root).red = false;
    }

    /// Puts `child` where `old` hangs from its parent.
    fn replace_child(&mut self, parent: Idx, old: Idx, child: Idx) {
        if parent == NIL {
            self.root = (child != NIL).then_some(child);
        } else if self.n(parent).left == old {
            self.nm(parent).left = child;
        } else {
            self.nm(parent).right = child;
        }
        if child != NIL {
            self.nm(child).parent = parent;
        }
    }

    fn rotate_left(&mut self, x: Idx) {
        let y = self.n(x).right;
        let yl = self.n(y).left;
        self.nm(x).right = yl;
        if yl != NIL {
            self.nm(yl).parent = x;
        }
        let xp = self.n(x).parent;
        self.replace_child(xp, x, y);
        self.nm(y).left = x;
        self.nm(x).parent = y;
    }

    fn rotate_right(&mut self, x: Idx) {
        let y = self.n(x).left;
        let yr = self.n(y).right;
        self.nm(x).left = yr;
        if yr != NIL {
            self.nm(yr).parent = x;
        }
        let xp = self.n(x).parent;
        self.replace_child(xp, x, y);
        self.nm(y).right = x;
        self.nm(x).parent = y;
    }

    fn minimum(&self, mut x: Idx) -> Idx {
        while self.n(x).left != NIL {
            x = self.n(x).left;
        }
        x
    }

    fn next(&self, mut x: Idx) -> Idx {
        if self.n(x).right != NIL {
            return self.minimum(self.n(x).right);
        }
        let mut y = self.n(x).parent;
        while y != NIL && x == self.n(y).right {
            x = y;
            y = self.n(y).parent;
        }
        y
    }

    fn prev(&self, mut x: Idx) -> Idx {
        if self.n(x).left != NIL {
            x = self.n(x).left;
            while self.n(x).right != NIL {
                x = self.n(x).right;
            }
            return x;
        }
        let mut y = self.n(x).parent;
        while y != NIL && x == self.n(y).left {
            x = y;
            y = self.n(y).parent;
        }
        y
    }

    fn erase(&mut self, z: Idx) {
        let (zl, zr, zp) = (self.n(z).left, self.n(z).right, self.n(z).parent);
        let mut removed_red = self.n(z).red;
        let (x, xp);
        if zl == NIL {
            x = zr;
            xp = zp;
            self.replace_child(zp, z, zr);
        } else if zr == NIL {
            x = zl;
            xp = zp;
            self.replace_child(zp, z, zl);
        } else {
            // The successor takes z's place.
            let y = self.minimum(zr);
            removed_red = self.n(y).red;
            x = self.n(y).right;
            if self.n(y).parent == z {
                xp = y;
            } else {
                xp = self.n(y).parent;
                let yp = self.n(y).parent;
                self.replace_child(yp, y, x);
                self.nm(y).right = zr;
                self.nm(zr).parent = y;
            }
            self.replace_child(zp, z, y);
            self.nm(y).left = zl;
            self.nm(zl).parent = y;
            self.nm(y).red = self.n(z).red;
        }
        self.free_slots.push(z);
        if !removed_red {
            self.erase_fixup(x, xp);
        }
    }

    fn erase_fixup(&mut self, mut x: Idx, mut xp: Idx) {
        while Some(x) != self.root && !self.is_red(x) {
            if xp == NIL {
                break;
            }
            if x == self.n(xp).left {
                let mut w = self.n(xp).right;
                if self.is_red(w) {
                    self.nm(w).red = false;
                    self.nm(xp).red = true;
                    self.rotate_left(xp);
                    w = self.n(xp).right;
                }
                if !self.is_red(self.n(w).left) && !self.is_red(self.n(w).right) {
                    self.nm(w).red = true;
                    x = xp;
                    xp = self.n(x).parent;
                } else {
                    if !self.is_red(self.n(w).right) {
                        let wl = self.n(w).left;
                        self.nm(wl).red = false;
                        self.nm(w).red = true;
                        self.rotate_right(w);
                        w = self.n(xp).right;
                    }
                    self.nm(w).red = self.n(xp).red;
                    self.nm(xp).red = false;
                    let wr = self.n(w).right;
                    if wr != NIL {
                        self.nm(wr).red = false;
                    }
                    self.rotate_left(xp);
                    x = self.root.expect("non-empty");
                    xp = NIL;
                }
            } else {
                let mut w = self.n(xp).left;
                if self.is_red(w) {
                    self.nm(w).red = false;
                    self.nm(xp).red = true;
                    self.rotate_right(xp);
                    w = self.n(xp).left;
                }
                if !self.is_red(self.n(w).left) && !self.is_red(self.n(w).right) {
                    self.nm(w).red = true;
                    x = xp;
                    xp = self.n(x).parent;
                } else {
                    if !self.is_red(self.n(w).left) {
                        let wr = self.n(w).right;
                        self.nm(wr).red = false;
                        self.nm(w).red = true;
                        self.rotate_left(w);
                        w = self.n(xp).left;
                    }
                    self.nm(w).red = self.n(xp).red;
                    self.nm(xp).red = false;
                    let wl = self.n(w).left;
                    if wl != NIL {
                        self.nm(wl).red = false;
                    }
                    self.rotate_right(xp);
                    x = self.root.expect("non-empty");
                    xp = NIL;
                }
            }
        }
        if x != NIL {
            self.nm(x).red = false;
        }
    }

    /// Checks the red-black properties and the order (tests).
    #[cfg(test)]
    fn check(&self) -> usize {
        fn walk(t: &FreedTree, i: Idx, lo: u64, hi: u64) -> usize {
            if i == NIL {
                return 1;
            }
            let n = t.n(i);
            assert!(n.start >= lo && n.start + n.len <= hi, "order");
            if n.red {
                assert!(!t.is_red(n.left) && !t.is_red(n.right), "red-red");
            }
            for c in [n.left, n.right] {
                if c != NIL {
                    assert_eq!(t.n(c).parent, i, "parent link");
                }
            }
            let a = walk(t, n.left, lo, n.start);
            let b = walk(t, n.right, n.start + n.len, hi);
            assert_eq!(a, b, "black height");
            a + usize::from(!n.red)
        }
        match self.root {
            None => 0,
            Some(r) => {
                assert!(!self.n(r).red);
                walk(self, r, 0, u64::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(t: &FreedTree) -> Vec<(u64, u64)> {
        t.entries().into_iter().map(|(_, s, l)| (s, l)).collect()
    }

    fn merged(runs: &[(u64, u64)]) -> Vec<(u64, u64)> {
        crate::types::merge_runs(runs.to_vec())
    }

    #[test]
    fn an_extent_adjacent_only_to_an_ancestor_stays_apart() {
        // Insert 10, then 0 and 20 (children of 10), then 4..10: its search ends at 0
        // (the would-be parent), which is not adjacent; 10, its other neighbour, is an
        // ancestor. Up to 6.16 the three would merge into one; since 6.17 they do not.
        let mut t = FreedTree::default();
        for (i, (s, l)) in [(10, 2), (0, 2), (20, 2), (4, 6)].into_iter().enumerate() {
            t.free_merging_with_parent(s, l, i as u64);
        }
        assert_eq!(runs(&t), vec![(10, 2), (0, 2), (20, 2), (4, 6)]);
        // Adjacent to its would-be parent: merged, the parent keeping its place.
        t.free_merging_with_parent(2, 2, 4);
        assert_eq!(runs(&t), vec![(10, 2), (0, 10), (20, 2)]);
        t.check();
    }

    #[test]
    fn the_tree_stays_valid_and_covers_every_freed_block() {
        // 2,000 two-block extents of a strided layout, freed in a scrambled order: the
        // tree stays a red-black tree, its entries cover exactly the freed blocks, and
        // there are at least as many as fully merged runs.
        let mut t = FreedTree::default();
        let mut freed = Vec::new();
        let mut x: u64 = 12345;
        for seq in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let slot = (x >> 33) % 5000;
            let s = slot * 2;
            if freed.iter().any(|&(f, _)| f == s) {
                continue;
            }
            freed.push((s, 2));
            t.free_merging_with_parent(s, 2, seq);
            t.check();
        }
        let entries = runs(&t);
        assert_eq!(merged(&entries), merged(&freed), "the same blocks");
        assert!(entries.len() >= merged(&freed).len());
        assert!(
            entries.len() > merged(&freed).len(),
            "some adjacent extents stay apart: {} entries, {} runs",
            entries.len(),
            merged(&freed).len()
        );
    }
}
