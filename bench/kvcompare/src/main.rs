//! flashlab's AS B-tree (on real segment files) against redb, LMDB (heed), sled and fjall,
//! on the shape of redb's own benchmark: a bulk load of N entries (24-byte keys, 150-byte
//! values) in one commit, individual writes each made durable (with their p99 latency:
//! the AS store cleans at commits), batches of 1,000 writes, random point reads and
//! removals; time of each phase and the bytes on disk after the reads.
//!
//!     cargo run --release --manifest-path bench/kvcompare/Cargo.toml -- [N] [DIR] [ENGINES]
//!         [--cache-bytes BYTES] [--json] [--value-bytes N] [--keys random|sequential]
//!
//! `--cache-bytes` sets the cache of the engines that keep one (AS, redb, fjall's block
//! cache; default: each engine's own, the AS store's 1 GiB as redb's); `--json` prints one
//! JSON object per run; `--value-bytes` and `--keys` are the value-size and key-order
//! variants (150-byte values and random keys unless said). `bench/kvcompare/medians.py`
//! runs it N times per engine, at defaults and at equal memory (a memory cgroup), and
//! prints the tables of docs/comparisons.md.

/// Every engine allocates through mimalloc, as flashlab does (glibc's malloc hands freed
/// memory back and zeroes fresh pages, which costs the engines that allocate per
/// operation; one allocator for all keeps the comparison about the engines).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use astree::asstore::{AsConfig, AsStore};
use astree::cache::{LruCache, DEFAULT_CACHE_BYTES};
use astree::segments::FileSegments;
use astree::store::NodeStore;
use astree::tree::BatchOp;
use astree::BTree;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use redb::{ReadableDatabase, TableDefinition};
use std::path::{Path, PathBuf};
use std::time::Instant;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");
const INDIVIDUAL: usize = 1_000;
/// AS store: 4 KiB nodes (the page size of LMDB and redb), a write buffer of 16,384 nodes
/// (64 MiB, fjall's default memtable budget `max_write_buffer_size`: a transaction's dirty
/// nodes are written once, at commit) and a cache of
/// decoded nodes of `--cache-bytes` (default `DEFAULT_CACHE_BYTES`, 1 GiB: redb's
/// default; LMDB and fjall use the page cache).
const NODE_BYTES: usize = 4096;
const WRITE_BUFFER: usize = 16384;
/// With logical commits, committed changes wait in a sorted map of up to 64 MiB before
/// they are made to the nodes (`BTree::defer_changes`): fjall's default memtable budget.
const DEFERRED_BYTES: usize = 64 << 20;
/// Packed records (`AsConfig::packed_unit_bytes`) in units of 64 bytes: a node costs the
/// log what it holds, not a whole 4 KiB slot (`as-logical-fixed` keeps the fixed slots).
const PACKED_UNIT: usize = 64;
/// A full write buffer writes the quarter of it dirtied first (`AsConfig::flush_fraction`):
/// the rest stays to absorb its next changes.
const FLUSH_FRACTION: f64 = 0.25;
/// Keys per node at most: more than a 4 KiB node holds of these entries, so nodes fill by
/// bytes, as LMDB's and redb's pages do (with 24-byte keys, an internal node holds about
/// 110 children, a leaf about 20 entries of 150 bytes).
const FANOUT: usize = 256;
/// Batches of the batch phase unless `--batches N` says otherwise.
const BATCHES: usize = 20;
const BATCH: usize = 1_000;

/// The benchmark's entries: 24-byte keys (random, or for `--keys sequential` a
/// big-endian counter followed by random bytes, so each new key sorts after every earlier
/// one) and random values of `value_bytes` (150 unless `--value-bytes` says otherwise).
struct Entries {
    rng: Xoshiro256PlusPlus,
    sequential: bool,
    next: u64,
    value_bytes: usize,
}

impl Entries {
    fn new(opts: &Options) -> Self {
        Entries {
            rng: Xoshiro256PlusPlus::seed_from_u64(1),
            sequential: opts.sequential,
            next: 0,
            value_bytes: opts.value_bytes,
        }
    }

    fn entry(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut k = vec![0u8; 24];
        let mut v = vec![0u8; self.value_bytes];
        self.rng.fill(&mut k[..]);
        if self.sequential {
            k[..8].copy_from_slice(&self.next.to_be_bytes());
            self.next += 1;
        }
        self.rng.fill(&mut v[..]);
        (k, v)
    }
}

