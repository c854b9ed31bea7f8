//! The join on several threads: the grace/hybrid hash join of [`crate::join`], each thread
//! with its own [`Store`] handle on one set of files (real files in one directory, or one
//! simulated drive whose users the threads are, in virtual time).
//!
//! - **Partition phase**: thread i reads its contiguous range of each input's rows and
//!   writes them to its own spill file per partition through its own write buffers. Every
//!   row is spilled once, as in the serial join, so the spill volume is the serial one's.
//! - **Join phase**: spilled partition p belongs to thread (p - resident) mod T; the other
//!   threads hand their files of it over ([`Store::hand_over`]) and the owner joins the
//!   pair as the serial join does (role reversal, repartitioning, nested loops), planning
//!   its table within its 1/T of the budget.
//! - **Hybrid**: a resident partition is one table per thread (the rows that thread read);
//!   a probe row looks in every thread's table of its partition.
//!
//! Planning: n partitions, so that one partition's table fits a thread's 1/T of the budget
//! (rounded up to a multiple of T, so the threads get equal shares), with T x n write
//! buffers and T read buffers within the budget; where they do not fit, fewer threads. With
//! one thread, or when the build side fits in memory, this is the serial [`hash_join`].
//! The threads meet between phases (on a simulated drive every clock moves to the latest,
//! [`Store::wait_until`]). Totals are sums, so the answer does not depend on which thread
//! joined what.

use crate::join::{resident_partitions, Join, Piece, Side, Totals};
use crate::memory::MemoryPool;
use crate::spec::{check_spec, planning_budget, Source, SKEW_SLACK};
use crate::store::{FileId, Store};
use crate::table::{table_bytes, HashTable};
use crate::{hash_join, Algorithm, Input, JoinError, JoinResult, JoinSpec};

/// How a parallel join runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    threads: u32,
    partitions: u32,
    /// Hybrid: partitions kept in memory while partitioning.
    resident: u32,
    /// Memory of the resident partitions' tables (all threads' together).
    resident_bytes: u64,
}

/// The spec each of `t` threads joins with: its planning share is 1/t of the query's.
fn thread_spec(spec: &JoinSpec, t: u32) -> JoinSpec {
    JoinSpec {
        concurrent_users: spec.concurrent_users.max(1) * t,
        ..spec.clone()
    }
}

/// The plan with `t` threads, if its buffers and tables fit the budget.
fn plan(pool: &MemoryPool, spec: &JoinSpec, build: &Input, t: u32) -> Option<Plan> {
    let users = spec.concurrent_users.max(1) as u64;
    let tu = t as u64;
    let (rb, w) = (spec.read_buffer_bytes, spec.write_buffer_bytes);
    let query_share = (pool.limit_bytes() / users).min(pool.available_bytes());
    // Beside every thread's read buffer.
    let avail = query_share.checked_sub(tu * rb)?;
    // What one thread may plan a table with in the join phase.
    let thread_avail = planning_budget(pool, &thread_spec(spec, t));
    if thread_avail == 0 {
        return None;
    }
    let record = build.layout.record_bytes() as u64;
    let need = table_bytes(build.rows, record);
    let n = match spec.partitions {
        Some(n) => n as u64,
        None => {
            let wanted = ((need as f64 * SKEW_SLACK) / thread_avail as f64).ceil() as u64;
            wanted.max(2).div_ceil(tu) * tu
        }
    };
    if n > u32::MAX as u64 || n * tu * w > avail {
        return None;
    }
    let n = n as u32;
    let part_table =
        (table_bytes(build.rows.div_ceil(n as u64), record) as f64 * SKEW_SLACK) as u64;
    // Every thread has a write buffer per spilled partition.
    let resident = resident_partitions(spec, n, w * tu, part_table, avail);
    Some(Plan {
        threads: t,
        partitions: n,
        resident,
        resident_bytes: resident as u64 * part_table,
    })
}

/// Rows `[lo, hi)` of `rows` for thread `i` of `t`.
fn range(rows: u64, i: usize, t: usize) -> (u64, u64) {
    (rows * i as u64 / t as u64, rows * (i as u64 + 1) / t as u64)
}

/// Rows `[lo, hi)` of `input` as a source.
fn share(input: &Input, lo: u64, hi: u64) -> Source {
    Source {
        file: input.file,
        offset: input.offset_bytes + lo * input.layout.record_bytes() as u64,
        rows: hi - lo,
    }
}

/// The most threads one join runs on.
pub const MAX_THREADS: usize = 256;

