//! Out-of-core hash join (papers 000 and 001): grace, hybrid and PostgreSQL's hash join of TPC-H ORDERS
//! and LINEITEM under a hard memory budget, spilling to real files or to simfs on a
//! simulated drive.
//!
//! - [`spec`]: what a join is asked (algorithm, inputs, memory and buffers) and answers.
//! - [`join`]: the algorithms (partitioning, role reversal, recursion, nested-loop
//!   fallback).
//! - [`store`]: the spill-file backends ([`store::OsStore`], [`store::SimStore`]).
//! - [`postgres`]: PostgreSQL 12's hash join, its batch files as PostgreSQL writes them.
//! - [`parallel`]: the same join on several threads sharing the budget and the files.
//! - [`recorded`]: a serial join's storage calls recorded once and replayed for its
//!   repetitions.
//! - [`memory`]: the memory budget and its reservations.
//! - [`table`]: the in-memory hash table.

pub mod error;
pub mod join;
pub mod memory;
pub mod parallel;
pub mod postgres;
pub mod recorded;
pub mod spec;
pub mod store;
pub mod table;

pub use error::JoinError;
pub use join::{hash_join, Algorithm, Input, JoinResult, JoinSpec, Relation};
pub use memory::MemoryPool;
pub use parallel::{parallel_hash_join, planned_threads, MAX_THREADS};
pub use store::{MemStore, OsStore, SimStore, Store};
