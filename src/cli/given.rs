//! Which flags the user gave on the command line (not defaults), so that a flag that
//! would do nothing in the combination given is refused by name instead of ignored.

use clap::parser::ValueSource;
use clap::ArgMatches;
use std::cell::RefCell;

thread_local! {
    /// The matches of the command this thread runs (the command line's main thread, or
    /// the thread a library call runs its command on: each call its own).
    static SUBCOMMAND: RefCell<Option<ArgMatches>> = const { RefCell::new(None) };
}

/// Keeps the subcommand's matches for this thread's command (in `main`, and per call in
/// [`crate::api`]).
pub(crate) fn remember(matches: &ArgMatches) {
    let m = matches.subcommand().map(|(_, m)| m.clone());
    SUBCOMMAND.with(|s| *s.borrow_mut() = m);
}

/// Whether the flag with clap id `id` (the field's name, `io_scheduler`) was given on the
/// command line.
pub(crate) fn given(id: &str) -> bool {
    SUBCOMMAND.with(|s| {
        s.borrow().as_ref().is_some_and(|m| {
            m.ids().any(|i| i.as_str() == id)
                && m.value_source(id) == Some(ValueSource::CommandLine)
        })
    })
}

/// `--io-scheduler` for `io_scheduler`.
pub(crate) fn flag(id: &str) -> String {
    format!("--{}", id.replace('_', "-"))
}

/// The first of `ids` given on the command line, as a flag.
pub(crate) fn first_given(ids: &[&str]) -> Option<String> {
    ids.iter().find(|id| given(id)).map(|id| flag(id))
}
