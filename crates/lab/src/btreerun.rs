//! `flashlab btree`: a B+tree on a store and a backend, preloaded, then timed inserts and
//! point searches, with the read/write split of insert time, I/O counts, buffer hit
//! ratios and file size.

use crate::backend::Backend;
use astree::asstore::{AsConfig, AsStore, Cleaning};
use astree::bftl::BftlStore;
use astree::cache::LruCache;
use astree::inplace::InPlaceStore;
use astree::segments::{FileSegments, MemSegments, SingleFile, VfsSegments};
use astree::storage::{MemStorage, Storage};
use astree::store::{NodeStore, StoreStats};
use astree::BTree;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreKind {
    As,
    InPlace,
    Bftl,
}

impl std::str::FromStr for StoreKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "as" => Ok(StoreKind::As),
            "inplace" => Ok(StoreKind::InPlace),
            "bftl" => Ok(StoreKind::Bftl),
            _ => Err(format!("unknown store {s:?}: expected as, inplace or bftl")),
        }
    }
}

/// BFTL's list limit C: a node is compacted when its list passes this many sector runs.
/// Paper 004 sets C = 3, "the value used in the BFTL paper's experiments".
pub const BFTL_LIST: usize = 3;

#[derive(Debug, Clone)]
pub struct BtreeSpec {
    pub store: StoreKind,
    pub fanout: usize,
    pub node_bytes: usize,
    pub write_buffer_nodes: usize,
    pub cache_nodes: usize,
    /// BFTL: sector-list length C before a node is compacted.
    pub bftl_max_list: usize,
    /// BFTL: the reservation buffer is also full at this many index units (paper 004:
    /// the fanout); None: its bytes only (as many as the write buffer's nodes).
    pub bftl_reservation_ius: Option<usize>,
    pub preload: u64,
    pub ops: u64,
    pub backend: Backend,
    pub seed: u64,
    /// AS store: segment file size, space limit and cleaning policy.
    pub segment_bytes: u64,
    pub max_space_amp: f64,
    pub cleaning: Cleaning,
    /// Commit (sync) every this many inserts (0: only after the preload and after the
    /// timed inserts). The AS store cleans at commits.
    pub commit_every: u64,
    /// Record the file size every this many inserts (0: never).
    pub sample_every: u64,
    /// AS store: commit by logging operations (see `AsConfig::logical_commits`).
    pub logical_commits: bool,
    /// AS store: packed records in units of this many bytes (None: fixed slots).
    pub packed_unit_bytes: Option<usize>,
    /// AS store with logical commits: the budget of changes the tree defers
    /// (`BTree::defer_changes`; 0: none, the default).
    pub deferred_bytes: usize,
    /// sim: the timed inserts go on until the drive has taken this many host bytes since
    /// it was new (preload included) instead of stopping after `ops`; `ops` searches
    /// follow. The `lifetime` experiment runs every store to the same bytes.
    pub host_write_target_bytes: Option<u64>,
    /// sim: the drive is preconditioned before simfs is made on it (its whole logical
    /// space; [`crate::precondition`]; random writes drawn from a seed derived from
    /// `seed`), as a used drive. None: a new drive.
    pub precondition: crate::precondition::Precondition,
}

impl BtreeSpec {
    /// The paper's setup (8 KiB nodes, 400,000 preloaded, 100,000 timed) on `backend`.
    pub fn new(store: StoreKind, backend: Backend) -> Self {
        BtreeSpec {
            store,
            fanout: 64,
            node_bytes: 8192,
            write_buffer_nodes: 1,
            cache_nodes: 0,
            bftl_max_list: BFTL_LIST,
            bftl_reservation_ius: None,
            preload: 400_000,
            ops: 100_000,
            backend,
            seed: 1,
            segment_bytes: astree::asstore::DEFAULT_SEGMENT_BYTES,
            max_space_amp: astree::asstore::DEFAULT_MAX_SPACE_AMP,
            cleaning: Cleaning::CostBenefit,
            commit_every: 0,
            sample_every: 0,
            logical_commits: false,
            packed_unit_bytes: None,
            deferred_bytes: 0,
            host_write_target_bytes: None,
            precondition: crate::precondition::Precondition::None,
        }
    }

