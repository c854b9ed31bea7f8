//! B+tree nodes and their encoding into fixed-size node images.
//!
//! Image layout (little-endian): kind u8 (1 = leaf, 2 = internal), 3 bytes zero, entry
//! count u32, next-leaf NodeID u64 (u64::MAX = none); then per entry a key length u16
//! and key bytes, and for leaves a value length u32 and value bytes, for internal nodes a
//! child NodeID u64 per entry plus one leading child. Stores add their own headers.

use crate::packed::Packed;
use crate::TreeError;

pub type NodeId = u64;
pub const NONE: NodeId = u64::MAX;

/// A hash map keyed by NodeID with a cheap multiplicative hash (NodeIDs are small
/// integers handed out in order; SipHash's protection against chosen keys buys nothing
/// here and costs a third of a cached lookup).
pub type IdMap<V> = std::collections::HashMap<NodeId, V, std::hash::BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of one u64.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
}
const HEADER: usize = 16;
/// Bytes of a node image's header (kind, count, link).
pub(crate) const NODE_HEADER: usize = HEADER;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// Sorted keys with their values; `next` links leaves for scans.
    Leaf {
        keys: Packed,
        values: Packed,
        next: NodeId,
    },
    /// `children[i]` holds keys < `keys[i]`; the last child the rest.
    Internal { keys: Packed, children: Vec<NodeId> },
}

