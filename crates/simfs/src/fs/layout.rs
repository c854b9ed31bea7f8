//! Where mkfs puts the metadata: mke2fs 1.47's layout for ext4 with 4 KiB blocks (its
//! defaults: `flex_bg` 16, `sparse_super`, `resize_inode`, `64bit`, a journal inode), so
//! the free runs a file system starts with end where a real one's do. Checked against
//! `dumpe2fs` of `mkfs.ext4 -q -F` images of 2, 8 and 20 GiB on Debian's e2fsprogs 1.47.0
//! (tests below; docs/sources.md). The rules, from e2fsprogs' lib/ext2fs:
//! - group 0 and the `sparse_super` groups (1 and the powers of 3, 5 and 7) begin with a
//!   superblock, the group descriptors (64 bytes each) and the reserved descriptor blocks
//!   that let the file system grow 1,024 times (`calc_reserved_gdt_blocks`, at most 1,024);
//! - each flex group of 16 groups keeps its groups' block bitmaps, then their inode bitmaps,
//!   then their inode tables, packed from the first free block of its first group
//!   (`ext2fs_allocate_group_table`, `flexbg_offset`; the last flex group, when partial,
//!   spaces the three by its own group count plus one);
//! - the root directory, lost+found and the resize inode's block (6 blocks) follow group
//!   0's tables;
//! - the journal (`ext2fs_default_journal_size`: 4 MiB to 1 GiB by size) goes at the first
//!   free blocks from the first block of the group near the middle with the most free
//!   blocks (`get_midpoint_journal_block`);
//! - a last group too small for its own metadata and 50 blocks more is left out
//!   (`ext2fs_initialize`).

use crate::bitmap::Bitmap;
use crate::SimfsError;
use flash::fslayout::GroupDesc;

/// Groups per flex group (mke2fs.conf's default `flex_bg_size`).
pub(crate) const FLEX_GROUPS: u64 = 16;
/// Bytes of a group descriptor with the `64bit` feature.
const DESC_BYTES: u64 = 64;
/// Blocks of the root directory (1), lost+found (4) and the resize inode's double-indirect
/// block (1), which mke2fs allocates after group 0's tables.
const FIRST_FILES_BLOCKS: u64 = 6;

/// A new file system's metadata places.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Blocks the file system spans (a last group too small is left out).
    pub blocks: u64,
    pub descs: Vec<GroupDesc>,
    /// The journal's blocks, as (start, length) runs (marked used in `bitmap`; simfs
    /// writes no journal, so only the tests read where it went).
    #[cfg_attr(not(test), allow(dead_code))]
    pub journal: Vec<(u64, u64)>,
    /// Every metadata block (superblocks, descriptors, reserved descriptors, bitmaps, inode
    /// tables, the first files and the journal) marked used.
    pub bitmap: Bitmap,
}

/// Whether group `g` holds a superblock copy (`ext2fs_bg_has_super` with `sparse_super`).
pub(crate) fn has_super(g: u64) -> bool {
    let power_of = |base: u64| {
        let mut x = g;
        while x > 1 && x.is_multiple_of(base) {
            x /= base;
        }
        x == 1
    };
    g <= 1 || power_of(3) || power_of(5) || power_of(7)
}

/// Descriptor blocks for `groups` groups.
fn desc_blocks(groups: u64) -> u64 {
    (groups * DESC_BYTES).div_ceil(flash::fslayout::BLOCK_BYTES as u64)
}

/// `calc_reserved_gdt_blocks`: descriptor blocks kept for growth to 1,024 times the size
/// (or 2^32 blocks), at most 1,024 (a block of addresses).
fn reserved_desc_blocks(blocks: u64, blocks_per_group: u64) -> u64 {
    let max_blocks = if blocks < 0xffff_ffff / 1024 {
        blocks * 1024
    } else {
        0xffff_ffff
    };
    let per_block = flash::fslayout::BLOCK_BYTES as u64 / DESC_BYTES;
    let groups = max_blocks.div_ceil(blocks_per_group);
    groups
        .div_ceil(per_block)
        .saturating_sub(desc_blocks(blocks.div_ceil(blocks_per_group)))
        .min(1024)
}

/// `ext2fs_default_journal_size` in blocks (None: too small for a journal).
pub(crate) fn journal_blocks(blocks: u64) -> Option<u64> {
    Some(match blocks {
        0..2048 => return None,
        2048..32768 => 1024,
        32768..262_144 => 4096,
        262_144..524_288 => 8192,
        524_288..4_194_304 => 16384,
        4_194_304..8_388_608 => 32768,
        8_388_608..16_777_216 => 65536,
        16_777_216..33_554_432 => 131_072,
        _ => 262_144,
    })
}

/// The first block at or after `from` (below `end`) that starts `len` free blocks.
fn first_free_run(bitmap: &Bitmap, from: u64, len: u64, end: u64) -> Option<u64> {
    let mut b = from;
    while let Some(s) = bitmap.next_free(b).filter(|&s| s + len <= end) {
        let run = bitmap.free_run_len(s, len);
        if run >= len {
            return Some(s);
        }
        b = s + run;
    }
    None
}

