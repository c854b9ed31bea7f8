//! `flashlab join`: the hash join of ORDERS and LINEITEM on a chosen backend, repeated,
//! with per-repetition and per-phase times. The experiments of papers 000 and 001 call it.

use crate::backend::Backend;
use flash::Device;
use hashjoin::store::{FileId, OsStore, Store, VfsStore};
use hashjoin::{
    parallel_hash_join, planned_threads, Input, JoinError, JoinResult, JoinSpec, MemoryPool,
    Relation,
};
use serde::Serialize;
use simfs::{AllocPolicy, DiscardMode, FsConfig};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use vfs::{OpenMode, Vfs};
use workloads::tpch::{self, Layout, Table};

/// The join's own storage settings, beside the backend.
#[derive(Debug, Clone)]
pub struct JoinStorage {
    /// os: where the input tables are generated and kept (None: the spill directory).
    pub data_dir: Option<PathBuf>,
    /// os: most bytes the run's spill files may hold.
    pub spill_cap_bytes: Option<u64>,
    /// sim: simfs's size (None: 90% of the drive).
    pub fs_bytes: Option<u64>,
    pub alloc: AllocPolicy,
    pub discard: DiscardMode,
    /// sim, journal discard: which Linux kernel's ext4 online discard to follow
    /// ([`simfs::DiscardKernel`]). A repetition that ends with a commit ends when its
    /// discards are done (as a file system left to settle).
    pub kernel: simfs::DiscardKernel,
    /// sim: simfs's device reports itself rotational to the file system (ext4 allocates
    /// differently on one: [`simfs::FsConfig::rotational`]); off for an SSD.
    pub rotational: bool,
    /// sim: every repetition ends with a journal commit (as a run ends with `sync`); off,
    /// only the last one does (the repetitions of one real run of the join).
    pub commit_each_repetition: bool,
    /// sim: simfs's mballoc-style preallocation (as ext4 gives buffered and O_DIRECT
    /// appends) or none.
    pub prealloc: bool,
    /// sim: the input tables on the drive (timed) or off it.
    pub inputs_on_device: bool,
    /// sim, inputs off the drive: their rows generated as they are read instead of held
    /// in memory (the same bytes; for tables larger than memory, e.g. paper 000's 40 GB).
    pub stream_inputs: bool,
    /// sim: the host path the spill files go through.
    pub host: vfs::HostConfig,
    /// sim, one user on one thread: the repetitions after the first replay its storage
    /// calls instead of computing the join again (`hashjoin::recorded`; the same simulated
    /// numbers, checked by a test). Off: the join runs every time.
    pub replay_repetitions: bool,
    /// sim: stop repeating once the drive has taken this many host bytes since measuring
    /// started (the `lifetime` experiment runs every combination to the same bytes);
    /// `repeat` is then the most repetitions. None: `repeat` repetitions.
    pub host_write_target_bytes: Option<u64>,
    /// sim: the drive is preconditioned before simfs is made on it (its whole logical
    /// space; [`crate::precondition`]), as a used drive. None: a new drive.
    pub precondition: crate::precondition::Precondition,
    /// sim: the seed of preconditioning's random writes.
    pub precondition_seed: u64,
    /// Simulated drive only: record the measured repetitions over virtual time
    /// (`--timeseries`, `--request-log`); the figures land in [`JoinRunResult::timeseries`].
    pub timeline: Option<crate::backend::TimelineSpec>,
}

