//! Experiment `placement`: the papers' engines on a conventional, an FDP and a zoned drive
//! of the same flash (issue 27).
//!
//! Three engines, each on simfs's log-structured policy (the one policy that runs on all
//! three drives) over the same x25e-class flash, with a cold file (a table written once)
//! filling part of the file system first:
//! - paper 000's hash join, repeated: each partitioning pass's spill files carry a hint of
//!   their own (`hashjoin::join::pass_hint`);
//! - paper 003's key-value workload (random document updates, batched commits): fresh nodes
//!   WRITE_LIFE_SHORT, the cleaner's copies LONG;
//! - paper 004's AS B-tree (random inserts), with the same age classes.
//!
//! On the conventional drive hints go nowhere (no placement); on the FDP drive simfs maps
//! them onto handles with Linux's stream map (`simfs::HintPlacement::linux_streams`); on the
//! zoned drive simfs runs its zoned mode (segments are zones, host cleaning, resets).
//! Measured: the drive's WAF, flash bytes per byte the engine wrote (file system and drive
//! together), simulated time, erases and life used against the preset's rated P/E cycles.
//!
//! Two checks beside them: hot/cold writes separated by handle against the analytic
//! separated WAF ([`crate::analytic::separated_waf`]), and a CacheLib-like flash cache on
//! FDP against the published claim that FDP brings its device WAF to about 1.

use super::plan::{Done, Plan};
use super::{derive_seed, Scale};
use crate::analytic::{separated_waf, Stream};
use crate::report::{BarPlot, Provenance, Role, Section, Table, Verdict};
use crate::rows::{Cell, Row};
use flash::{AnyDevice, Command, Device, FdpConfig, Preset, ZonedConfig};
use serde_json::json;
use simfs::fs::BLOCK;
use simfs::{FsConfig, HintPlacement, SimFs, Timed, WriteHint};
use vfs::Vfs;
use workloads::synthetic::Pattern;

/// Handles of the FDP drive: 0 for unhinted data and Linux's four streams.
const HANDLES: u16 = 5;
/// The drives' over-provisioning: 28%, an enterprise drive's (the `waf` experiment's top
/// common point), instead of the x25e preset's 7%: each FDP handle keeps two blocks per die
/// open, which 7% of a 256 MiB drive cannot spare for five handles. The same on all three
/// drives (the zoned drive leaves it unused).
const OP: f64 = 0.28;
/// Share of the file system the cold file fills before an engine runs.
const COLD_SHARE: f64 = 0.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriveKind {
    Conventional,
    Fdp,
    Zoned,
}

impl DriveKind {
    pub const ALL: [DriveKind; 3] = [DriveKind::Conventional, DriveKind::Fdp, DriveKind::Zoned];
    fn name(self) -> &'static str {
        match self {
            DriveKind::Conventional => "conventional",
            DriveKind::Fdp => "fdp",
            DriveKind::Zoned => "zoned",
        }
    }
}

/// The file system's policy and discard mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// simfs's log-structured policy (F2FS-like): freed blocks trimmed at the checkpoint
    /// on a conventional or FDP drive; the zoned mode on a zoned drive.
    Log,
    /// The ext4-like in-place policy without discard (ext4's default mount), which a
    /// zoned drive cannot run: conventional and FDP drives only.
    InPlace,
}

impl Host {
    fn name(self) -> &'static str {
        match self {
            Host::Log => "log-structured",
            Host::InPlace => "in-place, no discard",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Join,
    Kv,
    AsTree,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Join, Engine::Kv, Engine::AsTree];
    fn name(self) -> &'static str {
        match self {
            Engine::Join => "join (paper 000)",
            Engine::Kv => "kv updates (paper 003)",
            Engine::AsTree => "AS B-tree inserts (paper 004)",
        }
    }
    fn id(self) -> &'static str {
        match self {
            Engine::Join => "join",
            Engine::Kv => "kv",
            Engine::AsTree => "astree",
        }
    }
}

/// Sizes per scale. Every engine does the same work on every drive (a fixed count of
/// joins, commits and insert batches): about 5 file systems' worth of host writes at the
/// quick scale.
#[derive(Debug, Clone, Copy)]
struct Setup {
    capacity_bytes: u64,
    /// TPC-H scale factor of the join's inputs, and how many times the join runs.
    join_sf: f64,
    join_repeats: u32,
    /// Keys, and commits of 256 updates.
    kv_keys: u64,
    kv_rounds: u64,
    /// Keys, and batches of 1,024 random inserts (each batch then synced).
    tree_keys: u64,
    tree_batches: u64,
}

fn setup(scale: Scale) -> Setup {
    match scale {
        Scale::Quick => Setup {
            capacity_bytes: 256 << 20,
            join_sf: 0.02,
            join_repeats: 250,
            kv_keys: 8_000,
            kv_rounds: 600,
            tree_keys: 200_000,
            tree_batches: 90,
        },
        Scale::Full | Scale::Paper => Setup {
            capacity_bytes: 1 << 30,
            join_sf: 0.05,
            join_repeats: 400,
            kv_keys: 32_000,
            kv_rounds: 2_400,
            tree_keys: 800_000,
            tree_batches: 360,
        },
    }
}

/// The x25e-class flash as a drive of `kind`.
fn preset(kind: DriveKind, capacity: u64) -> Result<Preset, crate::LabError> {
    let mut p = Preset::load("x25e")?.with_capacity(capacity);
    let c = p.ssd_config_mut().ok_or("the x25e preset is an SSD")?;
    c.geometry.op = OP;
    match kind {
        DriveKind::Conventional => {}
        DriveKind::Fdp => c.fdp = Some(Box::new(FdpConfig::new(HANDLES))),
        DriveKind::Zoned => c.zoned = Some(Box::new(ZonedConfig::default())),
    }
    Ok(p)
}