/// The plan of a join of `a` and `b` on at most `max_threads` threads: None when one
/// thread does it (the build side fits in memory, or nothing parallel fits the budget).
fn choose_plan(
    pool: &MemoryPool,
    spec: &JoinSpec,
    a: &Input,
    b: &Input,
    max_threads: usize,
) -> Option<Plan> {
    let build = if a.bytes() <= b.bytes() { a } else { b };
    let need = table_bytes(build.rows, build.layout.record_bytes() as u64);
    let fits = spec.partitions.is_none() && need <= planning_budget(pool, spec);
    // PostgreSQL 12's serial hash join runs on one thread (its Parallel Hash is another
    // algorithm, not modelled).
    if max_threads <= 1 || fits || spec.algorithm == Algorithm::Postgres {
        return None;
    }
    (2..=max_threads.min(MAX_THREADS) as u32)
        .rev()
        .find_map(|t| plan(pool, spec, build, t))
}

/// How many threads [`parallel_hash_join`] would run the join of `a` and `b` on, given at
/// most `max_threads`: make only that many stores (each may hold a lock file and
/// descriptors).
pub fn planned_threads(
    pool: &MemoryPool,
    spec: &JoinSpec,
    a: &Input,
    b: &Input,
    max_threads: usize,
) -> usize {
    choose_plan(pool, spec, a, b, max_threads).map_or(1, |p| p.threads as usize)
}

