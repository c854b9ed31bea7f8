//! The out-of-core hash join of ORDERS and LINEITEM on the order key.
//!
//! - **Grace**: both inputs are partitioned with hash F1 into N spill files per side, N
//!   chosen so that each build partition's hash table fits the memory left after the read
//!   buffer; then each pair is joined with an in-memory table on hash F2, the smaller side
//!   of the pair building (dynamic role reversal). Each spill file is deleted as soon as
//!   it has been read back.
//! - **Hybrid**: as grace, but as many partitions as the budget allows stay in memory
//!   while the build side is partitioned, and their probe rows are joined at once.
//! - A pair whose build side still does not fit is repartitioned with the next level's
//!   F1 seed; a pair that repartitioning cannot split (one key) is joined by block nested
//!   loops over chunks that fit. Inputs that fit in memory are joined without spilling.
//!
//! Everything held in memory (hash tables, the read buffer, write buffers) is reserved from
//! the [`MemoryPool`] first; the planner sizes partitions from what it can reserve.

use crate::memory::{MemoryPool, Reservation};
use crate::spec::{check_spec, planning_budget, Source, MAX_LEVEL, SKEW_SLACK};
pub use crate::spec::{Algorithm, Input, JoinResult, JoinSpec, Relation};
use crate::store::{FileId, Store};
use crate::table::{rows_fitting, table_bytes, HashTable};
use crate::JoinError;
use workloads::tpch::{Layout, Record};

/// The write-life hint of the spill files one partitioning pass writes at recursion
/// `level`: a pass's files die together (each pair is deleted once joined), and a pass's
/// files live longer than those of the passes below it, which are written and deleted
/// while one of its pairs is joined. So consecutive passes get different hints, in turn
/// SHORT, MEDIUM and LONG (EXTREME stays for long-lived data such as tables; NOT_SET for
/// everything else): on a drive with placement (simfs maps hints to handles), a pass's
/// files fill reclaim units of their own.
pub fn pass_hint(level: u32) -> vfs::WriteHint {
    match level % 3 {
        0 => vfs::WriteHint::Short,
        1 => vfs::WriteHint::Medium,
        _ => vfs::WriteHint::Long,
    }
}

/// Partitioning hash F1 with a seed per recursion level.
#[inline]
pub(crate) fn f1(key: u64, level: u32, n: u32) -> u32 {
    const SEEDS: [u64; 6] = [
        0,
        0x5851_F42D_4C95_7F2D,
        0x1405_7B7E_F767_814F,
        0xD6E8_FEB8_6659_FD93,
        0x2545_F491_4F6C_DD1D,
        0xBF58_476D_1CE4_E5B9,
    ];
    let mut z = key ^ SEEDS[level as usize % SEEDS.len()];
    z = (z ^ (z >> 33)).wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    z = (z ^ (z >> 33)).wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    z ^= z >> 33;
    ((z as u128 * n as u128) >> 64) as u32
}

/// One spill file of a side and the rows it holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piece {
    pub(crate) file: FileId,
    pub(crate) rows: u64,
}

/// One side of a partition pair: its rows in one spill file, or in several (one per thread
/// that partitioned it, in the parallel join).
#[derive(Debug, Clone)]
pub(crate) struct Side {
    pub(crate) pieces: Vec<Piece>,
    pub(crate) layout: Layout,
    pub(crate) relation: Relation,
}

impl Side {
    pub(crate) fn rows(&self) -> u64 {
        self.pieces.iter().map(|p| p.rows).sum()
    }
    fn bytes(&self) -> u64 {
        self.rows() * self.layout.record_bytes() as u64
    }
    /// The pieces as sources to read whole.
    fn sources(&self) -> Vec<Source> {
        self.pieces
            .iter()
            .map(|p| Source {
                file: p.file,
                offset: 0,
                rows: p.rows,
            })
            .collect()
    }
}

pub(crate) struct Join<'a, S: Store> {
    pub(crate) store: &'a mut S,
    pub(crate) pool: &'a MemoryPool,
    pub(crate) spec: &'a JoinSpec,
    pub(crate) result: JoinResult,
}