impl Node {
    pub fn empty_leaf() -> Node {
        Node::Leaf {
            keys: Packed::new(),
            values: Packed::new(),
            next: NONE,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Node::Leaf { keys, .. } | Node::Internal { keys, .. } => keys.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the encoded image.
    pub fn encoded_bytes(&self) -> usize {
        match self {
            Node::Leaf { keys, values, .. } => {
                HEADER + 2 * keys.len() + keys.bytes() + 4 * values.len() + values.bytes()
            }
            Node::Internal { keys, children } => {
                HEADER + 2 * keys.len() + keys.bytes() + children.len() * 8
            }
        }
    }

    /// Encodes into `out` (zero-padded to its length, which must hold the node).
    pub fn encode(&self, out: &mut [u8]) {
        assert!(
            self.encoded_bytes() <= out.len(),
            "node of {} bytes does not fit {}",
            self.encoded_bytes(),
            out.len()
        );
        let mut at = HEADER;
        let mut put = |b: &[u8], at: &mut usize| {
            out[*at..*at + b.len()].copy_from_slice(b);
            *at += b.len();
        };
        match self {
            Node::Leaf { keys, values, next } => {
                let mut h = [0u8; HEADER];
                h[0] = 1;
                h[4..8].copy_from_slice(&(keys.len() as u32).to_le_bytes());
                h[8..16].copy_from_slice(&next.to_le_bytes());
                put(&h, &mut 0);
                for (k, v) in keys.iter().zip(values.iter()) {
                    put(&(k.len() as u16).to_le_bytes(), &mut at);
                    put(k, &mut at);
                    put(&(v.len() as u32).to_le_bytes(), &mut at);
                    put(v, &mut at);
                }
            }
            Node::Internal { keys, children } => {
                let mut h = [0u8; HEADER];
                h[0] = 2;
                h[4..8].copy_from_slice(&(keys.len() as u32).to_le_bytes());
                h[8..16].copy_from_slice(&children[0].to_le_bytes());
                put(&h, &mut 0);
                for (k, c) in keys.iter().zip(&children[1..]) {
                    put(&(k.len() as u16).to_le_bytes(), &mut at);
                    put(k, &mut at);
                    put(&c.to_le_bytes(), &mut at);
                }
            }
        }
        // Zero the rest, so an image depends only on the node.
        out[self.encoded_bytes()..].fill(0);
    }

    /// One step of a lookup of `key`: the child to follow, or the leaf's value.
    pub fn step(&self, key: &[u8]) -> Step<&[u8]> {
        match self {
            Node::Internal { keys, children } => Step::Child(children[keys.upper_bound(key)]),
            Node::Leaf { keys, values, .. } => {
                Step::Leaf(keys.binary_search(key).ok().map(|i| &values[i]))
            }
        }
    }

    /// Decodes an image; `id` and `offset` name it in errors.
    pub fn decode(b: &[u8], id: NodeId, offset: u64) -> Result<Node, TreeError> {
        let bad = |msg: String| TreeError::Corrupt { id, offset, msg };
        if b.len() < HEADER {
            return Err(bad("image shorter than a node header".into()));
        }
        let n = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
        let link = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let mut at = HEADER;
        let take = |len: usize, at: &mut usize| -> Result<&[u8], TreeError> {
            if *at + len > b.len() {
                return Err(TreeError::Corrupt {
                    id,
                    offset,
                    msg: format!("entry runs past the {} byte image", b.len()),
                });
            }
            let s = &b[*at..*at + len];
            *at += len;
            Ok(s)
        };
        // The strings' bytes first (the lengths only), so each buffer is allocated once at
        // its size: a cache charges a node for the bytes it holds, and holds no more.
        let (mut key_bytes, mut value_bytes) = (0, 0);
        {
            let mut at = HEADER;
            let len_at = |at: usize, w: usize| -> Option<usize> {
                let f = b.get(at..at + w)?;
                Some(if w == 2 {
                    u16::from_le_bytes(f.try_into().ok()?) as usize
                } else {
                    u32::from_le_bytes(f.try_into().ok()?) as usize
                })
            };
            for _ in 0..n {
                let Some(kl) = len_at(at, 2) else { break };
                key_bytes += kl;
                at += 2 + kl;
                if b[0] == 1 {
                    let Some(vl) = len_at(at, 4) else { break };
                    value_bytes += vl;
                    at += 4 + vl;
                } else {
                    at += 8;
                }
            }
        }
        // (A damaged image errs in the pass below; the sizes need only be bounded by the
        // image, as a count read from it may be anything.)
        let mut keys = Packed::with_capacity(n.min(b.len() / 2), key_bytes.min(b.len()));
        match b[0] {
            1 => {
                let mut values =
                    Packed::with_capacity(n.min(b.len() / 6), value_bytes.min(b.len()));
                for _ in 0..n {
                    let kl = u16::from_le_bytes(take(2, &mut at)?.try_into().expect("2")) as usize;
                    keys.push(take(kl, &mut at)?);
                    let vl = u32::from_le_bytes(take(4, &mut at)?.try_into().expect("4")) as usize;
                    values.push(take(vl, &mut at)?);
                }
                Ok(Node::Leaf {
                    keys,
                    values,
                    next: link,
                })
            }
            2 => {
                let mut children = Vec::with_capacity(n.min(b.len() / 10) + 1);
                children.push(link);
                for _ in 0..n {
                    let kl = u16::from_le_bytes(take(2, &mut at)?.try_into().expect("2")) as usize;
                    keys.push(take(kl, &mut at)?);
                    children.push(u64::from_le_bytes(take(8, &mut at)?.try_into().expect("8")));
                }
                Ok(Node::Internal { keys, children })
            }
            k => Err(bad(format!("unknown node kind {k}"))),
        }
    }
}

/// One step of a lookup: the child to follow (an internal node), or what the leaf holds
/// for the key (None: not there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<V> {
    Child(NodeId),
    Leaf(Option<V>),
}

impl<V> Step<V> {
    /// The leaf's value mapped by `f` (a child is left as it is).
    pub fn map<R>(self, f: impl FnOnce(V) -> R) -> Step<R> {
        match self {
            Step::Child(c) => Step::Child(c),
            Step::Leaf(v) => Step::Leaf(v.map(f)),
        }
    }
}

/// A node image searched where it lies, without decoding it: a lookup that only passes
/// through a node needs one key's place in it, not a [`Node`] with every key and value
/// copied out (LMDB searches its pages in place the same way). The entries are walked in
/// order, each length checked against the image, so a damaged image is an error, never a
/// read past its end.
#[derive(Clone, Copy)]
pub struct NodeImage<'a> {
    b: &'a [u8],
    id: NodeId,
    offset: u64,
}

impl<'a> NodeImage<'a> {
    /// The image `b` of node `id` (`offset` names where it was read, in errors).
    pub fn new(b: &'a [u8], id: NodeId, offset: u64) -> Result<Self, TreeError> {
        let img = NodeImage { b, id, offset };
        if b.len() < HEADER {
            return Err(img.corrupt("image shorter than a node header".into()));
        }
        if b[0] != 1 && b[0] != 2 {
            return Err(img.corrupt(format!("unknown node kind {}", b[0])));
        }
        Ok(img)
    }

    pub fn is_leaf(&self) -> bool {
        self.b[0] == 1
    }

    /// Bytes of the image (with any padding after the node).
    pub fn image_bytes(&self) -> usize {
        self.b.len()
    }

    pub fn decode(&self) -> Result<Node, TreeError> {
        Node::decode(self.b, self.id, self.offset)
    }

    fn corrupt(&self, msg: String) -> TreeError {
        TreeError::Corrupt {
            id: self.id,
            offset: self.offset,
            msg,
        }
    }

