//! The on-device file-system metadata that fTrim reads: an ext4-style layout, with ext4's
//! field offsets and magic numbers for every field used. simfs writes it; the SSD's fTrim
//! walks it (superblock → group descriptor → inode → extent tree) to find a file's
//! extents. Only what both sides need is encoded; everything else stays zero.
//!
//! Layout with 4 KiB blocks: the superblock sits at byte 1024 of block 0, the group
//! descriptor table starts at block 1 (32 bytes per group), every group has a block
//! bitmap, an inode bitmap and an inode table of 256-byte inodes. An inode's `i_block`
//! (60 bytes at offset 40) holds an extent header and up to 4 entries; deeper trees use
//! 4 KiB index and leaf blocks of up to 340 entries.
//!
//! Why it lives here, in the drive's crate, and not in simfs: the format is an interface
//! between two parties, the file system that writes it and the drive firmware that parses
//! it (as a real fTrim drive parses ext4 it never linked against). The drive is the lower
//! layer: simfs depends on flash, never the reverse, so the format sits with the reader
//! that cannot depend on the writer, and simfs encodes through it.

use std::fmt;

pub const BLOCK_BYTES: usize = 4096;
pub const SUPERBLOCK_OFFSET: usize = 1024;
pub const SUPER_MAGIC: u16 = 0xEF53;
pub const EXTENT_MAGIC: u16 = 0xF30A;
pub const INODE_BYTES: usize = 256;
pub const GROUP_DESC_BYTES: usize = 32;
/// `i_flags` bit: the inode uses extents.
pub const EXTENTS_FL: u32 = 0x80000;
pub const I_BLOCK_OFFSET: usize = 40;
pub const I_BLOCK_BYTES: usize = 60;
const HEADER_BYTES: usize = 12;
const ENTRY_BYTES: usize = 12;
/// Entries that fit in the inode's `i_block`.
pub const EXTENTS_IN_INODE: usize = (I_BLOCK_BYTES - HEADER_BYTES) / ENTRY_BYTES;
/// Entries that fit in one 4 KiB extent block (ext4: 340).
pub const EXTENTS_PER_BLOCK: usize = (BLOCK_BYTES - HEADER_BYTES) / ENTRY_BYTES;
/// Longest initialised extent ext4 allows.
pub const MAX_EXTENT_BLOCKS: u32 = 32768;
/// Deepest extent tree accepted (ext4 allows 5).
pub const MAX_DEPTH: u16 = 5;

/// A metadata problem found while walking the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The superblock fields fTrim needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    pub inodes_count: u32,
    pub blocks_count: u32,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
}

impl Superblock {
    /// Writes the superblock into block 0 (`block.len() == BLOCK_BYTES`).
    pub fn encode(&self, block: &mut [u8]) {
        let b = &mut block[SUPERBLOCK_OFFSET..];
        put_u32(b, 0, self.inodes_count);
        put_u32(b, 4, self.blocks_count);
        put_u32(b, 20, 0); // s_first_data_block: 0 with 4 KiB blocks
        put_u32(b, 24, 2); // s_log_block_size: 1024 << 2 = 4096
        put_u32(b, 32, self.blocks_per_group);
        put_u32(b, 40, self.inodes_per_group);
        put_u16(b, 56, SUPER_MAGIC);
        put_u16(b, 88, INODE_BYTES as u16);
    }

    pub fn decode(block: &[u8]) -> Result<Superblock, LayoutError> {
        if block.len() < SUPERBLOCK_OFFSET + 1024 {
            return Err(LayoutError(
                "block 0 is too short to hold a superblock".into(),
            ));
        }
        let b = &block[SUPERBLOCK_OFFSET..];
        let magic = u16_at(b, 56);
        if magic != SUPER_MAGIC {
            return Err(LayoutError(format!(
                "superblock magic is {magic:#06x}, not {SUPER_MAGIC:#06x}"
            )));
        }
        let log = u32_at(b, 24);
        if log != 2 {
            return Err(LayoutError(format!("block size 1024 << {log} is not 4096")));
        }
        let inode_size = u16_at(b, 88);
        if inode_size as usize != INODE_BYTES {
            return Err(LayoutError(format!(
                "inode size {inode_size} is not {INODE_BYTES}"
            )));
        }
        let sb = Superblock {
            inodes_count: u32_at(b, 0),
            blocks_count: u32_at(b, 4),
            blocks_per_group: u32_at(b, 32),
            inodes_per_group: u32_at(b, 40),
        };
        if sb.blocks_per_group == 0 || sb.inodes_per_group == 0 {
            return Err(LayoutError(
                "superblock has zero blocks or inodes per group".into(),
            ));
        }
        Ok(sb)
    }