/// Reads `rows` records of `layout` from `file` at `offset` in read-buffer chunks.
fn scan<S: Store>(
    store: &mut S,
    buf: &mut [u8],
    file: FileId,
    offset: u64,
    rows: u64,
    layout: Layout,
    mut f: impl FnMut(&mut S, Record) -> Result<(), JoinError>,
) -> Result<(), JoinError> {
    let rb = layout.record_bytes();
    let per_read = (buf.len() / rb).max(1) as u64;
    let mut done = 0u64;
    while done < rows {
        let n = per_read.min(rows - done);
        let bytes = (n as usize) * rb;
        let got = store.read_at(file, offset + done * rb as u64, &mut buf[..bytes])?;
        if got < bytes {
            return Err(JoinError::Input(format!(
                "file {file} ended after {} of {rows} rows",
                done + got as u64 / rb as u64
            )));
        }
        for i in 0..n as usize {
            f(store, Record::decode(layout, &buf[i * rb..(i + 1) * rb]))?;
        }
        done += n;
    }
    Ok(())
}

/// Running totals of the join output.
#[derive(Default)]
pub(crate) struct Totals {
    rows: u64,
    orders_cents: i64,
    lineitem_cents: i64,
}

impl Totals {
    #[inline]
    pub(crate) fn add(&mut self, build_rel: Relation, build_price: i64, probe_price: i64) {
        let (o, l) = match build_rel {
            Relation::Orders => (build_price, probe_price),
            Relation::Lineitem => (probe_price, build_price),
        };
        self.rows += 1;
        self.orders_cents += o;
        self.lineitem_cents += l;
    }
}

/// Reads `rows` records into a new hash table.
#[allow(clippy::too_many_arguments)]
fn build_table<S: Store>(
    store: &mut S,
    buf: &mut [u8],
    file: FileId,
    offset: u64,
    rows: u64,
    layout: Layout,
    cpu_ns_per_row: u64,
) -> Result<HashTable, JoinError> {
    let mut table = HashTable::with_capacity(rows);
    scan(store, buf, file, offset, rows, layout, |s, r| {
        s.compute(cpu_ns_per_row);
        table.insert(r.key, r.price_cents);
        Ok(())
    })?;
    Ok(table)
}

/// Probes `table` (built from `build_rel`) with `rows` records of a file.
#[allow(clippy::too_many_arguments)]
fn probe_table<S: Store>(
    store: &mut S,
    buf: &mut [u8],
    table: &HashTable,
    build_rel: Relation,
    file: FileId,
    offset: u64,
    rows: u64,
    layout: Layout,
    cpu_ns_per_row: u64,
) -> Result<Totals, JoinError> {
    let mut t = Totals::default();
    scan(store, buf, file, offset, rows, layout, |s, r| {
        s.compute(cpu_ns_per_row);
        table.for_each_match(r.key, |p| t.add(build_rel, p, r.price_cents));
        Ok(())
    })?;
    Ok(t)
}

impl<'a, S: Store> Join<'a, S> {
    pub(crate) fn new(store: &'a mut S, pool: &'a MemoryPool, spec: &'a JoinSpec) -> Self {
        Join {
            store,
            pool,
            spec,
            result: JoinResult::default(),
        }
    }

    pub(crate) fn add_totals(&mut self, t: Totals) {
        self.result.rows += t.rows;
        self.result.sum_o_totalprice_cents += t.orders_cents;
        self.result.sum_l_extendedprice_cents += t.lineitem_cents;
    }

    fn read_buffer(&self) -> Result<(Reservation, Vec<u8>), JoinError> {
        let r = self.spec.read_buffer_bytes;
        let res = self.pool.try_reserve(r).ok_or_else(|| JoinError::Memory {
            memory_bytes: self.pool.limit_bytes(),
            msg: format!("cannot hold the {r} byte read buffer"),
        })?;
        Ok((res, vec![0u8; r as usize]))
    }

