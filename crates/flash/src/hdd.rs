//! A hard disk in virtual time: seek curve, rotational position and read-ahead.
//!
//! The platter turns continuously from time 0, so rotational latency is computed, not
//! drawn at random: a request waits until its first sector passes under the head. Each
//! track holds one revolution of data at the sustained media rate. The seek curve runs
//! through three datasheet points: track-to-track (1 cylinder), average (one third of
//! the stroke, the mean distance of random seeks) and full stroke, growing with the square
//! root of the distance up to the average point and linearly beyond it (after Ruemmler &
//! Wilkes, "An introduction to disk drive modeling", 1994). After a read the drive keeps
//! reading ahead into its cache, so a sequential read that arrives later is served from
//! there instead of waiting a whole revolution.

use crate::stats::{DeviceStats, HostRecorder};
use crate::{Command, Device, FlashError, Op};
use serde::{Deserialize, Serialize};

/// The sector: the unit of a disk's addresses.
pub const SECTOR_BYTES: u64 = 512;
/// Above this a configuration is a typo (the fastest disks ever sold turned at 15,000 rpm).
const MAX_RPM: u32 = 100_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HddConfig {
    pub logical_bytes: u64,
    pub rpm: u32,
    /// Recording surfaces (heads).
    pub heads: u32,
    pub track_to_track_seek_ns: u64,
    pub average_seek_ns: u64,
    pub full_stroke_seek_ns: u64,
    /// Sustained media transfer rate.
    pub media_bytes_per_s: u64,
    pub host_bytes_per_s: u64,
    pub command_overhead_ns: u64,
    /// How far the drive reads ahead after a read (0 = no read-ahead).
    pub readahead_bytes: u64,
    /// Write cache (0 = write-through): a write completes once cached; cached writes merge
    /// into ranges, which the drive destages (in `destage_order`) while it is idle or when
    /// the cache must make room.
    #[serde(default)]
    pub write_cache_bytes: u64,
    /// Which cached range the drive writes next.
    #[serde(default)]
    pub destage_order: DestageOrder,
}

/// The order in which a disk destages its write cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DestageOrder {
    /// The next range at or after the head's cylinder, wrapping to the lowest (a one-way
    /// elevator): seek-aware, blind to the platter's angle.
    #[default]
    Elevator,
    /// The range the head reaches soonest, seek plus rotational wait: shortest access time
    /// first (Seltzer, Chen & Ousterhout, USENIX Winter 1990; Worthington, Ganger & Patt,
    /// SIGMETRICS 1994), what drives with native command queuing do with the commands they
    /// hold ("rotational position ordering").
    ShortestAccess,
}

impl HddConfig {
    pub fn validate(&self) -> Result<(), FlashError> {
        let bad = |m: &str| Err(FlashError::Config(format!("hdd: {m}")));
        if self.rpm == 0
            || self.heads == 0
            || self.media_bytes_per_s == 0
            || self.host_bytes_per_s == 0
        {
            return bad("rpm, heads, media_bytes_per_s and host_bytes_per_s must be positive");
        }
        if !(self.track_to_track_seek_ns <= self.average_seek_ns
            && self.average_seek_ns <= self.full_stroke_seek_ns)
        {
            return bad("seek times must satisfy track_to_track <= average <= full_stroke");
        }
        // One revolution must last at least a nanosecond and hold at least one sector, or
        // the seek and rotation arithmetic has nothing to work with.
        if self.rpm > MAX_RPM {
            return Err(FlashError::Config(format!(
                "hdd: rpm {} is above {MAX_RPM}: no disk turns that fast",
                self.rpm
            )));
        }
        let track = self.track_bytes_u128();
        if track < SECTOR_BYTES as u128 {
            return Err(FlashError::Config(format!(
                "hdd: media_bytes_per_s {} at {} rpm puts {track} bytes on a track, less than one {SECTOR_BYTES}-byte sector",
                self.media_bytes_per_s, self.rpm
            )));
        }
        if !self.logical_bytes.is_multiple_of(SECTOR_BYTES) {
            return Err(FlashError::Config(format!(
                "hdd: logical_bytes {} is not a multiple of the {SECTOR_BYTES}-byte sector",
                self.logical_bytes
            )));
        }
        if (self.logical_bytes as u128) < track * self.heads as u128 * 4 {
            return bad("capacity is smaller than four cylinders");
        }
        Ok(())
    }

