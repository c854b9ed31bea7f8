//! The lab's error: each library's error as its own variant (so a caller can tell a full
//! disk from a bad trace), and the lab's own messages.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LabError {
    #[error(transparent)]
    Flash(#[from] flash::FlashError),
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error(transparent)]
    Capture(#[from] trace::capture::CaptureError),
    #[error(transparent)]
    Simfs(#[from] simfs::SimfsError),
    #[error(transparent)]
    Vfs(#[from] vfs::VfsError),
    #[error(transparent)]
    Join(#[from] hashjoin::JoinError),
    #[error(transparent)]
    Tree(#[from] astree::TreeError),
    #[error(transparent)]
    Table(#[from] workloads::tpch::TableError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A file the lab reads or writes itself (report files, work directories).
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The lab's own checks and settings.
    #[error("{0}")]
    Msg(String),
}

impl From<String> for LabError {
    fn from(msg: String) -> Self {
        LabError::Msg(msg)
    }
}

impl From<&str> for LabError {
    fn from(msg: &str) -> Self {
        LabError::Msg(msg.to_string())
    }
}

/// The lab's result.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

impl LabError {
    /// An error of the lab's own file `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> LabError {
        LabError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
