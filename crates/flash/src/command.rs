//! The commands a device accepts.

use std::sync::Arc;

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    /// Wait until everything written before is durable on the medium.
    Flush,
    /// Declare the byte range dead (ATA DSM TRIM / NVMe deallocate / Linux discard).
    Trim,
    /// Vectored TRIM (paper 002): many ranges in one command, sent as a 4 KiB write to a
    /// reserved logical page; the ranges travel in [`Payload::Ranges`].
    VTrim,
    /// File-based TRIM (paper 002): only an inode number ([`Payload::Inode`]) goes to the
    /// drive, which reads the file system's metadata from flash to find the extents.
    FTrim,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
            Op::VTrim => "vtrim",
            Op::FTrim => "ftrim",
        }
    }

    /// Whether the command belongs to the TRIM family.
    pub fn is_trim(self) -> bool {
        matches!(self, Op::Trim | Op::VTrim | Op::FTrim)
    }
}

/// A byte range of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteRange {
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

/// What a command carries besides its range.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Payload {
    #[default]
    None,
    /// The ranges of a vectored TRIM.
    Ranges(Arc<[ByteRange]>),
    /// The inode number of a file-based TRIM.
    Inode(u32),
    /// Bytes written (kept by the drive, so that fTrim can read file-system metadata back).
    Data(Arc<[u8]>),
}

/// One command: an operation on a byte range of the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub payload: Payload,
    /// The placement handle of a write (NVMe FDP's reclaim unit handle, carried in a
    /// write's placement identifier): on a drive with `[ssd.fdp]` the write goes to that
    /// handle's write frontiers ([`crate::ftl`]). 0, the default, is today's single
    /// frontier; a drive without FDP refuses any other.
    pub handle: u16,
}

/// Size of the vTrim/fTrim command page (one 4 KiB write to the reserved last page).
pub const TRIM_COMMAND_PAGE_BYTES: u64 = 4096;

impl Command {
    pub fn new(op: Op, offset_bytes: u64, len_bytes: u64) -> Self {
        Command {
            op,
            offset_bytes,
            len_bytes,
            payload: Payload::None,
            handle: 0,
        }
    }

    /// The same command on placement handle `handle` (see [`Command::handle`]).
    pub fn on_handle(mut self, handle: u16) -> Self {
        self.handle = handle;
        self
    }

    pub fn read(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Read, offset_bytes, len_bytes)
    }

    pub fn write(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Write, offset_bytes, len_bytes)
    }

    /// A write whose bytes the drive keeps (file-system metadata).
    pub fn write_data(offset_bytes: u64, data: Arc<[u8]>) -> Self {
        Command {
            op: Op::Write,
            offset_bytes,
            len_bytes: data.len() as u64,
            payload: Payload::Data(data),
            handle: 0,
        }
    }

    pub fn trim(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Trim, offset_bytes, len_bytes)
    }

    pub fn flush() -> Self {
        Self::new(Op::Flush, 0, 0)
    }

    /// A vectored TRIM of `ranges`; the command itself is a 4 KiB write to the device's
    /// reserved last page, which the caller names with `command_page_offset`.
    pub fn vtrim(command_page_offset: u64, ranges: Vec<ByteRange>) -> Self {
        Command {
            op: Op::VTrim,
            offset_bytes: command_page_offset,
            len_bytes: TRIM_COMMAND_PAGE_BYTES,
            payload: Payload::Ranges(ranges.into()),
            handle: 0,
        }
    }

    /// A file-based TRIM of inode `inode`, sent to the reserved last page.
    pub fn ftrim(command_page_offset: u64, inode: u32) -> Self {
        Command {
            op: Op::FTrim,
            offset_bytes: command_page_offset,
            len_bytes: TRIM_COMMAND_PAGE_BYTES,
            payload: Payload::Inode(inode),
            handle: 0,
        }
    }

    /// The ranges of a vectored TRIM (empty for other commands).
    pub fn ranges(&self) -> &[ByteRange] {
        match &self.payload {
            Payload::Ranges(r) => r,
            _ => &[],
        }
    }

    /// Checks that the command's range (and a vTrim's ranges) lie inside a device of
    /// `capacity_bytes`.
    pub fn check_range(&self, capacity_bytes: u64) -> Result<(), crate::FlashError> {
        let fits = |off: u64, len: u64| {
            off.checked_add(len)
                .is_some_and(|end| end <= capacity_bytes)
        };
        let ok = self.op == Op::Flush
            || (fits(self.offset_bytes, self.len_bytes)
                && self
                    .ranges()
                    .iter()
                    .all(|r| fits(r.offset_bytes, r.len_bytes)));
        if ok {
            Ok(())
        } else {
            Err(crate::FlashError::OutOfRange {
                op: self.op.name(),
                offset_bytes: self.offset_bytes,
                len_bytes: self.len_bytes,
                capacity_bytes,
            })
        }
    }
}