    pub fn groups(&self) -> u32 {
        self.blocks_count.div_ceil(self.blocks_per_group)
    }
}

/// A group descriptor's block addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupDesc {
    pub block_bitmap: u32,
    pub inode_bitmap: u32,
    pub inode_table: u32,
}

impl GroupDesc {
    pub fn encode(&self, b: &mut [u8]) {
        put_u32(b, 0, self.block_bitmap);
        put_u32(b, 4, self.inode_bitmap);
        put_u32(b, 8, self.inode_table);
    }
    pub fn decode(b: &[u8]) -> GroupDesc {
        GroupDesc {
            block_bitmap: u32_at(b, 0),
            inode_bitmap: u32_at(b, 4),
            inode_table: u32_at(b, 8),
        }
    }
}

/// A leaf entry: `len` blocks of the file from `logical_block` live at `start_block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub logical_block: u32,
    pub len: u32,
    pub start_block: u64,
}

/// An index entry: the subtree for logical blocks from `logical_block` is at `child_block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentIndex {
    pub logical_block: u32,
    pub child_block: u64,
}

/// One node of an extent tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Leaf(Vec<Extent>),
    Index {
        depth: u16,
        children: Vec<ExtentIndex>,
    },
}

fn put_header(b: &mut [u8], entries: usize, max: usize, depth: u16) {
    put_u16(b, 0, EXTENT_MAGIC);
    put_u16(b, 2, entries as u16);
    put_u16(b, 4, max as u16);
    put_u16(b, 6, depth);
    put_u32(b, 8, 0);
}

/// Encodes a node into `b` (60 bytes for the inode's root, 4096 for a block).
pub fn encode_node(node: &Node, b: &mut [u8]) {
    let max = (b.len() - HEADER_BYTES) / ENTRY_BYTES;
    match node {
        Node::Leaf(extents) => {
            assert!(
                extents.len() <= max,
                "{} extents do not fit in a node of {max}",
                extents.len()
            );
            put_header(b, extents.len(), max, 0);
            for (i, e) in extents.iter().enumerate() {
                let at = HEADER_BYTES + i * ENTRY_BYTES;
                assert!(
                    e.len >= 1 && e.len <= MAX_EXTENT_BLOCKS,
                    "extent length {}",
                    e.len
                );
                put_u32(b, at, e.logical_block);
                put_u16(b, at + 4, e.len as u16); // 32768 is stored as 0x8000
                put_u16(b, at + 6, (e.start_block >> 32) as u16);
                put_u32(b, at + 8, e.start_block as u32);
            }
        }
        Node::Index { depth, children } => {
            assert!(children.len() <= max);
            put_header(b, children.len(), max, *depth);
            for (i, c) in children.iter().enumerate() {
                let at = HEADER_BYTES + i * ENTRY_BYTES;
                put_u32(b, at, c.logical_block);
                put_u32(b, at + 4, c.child_block as u32);
                put_u16(b, at + 8, (c.child_block >> 32) as u16);
                put_u16(b, at + 10, 0);
            }
        }
    }
}