/// A file system of the same size on every kind of drive (whole zones, about 90% of the
/// drive), with a cold file filling [`COLD_SHARE`] of it; then measuring starts.
fn file_system(
    kind: DriveKind,
    host: Host,
    s: &Setup,
) -> Result<(vfs::SimVfs, Preset), crate::LabError> {
    let p = preset(kind, s.capacity_bytes)?;
    let g = p.ssd_config().ok_or("an SSD")?.geometry.clone();
    let zone_bytes = g.block_bytes() * g.dies() as u64;
    let fs_bytes = (s.capacity_bytes * 9 / 10) / zone_bytes * zone_bytes;
    let dev = p.build()?;
    let cfg = match kind {
        DriveKind::Zoned => {
            let mut c = FsConfig::new(fs_bytes);
            crate::backend::fit_to_drive(&mut c, &dev);
            if c.zoned.is_none() {
                return Err("the zoned drive gave no zones".into());
            }
            c
        }
        _ => {
            let mut c = FsConfig::new(fs_bytes);
            if host == Host::Log {
                c.alloc = simfs::AllocPolicy::LogStructured;
                // F2FS's default: freed blocks are discarded after the checkpoint.
                c.discard = simfs::DiscardMode::Online;
            }
            if kind == DriveKind::Fdp {
                c.placement = Some(HintPlacement::linux_streams(HANDLES));
            }
            c
        }
    };
    let mut fs = SimFs::mkfs(Timed::new(dev), cfg)?;
    let cold = fs.create("cold")?;
    fs.set_write_hint(cold, WriteHint::Extreme)?;
    let cold_bytes = (fs_bytes as f64 * COLD_SHARE) as u64 / (1 << 20) * (1 << 20);
    for at in (0..cold_bytes).step_by(1 << 20) {
        fs.write_at(cold, at, 1 << 20)?;
    }
    fs.sync()?;
    let mut v = vfs::SimVfs::new(fs);
    v.start_measuring();
    Ok((v, p))
}

/// What one engine did on one drive.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    pub engine: &'static str,
    pub drive: &'static str,
    pub host: &'static str,
    /// Bytes the engine wrote (spill files, log records).
    pub engine_bytes: u64,
    pub host_bytes: u64,
    pub flash_bytes: u64,
    pub erases: u64,
    pub device_waf: f64,
    /// Flash bytes per engine byte: the file system's and the drive's amplification.
    pub end_to_end: f64,
    pub time_ns: u64,
    pub life_used: f64,
    /// simfs: blocks its cleaning copied, zones reset.
    pub fs_cleaned_blocks: u64,
    pub zone_resets: u64,
    /// A digest of the engine's answer (join rows and sums; the store's contents).
    pub answer: String,
}

fn finish(
    engine: Engine,
    kind: DriveKind,
    host: Host,
    v: &vfs::SimVfs,
    p: &Preset,
    engine_bytes: u64,
    answer: String,
) -> Run {
    let st = v.fs().device().dev.stats();
    let page = 4096u64;
    let (host_b, flash) = (st.host_write_pages * page, st.flash_write_pages * page);
    let c = p.ssd_config().expect("an SSD");
    let rated = c.endurance.as_ref().map_or(0, |e| e.rated_pe_cycles);
    let blocks = c.geometry.total_blocks();
    let fss = v.fs().stats();
    Run {
        engine: engine.id(),
        drive: kind.name(),
        host: host.name(),
        engine_bytes,
        host_bytes: host_b,
        flash_bytes: flash,
        erases: st.erases,
        device_waf: flash as f64 / host_b.max(1) as f64,
        end_to_end: flash as f64 / engine_bytes.max(1) as f64,
        time_ns: v.now_ns(),
        life_used: if rated > 0 {
            st.erases as f64 / (blocks as f64 * rated as f64)
        } else {
            f64::NAN
        },
        fs_cleaned_blocks: fss.cleaned_blocks,
        zone_resets: fss.zone_resets,
        answer,
    }
}

/// Runs `engine` on a drive of `kind`.
pub fn run_one(
    engine: Engine,
    kind: DriveKind,
    host: Host,
    scale: Scale,
    seed: u64,
) -> Result<Run, crate::LabError> {
    if kind == DriveKind::Zoned && host == Host::InPlace {
        return Err("an in-place file system cannot run on a zoned drive".into());
    }
    let s = setup(scale);
    let (v, p) = file_system(kind, host, &s)?;
    let at = (kind, host);
    match engine {
        Engine::Join => run_join(v, p, at, &s),
        Engine::Kv => run_kv(v, p, at, &s, seed),
        Engine::AsTree => run_tree(v, p, at, &s, seed),
    }
}

fn run_join(
    v: vfs::SimVfs,
    p: Preset,
    (kind, host): (DriveKind, Host),
    s: &Setup,
) -> Result<Run, crate::LabError> {
    use hashjoin::store::SimStore;
    use workloads::tpch::{rows, Layout, Table as TpchTable};
    let layout = Layout::Columns;
    let encode = |rs: &[workloads::tpch::Record]| {
        let rb = layout.record_bytes();
        let mut out = vec![0u8; rs.len() * rb];
        for (i, r) in rs.iter().enumerate() {
            r.encode(layout, &mut out[i * rb..(i + 1) * rb]);
        }
        out
    };
    let orders: Vec<_> = rows(TpchTable::Orders, s.join_sf).collect();
    let lines: Vec<_> = rows(TpchTable::Lineitem, s.join_sf).collect();
    let mut store: SimStore = hashjoin::store::VfsStore::on(v, "the simulated drive", None);
    let o = store.add_input("orders", &encode(&orders))?;
    let l = store.add_input("lineitem", &encode(&lines))?;
    let spec = hashjoin::JoinSpec {
        algorithm: hashjoin::Algorithm::Grace,
        read_buffer_bytes: 64 << 10,
        write_buffer_bytes: 16 << 10,
        fallocate: false,
        partitions: None,
        cpu_ns_per_row: 0,
        concurrent_users: 1,
    };
    let input = |file, rows: usize, relation| hashjoin::Input {
        file,
        offset_bytes: 0,
        rows: rows as u64,
        layout,
        relation,
    };
    let mut spilled = 0u64;
    let mut answer = None;
    for _ in 0..s.join_repeats {
        let r = hashjoin::hash_join(
            &mut store,
            &hashjoin::MemoryPool::new(128 << 10),
            &spec,
            input(o, orders.len(), hashjoin::Relation::Orders),
            input(l, lines.len(), hashjoin::Relation::Lineitem),
        )?;
        spilled += r.bytes_spilled;
        let a = format!(
            "{} rows, {} / {} cents",
            r.rows, r.sum_o_totalprice_cents, r.sum_l_extendedprice_cents
        );
        if answer.as_ref().is_some_and(|b| *b != a) {
            return Err(format!("the join's answer changed between repetitions: {a}").into());
        }
        answer = Some(a);
    }
    store.finish()?;
    Ok(finish(
        Engine::Join,
        kind,
        host,
        &store.vfs,
        &p,
        spilled,
        answer.unwrap_or_default(),
    ))
}

