//! The update workload of ForestDB-Benchmark (paper 003), YCSB F style: documents spread
//! over several databases, one writer per database; each update picks a key (uniformly or
//! by Zipf), reads its document, changes one field and writes it back; every `batch`
//! updates a writer commits (write batch size).

use crate::Db;
use astree::segments::Segments;
use astree::TreeError;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use workloads::synthetic::{Pattern, SlotGen};

/// Bytes of the field an update rewrites.
pub const FIELD_BYTES: usize = 100;

#[derive(Debug, Clone)]
pub struct UpdateSpec {
    /// Documents over all databases.
    pub docs: u64,
    pub doc_bytes: usize,
    /// Updates over all databases.
    pub ops: u64,
    /// Updates per commit.
    pub batch: u64,
    pub dbs: usize,
    /// Key choice within a database.
    pub pattern: Pattern,
    pub seed: u64,
}

impl UpdateSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.dbs == 0 || self.batch == 0 {
            return Err("--dbs and --batch must be at least 1".into());
        }
        if self.docs < self.dbs as u64 {
            return Err(format!(
                "{} documents cannot fill {} databases",
                self.docs, self.dbs
            ));
        }
        if self.doc_bytes < FIELD_BYTES {
            return Err(format!(
                "documents of {} bytes are smaller than the {FIELD_BYTES}-byte field an update rewrites",
                self.doc_bytes
            ));
        }
        Ok(())
    }

    /// Documents in database `d`.
    fn docs_in(&self, d: usize) -> u64 {
        let n = self.dbs as u64;
        self.docs / n + ((d as u64) < self.docs % n) as u64
    }
}

/// The key of document `i` (16 bytes, in key order).
pub fn key(i: u64) -> Vec<u8> {
    format!("user{i:012}").into_bytes()
}

fn fill(rng: &mut Xoshiro256PlusPlus, out: &mut [u8]) {
    for b in out {
        *b = b'a' + rng.random_range(0..26u8);
    }
}

/// Loads the documents: database `d` holds the keys `i` with `i % dbs == d`; a commit
/// every 1,000 documents.
pub fn load<S: Segments>(dbs: &mut [Db<S>], spec: &UpdateSpec) -> Result<(), TreeError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut doc = vec![0u8; spec.doc_bytes];
    for i in 0..spec.docs {
        let db = &mut dbs[(i % spec.dbs as u64) as usize];
        fill(&mut rng, &mut doc);
        db.update(&key(i), &doc)?;
        if db.uncommitted() >= 1_000 {
            db.commit()?;
        }
    }
    for db in dbs.iter_mut() {
        db.commit()?;
    }
    Ok(())
}

/// What one writer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterResult {
    pub updates: u64,
    pub commits: u64,
}

/// One writer: its share of the updates on database `d`, run a batch at a time.
pub struct Writer {
    d: usize,
    dbs: u64,
    batch: u64,
    left: u64,
    keys: SlotGen,
    rng: Xoshiro256PlusPlus,
    result: WriterResult,
}

impl Writer {
    pub fn new(d: usize, spec: &UpdateSpec) -> Result<Self, TreeError> {
        let n = spec.dbs as u64;
        let updates = spec.ops / n + ((d as u64) < spec.ops % n) as u64;
        let keys = SlotGen::new(
            spec.pattern,
            spec.docs_in(d),
            spec.seed ^ (0xD1B5 + d as u64),
        )
        .map_err(TreeError::Config)?;
        Ok(Writer {
            d,
            dbs: n,
            batch: spec.batch,
            left: updates,
            keys,
            rng: Xoshiro256PlusPlus::seed_from_u64(spec.seed.wrapping_add(d as u64 + 1)),
            result: WriterResult::default(),
        })
    }

    /// Runs one batch (read, change a field, write back; then commit); false when done.
    pub fn step<S: Segments>(&mut self, db: &mut Db<S>) -> Result<bool, TreeError> {
        if self.left == 0 {
            return Ok(false);
        }
        let n = self.left.min(self.batch);
        for _ in 0..n {
            let k = key(self.keys.next_slot() * self.dbs + self.d as u64);
            let mut doc = db.get(&k)?.ok_or_else(|| {
                TreeError::Config(format!(
                    "document {} is missing: load the databases first",
                    String::from_utf8_lossy(&k)
                ))
            })?;
            let field = self.rng.random_range(0..doc.len() / FIELD_BYTES);
            fill(
                &mut self.rng,
                &mut doc[field * FIELD_BYTES..(field + 1) * FIELD_BYTES],
            );
            db.update(&k, &doc)?;
        }
        db.commit()?;
        self.left -= n;
        self.result.updates += n;
        self.result.commits += 1;
        Ok(self.left > 0)
    }