impl Default for JoinStorage {
    /// No cap, simfs ext4-like on 90% of the drive without discards or preallocation,
    /// inputs off the drive, every call reaching the drive when made.
    fn default() -> Self {
        JoinStorage {
            data_dir: None,
            spill_cap_bytes: None,
            fs_bytes: None,
            alloc: AllocPolicy::Ext4Like,
            discard: DiscardMode::None,
            kernel: simfs::DiscardKernel::Linux3_10,
            rotational: false,
            commit_each_repetition: true,
            prealloc: false,
            inputs_on_device: false,
            stream_inputs: false,
            host: vfs::HostConfig::uncached(),
            replay_repetitions: true,
            host_write_target_bytes: None,
            precondition: crate::precondition::Precondition::None,
            precondition_seed: 0,
            timeline: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct JoinRunSpec {
    pub sf: f64,
    pub layout: Layout,
    pub memory_bytes: u64,
    pub join: JoinSpec,
    pub users: u32,
    /// Threads per user's join (1: the serial join).
    pub threads: u32,
    /// Simulated host: its CPU cores, shared by every user's threads (None: a core for
    /// each, so computation never waits for one). See `vfs::Turns::on_cores`.
    pub host_cores: Option<u32>,
    /// Simulated host: how its block layer orders the users' requests to the drive.
    pub io_scheduler: vfs::IoScheduler,
    pub repeat: u32,
    pub backend: Backend,
    pub storage: JoinStorage,
}

/// One repetition.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Repetition {
    pub total_ns: u64,
    pub partition_ns: u64,
    pub join_ns: u64,
    pub trim_commands: u64,
    pub trim_ranges: u64,
    /// Bytes the TRIM commands covered.
    pub trim_bytes: u64,
    /// Simulated drive only: the TRIMs' work in the drive (command and mapping work).
    pub trim_busy_ns: u64,
    /// Simulated drive only: time TRIMs waited for earlier TRIMs' settling work (bursts).
    pub trim_settle_wait_ns: u64,
    /// Simulated drive only: time reads, writes and flushes waited for TRIMs' settling work
    /// (summed over commands).
    pub io_settle_wait_ns: u64,
    /// Simulated drive only: flash/host pages written during this repetition.
    pub waf: Option<f64>,
    pub host_write_pages: u64,
    pub flash_write_pages: u64,
    /// Of `flash_write_pages`: host pages' programs (direct, or folds out of SLC), GC's
    /// copies, and host pages programmed in SLC mode (`flash::DeviceStats`).
    pub host_program_pages: u64,
    pub gc_copied_pages: u64,
    pub slc_program_pages: u64,
    /// Bytes of host writes the drive's SLC cache took (0 without one).
    pub slc_write_bytes: u64,
    pub host_write_bytes: u64,
    /// Simulated file system only: extents its deletes freed, each cut at block-group
    /// boundaries (`simfs::FsStats::freed_extents`, as ext4's `ext4_mballoc_free` events
    /// count them).
    pub freed_extents: u64,
    /// Simulated drive only: the drive's logical space holding data at the repetition's
    /// end (`flash::DeviceStats::mapped_bytes`): without TRIM, every address ever written.
    pub mapped_bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct JoinRunResult {
    pub sf: f64,
    pub layout: String,
    pub algorithm: String,
    pub backend: String,
    pub memory_bytes: u64,
    pub users: u32,
    /// Threads each join ran on (fewer than asked when the budget or the data call for
    /// it; 1 when the build side fits in memory).
    pub threads: u32,
    /// PostgreSQL's join: batches planned before it ran, and how often their number
    /// doubled at run time (`partitions` is the count at the end); 0 for the others.
    pub initial_batches: u32,
    pub nbatch_doublings: u32,
    pub rows: u64,
    pub sum_l_extendedprice_cents: i64,
    pub sum_o_totalprice_cents: i64,
    pub input_bytes: u64,
    pub bytes_spilled: u64,
    pub bytes_read_back: u64,
    /// Bytes spilled / input bytes (1.0 = grace optimum, 0 = no spill).
    pub spill_ratio: f64,
    pub spill_files: u64,
    pub partitions: u32,
    pub resident_partitions: u32,
    pub repartitioned_pairs: u32,
    pub nested_loop_pairs: u32,
    /// The memory pool's highest use. With several threads their reservations overlap as
    /// the machine schedules them, so on a simulated drive this one number may differ a
    /// little between runs; the budget bounds it always.
    pub peak_memory_bytes: u64,
    pub stale_spill_files_removed: u64,
    pub repetitions: Vec<Repetition>,
    /// Repetitions that replayed the first one's storage calls (see
    /// [`JoinStorage::replay_repetitions`]); not in the output, whose numbers it does not
    /// change.
    #[serde(skip)]
    pub replayed_repetitions: u32,
    /// Simulated SSD: the drive's wear report at the end of the run (host and flash bytes
    /// since measuring started, erase counts since new); None on real files, a disk or a
    /// drive without a rated endurance. Not in the serialized result (which experiments
    /// keep as they were); `join --wear` prints it.
    #[serde(skip)]
    pub wear: Option<flash::WearReport>,
    /// The same when measuring started (after preconditioning and simfs's mkfs): erase
    /// counts the run started from.
    #[serde(skip)]
    pub wear_at_start: Option<flash::WearReport>,
    /// The measured repetitions over virtual time (with `JoinStorage::timeline_ns`).
    #[serde(skip)]
    pub timeseries: Option<flash::timeline::TimeSeries>,
}

/// Runs `f(user)` for every user in its own thread; results in user order.
fn for_each_user<T: Send>(
    users: u32,
    f: impl Fn(usize) -> Result<T, crate::LabError> + Sync,
) -> Vec<Result<T, crate::LabError>> {
    let token = trace::cancel::current();
    std::thread::scope(|s| {
        let (f, token) = (&f, &token);
        let handles: Vec<_> = (0..users as usize)
            .map(|u| s.spawn(move || trace::cancel::with_current(token.as_ref(), || f(u))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a join thread panicked".into()))
            })
            .collect()
    })
}

/// Encoded table bytes, generated once per (table, sf, layout) in this process: threads
/// asking for the same table at once wait for the one generating it.
pub fn table_data(table: Table, sf: f64, layout: Layout) -> Arc<Vec<u8>> {
    type Slot = Arc<OnceLock<Arc<Vec<u8>>>>;
    type Cache = Mutex<HashMap<(Table, u64, Layout), Slot>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let slot = CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .expect("not poisoned")
        .entry((table, sf.to_bits(), layout))
        .or_default()
        .clone();
    slot.get_or_init(|| {
        let rb = layout.record_bytes();
        let mut v = Vec::new();
        let mut buf = vec![0u8; rb];
        for r in tpch::rows(table, sf) {
            r.encode(layout, &mut buf);
            v.extend_from_slice(&buf);
        }
        Arc::new(v)
    })
    .clone()
}

/// The number of rows of `table` at `sf` ([`tpch::row_count`], cached).
pub fn table_rows(table: Table, sf: f64) -> u64 {
    type Cache = Mutex<HashMap<(Table, u64), Arc<OnceLock<u64>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let slot = CACHE
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .expect("not poisoned")
        .entry((table, sf.to_bits()))
        .or_default()
        .clone();
    *slot.get_or_init(|| tpch::row_count(table, sf))
}

/// A table read as its rows are generated: the bytes of [`table_data`] without holding
/// them. Reads in order cost one row's generation per row; a read behind the last one
/// starts the generator again.
pub struct GeneratedTable {
    table: Table,
    sf: f64,
    layout: Layout,
    rows: u64,
    rows_iter: Box<dyn Iterator<Item = tpch::Record> + Send>,
    /// The index of the row `rows_iter` gives next.
    next_row: u64,
    /// The last row made: its index and bytes.
    last: Option<u64>,
    last_bytes: Vec<u8>,
}

impl GeneratedTable {
    pub fn new(table: Table, sf: f64, layout: Layout) -> GeneratedTable {
        GeneratedTable {
            table,
            sf,
            layout,
            rows: table_rows(table, sf),
            rows_iter: tpch::rows(table, sf),
            next_row: 0,
            last: None,
            last_bytes: vec![0; layout.record_bytes()],
        }
    }

    /// Makes row `row` the last one made.
    fn seek_row(&mut self, row: u64) {
        if self.last == Some(row) {
            return;
        }
        if row < self.next_row {
            self.rows_iter = tpch::rows(self.table, self.sf);
            self.next_row = 0;
        }
        while self.next_row < row {
            self.rows_iter.next();
            self.next_row += 1;
        }
        let r = self
            .rows_iter
            .next()
            .expect("a row within the counted rows");
        self.next_row += 1;
        r.encode(self.layout, &mut self.last_bytes);
        self.last = Some(row);
    }
}

impl vfs::FileSource for GeneratedTable {
    fn len_bytes(&self) -> u64 {
        self.rows * self.layout.record_bytes() as u64
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> usize {
        let rb = self.layout.record_bytes() as u64;
        let n = (buf.len() as u64).min(self.len_bytes().saturating_sub(offset)) as usize;
        let mut filled = 0;
        while filled < n {
            let at = offset + filled as u64;
            self.seek_row(at / rb);
            let skip = (at % rb) as usize;
            let take = (rb as usize - skip).min(n - filled);
            buf[filled..filled + take].copy_from_slice(&self.last_bytes[skip..skip + take]);
            filled += take;
        }
        n
    }
}

/// Generates the table file in `dir` unless a valid one is there; returns path and header.
/// Runs sharing `dir` take turns (an exclusive lock on a lock file beside the table), so
/// one generates while the others wait and then use its file; the file appears whole, by
/// rename, and is validated (header and size) before use.
pub fn ensure_table_file(
    dir: &Path,
    table: Table,
    sf: f64,
    layout: Layout,
) -> Result<(PathBuf, tpch::Header), crate::LabError> {
    let path = dir.join(format!("tpch-sf{sf}-{layout}-{}.tbl", table.name()));
    let lock_path = dir.join(format!(".tpch-sf{sf}-{layout}-{}.lock", table.name()));
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    // SAFETY: flock on a descriptor held open until the end of this function.
    if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("{}: {e}", lock_path.display()).into());
    }
    if let Ok(h) = tpch::read_header(&path) {
        if h.table == table && h.layout == layout && h.sf == sf {
            return Ok((path, h));
        }
    }
    // Under the lock no one else writes this table: a temporary file of it is a killed
    // run's (write_table names them `.<file name>.<random>.tmp`).
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    if let (Some(name), Ok(entries)) = (file_name, std::fs::read_dir(dir)) {
        let stale = format!(".{name}.");
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&stale) && n.ends_with(".tmp") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let h = tpch::write_table(&path, table, sf, layout)?;
    Ok((path, h))
}

fn merge(total: &mut JoinRunResult, r: &JoinResult) {
    total.rows += r.rows;
    total.sum_l_extendedprice_cents += r.sum_l_extendedprice_cents;
    total.sum_o_totalprice_cents += r.sum_o_totalprice_cents;
    total.input_bytes += r.input_bytes;
    total.bytes_spilled += r.bytes_spilled;
    total.bytes_read_back += r.bytes_read_back;
    total.spill_files += r.spill_files;
    total.partitions = total.partitions.max(r.partitions);
    total.resident_partitions = total.resident_partitions.max(r.resident_partitions);
    total.repartitioned_pairs += r.repartitioned_pairs;
    total.nested_loop_pairs += r.nested_loop_pairs;
    total.threads = total.threads.max(r.threads);
    total.initial_batches = total.initial_batches.max(r.initial_batches);
    total.nbatch_doublings += r.nbatch_doublings;
}

fn validate(spec: &JoinRunSpec) -> Result<(), crate::LabError> {
    if !(spec.sf > 0.0 && spec.sf.is_finite()) {
        return Err(format!("--sf {} must be positive", spec.sf).into());
    }
    // Order keys reach about 6,000,000 × SF; fixed128 records hold 4-byte keys.
    if spec.sf * 6_000_000.0 > u32::MAX as f64 && spec.layout == Layout::Fixed128 {
        return Err("fixed128 records hold 4-byte keys: the scale factor is too large".into());
    }
    if spec.users == 0 || spec.repeat == 0 || spec.threads == 0 {
        return Err("--users, --threads and --repeat must be at least 1".into());
    }
    if spec.threads as usize > hashjoin::MAX_THREADS {
        return Err(format!(
            "--threads {}: a join runs on at most {} threads",
            spec.threads,
            hashjoin::MAX_THREADS
        )
        .into());
    }
    Ok(())
}

/// What a join error says, with each user's share of the budget where several users plan.
fn join_error(spec: &JoinRunSpec) -> impl Fn(JoinError) -> String + '_ {
    move |e| match e {
        // Each of several users plans within its share of the budget: say so.
        JoinError::Memory { .. } if spec.users > 1 => format!(
            "{e} (each of the {} users has its share of --memory, {} / {} bytes)",
            spec.users, spec.memory_bytes, spec.users
        ),
        e => e.to_string(),
    }
}

/// Runs the join `spec.repeat` times with `spec.users` concurrent users per repetition.
pub fn run(
    spec: &JoinRunSpec,
    progress: &mut dyn FnMut(u32),
) -> Result<JoinRunResult, crate::LabError> {
    validate(spec)?;
    let mut out = JoinRunResult {
        sf: spec.sf,
        layout: spec.layout.to_string(),
        algorithm: format!("{:?}", spec.join.algorithm).to_lowercase(),
        memory_bytes: spec.memory_bytes,
        users: spec.users,
        threads: 1,
        ..Default::default()
    };
    let pool = MemoryPool::new(spec.memory_bytes);
    out.backend = spec.backend.label();
    match &spec.backend {
        Backend::Mem => {
            return Err(
                "the join needs files: --backend os (real files in --dir) or sim (--preset)".into(),
            )
        }
        Backend::Os {
            dir,
            direct_io,
            cancel,
        } => run_on_files(spec, dir, *direct_io, cancel, &pool, &mut out, progress)?,
        Backend::Sim { preset } => run_on_drive(spec, preset, &mut out, progress)?,
    }
    out.peak_memory_bytes = out.peak_memory_bytes.max(pool.peak_bytes());
    out.spill_ratio = if out.input_bytes > 0 {
        out.bytes_spilled as f64 / out.input_bytes as f64
    } else {
        0.0
    };
    Ok(out)
}

/// The join on real files in `dir` (and the data directory), each repetition timed by the
/// wall clock.
fn run_on_files(
    spec: &JoinRunSpec,
    dir: &PathBuf,
    direct_io: bool,
    cancel: &trace::Cancel,
    pool: &MemoryPool,
    out: &mut JoinRunResult,
    progress: &mut dyn FnMut(u32),
) -> Result<(), crate::LabError> {
    let (st, e) = (&spec.storage, &join_error(spec));
    let direct_io = &direct_io;
    let data_dir = st.data_dir.as_ref().unwrap_or(dir);
    for (what, d) in [("spill directory", dir), ("data directory", data_dir)] {
        if !d.is_dir() {
            return Err(format!(
                "{what} {}: does not exist or is not a directory (create it first)",
                d.display()
            )
            .into());
        }
    }
    let (op, oh) = ensure_table_file(data_dir, Table::Orders, spec.sf, spec.layout)?;
    let (lp, lh) = ensure_table_file(data_dir, Table::Lineitem, spec.sf, spec.layout)?;
    for rep in 0..spec.repeat {
        let started = std::time::Instant::now();
        let results: Vec<Result<(JoinResult, u64), crate::LabError>> =
            for_each_user(spec.users, |_| {
                // Plan first: one store per thread the plan uses, each with its
                // share of the spill cap.
                let (a, b) = inputs(spec, (0, oh.rows), (0, lh.rows), 0);
                let threads = planned_threads(pool, &spec.join, &a, &b, spec.threads as usize);
                let cap = st.spill_cap_bytes.map(|c| c / threads as u64);
                let mut stores = Vec::new();
                let mut pairs = Vec::new();
                for _ in 0..threads {
                    let mut store =
                        OsStore::in_dir(dir, *direct_io, cap, cancel.clone()).map_err(e)?;
                    if let Some(total) = st.spill_cap_bytes {
                        store = store.with_cap_share(total, threads);
                    }
                    let o = store.open_input_path(&op).map_err(e)?;
                    let l = store.open_input_path(&lp).map_err(e)?;
                    pairs.push(inputs(spec, (o, oh.rows), (l, lh.rows), tpch::HEADER_BYTES));
                    stores.push(store);
                }
                let r = parallel_hash_join(&mut stores, pool, &spec.join, &pairs).map_err(e)?;
                Ok((r, stores.iter().map(|s| s.stale_removed).sum()))
            });
        let mut r0 = Repetition {
            total_ns: started.elapsed().as_nanos() as u64,
            ..Default::default()
        };
        for r in results {
            let (r, stale) = r?;
            out.stale_spill_files_removed += stale;
            r0.partition_ns = r0.partition_ns.max(r.partition_ns);
            r0.join_ns = r0.join_ns.max(r.join_ns);
            if rep == 0 {
                merge(out, &r);
            }
        }
        out.repetitions.push(r0);
        progress(rep + 1);
    }
    Ok(())
}

/// A table's bytes, shared (no copy) by every user's store.
type TableBytes = Arc<Vec<u8>>;

/// simfs on the simulated drive, the host path over it, and the input tables (on the
/// drive, in memory, or none when they are generated as read).
fn mount_drive(
    spec: &JoinRunSpec,
    preset: &flash::Preset,
) -> Result<(vfs::SimVfs, TableBytes, TableBytes), crate::LabError> {
    let st = &spec.storage;
    let mut dev = preset.build()?;
    crate::precondition::precondition(&mut dev, st.precondition, 1.0, 0.0, st.precondition_seed)?;
    let logical = dev.logical_bytes();
    let mut cfg = match st.fs_bytes {
        Some(b) => FsConfig::new(b),
        None => FsConfig::for_device(logical),
    };
    cfg.alloc = st.alloc;
    cfg.discard = st.discard;
    cfg.prealloc = st.prealloc;
    cfg.kernel = st.kernel;
    cfg.rotational = st.rotational;
    crate::backend::fit_to_drive(&mut cfg, &dev);
    let fs = simfs::SimFs::mkfs(simfs::Timed::new(dev), cfg).map_err(|x| x.to_string())?;
    let mut drive = vfs::SimVfs::with_host(fs, st.host.clone());
    if st.stream_inputs && st.inputs_on_device {
        return Err("streamed inputs are generated off the drive: they cannot also be on it (inputs_on_device)".into());
    }
    let (od, ld) = if st.stream_inputs {
        (Arc::new(Vec::new()), Arc::new(Vec::new()))
    } else {
        (
            table_data(Table::Orders, spec.sf, spec.layout),
            table_data(Table::Lineitem, spec.sf, spec.layout),
        )
    };
    if st.inputs_on_device {
        for (name, bytes) in [("orders", &od), ("lineitem", &ld)] {
            write_input(&mut drive, name, bytes).map_err(|x| x.to_string())?;
        }
    }
    Ok((drive, od, ld))
}

/// What a repetition did to the drive: its TRIMs, writes and WAF, from the drive's
/// counters before and after it.
fn repetition_counts(before: &flash::DeviceStats, after: &flash::DeviceStats) -> Repetition {
    let host = after.host_write_pages - before.host_write_pages;
    let flash_pages = after.flash_write_pages - before.flash_write_pages;
    Repetition {
        trim_commands: after.trim_commands - before.trim_commands,
        trim_ranges: after.trim_ranges - before.trim_ranges,
        trim_bytes: after.trim_bytes - before.trim_bytes,
        trim_busy_ns: after.trim_busy_ns - before.trim_busy_ns,
        trim_settle_wait_ns: after.trim_settle_wait_ns - before.trim_settle_wait_ns,
        io_settle_wait_ns: after.io_settle_wait_ns - before.io_settle_wait_ns,
        waf: (host > 0).then(|| flash_pages as f64 / host as f64),
        host_write_pages: host,
        flash_write_pages: flash_pages,
        host_program_pages: after.host_program_pages - before.host_program_pages,
        gc_copied_pages: after.gc_copied_pages - before.gc_copied_pages,
        slc_program_pages: after.slc_program_pages - before.slc_program_pages,
        slc_write_bytes: after.slc_write_bytes - before.slc_write_bytes,
        host_write_bytes: after.host_write_bytes - before.host_write_bytes,
        mapped_bytes: after.mapped_bytes,
        ..Repetition::default()
    }
}

/// Opens or adds the inputs of the user's store: on the drive, generated as read, or in
/// memory.
fn add_inputs<V: Vfs>(
    store: &mut VfsStore<V>,
    spec: &JoinRunSpec,
    od: &Arc<Vec<u8>>,
    ld: &Arc<Vec<u8>>,
) -> Result<(FileId, FileId), crate::LabError> {
    let (st, e) = (&spec.storage, &join_error(spec));
    Ok(if st.inputs_on_device {
        (
            store.open_input("orders").map_err(e)?,
            store.open_input("lineitem").map_err(e)?,
        )
    } else if st.stream_inputs {
        let source = |table: Table| -> vfs::SourceFactory {
            let (sf, layout) = (spec.sf, spec.layout);
            Arc::new(move || {
                Box::new(GeneratedTable::new(table, sf, layout)) as Box<dyn vfs::FileSource>
            })
        };
        (
            store
                .add_generated_input("orders", source(Table::Orders))
                .map_err(e)?,
            store
                .add_generated_input("lineitem", source(Table::Lineitem))
                .map_err(e)?,
        )
    } else {
        (
            store.add_memory_input("orders", od.clone()).map_err(e)?,
            store.add_memory_input("lineitem", ld.clone()).map_err(e)?,
        )
    })
}

/// A repetition's times from its users' results (the slowest user's); the first
/// repetition's join results go into `out`.
fn fold_users(
    results: Vec<Result<(JoinResult, u64), crate::LabError>>,
    first: bool,
    out: &mut JoinRunResult,
) -> Result<Repetition, crate::LabError> {
    let mut repetition = Repetition::default();
    for r in results {
        let (r, elapsed) = r?;
        repetition.total_ns = repetition.total_ns.max(elapsed);
        repetition.partition_ns = repetition.partition_ns.max(r.partition_ns);
        repetition.join_ns = repetition.join_ns.max(r.join_ns);
        if first {
            merge(out, &r);
        }
    }
    Ok(repetition)
}

/// The drive's counters at the end of a repetition. The run ends as `sync` or an unmount
/// ends one (`ends_run`): with the journal's final commit, which sends the discards of
/// what the run freed since the last timed commit (journal discard mode); then deferred
/// discards (fstrim); and the file system settles: the discard worker's last TRIMs (in
/// the background) are done before anything else runs.
fn end_repetition(
    v: &mut vfs::SimVfs,
    ends_run: bool,
) -> Result<flash::DeviceStats, crate::LabError> {
    if ends_run {
        v.fs_mut().sync().map_err(|x| x.to_string())?;
        v.fs_mut().fstrim().map_err(|x| x.to_string())?;
        v.fs_mut().finish_discards().map_err(|x| x.to_string())?;
    }
    Ok(v.fs().device().dev.stats())
}

/// The rows of the two inputs.
fn input_rows(spec: &JoinRunSpec, od: &[u8], ld: &[u8]) -> (u64, u64) {
    let rb = spec.layout.record_bytes() as u64;
    if spec.storage.stream_inputs {
        (
            table_rows(Table::Orders, spec.sf),
            table_rows(Table::Lineitem, spec.sf),
        )
    } else {
        (od.len() as u64 / rb, ld.len() as u64 / rb)
    }
}

/// Each user's memory pool and join spec, and the threads a user's join plans. Each user
/// plans and reserves within its own share of the budget, a pool of its own: a pool shared
/// in real time would let one user's reservations change what another plans or reserves,
/// run to run. Every thread of every user is a user of the drive; only the threads the
/// plan uses.
fn plan_users(spec: &JoinRunSpec, rows: (u64, u64)) -> (Vec<MemoryPool>, JoinSpec, usize) {
    let users = spec.users as usize;
    let user_pools: Vec<MemoryPool> = (0..users)
        .map(|_| MemoryPool::new(spec.memory_bytes / users as u64))
        .collect();
    let user_join = JoinSpec {
        concurrent_users: 1,
        ..spec.join.clone()
    };
    let (a, b) = inputs(spec, (0, rows.0), (0, rows.1), 0);
    let threads = planned_threads(&user_pools[0], &user_join, &a, &b, spec.threads as usize);
    (user_pools, user_join, threads)
}

/// The join on simfs over the simulated drive, in virtual time.
fn run_on_drive(
    spec: &JoinRunSpec,
    preset: &flash::Preset,
    out: &mut JoinRunResult,
    progress: &mut dyn FnMut(u32),
) -> Result<(), crate::LabError> {
    let (st, e) = (&spec.storage, &join_error(spec));
    let (mut drive, od, ld) = mount_drive(spec, preset)?;
    drive.start_measuring();
    out.wear_at_start = drive.fs().device().dev.wear_report();
    crate::backend::start_timeline(drive.fs_mut(), st.timeline)?;
    let rows = input_rows(spec, &od, &ld);
    let (user_pools, user_join, threads) = plan_users(spec, rows);
    let turns = vfs::Turns::on_cores(
        drive,
        spec.users as usize,
        threads,
        spec.host_cores.map(|c| c as usize),
    );
    turns.set_scheduler(spec.io_scheduler);
    // A store of user `u`'s thread `t`, its inputs added, parked: as every
    // repetition starts.
    let setup = |u: usize, t: usize| -> Result<_, crate::LabError> {
        let mut store = VfsStore::on(turns.user(u * threads + t), "the simulated drive", None)
            .with_prefix(&format!("flashlab-spill-user{u}-thread{t}-"));
        if spec.join.algorithm == hashjoin::Algorithm::Postgres {
            // The backend's virtual file descriptors: closed files allocate differently.
            store = store.with_open_file_limit(hashjoin::postgres::TEMP_FILES_OPEN_AT_ONCE);
        }
        let (o, l) = add_inputs(&mut store, spec, &od, &ld)?;
        let pair = inputs(spec, (o, rows.0), (l, rows.1), 0);
        store.park();
        Ok((store, pair))
    };
    // One user on one thread: the join makes the same storage calls every
    // repetition, so the first one's are recorded and the later repetitions replay
    // them (`hashjoin::recorded`: the same simulated I/O and times, without
    // computing the join again).
    let serial = st.replay_repetitions && spec.users == 1 && threads == 1 && spec.repeat > 1;
    let mut recording: Option<hashjoin::recorded::Recording> = None;
    for rep in 0..spec.repeat {
        if trace::cancel::requested() {
            return Err(trace::cancel::INTERRUPTED.into());
        }
        let (before, freed_before) =
            turns.with_vfs(|v| (v.fs().device().dev.stats(), v.fs().stats().freed_extents));
        turns.start_round();
        let results: Vec<Result<(JoinResult, u64), crate::LabError>> =
            if let Some(recorded) = &recording {
                let (mut store, _) = setup(0, 0)?;
                let replayed = recorded.replay(&mut store).map_err(e)?;
                out.replayed_repetitions += 1;
                let (partition_ns, join_ns) = hashjoin::recorded::Recording::phases(&replayed);
                let r = JoinResult {
                    partition_ns,
                    join_ns,
                    ..JoinResult::default()
                };
                vec![Ok((r, store.elapsed_ns()))]
            } else if serial {
                let (store, pair) = setup(0, 0)?;
                let mut stores = [hashjoin::recorded::Recorder::new(store)];
                let r = parallel_hash_join(&mut stores, &user_pools[0], &user_join, &[pair])
                    .map_err(e)?;
                let [rec] = stores;
                let (rec, store) = rec.finish();
                // Replayed only if its phase times come out as the join's do.
                recording = rec
                    .check_phases(r.partition_ns, r.join_ns)
                    .ok()
                    .map(|()| rec);
                vec![Ok((r, store.elapsed_ns()))]
            } else {
                // Each user joins in its own thread with its own store; the shared
                // drive orders their I/O in virtual time, so the result does not
                // depend on thread scheduling.
                for_each_user(spec.users, |u| {
                    // The user's threads are one group of the drive's users, all
                    // parked after setting up: the join resumes them together.
                    let mut stores = Vec::new();
                    let mut pairs = Vec::new();
                    for t in 0..threads {
                        let (store, pair) = setup(u, t)?;
                        pairs.push(pair);
                        stores.push(store);
                    }
                    let r = parallel_hash_join(&mut stores, &user_pools[u], &user_join, &pairs)
                        .map_err(e)?;
                    Ok((r, stores.iter().map(|s| s.elapsed_ns()).max().unwrap_or(0)))
                })
            };
        let repetition = fold_users(results, rep == 0, out)?;
        // The run ends as `sync` or an unmount ends one: with the journal's final
        // commit, which sends the discards of what the run freed since the last
        // timed commit (journal discard mode); then deferred discards (fstrim).
        // (With `commit_each_repetition` off, only the last repetition ends so: the
        // repetitions of one real run, whose commits come on their own timer.)
        let ends_run = st.commit_each_repetition || rep + 1 == spec.repeat;
        let after = turns.with_vfs(|v| end_repetition(v, ends_run))?;
        let freed_after = turns.with_vfs(|v| v.fs().stats().freed_extents);
        let repetition = Repetition {
            total_ns: repetition.total_ns,
            partition_ns: repetition.partition_ns,
            join_ns: repetition.join_ns,
            freed_extents: freed_after - freed_before,
            ..repetition_counts(&before, &after)
        };
        out.repetitions.push(repetition);
        progress(rep + 1);
        let written: u64 = out.repetitions.iter().map(|r| r.host_write_bytes).sum();
        if st.host_write_target_bytes.is_some_and(|t| written >= t) {
            break;
        }
    }
    out.wear = turns.with_vfs(|v| v.fs().device().dev.wear_report());
    out.timeseries = turns.with_vfs(|v| crate::backend::finish_timeline(v.fs_mut()))?;
    // The users' peaks, added: at most the budget (each pool is a share of it).
    out.peak_memory_bytes = user_pools.iter().map(|p| p.peak_bytes()).sum();
    Ok(())
}

/// The join's two inputs: ORDERS and LINEITEM, `(file, rows)` each, records from `offset`.
fn inputs(
    spec: &JoinRunSpec,
    orders: (FileId, u64),
    lineitem: (FileId, u64),
    offset: usize,
) -> (Input, Input) {
    let input = |(file, rows): (FileId, u64), relation| Input {
        file,
        offset_bytes: offset as u64,
        rows,
        layout: spec.layout,
        relation,
    };
    (
        input(orders, Relation::Orders),
        input(lineitem, Relation::Lineitem),
    )
}

/// Writes `bytes` as file `name` of `drive`, durably.
fn write_input(drive: &mut vfs::SimVfs, name: &str, bytes: &[u8]) -> Result<(), vfs::VfsError> {
    let fd = drive.open(name, OpenMode::create_new())?;
    drive.write_at(fd, 0, bytes)?;
    drive.sync_files(&[fd], true)?;
    drive.close(fd);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfs::FileSource;

    #[test]
    fn a_generated_table_reads_as_the_table_s_bytes() {
        for (table, layout) in [
            (Table::Orders, Layout::Fixed128),
            (Table::Lineitem, Layout::Columns),
        ] {
            let bytes = table_data(table, 0.001, layout);
            let mut g = GeneratedTable::new(table, 0.001, layout);
            assert_eq!(g.len_bytes(), bytes.len() as u64);
            // In order in odd-sized pieces (rows split across reads), then backwards,
            // then past the end.
            let mut at = 0u64;
            let mut buf = vec![0u8; 1000];
            while at < g.len_bytes() {
                let n = g.read_at(at, &mut buf);
                assert_eq!(&buf[..n], &bytes[at as usize..at as usize + n], "at {at}");
                at += n as u64;
            }
            let n = g.read_at(130, &mut buf[..300]);
            assert_eq!(&buf[..n], &bytes[130..430]);
            assert_eq!(g.read_at(g.len_bytes(), &mut buf), 0);
        }
    }

    /// Streamed (generated) inputs, which a replay reads without making their bytes: the
    /// numbers of joins run again, and of the same inputs held in memory (from the
    /// session-13 review).
    #[test]
    fn replays_of_streamed_inputs_give_the_numbers_of_joins_run_again() {
        let run = |replay: bool, stream: bool| {
            let mut spec =
                crate::experiments::tempfiles::join_spec("mx500", 0.01, 256 << 20, 3, true, true)
                    .unwrap();
            spec.join.algorithm = hashjoin::Algorithm::Postgres;
            spec.memory_bytes = 64 << 10;
            spec.storage.replay_repetitions = replay;
            spec.storage.stream_inputs = stream;
            let r = run(&spec, &mut |_| {}).unwrap();
            (r.replayed_repetitions, serde_json::to_value(&r).unwrap())
        };
        let (n0, again) = run(false, true);
        let (n1, replayed) = run(true, true);
        let (_, memory) = run(true, false);
        assert_eq!((n0, n1), (0, 2));
        assert_eq!(again, replayed);
        assert_eq!(memory, replayed);
    }

    #[test]
    fn replayed_repetitions_give_the_numbers_of_joins_run_again() {
        // Paper 000's join on the simulated MX500 through each host path, with and without
        // TRIM and fallocate, and the grace join: every repetition's numbers the same
        // whether the join runs again or its first run's calls are replayed.
        let cases: [(hashjoin::Algorithm, vfs::HostConfig, DiscardMode, bool); 4] = [
            (
                hashjoin::Algorithm::Postgres,
                crate::experiments::tempfiles::postgres_host(0.01),
                DiscardMode::Journal,
                false,
            ),
            (
                hashjoin::Algorithm::Postgres,
                vfs::HostConfig::direct_io(),
                DiscardMode::Journal,
                true,
            ),
            (
                hashjoin::Algorithm::Postgres,
                vfs::HostConfig::uncached(),
                DiscardMode::Online,
                true,
            ),
            (
                hashjoin::Algorithm::Grace,
                vfs::HostConfig::linux(64 << 20),
                DiscardMode::None,
                false,
            ),
        ];
        for (algorithm, host, discard, fallocate) in cases {
            let run = |replay: bool| {
                let mut spec = crate::experiments::tempfiles::join_spec(
                    "mx500",
                    0.01,
                    256 << 20,
                    3,
                    fallocate,
                    true,
                )
                .unwrap();
                spec.join.algorithm = algorithm;
                if algorithm == hashjoin::Algorithm::Postgres {
                    spec.memory_bytes = 64 << 10;
                }
                spec.storage.host = host.clone();
                spec.storage.discard = discard;
                spec.storage.replay_repetitions = replay;
                run(&spec, &mut |_| {}).unwrap()
            };
            let (again, replayed) = (run(false), run(true));
            assert_eq!(
                (again.replayed_repetitions, replayed.replayed_repetitions),
                (0, 2)
            );
            assert!(again.bytes_spilled > 0 && again.repetitions[2].total_ns > 0);
            assert!(again.repetitions[1].partition_ns > 0 && again.repetitions[1].join_ns > 0);
            assert_eq!(
                serde_json::to_value(&again).unwrap(),
                serde_json::to_value(&replayed).unwrap(),
                "{algorithm:?} {discard:?} fallocate {fallocate}"
            );
        }
    }

    #[test]
    fn the_wear_report_is_kept_on_an_ssd_a_byte_target_ends_the_repetitions_and_a_disk_has_none() {
        let spec = |preset: &str| {
            crate::experiments::tempfiles::join_spec(preset, 0.01, 256 << 20, 10, false, true)
                .unwrap()
        };
        let mut s = spec("mx500");
        let one = run(
            &JoinRunSpec {
                repeat: 1,
                ..s.clone()
            },
            &mut |_| {},
        )
        .unwrap();
        let per_rep = one.repetitions[0].host_write_bytes;
        assert!(per_rep > 0);
        // Two and a half repetitions' bytes: the third reaches them and ends the run.
        s.storage.host_write_target_bytes = Some(per_rep * 5 / 2);
        let r = run(&s, &mut |_| {}).unwrap();
        assert_eq!(r.repetitions.len(), 3);
        let w = r.wear.unwrap();
        let host: u64 = r.repetitions.iter().map(|r| r.host_write_bytes).sum();
        assert_eq!(w.host_write_bytes, host);
        assert_eq!(r.wear_at_start.unwrap().erase_count_max, 0);
        let hdd = run(
            &JoinRunSpec {
                repeat: 1,
                ..spec("hdd7200")
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(hdd.bytes_spilled > 0 && hdd.wear.is_none());
    }

    #[test]
    fn a_simulated_join_stops_when_its_thread_s_token_is_cancelled() {
        let spec =
            crate::experiments::tempfiles::join_spec("mx500", 0.01, 256 << 20, 4, false, true)
                .unwrap();
        // Cancelled as the first repetition ends: no second one starts.
        let token = trace::Cancel::new();
        let mut done = 0;
        let r = trace::cancel::with_token(&token, || {
            run(&spec, &mut |rep| {
                done = rep;
                token.cancel();
            })
        });
        assert_eq!(done, 1);
        assert!(r.unwrap_err().to_string().contains("interrupted"));
        // Each user's thread carries the token (its store checks it mid-repetition:
        // hashjoin's store tests).
        let carried = trace::cancel::with_token(&token, || {
            for_each_user(3, |_| Ok(trace::cancel::current().is_some()))
        });
        assert!(carried.into_iter().all(|c| c.unwrap()));
        // Cancelled before it starts: no repetition runs, on one user or several.
        for users in [1, 2] {
            let spec = JoinRunSpec {
                users,
                ..spec.clone()
            };
            let mut reps = 0;
            let r = trace::cancel::with_token(&token, || run(&spec, &mut |_| reps += 1));
            assert_eq!(reps, 0, "{users} users");
            assert!(
                r.unwrap_err().to_string().contains("interrupted"),
                "{users} users"
            );
        }
    }

    #[test]
    fn streamed_inputs_give_the_same_run_as_inputs_held_in_memory() {
        // Paper 000's join on the simulated MX500 with its host path, twice: the same
        // simulated I/O, times and answer whether the tables are held or generated.
        let run = |stream: bool| {
            let mut spec =
                crate::experiments::tempfiles::join_spec("mx500", 0.01, 256 << 20, 2, false, true)
                    .unwrap();
            spec.join.algorithm = hashjoin::Algorithm::Postgres;
            spec.memory_bytes = 64 << 10;
            spec.storage.host = vfs::HostConfig::direct_io();
            spec.storage.discard = DiscardMode::Journal;
            spec.storage.stream_inputs = stream;
            run(&spec, &mut |_| {}).unwrap()
        };
        let (held, streamed) = (run(false), run(true));
        assert!(held.bytes_spilled > 0 && held.repetitions[0].trim_commands > 0);
        assert_eq!(
            serde_json::to_value(&held).unwrap(),
            serde_json::to_value(&streamed).unwrap()
        );
    }
}