/// A digest of a store's sorted contents (FNV-1a over keys and values).
fn digest(entries: &[(Vec<u8>, Vec<u8>)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (k, v) in entries {
        for b in k.iter().chain(v.iter()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{} entries, fnv {h:016x}", entries.len())
}

fn run_kv(
    v: vfs::SimVfs,
    p: Preset,
    (kind, host): (DriveKind, Host),
    s: &Setup,
    seed: u64,
) -> Result<Run, crate::LabError> {
    let segs = astree::segments::SimSegments::on(v, "db", false)?;
    let cfg = kv::KvConfig {
        segment_bytes: 1 << 20,
        cache_nodes: 256,
        ..kv::KvConfig::default()
    };
    let mut db = kv::Db::open(segs, &cfg)?;
    let mut x = seed | 1;
    for round in 0..s.kv_rounds {
        for _ in 0..256 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let key = format!("user{:08}", (x >> 33) % s.kv_keys);
            db.update(key.as_bytes(), &[(round % 251) as u8; 1000])?;
        }
        db.commit()?;
    }
    let bytes = db.stats().bytes_written;
    let answer = digest(&db.scan()?);
    let segs = db.segments();
    Ok(finish(
        Engine::Kv,
        kind,
        host,
        segs.vfs(),
        &p,
        bytes,
        answer,
    ))
}

fn run_tree(
    v: vfs::SimVfs,
    p: Preset,
    (kind, host): (DriveKind, Host),
    s: &Setup,
    seed: u64,
) -> Result<Run, crate::LabError> {
    use astree::asstore::{AsConfig, AsStore, Cleaning};
    let segs = astree::segments::SimSegments::on(v, "tree", false)?;
    let cfg = AsConfig {
        segment_bytes: 1 << 20,
        max_space_amp: 1.5,
        cleaning: Cleaning::CostBenefit,
        ..AsConfig::new(8192, 64)
    };
    let store = AsStore::open_with(segs, cfg)?;
    let mut tree = astree::BTree::new(astree::cache::LruCache::new(store, 512), 128)?;
    let mut x = seed | 1;
    for _ in 0..s.tree_batches {
        for _ in 0..1024 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let key = ((x >> 20) % s.tree_keys).to_be_bytes();
            tree.insert(&key, &x.to_le_bytes())?;
        }
        tree.sync()?;
    }
    let bytes = astree::store::NodeStore::stats(tree.store()).bytes_written;
    let answer = digest(&tree.range(&[], None)?);
    let v = tree.store().inner().storage().vfs();
    Ok(finish(Engine::AsTree, kind, host, v, &p, bytes, answer))
}

/// The `waf` experiment's one-die drive (512 MiB, 1 MiB blocks, greedy, one free block)
/// at `op`, with two FDP handles.
fn hot_cold_preset(op: f64) -> Result<Preset, crate::LabError> {
    let mut p = Preset::load("x25e")?;
    let c = p.ssd_config_mut().ok_or("an SSD")?;
    c.geometry = super::waf::geometry(512 << 20, 256, op);
    c.gc.policy = flash::GcPolicy::Greedy;
    c.gc.free_blocks = 1;
    c.gc.paced = false;
    c.fdp = Some(Box::new(FdpConfig::new(2)));
    Ok(p)
}

/// The over-provisioning GC works with on [`hot_cold_preset`]'s drive with both handles
/// written ([`crate::sim::effective_op`]).
fn hot_cold_effective_op(op: f64) -> f64 {
    let p = hot_cold_preset(op).expect("the x25e preset loads");
    crate::sim::effective_op(p.ssd_config().expect("an SSD"), 2)
        .expect("a page-mapped drive with device GC")
}

/// Hot/cold writes on the `waf` experiment's one-die drive, the hot region on handle 1
/// (`separate`) or everything on handle 0: steady-state WAF.
fn hot_cold_waf(
    op: f64,
    hot: (f64, f64),
    separate: bool,
    seed: u64,
) -> Result<f64, crate::LabError> {
    let spec = crate::sim::SimSpec {
        preset: hot_cold_preset(op)?,
        pattern: Pattern::HotCold {
            hot_write_fraction: hot.0,
            hot_space_fraction: hot.1,
        },
        request_bytes: 4096,
        read_fraction: 0.0,
        queue_depth: 1,
        writes_x: 3.0,
        warmup_x: 3.0,
        timed_warmup_x: 0.0,
        timing: false,
        seed,
        precondition: None,
        separate,
        idle_after_precondition: false,
    };
    let r = crate::sim::run(&spec, &mut |_, _| {})?;
    r.stats.waf.ok_or_else(|| "no host writes".into())
}

/// The cache's drive: the x25e preset with FDP (two handles), at the smallest capacity
/// from 256 MiB up whose effective over-provisioning (what GC works with once its per-die
/// reserve is set aside, [`crate::sim::effective_op`]) is at least 90% of the preset's: on
/// a small drive that reserve, not the cache's layout, would set the WAF.
pub fn cachelib_preset() -> Result<Preset, crate::LabError> {
    let base = Preset::load("x25e")?;
    let op = base.ssd_config().ok_or("an SSD")?.geometry.op;
    let mut capacity: u64 = 256 << 20;
    loop {
        let mut p = base.clone().with_capacity(capacity);
        let ssd = p.ssd_config_mut().ok_or("an SSD")?;
        ssd.fdp = Some(Box::new(FdpConfig::new(2)));
        let effective = crate::sim::effective_op(ssd, 2).ok_or("a page-mapped drive")?;
        if effective >= 0.9 * op || capacity >= 16 << 30 {
            return Ok(p);
        }
        capacity *= 2;
    }
}

/// A flash cache as CacheLib's Navy lays one out (facebook/CacheLib PR #277 and the
/// kvcache configuration in issue #302): BigHash, small items in 4 KiB buckets rewritten at
/// random, on `navyBigHashSizePct` = 4% of the cache; BlockCache, large items appended to
/// regions rewritten in FIFO order (`navySegmentedFifoSegmentRatio` [1.0]) in writes of
/// `deviceMaxWriteSize` = 256 KiB, on the rest, on [`cachelib_preset`]'s drive.
/// `bighash_share` of the bytes written go to BigHash (the traces' mix is not published). With
/// `fdp`, BigHash writes on handle 1 and BlockCache on handle 0, as Navy's placement
/// handles do. The cache fills `utilization` of the logical space (the rest is never
/// written). Returns the device WAF over `writes_x` capacities after a warm-up of as many.
pub fn cachelib_waf(
    fdp: bool,
    utilization: f64,
    bighash_share: f64,
    writes_x: f64,
    seed: u64,
) -> Result<f64, crate::LabError> {
    let mut p = cachelib_preset()?;
    if !fdp {
        p.ssd_config_mut().ok_or("an SSD")?.fdp = None;
    }
    let mut dev: AnyDevice = p.build()?;
    let logical = dev.logical_bytes();
    let cache = (logical as f64 * utilization) as u64 / BLOCK * BLOCK;
    let bighash_bytes = cache * 4 / 100 / BLOCK * BLOCK;
    let region = 256u64 << 10;
    let bc_start = bighash_bytes.div_ceil(region) * region;
    let bc_regions = (cache - bc_start) / region;
    let (bh_handle, bc_handle) = if fdp { (1, 0) } else { (0, 0) };
    let mut x = seed | 1;
    let mut now = 0u64;
    let mut next_region = 0u64;
    let mut step = |dev: &mut AnyDevice, bh_turn: bool| -> Result<u64, crate::LabError> {
        let cmd = if bh_turn {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let bucket = (x >> 20) % (bighash_bytes / BLOCK);
            Command::write(bucket * BLOCK, BLOCK).on_handle(bh_handle)
        } else {
            let at = bc_start + (next_region % bc_regions) * region;
            next_region += 1;
            Command::write(at, region).on_handle(bc_handle)
        };
        now = dev.submit(&cmd, now)?;
        Ok(if bh_turn { BLOCK } else { region })
    };
    // Fill the BlockCache once, then alternate by bytes: a region, then as many buckets.
    for _ in 0..bc_regions {
        step(&mut dev, false)?;
    }
    // Alternate by bytes: BigHash whenever it is behind its share of what was written.
    let (mut bh_done, mut all_done) = (0u64, 0u64);
    let mut phase = |dev: &mut AnyDevice, bytes: u64| -> Result<(), crate::LabError> {
        let end = all_done + bytes;
        while all_done < end {
            let bh_turn = (bh_done as f64) < bighash_share * all_done as f64;
            let n = step(dev, bh_turn)?;
            all_done += n;
            if bh_turn {
                bh_done += n;
            }
        }
        Ok(())
    };
    phase(&mut dev, (writes_x * cache as f64) as u64)?;
    let before = dev.stats();
    phase(&mut dev, (writes_x * cache as f64) as u64)?;
    let after = dev.stats();
    let host = after.host_write_pages - before.host_write_pages;
    let flash = after.flash_write_pages - before.flash_write_pages;
    Ok(flash as f64 / host.max(1) as f64)
}

/// What one run is (and all it needs to run).
#[derive(Debug, Clone, Copy, PartialEq)]
enum RunKey {
    Engine(Engine, DriveKind, Host),
    HotCold {
        op: f64,
        separate: bool,
    },
    CacheLib {
        fdp: bool,
        utilization: f64,
        bighash_share: f64,
    },
}

enum Out {
    Run(Box<Run>),
    Waf(f64),
}

/// The hot/cold cases checked against the model at the effective op (the `sim` test's
/// cases within 5%).
const HOT_COLD_OPS: [f64; 2] = [0.15, 0.28];
const HOT_COLD: (f64, f64) = (0.8, 0.2);
/// The cache's share of the drive's logical space: all of it (the verdict's case, the
/// hardest), and half (CacheLib's PR #277 speaks of "above 50%").
const CACHE_UTILIZATIONS: [f64; 2] = [1.0, 0.5];
/// BigHash's share of the bytes written: the traces' mix is not published, so the judged
/// runs split them evenly and table `placement_cachelib_mix` shows the others.
const JUDGED_BIGHASH_SHARE: f64 = 0.5;
const BIGHASH_SHARES: [f64; 4] = [0.1, 0.25, 0.5, 0.75];

/// Every run: each engine on each drive (log-structured, and in place where the drive
/// allows), the hot/cold cases, the cache's.
fn plan() -> Plan<RunKey, RunKey> {
    let mut plan = Plan::new();
    let mut add = |k: RunKey| plan.add(k, k);
    for e in Engine::ALL {
        for d in DriveKind::ALL {
            add(RunKey::Engine(e, d, Host::Log));
        }
        for d in [DriveKind::Conventional, DriveKind::Fdp] {
            add(RunKey::Engine(e, d, Host::InPlace));
        }
    }
    for op in HOT_COLD_OPS {
        for separate in [false, true] {
            add(RunKey::HotCold { op, separate });
        }
    }
    for utilization in CACHE_UTILIZATIONS {
        for fdp in [false, true] {
            add(RunKey::CacheLib {
                fdp,
                utilization,
                bighash_share: JUDGED_BIGHASH_SHARE,
            });
        }
    }
    for bighash_share in BIGHASH_SHARES {
        if bighash_share != JUDGED_BIGHASH_SHARE {
            for fdp in [false, true] {
                add(RunKey::CacheLib {
                    fdp,
                    utilization: 1.0,
                    bighash_share,
                });
            }
        }
    }
    plan
}

/// Runs one planned run.
fn run_key(k: RunKey, scale: Scale, seed: u64) -> Result<Out, crate::LabError> {
    Ok(match k {
        // The same seed for the three drives of an engine: the same writes.
        RunKey::Engine(e, d, h) => Out::Run(Box::new(run_one(
            e,
            d,
            h,
            scale,
            derive_seed(seed, e as u64),
        )?)),
        RunKey::HotCold { op, separate } => {
            Out::Waf(hot_cold_waf(op, HOT_COLD, separate, derive_seed(seed, 10))?)
        }
        RunKey::CacheLib {
            fdp,
            utilization,
            bighash_share,
        } => Out::Waf(cachelib_waf(
            fdp,
            utilization,
            bighash_share,
            2.0,
            derive_seed(seed, 20),
        )?),
    })
}

/// What the section measured, in the order planned: the engines' runs, the hot/cold cases
/// (op, separated, WAF), the cache's (FDP, utilization, WAF). The verdicts and tables are
/// functions of it.
struct Measured {
    runs: Vec<Run>,
    hot_cold: Vec<(f64, bool, f64)>,
    /// (FDP, utilization, BigHash's share of the bytes, WAF).
    cachelib: Vec<(bool, f64, f64, f64)>,
}

impl Measured {
    fn of(done: &Done<RunKey, Out>) -> Measured {
        let mut m = Measured {
            runs: Vec::new(),
            hot_cold: Vec::new(),
            cachelib: Vec::new(),
        };
        for (k, o) in done.iter() {
            match (*k, o) {
                (RunKey::Engine(..), Out::Run(r)) => m.runs.push((**r).clone()),
                (RunKey::HotCold { op, separate }, Out::Waf(w)) => {
                    m.hot_cold.push((op, separate, *w))
                }
                (
                    RunKey::CacheLib {
                        fdp,
                        utilization,
                        bighash_share,
                    },
                    Out::Waf(w),
                ) => m.cachelib.push((fdp, utilization, bighash_share, *w)),
                _ => unreachable!("each run gives its kind of result"),
            }
        }
        m
    }

    fn run_at(&self, e: Engine, d: DriveKind, h: Host) -> &Run {
        self.runs
            .iter()
            .find(|r| r.engine == e.id() && r.drive == d.name() && r.host == h.name())
            .expect("every engine ran on every drive")
    }

    fn run_of(&self, e: Engine, d: DriveKind) -> &Run {
        self.run_at(e, d, Host::Log)
    }

    /// The hot/cold case's WAF.
    fn hc(&self, op: f64, separate: bool) -> f64 {
        self.hot_cold
            .iter()
            .find(|h| h.0 == op && h.1 == separate)
            .map(|h| h.2)
            .expect("every hot/cold case ran")
    }

    /// The cache's WAF.
    /// The cache's WAF with the judged mix at utilization `u`.
    fn cl(&self, fdp: bool, u: f64) -> f64 {
        self.cl_mix(fdp, u, JUDGED_BIGHASH_SHARE)
    }

    /// The cache's WAF with BigHash taking `share` of the bytes.
    fn cl_mix(&self, fdp: bool, u: f64, share: f64) -> f64 {
        self.cachelib
            .iter()
            .find(|c| c.0 == fdp && c.1 == u && c.2 == share)
            .map(|c| c.3)
            .expect("every cache run ran")
    }
}

/// The hot/cold streams: 80% of the writes to 20% of the space.
fn hot_cold_streams() -> [Stream; 2] {
    [
        Stream {
            write_share: HOT_COLD.0,
            space_share: HOT_COLD.1,
        },
        Stream {
            write_share: 1.0 - HOT_COLD.0,
            space_share: 1.0 - HOT_COLD.1,
        },
    ]
}

pub fn run(scale: Scale, seed: u64, ctx: &super::RunCtx) -> Result<Section, crate::LabError> {
    let started = std::time::Instant::now();
    let s = setup(scale);
    let done = ctx.run_plan(plan(), |&k| run_key(k, scale, seed))?;
    let m = Measured::of(&done);
    let streams = hot_cold_streams();
    Ok(Section {
        id: "placement".into(),
        title: "Data placement: conventional, FDP and zoned drives".into(),
        question: question(&s),
        seed,
        runtime_s: started.elapsed().as_secs_f64(),
        plots: plots(&m),
        tables: vec![engine_table(&m), hot_cold_table(&m), cache_table(&m), mix_table(&m)],
        verdicts: analyse(&m),
        provenance: vec![
            Provenance {
                number: "analytic separated WAF".into(),
                role: "predicted: no parameter fitted; it depends only on the over-provisioning and the FTL's per-die reserve (its free blocks and open frontiers: analytic::effective_op)".into(),
            },
            Provenance {
                number: "CacheLib's ~1 on FDP (arXiv 2503.11665)".into(),
                role: "predicted: the cache's layout (BigHash 4%, 256 KiB BlockCache writes) comes from CacheLib's published configuration; the byte mix (half each) is ours, not fitted".into(),
            },
        ],
        results: json!({
            "capacity_bytes": s.capacity_bytes,
            "handles": HANDLES,
            "runs": m.runs,
            "hot_cold": m.hot_cold.iter().map(|h| json!({"op": h.0, "separated": h.1, "waf": h.2, "model": separated_waf(h.0, &streams), "effective_op": hot_cold_effective_op(h.0), "model_at_effective_op": separated_waf(hot_cold_effective_op(h.0), &streams)})).collect::<Vec<_>>(),
            "cachelib": m.cachelib.iter().map(|c| json!({"fdp": c.0, "utilization": c.1, "waf": c.2})).collect::<Vec<_>>(),
        }),
    })
}

/// What the section asks, at its sizes.
fn question(s: &Setup) -> String {
    format!(
            "Does telling the drive what dies together pay off for the papers' engines? On {} MiB \
             x25e-class drives (conventional; FDP with {HANDLES} handles, simfs mapping Linux \
             write-life hints onto them; zoned, simfs in its zoned mode), simfs's log-structured \
             policy (and, on the conventional and FDP drives, the in-place policy without \
             discard) on {:.0}% of the drive, a cold file filling {:.0}% of it, then each \
             engine's fixed work: paper 000's grace join {} times (TPC-H SF {}, 128 KiB of \
             memory, each pass's spill files on their own hint), paper 003's document updates \
             ({} commits of 256 over {} keys, 1,000-byte documents), paper 004's AS B-tree ({} \
             batches of 1,024 random inserts over {} keys). Plus two checks: hot/cold writes separated by \
             handle against the analytic model read at the drive's effective over-provisioning \
             (GC's per-die free blocks and open frontiers taken off), and a CacheLib-like cache on FDP against the \
             published ~1.",
            s.capacity_bytes >> 20,
            90.0,
            COLD_SHARE * 100.0,
            s.join_repeats,
            s.join_sf,
            s.kv_rounds,
            s.kv_keys,
            s.tree_batches,
            s.tree_keys
        )
}

/// A row of table `placement`: one engine on one drive.
impl Row for &Run {
    const COLUMNS: &'static [&'static str] = &[
        "engine",
        "drive",
        "file system",
        "engine MiB",
        "host MiB",
        "flash MiB",
        "device WAF",
        "flash per engine byte",
        "erases",
        "life used %",
        "simulated s",
        "fs cleaned blocks",
        "zone resets",
        "answer",
    ];
    fn cells(&self) -> Vec<Cell> {
        let r = self;
        let engine = Engine::ALL
            .iter()
            .find(|e| e.id() == r.engine)
            .map_or(r.engine, |e| e.name());
        let mib = |b: u64| Cell::Fixed(b as f64 / (1 << 20) as f64, 1);
        vec![
            engine.into(),
            r.drive.into(),
            r.host.into(),
            mib(r.engine_bytes),
            mib(r.host_bytes),
            mib(r.flash_bytes),
            Cell::Fixed(r.device_waf, 3),
            Cell::Fixed(r.end_to_end, 3),
            Cell::Count(r.erases),
            Cell::Fixed(r.life_used * 100.0, 4),
            Cell::Fixed(r.time_ns as f64 / 1e9, 2),
            Cell::Count(r.fs_cleaned_blocks),
            Cell::Count(r.zone_resets),
            r.answer.clone().into(),
        ]
    }
}