    pub fn revolution_ns(&self) -> u64 {
        60_000_000_000 / self.rpm as u64
    }

    /// Bytes on one track: one revolution at the media rate (the config is validated, so
    /// this fits in a u64: it is at most the capacity).
    pub fn track_bytes(&self) -> u64 {
        self.track_bytes_u128() as u64
    }

    fn track_bytes_u128(&self) -> u128 {
        self.media_bytes_per_s as u128 * self.revolution_ns() as u128 / 1_000_000_000
    }

    pub fn cylinders(&self) -> u64 {
        self.logical_bytes
            .div_ceil(self.track_bytes() * self.heads as u64)
    }
}

pub struct Hdd {
    cfg: HddConfig,
    rev_ns: u64,
    track_bytes: u64,
    cylinders: u64,
    busy_until_ns: u64,
    head_cylinder: u64,
    /// Read-ahead state: bytes from `ra_start` are in cache as the platter passes them,
    /// starting at `ra_time_ns`, up to `ra_limit`.
    ra_start: u64,
    ra_time_ns: u64,
    ra_limit: u64,
    last_submit_ns: u64,
    host: HostRecorder,
    seeks: u64,
    /// Write cache: dirty byte ranges (offset → length), merged.
    dirty: std::collections::BTreeMap<u64, u64>,
    dirty_bytes: u64,
}

impl Hdd {
    pub fn new(cfg: HddConfig) -> Result<Self, FlashError> {
        cfg.validate()?;
        Ok(Hdd {
            rev_ns: cfg.revolution_ns(),
            track_bytes: cfg.track_bytes(),
            cylinders: cfg.cylinders(),
            busy_until_ns: 0,
            head_cylinder: 0,
            ra_start: 0,
            ra_time_ns: 0,
            ra_limit: 0,
            last_submit_ns: 0,
            host: HostRecorder::default(),
            seeks: 0,
            dirty: std::collections::BTreeMap::new(),
            dirty_bytes: 0,
            cfg,
        })
    }

    pub fn config(&self) -> &HddConfig {
        &self.cfg
    }

    /// Seek time for a move of `distance` cylinders.
    pub fn seek_ns(&self, distance: u64) -> u64 {
        if distance == 0 {
            return 0;
        }
        let c = &self.cfg;
        let max = self.cylinders.max(4) as f64;
        let third = max / 3.0;
        let d = distance as f64;
        let (t2t, avg, full) = (
            c.track_to_track_seek_ns as f64,
            c.average_seek_ns as f64,
            c.full_stroke_seek_ns as f64,
        );
        let ns = if d <= third {
            t2t + (avg - t2t) * ((d - 1.0).max(0.0) / (third - 1.0)).sqrt()
        } else {
            avg + (full - avg) * (d - third) / (max - third)
        };
        ns as u64
    }

    fn cylinder_of(&self, offset_bytes: u64) -> u64 {
        offset_bytes / (self.track_bytes * self.cfg.heads as u64)
    }

    fn media_ns(&self, bytes: u64) -> u64 {
        (bytes as u128 * 1_000_000_000 / self.cfg.media_bytes_per_s as u128) as u64
    }

    /// Seek plus rotational wait before the head could start on `offset_bytes` at `t_ns`.
    fn access_ns(&self, offset_bytes: u64, t_ns: u64) -> u64 {
        let seek = self.seek_ns(self.cylinder_of(offset_bytes).abs_diff(self.head_cylinder));
        seek + self.rotational_wait_ns(offset_bytes, t_ns + seek)
    }

    /// How long the head waits at `arrive_ns` for `offset_bytes` to come under it.
    fn rotational_wait_ns(&self, offset_bytes: u64, arrive_ns: u64) -> u64 {
        let target = (offset_bytes % self.track_bytes) as u128 * self.rev_ns as u128
            / self.track_bytes as u128;
        let now_angle = (arrive_ns % self.rev_ns) as u128;
        ((target + self.rev_ns as u128 - now_angle) % self.rev_ns as u128) as u64
    }

