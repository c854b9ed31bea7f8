//! `flashlab kv`: the ForestDB-like store under the update workload of paper 003 —
//! documents loaded into several databases, then one writer thread per database updating
//! them in write batches — on RAM or real files, with throughput, commits, bytes written
//! and what compaction did.

use crate::backend::Backend;
use astree::segments::{FileSegments, MemSegments, Segments, SharedSimSegments};
use kv::ycsb::{self, UpdateSpec};
use kv::{Db, KvConfig};
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct KvSpec {
    pub update: UpdateSpec,
    pub cfg: KvConfig,
    pub backend: Backend,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct KvResult {
    pub backend: String,
    pub dbs: usize,
    pub docs: u64,
    pub doc_bytes: usize,
    pub ops: u64,
    pub batch: u64,
    pub pattern: String,
    pub seed: u64,
    pub load_s: f64,
    pub update_s: f64,
    pub ops_per_s: f64,
    pub commits: u64,
    /// During the updates: bytes and requests written, syncs.
    pub bytes_written: u64,
    pub write_requests: u64,
    pub syncs: u64,
    /// Real files: zeros written ahead of the log's end during the updates
    /// (`astree::segments::Segments::zero_fill_ahead_bytes`), beside `bytes_written`.
    pub bytes_zero_filled: u64,
    /// After the run.
    pub file_bytes: u64,
    pub segments_cleaned: u64,
    pub nodes_moved: u64,
    pub segments_removed: u64,
    /// CLOCK_MONOTONIC at the start and end of the updates (to find them in a captured
    /// trace), ns.
    pub update_start_mono_ns: u64,
    pub update_end_mono_ns: u64,
    /// Simulated SSD: the drive's wear report at the end of the run (since the drive was
    /// new: the load and the updates); None on RAM, real files, a disk or a drive without
    /// a rated endurance. Not serialized; `kv --wear` prints it.
    #[serde(skip)]
    pub wear: Option<flash::WearReport>,
}

/// CLOCK_MONOTONIC in ns (the clock `flashlab capture` stamps requests with).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn measure<S: Segments + Send + 'static>(
    mut dbs: Vec<Db<S>>,
    spec: &KvSpec,
    out: &mut KvResult,
) -> Result<(), crate::LabError> {
    let e = |e: astree::TreeError| e.to_string();
    let t = std::time::Instant::now();
    ycsb::load(&mut dbs, &spec.update).map_err(e)?;
    out.load_s = t.elapsed().as_secs_f64();
    let before: Vec<_> = dbs.iter().map(|d| d.stats()).collect();
    let t = std::time::Instant::now();
    out.update_start_mono_ns = monotonic_ns();
    let (dbs, writers) = ycsb::run_concurrent(dbs, &spec.update).map_err(e)?;
    out.update_end_mono_ns = monotonic_ns();
    out.update_s = t.elapsed().as_secs_f64();
    finish(&dbs, &before, &writers, spec, out);
    Ok(())
}

/// Throughput, commits and what the databases wrote and cleaned during the updates.
fn finish<S: Segments>(
    dbs: &[Db<S>],
    before: &[astree::store::StoreStats],
    writers: &[ycsb::WriterResult],
    spec: &KvSpec,
    out: &mut KvResult,
) {
    out.ops_per_s = spec.update.ops as f64 / out.update_s.max(1e-9);
    out.commits = writers.iter().map(|w| w.commits).sum();
    for (db, b) in dbs.iter().zip(before) {
        let a = db.stats();
        out.bytes_written += a.bytes_written - b.bytes_written;
        out.write_requests += a.write_requests - b.write_requests;
        out.bytes_zero_filled += a.bytes_zero_filled - b.bytes_zero_filled;
        out.syncs += a.syncs - b.syncs;
        out.file_bytes += db.file_bytes();
        out.segments_cleaned += a.segments_cleaned;
        out.nodes_moved += a.nodes_moved;
        out.segments_removed += a.segments_removed;
    }
}

pub fn run(spec: &KvSpec) -> Result<KvResult, crate::LabError> {
    Ok(run_recorded(spec, None)?.0)
}

/// [`run`], the simulated drive's whole run (load and updates) recorded over virtual time
/// in intervals of `timeline_ns` when given (`--timeseries`).
pub fn run_recorded(
    spec: &KvSpec,
    timeline: Option<crate::backend::TimelineSpec>,
) -> Result<(KvResult, Option<flash::timeline::TimeSeries>), crate::LabError> {
    let mut series = None;
    spec.update.validate()?;
    let u = &spec.update;
    let mut out = KvResult {
        dbs: u.dbs,
        docs: u.docs,
        doc_bytes: u.doc_bytes,
        ops: u.ops,
        batch: u.batch,
        pattern: u.pattern.to_string(),
        seed: u.seed,
        ..Default::default()
    };
    let e = |e: astree::TreeError| e.to_string();
    match &spec.backend {
        Backend::Mem => {
            out.backend = "mem".into();
            let dbs = (0..u.dbs)
                .map(|_| Db::open(MemSegments::new(), &spec.cfg).map_err(e))
                .collect::<Result<Vec<_>, _>>()?;
            measure(dbs, spec, &mut out)?;
        }
        Backend::Os {
            dir,
            direct_io,
            cancel,
        } => {
            out.backend = format!("os:{}", dir.display());
            // The databases' files go when this drops, whatever happened.
            let private = crate::btreerun::run_dir(dir, "flashlab-kv-")?;
            let mut dbs = Vec::new();
            for d in 0..u.dbs {
                let segments = FileSegments::open(private.path(), &format!("db{d}"), *direct_io)
                    .map_err(e)?
                    .with_cancel(cancel.clone());
                dbs.push(Db::open(segments, &spec.cfg).map_err(e)?);
            }
            measure(dbs, spec, &mut out)?;
        }
        Backend::Sim { preset } => {
            out.backend = format!("sim:{}", preset.name);
            // Every database on one simulated drive (ext4-like simfs), the writers taking
            // turns a batch at a time, in virtual time.
            let mut fs = crate::backend::simulated_fs(preset, simfs::AllocPolicy::Ext4Like)?;
            crate::backend::start_timeline(&mut fs, timeline)?;
            let shared = vfs::Shared::new(vfs::SimVfs::new(fs));
            let mut dbs = Vec::new();
            for d in 0..u.dbs {
                let segments =
                    SharedSimSegments::on(shared.handle(), &format!("db{d}"), false).map_err(e)?;
                dbs.push(Db::open(segments, &spec.cfg).map_err(e)?);
            }
            let now = || vfs::Vfs::now_ns(&*shared.borrow());
            let t = now();
            ycsb::load(&mut dbs, u).map_err(e)?;
            out.load_s = (now() - t) as f64 / 1e9;
            let before: Vec<_> = dbs.iter().map(|d| d.stats()).collect();
            let t = now();
            let writers = ycsb::run_round_robin(&mut dbs, u).map_err(e)?;
            out.update_s = (now() - t) as f64 / 1e9;
            finish(&dbs, &before, &writers, spec, &mut out);
            out.wear = shared.borrow().fs().device().dev.wear_report();
            series = crate::backend::finish_timeline(shared.borrow_mut().fs_mut())?;
        }
    }
    Ok((out, series))
}