    /// `len` bytes at `*at`, which moves past them.
    fn take(&self, len: usize, at: &mut usize) -> Result<&'a [u8], TreeError> {
        let s = self.b.get(*at..*at + len).ok_or_else(|| {
            self.corrupt(format!("entry runs past the {} byte image", self.b.len()))
        })?;
        *at += len;
        Ok(s)
    }

    /// One step of a lookup of `key`, as [`Node::step`] gives it for the decoded node.
    pub fn step(&self, key: &[u8]) -> Result<Step<&'a [u8]>, TreeError> {
        let b = self.b;
        let n = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
        let link = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let mut at = HEADER;
        let leaf = self.is_leaf();
        // Internal: the child after the last key <= `key` (the leading child if none is).
        let mut child = link;
        for _ in 0..n {
            let kl = u16::from_le_bytes(self.take(2, &mut at)?.try_into().expect("2")) as usize;
            let k = self.take(kl, &mut at)?;
            if leaf {
                let vl = u32::from_le_bytes(self.take(4, &mut at)?.try_into().expect("4"));
                let v = self.take(vl as usize, &mut at)?;
                match k.cmp(key) {
                    std::cmp::Ordering::Less => {}
                    std::cmp::Ordering::Equal => return Ok(Step::Leaf(Some(v))),
                    std::cmp::Ordering::Greater => return Ok(Step::Leaf(None)),
                }
            } else {
                let c = u64::from_le_bytes(self.take(8, &mut at)?.try_into().expect("8"));
                if k > key {
                    break;
                }
                child = c;
            }
        }
        Ok(if leaf {
            Step::Leaf(None)
        } else {
            Step::Child(child)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let leaf = Node::Leaf {
            keys: ["a", "bc"].iter().collect(),
            values: ["1", ""].iter().collect(),
            next: 7,
        };
        let inner = Node::Internal {
            keys: ["m"].iter().collect(),
            children: vec![3, 4],
        };
        for n in [leaf, inner, Node::empty_leaf()] {
            let mut b = vec![0u8; 256];
            n.encode(&mut b);
            assert_eq!(Node::decode(&b, 1, 0).unwrap(), n);
            assert!(n.encoded_bytes() <= 256);
        }
        let mut b = vec![0u8; 64];
        b[0] = 1;
        b[4] = 200;
        assert!(Node::decode(&b, 9, 4096)
            .unwrap_err()
            .to_string()
            .contains("node 9"));
    }

    /// Sorted, distinct keys of 0-12 bytes over a small alphabet (so lookups hit, miss
    /// between keys, fall before the first and after the last, and share prefixes).
    fn sorted_keys() -> impl proptest::strategy::Strategy<Value = Vec<Vec<u8>>> {
        use proptest::prelude::*;
        proptest::collection::btree_set(proptest::collection::vec(0u8..4, 0..12), 0..40)
            .prop_map(|s| s.into_iter().collect())
    }

    proptest::proptest! {
        /// A lookup in the image, undecoded, finds what it finds in the decoded node: the
        /// same child, the same value, the same absence.
        #[test]
        fn a_lookup_in_the_image_agrees_with_the_decoded_node(
            keys in sorted_keys(),
            probes in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..12), 1..30),
            leaf in proptest::bool::ANY,
        ) {
            let packed: Packed = keys.iter().collect();
            let node = if leaf {
                let values: Packed = keys.iter().map(|k| [k.as_slice(), b"v"].concat()).collect();
                Node::Leaf { keys: packed, values, next: 5 }
            } else {
                Node::Internal { keys: packed, children: (0..=keys.len() as u64).map(|c| 100 + c).collect() }
            };
            let mut b = vec![0u8; node.encoded_bytes() + 7];
            node.encode(&mut b);
            let img = NodeImage::new(&b, 1, 0).unwrap();
            proptest::prop_assert_eq!(img.is_leaf(), leaf);
            for p in probes.iter().chain(&keys) {
                proptest::prop_assert_eq!(img.step(p).unwrap(), node.step(p));
            }
            proptest::prop_assert_eq!(img.decode().unwrap(), node);
        }

        /// A damaged image is an error naming the node, never a read past its end or a
        /// panic (whatever its bytes say).
        #[test]
        fn a_damaged_image_is_an_error_not_a_panic(
            mut bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            kind in 1u8..3,
            probe in proptest::collection::vec(0u8..4, 0..12),
        ) {
            if bytes.len() >= HEADER {
                bytes[0] = kind;
            }
            match NodeImage::new(&bytes, 9, 77) {
                Ok(img) => {
                    let _ = img.step(&probe);
                    let _ = img.decode();
                }
                Err(e) => proptest::prop_assert!(e.to_string().contains("node 9")),
            }
        }
    }
}
