//! Errors of the join and its spill files.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum JoinError {
    #[error("spill directory {dir}: {msg}")]
    Dir { dir: String, msg: String },
    #[error("disk full while writing spill file {path}: no space left on the device of {dir}")]
    DiskFull { dir: String, path: String },
    /// `share` says whose cap it is when the run's cap is split among threads.
    #[error("spill cap reached: {who} would hold {needed_bytes} bytes of spill files, the cap is {cap_bytes} bytes{share}")]
    DiskCap {
        who: &'static str,
        needed_bytes: u64,
        cap_bytes: u64,
        share: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("memory budget of {memory_bytes} bytes is too small: {msg}")]
    Memory { memory_bytes: u64, msg: String },
    #[error("invalid join settings: {0}")]
    Config(String),
    #[error("input: {0}")]
    Input(String),
    #[error("simulated storage: {0}")]
    Sim(#[from] simfs::SimfsError),
    #[error("interrupted")]
    Interrupted,
}
