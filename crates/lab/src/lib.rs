//! flashlab's experiments and report.
//!
//! - [`sim`]: the `flashlab sim` driver (fill, warm up, measure).
//! - [`experiments`]: one module per experiment of `flashlab reproduce`.
//! - [`joinrun`]: the `flashlab join` driver (hash join on a backend, repeated).
//! - [`report`]: the HTML/SVG/CSV/JSON report writer.
//! - [`analytic`]: closed-form models the experiments compare against.

pub mod analytic;
pub mod btreerun;
pub mod experiments;
pub mod joinrun;
pub mod kvrun;
pub mod report;
pub mod sim;
