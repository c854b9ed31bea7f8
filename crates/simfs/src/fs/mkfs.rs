//! Creating a file system: the layout of groups, bitmaps and inode tables, written to the
//! device as mkfs.ext4 would.

use super::*;

impl<D: BlockDev> SimFs<D> {
    /// Creates a file system of `cfg.size_bytes` at the start of `dev`, writing its
    /// superblock, group descriptors and bitmaps (inode tables are written lazily, as
    /// ext4's lazy_itable_init does). The device's last 4 KiB page stays free: vTrim and
    /// fTrim commands are addressed to it.
    pub fn mkfs(dev: D, cfg: FsConfig) -> Result<Self, SimfsError> {
        let command_page = (dev.capacity_bytes() / BLOCK).saturating_sub(1) * BLOCK;
        if let Some(z) = cfg.zoned {
            Self::check_zoned(&cfg, z, dev.capacity_bytes())?;
        }
        // Zoned: the data blocks are the zones'; the metadata's home blocks (superblock,
        // descriptors, bitmaps, inode tables) follow them as addresses only: every
        // metadata write goes into the log.
        let data_blocks = cfg.size_bytes / BLOCK;
        let meta_home = cfg.zoned.map(|_| data_blocks);
        let mut blocks = data_blocks;
        if cfg.zoned.is_none() && cfg.size_bytes > command_page {
            return Err(SimfsError::Config(format!(
                "a {} byte file system does not fit a {} byte device (its last 4 KiB page is reserved for vTrim/fTrim)",
                cfg.size_bytes,
                dev.capacity_bytes()
            )));
        }
        if cfg.blocks_per_group == 0
            || cfg.blocks_per_group > 32768
            || !cfg.blocks_per_group.is_multiple_of(8)
        {
            return Err(SimfsError::Config(
                "blocks_per_group must be a multiple of 8 up to 32768 (one bitmap block)".into(),
            ));
        }
        let ipg = cfg.inodes_per_group;
        if ipg == 0 || !ipg.is_multiple_of(16) || ipg > 8 * BLOCK_BYTES as u32 {
            return Err(SimfsError::Config(
                "inodes_per_group must be a positive multiple of 16 up to 32768".into(),
            ));
        }
        if blocks > u32::MAX as u64 {
            return Err(SimfsError::Config("more than 2^32 blocks".into()));
        }
        if blocks == 0 {
            return Err(SimfsError::Config(format!(
                "a {} byte file system holds no whole {BLOCK} byte block; use a larger size",
                cfg.size_bytes
            )));
        }
        let itable_blocks = ipg as u64 * INODE_BYTES as u64 / BLOCK;
        let (mut bitmap, descs, groups, gdt_blocks);
        if let Some(home) = meta_home {
            let g = blocks.div_ceil(cfg.blocks_per_group as u64);
            gdt_blocks = (g * 32).div_ceil(BLOCK);
            blocks = home + 1 + gdt_blocks + g * (2 + itable_blocks);
            if blocks > u32::MAX as u64 {
                return Err(SimfsError::Config("more than 2^32 blocks".into()));
            }
            bitmap = Bitmap::new(blocks);
            descs = (0..g)
                .map(|g| {
                    let meta = home + 1 + gdt_blocks + g * (2 + itable_blocks);
                    GroupDesc {
                        block_bitmap: meta as u32,
                        inode_bitmap: meta as u32 + 1,
                        inode_table: meta as u32 + 2,
                    }
                })
                .collect::<Vec<_>>();
            groups = g as u32;
        } else {
            // mke2fs's layout (fs/layout.rs); the descriptors are encoded 32 bytes each
            // into the first of the blocks it keeps for them.
            let l = super::layout::mke2fs(
                blocks,
                cfg.blocks_per_group as u64,
                itable_blocks,
                cfg.size_bytes,
            )?;
            blocks = l.blocks;
            groups = l.descs.len() as u32;
            gdt_blocks = (groups as u64 * 32).div_ceil(BLOCK);
            bitmap = l.bitmap;
            descs = l.descs;
        }
        if let (Some(home), Some(z)) = (meta_home, cfg.zoned) {
            // The home blocks, and each zone's blocks past its capacity, are never
            // allocated.
            bitmap.set_used(home, blocks - home);
            let (zone_blocks, cap_blocks) = (z.zone_bytes / BLOCK, z.zone_capacity_bytes / BLOCK);
            if cap_blocks < zone_blocks {
                for zone in 0..z.zones as u64 {
                    bitmap.set_used(zone * zone_blocks + cap_blocks, zone_blocks - cap_blocks);
                }
            }
        }
        let sb = Superblock {
            inodes_count: groups * ipg,
            blocks_count: blocks as u32,
            blocks_per_group: cfg.blocks_per_group,
            inodes_per_group: ipg,
        };
        let cursor = bitmap.next_free(0).unwrap_or(0);
        let allocator = crate::allocator::for_policy(cfg.alloc, &bitmap, cfg.zoned);
        let group_free = super::layout::group_free_counts(&bitmap, cfg.blocks_per_group as u64);
        let metadata_blocks = bitmap.blocks() - bitmap.free_blocks();
        let mut fs = SimFs {
            metadata_blocks,
            dev,
            group_free,
            inode_used: vec![false; sb.inodes_count as usize],
            sb,
            descs,
            bitmap,
            files: HashMap::new(),
            names: BTreeMap::new(),
            cursor,
            lg_pa: None,
            stream_goals: vec![0; super::alloc::stream_goal_count(&cfg, groups) as usize],
            largest_order: vec![super::alloc::STALE_ORDER; groups as usize],
            deferred: Vec::new(),
            freed_uncommitted: Vec::new(),
            discard_queue: Default::default(),
            discard_in_flight: None,
            worker_free_at_ns: 0,
            worker_clock_override: None,
            committing: false,
            dirty_groups: (0..groups).collect(),
            dirty_files: BTreeSet::new(),
            dirty_itable: BTreeSet::new(),
            command_page,
            stats: FsStats::default(),
            allocator,
            meta_copies: HashMap::new(),
            alloc_class: 0,
            cfg,
        };
        if let (Some(_), Some(p)) = (fs.cfg.zoned, fs.cfg.placement) {
            // Zoned with a hint map: a log (open zone) per class the map names.
            let logs = p.handle_of.iter().max().map_or(1, |&h| h as usize + 1);
            fs.log_mut().set_logs(logs);
        }
        // Reserved inodes 1..FIRST_INODE are in use from the start.
        for i in 0..(FIRST_INODE - 1) as usize {
            fs.inode_used[i] = true;
        }
        let base = meta_home.unwrap_or(0);
        let mut b0 = vec![0u8; BLOCK_BYTES];
        fs.sb.encode(&mut b0);
        fs.write_meta(base, b0, false)?;
        for gb in 0..gdt_blocks {
            let mut b = vec![0u8; BLOCK_BYTES];
            for (g, d) in fs.descs.iter().enumerate() {
                let (blk, off) = group_desc_location(g as u32);
                if blk == 1 + gb {
                    d.encode(&mut b[off..off + 32]);
                }
            }
            fs.write_meta(base + 1 + gb, b, false)?;
        }
        fs.sync()?;
        Ok(fs)
    }