trait Engine {
    fn name(&self) -> &'static str;
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]);
    fn durable_one(&mut self, k: &[u8], v: &[u8]);
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]);
    fn get(&mut self, k: &[u8]) -> bool;
    fn remove_all(&mut self, ks: &[Vec<u8>]);
    fn file_bytes(&self) -> u64;
    /// Makes everything written so far part of the files (before they are measured).
    fn settle(&mut self) {}
    /// Anything else worth printing after the run.
    fn notes(&self) -> String {
        String::new()
    }
    /// Work the engine deferred past the last phase, done now: (bytes deferred, seconds to
    /// do it). Not in any column (fjall's compaction of its tombstones is not either), but
    /// printed, so the deferral is seen.
    fn finish_deferred(&mut self) -> Option<(usize, f64)> {
        None
    }
}

struct As(BTree<LruCache<AsStore<FileSegments>>>, &'static str);
impl As {
    /// NODE_BYTES nodes filled by bytes (FANOUT), 4 MiB segments (the data set is tens of MB, so
    /// cleaning has room to work), a write buffer of WRITE_BUFFER nodes and a cache of
    /// `cache_bytes` of decoded nodes.
    /// `logical`: commits log the operations and dirty nodes are written when the buffer
    /// fills (else every commit writes the nodes it changed, as the paper's store does).
    fn open(dir: &Path, logical: bool, packed: bool, cache_bytes: usize) -> Self {
        let cfg = AsConfig {
            segment_bytes: 4 << 20,
            logical_commits: logical,
            flush_fraction: FLUSH_FRACTION,
            packed_unit_bytes: packed.then_some(PACKED_UNIT),
            ..AsConfig::new(NODE_BYTES, WRITE_BUFFER)
        };
        std::fs::create_dir_all(dir).unwrap();
        let store = AsStore::open_with(FileSegments::open(dir, "as", false).unwrap(), cfg).unwrap();
        let mut tree = BTree::new(LruCache::with_bytes(store, cache_bytes), FANOUT).unwrap();
        if logical {
            tree.defer_changes(DEFERRED_BYTES).unwrap();
        }
        As(
            tree,
            match (logical, packed) {
                (true, true) => "AS B-tree, logical",
                (false, true) => "AS B-tree, nodes",
                (true, false) => "AS B-tree, logical, fixed slots",
                (false, false) => "AS B-tree, nodes, fixed slots",
            },
        )
    }
}
impl Engine for As {
    fn name(&self) -> &'static str {
        self.1
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        // One transaction's changes as a batch: applied in key order (built bottom-up
        // into an empty tree).
        let ops: Vec<BatchOp> = es
            .iter()
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        self.0.apply_batch(&ops).unwrap();
        self.0.sync().unwrap();
    }
    fn durable_one(&mut self, k: &[u8], v: &[u8]) {
        self.0.insert(k, v).unwrap();
        self.0.sync().unwrap();
    }
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        self.bulk(es)
    }
    fn get(&mut self, k: &[u8]) -> bool {
        // Borrow the value, as LMDB's and redb's reads do.
        self.0.get_with(k, |v| !v.is_empty()).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        let ops: Vec<BatchOp> = ks.iter().map(|k| (k.as_slice(), None)).collect();
        self.0.apply_batch(&ops).unwrap();
        self.0.sync().unwrap();
    }
    fn file_bytes(&self) -> u64 {
        self.0.store().file_bytes()
    }
    fn finish_deferred(&mut self) -> Option<(usize, f64)> {
        let bytes = self.0.deferred_bytes();
        if bytes == 0 {
            return None;
        }
        let t = Instant::now();
        // A new budget first makes the changes deferred so far.
        self.0.defer_changes(DEFERRED_BYTES).unwrap();
        Some((bytes, t.elapsed().as_secs_f64()))
    }
    // No `settle`: with logical commits the dirty nodes stay in the write buffer and the
    // committed operation records stand for them on disk, as fjall's journal stands for
    // its memtable (which is not flushed before the bytes are measured either).
    fn notes(&self) -> String {
        let s = self.0.store().stats();
        format!(
            "  (cleaning: {} segments cleaned, {} nodes moved, {} segment files recycled, {} removed; cache: {} of {} lookups hit, {} node reads; log {:.1} MB written, {:.1} MB of zeros ahead of it)",
            s.segments_cleaned, s.nodes_moved, s.segments_recycled, s.segments_removed,
            s.cache_hits, s.cache_lookups, s.node_reads,
            s.bytes_written as f64 / 1e6, s.bytes_zero_filled as f64 / 1e6
        )
    }
}