    /// Positions the head on `offset_bytes` no earlier than `t_ns`, then transfers
    /// `len_bytes` from the medium; returns the end of the transfer.
    fn access_medium(&mut self, offset_bytes: u64, len_bytes: u64, t_ns: u64) -> u64 {
        let cyl = self.cylinder_of(offset_bytes);
        let seek = self.seek_ns(cyl.abs_diff(self.head_cylinder));
        if seek > 0 {
            self.seeks += 1;
        }
        let arrive = t_ns + seek;
        let wait = self.rotational_wait_ns(offset_bytes, arrive);
        let end = arrive + wait + self.media_ns(len_bytes);
        self.head_cylinder = self.cylinder_of(offset_bytes + len_bytes.saturating_sub(1));
        end
    }

    fn read(&mut self, cmd: &Command, start_ns: u64) -> u64 {
        self.destage_until(start_ns);
        let (off, len) = (cmd.offset_bytes, cmd.len_bytes);
        let host_ns = (len as u128 * 1_000_000_000 / self.cfg.host_bytes_per_s as u128) as u64;
        let in_readahead = off >= self.ra_start && off + len <= self.ra_limit;
        let media_done = if in_readahead {
            // The data arrives in cache as the platter passes it.
            let ready = self.ra_time_ns + self.media_ns(off + len - self.ra_start);
            start_ns.max(ready)
        } else {
            let end = self.access_medium(off, len, start_ns.max(self.busy_until_ns));
            self.ra_start = off;
            self.ra_time_ns = end - self.media_ns(len);
            end
        };
        self.ra_limit = (off + len + self.cfg.readahead_bytes).min(self.cfg.logical_bytes);
        self.busy_until_ns = self.busy_until_ns.max(media_done);
        media_done + host_ns
    }

    fn write(&mut self, cmd: &Command, start_ns: u64) -> u64 {
        let host_ns =
            (cmd.len_bytes as u128 * 1_000_000_000 / self.cfg.host_bytes_per_s as u128) as u64;
        let arrived = start_ns + host_ns;
        if self.cfg.write_cache_bytes == 0 {
            let t = arrived.max(self.busy_until_ns);
            let end = self.access_medium(cmd.offset_bytes, cmd.len_bytes, t);
            self.ra_limit = 0; // the head moved: read-ahead is lost
            self.busy_until_ns = end;
            return end;
        }
        // Write-back: destage what the idle time allows, make room, then cache the write.
        self.destage_until(arrived);
        let need = cmd.len_bytes.min(self.cfg.write_cache_bytes);
        let mut admitted = arrived;
        while self.dirty_bytes + need > self.cfg.write_cache_bytes {
            admitted = admitted.max(self.destage_one(arrived));
        }
        self.add_dirty(cmd.offset_bytes, cmd.len_bytes);
        admitted
    }

    /// Adds a dirty range to the cache, merging it with touching ranges.
    fn add_dirty(&mut self, offset: u64, len: u64) {
        let (mut lo, mut hi) = (offset, offset + len);
        // Merge with a range that ends at or after `lo` and starts before it.
        if let Some((&s, &l)) = self.dirty.range(..=lo).next_back() {
            if s + l >= lo {
                lo = s;
                hi = hi.max(s + l);
                self.dirty.remove(&s);
                self.dirty_bytes -= l;
            }
        }
        while let Some((&s, &l)) = self.dirty.range(lo..=hi).next() {
            hi = hi.max(s + l);
            self.dirty.remove(&s);
            self.dirty_bytes -= l;
        }
        self.dirty.insert(lo, hi - lo);
        self.dirty_bytes += hi - lo;
    }

    /// Destages one dirty range, the next in elevator order from the head's position,
    /// starting no earlier than `not_before`; returns when it is on the medium.
    fn destage_one(&mut self, not_before: u64) -> u64 {
        let t = not_before.max(self.busy_until_ns);
        let (s, l) = match self.cfg.destage_order {
            DestageOrder::Elevator => {
                let head = self.head_cylinder * self.track_bytes * self.cfg.heads as u64;
                let (&s, &l) = self
                    .dirty
                    .range(head..)
                    .next()
                    .or_else(|| self.dirty.iter().next())
                    .expect("destage_one needs dirty data");
                (s, l)
            }
            DestageOrder::ShortestAccess => {
                // The first range (lowest address) among those reached soonest.
                let (&s, &l) = self
                    .dirty
                    .iter()
                    .min_by_key(|(&s, _)| self.access_ns(s, t))
                    .expect("destage_one needs dirty data");
                (s, l)
            }
        };
        self.dirty.remove(&s);
        self.dirty_bytes -= l;
        let end = self.access_medium(s, l, t);
        self.ra_limit = 0;
        self.busy_until_ns = end;
        end
    }