/// Runs `f(i, store i, item i)` on a thread per store. Every store leaves the barrier
/// before any thread starts (so no thread's calls go ahead of a sibling's that has not
/// started yet), and every thread parks its store when done (even on error), so its
/// siblings on one simulated drive never wait for a finished one.
/// The first error (in thread order) is returned, after every thread has finished.
fn on_threads<S, I, R, F>(stores: &mut [S], items: Vec<I>, f: F) -> Result<Vec<R>, JoinError>
where
    S: Store + Send,
    I: Send,
    R: Send,
    F: Fn(usize, &mut S, I) -> Result<R, JoinError> + Sync,
{
    /// Parks the store when the thread ends, however it ends.
    struct ParkOnDrop<'a, S: Store>(&'a mut S);
    impl<S: Store> Drop for ParkOnDrop<'_, S> {
        fn drop(&mut self) {
            self.0.park();
        }
    }
    for store in stores.iter_mut() {
        store.resume();
    }
    // The threads carry this thread's cancellation token: a store on a simulated drive
    // checks it (`VfsStore`), so an interrupt stops every thread of the join.
    let token = trace::cancel::current();
    let results: Vec<Result<R, JoinError>> = std::thread::scope(|s| {
        let (f, token) = (&f, &token);
        let handles: Vec<_> = stores
            .iter_mut()
            .zip(items)
            .enumerate()
            .map(|(i, (store, item))| {
                s.spawn(move || {
                    trace::cancel::with_current(token.as_ref(), || {
                        let guard = ParkOnDrop(store);
                        f(i, &mut *guard.0, item)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(JoinError::Config("a join thread panicked".into())))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// Every store's clock at the latest of them (a barrier); returns that time.
fn meet<S: Store>(stores: &mut [S]) -> u64 {
    let t = stores.iter().map(|s| s.elapsed_ns()).max().unwrap_or(0);
    for s in stores.iter_mut() {
        s.wait_until(t);
    }
    t
}

/// Hands spill file `f` of store `from` to store `to`; returns its id there.
fn hand<S: Store>(
    stores: &mut [S],
    from: usize,
    to: usize,
    f: FileId,
) -> Result<FileId, JoinError> {
    if from == to {
        return Ok(f);
    }
    let (a, b) = if from < to {
        let (lo, hi) = stores.split_at_mut(to);
        (&mut lo[from], &mut hi[0])
    } else {
        let (lo, hi) = stores.split_at_mut(from);
        (&mut hi[0], &mut lo[to])
    };
    let id = a.hand_over(f, b);
    // Opening the file was a call on the receiver's behalf: it waits at the barrier again.
    b.park();
    id
}

/// Adds what one thread did to the join's result.
fn add(total: &mut JoinResult, r: &JoinResult) {
    total.rows += r.rows;
    total.sum_l_extendedprice_cents += r.sum_l_extendedprice_cents;
    total.sum_o_totalprice_cents += r.sum_o_totalprice_cents;
    total.bytes_spilled += r.bytes_spilled;
    total.bytes_read_back += r.bytes_read_back;
    total.repartitioned_pairs += r.repartitioned_pairs;
    total.nested_loop_pairs += r.nested_loop_pairs;
}

/// Joins ORDERS and LINEITEM on `stores.len()` threads under `pool`: `inputs[i]` are the two
/// inputs as store i sees them (the same rows in every store). The stores are handles on
/// one set of files; spill files are removed from whichever store ends up holding them.
pub fn parallel_hash_join<S: Store + Send>(
    stores: &mut [S],
    pool: &MemoryPool,
    spec: &JoinSpec,
    inputs: &[(Input, Input)],
) -> Result<JoinResult, JoinError> {
    if stores.is_empty() || stores.len() != inputs.len() {
        return Err(JoinError::Config(format!(
            "a parallel join needs one store and one pair of inputs per thread ({} stores, {} input pairs)",
            stores.len(),
            inputs.len()
        )));
    }
    let (a, b) = inputs[0];
    check_spec(spec, &a, &b)?;
    if inputs
        .iter()
        .any(|(x, y)| (x.rows, x.layout, y.rows, y.layout) != (a.rows, a.layout, b.rows, b.layout))
    {
        return Err(JoinError::Config(
            "every thread's inputs must hold the same rows".into(),
        ));
    }
    let build_first = a.bytes() <= b.bytes();
    let pick = |(x, y): (Input, Input)| if build_first { (x, y) } else { (y, x) };
    let (build, _) = pick(inputs[0]);
    let plan = choose_plan(pool, spec, &a, &b, stores.len());
    // Every store starts from the latest clock among them (the threads' barrier).
    let start_ns = meet(stores);
    let t = plan.map_or(1, |p| p.threads as usize);
    // Stores without a thread wait aside (users of one simulated drive must not wait for
    // them).
    for s in &mut stores[t..] {
        s.park();
    }
    let Some(plan) = plan else {
        // One thread: the build side fits in memory, or nothing parallel fits the budget.
        return hash_join(&mut stores[0], pool, spec, a, b);
    };
    let stores = &mut stores[..t];
    let (n, k) = (plan.partitions, plan.resident);
    let thread_spec = thread_spec(spec, plan.threads);
    let spec_t = &thread_spec;
    let buffers = pool
        .try_reserve((n - k) as u64 * spec.write_buffer_bytes * t as u64 + plan.resident_bytes)
        .ok_or_else(|| JoinError::Memory {
            memory_bytes: pool.limit_bytes(),
            msg: format!(
                "{t} threads' write buffers for {n} partitions do not fit beside their read buffers"
            ),
        })?;

    // Partition the build side: thread i's rows into its own files (and resident tables).
    let built = on_threads(stores, vec![(); t], |i, store, ()| {
        let (side, _) = pick(inputs[i]);
        let (lo, hi) = range(side.rows, i, t);
        let mut tables: Vec<HashTable> = (0..k)
            .map(|_| HashTable::with_capacity((hi - lo) / n as u64 + 16))
            .collect();
        let mut j = Join::new(store, pool, spec_t);
        let src = share(&side, lo, hi);
        let sides = j.partition(&[src], side.layout, side.relation, n, 0, k, |p, r| {
            tables[p as usize].insert(r.key, r.price_cents)
        })?;
        Ok((sides, tables, j.result))
    })?;
    let mut result = JoinResult {
        input_bytes: a.bytes() + b.bytes(),
        partitions: n,
        resident_partitions: k,
        threads: plan.threads,
        ..Default::default()
    };
    let mut build_sides = Vec::with_capacity(t);
    let mut tables = Vec::with_capacity(t);
    for (sides, tabs, r) in built {
        add(&mut result, &r);
        build_sides.push(sides);
        tables.push(tabs);
    }
    meet(stores);

    // Partition the probe side; resident partitions probe every thread's table.
    let tables = &tables;
    let build_rel = build.relation;
    let probed = on_threads(stores, vec![(); t], |i, store, ()| {
        let (_, side) = pick(inputs[i]);
        let (lo, hi) = range(side.rows, i, t);
        let mut totals = Totals::default();
        let mut j = Join::new(store, pool, spec_t);
        let src = share(&side, lo, hi);
        let sides = j.partition(&[src], side.layout, side.relation, n, 0, k, |p, r| {
            for tabs in tables {
                tabs[p as usize]
                    .for_each_match(r.key, |bp| totals.add(build_rel, bp, r.price_cents));
            }
        })?;
        j.add_totals(totals);
        Ok((sides, j.result))
    })?;
    let mut probe_sides = Vec::with_capacity(t);
    for (sides, r) in probed {
        add(&mut result, &r);
        probe_sides.push(sides);
    }
    drop(buffers);
    let partitioned_ns = meet(stores);
    result.partition_ns = partitioned_ns - start_ns;

    // Each spilled partition to its owner, with the other threads' files of it.
    let mut work: Vec<Vec<(Side, Side)>> = vec![Vec::new(); t];
    for p in k..n {
        let owner = (p - k) as usize % t;
        let mut pair = Vec::with_capacity(2);
        for sides in [&build_sides, &probe_sides] {
            let mut pieces = Vec::with_capacity(t);
            for (i, thread_sides) in sides.iter().enumerate() {
                for piece in &thread_sides[p as usize].pieces {
                    pieces.push(Piece {
                        file: hand(stores, i, owner, piece.file)?,
                        rows: piece.rows,
                    });
                }
            }
            let s = &sides[0][p as usize];
            pair.push(Side {
                pieces,
                layout: s.layout,
                relation: s.relation,
            });
        }
        let probe_side = pair.pop().expect("two sides");
        let build_side = pair.pop().expect("two sides");
        work[owner].push((build_side, probe_side));
    }

    // Join the pairs, each thread its own.
    let joined = on_threads(stores, work, |_, store, pairs| {
        let mut j = Join::new(store, pool, spec_t);
        for (b, p) in pairs {
            j.join_pair(b, p, 1)?;
        }
        Ok(j.result)
    })?;
    for r in &joined {
        add(&mut result, r);
    }
    let end_ns = meet(stores);
    result.join_ns = end_ns - partitioned_ns;
    result.spill_files = stores.iter().map(|s| s.stats().spill_files).sum();
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Relation};
    use workloads::tpch::Layout;

    #[test]
    fn the_join_s_threads_carry_the_caller_s_cancellation_token() {
        let token = trace::Cancel::new();
        let mut stores: Vec<crate::MemStore> = (0..3).map(|_| Default::default()).collect();
        let carried = trace::cancel::with_token(&token, || {
            on_threads(&mut stores, vec![(); 3], |_, _, ()| {
                Ok(trace::cancel::current().is_some())
            })
        })
        .unwrap();
        assert_eq!(carried, [true; 3]);
        // Without one, none.
        let carried = on_threads(&mut stores, vec![(); 3], |_, _, ()| {
            Ok(trace::cancel::current())
        })
        .unwrap();
        assert!(carried.iter().all(Option::is_none));
    }

    fn spec() -> JoinSpec {
        JoinSpec {
            algorithm: Algorithm::Grace,
            read_buffer_bytes: 1 << 20,
            write_buffer_bytes: 64 << 10,
            fallocate: false,
            partitions: None,
            cpu_ns_per_row: 0,
            concurrent_users: 1,
        }
    }

    fn orders(rows: u64) -> Input {
        Input {
            file: 0,
            offset_bytes: 0,
            rows,
            layout: Layout::Columns,
            relation: Relation::Orders,
        }
    }

    #[test]
    fn partitions_fit_a_thread_s_share_and_split_evenly() {
        let pool = MemoryPool::new(24 << 20);
        let build = orders(1_500_000);
        let p = plan(&pool, &spec(), &build, 2).unwrap();
        assert_eq!(p.partitions % 2, 0, "{p:?}");
        let per_table = table_bytes(build.rows.div_ceil(p.partitions as u64), 16);
        assert!(per_table <= (12 << 20) - (1 << 20), "{p:?}");
        // Two write buffers per partition and two read buffers fit the budget.
        assert!(p.partitions as u64 * 2 * (64 << 10) + 2 * (1 << 20) <= 24 << 20);
    }

    #[test]
    fn too_little_memory_for_the_threads_buffers_plans_fewer_threads() {
        // 3 MiB: two read buffers leave 1 MiB, not enough for 2 x n 64 KiB write buffers
        // with tables of 0.5 MiB.
        let pool = MemoryPool::new(3 << 20);
        let build = orders(1_500_000);
        assert!(plan(&pool, &spec(), &build, 2).is_none());
    }

    #[test]
    fn hybrid_keeps_partitions_resident_when_memory_allows() {
        let pool = MemoryPool::new(64 << 20);
        let mut s = spec();
        s.algorithm = Algorithm::Hybrid;
        let p = plan(&pool, &s, &orders(1_500_000), 2).unwrap();
        assert!(p.resident > 0 && p.resident < p.partitions, "{p:?}");
    }
}