/// Decodes a node; `what` names it in errors.
pub fn decode_node(b: &[u8], what: &str) -> Result<Node, LayoutError> {
    if b.len() < HEADER_BYTES {
        return Err(LayoutError(format!(
            "{what}: too short for an extent header"
        )));
    }
    let magic = u16_at(b, 0);
    if magic != EXTENT_MAGIC {
        return Err(LayoutError(format!(
            "{what}: extent header magic is {magic:#06x}, not {EXTENT_MAGIC:#06x}"
        )));
    }
    let entries = u16_at(b, 2) as usize;
    let max = (b.len() - HEADER_BYTES) / ENTRY_BYTES;
    if entries > max || u16_at(b, 4) as usize > max {
        return Err(LayoutError(format!(
            "{what}: {entries} entries in a node that holds {max}"
        )));
    }
    let depth = u16_at(b, 6);
    if depth > MAX_DEPTH {
        return Err(LayoutError(format!(
            "{what}: depth {depth} exceeds {MAX_DEPTH}"
        )));
    }
    let at = |i: usize| HEADER_BYTES + i * ENTRY_BYTES;
    if depth == 0 {
        let mut v = Vec::with_capacity(entries);
        for i in 0..entries {
            let raw = u16_at(b, at(i) + 4) as u32;
            let len = if raw == 0 {
                0
            } else if raw <= MAX_EXTENT_BLOCKS {
                raw
            } else {
                raw - MAX_EXTENT_BLOCKS
            };
            if len == 0 {
                return Err(LayoutError(format!("{what}: entry {i} has length 0")));
            }
            v.push(Extent {
                logical_block: u32_at(b, at(i)),
                len,
                start_block: ((u16_at(b, at(i) + 6) as u64) << 32) | u32_at(b, at(i) + 8) as u64,
            });
        }
        Ok(Node::Leaf(v))
    } else {
        let children = (0..entries)
            .map(|i| ExtentIndex {
                logical_block: u32_at(b, at(i)),
                child_block: ((u16_at(b, at(i) + 8) as u64) << 32) | u32_at(b, at(i) + 4) as u64,
            })
            .collect();
        Ok(Node::Index { depth, children })
    }
}

/// The inode fields both sides use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    pub mode: u16,
    pub links: u16,
    pub size_bytes: u64,
    pub flags: u32,
    /// The extent tree's root node.
    pub root: Node,
}

impl Inode {
    pub fn encode(&self, b: &mut [u8]) {
        b[..INODE_BYTES].fill(0);
        put_u16(b, 0, self.mode);
        put_u32(b, 4, self.size_bytes as u32);
        put_u16(b, 26, self.links);
        put_u32(b, 32, self.flags);
        encode_node(
            &self.root,
            &mut b[I_BLOCK_OFFSET..I_BLOCK_OFFSET + I_BLOCK_BYTES],
        );
        put_u32(b, 108, (self.size_bytes >> 32) as u32);
    }

    pub fn decode(b: &[u8], ino: u32) -> Result<Inode, LayoutError> {
        let flags = u32_at(b, 32);
        if flags & EXTENTS_FL == 0 {
            return Err(LayoutError(format!(
                "inode {ino} does not use extents (i_flags {flags:#x})"
            )));
        }
        Ok(Inode {
            mode: u16_at(b, 0),
            links: u16_at(b, 26),
            size_bytes: u32_at(b, 4) as u64 | (u32_at(b, 108) as u64) << 32,
            flags,
            root: decode_node(
                &b[I_BLOCK_OFFSET..I_BLOCK_OFFSET + I_BLOCK_BYTES],
                &format!("inode {ino}"),
            )?,
        })
    }
}

/// Block holding group `group`'s descriptor and the descriptor's offset in it.
pub fn group_desc_location(group: u32) -> (u64, usize) {
    let byte = group as usize * GROUP_DESC_BYTES;
    (1 + (byte / BLOCK_BYTES) as u64, byte % BLOCK_BYTES)
}

/// What a walk of a file's metadata found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMap {
    /// Physical extents of the file's data.
    pub extents: Vec<Extent>,
    /// Extent-tree blocks (index and leaf) below the inode, which are freed with the file.
    pub tree_blocks: Vec<u64>,
    /// Every metadata block read, in order (superblock, descriptor, inode table, tree).
    pub blocks_read: Vec<u64>,
}