    fn as_config(&self) -> AsConfig {
        AsConfig {
            segment_bytes: self.segment_bytes,
            max_space_amp: self.max_space_amp,
            cleaning: self.cleaning,
            logical_commits: self.logical_commits,
            packed_unit_bytes: self.packed_unit_bytes,
            ..AsConfig::new(self.node_bytes, self.write_buffer_nodes)
        }
    }
}

/// The file size after a number of inserts (preload included).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FileSample {
    pub inserts: u64,
    pub file_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct BtreeResult {
    pub store: String,
    pub backend: String,
    pub fanout: usize,
    pub node_bytes: usize,
    pub write_buffer_nodes: usize,
    pub cache_nodes: usize,
    pub preload: u64,
    pub ops: u64,
    pub seed: u64,
    pub insert_s: f64,
    pub insert_read_s: f64,
    pub insert_write_s: f64,
    pub search_s: f64,
    pub insert_node_reads: u64,
    pub insert_node_writes: u64,
    pub insert_write_requests: u64,
    pub search_node_reads: u64,
    /// AS store, inserts: node reads the write buffer answered / node reads.
    pub write_buffer_read_hit_ratio: f64,
    /// AS store, inserts: node writes that replaced a node already in the write buffer.
    pub write_buffer_write_hit_ratio: f64,
    /// Device read requests of the search phase (BFTL reads a node's sectors one by one).
    pub search_read_requests: u64,
    pub cache_hit_ratio: f64,
    pub file_bytes: u64,
    pub entries: u64,
    /// Nodes in the tree × node size.
    pub live_node_bytes: u64,
    /// File bytes / live node bytes.
    pub space_amplification: f64,
    /// AS store, over the whole run: segments cleaned, nodes moved, segment files removed.
    pub segments_cleaned: u64,
    pub nodes_moved: u64,
    pub segments_removed: u64,
    pub file_samples: Vec<FileSample>,
    /// AS store at the end of the run: its segments in log order, with their live nodes
    /// (paper 004's Fig. 6).
    pub segment_live_nodes: Vec<(u64, u64)>,
    /// With a host-byte target ([`BtreeSpec::host_write_target_bytes`]): the timed inserts
    /// it took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_inserts: Option<u64>,
    /// Simulated SSD: the drive's wear report at the end of the run (since the drive was
    /// new: simfs's metadata, the preload, the inserts and searches); None on RAM, real
    /// files, a disk or a drive without a rated endurance. Not serialized (the experiments'
    /// results stay as they were); `btree --wear` prints it.
    #[serde(skip)]
    pub wear: Option<flash::WearReport>,
    /// The same once simfs was made (after preconditioning): erase counts the run started
    /// from.
    #[serde(skip)]
    pub wear_at_start: Option<flash::WearReport>,
}

fn diff(a: &StoreStats, b: &StoreStats) -> StoreStats {
    StoreStats {
        node_reads: b.node_reads - a.node_reads,
        node_writes: b.node_writes - a.node_writes,
        write_requests: b.write_requests - a.write_requests,
        read_requests: b.read_requests - a.read_requests,
        bytes_written: b.bytes_written - a.bytes_written,
        bytes_read: b.bytes_read - a.bytes_read,
        buffer_hits: b.buffer_hits - a.buffer_hits,
        buffer_lookups: b.buffer_lookups - a.buffer_lookups,
        buffer_writes: b.buffer_writes - a.buffer_writes,
        buffer_rewrites: b.buffer_rewrites - a.buffer_rewrites,
        cache_hits: b.cache_hits - a.cache_hits,
        cache_lookups: b.cache_lookups - a.cache_lookups,
        syncs: b.syncs - a.syncs,
        segments_cleaned: b.segments_cleaned - a.segments_cleaned,
        nodes_moved: b.nodes_moved - a.nodes_moved,
        segments_removed: b.segments_removed - a.segments_removed,
        segments_recycled: b.segments_recycled - a.segments_recycled,
        bytes_zero_filled: b.bytes_zero_filled - a.bytes_zero_filled,
    }
}

