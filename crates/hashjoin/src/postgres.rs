//! PostgreSQL 12's hash join (paper 000 ran PostgreSQL 12.11): the serial, non-parallel
//! `Hash Join` node with its batch files, modelled from PostgreSQL's source so that the
//! number of temporary files, their sizes and the order of their writes, reads and
//! deletions are PostgreSQL's:
//!
//! - **Sizing** (nodeHash.c `ExecChooseHashTableSize`): a tuple in the table costs
//!   `HJTUPLE_OVERHEAD` (16) + `MAXALIGN(SizeofMinimalTupleHeader)` (16) + `MAXALIGN(width)`;
//!   2% of work_mem is set aside for skew buckets (`SKEW_WORK_MEM_PERCENT`; the planner
//!   asks for the skew optimisation whenever the outer key is a base table's column);
//!   one tuple per bucket (`NTUP_PER_BUCKET`), at least 1,024 buckets, a power of two;
//!   when the inner side does not fit, `nbatch` is the power of two at or above
//!   `inner bytes / (work_mem - buckets)`, with buckets for a full work_mem.
//! - **Hash and batch** (hashfunc.c `hashint8`, `hash_uint32`; nodeHash.c
//!   `ExecHashGetBucketAndBatch` as of PostgreSQL 12): `bucket = hash & (nbuckets - 1)`,
//!   `batch = (hash >> log2(nbuckets)) & (nbatch - 1)`.
//! - **Build** (`MultiExecHash`, `ExecHashTableInsert`): batch 0's tuples go into the
//!   table, every other batch's to its inner batch file (created at its first tuple).
//!   When the table's tuples plus its bucket array outgrow work_mem, `nbatch` doubles
//!   (`ExecHashIncreaseNumBatches`) and the tuples that now belong to a later batch are
//!   written to its file; a doubling that moves all or none of the tuples stops further
//!   growth.
//! - **Probe** (nodeHashjoin.c `ExecHashJoinImpl`): outer tuples of batch 0 probe at
//!   once; the others are written to their outer batch file.
//! - **Later batches** (`ExecHashJoinNewBatch`): batch by batch, a batch with no inner
//!   or no outer file is skipped (its other file deleted); the inner file is loaded into
//!   the table (which may double `nbatch` again) and deleted, then the outer file is read
//!   back, each tuple probing or, when `nbatch` grew since it was written, moving to its
//!   new batch's file; the outer file is deleted when the next batch starts.
//! - **Files** (buffile.c, nodeHashjoin.c `ExecHashJoinSaveTuple`): each saved tuple is
//!   its 4-byte hash value and its MinimalTuple (`t_len` = 16-byte header + data); a
//!   BufFile writes and reads through one 8 KiB (`BLCKSZ`) buffer and splits at 1 GB
//!   (`MAX_PHYSICAL_FILESIZE`) segment files; closing it deletes its segments.
//!
//! What differs from PostgreSQL, deliberately: no skew buckets are filled (TPC-H's order
//! keys have no most-common values, so PostgreSQL fills none either); the base tables are
//! read through the join's read buffer, not shared_buffers; the 8 KiB BufFile buffers are
//! not counted against work_mem (PostgreSQL 12 does not count them either). With
//! [`crate::JoinSpec::fallocate`] each segment file is preallocated at its batch's
//! expected size (what paper 000's modified server did; the size is our assumption).

use crate::memory::MemoryPool;
use crate::spec::{Input, JoinResult, JoinSpec, Relation, SKEW_SLACK};
use crate::store::{FileId, Store};
use crate::JoinError;
use workloads::tpch::{Layout, Record};

