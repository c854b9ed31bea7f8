//! The vocabulary every part of simfs shares: the block size, inode numbers, block runs,
//! the allocation and discard policies, the configuration and the counters.

use flash::fslayout::BLOCK_BYTES;
use std::fmt;
use std::str::FromStr;

pub const BLOCK: u64 = BLOCK_BYTES as u64;

/// First inode number handed to files (ext4 reserves 1–10 and uses 11 for lost+found).
pub const FIRST_INODE: u32 = 12;

/// Ranges one vTrim command carries: a 4-byte count, then 8-byte (start block, blocks)
/// entries in a 4 KiB payload.
pub const VTRIM_MAX_RANGES: usize = (BLOCK_BYTES - 4) / 8;

/// Largest mballoc-style preallocation window: 8 MiB.
pub const PREALLOC_MAX_BLOCKS: u64 = 2048;
/// mballoc's `s_mb_stream_request` (16 blocks): files up to this size take their blocks
/// from the locality-group preallocation, larger ones get windows of their own.
pub const STREAM_REQUEST_BLOCKS: u64 = 16;
/// mballoc's `s_mb_group_prealloc` (512 blocks): the locality-group window.
pub const GROUP_PREALLOC_BLOCKS: u64 = 512;

/// The most blocks ext4's writeback maps in one request (`MAX_WRITEPAGES_EXTENT_LEN`,
/// fs/ext4/inode.c): 8 MiB.
pub const MAX_WRITEPAGES_EXTENT_BLOCKS: u64 = 2048;

/// Where new blocks go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocPolicy {
    /// ext4-like: continue at the file's goal (the block after its last extent); when that
    /// block is taken, take the next free run after a global next-fit cursor. Files written
    /// concurrently therefore interleave and fragment.
    Ext4Like,
    /// F2FS-like: every write, overwrites included, appends at the head of the current
    /// 2 MiB segment; a new head is always a clean segment; when clean segments run low,
    /// the segment with the fewest live blocks is cleaned (its live blocks read and
    /// appended at the head). Freed blocks are discarded at the next sync (checkpoint).
    LogStructured,
}

impl fmt::Display for AllocPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AllocPolicy::Ext4Like => "ext4-like",
            AllocPolicy::LogStructured => "log-structured",
        })
    }
}

impl FromStr for AllocPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ext4" | "ext4-like" => Ok(AllocPolicy::Ext4Like),
            "log" | "log-structured" | "lfs" => Ok(AllocPolicy::LogStructured),
            _ => Err(format!(
                "unknown allocation policy {s:?}: expected ext4-like or log-structured"
            )),
        }
    }
}

/// What `unlink` tells the drive about the freed blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscardMode {
    /// Nothing: the drive keeps the dead data valid.
    None,
    /// One TRIM per freed extent, at once (ext4 `-o discard`).
    Online,
    /// All ranges of the delete in one vectored TRIM (4 KiB payload, up to 511 ranges).
    VTrim,
    /// Only the inode number; the drive walks the metadata itself.
    FTrim,
    /// Ranges collected and sent later by [`crate::SimFs::fstrim`], merged, one TRIM per range.
    Deferred,
    /// ext4 `-o discard` as Linux does it: freed extents wait for the next journal commit
    /// ([`crate::SimFs::sync`]), are not reused before it, and are then discarded merged within
    /// their block group, one TRIM per run (fs/ext4/mballoc.c:
    /// ext4_free_data_in_buddy and ext4_try_merge_freed_extent).
    Journal,
}

impl FromStr for DiscardMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "none" => DiscardMode::None,
            "online" | "trim" => DiscardMode::Online,
            "vtrim" => DiscardMode::VTrim,
            "ftrim" => DiscardMode::FTrim,
            "deferred" => DiscardMode::Deferred,
            "journal" => DiscardMode::Journal,
            _ => {
                return Err(format!(
                    "unknown discard mode {s:?}: expected none, online, journal, vtrim, ftrim or deferred"
                ))
            }
        })
    }
}

impl fmt::Display for DiscardMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DiscardMode::None => "none",
            DiscardMode::Online => "online",
            DiscardMode::VTrim => "vtrim",
            DiscardMode::FTrim => "ftrim",
            DiscardMode::Deferred => "deferred",
            DiscardMode::Journal => "journal",
        })
    }
}

