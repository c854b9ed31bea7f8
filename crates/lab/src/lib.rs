//! flashlab's experiments and report.
//!
//! - [`sim`]: the `flashlab sim` driver (fill, warm up, measure).
//! - [`experiments`]: one module per experiment of `flashlab reproduce`.
//! - [`report`]: the HTML/SVG/CSV/JSON report writer.
//! - [`analytic`]: closed-form models the experiments compare against.

pub mod analytic;
pub mod experiments;
pub mod report;
pub mod sim;
