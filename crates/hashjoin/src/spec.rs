//! What a join is asked and what it answers: the algorithm, the inputs, the spec (memory,
//! buffers, users) and the result, with the checks and planning rules every algorithm
//! shares ([`crate::join`]'s grace and hybrid, [`crate::postgres`]'s).

use crate::memory::MemoryPool;
use crate::store::FileId;
use crate::JoinError;
use workloads::tpch::Layout;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Grace,
    Hybrid,
    /// PostgreSQL 12's hash join ([`crate::postgres`]).
    Postgres,
}

impl std::str::FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "grace" => Ok(Algorithm::Grace),
            "hybrid" => Ok(Algorithm::Hybrid),
            "postgres" => Ok(Algorithm::Postgres),
            _ => Err(format!(
                "unknown algorithm {s:?}: expected grace, hybrid or postgres"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Orders,
    Lineitem,
}

/// A relation stored in a file of a store: `rows` records of `layout` from `offset_bytes`.
#[derive(Debug, Clone, Copy)]
pub struct Input {
    pub file: FileId,
    pub offset_bytes: u64,
    pub rows: u64,
    pub layout: Layout,
    pub relation: Relation,
}

impl Input {
    pub(crate) fn bytes(&self) -> u64 {
        self.rows * self.layout.record_bytes() as u64
    }
    /// The input's rows as one source.
    pub(crate) fn source(&self) -> Source {
        Source {
            file: self.file,
            offset: self.offset_bytes,
            rows: self.rows,
        }
    }
}

#[derive(Debug, Clone)]
pub struct JoinSpec {
    pub algorithm: Algorithm,
    /// Size of every read of an input or spill file.
    pub read_buffer_bytes: u64,
    /// Output buffer per partition: the size of every spill write.
    pub write_buffer_bytes: u64,
    /// Preallocate each spill file at its expected size.
    pub fallocate: bool,
    /// Force the number of partitions (otherwise planned from memory).
    pub partitions: Option<u32>,
    /// Computation charged per row processed (virtual time on the simulated backend).
    pub cpu_ns_per_row: u64,
    /// Joins sharing the memory pool at once: each plans with its fair share of the
    /// budget (reservations still come from the shared pool).
    pub concurrent_users: u32,
}

/// Memory a join may plan with beside its read buffer: what the pool has free, but no more
/// than its fair share when several joins share the pool.
pub(crate) fn planning_budget(pool: &MemoryPool, spec: &JoinSpec) -> u64 {
    let share = pool.limit_bytes() / spec.concurrent_users.max(1) as u64;
    pool.available_bytes()
        .min(share)
        .saturating_sub(spec.read_buffer_bytes)
}

/// What a join produced and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinResult {
    pub rows: u64,
    pub sum_l_extendedprice_cents: i64,
    pub sum_o_totalprice_cents: i64,
    pub input_bytes: u64,
    pub partitions: u32,
    pub resident_partitions: u32,
    pub spill_files: u64,
    pub bytes_spilled: u64,
    pub bytes_read_back: u64,
    /// Pairs repartitioned because their build side did not fit.
    pub repartitioned_pairs: u32,
    /// Pairs joined by block nested loops (could not be split).
    pub nested_loop_pairs: u32,
    pub partition_ns: u64,
    pub join_ns: u64,
    /// Threads that partitioned and joined (1: the serial join).
    pub threads: u32,
    /// PostgreSQL's join: the batches planned before it ran (`partitions` is how many
    /// there were at the end) and how often their number doubled at run time.
    pub initial_batches: u32,
    pub nbatch_doublings: u32,
}

/// Deepest recursive repartitioning before falling back to nested loops.
pub(crate) const MAX_LEVEL: u32 = 4;
/// Planning slack for uneven partitions.
pub(crate) const SKEW_SLACK: f64 = 1.2;

/// Refuses buffers that cannot hold a record.
pub(crate) fn check_spec(spec: &JoinSpec, a: &Input, b: &Input) -> Result<(), JoinError> {
    if spec.read_buffer_bytes == 0 || spec.write_buffer_bytes == 0 {
        return Err(JoinError::Config(
            "read and write buffers must be at least 1 byte".into(),
        ));
    }
    let record = a.layout.record_bytes().max(b.layout.record_bytes()) as u64;
    if record > spec.write_buffer_bytes || record > spec.read_buffer_bytes {
        return Err(JoinError::Config(
            "buffers must hold at least one record".into(),
        ));
    }
    if spec.partitions == Some(0) {
        return Err(JoinError::Config("--partitions must be at least 1".into()));
    }
    Ok(())
}

/// Rows to read: `rows` records from `offset` of `file`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Source {
    pub(crate) file: FileId,
    pub(crate) offset: u64,
    pub(crate) rows: u64,
}