/// Table `placement`: every engine on every drive.
fn engine_table(m: &Measured) -> Table {
    Table::of(
        "placement",
        "The engines on three drives of the same flash",
        m.runs.iter(),
    )
}

/// A row of table `placement_hotcold`.
struct HotColdRow {
    op: f64,
    mixed: f64,
    separated: f64,
    model_at_op: f64,
    effective_op: f64,
    model: f64,
}

impl Row for HotColdRow {
    const COLUMNS: &'static [&'static str] = &[
        "op",
        "one handle",
        "separated",
        "model at op",
        "effective op",
        "model at effective op",
        "separated vs model at effective op %",
    ];
    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::Fixed(self.op, 2),
            Cell::Fixed(self.mixed, 3),
            Cell::Fixed(self.separated, 3),
            Cell::Fixed(self.model_at_op, 3),
            Cell::Fixed(self.effective_op, 4),
            Cell::Fixed(self.model, 3),
            Cell::Signed((self.separated / self.model - 1.0) * 100.0, 1),
        ]
    }
}

/// The hot/cold cases against the analytic separated WAF, by over-provisioning.
fn hot_cold_rows(m: &Measured) -> Vec<HotColdRow> {
    let streams = hot_cold_streams();
    HOT_COLD_OPS
        .iter()
        .map(|&op| {
            let eff = hot_cold_effective_op(op);
            HotColdRow {
                op,
                mixed: m.hc(op, false),
                separated: m.hc(op, true),
                model_at_op: separated_waf(op, &streams),
                effective_op: eff,
                model: separated_waf(eff, &streams),
            }
        })
        .collect()
}

