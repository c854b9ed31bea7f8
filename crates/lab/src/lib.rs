//! flashlab's experiments and report.
//!
//! - [`sim`]: the `flashlab sim` driver (fill, warm up, measure).
//! - [`precondition`]: fill and age a drive before a measurement (`replay`).
//! - [`experiments`]: one module per experiment of `flashlab reproduce`.
//! - [`joinrun`], [`btreerun`], [`kvrun`]: the `join`, `btree` and `kv` drivers, on the
//!   [`backend`] the command line describes; [`deleterun`]: the `simfs` driver.
//! - [`report`]: the HTML/SVG/CSV/JSON report writer.
//! - [`analytic`]: closed-form models the experiments compare against.
//! - [`error`]: [`LabError`], every library's error as its own variant.

pub mod analytic;
pub mod backend;
pub mod btreerun;
pub mod deleterun;
pub mod error;
pub mod experiments;
pub mod joinrun;
pub mod kvrun;
pub mod precondition;
pub mod report;
pub mod rows;
pub mod safe_dir;
pub mod sim;
pub mod timeplot;

pub use error::LabError;