/// Inodes per group as mke2fs sets them (misc/mke2fs.conf.in: one inode per
/// `inode_ratio` bytes: 16,384 by default, 4,096 for "small" file systems under 512 MiB,
/// 8,192 for "floppy" ones under 3 MiB), spread over the groups and rounded up to whole
/// inode-table blocks (16 inodes of 256 bytes), at most one bitmap block's worth.
pub fn mke2fs_inodes_per_group(size_bytes: u64, blocks_per_group: u32) -> u32 {
    const MIB: u64 = 1 << 20;
    let inode_ratio = if size_bytes < 3 * MIB {
        8192
    } else if size_bytes < 512 * MIB {
        4096
    } else {
        16384
    };
    let groups = (size_bytes / BLOCK)
        .div_ceil(blocks_per_group as u64)
        .max(1);
    let per_group = (size_bytes / inode_ratio).div_ceil(groups).div_ceil(16) * 16;
    per_group.clamp(16, (BLOCK * 8).min(32768)) as u32
}

/// Which Linux kernel's ext4 online discard (`-o discard`) the journal discard mode
/// follows (fs/ext4/mballoc.c and its history; docs/simfs.md):
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiscardKernel {
    /// 3.4 to 5.14 (paper 000's CentOS 7 ran 3.10): adjacent extents freed in one
    /// transaction merge; after the commit each run is discarded exactly, before its
    /// blocks are free again (4.13 sends the same ranges as chained bios).
    #[default]
    Linux3_10,
    /// 5.15 (55cdd0af2bc5): the commit gives the runs back to the free space at once
    /// and a background worker discards them afterwards, in the order they were freed,
    /// one TRIM at a time: blocks allocated again before the worker reaches them are not
    /// discarded, and the blocks of the TRIM in flight cannot be allocated
    /// (`ext4_discard_work`, `ext4_try_to_trim_range`, `ext4_trim_extent`).
    Linux5_15,
    /// 6.8 and the 2024 stable kernels (68da4c44b994): as 5.15, and each TRIM runs on from
    /// the run's first free block to the end of the free space it lies in, within its
    /// group: the same free space is discarded again for every run a commit freed in it.
    Linux6_8,
    /// 6.17 (Baokun Li's 2025 series): as 6.8, and a freed extent merges only with the
    /// entry its tree search ended at, so adjacent extents can stay separate entries, one
    /// discard each ([`crate::freed`]).
    Linux6_17,
}

impl DiscardKernel {
    pub const ALL: [DiscardKernel; 4] = [
        DiscardKernel::Linux3_10,
        DiscardKernel::Linux5_15,
        DiscardKernel::Linux6_8,
        DiscardKernel::Linux6_17,
    ];

    /// The release, as a user writes it ("6.8").
    pub fn version(self) -> &'static str {
        match self {
            DiscardKernel::Linux3_10 => "3.10",
            DiscardKernel::Linux5_15 => "5.15",
            DiscardKernel::Linux6_8 => "6.8",
            DiscardKernel::Linux6_17 => "6.17",
        }
    }

    /// A background worker discards after the commit.
    pub fn worker(self) -> bool {
        self != DiscardKernel::Linux3_10
    }

    /// Each TRIM runs to the end of its free run.
    pub fn to_free_run_end(self) -> bool {
        matches!(self, DiscardKernel::Linux6_8 | DiscardKernel::Linux6_17)
    }

    /// mballoc gives a small file that nobody has open for writing, written back to its
    /// end, blocks from the locality-group window (Jan Kara's a9f2a2931d0e, Linux 6.0 and
    /// 5.19's stable series); before, such a file got no preallocation at all, small or
    /// large (the lines that change removes; taken to hold back to 3.10, not checked
    /// further back).
    pub fn closed_small_files_share_group_window(self) -> bool {
        matches!(self, DiscardKernel::Linux6_8 | DiscardKernel::Linux6_17)
    }

    /// mballoc keeps a stream goal per CPU (`s_mb_last_groups`, Baokun Li's 2025 series,
    /// 6.17); before, one for the file system (`s_mb_last_group`).
    pub fn stream_goal_per_cpu(self) -> bool {
        self == DiscardKernel::Linux6_17
    }

    /// With `mb_optimize_scan`, a power-of-two window goes to the group whose largest free
    /// buddy is the smallest that holds it (xarrays by order, ascending from the goal,
    /// 6.17); 5.13 to 6.16 keep lists in the order groups joined them, not modelled (taken
    /// as the groups in order from the goal, as before 5.13).
    pub fn chooses_groups_by_free_order(self) -> bool {
        self == DiscardKernel::Linux6_17
    }

    /// Freed extents merge only with the entry their tree search ends at.
    pub fn merges_with_search_parent_only(self) -> bool {
        self == DiscardKernel::Linux6_17
    }

    /// A write that allocates maps its blocks as unwritten extents and converts them once
    /// the data is on the device (ext4's `dioread_nolock`, the default since 5.6:
    /// 244adf6426ee). An unwritten extent never merges with a written neighbour
    /// (`ext4_can_extents_be_merged`), so a file with the inode's four extents grows a
    /// tree block for the new one (`ext4_ext_grow_indepth`) and, when the conversion merges
    /// it back to four or fewer, gives the block back (`ext4_ext_try_to_merge_up`,
    /// ecb94f5fdf4b, 3.11): one freed extent each time, discarded after the commit like
    /// any other. Under 3.10's rules writes map written extents directly (5.6 to 5.14,
    /// whose discards follow 3.10's rule, wrote unwritten extents already: 5.15 is the
    /// nearer model of them).
    pub fn writes_unwritten_extents(self) -> bool {
        self != DiscardKernel::Linux3_10
    }
}