    /// A zoned configuration simfs can run, or an error naming what does not fit.
    fn check_zoned(cfg: &FsConfig, z: ZoneLayout, device_bytes: u64) -> Result<(), SimfsError> {
        if cfg.alloc != AllocPolicy::LogStructured {
            return Err(SimfsError::Config(format!(
                "a zoned drive is written only at each zone's write pointer: simfs runs on it with the log-structured policy, not {}",
                cfg.alloc
            )));
        }
        if cfg.discard != DiscardMode::None {
            return Err(SimfsError::Config(format!(
                "on a zoned drive simfs resets emptied zones itself; discard mode {} (TRIMs of freed extents) does not apply: use none",
                cfg.discard
            )));
        }
        if z.zone_bytes == 0
            || !z.zone_bytes.is_multiple_of(BLOCK)
            || z.zone_capacity_bytes == 0
            || z.zone_capacity_bytes > z.zone_bytes
            || !z.zone_capacity_bytes.is_multiple_of(BLOCK)
        {
            return Err(SimfsError::Config(format!(
                "zones of {} bytes with {} writable: both must be whole {BLOCK} byte blocks, the capacity at most the size",
                z.zone_bytes, z.zone_capacity_bytes
            )));
        }
        if cfg.size_bytes != z.zones as u64 * z.zone_bytes
            || z.zones as u64 * z.zone_bytes > device_bytes
        {
            return Err(SimfsError::Config(format!(
                "a zoned file system covers the drive's zones: {} zones of {} bytes make {} bytes (the configuration says {}, the device holds {})",
                z.zones,
                z.zone_bytes,
                z.zones as u64 * z.zone_bytes,
                cfg.size_bytes,
                device_bytes
            )));
        }
        // A write that cleaning interrupts keeps its first zone active while cleaning
        // writes another (fs/log.rs): one active zone per log and one more.
        let logs = cfg
            .placement
            .map_or(1, |p| p.handle_of.iter().max().map_or(1, |&h| h as u32 + 1));
        if z.max_active_zones != 0 && z.max_active_zones < logs + 1 {
            return Err(SimfsError::Config(format!(
                "the log on a zoned drive may keep {} zones active at once ({logs} log head(s) and the zone cleaning copies into): max_active_zones must be 0 (no limit) or at least {}, not {}",
                logs + 1,
                logs + 1,
                z.max_active_zones
            )));
        }
        // Each log's head, the zone a head moves to while a victim's live blocks are
        // copied, and the reserve cleaning keeps (2 zones): 4 zones at the least for one log.
        let min_zones = logs + 3;
        if z.zones < min_zones {
            return Err(SimfsError::Config(format!(
                "the log on a zoned drive needs at least {min_zones} zones ({logs} log head(s), the next, and 2 kept free for cleaning); this drive has {} of {} bytes: raise the capacity",
                z.zones, z.zone_bytes
            )));
        }
        Ok(())
    }
}