/// PostgreSQL's page and BufFile buffer size (pg_config.h `BLCKSZ`).
pub const BLCKSZ: usize = 8192;
/// BufFile's segment size (buffile.c `MAX_PHYSICAL_FILESIZE`).
pub const MAX_PHYSICAL_FILESIZE: u64 = 1 << 30;
/// work_mem's minimum (guc.c: 64 kB).
pub const MIN_WORK_MEM_BYTES: u64 = 64 * 1024;
/// Temporary files a backend keeps open in the kernel at once: fd.c's `max_safe_fds`
/// (`max_files_per_process`, 1,000 by default, less the descriptors already open at
/// start and `NUM_RESERVED_FDS`, 10, in PostgreSQL 15's `set_max_safe_fds`) less the
/// relation files it has open. Measured: at most 980 descriptors into `pgsql_tmp` (990 in
/// all) in Debian's PostgreSQL 15 backend while it ran paper 000's join with 2,048 batch
/// files (`ls -l /proc/PID/fd`, polled every 0.2 s through `reproduce --only
/// tempfiles-pg`, 2026-11-29). More batch files than this are closed and reopened by
/// the virtual file descriptors' LRU (`hashjoin::store`'s `with_open_file_limit`).
pub const TEMP_FILES_OPEN_AT_ONCE: usize = 980;
/// hashjoin.h `HJTUPLE_OVERHEAD`: `MAXALIGN(sizeof(HashJoinTupleData))`, a next pointer
/// and the hash value.
const HJTUPLE_OVERHEAD: u64 = 16;
/// `MAXALIGN(SizeofMinimalTupleHeader)` (15 bytes, aligned to 8): where a minimal tuple's
/// data starts (htup_details.h, heaptuple.c `heap_form_minimal_tuple`).
const MINIMAL_TUPLE_HEADER: u64 = 16;
/// `sizeof(HashJoinTuple)`: one bucket pointer.
const BUCKET_POINTER: u64 = 8;
/// nodeHash.c `NTUP_PER_BUCKET`.
const NTUP_PER_BUCKET: u64 = 1;
/// hashjoin.h `SKEW_WORK_MEM_PERCENT`.
const SKEW_WORK_MEM_PERCENT: u64 = 2;
/// hashjoin.h `SKEW_BUCKET_OVERHEAD`: `MAXALIGN(sizeof(HashSkewBucket))`.
const SKEW_BUCKET_OVERHEAD: u64 = 16;
/// memutils.h `MaxAllocSize`.
const MAX_ALLOC_SIZE: u64 = 0x3fff_ffff;

fn maxalign(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// dynahash.c `my_log2`: the smallest `i` with `2^i >= n`.
fn my_log2(n: u64) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// What `ExecChooseHashTableSize` decides for an inner side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PgPlan {
    /// The table's limit at run time (`spaceAllowed`): all of work_mem.
    pub space_allowed_bytes: u64,
    pub nbuckets: u64,
    pub nbatch: u64,
    /// Skew buckets the 2% reserve would hold (none are filled: see the module's notes).
    pub num_skew_mcvs: u64,
}

/// nodeHash.c `ExecChooseHashTableSize` (PostgreSQL 12, not parallel) for `ntuples` inner
/// tuples of `width` data bytes under `work_mem_bytes`, with the skew reserve.
pub fn choose_hash_table_size(ntuples: u64, width: u64, work_mem_bytes: u64) -> PgPlan {
    let tupsize = HJTUPLE_OVERHEAD + MINIMAL_TUPLE_HEADER + maxalign(width);
    let inner_rel_bytes = ntuples as f64 * tupsize as f64;
    let space_allowed = work_mem_bytes;
    let mut hash_table_bytes = work_mem_bytes;
    let skew_table_bytes = hash_table_bytes * SKEW_WORK_MEM_PERCENT / 100;
    // tupsize + 8 bucket pointers + an int + the skew bucket's header, per MCV.
    let num_skew_mcvs = skew_table_bytes / (tupsize + 8 * 8 + 4 + SKEW_BUCKET_OVERHEAD);
    if num_skew_mcvs > 0 {
        hash_table_bytes -= skew_table_bytes;
    }
    let mut max_pointers = (space_allowed / BUCKET_POINTER).min(MAX_ALLOC_SIZE / BUCKET_POINTER);
    let mppow2 = 1u64 << my_log2(max_pointers);
    if max_pointers != mppow2 {
        max_pointers = mppow2 / 2;
    }
    max_pointers = max_pointers.min(i32::MAX as u64 / 2);
    let dbuckets = (ntuples as f64 / NTUP_PER_BUCKET as f64).ceil() as u64;
    let mut nbuckets = dbuckets.min(max_pointers).max(1024);
    nbuckets = 1 << my_log2(nbuckets);
    let mut bucket_bytes = BUCKET_POINTER * nbuckets;
    let mut nbatch = 1;
    if inner_rel_bytes + bucket_bytes as f64 > hash_table_bytes as f64 {
        let bucket_size = tupsize * NTUP_PER_BUCKET + BUCKET_POINTER;
        let lbuckets = (1u64 << my_log2(hash_table_bytes / bucket_size)).min(max_pointers);
        nbuckets = 1 << my_log2(lbuckets);
        bucket_bytes = nbuckets * BUCKET_POINTER;
        let dbatch = (inner_rel_bytes / (hash_table_bytes - bucket_bytes) as f64)
            .ceil()
            .min(max_pointers as f64);
        let minbatch = dbatch as u64;
        nbatch = 2;
        while nbatch < minbatch {
            nbatch <<= 1;
        }
    }
    PgPlan {
        space_allowed_bytes: space_allowed,
        nbuckets,
        nbatch,
        num_skew_mcvs,
    }
}

