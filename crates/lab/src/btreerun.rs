//! `flashlab btree`: a B+tree on a store and a backend, preloaded, then timed inserts and
//! point searches, with the read/write split of insert time, I/O counts, buffer hit
//! ratios and file size.

use astree::asstore::AsStore;
use astree::bftl::BftlStore;
use astree::cache::LruCache;
use astree::inplace::InPlaceStore;
use astree::storage::{FileStorage, MemStorage, SimStorage, Storage};
use astree::store::{NodeStore, StoreStats};
use astree::BTree;
use flash::Preset;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

#[derive(Debug, Clone)]
pub enum TreeBackend {
    Mem,
    Os { dir: PathBuf, direct_io: bool },
    Sim { preset: Box<Preset> },
}

#[derive(Debug, Clone)]
pub struct BtreeSpec {
    pub store: StoreKind,
    pub fanout: usize,
    pub node_bytes: usize,
    pub write_buffer_nodes: usize,
    pub cache_nodes: usize,
    /// BFTL: sector-list length C before a node is compacted.
    pub bftl_max_list: usize,
    pub preload: u64,
    pub ops: u64,
    pub backend: TreeBackend,
    pub seed: u64,
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
    pub write_buffer_hit_ratio: f64,
    pub cache_hit_ratio: f64,
    pub file_bytes: u64,
    pub entries: u64,
    /// Nodes in the tree × node size.
    pub live_node_bytes: u64,
    /// File bytes / live node bytes.
    pub space_amplification: f64,
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
        cache_hits: b.cache_hits - a.cache_hits,
        cache_lookups: b.cache_lookups - a.cache_lookups,
        syncs: b.syncs - a.syncs,
    }
}

fn key(x: u64) -> [u8; 8] {
    x.to_be_bytes()
}

fn measure<S: NodeStore>(
    mut tree: BTree<S>,
    spec: &BtreeSpec,
    out: &mut BtreeResult,
) -> Result<(), String> {
    let e = |e: astree::TreeError| e.to_string();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut keys = Vec::with_capacity((spec.preload + spec.ops) as usize);
    for _ in 0..spec.preload {
        let k = rng.random::<u64>();
        tree.insert(&key(k), &k.to_le_bytes()).map_err(e)?;
        keys.push(k);
    }
    tree.sync().map_err(e)?;
    let wall = std::time::Instant::now();
    let (s0, io0, t0) = (
        tree.store().stats(),
        tree.store().io_time(),
        tree.store().now_ns(),
    );
    for _ in 0..spec.ops {
        let k = rng.random::<u64>();
        tree.insert(&key(k), &k.to_le_bytes()).map_err(e)?;
        keys.push(k);
    }
    tree.sync().map_err(e)?;
    let virtual_time = matches!(spec.backend, TreeBackend::Sim { .. });
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
    out.write_buffer_hit_ratio = if d.buffer_lookups > 0 {
        d.buffer_hits as f64 / d.buffer_lookups as f64
    } else {
        0.0
    };
    let wall = std::time::Instant::now();
    for _ in 0..spec.ops {
        let k = keys[rng.random_range(0..keys.len())];
        if tree.get(&key(k)).map_err(e)?.is_none() {
            return Err(format!("key {k} is missing from the tree"));
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
    let all = tree.store().stats();
    out.cache_hit_ratio = if all.cache_lookups > 0 {
        all.cache_hits as f64 / all.cache_lookups as f64
    } else {
        0.0
    };
    out.file_bytes = tree.store().file_bytes();
    out.entries = tree.check()?;
    out.live_node_bytes = tree.node_count().map_err(e)? * spec.node_bytes as u64;
    out.space_amplification = out.file_bytes as f64 / out.live_node_bytes.max(1) as f64;
    Ok(())
}

fn with_storage<T: Storage>(
    storage: T,
    spec: &BtreeSpec,
    out: &mut BtreeResult,
) -> Result<(), String> {
    let e = |e: astree::TreeError| e.to_string();
    match spec.store {
        StoreKind::As => {
            let store = LruCache::new(
                AsStore::open(storage, spec.node_bytes, spec.write_buffer_nodes).map_err(e)?,
                spec.cache_nodes,
            );
            measure(BTree::new(store, spec.fanout).map_err(e)?, spec, out)
        }
        StoreKind::InPlace => {
            let store = LruCache::new(
                InPlaceStore::open(storage, spec.node_bytes).map_err(e)?,
                spec.cache_nodes,
            );
            measure(BTree::new(store, spec.fanout).map_err(e)?, spec, out)
        }
        StoreKind::Bftl => {
            // The reservation buffer holds as many bytes as the AS write buffer.
            let sectors =
                (spec.write_buffer_nodes * spec.node_bytes).div_ceil(astree::bftl::SECTOR_BYTES);
            let store = LruCache::new(
                BftlStore::new(storage, spec.node_bytes, sectors, spec.bftl_max_list).map_err(e)?,
                spec.cache_nodes,
            );
            measure(BTree::new(store, spec.fanout).map_err(e)?, spec, out)
        }
    }
}

pub fn run(spec: &BtreeSpec) -> Result<BtreeResult, String> {
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
        TreeBackend::Mem => {
            out.backend = "mem".into();
            with_storage(MemStorage::new(), spec, &mut out)?;
        }
        TreeBackend::Os { dir, direct_io } => {
            out.backend = format!("os:{}", dir.display());
            if !dir.is_dir() {
                return Err(format!(
                    "directory {}: does not exist or is not a directory",
                    dir.display()
                ));
            }
            let path = dir.join(format!(
                "flashlab-btree-{}-{}.db",
                std::process::id(),
                out.store
            ));
            let r = FileStorage::open(&path, *direct_io)
                .map_err(|e| e.to_string())
                .and_then(|s| with_storage(s, spec, &mut out));
            let _ = std::fs::remove_file(&path);
            r?;
        }
        TreeBackend::Sim { preset } => {
            out.backend = format!("sim:{}", preset.name);
            let dev = preset.build().map_err(|e| e.to_string())?;
            let logical = flash::Device::logical_bytes(&dev);
            let fs = simfs::SimFs::mkfs(
                simfs::Timed::new(dev),
                simfs::FsConfig::new((logical - 4096) / 4096 * 4096 * 9 / 10),
            )
            .map_err(|e| e.to_string())?;
            let storage = SimStorage::create(fs, "btree.db").map_err(|e| e.to_string())?;
            with_storage(storage, spec, &mut out)?;
        }
    }
    Ok(out)
}