/// Table `placement_hotcold`.
fn hot_cold_table(m: &Measured) -> Table {
    Table::of(
        "placement_hotcold",
        "Hot/cold 80/20 writes: one handle, separated by handle, analytic separated WAF at the op and at the effective op (less GC's free block and half of each open frontier)",
        hot_cold_rows(m),
    )
}

/// A row of table `placement_cachelib`.
struct CacheRow {
    utilization: f64,
    plain: f64,
    fdp: f64,
}

impl Row for CacheRow {
    const COLUMNS: &'static [&'static str] = &[
        "cache / logical space",
        "one frontier",
        "FDP (BigHash on handle 1)",
    ];
    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::Text(format!("{:.0}%", self.utilization * 100.0)),
            Cell::Fixed(self.plain, 3),
            Cell::Fixed(self.fdp, 3),
        ]
    }
}

/// Table `placement_cachelib`.
fn cache_table(m: &Measured) -> Table {
    let rows = CACHE_UTILIZATIONS.iter().map(|&u| CacheRow {
        utilization: u,
        plain: m.cl(false, u),
        fdp: m.cl(true, u),
    });
    Table::of(
        "placement_cachelib",
        "A CacheLib-like flash cache: device WAF on one frontier and on FDP, by the share of the drive the cache fills",
        rows,
    )
}