/// mke2fs's layout for `blocks` blocks in groups of `blocks_per_group`, each with an inode
/// table of `itable_blocks` blocks.
pub(crate) fn mke2fs(
    blocks: u64,
    blocks_per_group: u64,
    itable_blocks: u64,
    size_bytes: u64,
) -> Result<Layout, SimfsError> {
    let bpg = blocks_per_group;
    let mut blocks = blocks;
    // `ext2fs_initialize`: a last group that cannot hold its metadata and 50 blocks goes.
    loop {
        let groups = blocks.div_ceil(bpg);
        let rem = blocks % bpg;
        let mut overhead = 2 + itable_blocks;
        if has_super(groups - 1) {
            overhead += 1 + desc_blocks(groups) + reserved_desc_blocks(blocks, bpg);
        }
        if groups == 1 && rem != 0 && rem < overhead {
            return Err(SimfsError::Config(format!(
                "{size_bytes} bytes ({blocks} blocks) cannot hold a group's superblock, descriptors, bitmaps and {itable_blocks}-block inode table; use a larger size"
            )));
        }
        if rem != 0 && rem < overhead + 50 {
            blocks -= rem;
            continue;
        }
        break;
    }
    let groups = blocks.div_ceil(bpg);
    let (gdt, reserved) = (desc_blocks(groups), reserved_desc_blocks(blocks, bpg));
    let too_small = |what: &str| {
        SimfsError::Config(format!(
            "{size_bytes} bytes leave no room for {what}; use a larger size"
        ))
    };
    let mut bitmap = Bitmap::new(blocks);
    for g in (0..groups).filter(|&g| has_super(g)) {
        let start = g * bpg;
        let len = (1 + gdt + reserved).min(blocks - start);
        bitmap.set_used(start, len);
    }
    let mut descs = Vec::with_capacity(groups as usize);
    for first in (0..groups).step_by(FLEX_GROUPS as usize) {
        let members = FLEX_GROUPS.min(groups - first);
        let last = first + members - 1;
        // The spacing of the three tables: 16, or for a partial last flex group the
        // position of its last group in it plus one (16 when that is 0).
        let spacing = if last == groups - 1 && !last.is_multiple_of(FLEX_GROUPS) {
            last % FLEX_GROUPS + 1
        } else {
            FLEX_GROUPS
        };
        let flex_end = ((last + 1) * bpg).min(blocks);
        let place = |bitmap: &mut Bitmap, want: u64, len: u64, what: &str| {
            let at = first_free_run(bitmap, want, len, flex_end)
                .or_else(|| first_free_run(bitmap, 0, len, blocks))
                .ok_or_else(|| too_small(what))?;
            bitmap.set_used(at, len);
            Ok::<u64, SimfsError>(at)
        };
        let bb0 = first_free_run(&bitmap, first * bpg, members, flex_end)
            .or_else(|| first_free_run(&bitmap, first * bpg, 1, flex_end))
            .ok_or_else(|| too_small("the block bitmaps"))?;
        let (mut bb, mut ib, mut it) = (bb0, bb0 + spacing, bb0 + 2 * spacing);
        for _ in 0..members {
            let block_bitmap = place(&mut bitmap, bb, 1, "a block bitmap")?;
            let inode_bitmap = place(&mut bitmap, ib.max(block_bitmap + 1), 1, "an inode bitmap")?;
            let inode_table = place(&mut bitmap, it, itable_blocks, "an inode table")?;
            descs.push(GroupDesc {
                block_bitmap: block_bitmap as u32,
                inode_bitmap: inode_bitmap as u32,
                inode_table: inode_table as u32,
            });
            (bb, ib, it) = (
                block_bitmap + 1,
                inode_bitmap + 1,
                inode_table + itable_blocks,
            );
        }
    }
    let first_files = first_free_run(&bitmap, 0, FIRST_FILES_BLOCKS, blocks)
        .ok_or_else(|| too_small("the root directory and lost+found"))?;
    bitmap.set_used(first_files, FIRST_FILES_BLOCKS);
    let mut journal = Vec::new();
    if let Some(mut want) = journal_blocks(blocks) {
        let goal = midpoint_journal_group(&bitmap, bpg) * bpg;
        let mut b = goal;
        while want > 0 {
            let Some(s) = bitmap.next_free(b).or_else(|| bitmap.next_free(0)) else {
                return Err(too_small("the journal"));
            };
            let len = bitmap.free_run_len(s, want);
            bitmap.set_used(s, len);
            journal.push((s, len));
            want -= len;
            b = s + len;
        }
    }
    Ok(Layout {
        blocks,
        descs,
        journal,
        bitmap,
    })
}