    pub fn result(&self) -> WriterResult {
        self.result.clone()
    }
}

/// Runs one writer's share of the updates on database `d`.
pub fn run_writer<S: Segments>(
    db: &mut Db<S>,
    d: usize,
    spec: &UpdateSpec,
) -> Result<WriterResult, TreeError> {
    let mut w = Writer::new(d, spec)?;
    while w.step(db)? {}
    Ok(w.result())
}

/// Runs the writers in one thread, a batch each in turn (for databases that share one
/// simulated drive, whose virtual time then orders their requests).
pub fn run_round_robin<S: Segments>(
    dbs: &mut [Db<S>],
    spec: &UpdateSpec,
) -> Result<Vec<WriterResult>, TreeError> {
    let mut writers = (0..dbs.len())
        .map(|d| Writer::new(d, spec))
        .collect::<Result<Vec<_>, _>>()?;
    let mut busy = true;
    while busy {
        busy = false;
        for (w, db) in writers.iter_mut().zip(dbs.iter_mut()) {
            busy |= w.step(db)?;
        }
    }
    Ok(writers.iter().map(Writer::result).collect())
}

/// Runs every writer in its own thread (the databases move in and come back).
pub fn run_concurrent<S: Segments + Send + 'static>(
    dbs: Vec<Db<S>>,
    spec: &UpdateSpec,
) -> Result<(Vec<Db<S>>, Vec<WriterResult>), TreeError> {
    let handles: Vec<_> = dbs
        .into_iter()
        .enumerate()
        .map(|(d, mut db)| {
            let spec = spec.clone();
            std::thread::spawn(move || {
                let r = run_writer(&mut db, d, &spec);
                (db, r)
            })
        })
        .collect();
    let mut out_dbs = Vec::new();
    let mut results = Vec::new();
    let mut first_err = None;
    for h in handles {
        let (db, r) = h.join().expect("a writer thread panicked");
        out_dbs.push(db);
        match r {
            Ok(r) => results.push(r),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((out_dbs, results)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KvConfig;
    use astree::segments::MemSegments;

    fn spec(batch: u64) -> UpdateSpec {
        UpdateSpec {
            docs: 2_000,
            doc_bytes: 1_000,
            ops: 4_000,
            batch,
            dbs: 4,
            pattern: Pattern::Uniform,
            seed: 3,
        }
    }

    #[test]
    fn updates_change_one_field_and_commit_every_batch() {
        let cfg = KvConfig::default();
        let s = spec(16);
        let mut dbs: Vec<_> = (0..4)
            .map(|_| Db::open(MemSegments::new(), &cfg).unwrap())
            .collect();
        load(&mut dbs, &s).unwrap();
        let before: Vec<_> = dbs.iter_mut().map(|d| d.scan().unwrap()).collect();
        let (mut dbs, res) = run_concurrent(dbs, &s).unwrap();
        assert_eq!(res.iter().map(|r| r.updates).sum::<u64>(), 4_000);
        // 1,000 updates per writer in batches of 16: 63 commits each.
        assert!(res.iter().all(|r| r.commits == 63), "{res:?}");
        for (d, db) in dbs.iter_mut().enumerate() {
            let after = db.scan().unwrap();
            assert_eq!(after.len(), 500);
            let changed = after
                .iter()
                .zip(&before[d])
                .filter(|(a, b)| a.1 != b.1)
                .count();
            assert!(changed > 300, "most documents were updated ({changed})");
            // Each update rewrites one field: no more fields differ than updates ran.
            let mut fields_changed = 0;
            for ((ka, a), (kb, b)) in after.iter().zip(&before[d]) {
                assert_eq!(ka, kb);
                assert_eq!(a.len(), b.len());
                fields_changed += a
                    .chunks(FIELD_BYTES)
                    .zip(b.chunks(FIELD_BYTES))
                    .filter(|(x, y)| x != y)
                    .count();
            }
            assert!(fields_changed <= 1_000, "{fields_changed} fields changed");
        }
    }

    #[test]
    fn bad_specs_are_clear_errors() {
        let mut s = spec(1);
        s.doc_bytes = 10;
        assert!(s.validate().unwrap_err().contains("100-byte field"));
        s = spec(0);
        assert!(s.validate().is_err());
    }
}