/// hashfn.c `hash_bytes_uint32` (Bob Jenkins' lookup3 `final` mix of one word).
pub fn hash_uint32(k: u32) -> u32 {
    let init = 0x9e37_79b9u32.wrapping_add(4).wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = (init.wrapping_add(k), init, init);
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c
}

/// hashfunc.c `hashint8`: the high word folded into the low one, then `hash_uint32` (so
/// an int8 key hashes as the int4 of the same value). A single-key join's hash value
/// (`ExecHashGetHashValue`: 0 rotated, XORed with the key's hash) is this.
pub fn hashint8(v: i64) -> u32 {
    let hi = (v >> 32) as u32;
    let lo = (v as u32) ^ if v >= 0 { hi } else { !hi };
    hash_uint32(lo)
}

/// A temporary file as buffile.c keeps it: 1 GB segment files written and read through
/// one 8 KiB buffer.
struct BufFile {
    /// Segment files and the bytes each holds on the store.
    segments: Vec<(FileId, u64)>,
    /// Bytes written but not yet dumped (at most `BLCKSZ`).
    pending: Vec<u8>,
    /// Bytes to preallocate per segment (0: none).
    fallocate_bytes: u64,
}

impl BufFile {
    /// `BufFileCreateTemp`: the first segment exists at once.
    fn create<S: Store>(store: &mut S, fallocate_bytes: u64) -> Result<BufFile, JoinError> {
        let mut f = BufFile {
            segments: Vec::new(),
            pending: Vec::with_capacity(BLCKSZ),
            fallocate_bytes: fallocate_bytes.min(MAX_PHYSICAL_FILESIZE),
        };
        f.new_segment(store)?;
        Ok(f)
    }

    fn new_segment<S: Store>(&mut self, store: &mut S) -> Result<(), JoinError> {
        let id = store.create()?;
        if self.fallocate_bytes > 0 {
            store.fallocate(id, self.fallocate_bytes.div_ceil(4096) * 4096)?;
        }
        self.segments.push((id, 0));
        Ok(())
    }