impl std::fmt::Display for DiscardKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Linux {}", self.version())
    }
}

impl std::str::FromStr for DiscardKernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let v = s
            .trim()
            .trim_start_matches("linux-")
            .trim_start_matches("Linux ");
        DiscardKernel::ALL
            .into_iter()
            .find(|k| k.version() == v)
            .ok_or_else(|| {
                format!(
                    "unknown kernel {s:?}: give one of {} (the releases where ext4's online discard changed; a kernel between two behaves as the earlier)",
                    DiscardKernel::ALL.map(|k| k.version()).join(", ")
                )
            })
    }
}

/// A file's expected data lifetime, as Linux's `fcntl(fd, F_SET_RW_HINT, &hint)` takes it:
/// the values of `RWH_WRITE_LIFE_*` in include/uapi/linux/fcntl.h (0 is spelled
/// `RWF_WRITE_LIFE_NOT_SET` there, "not set", and clears a hint set before). Linux keeps
/// it on the inode (`i_write_hint`), in memory only; so does simfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum WriteHint {
    #[default]
    NotSet = 0,
    None = 1,
    Short = 2,
    Medium = 3,
    Long = 4,
    Extreme = 5,
}

impl WriteHint {
    pub const ALL: [WriteHint; 6] = [
        WriteHint::NotSet,
        WriteHint::None,
        WriteHint::Short,
        WriteHint::Medium,
        WriteHint::Long,
        WriteHint::Extreme,
    ];

    /// The hint with Linux's value `v` (what `F_SET_RW_HINT` accepts: 0-5).
    pub fn from_value(v: u64) -> Result<WriteHint, String> {
        WriteHint::ALL
            .into_iter()
            .find(|h| *h as u64 == v)
            .ok_or_else(|| {
                format!("write-life hint {v} is not one of Linux's RWH_WRITE_LIFE_* values 0-5")
            })
    }

    /// Linux's value (`RWH_WRITE_LIFE_*`).
    pub fn value(self) -> u64 {
        self as u64
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteHint::NotSet => "not-set",
            WriteHint::None => "none",
            WriteHint::Short => "short",
            WriteHint::Medium => "medium",
            WriteHint::Long => "long",
            WriteHint::Extreme => "extreme",
        }
    }
}

impl fmt::Display for WriteHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WriteHint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(v) = s.parse::<u64>() {
            return WriteHint::from_value(v);
        }
        WriteHint::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown write-life hint {s:?}: expected not-set, none, short, medium, long, extreme or 0-5"
                )
            })
    }
}