/// A row of table `placement_cachelib_mix`: one split of the bytes between the engines.
struct MixRow {
    bighash_share: f64,
    plain: f64,
    fdp: f64,
}

impl Row for MixRow {
    const COLUMNS: &'static [&'static str] = &[
        "BigHash's share of the bytes",
        "one frontier",
        "FDP (BigHash on handle 1)",
    ];
    fn cells(&self) -> Vec<Cell> {
        vec![
            Cell::Text(format!("{:.0}%", self.bighash_share * 100.0)),
            Cell::Fixed(self.plain, 3),
            Cell::Fixed(self.fdp, 3),
        ]
    }
}

/// Table `placement_cachelib_mix`: the cache filling the drive, by the engines' mix.
fn mix_table(m: &Measured) -> Table {
    let rows = BIGHASH_SHARES.iter().map(|&b| MixRow {
        bighash_share: b,
        plain: m.cl_mix(false, 1.0, b),
        fdp: m.cl_mix(true, 1.0, b),
    });
    Table::of(
        "placement_cachelib_mix",
        "The cache filling the drive: device WAF by BigHash's share of the bytes written (the traces' mix is not published; the verdicts use 50%)",
        rows,
    )
}

/// Device WAF, flash per engine byte and time, by engine and drive.
fn plots(m: &Measured) -> Vec<crate::report::Plot> {
    let categories: Vec<String> = Engine::ALL.iter().map(|e| e.id().to_string()).collect();
    let series = |f: &dyn Fn(&Run) -> f64| -> Vec<(String, Vec<Option<f64>>)> {
        DriveKind::ALL
            .iter()
            .map(|&d| {
                let values = Engine::ALL.iter().map(|&e| Some(f(m.run_of(e, d))));
                (d.name().to_string(), values.collect())
            })
            .collect()
    };
    let bars = |file_stem: &str,
                title: &str,
                y_label: &str,
                f: &dyn Fn(&Run) -> f64|
     -> crate::report::Plot {
        BarPlot {
            file_stem: file_stem.into(),
            title: title.into(),
            y_label: y_label.into(),
            categories: categories.clone(),
            series: series(f),
        }
        .into()
    };
    vec![
        bars(
            "placement_waf",
            "Device WAF by engine and drive",
            "device WAF",
            &|r| r.device_waf,
        ),
        bars(
            "placement_end_to_end",
            "Flash bytes per byte the engine wrote (file system and drive)",
            "flash bytes / engine byte",
            &|r| r.end_to_end,
        ),
        bars(
            "placement_time",
            "Simulated time by engine and drive",
            "simulated s",
            &|r| r.time_ns as f64 / 1e9,
        ),
    ]
}

