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
        let mut keys = Packed::with_capacity(n, b.len());
        match b[0] {
            1 => {
                let mut values = Packed::with_capacity(n, b.len());
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
                let mut children = Vec::with_capacity(n + 1);
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
}
