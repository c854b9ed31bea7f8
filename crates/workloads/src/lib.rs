//! Workloads: what the engines and the simulator are fed.
//!
//! - [`tpch`]: TPC-H ORDERS and LINEITEM generated in-process with `tpchgen`, stored in
//!   flashlab's binary table format in one of two record layouts.
//! - [`synthetic`]: seeded address patterns (uniform, sequential, hot/cold, zipf).

pub mod synthetic;
pub mod tpch;