/// Walks inode `ino`'s metadata through `read_block` (block number → its 4 KiB), as the
/// drive does for fTrim. Fails cleanly on any inconsistency; never loops (a tree deeper
/// than [`MAX_DEPTH`] or with more than `max_blocks` nodes is refused).
pub fn walk_file(
    ino: u32,
    read_block: &mut dyn FnMut(u64) -> Result<Vec<u8>, LayoutError>,
    max_blocks: usize,
) -> Result<FileMap, LayoutError> {
    let mut blocks_read = vec![0u64];
    let sb = Superblock::decode(&read_block(0)?)?;
    if ino == 0 || ino > sb.inodes_count {
        return Err(LayoutError(format!(
            "inode {ino} is outside 1..={}",
            sb.inodes_count
        )));
    }
    let group = (ino - 1) / sb.inodes_per_group;
    if group >= sb.groups() {
        return Err(LayoutError(format!(
            "inode {ino} falls in group {group}, past the {} groups",
            sb.groups()
        )));
    }
    let (gdt_block, gdt_off) = group_desc_location(group);
    blocks_read.push(gdt_block);
    let desc = GroupDesc::decode(&read_block(gdt_block)?[gdt_off..]);
    let byte = ((ino - 1) % sb.inodes_per_group) as usize * INODE_BYTES;
    let itable_block = desc.inode_table as u64 + (byte / BLOCK_BYTES) as u64;
    if itable_block >= sb.blocks_count as u64 {
        return Err(LayoutError(format!(
            "inode table block {itable_block} of group {group} lies past the file system"
        )));
    }
    blocks_read.push(itable_block);
    let table = read_block(itable_block)?;
    let inode = Inode::decode(
        &table[byte % BLOCK_BYTES..byte % BLOCK_BYTES + INODE_BYTES],
        ino,
    )?;
    let mut map = FileMap {
        extents: Vec::new(),
        tree_blocks: Vec::new(),
        blocks_read,
    };
    let mut stack: Vec<(Node, u16)> = vec![(inode.root, MAX_DEPTH + 1)];
    while let Some((node, parent_depth)) = stack.pop() {
        match node {
            Node::Leaf(extents) => {
                for e in &extents {
                    if e.start_block + e.len as u64 > sb.blocks_count as u64 {
                        return Err(LayoutError(format!(
                            "inode {ino}: extent at block {} + {} lies past the file system's {} blocks",
                            e.start_block, e.len, sb.blocks_count
                        )));
                    }
                }
                map.extents.extend(extents);
            }
            Node::Index { depth, children } => {
                if depth >= parent_depth {
                    return Err(LayoutError(format!("inode {ino}: extent tree depth does not decrease ({depth} under {parent_depth})")));
                }
                let mut decoded = Vec::with_capacity(children.len());
                for c in &children {
                    if map.tree_blocks.len() + stack.len() >= max_blocks {
                        return Err(LayoutError(format!(
                            "inode {ino}: extent tree has more than {max_blocks} blocks"
                        )));
                    }
                    if c.child_block >= sb.blocks_count as u64 {
                        return Err(LayoutError(format!(
                            "inode {ino}: index points to block {} past the file system",
                            c.child_block
                        )));
                    }
                    let b = read_block(c.child_block)?;
                    map.blocks_read.push(c.child_block);
                    map.tree_blocks.push(c.child_block);
                    let child = decode_node(&b, &format!("extent block {}", c.child_block))?;
                    let child_depth = match &child {
                        Node::Leaf(_) => 0,
                        Node::Index { depth, .. } => *depth,
                    };
                    if child_depth + 1 != depth {
                        return Err(LayoutError(format!(
                            "extent block {}: depth {child_depth} under a node of depth {depth}",
                            c.child_block
                        )));
                    }
                    decoded.push((child, depth));
                }
                // Depth first, children in order.
                stack.extend(decoded.into_iter().rev());
            }
        }
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn constants_match_ext4() {
        assert_eq!(EXTENTS_PER_BLOCK, 340);
        assert_eq!(EXTENTS_IN_INODE, 4);
    }

    fn image() -> HashMap<u64, Vec<u8>> {
        let mut img: HashMap<u64, Vec<u8>> = HashMap::new();
        let sb = Superblock {
            inodes_count: 64,
            blocks_count: 1000,
            blocks_per_group: 1000,
            inodes_per_group: 64,
        };
        let mut b0 = vec![0; BLOCK_BYTES];
        sb.encode(&mut b0);
        img.insert(0, b0);
        let mut b1 = vec![0; BLOCK_BYTES];
        GroupDesc {
            block_bitmap: 2,
            inode_bitmap: 3,
            inode_table: 4,
        }
        .encode(&mut b1);
        img.insert(1, b1);
        // Inode 2 (second slot of the table): an index root pointing to two leaves.
        let leaf_a: Vec<Extent> = (0..300)
            .map(|i| Extent {
                logical_block: i,
                len: 1,
                start_block: 100 + 2 * i as u64,
            })
            .collect();
        let leaf_b = vec![Extent {
            logical_block: 300,
            len: 5,
            start_block: 900,
        }];
        for (blk, l) in [(20u64, leaf_a), (21, leaf_b)] {
            let mut b = vec![0; BLOCK_BYTES];
            encode_node(&Node::Leaf(l), &mut b);
            img.insert(blk, b);
        }
        let mut table = vec![0; BLOCK_BYTES];
        Inode {
            mode: 0o100644,
            links: 1,
            size_bytes: 305 * 4096,
            flags: EXTENTS_FL,
            root: Node::Index {
                depth: 1,
                children: vec![
                    ExtentIndex {
                        logical_block: 0,
                        child_block: 20,
                    },
                    ExtentIndex {
                        logical_block: 300,
                        child_block: 21,
                    },
                ],
            },
        }
        .encode(&mut table[INODE_BYTES..]);
        img.insert(4, table);
        img
    }

    #[test]
    fn walks_a_two_level_tree() {
        let img = image();
        let mut read = |b: u64| {
            img.get(&b)
                .cloned()
                .ok_or_else(|| LayoutError(format!("block {b} missing")))
        };
        let map = walk_file(2, &mut read, 1000).unwrap();
        assert_eq!(map.extents.len(), 301);
        assert_eq!(
            map.extents[300],
            Extent {
                logical_block: 300,
                len: 5,
                start_block: 900
            }
        );
        assert_eq!(map.tree_blocks, vec![20, 21]);
        assert_eq!(map.blocks_read, vec![0, 1, 4, 20, 21]);
    }

    #[test]
    fn broken_metadata_fails_cleanly() {
        let mut img = image();
        img.get_mut(&20).unwrap()[0] = 0; // smash the leaf's magic
        let mut read = |b: u64| {
            img.get(&b)
                .cloned()
                .ok_or_else(|| LayoutError(format!("block {b} missing")))
        };
        let err = walk_file(2, &mut read, 1000).unwrap_err();
        assert!(
            err.0.contains("extent block 20") && err.0.contains("magic"),
            "{err}"
        );

        let mut img = image();
        img.get_mut(&0).unwrap()[SUPERBLOCK_OFFSET + 56] = 0;
        let mut read = |b: u64| {
            img.get(&b)
                .cloned()
                .ok_or_else(|| LayoutError(format!("block {b} missing")))
        };
        assert!(walk_file(2, &mut read, 1000)
            .unwrap_err()
            .0
            .contains("superblock magic"));

        let img = image();
        let mut read = |b: u64| {
            img.get(&b)
                .cloned()
                .ok_or_else(|| LayoutError(format!("block {b} missing")))
        };
        assert!(walk_file(1, &mut read, 1000)
            .unwrap_err()
            .0
            .contains("does not use extents"));
        assert!(walk_file(65, &mut read, 1000)
            .unwrap_err()
            .0
            .contains("outside"));
    }

    #[test]
    fn self_referencing_tree_is_refused() {
        let mut img = image();
        let mut b = vec![0; BLOCK_BYTES];
        encode_node(
            &Node::Index {
                depth: 1,
                children: vec![ExtentIndex {
                    logical_block: 0,
                    child_block: 20,
                }],
            },
            &mut b,
        );
        img.insert(20, b);
        let mut read = |b: u64| {
            img.get(&b)
                .cloned()
                .ok_or_else(|| LayoutError(format!("block {b} missing")))
        };
        assert!(walk_file(2, &mut read, 1000).is_err());
    }
}
