//! The SSD's TRIM family (TRIM, vectored vTrim, file-based fTrim): invalidation in the FTL,
//! command costs, fTrim's walk of the file system's metadata, and background processing
//! with preemption (see the module doc of [`super`]); also the metadata blocks the drive
//! keeps so fTrim can read them.

use super::*;

/// Most extent-tree blocks an fTrim walks before giving up.
pub(super) const FTRIM_MAX_TREE_BLOCKS: usize = 1 << 16;

/// One piece of TRIM work: controller time, and optionally a flash read on a die.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrimChunk {
    ready_ns: u64,
    duration_ns: u64,
    read_die: Option<u32>,
}

impl Ssd {
    /// Keeps (or forgets) the content of the 4 KiB blocks a write covers.
    pub(super) fn store_data(&mut self, cmd: &Command) -> Result<(), FlashError> {
        match &cmd.payload {
            Payload::Data(bytes) => {
                if !cmd.offset_bytes.is_multiple_of(DATA_BLOCK_BYTES)
                    || !(bytes.len() as u64).is_multiple_of(DATA_BLOCK_BYTES)
                {
                    return Err(FlashError::UnalignedData {
                        offset_bytes: cmd.offset_bytes,
                        len_bytes: cmd.len_bytes,
                    });
                }
                let first = cmd.offset_bytes / DATA_BLOCK_BYTES;
                for (i, chunk) in bytes.chunks(DATA_BLOCK_BYTES as usize).enumerate() {
                    self.data.insert(first + i as u64, chunk.into());
                }
            }
            _ => self.forget_data(cmd.offset_bytes, cmd.len_bytes),
        }
        Ok(())
    }

    pub(super) fn forget_data(&mut self, offset_bytes: u64, len_bytes: u64) {
        if self.data.is_empty() || len_bytes == 0 {
            return;
        }
        let first = offset_bytes / DATA_BLOCK_BYTES;
        let end = (offset_bytes + len_bytes).div_ceil(DATA_BLOCK_BYTES);
        if end - first < self.data.len() as u64 {
            for b in first..end {
                self.data.remove(&b);
            }
        } else {
            self.data.retain(|&b, _| b < first || b >= end);
        }
    }

    /// Invalidates the mapping units a range fully covers; returns how many units it spans.
    pub(super) fn invalidate_range(&mut self, r: ByteRange) -> u64 {
        let first = r.offset_bytes.div_ceil(self.unit_bytes) as u32;
        let end = (((r.offset_bytes + r.len_bytes) / self.unit_bytes) as u32).max(first);
        for lpn in first..end {
            self.ftl.trim(lpn);
        }
        // Content of the blocks in the invalidated units is gone.
        let unit_lo = first as u64 * self.unit_bytes;
        self.forget_data(unit_lo, (end - first) as u64 * self.unit_bytes);
        (end - first) as u64
    }

    /// fTrim's metadata walk over the drive's own copy of the file system's blocks.
    pub(super) fn ftrim_walk(&self, inode: u32) -> Result<fslayout::FileMap, FlashError> {
        let mut read = |block: u64| -> Result<Vec<u8>, LayoutError> {
            match self.block_content(block) {
                Some(Some(bytes)) => Ok(bytes.to_vec()),
                Some(None) => Err(LayoutError(format!(
                    "block {block} holds data, not metadata the drive can parse"
                ))),
                None => Err(LayoutError(format!(
                    "block {block} is unwritten or trimmed"
                ))),
            }
        };
        fslayout::walk_file(inode, &mut read, FTRIM_MAX_TREE_BLOCKS)
            .map_err(|e| FlashError::FTrim { inode, msg: e.0 })
    }

    /// Runs `chunk` starting no earlier than `t_ns` on the controller (and its die, for a
    /// metadata read); returns when it ends.
    pub(super) fn run_chunk(&mut self, chunk: TrimChunk, t_ns: u64) -> u64 {
        let mut start = t_ns.max(self.controller_free_ns).max(chunk.ready_ns);
        if let Some(die) = chunk.read_die {
            start = start.max(self.die_free_ns[die as usize]);
            if let Some(m) = &mut self.maint {
                start = m.host_other(die, self.die_free_ns[die as usize], start);
            }
            self.die_free_ns[die as usize] = start + self.cfg.timing.read_ns;
        }
        self.controller_free_ns = start + chunk.duration_ns;
        self.trim_busy_ns += chunk.duration_ns;
        self.controller_free_ns
    }

