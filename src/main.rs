//! The `flashlab` command line: simulate drives, replay traces, reproduce the papers
//! (the commands live in the library, [`flashlab::run_cli`]).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (index 15 of `mi_option_e` in its v2 and v3
/// `mimalloc.h`): how long freed memory waits before it goes back to the kernel.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory stays with the allocator for reuse, never handed back: with mimalloc's
/// default (back after about 10 s) one simulated run's files were returned and the next
/// run's faulted in again, the kernel zeroing every page (16% of the full-scale `astree`
/// experiment's time in `clear_page`, 5% after). The process's peak memory is unchanged;
/// it keeps that peak until it ends.
fn keep_freed_memory() {
    // SAFETY: sets an option of the allocator linked in; any value is valid for it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

fn main() {
    keep_freed_memory();
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
        assert_eq!(delay, -1);
    }
}