/// Where simfs's writes go on a drive with placement handles (NVMe FDP): each write-life
/// hint maps to a handle; file data carries its file's hint, metadata the hints below.
/// With no placement ([`FsConfig::placement`] `None`) every write is on handle 0, as
/// before hints existed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintPlacement {
    /// The handle of each hint, indexed by its value.
    pub handle_of: [u16; 6],
    /// The hint of inode-table and bitmap blocks: `WRITE_LIFE_MEDIUM`, the hint F2FS's
    /// `whint_mode=fs-based` gives its META area (Documentation/filesystems/f2fs.rst,
    /// Linux 4.16-5.17), which is likewise rewritten in place.
    pub meta_hint: WriteHint,
    /// The hint of extent-tree blocks: `WRITE_LIFE_NOT_SET`, F2FS's fs-based hint for its
    /// hot and warm node blocks (the per-file maps).
    pub tree_hint: WriteHint,
}

impl HintPlacement {
    /// Linux's own map from hints to NVMe streams (drivers/nvme/host/core.c,
    /// `nvme_assign_write_stream`, Linux 4.13-5.17): `NOT_SET` and `NONE` on stream 0,
    /// `SHORT`..`EXTREME` on stream `hint - 1` (1-4). The kernel turned streams off on a
    /// drive with fewer than 4; here a drive with `handles` < 5 gets the streams past its
    /// last handle folded onto that last handle (1 handle: everything on 0).
    pub fn linux_streams(handles: u16) -> HintPlacement {
        let last = handles.max(1) - 1;
        let mut handle_of = [0u16; 6];
        for h in WriteHint::ALL {
            let stream = (h.value().max(1) - 1) as u16;
            handle_of[h as usize] = stream.min(last);
        }
        HintPlacement {
            handle_of,
            meta_hint: WriteHint::Medium,
            tree_hint: WriteHint::NotSet,
        }
    }

    /// The handle `hint`'s writes carry.
    pub fn handle(&self, hint: WriteHint) -> u16 {
        self.handle_of[hint as usize]
    }
}

/// The zones of a zoned drive, as its Report Zones gives them: simfs's log-structured
/// policy runs on them with a segment per zone ([`FsConfig::for_zoned`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneLayout {
    pub zones: u32,
    pub zone_bytes: u64,
    /// The writable bytes at the start of each zone.
    pub zone_capacity_bytes: u64,
    /// The drive's limits (0: none); the file system keeps one zone open at a time.
    pub max_open_zones: u32,
    pub max_active_zones: u32,
}