struct Redb(redb::Database, PathBuf);
impl Engine for Redb {
    fn name(&self) -> &'static str {
        "redb"
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        let tx = self.0.begin_write().unwrap();
        {
            let mut t = tx.open_table(TABLE).unwrap();
            for (k, v) in es {
                t.insert(k.as_slice(), v.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    fn durable_one(&mut self, k: &[u8], v: &[u8]) {
        self.bulk(&[(k.to_vec(), v.to_vec())])
    }
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        self.bulk(es)
    }
    fn get(&mut self, k: &[u8]) -> bool {
        let tx = self.0.begin_read().unwrap();
        let t = tx.open_table(TABLE).unwrap();
        t.get(k).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        let tx = self.0.begin_write().unwrap();
        {
            let mut t = tx.open_table(TABLE).unwrap();
            for k in ks {
                t.remove(k.as_slice()).unwrap();
            }
        }
        tx.commit().unwrap();
    }
    fn file_bytes(&self) -> u64 {
        std::fs::metadata(&self.1).map(|m| m.len()).unwrap_or(0)
    }
}

struct Sled(sled::Db, PathBuf);
impl Engine for Sled {
    fn name(&self) -> &'static str {
        "sled"
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        let mut b = sled::Batch::default();
        for (k, v) in es {
            b.insert(k.as_slice(), v.as_slice());
        }
        self.0.apply_batch(b).unwrap();
        self.0.flush().unwrap();
    }
    fn durable_one(&mut self, k: &[u8], v: &[u8]) {
        self.0.insert(k, v).unwrap();
        self.0.flush().unwrap();
    }
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        self.bulk(es)
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.0.get(k).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        for k in ks {
            self.0.remove(k.as_slice()).unwrap();
        }
        self.0.flush().unwrap();
    }
    fn file_bytes(&self) -> u64 {
        dir_bytes(&self.1)
    }
}

struct Lmdb(
    heed::Env,
    heed::Database<heed::types::Bytes, heed::types::Bytes>,
    PathBuf,
);
impl Lmdb {
    fn open(p: &Path) -> Self {
        std::fs::create_dir_all(p).unwrap();
        // SAFETY: the environment is opened once, by this process only.
        let env = unsafe {
            heed::EnvOpenOptions::new()
                .map_size(16 << 30)
                .open(p)
                .unwrap()
        };
        let mut tx = env.write_txn().unwrap();
        let db = env.create_database(&mut tx, None).unwrap();
        tx.commit().unwrap();
        Lmdb(env, db, p.to_path_buf())
    }
}
impl Engine for Lmdb {
    fn name(&self) -> &'static str {
        "LMDB (heed)"
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        let mut tx = self.0.write_txn().unwrap();
        for (k, v) in es {
            self.1.put(&mut tx, k, v).unwrap();
        }
        tx.commit().unwrap();
    }
    fn durable_one(&mut self, k: &[u8], v: &[u8]) {
        self.bulk(&[(k.to_vec(), v.to_vec())])
    }
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        self.bulk(es)
    }
    fn get(&mut self, k: &[u8]) -> bool {
        let tx = self.0.read_txn().unwrap();
        self.1.get(&tx, k).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        let mut tx = self.0.write_txn().unwrap();
        for k in ks {
            self.1.delete(&mut tx, k).unwrap();
        }
        tx.commit().unwrap();
    }
    fn file_bytes(&self) -> u64 {
        // data.mdb is sparse up to the map size: count the blocks it really uses.
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.2.join("data.mdb"))
            .map(|m| m.blocks() * 512)
            .unwrap_or(0)
    }
}