    /// Partitions the rows of `sources` into `n` spill files with F1 at `level`;
    /// partitions below `resident` go to `on_resident` instead.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn partition(
        &mut self,
        sources: &[Source],
        layout: Layout,
        relation: Relation,
        n: u32,
        level: u32,
        resident: u32,
        mut on_resident: impl FnMut(u32, Record),
    ) -> Result<Vec<Side>, JoinError> {
        let rb = layout.record_bytes();
        let w = self.spec.write_buffer_bytes as usize;
        let rows: u64 = sources.iter().map(|s| s.rows).sum();
        let mut sides = Vec::with_capacity(n as usize);
        let expected = (rows * rb as u64).div_ceil(n as u64);
        for p in 0..n {
            if p < resident {
                sides.push(Side {
                    pieces: Vec::new(),
                    layout,
                    relation,
                });
                continue;
            }
            let f = self.store.create()?;
            self.store.set_hint(f, pass_hint(level))?;
            if self.spec.fallocate && expected > 0 {
                // Expected size plus slack, rounded to 4 KiB.
                let want = ((expected as f64 * SKEW_SLACK) as u64).div_ceil(4096) * 4096;
                self.store.fallocate(f, want)?;
            }
            sides.push(Side {
                pieces: vec![Piece { file: f, rows: 0 }],
                layout,
                relation,
            });
        }
        let (_rbuf_res, mut rbuf) = self.read_buffer()?;
        let mut buffers: Vec<Vec<u8>> = (0..n)
            .map(|p| {
                if p < resident {
                    Vec::new()
                } else {
                    Vec::with_capacity(w)
                }
            })
            .collect();
        let cpu = self.spec.cpu_ns_per_row;
        let mut enc = vec![0u8; rb];
        let mut spilled = 0u64;
        for src in sources {
            scan(
                &mut *self.store,
                &mut rbuf,
                src.file,
                src.offset,
                src.rows,
                layout,
                |store, r| {
                    store.compute(cpu);
                    let p = f1(r.key, level, n);
                    if p < resident {
                        on_resident(p, r);
                        return Ok(());
                    }
                    r.encode(layout, &mut enc);
                    let b = &mut buffers[p as usize];
                    b.extend_from_slice(&enc);
                    let piece = &mut sides[p as usize].pieces[0];
                    piece.rows += 1;
                    if b.len() + rb > w {
                        store.append(piece.file, b)?;
                        spilled += b.len() as u64;
                        b.clear();
                    }
                    Ok(())
                },
            )?;
        }
        self.result.bytes_spilled += spilled;
        for p in resident..n {
            let b = &buffers[p as usize];
            if !b.is_empty() {
                self.store.append(sides[p as usize].pieces[0].file, b)?;
                self.result.bytes_spilled += b.len() as u64;
            }
        }
        Ok(sides)
    }

    /// Probes `table` (built from `build_rel`) with every row of `probe`'s files.
    fn probe_side(
        &mut self,
        rbuf: &mut [u8],
        table: &HashTable,
        build_rel: Relation,
        probe: &Side,
    ) -> Result<(), JoinError> {
        for p in &probe.pieces {
            let t = probe_table(
                self.store,
                rbuf,
                table,
                build_rel,
                p.file,
                0,
                p.rows,
                probe.layout,
                self.spec.cpu_ns_per_row,
            )?;
            self.add_totals(t);
        }
        self.result.bytes_read_back += probe.bytes();
        Ok(())
    }

    /// Deletes every spill file of `side`.
    fn delete(&mut self, side: &Side) -> Result<(), JoinError> {
        for p in &side.pieces {
            self.store.delete(p.file)?;
        }
        Ok(())
    }

    /// Builds a table from `build` (its spill files deleted after) and probes it with
    /// `probe` (deleted after).
    fn join_in_memory(
        &mut self,
        build: Side,
        probe: Side,
        _reservation: Reservation,
    ) -> Result<(), JoinError> {
        let (_r, mut rbuf) = self.read_buffer()?;
        let cpu = self.spec.cpu_ns_per_row;
        let mut table = HashTable::with_capacity(build.rows());
        for p in &build.pieces {
            scan(
                self.store,
                &mut rbuf,
                p.file,
                0,
                p.rows,
                build.layout,
                |s, r| {
                    s.compute(cpu);
                    table.insert(r.key, r.price_cents);
                    Ok(())
                },
            )?;
        }
        self.result.bytes_read_back += build.bytes();
        self.delete(&build)?;
        self.probe_side(&mut rbuf, &table, build.relation, &probe)?;
        self.delete(&probe)
    }

    /// Joins one partition pair, recursing or falling back as needed.
    pub(crate) fn join_pair(&mut self, a: Side, b: Side, level: u32) -> Result<(), JoinError> {
        if a.rows() == 0 || b.rows() == 0 {
            self.delete(&a)?;
            return self.delete(&b);
        }
        // Dynamic role reversal: the smaller side builds.
        let (build, probe) = if a.bytes() <= b.bytes() {
            (a, b)
        } else {
            (b, a)
        };
        let rb = build.layout.record_bytes() as u64;
        let need = table_bytes(build.rows(), rb);
        let avail = planning_budget(self.pool, self.spec);
        if need <= avail {
            let res = self
                .pool
                .try_reserve(need)
                .expect("checked available memory");
            return self.join_in_memory(build, probe, res);
        }
        if level >= MAX_LEVEL {
            return self.nested_loops(build, probe);
        }
        // Repartition both sides one level deeper.
        self.result.repartitioned_pairs += 1;
        let n = self.plan_partitions(need, avail)?;
        let bsides = self.partition(
            &build.sources(),
            build.layout,
            build.relation,
            n,
            level,
            0,
            |_, _| {},
        )?;
        self.result.bytes_read_back += build.bytes();
        self.delete(&build)?;
        let psides = self.partition(
            &probe.sources(),
            probe.layout,
            probe.relation,
            n,
            level,
            0,
            |_, _| {},
        )?;
        self.result.bytes_read_back += probe.bytes();
        self.delete(&probe)?;
        let build_rows = build.rows();
        for (bs, ps) in bsides.into_iter().zip(psides) {
            if bs.rows() == build_rows {
                // Nothing was split off: one key (or one F1 value) holds the whole side.
                self.nested_loops(bs, ps)?;
            } else {
                self.join_pair(bs, ps, level + 1)?;
            }
        }
        Ok(())
    }

    /// Block nested loops: the build side in chunks that fit, each chunk against the whole
    /// probe side.
    fn nested_loops(&mut self, build: Side, probe: Side) -> Result<(), JoinError> {
        self.result.nested_loop_pairs += 1;
        let rb = build.layout.record_bytes() as u64;
        let avail = planning_budget(self.pool, self.spec);
        let chunk_rows = rows_fitting(avail, rb).min(build.rows());
        if chunk_rows == 0 {
            return Err(JoinError::Memory {
                memory_bytes: self.pool.limit_bytes(),
                msg: "no memory left for even one row of a nested-loop chunk".into(),
            });
        }
        let _res = self
            .pool
            .try_reserve(table_bytes(chunk_rows, rb))
            .expect("sized from available memory");
        let (_r, mut rbuf) = self.read_buffer()?;
        let cpu = self.spec.cpu_ns_per_row;
        for piece in &build.pieces {
            let mut start = 0;
            while start < piece.rows {
                let n = chunk_rows.min(piece.rows - start);
                let table = build_table(
                    self.store,
                    &mut rbuf,
                    piece.file,
                    start * rb,
                    n,
                    build.layout,
                    cpu,
                )?;
                self.result.bytes_read_back += n * rb;
                self.probe_side(&mut rbuf, &table, build.relation, &probe)?;
                start += n;
            }
        }
        self.delete(&build)?;
        self.delete(&probe)
    }

    /// Partitions for a build side needing `need` bytes of table with `avail` bytes free,
    /// bounded by how many write buffers fit.
    fn plan_partitions(&self, need: u64, avail: u64) -> Result<u32, JoinError> {
        let w = self.spec.write_buffer_bytes;
        let max_by_buffers = avail / w;
        if max_by_buffers < 2 {
            return Err(JoinError::Memory {
                memory_bytes: self.pool.limit_bytes(),
                msg: format!(
                    "after the read buffer, {avail} bytes are left, less than the two {w}-byte write buffers it needs at least; raise --memory or lower --write-buffer"
                ),
            });
        }
        let wanted = ((need as f64 * SKEW_SLACK) / avail as f64).ceil() as u64;
        Ok(wanted.clamp(2, max_by_buffers).min(u32::MAX as u64) as u32)
    }
}

