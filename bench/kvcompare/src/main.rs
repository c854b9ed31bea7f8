//! flashlab's AS B-tree (on a real file) against redb and sled, on the shape of redb's own
//! benchmark: a bulk load of N entries (24-byte keys, 150-byte values) in one commit,
//! individual writes each made durable, batches of 1,000 writes, random point reads and
//! removals; time of each phase and the file size at the end.
//!
//!     cargo run --release --manifest-path bench/kvcompare/Cargo.toml -- [N] [DIR]

use astree::asstore::{AsConfig, AsStore};
use astree::segments::FileSegments;
use astree::store::NodeStore;
use astree::BTree;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use redb::{ReadableDatabase, TableDefinition};
use std::path::{Path, PathBuf};
use std::time::Instant;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");
const INDIVIDUAL: usize = 1_000;
const BATCHES: usize = 20;
const BATCH: usize = 1_000;

fn entry(rng: &mut Xoshiro256PlusPlus) -> (Vec<u8>, Vec<u8>) {
    let mut k = vec![0u8; 24];
    let mut v = vec![0u8; 150];
    rng.fill(&mut k[..]);
    rng.fill(&mut v[..]);
    (k, v)
}

trait Engine {
    fn name(&self) -> &'static str;
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]);
    fn durable_one(&mut self, k: &[u8], v: &[u8]);
    fn batch(&mut self, es: &[(Vec<u8>, Vec<u8>)]);
    fn get(&mut self, k: &[u8]) -> bool;
    fn remove_all(&mut self, ks: &[Vec<u8>]);
    fn file_bytes(&self) -> u64;
}

struct As(BTree<AsStore<FileSegments>>);
impl Engine for As {
    fn name(&self) -> &'static str {
        "flashlab AS B-tree"
    }
    fn bulk(&mut self, es: &[(Vec<u8>, Vec<u8>)]) {
        for (k, v) in es {
            self.0.insert(k, v).unwrap();
        }
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
        self.0.get(k).unwrap().is_some()
    }
    fn remove_all(&mut self, ks: &[Vec<u8>]) {
        for k in ks {
            self.0.remove(k).unwrap();
        }
        self.0.sync().unwrap();
    }
    fn file_bytes(&self) -> u64 {
        self.0.store().file_bytes()
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

fn run(e: &mut dyn Engine, n: usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let es: Vec<_> = (0..n).map(|_| entry(&mut rng)).collect();
    let t = Instant::now();
    e.bulk(&es);
    let bulk = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..INDIVIDUAL {
        let (k, v) = entry(&mut rng);
        e.durable_one(&k, &v);
    }
    let one = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..BATCHES {
        let b: Vec<_> = (0..BATCH).map(|_| entry(&mut rng)).collect();
        e.batch(&b);
    }
    let batch = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut found = 0;
    for _ in 0..n {
        found += e.get(&es[rng.random_range(0..n)].0) as usize;
    }
    let reads = t.elapsed().as_secs_f64();
    assert_eq!(found, n);
    let size = e.file_bytes();
    let t = Instant::now();
    let ks: Vec<Vec<u8>> = es.iter().take(n / 2).map(|(k, _)| k.clone()).collect();
    e.remove_all(&ks);
    let removals = t.elapsed().as_secs_f64();
    println!(
        "{:<20} bulk {bulk:>7.2} s   {INDIVIDUAL} durable writes {one:>7.2} s   {BATCHES}x{BATCH} batches {batch:>6.2} s   {n} reads {reads:>6.2} s   removals {removals:>6.2} s   file {:.1} MB",
        e.name(),
        size as f64 / 1e6
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "/tmp/flashlab-kvcompare".into()),
    );
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // 4 MiB segments: the data set is tens of MB, so cleaning has room to work.
    let cfg = AsConfig {
        segment_bytes: 4 << 20,
        ..AsConfig::new(8192, 32)
    };
    let store = AsStore::open_with(FileSegments::open(&dir, "as", false).unwrap(), cfg).unwrap();
    run(&mut As(BTree::new(store, 64).unwrap()), n);
    let p = dir.join("redb.db");
    run(&mut Redb(redb::Database::create(&p).unwrap(), p), n);
    let p = dir.join("sled");
    run(&mut Sled(sled::open(&p).unwrap(), p.clone()), n);
    let _ = std::fs::remove_dir_all(&dir);
}