/// The verdicts, a pure function of what was measured.
fn analyse(m: &Measured) -> Vec<Verdict> {
    let run_of = |e, d| m.run_of(e, d);
    let same_answers = Engine::ALL.iter().all(|&e| {
        let a = &run_of(e, DriveKind::Conventional).answer;
        m.runs
            .iter()
            .filter(|r| r.engine == e.id())
            .all(|r| &r.answer == a)
    });
    let zoned_waf = Engine::ALL
        .iter()
        .map(|&e| run_of(e, DriveKind::Zoned).device_waf)
        .fold(0.0f64, f64::max);
    let fdp_vs_conv: Vec<(Engine, Host, f64)> = Engine::ALL
        .iter()
        .flat_map(|&e| [(e, Host::Log), (e, Host::InPlace)])
        .map(|(e, h)| {
            let ratio = m.run_at(e, DriveKind::Fdp, h).device_waf
                / m.run_at(e, DriveKind::Conventional, h).device_waf;
            (e, h, ratio)
        })
        .collect();
    let fdp_worst = fdp_vs_conv.iter().map(|f| f.2).fold(0.0f64, f64::max);
    let mut worst = 1.0f64;
    let mut gain = f64::MAX;
    for r in hot_cold_rows(m) {
        if ((r.separated / r.model) - 1.0).abs() > (worst - 1.0).abs() {
            worst = r.separated / r.model;
        }
        gain = gain.min(r.mixed / r.separated);
    }
    vec![
        Verdict::ordering(
            "placement.answers-unchanged",
            "The engines' answers do not depend on the drive or on placement",
            "placement is advice: the same join rows and sums, the same store contents",
            f64::from(u8::from(same_answers)),
            same_answers,
            Engine::ALL
                .iter()
                .map(|&e| format!("{}: {}", e.id(), run_of(e, DriveKind::Conventional).answer))
                .collect::<Vec<_>>()
                .join("; "),
        )
        .with_role(Role::Check),
        Verdict::numeric(
            "placement.zoned-device-waf",
            "A zoned drive copies nothing: its WAF is 1 under every engine (the host's cleaning does the copying)",
            "ZNS: no device GC (NVMe Zoned Namespace Command Set 1.1)",
            zoned_waf,
            1.0,
            0.0,
            format!("highest zoned device WAF {zoned_waf:.3}"),
        )
        .with_role(Role::Check),
        Verdict::numeric(
            "placement.separated-vs-analytic",
            "Hot/cold 80/20 writes separated by handle follow the analytic separated WAF within 5%",
            "analytic::separated_waf at the effective op (analytic::effective_op): every handle at the drive's spare space after GC's per-die reserve (Desnoyers, SYSTOR 2012)",
            worst,
            1.0,
            0.05,
            format!("worst separated / model {worst:.3}"),
        )
        .with_role(Role::Check),
        Verdict::ordering(
            "placement.separation-beats-mixing",
            "Separating hot from cold by handle amplifies less than one frontier for the same writes",
            "Stoica & Ailamaki, VLDB 2013: mixing update frequencies in a block costs GC copies",
            gain,
            gain > 1.0,
            format!("smallest one-handle / separated WAF {gain:.3}"),
        )
        .with_role(Role::Check),
        Verdict::ordering(
            "placement.fdp-not-above-conventional",
            "With the engines' hints on handles, the FDP drive amplifies no more than the conventional drive",
            "FDP only separates what the host tells apart (TP4146); it adds no copies",
            fdp_worst,
            fdp_worst <= 1.0,
            fdp_vs_conv
                .iter()
                .map(|(e, h, r)| format!("{} {}: FDP/conventional {r:.3}", e.id(), h.name()))
                .collect::<Vec<_>>()
                .join("; "),
        )
        // A drive without placement gives the same ratio (1): a check, not a prediction.
        .with_role(Role::Check),
    ]
    .into_iter()
    .chain(cachelib_verdicts(m))
    .collect()
}