/// A fresh private directory for one run's files inside `dir` (which must exist): a name
/// no other run has, so a run never opens another's store, removed when dropped.
pub fn run_dir(dir: &std::path::Path, prefix: &str) -> Result<tempfile::TempDir, crate::LabError> {
    if !dir.is_dir() {
        return Err(format!(
            "directory {}: does not exist or is not a directory",
            dir.display()
        )
        .into());
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(dir)
        .map_err(|e| crate::LabError::io(dir, e))
}

fn key(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

/// Host bytes the drive under the run has taken (0 when there is none).
type HostBytes<'a> = &'a dyn Fn() -> u64;

fn measure<S: NodeStore>(
    mut tree: BTree<S>,
    spec: &BtreeSpec,
    host_bytes: HostBytes<'_>,
    out: &mut BtreeResult,
) -> Result<(), crate::LabError> {
    let e = |e: astree::TreeError| e.to_string();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut keys = Vec::with_capacity((spec.preload + spec.ops) as usize);
    let mut inserted = 0u64;
    // One insert, with the commits and file-size samples the spec asks for.
    let mut insert = |tree: &mut BTree<S>, k: u64| -> Result<(), crate::LabError> {
        tree.insert(&key(k), &k.to_le_bytes()).map_err(e)?;
        inserted += 1;
        if spec.commit_every > 0 && inserted.is_multiple_of(spec.commit_every) {
            tree.sync().map_err(e)?;
        }
        if spec.sample_every > 0 && inserted.is_multiple_of(spec.sample_every) {
            out.file_samples.push(FileSample {
                inserts: inserted,
                file_bytes: tree.store().file_bytes(),
            });
        }
        Ok(())
    };
    for _ in 0..spec.preload {
        let k = rng.random::<u64>();
        insert(&mut tree, k)?;
        keys.push(k);
    }
    tree.sync().map_err(e)?;
    let wall = std::time::Instant::now();
    let (s0, io0, t0) = (
        tree.store().stats(),
        tree.store().io_time(),
        tree.store().now_ns(),
    );
    match spec.host_write_target_bytes {
        None => {
            for _ in 0..spec.ops {
                let k = rng.random::<u64>();
                insert(&mut tree, k)?;
                keys.push(k);
            }
        }
        Some(target) => {
            let mut n = 0u64;
            while host_bytes() < target {
                let k = rng.random::<u64>();
                insert(&mut tree, k)?;
                keys.push(k);
                n += 1;
            }
            out.timed_inserts = Some(n);
        }
    }
    tree.sync().map_err(e)?;
    let virtual_time = matches!(spec.backend, Backend::Sim { .. });
    let (s1, io1, t1) = (
        tree.store().stats(),
        tree.store().io_time(),
        tree.store().now_ns(),
    );
    out.insert_s = if virtual_time {
        (t1 - t0) as f64 / 1e9
    } else {
        wall.elapsed().as_secs_f64()
    };
    out.insert_read_s = (io1.read_ns - io0.read_ns) as f64 / 1e9;
    out.insert_write_s = (io1.write_ns - io0.write_ns + io1.sync_ns - io0.sync_ns) as f64 / 1e9;
    let d = diff(&s0, &s1);
    out.insert_node_reads = d.node_reads;
    out.insert_node_writes = d.node_writes;
    out.insert_write_requests = d.write_requests;
    let ratio = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
    out.write_buffer_read_hit_ratio = ratio(d.buffer_hits, d.buffer_lookups);
    out.write_buffer_write_hit_ratio = ratio(d.buffer_rewrites, d.buffer_writes);
    let wall = std::time::Instant::now();
    for _ in 0..spec.ops {
        let k = keys[rng.random_range(0..keys.len())];
        if tree.get(&key(k)).map_err(e)?.is_none() {
            return Err(format!("key {k} is missing from the tree").into());
        }
    }
    let (s2, t2) = (tree.store().stats(), tree.store().now_ns());
    out.search_s = if virtual_time {
        (t2 - t1) as f64 / 1e9
    } else {
        wall.elapsed().as_secs_f64()
    };
    let d = diff(&s1, &s2);
    out.search_node_reads = d.node_reads;
    out.search_read_requests = d.read_requests;
    let all = tree.store().stats();
    out.cache_hit_ratio = if all.cache_lookups > 0 {
        all.cache_hits as f64 / all.cache_lookups as f64
    } else {
        0.0
    };
    out.file_bytes = tree.store().file_bytes();
    // The nodes hold every entry once the deferred changes are made (after the
    // measurements: it changes nothing measured).
    tree.defer_changes(0).map_err(e)?;
    out.entries = tree.check()?;
    out.live_node_bytes = tree.node_count().map_err(e)? * spec.node_bytes as u64;
    out.space_amplification = out.file_bytes as f64 / out.live_node_bytes.max(1) as f64;
    out.segments_cleaned = all.segments_cleaned;
    out.nodes_moved = all.nodes_moved;
    out.segments_removed = all.segments_removed;
    out.segment_live_nodes = tree.store().segment_live_nodes();
    Ok(())
}

fn with_store<S: NodeStore>(
    store: S,
    spec: &BtreeSpec,
    host_bytes: HostBytes<'_>,
    out: &mut BtreeResult,
) -> Result<(), crate::LabError> {
    let store = LruCache::new(store, spec.cache_nodes);
    let mut tree = BTree::new(store, spec.fanout)?;
    tree.defer_changes(spec.deferred_bytes)?;
    measure(tree, spec, host_bytes, out)
}

/// Runs the in-place or BFTL store on `storage` (the AS store takes segments instead).
fn with_storage<T: Storage>(
    storage: T,
    spec: &BtreeSpec,
    host_bytes: HostBytes<'_>,
    out: &mut BtreeResult,
) -> Result<(), crate::LabError> {
    let e = |e: astree::TreeError| e.to_string();
    match spec.store {
        StoreKind::As => unreachable!("the AS store runs on segments"),
        StoreKind::InPlace => with_store(
            InPlaceStore::open(storage, spec.node_bytes).map_err(e)?,
            spec,
            host_bytes,
            out,
        ),
        StoreKind::Bftl => {
            // The reservation buffer holds as many bytes as the AS write buffer.
            let sectors =
                (spec.write_buffer_nodes * spec.node_bytes).div_ceil(astree::bftl::SECTOR_BYTES);
            let mut store =
                BftlStore::new(storage, spec.node_bytes, sectors, spec.bftl_max_list).map_err(e)?;
            if let Some(ius) = spec.bftl_reservation_ius {
                store = store.with_max_ius(ius).map_err(e)?;
            }
            with_store(store, spec, host_bytes, out)
        }
    }
}

fn with_segments<G: astree::segments::Segments>(
    segments: G,
    spec: &BtreeSpec,
    host_bytes: HostBytes<'_>,
    out: &mut BtreeResult,
) -> Result<(), crate::LabError> {
    let store = AsStore::open_with(segments, spec.as_config())?;
    with_store(store, spec, host_bytes, out)
}

pub fn run(spec: &BtreeSpec) -> Result<BtreeResult, crate::LabError> {
    Ok(run_recorded(spec, None)?.0)
}

/// [`run`], the simulated drive's whole run (from the file system's creation) recorded over
/// virtual time in intervals of `timeline_ns` when given (`--timeseries`).
pub fn run_recorded(
    spec: &BtreeSpec,
    timeline: Option<crate::backend::TimelineSpec>,
) -> Result<(BtreeResult, Option<flash::timeline::TimeSeries>), crate::LabError> {
    let none = || 0;
    let mut series = None;
    if spec.host_write_target_bytes.is_some() && !matches!(spec.backend, Backend::Sim { .. }) {
        return Err("a host-byte target needs a simulated drive (--backend sim)".into());
    }
    let mut out = BtreeResult {
        store: format!("{:?}", spec.store).to_lowercase(),
        fanout: spec.fanout,
        node_bytes: spec.node_bytes,
        write_buffer_nodes: spec.write_buffer_nodes,
        cache_nodes: spec.cache_nodes,
        preload: spec.preload,
        ops: spec.ops,
        seed: spec.seed,
        ..Default::default()
    };
    match &spec.backend {
        Backend::Mem => {
            out.backend = "mem".into();
            if spec.store == StoreKind::As {
                with_segments(MemSegments::new(), spec, &none, &mut out)?;
            } else {
                with_storage(MemStorage::new(), spec, &none, &mut out)?;
            }
        }
        Backend::Os {
            dir,
            direct_io,
            cancel,
        } => {
            out.backend = format!("os:{}", dir.display());
            // Removed on drop: every exit path, an error or an interrupt included.
            let private = run_dir(dir, "flashlab-btree-")?;
            let name = out.store.clone();
            if spec.store == StoreKind::As {
                let segments = FileSegments::open(private.path(), &name, *direct_io)?
                    .with_cancel(cancel.clone());
                with_segments(segments, spec, &none, &mut out)?;
            } else {
                let file = FileSegments::open(private.path(), &name, *direct_io)?
                    .with_cancel(cancel.clone());
                with_storage(SingleFile(file), spec, &none, &mut out)?;
            }
        }
        Backend::Sim { preset } => {
            out.backend = format!("sim:{}", preset.name);
            let fs = crate::backend::simulated_fs_on(
                preset,
                simfs::AllocPolicy::Ext4Like,
                spec.precondition,
                crate::experiments::derive_seed(spec.seed, 1),
            )?;
            out.wear_at_start = fs.device().dev.wear_report();
            let mut fs = fs;
            crate::backend::start_timeline(&mut fs, timeline)?;
            // The engine owns the file system; this handle reads the drive after the run.
            let (watched, drive) = crate::backend::Watched::new(vfs::SimVfs::new(fs));
            let host_bytes = || drive.borrow().fs().device().dev.host_write_bytes();
            if spec.store == StoreKind::As {
                let segments = VfsSegments::on(watched, "btree", false)?;
                with_segments(segments, spec, &host_bytes, &mut out)?;
            } else {
                let storage = SingleFile(VfsSegments::on(watched, "btree", false)?);
                with_storage(storage, spec, &host_bytes, &mut out)?;
            }
            out.wear = drive.borrow().fs().device().dev.wear_report();
            series = crate::backend::finish_timeline(drive.borrow_mut().fs_mut())?;
        }
    }
    Ok((out, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(preset: &str) -> Backend {
        Backend::Sim {
            preset: Box::new(flash::Preset::load(preset).unwrap().with_capacity(1 << 30)),
        }
    }

    #[test]
    fn a_run_on_a_simulated_ssd_keeps_its_wear_and_a_disk_or_ram_has_none() {
        let spec = |store, backend| BtreeSpec {
            fanout: 64,
            preload: 2_000,
            ops: 500,
            ..BtreeSpec::new(store, backend)
        };
        let r = run(&spec(StoreKind::InPlace, sim("840pro"))).unwrap();
        let w = r.wear.unwrap();
        assert!(w.host_write_bytes > 0 && w.flash_write_bytes >= w.host_write_bytes);
        assert!(r.wear_at_start.is_some());
        assert!(run(&spec(StoreKind::As, sim("hdd7200")))
            .unwrap()
            .wear
            .is_none());
        assert!(run(&spec(StoreKind::As, Backend::Mem))
            .unwrap()
            .wear
            .is_none());
        // The handle on the drive changes no number: the result is the one without it
        // (checked against a second run, as every field but the wear is serialized).
        let a = serde_json::to_value(run(&spec(StoreKind::Bftl, sim("840pro"))).unwrap()).unwrap();
        let b = serde_json::to_value(run(&spec(StoreKind::Bftl, sim("840pro"))).unwrap()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_host_byte_target_inserts_until_the_drive_has_taken_it() {
        let target = 16u64 << 20;
        for store in [StoreKind::As, StoreKind::InPlace, StoreKind::Bftl] {
            let s = BtreeSpec {
                fanout: 64,
                preload: 1_000,
                ops: 100,
                write_buffer_nodes: 8,
                host_write_target_bytes: Some(target),
                ..BtreeSpec::new(store, sim("840pro"))
            };
            let r = run(&s).unwrap();
            let w = r.wear.unwrap();
            assert!(
                w.host_write_bytes >= target,
                "{store:?}: {}",
                w.host_write_bytes
            );
            assert!(r.timed_inserts.unwrap() > 0);
            assert_eq!(r.entries, 1_000 + r.timed_inserts.unwrap());
        }
        let e = run(&BtreeSpec {
            host_write_target_bytes: Some(target),
            ..BtreeSpec::new(StoreKind::As, Backend::Mem)
        })
        .unwrap_err();
        assert!(e.to_string().contains("simulated drive"), "{e}");
    }
}
