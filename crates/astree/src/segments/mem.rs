//! Segments in RAM with [`vfs::MemVfs`]'s crash model, for the crash tests: the crash
//! controls (plans, lost and failing syncs, images) are the file system's, reached with
//! [`VfsSegments::vfs`] and [`VfsSegments::vfs_mut`].

use super::VfsSegments;
use vfs::MemVfs;

/// The files of a crashed [`MemSegments`]: file name → bytes.
pub type SegmentImage = vfs::Image;

/// Segments in RAM with a crash model.
pub type MemSegments = VfsSegments<MemVfs>;

/// The file-name prefix of in-memory segments.
const PREFIX: &str = "seg";

impl MemSegments {
    /// New, empty segments.
    pub fn new() -> Self {
        Self::on(MemVfs::new(), PREFIX, false).expect("an empty file system")
    }

    /// Segments holding exactly `image` (a crash's result), all durable.
    pub fn from_image(image: SegmentImage) -> Self {
        Self::on(MemVfs::from_image(image), PREFIX, false).expect("files in RAM open")
    }

    /// The files after a crash that keeps nothing unsynced.
    pub fn durable_image(&self) -> SegmentImage {
        self.vfs().crash(0, 0)
    }
}

impl Default for MemSegments {
    fn default() -> Self {
        Self::new()
    }
}
