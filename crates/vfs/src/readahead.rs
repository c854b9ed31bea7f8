//! Readahead, after Linux's mm/readahead.c: a read that starts where the previous one of
//! the same open file ended is sequential. Its first miss reads a window larger than the
//! request (the request rounded up to a power of two, ×4 when small, ×2 when medium, at
//! most `read_ahead_kb`); the window's tail is its *async* part, and when the reader
//! reaches it, the next window (×4 while small, ×2 up to the maximum) is requested in the
//! background while the reader goes on with the pages it has.

/// Linux's default `read_ahead_kb` (128 KiB), in pages.
pub const DEFAULT_MAX_PAGES: u64 = 32;

/// One open file's readahead state, in pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readahead {
    /// The current window: its first page and size; reading page `start + size -
    /// async_size` starts the next window.
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    /// Where the previous read ended (a read starting here is sequential).
    pub next_expected: u64,
}

/// What the readahead logic asks for: a window to read now (the caller waits) or in the
/// background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Sync { first: u64, pages: u64 },
    Async { first: u64, pages: u64 },
}

/// The first window for a request of `req` pages (get_init_ra_size).
pub fn initial_size(req: u64, max: u64) -> u64 {
    let size = req.max(1).next_power_of_two();
    if size <= max / 32 {
        size * 4
    } else if size <= max / 4 {
        size * 2
    } else {
        max
    }
    .min(max)
}

/// The window after one of `cur` pages (get_next_ra_size).
pub fn next_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
    .min(max)
}

impl Readahead {
    /// A read of pages `first..end`, `missing_first` telling whether its first page is not
    /// cached: the windows to read (besides the request itself), in order.
    pub fn on_read(&mut self, first: u64, end: u64, missing_first: bool, max: u64) -> Vec<Window> {
        let sequential = first == self.next_expected;
        self.next_expected = end;
        let mut out = Vec::new();
        if max == 0 {
            return out;
        }
        if missing_first && (sequential || first == 0) {
            // A sequential miss: start a window here.
            let size = initial_size(end - first, max).max(end - first);
            self.start = first;
            self.size = size;
            self.async_size = size.saturating_sub(end - first);
            out.push(Window::Sync { first, pages: size });
        } else if !missing_first && !sequential {
            return out; // a random read that hit the cache: nothing to read ahead
        }
        // Reaching the async part starts the next window in the background.
        let marker = self.start + self.size - self.async_size;
        if sequential && self.size > 0 && (first..end.max(first + 1)).contains(&marker) {
            let size = next_size(self.size, max);
            self.start += self.size;
            self.size = size;
            self.async_size = size;
            out.push(Window::Async {
                first: self.start,
                pages: size,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_grow_as_linux_grows_them() {
        assert_eq!(initial_size(1, 32), 4);
        assert_eq!(initial_size(4, 32), 8);
        assert_eq!(initial_size(16, 32), 32);
        assert_eq!(next_size(4, 32), 8);
        assert_eq!(next_size(8, 32), 16);
        assert_eq!(next_size(16, 32), 32);
        assert_eq!(next_size(32, 32), 32);
    }

    #[test]
    fn a_sequential_reader_gets_a_sync_window_then_background_ones() {
        let mut ra = Readahead::default();
        assert_eq!(
            ra.on_read(0, 1, true, 32),
            vec![Window::Sync { first: 0, pages: 4 }]
        );
        // Page 1 is the async marker (window 0..4, async part 1..4).
        assert_eq!(
            ra.on_read(1, 2, false, 32),
            vec![Window::Async { first: 4, pages: 8 }]
        );
        assert!(ra.on_read(2, 3, false, 32).is_empty());
        assert!(ra.on_read(3, 4, false, 32).is_empty());
        assert_eq!(
            ra.on_read(4, 5, false, 32),
            vec![Window::Async {
                first: 12,
                pages: 16
            }]
        );
        // A jump elsewhere that hits the cache reads nothing ahead.
        assert!(ra.on_read(100, 101, false, 32).is_empty());
    }
}