    /// Destages while the medium is idle before `now_ns`.
    fn destage_until(&mut self, now_ns: u64) {
        while !self.dirty.is_empty() && self.busy_until_ns < now_ns {
            let t = self.busy_until_ns;
            self.destage_one(t);
        }
    }
}

impl Device for Hdd {
    fn submit(&mut self, cmd: &Command, now_ns: u64) -> Result<u64, FlashError> {
        cmd.check_range(self.cfg.logical_bytes)?;
        if now_ns < self.last_submit_ns {
            return Err(FlashError::TimeWentBackwards {
                now_ns,
                last_ns: self.last_submit_ns,
            });
        }
        self.last_submit_ns = now_ns;
        let start = now_ns + self.cfg.command_overhead_ns;
        let done = match cmd.op {
            Op::Read => self.read(cmd, start),
            Op::Write => self.write(cmd, start),
            // A disk has nothing to do for TRIM; a flush waits for the medium.
            Op::Trim | Op::VTrim | Op::FTrim => start,
            Op::Flush => {
                while !self.dirty.is_empty() {
                    self.destage_one(start);
                }
                start.max(self.busy_until_ns)
            }
        };
        self.host.record(cmd.op, cmd.len_bytes, now_ns, done);
        Ok(done)
    }

    fn stats(&self) -> DeviceStats {
        let mut s = DeviceStats::default();
        self.host.fill(&mut s);
        s
    }

    fn reset_stats(&mut self) {
        self.host = HostRecorder::default();
        self.seeks = 0;
    }

    fn logical_bytes(&self) -> u64 {
        self.cfg.logical_bytes
    }

    fn settle(&mut self) -> u64 {
        while !self.dirty.is_empty() {
            let t = self.busy_until_ns;
            self.destage_one(t);
        }
        self.busy_until_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> HddConfig {
        HddConfig {
            logical_bytes: 250_000_000_000,
            rpm: 7200,
            heads: 4,
            track_to_track_seek_ns: 800_000,
            average_seek_ns: 8_500_000,
            full_stroke_seek_ns: 17_000_000,
            media_bytes_per_s: 100_000_000,
            host_bytes_per_s: 300_000_000,
            command_overhead_ns: 50_000,
            readahead_bytes: 1 << 20,
            write_cache_bytes: 0,
            destage_order: DestageOrder::Elevator,
        }
    }

    #[test]
    fn write_cache_merges_interleaved_streams() {
        // Two streams of 4 KiB writes far apart, interleaved: write-through seeks every
        // time; the cache merges each stream into long ranges destaged with few seeks.
        let run = |cache: u64| {
            let mut c = config();
            c.write_cache_bytes = cache;
            let mut hdd = Hdd::new(c).unwrap();
            let mut now = 0;
            for i in 0..2000u64 {
                let base = if i % 2 == 0 { 0 } else { 100_000_000_000 };
                now = hdd
                    .submit(&Command::write(base + i / 2 * 4096, 4096), now)
                    .unwrap();
            }
            hdd.settle().max(now)
        };
        let (through, cached) = (run(0), run(8 << 20));
        assert!(cached * 20 < through, "{cached} vs {through}");
    }

    #[test]
    fn shortest_access_destaging_beats_the_elevator_on_scattered_streams() {
        // 184 streams of 4 KiB appends, 6 MB apart, written round-robin in a shuffled order
        // (a grace join's partitions): the cache holds short runs, and the elevator waits
        // about half a turn for each; shortest-access-first picks a range near the head's
        // angle and waits less.
        let run = |order: DestageOrder| {
            let mut c = config();
            c.write_cache_bytes = 8 << 20;
            c.destage_order = order;
            let mut hdd = Hdd::new(c).unwrap();
            let (mut now, mut x, mut next) = (0, 7u64, [0u64; 184]);
            for _ in 0..100_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let p = (x >> 33) as usize % 184;
                now = hdd
                    .submit(&Command::write(p as u64 * 6_000_000 + next[p], 4096), now)
                    .unwrap();
                next[p] += 4096;
            }
            hdd.settle().max(now)
        };
        let (elevator, satf) = (
            run(DestageOrder::Elevator),
            run(DestageOrder::ShortestAccess),
        );
        assert!(satf * 10 < elevator * 9, "{satf} vs {elevator}");
    }