/// Hybrid: how many of `n` partitions (each `table_bytes` in memory) stay resident beside
/// the spilled ones' write buffers (`buffers_per_partition` bytes each) within `avail`;
/// grace keeps none.
pub(crate) fn resident_partitions(
    spec: &JoinSpec,
    n: u32,
    buffers_per_partition: u64,
    table_bytes: u64,
    avail: u64,
) -> u32 {
    if spec.algorithm == Algorithm::Grace {
        return 0;
    }
    let mut k = 0u32;
    while k + 1 < n
        && (n - k - 1) as u64 * buffers_per_partition + (k + 1) as u64 * table_bytes <= avail
    {
        k += 1;
    }
    k
}

/// Joins `a` and `b` (ORDERS and LINEITEM, either order) under `pool`, spilling to
/// `store`.
pub fn hash_join<S: Store>(
    store: &mut S,
    pool: &MemoryPool,
    spec: &JoinSpec,
    a: Input,
    b: Input,
) -> Result<JoinResult, JoinError> {
    check_spec(spec, &a, &b)?;
    if spec.algorithm == Algorithm::Postgres {
        return crate::postgres::postgres_hash_join(store, pool, spec, a, b);
    }
    let (build, probe) = if a.bytes() <= b.bytes() {
        (a, b)
    } else {
        (b, a)
    };
    let start_ns = store.elapsed_ns();
    let mut j = Join {
        store,
        pool,
        spec,
        result: JoinResult {
            input_bytes: a.bytes() + b.bytes(),
            threads: 1,
            ..Default::default()
        },
    };
    let rb = build.layout.record_bytes() as u64;
    let need = table_bytes(build.rows, rb);
    let avail = planning_budget(pool, spec);
    let cpu = spec.cpu_ns_per_row;

    if spec.partitions.is_none() && need <= avail {
        // Everything fits: no spill.
        let _table_res = pool.try_reserve(need).expect("checked available memory");
        let (_r, mut rbuf) = j.read_buffer()?;
        let table = build_table(
            j.store,
            &mut rbuf,
            build.file,
            build.offset_bytes,
            build.rows,
            build.layout,
            cpu,
        )?;
        j.result.partition_ns = j.store.elapsed_ns() - start_ns;
        let t = probe_table(
            j.store,
            &mut rbuf,
            &table,
            build.relation,
            probe.file,
            probe.offset_bytes,
            probe.rows,
            probe.layout,
            cpu,
        )?;
        j.add_totals(t);
        j.result.partitions = 1;
        j.result.resident_partitions = 1;
        j.result.join_ns = j.store.elapsed_ns() - start_ns - j.result.partition_ns;
        return Ok(j.result);
    }

    let n = match spec.partitions {
        Some(n) if n >= 1 => n,
        Some(_) => return Err(JoinError::Config("--partitions must be at least 1".into())),
        None => j.plan_partitions(need, avail)?,
    };
    // Write buffers of the partitioning pass.
    let buffers_bytes = n as u64 * spec.write_buffer_bytes;
    let part_table = table_bytes(build.rows.div_ceil(n as u64), rb);
    let slack_table = (part_table as f64 * SKEW_SLACK) as u64;
    let resident = resident_partitions(spec, n, spec.write_buffer_bytes, slack_table, avail);
    let resident_bytes = resident as u64 * slack_table;
    let _buffers = pool
        .try_reserve((n - resident) as u64 * spec.write_buffer_bytes + resident_bytes)
        .ok_or_else(|| JoinError::Memory {
            memory_bytes: pool.limit_bytes(),
            msg: format!(
                "{n} partitions need {buffers_bytes} bytes of write buffers beside the {} byte read buffer",
                spec.read_buffer_bytes
            ),
        })?;
    j.result.partitions = n;
    j.result.resident_partitions = resident;
    let mut tables: Vec<HashTable> = (0..resident)
        .map(|_| HashTable::with_capacity(build.rows / n as u64 + 16))
        .collect();
    let bsides = j.partition(
        &[build.source()],
        build.layout,
        build.relation,
        n,
        0,
        resident,
        |p, r| {
            tables[p as usize].insert(r.key, r.price_cents);
        },
    )?;
    let mut t = Totals::default();
    let psides = j.partition(
        &[probe.source()],
        probe.layout,
        probe.relation,
        n,
        0,
        resident,
        |p, r| {
            tables[p as usize].for_each_match(r.key, |bp| t.add(build.relation, bp, r.price_cents));
        },
    )?;
    j.add_totals(t);
    drop(tables);
    drop(_buffers);
    j.result.partition_ns = j.store.elapsed_ns() - start_ns;
    for (bs, ps) in bsides.into_iter().zip(psides).skip(resident as usize) {
        j.join_pair(bs, ps, 1)?;
    }
    j.result.spill_files = j.store.stats().spill_files;
    j.result.join_ns = j.store.elapsed_ns() - start_ns - j.result.partition_ns;
    Ok(j.result)
}

#[cfg(test)]
mod tests {
    use super::f1;

    #[test]
    fn f1_spreads_keys_evenly_and_differs_by_level() {
        let n = 16;
        let mut counts = vec![0u32; n as usize];
        for k in 0..160_000u64 {
            counts[f1(k * 32, 0, n) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
        let same = (0..1000u64).filter(|&k| f1(k, 0, n) == f1(k, 1, n)).count();
        assert!(same < 150, "levels must hash independently: {same}");
    }
}
