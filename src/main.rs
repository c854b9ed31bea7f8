//! The `flashlab` command line: simulate drives, replay traces, reproduce the papers
//! (the commands live in the library, [`flashlab::run_cli`]).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (index 15 of `mi_option_e` in its v2 and v3
/// `mimalloc.h`): how long freed memory waits before it goes back to the kernel.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory stays with the allocator for reuse, not handed back on its own: with
/// mimalloc's default (back after about a second) one simulated run's files were returned
/// and the next run's faulted in again, the kernel zeroing every page (16% of the
/// full-scale `astree` experiment's time in `clear_page`, 5% after). The delay is a
/// million seconds rather than "never" (-1): a negative delay does not even mark freed
/// memory for purging, and [`give_back_freed_memory`] could not hand it back later (v3's
/// arena.c, `mi_arena_schedule_purge`).
const KEEP_FREED_MS: std::os::raw::c_long = 1_000_000_000;

fn keep_freed_memory() {
    // SAFETY: sets an option of the allocator linked in; any value is valid for it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, KEEP_FREED_MS) }
}

/// Hands the memory mimalloc holds freed back to the kernel now (a forced collection
/// purges every range marked, whatever its delay): before a paper-scale report's
/// experiment that runs alone, whose jobs are counted against the memory the kernel says
/// is available.
fn give_back_freed_memory() {
    // SAFETY: asks the allocator linked in to collect its freed memory; valid at any time
    // from any thread.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

fn main() {
    keep_freed_memory();
    lab::experiments::set_give_back_freed_memory(give_back_freed_memory);
    flashlab::run_cli();
}

#[cfg(test)]
mod tests {
    #[test]
    fn option_15_is_mimallocs_purge_delay() {
        // v3's default purge delay is 1,000 ms (options.c); nothing in the tests sets it.
        // SAFETY: reads an option of the allocator linked in.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, 1000);
        super::keep_freed_memory();
        // SAFETY: as above.
        let delay = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, super::KEEP_FREED_MS);
        // In one test: the option is the process's.
        freed_memory_is_kept_until_given_back();
    }

    /// This process's resident memory, in bytes.
    fn resident_bytes() -> u64 {
        let m = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = m.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace()
            .nth(1)
            .unwrap()
            .parse::<u64>()
            .unwrap()
            * 1024
    }

    fn freed_memory_is_kept_until_given_back() {
        let before = resident_bytes();
        // 512 MiB touched in 8 MiB pieces, then freed.
        let pieces: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8 | 1; 8 << 20]).collect();
        let touched: u64 = pieces.iter().map(|p| p[4096] as u64).sum();
        assert!(touched > 0);
        let peak = resident_bytes();
        assert!(peak >= before + (400 << 20), "peak {peak} before {before}");
        drop(pieces);
        let kept = resident_bytes();
        assert!(
            kept >= before + (400 << 20),
            "freed memory went back: {kept} of {peak}"
        );
        super::give_back_freed_memory();
        let after = resident_bytes();
        assert!(
            after < before + (100 << 20),
            "kept {after} after giving back (before {before}, peak {peak})"
        );
    }
}
