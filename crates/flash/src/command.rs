//! The commands a device accepts.

/// What a command does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Read,
    Write,
    /// Wait until everything written before is durable on the medium.
    Flush,
    /// Declare the byte range dead (ATA DSM TRIM / NVMe deallocate / Linux discard).
    Trim,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Trim => "trim",
        }
    }
}

/// One command: an operation on a byte range of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub op: Op,
    pub offset_bytes: u64,
    pub len_bytes: u64,
}

impl Command {
    pub fn new(op: Op, offset_bytes: u64, len_bytes: u64) -> Self {
        Command {
            op,
            offset_bytes,
            len_bytes,
        }
    }

    pub fn read(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Read, offset_bytes, len_bytes)
    }

    pub fn write(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Write, offset_bytes, len_bytes)
    }

    pub fn trim(offset_bytes: u64, len_bytes: u64) -> Self {
        Self::new(Op::Trim, offset_bytes, len_bytes)
    }

    pub fn flush() -> Self {
        Self::new(Op::Flush, 0, 0)
    }

    /// Checks that the command's range lies inside a device of `capacity_bytes`.
    pub fn check_range(&self, capacity_bytes: u64) -> Result<(), crate::FlashError> {
        let end = self.offset_bytes.checked_add(self.len_bytes);
        match end {
            Some(end) if self.op == Op::Flush || end <= capacity_bytes => Ok(()),
            _ => Err(crate::FlashError::OutOfRange {
                op: self.op.name(),
                offset_bytes: self.offset_bytes,
                len_bytes: self.len_bytes,
                capacity_bytes,
            }),
        }
    }
}