struct Fjall(fjall::Keyspace, fjall::PartitionHandle, PathBuf);
impl Fjall {
    fn open(p: &Path, cache_bytes: Option<usize>) -> Self {
        let mut cfg = fjall::Config::new(p);
        if let Some(c) = cache_bytes {
            cfg = cfg.cache_size(c as u64);
        }
        let ks = cfg.open().unwrap();
        let part = ks
            .open_partition("bench", fjall::PartitionCreateOptions::default())
            .unwrap();
        Fjall(ks, part, p.to_path_buf())
    }
}
impl Engine for Fjall {
    fn name(&self) -> &'static str {
        "fjall"
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        let mut b = self.0.batch();
        for (k, v) in es {
            b.insert(&self.1, k.as_slice(), v.as_slice());
        }
        b.commit().unwrap();
        self.0.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn durable_one(&mut self, k: &[u8], v: &[u8]) {
        self.1.insert(k, v).unwrap();
        self.0.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        self.bulk(es)
    }
    fn get(&mut self, k: &[u8]) -> bool {
        self.1.get(k).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        let mut b = self.0.batch();
        for k in ks {
            b.remove(&self.1, k.as_slice());
        }
        b.commit().unwrap();
        self.0.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    fn file_bytes(&self) -> u64 {
        dir_bytes(&self.2)
    }
}

fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    if e.path().is_dir() {
                        dir_bytes(&e.path())
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// CPU seconds the process (all its threads) has used: user and system time from
/// /proc/self/stat (Linux; 0 elsewhere). Beside a phase's wall time it tells how much of
/// it was waiting, and it varies less than wall time on a machine others share.
fn cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces):
    // utime and stime are the 12th and 13th, in clock ticks of 1/100 s.
    let Some(rest) = stat.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|t| t.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn run(e: &mut dyn Engine, n: usize, opts: &Options) {
    let json = opts.json;
    let mut gen = Entries::new(opts);
    let es: Vec<_> = (0..n).map(|_| gen.entry()).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    // Each phase's CPU seconds beside its wall time (`cpu` in the JSON line).
    let mut cpu = Vec::with_capacity(5);
    let mut c = cpu_s();
    let mut lap = |cpu: &mut Vec<f64>| {
        let now = cpu_s();
        cpu.push(now - c);
        c = now;
    };
    let t = Instant::now();
    e.bulk(&es);
    let bulk = t.elapsed().as_secs_f64();
    lap(&mut cpu);
    let t = Instant::now();
    let mut lat_us = Vec::with_capacity(INDIVIDUAL);
    for _ in 0..INDIVIDUAL {
        let (k, v) = gen.entry();
        let t1 = Instant::now();
        e.durable_one(&k, &v);
        lat_us.push(t1.elapsed().as_secs_f64() * 1e6);
    }
    let one = t.elapsed().as_secs_f64();
    lap(&mut cpu);
    lat_us.sort_by(f64::total_cmp);
    let p99_us = lat_us[lat_us.len() * 99 / 100];
    let t = Instant::now();
    for _ in 0..opts.batches {
        let b: Vec<_> = (0..BATCH).map(|_| gen.entry()).collect();
        e.batch(&b);
    }
    let batch = t.elapsed().as_secs_f64();
    lap(&mut cpu);
    let t = Instant::now();
    let mut found = 0;
    for _ in 0..n {
        found += e.get(&es[rng.random_range(0..n)].0) as usize;
    }
    let reads = t.elapsed().as_secs_f64();
    lap(&mut cpu);
    assert_eq!(found, n);
    e.settle();
    let size = e.file_bytes();
    let t = Instant::now();
    let ks: Vec<Vec<u8>> = es.iter().take(n / 2).map(|(k, _)| k.clone()).collect();
    e.remove_all(&ks);
    let removals = t.elapsed().as_secs_f64();
    lap(&mut cpu);
    let deferred = e.finish_deferred();
    if json {
        // One line per run, for bench/kvcompare/medians.py.
        println!(
            "{{\"engine\":\"{}\",\"entries\":{n},\"value_bytes\":{},\"keys\":\"{}\",\"bulk_s\":{bulk},\"durable_s\":{one},\"durable_p99_us\":{p99_us},\"batches_s\":{batch},\"reads_s\":{reads},\"removals_s\":{removals},\"file_mb\":{},\"cpu_s\":{{\"bulk\":{},\"durable\":{},\"batches\":{},\"reads\":{},\"removals\":{}}},\"deferred\":{}}}",
            e.name(),
            opts.value_bytes,
            if opts.sequential { "sequential" } else { "random" },
            size as f64 / 1e6,
            cpu[0],
            cpu[1],
            cpu[2],
            cpu[3],
            cpu[4],
            deferred.map_or("null".to_string(), |(b, s)| format!("{{\"bytes\":{b},\"s\":{s}}}"))
        );
        return;
    }
    println!(
        "{:<20} bulk {bulk:>6.2} s | {INDIVIDUAL} durable writes {one:>6.2} s, p99 {p99_us:>7.0} µs | {}x{BATCH} batches {batch:>6.2} s | {n} reads {reads:>6.2} s | removals {removals:>6.2} s | file {:>6.1} MB",
        e.name(),
        opts.batches,
        size as f64 / 1e6
    );
    println!(
        "  (CPU seconds: bulk {:.2}, durable {:.2}, batches {:.2}, reads {:.2}, removals {:.2})",
        cpu[0], cpu[1], cpu[2], cpu[3], cpu[4]
    );
    if let Some((b, s)) = deferred {
        println!(
            "  (deferred changes after the last phase: {:.1} MB, made to the nodes afterwards in {s:.2} s)",
            b as f64 / 1e6
        );
    }
    let notes = e.notes();
    if !notes.is_empty() {
        println!("{notes}");
    }
}

/// Command-line options besides the three positional arguments.
struct Options {
    /// The cache of the engines that keep their own (AS, redb, fjall's block cache): None =
    /// each one's default.
    cache_bytes: Option<usize>,
    /// One JSON object per engine run instead of the text line.
    json: bool,
    /// `--value-bytes N`: the values' size (default 150, redb's benchmark's).
    value_bytes: usize,
    /// `--keys sequential`: keys in ascending order (default random).
    sequential: bool,
    /// `--batches N`: batches of the batch phase (default BATCHES; more to profile it).
    batches: usize,
}

fn main() {
    let mut positional = Vec::new();
    let mut opts = Options {
        cache_bytes: None,
        json: false,
        value_bytes: 150,
        sequential: false,
        batches: BATCHES,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--cache-bytes" => {
                let v = args.next().unwrap_or_default();
                opts.cache_bytes = Some(v.parse().unwrap_or_else(|_| {
                    eprintln!("--cache-bytes wants a number of bytes, not {v:?}");
                    std::process::exit(2)
                }));
            }
            "--json" => opts.json = true,
            "--value-bytes" => {
                let v = args.next().unwrap_or_default();
                opts.value_bytes = match v.parse() {
                    Ok(b) if b <= 1 << 20 => b,
                    _ => {
                        eprintln!("--value-bytes wants a number of bytes up to 1 MiB, not {v:?}");
                        std::process::exit(2)
                    }
                };
            }
            "--keys" => {
                let v = args.next().unwrap_or_default();
                opts.sequential = match v.as_str() {
                    "random" => false,
                    "sequential" => true,
                    _ => {
                        eprintln!("--keys wants random or sequential, not {v:?}");
                        std::process::exit(2)
                    }
                };
            }
            "--batches" => {
                let v = args.next().unwrap_or_default();
                opts.batches = v.parse().unwrap_or_else(|_| {
                    eprintln!("--batches wants a number of batches, not {v:?}");
                    std::process::exit(2)
                });
            }
            _ if a.starts_with("--") => {
                eprintln!("unknown option {a} (known: --cache-bytes BYTES, --json, --value-bytes N, --keys random|sequential, --batches N)");
                std::process::exit(2)
            }
            _ => positional.push(a),
        }
    }
    let mut positional = positional.into_iter();
    let n: usize = positional
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let dir = PathBuf::from(
        positional
            .next()
            .unwrap_or_else(|| "/tmp/flashlab-kvcompare".into()),
    );
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Optional third argument: a comma-separated subset of
    // as (both AS runs),as-logical,as-nodes,as-logical-fixed,redb,lmdb,sled,fjall.
    let only: Vec<String> = positional
        .next()
        .map(|a| a.split(',').map(String::from).collect())
        .unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let as_cache = opts.cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES);
    if wanted("as") || wanted("as-logical") {
        run(
            &mut As::open(&dir.join("as-logical"), true, true, as_cache),
            n,
            &opts,
        );
    }
    if wanted("as-logical-fixed") {
        run(
            &mut As::open(&dir.join("as-logical-fixed"), true, false, as_cache),
            n,
            &opts,
        );
    }
    if wanted("as") || wanted("as-nodes") {
        run(
            &mut As::open(&dir.join("as-nodes"), false, true, as_cache),
            n,
            &opts,
        );
    }
    if wanted("redb") {
        let p = dir.join("redb.db");
        let mut b = redb::Database::builder();
        if let Some(c) = opts.cache_bytes {
            b.set_cache_size(c);
        }
        run(&mut Redb(b.create(&p).unwrap(), p), n, &opts);
    }
    if wanted("lmdb") {
        run(&mut Lmdb::open(&dir.join("lmdb")), n, &opts);
    }
    if wanted("sled") {
        let p = dir.join("sled");
        run(&mut Sled(sled::open(&p).unwrap(), p.clone()), n, &opts);
    }
    if wanted("fjall") {
        run(
            &mut Fjall::open(&dir.join("fjall"), opts.cache_bytes),
            n,
            &opts,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