    #[test]
    fn write_cache_streams_small_sequential_writes() {
        let run = |cache: u64| {
            let mut c = config();
            c.write_cache_bytes = cache;
            let mut hdd = Hdd::new(c).unwrap();
            let mut now = 0;
            for i in 0..1000u64 {
                now = hdd.submit(&Command::write(i * 4096, 4096), now).unwrap() + 20_000;
            }
            hdd.settle().max(now)
        };
        let (through, cached) = (run(0), run(8 << 20));
        // Write-through loses most of a revolution per 4 KiB write; the cache streams them.
        assert!(through > 1000 * 4_000_000, "{through}");
        assert!(cached < through / 10, "{cached} vs {through}");
    }

    #[test]
    fn seek_curve_hits_its_three_points() {
        let hdd = Hdd::new(config()).unwrap();
        let max = hdd.cylinders;
        assert_eq!(hdd.seek_ns(0), 0);
        assert_eq!(hdd.seek_ns(1), 800_000);
        assert!((hdd.seek_ns(max / 3) as i64 - 8_500_000).abs() < 10_000);
        assert!((hdd.seek_ns(max) as i64 - 17_000_000).abs() < 10_000);
        assert!(hdd.seek_ns(10) < hdd.seek_ns(1000));
    }

    #[test]
    fn random_reads_cost_seek_and_rotation_sequential_reads_stream() {
        let mut hdd = Hdd::new(config()).unwrap();
        // 200 random 4 KiB reads, closed loop.
        let mut now = 0;
        let mut x: u64 = 12345;
        for _ in 0..200 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (x >> 16) % (250_000_000_000 / 4096) * 4096;
            now = hdd.submit(&Command::read(off, 4096), now).unwrap();
        }
        let random_ms = now as f64 / 200.0 / 1e6;
        // Average seek (8.5) plus half a revolution (4.17) in expectation.
        assert!(
            (9.0..16.0).contains(&random_ms),
            "{random_ms} ms per random read"
        );

        let mut hdd = Hdd::new(config()).unwrap();
        let mut now = 0;
        for i in 0..2000u64 {
            now = hdd.submit(&Command::read(i * 65536, 65536), now).unwrap();
        }
        let mb_per_s = 2000.0 * 65536.0 / (now as f64 / 1e9) / 1e6;
        assert!(mb_per_s > 70.0, "sequential reads at {mb_per_s} MB/s");
    }

    #[test]
    fn rejects_impossible_seek_curve() {
        let mut c = config();
        c.average_seek_ns = 100;
        assert!(Hdd::new(c).is_err());
    }

    #[test]
    fn rejects_rates_and_speeds_that_leave_no_track() {
        // A media rate so low that one revolution holds less than a sector (it divided by
        // zero before), an absurd rpm (a zero-length revolution), and every media rate
        // from 1 B/s up: an error or a working disk, never a panic.
        let mut c = config();
        c.media_bytes_per_s = 1;
        let e = Hdd::new(c).err().expect("rejected").to_string();
        assert!(
            e.contains("media_bytes_per_s") && e.contains("sector"),
            "{e}"
        );
        let mut c = config();
        c.rpm = u32::MAX;
        let e = Hdd::new(c).err().expect("rejected").to_string();
        assert!(e.contains("rpm"), "{e}");
        for shift in 0..64 {
            let mut c = config();
            c.media_bytes_per_s = 1u64 << shift;
            let _ = Hdd::new(c);
        }
        let mut c = config();
        c.logical_bytes += 1;
        let e = Hdd::new(c).err().expect("rejected").to_string();
        assert!(e.contains("multiple of the 512-byte sector"), "{e}");
    }
}
