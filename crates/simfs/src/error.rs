//! simfs errors.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimfsError {
    #[error("no space left: {needed_blocks} blocks of 4 KiB needed, {free_blocks} free")]
    NoSpace {
        needed_blocks: u64,
        free_blocks: u64,
    },
    #[error("no contiguous run of {needed_blocks} free blocks of 4 KiB: the longest is {longest_free_run} ({free_blocks} free in all)")]
    NoContiguousRun {
        needed_blocks: u64,
        longest_free_run: u64,
        free_blocks: u64,
    },
    #[error("no free inode left ({inodes} in the file system)")]
    NoInodes { inodes: u32 },
    #[error("no file named {0:?}")]
    NotFound(String),
    #[error("a file named {0:?} exists already")]
    Exists(String),
    #[error("invalid file-system configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Invalid(String),
    #[error("device: {0}")]
    Device(#[from] flash::FlashError),
}