    /// Runs deferred TRIM work in the idle time before `now_ns`; returns the time until
    /// which a host command arriving at `now_ns` must wait for it.
    pub(super) fn run_background(&mut self, now_ns: u64) -> u64 {
        let preemptive = self.cfg.trim.preemptive;
        let mut wait_until = 0;
        // Without preemption, work that has started runs to the end of the queue.
        let mut committed = false;
        while let Some(&chunk) = self.background.front() {
            let idle_from = self
                .controller_free_ns
                .max(self.last_completion_ns)
                .max(chunk.ready_ns);
            if !committed && idle_from >= now_ns {
                break;
            }
            self.background.pop_front();
            let end = self.run_chunk(chunk, idle_from);
            committed = !preemptive;
            if end > now_ns {
                wait_until = end;
                if preemptive {
                    break;
                }
            }
        }
        wait_until
    }

    pub(super) fn trim_family(&mut self, cmd: &Command, start_ns: u64) -> Result<u64, FlashError> {
        let t = self.cfg.trim.clone();
        // 1. What to invalidate, and the chunks of in-drive work that costs.
        let mut chunks: Vec<TrimChunk> = Vec::new();
        let mut ranges: Vec<ByteRange> = Vec::new();
        match cmd.op {
            Op::Trim => ranges.push(ByteRange {
                offset_bytes: cmd.offset_bytes,
                len_bytes: cmd.len_bytes,
            }),
            Op::VTrim => ranges.extend_from_slice(cmd.ranges()),
            Op::FTrim => {
                let Payload::Inode(inode) = cmd.payload else {
                    return Err(FlashError::Config(
                        "an fTrim command must carry an inode number".into(),
                    ));
                };
                let map = self.ftrim_walk(inode)?;
                for &block in &map.blocks_read {
                    let lpn = (block * DATA_BLOCK_BYTES / self.unit_bytes) as u32;
                    let die = self.ftl.lookup(lpn).map(|p| self.ftl.die_of(p));
                    chunks.push(TrimChunk {
                        ready_ns: 0,
                        duration_ns: self.cfg.timing.read_ns
                            + self.unit_transfer_ns
                            + t.metadata_parse_ns,
                        read_die: die,
                    });
                }
                self.ftrim_metadata_reads += map.blocks_read.len() as u64;
                let block_range = |start: u64, len: u64| ByteRange {
                    offset_bytes: start * DATA_BLOCK_BYTES,
                    len_bytes: len * DATA_BLOCK_BYTES,
                };
                ranges.extend(
                    map.extents
                        .iter()
                        .map(|e| block_range(e.start_block, e.len as u64)),
                );
                ranges.extend(map.tree_blocks.iter().map(|&b| block_range(b, 1)));
            }
            _ => unreachable!("trim_family handles TRIM commands only"),
        }
        chunks.insert(
            0,
            TrimChunk {
                ready_ns: 0,
                duration_ns: t.command_overhead_ns,
                read_die: None,
            },
        );
        self.trim_ranges += ranges.len() as u64;
        for r in &ranges {
            let units = self.invalidate_range(*r);
            if cmd.op != Op::Trim {
                self.host.trim_bytes += r.len_bytes;
            }
            chunks.push(TrimChunk {
                ready_ns: 0,
                duration_ns: t.per_range_ns + units * t.per_page_ns,
                read_die: None,
            });
        }
        // 2. The interface: a non-queued TRIM and foreground vTrim/fTrim wait for the queue.
        let deferred = t.background && cmd.op != Op::Trim;
        let queued_trim = cmd.op == Op::Trim && t.queued;
        let blocking = !(deferred || queued_trim);
        let s = if blocking {
            start_ns.max(self.last_completion_ns)
        } else {
            start_ns
        };
        let payload_ns = if cmd.op == Op::Trim {
            0
        } else {
            transfer_ns(cmd.len_bytes, self.cfg.timing.host_bytes_per_s)
        };
        let interface_ns = self.cfg.timing.command_overhead_ns + payload_ns;
        self.trim_interface_ns += interface_ns;
        let received = s + interface_ns;
        // 3. The work: now, or recorded for idle time.
        if deferred {
            let acked = received + t.record_ns;
            self.trim_busy_ns += t.record_ns;
            self.background
                .extend(chunks.into_iter().map(|c| TrimChunk {
                    ready_ns: acked,
                    ..c
                }));
            return Ok(acked);
        }
        let mut end = received;
        for c in chunks {
            end = self.run_chunk(c, end);
        }
        if t.settle_ns > 0 {
            self.trim_settled_ns = end + t.settle_ns;
        }
        if blocking {
            self.barrier_ns = end;
        }
        Ok(end)
    }
}