impl ZoneLayout {
    /// The zones of `dev`, if it is a zoned drive.
    pub fn of(dev: &flash::AnyDevice) -> Option<ZoneLayout> {
        match dev {
            flash::AnyDevice::Zoned(z) => {
                let limits = z.config().zoned.as_deref().cloned().unwrap_or_default();
                Some(ZoneLayout {
                    zones: z.zones(),
                    zone_bytes: z.zone_size_bytes(),
                    zone_capacity_bytes: z.zone_capacity_bytes(),
                    max_open_zones: limits.max_open_zones,
                    max_active_zones: limits.max_active_zones,
                })
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FsConfig {
    pub size_bytes: u64,
    pub blocks_per_group: u32,
    pub inodes_per_group: u32,
    pub alloc: AllocPolicy,
    pub discard: DiscardMode,
    /// ext4-like: mballoc's preallocation for appends (buffered and O_DIRECT writes alike:
    /// small files share the locality-group window, larger ones get windows of their own
    /// to the end of their size bucket); off, every write allocates on its own.
    pub prealloc: bool,
    /// With [`DiscardMode::Journal`]: which Linux kernel's ext4 online discard to follow
    /// (when and what a commit discards; [`DiscardKernel`]).
    pub kernel: DiscardKernel,
    /// Placement handles for writes by write-life hint (None: every write on handle 0).
    pub placement: Option<HintPlacement>,
    /// On a zoned drive: its zones, each a segment of the log-structured policy
    /// ([`FsConfig::for_zoned`]); None on every other device.
    pub zoned: Option<ZoneLayout>,
    /// The host's CPUs (`num_possible_cpus()`): under Linux 6.17's rules mballoc keeps one
    /// stream goal per CPU, up to one per four groups ([`SimFs::place_window`]). Default 2:
    /// the machine the model is checked on (tempfiles-pg's real server).
    pub host_cpus: u32,
    /// The block device reports itself rotational (`queue/rotational`): mballoc then scans
    /// the first four groups from its goal in order before choosing groups by their free
    /// buddies (`s_mb_max_linear_groups`, `MB_DEFAULT_LINEAR_LIMIT`); on a non-rotational
    /// one (an SSD, the default) it chooses by free buddies at once.
    pub rotational: bool,
}

impl FsConfig {
    /// ext4's defaults for 4 KiB blocks: 32,768 blocks (128 MiB) per group, and as many
    /// inodes as mke2fs gives a file system of this size ([`mke2fs_inodes_per_group`]).
    pub fn new(size_bytes: u64) -> Self {
        let blocks_per_group = 32768;
        FsConfig {
            size_bytes,
            blocks_per_group,
            inodes_per_group: mke2fs_inodes_per_group(size_bytes, blocks_per_group),
            alloc: AllocPolicy::Ext4Like,
            discard: DiscardMode::None,
            prealloc: false,
            kernel: DiscardKernel::Linux3_10,
            placement: None,
            zoned: None,
            host_cpus: 2,
            rotational: false,
        }
    }

    /// A file system on 90% of a `device_bytes` device (whole blocks, leaving the last
    /// 4 KiB page free for vTrim/fTrim commands); a device too small for any block gives
    /// 0 bytes, which mkfs refuses with a clear error.
    pub fn for_device(device_bytes: u64) -> Self {
        FsConfig::new(device_bytes.saturating_sub(BLOCK) / BLOCK * BLOCK * 9 / 10)
    }

    /// A file system over every zone of a zoned drive: the log-structured policy with a
    /// segment per zone, no discard mode (emptied zones are reset instead), inodes as
    /// mke2fs gives a device of that size. The metadata is written into the log.
    pub fn for_zoned(zones: ZoneLayout) -> Self {
        FsConfig {
            alloc: AllocPolicy::LogStructured,
            zoned: Some(zones),
            ..FsConfig::new(zones.zones as u64 * zones.zone_bytes)
        }
    }
}

/// Requests simfs issued, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsStats {
    pub data_write_requests: u64,
    pub data_write_bytes: u64,
    pub data_read_requests: u64,
    pub data_read_bytes: u64,
    pub meta_write_requests: u64,
    pub trim_commands: u64,
    /// Log-structured policy: segments cleaned and live blocks they moved.
    pub cleaned_segments: u64,
    pub cleaned_blocks: u64,
    /// Zoned: zones reset (each a TRIM of the whole zone, which a zoned drive carries out
    /// as Zone Management Send, Reset Zone).
    pub zone_resets: u64,
    pub vtrim_commands: u64,
    pub ftrim_commands: u64,
    /// Bytes named by TRIM-family commands (for fTrim: the file's blocks).
    pub discarded_bytes: u64,
    /// Extents deletes freed, each cut at block-group boundaries: one for each
    /// `ext4_mb_clear_bb` call ext4 makes when a file's extents and tree blocks go
    /// (`ext4_free_blocks` frees an extent a group at a time), so the count to set beside
    /// the kernel's `ext4:ext4_mballoc_free` events. Counted at unlink, and for each tree
    /// block a conversion of unwritten extents gives back
    /// ([`DiscardKernel::writes_unwritten_extents`]); simfs has no truncate or hole punch,
    /// whose frees ext4 also reports. Whatever the discard mode.
    pub freed_extents: u64,
    pub flushes: u64,
}

/// A file's inode number.
pub type Ino = u32;

/// Sorts block runs and merges adjacent ones.
pub(crate) fn merge_runs(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (s, l) in runs {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == s => last.1 += l,
            _ => out.push((s, l)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::mke2fs_inodes_per_group;

    #[test]
    fn inodes_follow_mke2fs_ratios() {
        // 921 MiB ("default", 16 KiB per inode): 58,944 inodes over 8 groups.
        assert_eq!(mke2fs_inodes_per_group(921 << 20, 32768), 7376);
        // 16 MiB ("small", 4 KiB per inode): one group.
        assert_eq!(mke2fs_inodes_per_group(16 << 20, 32768), 4096);
        // 1 MiB ("floppy", 8 KiB per inode).
        assert_eq!(mke2fs_inodes_per_group(1 << 20, 32768), 128);
        // 64 GiB: 8,192 per 128 MiB group, ext4's familiar number.
        assert_eq!(mke2fs_inodes_per_group(64 << 30, 32768), 8192);
    }
}
