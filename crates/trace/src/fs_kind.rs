//! The file systems a capture can make, with their mkfs programs.

/// The file systems a capture can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
}

impl FsKind {
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
        }
    }

    /// The mkfs program and the Debian package that brings it.
    pub fn mkfs(self) -> (&'static str, &'static str) {
        match self {
            FsKind::Ext4 => ("mkfs.ext4", "e2fsprogs"),
            FsKind::Xfs => ("mkfs.xfs", "xfsprogs"),
            FsKind::Btrfs => ("mkfs.btrfs", "btrfs-progs"),
        }
    }

    /// Options that make mkfs overwrite the image without asking and stay quiet.
    pub(crate) fn mkfs_flags(self) -> &'static [&'static str] {
        match self {
            FsKind::Ext4 => &["-F", "-q"],
            FsKind::Xfs => &["-f", "-q"],
            FsKind::Btrfs => &["-f", "-q"],
        }
    }
}

impl std::str::FromStr for FsKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ext4" => Ok(FsKind::Ext4),
            "xfs" => Ok(FsKind::Xfs),
            "btrfs" => Ok(FsKind::Btrfs),
            _ => Err(format!(
                "unknown file system {s:?}: expected ext4, xfs or btrfs"
            )),
        }
    }
}