/// The CacheLib-like cache's verdicts.
fn cachelib_verdicts(m: &Measured) -> Vec<Verdict> {
    let (cl_plain, cl_fdp) = (m.cl(false, 1.0), m.cl(true, 1.0));
    vec![
        Verdict::numeric(
            "placement.cachelib-fdp",
            "A CacheLib-like flash cache (BigHash and BlockCache on their own handles) runs at a device WAF of about 1 on an FDP drive",
            "Allison et al., \"Towards Efficient Flash Caches with Emerging NVMe Flexible Data Placement SSDs\" (arXiv 2503.11665, 2025): \"an ideal device write amplification of ~1 can be achieved with FDP\"",
            cl_fdp,
            1.0,
            0.10,
            format!(
                "FDP {cl_fdp:.3}, one frontier {cl_plain:.3}, with half the bytes to each engine, on a drive \
                 large enough that GC's per-die reserve leaves it the preset's over-provisioning"
            ),
        )
        .if_missed({
            let by_mix = BIGHASH_SHARES
                .iter()
                .map(|&b| format!("{:.0}% {:.3}", b * 100.0, m.cl_mix(true, 1.0, b)))
                .collect::<Vec<_>>()
                .join(", ");
            format!(
                "the traces' mix. On its own handle BigHash's 4 KiB buckets, rewritten at random over 4% of \
                 the cache, are a uniform random workload whose copies FDP cannot remove, so the device WAF \
                 rises with BigHash's share of the bytes (table `placement_cachelib_mix`, FDP: {by_mix}); the \
                 paper's ~1 needs a mix lighter on BigHash than an even split, which it does not publish"
            )
        }),
        Verdict::ordering(
            "placement.cachelib-fdp-below-plain",
            "The same cache on one frontier amplifies more than on FDP",
            "facebook/CacheLib PR #277: FDP \"can reduce the Device Write Amplification (WAF) significantly even in high SSD utilization scenarios\"",
            cl_plain / cl_fdp,
            cl_plain > cl_fdp,
            format!("one frontier / FDP {:.3}", cl_plain / cl_fdp),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kv_store_gives_the_same_answer_on_every_drive_and_zoned_copies_nothing() {
        let runs: Vec<Run> = [
            (DriveKind::Conventional, Host::Log),
            (DriveKind::Fdp, Host::Log),
            (DriveKind::Zoned, Host::Log),
            (DriveKind::Fdp, Host::InPlace),
        ]
        .into_iter()
        .map(|(d, h)| run_one(Engine::Kv, d, h, Scale::Quick, 3).unwrap())
        .collect();
        assert!(runs.iter().all(|r| r.answer == runs[0].answer), "{runs:?}");
        let zoned = &runs[2];
        assert_eq!(zoned.device_waf, 1.0);
        assert!(zoned.zone_resets > 0);
        assert!(run_one(Engine::Kv, DriveKind::Zoned, Host::InPlace, Scale::Quick, 3).is_err());
    }

    #[test]
    fn the_as_btree_holds_the_same_keys_on_every_drive() {
        let answers: Vec<String> = [DriveKind::Conventional, DriveKind::Fdp, DriveKind::Zoned]
            .into_iter()
            .map(|d| {
                run_one(Engine::AsTree, d, Host::Log, Scale::Quick, 4)
                    .unwrap()
                    .answer
            })
            .collect();
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:?}");
    }

    /// What the section would measure on drives whose placement does nothing: every
    /// engine's device WAF `waf` on every drive but the zoned one (1), hot/cold writes as
    /// amplified separated as mixed, the cache the same on FDP as on one frontier.
    fn measured_without_placement(waf: f64, separated_vs_model: f64) -> Measured {
        let mut runs = Vec::new();
        for e in Engine::ALL {
            for (d, h) in [
                (DriveKind::Conventional, Host::Log),
                (DriveKind::Fdp, Host::Log),
                (DriveKind::Zoned, Host::Log),
                (DriveKind::Conventional, Host::InPlace),
                (DriveKind::Fdp, Host::InPlace),
            ] {
                runs.push(Run {
                    engine: e.id(),
                    drive: d.name(),
                    host: h.name(),
                    engine_bytes: 1 << 20,
                    host_bytes: 1 << 20,
                    flash_bytes: 1 << 20,
                    erases: 1,
                    device_waf: if d == DriveKind::Zoned { 1.0 } else { waf },
                    end_to_end: waf,
                    time_ns: 1,
                    life_used: 0.0,
                    fs_cleaned_blocks: 0,
                    zone_resets: 0,
                    answer: "same".into(),
                });
            }
        }
        let streams = hot_cold_streams();
        let hot_cold = HOT_COLD_OPS
            .iter()
            .flat_map(|&op| {
                let w = separated_waf(hot_cold_effective_op(op), &streams) * separated_vs_model;
                [(op, false, w), (op, true, w)]
            })
            .collect();
        let cachelib = CACHE_UTILIZATIONS
            .iter()
            .map(|&u| (u, JUDGED_BIGHASH_SHARE))
            .chain(BIGHASH_SHARES.iter().map(|&b| (1.0, b)))
            .flat_map(|(u, b)| [(false, u, b, waf), (true, u, b, waf)])
            .collect();
        Measured {
            runs,
            hot_cold,
            cachelib,
        }
    }

    #[test]
    fn a_drive_whose_placement_does_nothing_fails_every_prediction() {
        let verdicts = analyse(&measured_without_placement(1.6, 1.0));
        let predicted: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| v.score.as_ref().is_none_or(|s| s.role == Role::Predicted))
            .collect();
        assert!(!predicted.is_empty());
        for v in predicted {
            assert!(!v.holds, "{} holds without placement", v.id());
        }
        // Separation that gains nothing fails its check too.
        let sep = verdicts
            .iter()
            .find(|v| v.id() == "placement.separation-beats-mixing")
            .unwrap();
        assert!(!sep.holds);
    }

    #[test]
    fn a_mixed_cache_amplifies_less_with_its_engines_on_their_own_handles() {
        let plain = cachelib_waf(false, 1.0, 0.5, 1.0, 5).unwrap();
        let fdp = cachelib_waf(true, 1.0, 0.5, 1.0, 5).unwrap();
        assert!(fdp < plain, "FDP {fdp} vs one frontier {plain}");
        assert!(fdp >= 1.0);
    }
}