/// `get_midpoint_journal_block`'s group: the middle block's group (on a file system of
/// more than one flex group, its flex group's first group with free blocks), or whichever
/// of it and its neighbours has the most free blocks.
fn midpoint_journal_group(bitmap: &Bitmap, bpg: u64) -> u64 {
    let blocks = bitmap.blocks();
    let counts = group_free_counts(bitmap, bpg);
    let groups = counts.len() as u64;
    let free = |g: u64| counts[g as usize].0;
    let mut group = (blocks / 2) / bpg;
    let start = if group > FLEX_GROUPS {
        group &= !(FLEX_GROUPS - 1);
        while group < groups && free(group) == 0 {
            group += 1;
        }
        if group == groups {
            group = 0;
        }
        group
    } else {
        group.saturating_sub(1)
    };
    let end = if group + 1 < groups { group + 1 } else { group };
    let mut best = start;
    for g in start + 1..=end {
        if free(g) > free(best) {
            best = g;
        }
    }
    best
}

/// Each group's free blocks and free runs (ext4's `bb_free`, `bb_fragments`).
pub(super) fn group_free_counts(bitmap: &Bitmap, blocks_per_group: u64) -> Vec<(u64, u64)> {
    let groups = bitmap.blocks().div_ceil(blocks_per_group);
    (0..groups)
        .map(|g| {
            let (lo, hi) = (
                g * blocks_per_group,
                ((g + 1) * blocks_per_group).min(bitmap.blocks()),
            );
            let (mut free, mut runs, mut b) = (0, 0, lo);
            while let Some(s) = bitmap.next_free(b).filter(|&s| s < hi) {
                let len = bitmap.free_run_len(s, hi - s);
                free += len;
                runs += 1;
                b = s + len;
            }
            (free, runs)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (group, first free block, last free block) as `dumpe2fs` printed them for the
    /// group's free blocks (one run each), and the journal's first block.
    fn check(size_gib: u64, free: &[(u64, u64, u64)], journal_at: u64, journal_len: u64) {
        let blocks = size_gib << 18;
        let l = mke2fs(blocks, 32768, 512, size_gib << 30).unwrap();
        for &(g, lo, hi) in free {
            let (glo, ghi) = (g * 32768, (g + 1) * 32768);
            let runs: Vec<(u64, u64)> = {
                let mut v = Vec::new();
                let mut b = glo;
                while let Some(s) = l.bitmap.next_free(b).filter(|&s| s < ghi) {
                    let n = l.bitmap.free_run_len(s, ghi - s);
                    v.push((s, s + n - 1));
                    b = s + n;
                }
                v
            };
            assert_eq!(runs, vec![(lo, hi)], "{size_gib} GiB, group {g}");
        }
        assert_eq!(
            l.journal,
            vec![(journal_at, journal_len)],
            "{size_gib} GiB journal"
        );
    }

    #[test]
    fn group_layouts_are_mke2fs_1_47s() {
        // mkfs.ext4 -q -F of a 2 GiB image; dumpe2fs.
        check(
            2,
            &[
                (0, 8487, 32767),
                (1, 33025, 65535),
                (2, 65536, 98303),
                (3, 98561, 131071),
                (7, 229633, 262143),
                (9, 295169, 327679),
            ],
            262_144,
            16384,
        );
        let l = mke2fs(2 << 18, 32768, 512, 2 << 30).unwrap();
        assert_eq!(
            (
                l.descs[0].block_bitmap,
                l.descs[1].inode_bitmap,
                l.descs[1].inode_table
            ),
            (257, 274, 801)
        );
        // 8 GiB: 1,023 reserved descriptor blocks.
        check(
            8,
            &[(0, 9255, 32767), (1, 33793, 65535), (2, 65536, 98303)],
            1_081_344,
            16384,
        );
        // 20 GiB: 3 descriptor blocks, 1,024 reserved, ten flex groups, a 128 MiB journal in
        // group 81 after its backup.
        check(
            20,
            &[
                (0, 9258, 32767),
                (1, 33796, 65535),
                (16, 532_512, 557_055),
                (17, 557_056, 589_823),
            ],
            2_655_236,
            32768,
        );
        let l = mke2fs(20 << 18, 32768, 512, 20 << 30).unwrap();
        assert_eq!(
            (
                l.descs[16].inode_bitmap,
                l.descs[25].inode_table,
                l.descs[159].block_bitmap
            ),
            (524_304, 528_928, 4_718_607)
        );
    }

    #[test]
    fn backups_are_in_group_one_and_the_powers_of_three_five_and_seven() {
        let with: Vec<u64> = (0..130).filter(|&g| has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125]);
    }

    #[test]
    fn a_last_group_too_small_for_its_metadata_is_left_out() {
        // 16 groups and 100 blocks: group 16 would need its bitmaps, a 512-block table
        // and 50 blocks.
        let l = mke2fs(16 * 32768 + 100, 32768, 512, 0).unwrap();
        assert_eq!((l.blocks, l.descs.len()), (16 * 32768, 16));
        let l = mke2fs(16 * 32768 + 1000, 32768, 512, 0).unwrap();
        assert_eq!((l.blocks, l.descs.len()), (16 * 32768 + 1000, 17));
        assert!(mke2fs(300, 32768, 512, 300 * 4096).is_err());
    }
}