    /// `BufFileWrite`: into the buffer; a full buffer is dumped when the next byte comes
    /// (or at the rewind), as buffile.c does.
    fn write<S: Store>(&mut self, store: &mut S, mut data: &[u8]) -> Result<u64, JoinError> {
        let mut dumped = 0;
        while !data.is_empty() {
            if self.pending.len() == BLCKSZ {
                dumped += self.dump(store)?;
            }
            let n = (BLCKSZ - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        Ok(dumped)
    }

    /// `BufFileDumpBuffer`: the buffer to the end of the file, the part past a 1 GB
    /// segment into the next segment.
    fn dump<S: Store>(&mut self, store: &mut S) -> Result<u64, JoinError> {
        let mut done = 0;
        let total = self.pending.len();
        while done < total {
            let (id, used) = *self.segments.last().expect("a BufFile has a segment");
            if used >= MAX_PHYSICAL_FILESIZE {
                self.new_segment(store)?;
                continue;
            }
            let n = ((MAX_PHYSICAL_FILESIZE - used) as usize).min(total - done);
            store.append(id, &self.pending[done..done + n])?;
            self.segments.last_mut().expect("a segment").1 += n as u64;
            done += n;
        }
        self.pending.clear();
        Ok(total as u64)
    }

    /// `BufFileSeek(file, 0, 0, SEEK_SET)` for reading: the buffer is dumped first.
    fn rewind<S: Store>(&mut self, store: &mut S) -> Result<(BufReader, u64), JoinError> {
        let dumped = self.dump(store)?;
        Ok((
            BufReader {
                segments: self.segments.clone(),
                segment: 0,
                offset: 0,
                block: Vec::with_capacity(BLCKSZ),
                at: 0,
            },
            dumped,
        ))
    }

    /// `BufFileClose`: unwritten data is flushed (`BufFileFlush`), then every segment
    /// file is deleted. Returns the bytes the flush wrote.
    fn close<S: Store>(mut self, store: &mut S) -> Result<u64, JoinError> {
        let dumped = self.dump(store)?;
        for (id, _) in self.segments {
            store.delete(id)?;
        }
        Ok(dumped)
    }
}

/// Reading a BufFile from its start: `BufFileLoadBuffer` fills the 8 KiB buffer from the
/// current segment, moving to the next at a segment's end.
struct BufReader {
    segments: Vec<(FileId, u64)>,
    segment: usize,
    offset: u64,
    block: Vec<u8>,
    at: usize,
}

impl BufReader {
    /// Fills `out` whole; false at the end of the file.
    fn read_exact<S: Store>(
        &mut self,
        store: &mut S,
        out: &mut [u8],
        read_bytes: &mut u64,
    ) -> Result<bool, JoinError> {
        let mut filled = 0;
        while filled < out.len() {
            if self.at == self.block.len() && !self.load(store, read_bytes)? {
                if filled == 0 {
                    return Ok(false);
                }
                return Err(JoinError::Input(
                    "a batch file ended inside a tuple".to_string(),
                ));
            }
            let n = (self.block.len() - self.at).min(out.len() - filled);
            out[filled..filled + n].copy_from_slice(&self.block[self.at..self.at + n]);
            self.at += n;
            filled += n;
        }
        Ok(true)
    }

    fn load<S: Store>(&mut self, store: &mut S, read_bytes: &mut u64) -> Result<bool, JoinError> {
        while self.segment < self.segments.len() {
            let (id, len) = self.segments[self.segment];
            if self.offset >= len {
                self.segment += 1;
                self.offset = 0;
                continue;
            }
            let n = (BLCKSZ as u64).min(len - self.offset) as usize;
            self.block.resize(n, 0);
            let got = store.read_at(id, self.offset, &mut self.block)?;
            if got < n {
                return Err(JoinError::Input(format!(
                    "batch file segment {id} ended at {} of {len} bytes",
                    self.offset + got as u64
                )));
            }
            *read_bytes += n as u64;
            self.offset += n as u64;
            self.at = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

/// A tuple in the table (the key and the column the query sums).
#[derive(Debug, Clone, Copy)]
struct Tuple {
    hash: u32,
    key: u64,
    price_cents: i64,
}

/// The in-memory hash table of the current batch: chained buckets and PostgreSQL's
/// space accounting.
struct Table {
    tuples: Vec<Tuple>,
    next: Vec<u32>,
    heads: Vec<u32>,
    log2_nbuckets: u32,
    nbuckets_optimal: u64,
    /// `spaceUsed`: `HJTUPLE_OVERHEAD + t_len` per tuple.
    space_used: u64,
}

const NIL: u32 = u32::MAX;

impl Table {
    fn new(nbuckets: u64) -> Table {
        Table {
            tuples: Vec::new(),
            next: Vec::new(),
            heads: vec![NIL; nbuckets as usize],
            log2_nbuckets: nbuckets.trailing_zeros(),
            nbuckets_optimal: nbuckets,
            space_used: 0,
        }
    }

    fn nbuckets(&self) -> u64 {
        self.heads.len() as u64
    }

    fn link(&mut self, i: u32) {
        let b = (self.tuples[i as usize].hash as u64 & (self.nbuckets() - 1)) as usize;
        self.next[i as usize] = self.heads[b];
        self.heads[b] = i;
    }

    fn push(&mut self, t: Tuple, bytes: u64) {
        let i = self.tuples.len() as u32;
        self.tuples.push(t);
        self.next.push(NIL);
        self.link(i);
        self.space_used += bytes;
    }

    /// Rebuilds the buckets for `nbuckets` (ExecHashIncreaseNumBuckets).
    fn resize(&mut self, nbuckets: u64) {
        self.heads = vec![NIL; nbuckets as usize];
        self.log2_nbuckets = nbuckets.trailing_zeros();
        for i in 0..self.tuples.len() as u32 {
            self.link(i);
        }
    }

    fn for_each_match(&self, hash: u32, key: u64, mut f: impl FnMut(i64)) {
        let mut i = self.heads[(hash as u64 & (self.nbuckets() - 1)) as usize];
        while i != NIL {
            let t = &self.tuples[i as usize];
            if t.hash == hash && t.key == key {
                f(t.price_cents);
            }
            i = self.next[i as usize];
        }
    }

    /// `ExecHashTableReset`: empty, same buckets.
    fn reset(&mut self) {
        self.tuples.clear();
        self.next.clear();
        self.heads.fill(NIL);
        self.space_used = 0;
    }
}

/// The run's state: the table, both sides' batch files, and the counters.
struct PgJoin<'a, S: Store> {
    store: &'a mut S,
    spec: &'a JoinSpec,
    layout: Layout,
    /// Bytes of one saved tuple: the hash value and the MinimalTuple.
    saved_bytes: usize,
    /// `HJTUPLE_OVERHEAD + t_len`.
    table_bytes: u64,
    space_allowed: u64,
    nbatch: u64,
    curbatch: u64,
    grow_enabled: bool,
    table: Table,
    inner_files: Vec<Option<BufFile>>,
    outer_files: Vec<Option<BufFile>>,
    /// Rows of each side, for each file's expected size (fallocate).
    inner_rows: u64,
    outer_rows: u64,
    result: JoinResult,
    build_rel: Relation,
    enc: Vec<u8>,
}

impl<S: Store> PgJoin<'_, S> {
    fn batch_of(&self, hash: u32) -> u64 {
        if self.nbatch > 1 {
            ((hash >> self.table.log2_nbuckets) as u64) & (self.nbatch - 1)
        } else {
            0
        }
    }

    /// `ExecHashJoinSaveTuple` into batch `batch`'s file of one side (created at its
    /// first tuple).
    fn save(&mut self, inner: bool, batch: u64, t: &Tuple) -> Result<(), JoinError> {
        let rows = if inner {
            self.inner_rows
        } else {
            self.outer_rows
        };
        let expected = if self.spec.fallocate {
            ((rows as f64 / self.nbatch as f64) * self.saved_bytes as f64 * SKEW_SLACK) as u64
        } else {
            0
        };
        let files = if inner {
            &mut self.inner_files
        } else {
            &mut self.outer_files
        };
        let slot = &mut files[batch as usize];
        if slot.is_none() {
            *slot = Some(BufFile::create(self.store, expected)?);
        }
        // The hash value, then the MinimalTuple: t_len, the rest of its header, the data.
        let t_len = self.saved_bytes as u32 - 4;
        let rb = self.layout.record_bytes();
        self.enc.clear();
        self.enc.extend_from_slice(&t.hash.to_le_bytes());
        self.enc.extend_from_slice(&t_len.to_le_bytes());
        self.enc.resize(4 + MINIMAL_TUPLE_HEADER as usize + rb, 0);
        Record {
            key: t.key,
            price_cents: t.price_cents,
        }
        .encode(
            self.layout,
            &mut self.enc[4 + MINIMAL_TUPLE_HEADER as usize..],
        );
        let file = files[batch as usize].as_mut().expect("created above");
        self.result.bytes_spilled += file.write(self.store, &self.enc)?;
        Ok(())
    }

    /// `ExecHashTableInsert`: a tuple of the current batch into the table, any other to
    /// its batch's inner file (a tuple read back from a file written before `nbatch`
    /// doubled may belong to a later batch now).
    fn insert(&mut self, t: Tuple) -> Result<(), JoinError> {
        let b = self.batch_of(t.hash);
        if b != self.curbatch {
            return self.save(true, b, &t);
        }
        self.table.push(t, self.table_bytes);
        // With one batch the buckets may grow to one per tuple (applied when the build
        // ends or the batches double).
        if self.nbatch == 1
            && self.table.tuples.len() as u64 > self.table.nbuckets_optimal * NTUP_PER_BUCKET
            && self.table.nbuckets_optimal <= i32::MAX as u64 / 2
            && self.table.nbuckets_optimal * 2 * BUCKET_POINTER <= MAX_ALLOC_SIZE
        {
            self.table.nbuckets_optimal *= 2;
        }
        if self.table.space_used + self.table.nbuckets_optimal * BUCKET_POINTER > self.space_allowed
        {
            self.increase_nbatch()?;
        }
        Ok(())
    }

    /// `ExecHashIncreaseNumBatches`: doubles `nbatch` and writes out the tuples that now
    /// belong to a later batch.
    fn increase_nbatch(&mut self) -> Result<(), JoinError> {
        if !self.grow_enabled || self.nbatch > (i32::MAX as u64 / 2).min(MAX_ALLOC_SIZE / 16) {
            return Ok(());
        }
        self.nbatch *= 2;
        self.result.nbatch_doublings += 1;
        self.inner_files.resize_with(self.nbatch as usize, || None);
        self.outer_files.resize_with(self.nbatch as usize, || None);
        if self.table.nbuckets_optimal != self.table.nbuckets() {
            self.table.resize(self.table.nbuckets_optimal);
        }
        let old = std::mem::take(&mut self.table.tuples);
        let in_memory = old.len();
        self.table.reset();
        let mut freed = 0;
        for t in old {
            let b = self.batch_of(t.hash);
            if b == self.curbatch {
                self.table.push(t, self.table_bytes);
            } else {
                self.save(true, b, &t)?;
                freed += 1;
            }
        }
        if freed == 0 || freed == in_memory {
            self.grow_enabled = false;
        }
        Ok(())
    }

    /// One outer tuple of the current batch: probes, or goes to its batch's outer file.
    fn outer(&mut self, t: Tuple) -> Result<(), JoinError> {
        let b = self.batch_of(t.hash);
        if b != self.curbatch {
            return self.save(false, b, &t);
        }
        let (build_rel, result) = (self.build_rel, &mut self.result);
        self.table.for_each_match(t.hash, t.key, |bp| {
            let (o, l) = match build_rel {
                Relation::Orders => (bp, t.price_cents),
                Relation::Lineitem => (t.price_cents, bp),
            };
            result.rows += 1;
            result.sum_o_totalprice_cents += o;
            result.sum_l_extendedprice_cents += l;
        });
        Ok(())
    }

    /// Reads a batch file back whole, tuple by tuple.
    fn read_back(
        &mut self,
        file: &mut BufFile,
        mut f: impl FnMut(&mut Self, Tuple) -> Result<(), JoinError>,
    ) -> Result<(), JoinError> {
        let (mut reader, dumped) = file.rewind(self.store)?;
        self.result.bytes_spilled += dumped;
        let mut header = [0u8; 8];
        let mut rest = vec![0u8; self.saved_bytes - 8];
        let data = MINIMAL_TUPLE_HEADER as usize - 4;
        let mut read = 0;
        while reader.read_exact(self.store, &mut header, &mut read)? {
            let hash = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes"));
            let t_len = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
            if t_len as usize != self.saved_bytes - 4 {
                return Err(JoinError::Input(format!(
                    "a batch file holds a tuple of {t_len} bytes where {} were written",
                    self.saved_bytes - 4
                )));
            }
            if !reader.read_exact(self.store, &mut rest, &mut read)? {
                return Err(JoinError::Input(
                    "a batch file ended inside a tuple".to_string(),
                ));
            }
            let r = Record::decode(self.layout, &rest[data..]);
            self.store.compute(self.spec.cpu_ns_per_row);
            f(
                self,
                Tuple {
                    hash,
                    key: r.key,
                    price_cents: r.price_cents,
                },
            )?;
        }
        self.result.bytes_read_back += read;
        Ok(())
    }
}

/// Reads `rows` records of `input` through the read buffer, one tuple at a time.
fn scan_input<S: Store>(
    j: &mut PgJoin<'_, S>,
    input: &Input,
    mut f: impl FnMut(&mut PgJoin<'_, S>, Tuple) -> Result<(), JoinError>,
) -> Result<(), JoinError> {
    let rb = input.layout.record_bytes();
    let per_read = (j.spec.read_buffer_bytes as usize / rb).max(1);
    let mut buf = vec![0u8; per_read * rb];
    let mut done = 0u64;
    while done < input.rows {
        let n = (per_read as u64).min(input.rows - done) as usize;
        let want = n * rb;
        let got = j.store.read_at(
            input.file,
            input.offset_bytes + done * rb as u64,
            &mut buf[..want],
        )?;
        if got < want {
            return Err(JoinError::Input(format!(
                "file {} ended after {} of {} rows",
                input.file,
                done + (got / rb) as u64,
                input.rows
            )));
        }
        for i in 0..n {
            let r = Record::decode(input.layout, &buf[i * rb..(i + 1) * rb]);
            j.store.compute(j.spec.cpu_ns_per_row);
            f(
                j,
                Tuple {
                    hash: hashint8(r.key as i64),
                    key: r.key,
                    price_cents: r.price_cents,
                },
            )?;
        }
        done += n as u64;
    }
    Ok(())
}

/// PostgreSQL 12's hash join of `a` and `b` (the smaller side is the inner, hashed side,
/// as the planner chooses) with work_mem = the pool's limit.
pub fn postgres_hash_join<S: Store>(
    store: &mut S,
    pool: &MemoryPool,
    spec: &JoinSpec,
    a: Input,
    b: Input,
) -> Result<JoinResult, JoinError> {
    let work_mem = pool.limit_bytes() / spec.concurrent_users.max(1) as u64;
    if work_mem < MIN_WORK_MEM_BYTES {
        return Err(JoinError::Config(format!(
            "work_mem of {work_mem} bytes is below PostgreSQL's minimum of 64 kB ({MIN_WORK_MEM_BYTES} bytes): \
             {} kB is outside the valid range for parameter \"work_mem\" (64 .. 2147483647)",
            work_mem / 1024
        )));
    }
    let _work_mem = pool
        .try_reserve(work_mem)
        .ok_or_else(|| JoinError::Memory {
            memory_bytes: pool.limit_bytes(),
            msg: format!("work_mem of {work_mem} bytes is not free"),
        })?;
    let (inner, outer) = if a.bytes() <= b.bytes() {
        (a, b)
    } else {
        (b, a)
    };
    let width = inner.layout.record_bytes() as u64;
    let plan = choose_hash_table_size(inner.rows, width, work_mem);
    let t_len = MINIMAL_TUPLE_HEADER + width;
    let start_ns = store.elapsed_ns();
    let mut j = PgJoin {
        store,
        spec,
        layout: inner.layout,
        saved_bytes: 4 + t_len as usize,
        table_bytes: HJTUPLE_OVERHEAD + t_len,
        space_allowed: plan.space_allowed_bytes,
        nbatch: plan.nbatch,
        curbatch: 0,
        grow_enabled: true,
        table: Table::new(plan.nbuckets),
        inner_files: (0..plan.nbatch).map(|_| None).collect(),
        outer_files: (0..plan.nbatch).map(|_| None).collect(),
        inner_rows: inner.rows,
        outer_rows: outer.rows,
        result: JoinResult {
            input_bytes: a.bytes() + b.bytes(),
            threads: 1,
            initial_batches: plan.nbatch as u32,
            ..Default::default()
        },
        build_rel: inner.relation,
        enc: Vec::new(),
    };
    if inner.layout != outer.layout {
        return Err(JoinError::Config(
            "both inputs must have the same layout".into(),
        ));
    }

    // Build: batch 0 into the table, the rest to the inner batch files.
    scan_input(&mut j, &inner, |j, t| j.insert(t))?;
    if j.table.nbuckets_optimal != j.table.nbuckets() {
        j.table.resize(j.table.nbuckets_optimal);
    }
    // Probe batch 0; the other batches' outer tuples to their files.
    scan_input(&mut j, &outer, |j, t| j.outer(t))?;
    j.result.partition_ns = j.store.elapsed_ns() - start_ns;

    // ExecHashJoinNewBatch, batch after batch (nbatch may grow on the way).
    let mut batch = 1;
    while batch < j.nbatch {
        j.curbatch = batch;
        let inner_file = j.inner_files[batch as usize].take();
        let outer_file = j.outer_files[batch as usize].take();
        match (inner_file, outer_file) {
            (Some(mut inner_file), Some(mut outer_file)) => {
                j.table.reset();
                j.read_back(&mut inner_file, |j, t| j.insert(t))?;
                j.result.bytes_spilled += inner_file.close(j.store)?;
                j.read_back(&mut outer_file, |j, t| j.outer(t))?;
                j.result.bytes_spilled += outer_file.close(j.store)?;
            }
            // An inner join skips a batch missing either side (BufFileClose still flushes
            // the other's last buffer before deleting it).
            (inner_file, outer_file) => {
                for f in [inner_file, outer_file].into_iter().flatten() {
                    j.result.bytes_spilled += f.close(j.store)?;
                }
            }
        }
        batch += 1;
    }
    j.result.partitions = j.nbatch as u32;
    j.result.resident_partitions = 1;
    j.result.spill_files = j.store.stats().spill_files;
    j.result.join_ns = j.store.elapsed_ns() - start_ns - j.result.partition_ns;
    Ok(j.result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn my_log2_is_the_ceiling() {
        assert_eq!(my_log2(1), 0);
        assert_eq!(my_log2(1024), 10);
        assert_eq!(my_log2(1025), 11);
    }

    #[test]
    fn the_paper_s_query_at_4_mb_makes_about_a_thousand_batches() {
        // 40 GB TPC-H database: scale factor ~30, ORDERS 45 M rows; the inner tuple holds
        // the order key and the total price (16 bytes of data).
        let p = choose_hash_table_size(45_000_000, 16, 4 << 20);
        assert_eq!(p.space_allowed_bytes, 4 << 20);
        // tupsize 48; buckets for a full table: 2^my_log2(4,110,418 / 56) = 131,072.
        assert_eq!(p.nbuckets, 131_072);
        // 2.16 GB / (4.11 MB - 1 MB) = 695 -> 1,024 batches.
        assert_eq!(p.nbatch, 1024);
        assert!(p.num_skew_mcvs > 0);
    }

    #[test]
    fn an_inner_side_that_fits_has_one_batch_and_a_bucket_per_tuple() {
        let p = choose_hash_table_size(10_000, 16, 4 << 20);
        assert_eq!((p.nbatch, p.nbuckets), (1, 16_384));
        let p = choose_hash_table_size(10, 16, 4 << 20);
        assert_eq!(p.nbuckets, 1024, "at least 1,024 buckets");
    }

    #[test]
    fn int8_keys_hash_as_int4_of_the_same_value() {
        // hashint8's fold makes small non-negative values hash as their int4.
        assert_eq!(hashint8(42), hash_uint32(42));
        assert_eq!(hashint8(-1), hash_uint32(u32::MAX), "as int4 -1");
        // Spread: 4 batches of 1,024 buckets get a quarter of 100,000 keys each.
        let mut n = [0u32; 4];
        for k in 0..100_000i64 {
            n[((hashint8(k) >> 10) & 3) as usize] += 1;
        }
        assert!(n.iter().all(|&c| (24_000..26_000).contains(&c)), "{n:?}");
    }
}
