//! Which flags the user gave on the command line (not defaults), so that a flag that
//! would do nothing in the combination given is refused by name instead of ignored.

use clap::parser::ValueSource;
use clap::ArgMatches;
use std::sync::OnceLock;

static SUBCOMMAND: OnceLock<ArgMatches> = OnceLock::new();

/// Keeps the subcommand's matches (once, in `main`).
pub(crate) fn remember(matches: &ArgMatches) {
    if let Some((_, m)) = matches.subcommand() {
        let _ = SUBCOMMAND.set(m.clone());
    }
}

/// Whether the flag with clap id `id` (the field's name, `io_scheduler`) was given on the
/// command line.
pub(crate) fn given(id: &str) -> bool {
    SUBCOMMAND.get().is_some_and(|m| {
        m.ids().any(|i| i.as_str() == id) && m.value_source(id) == Some(ValueSource::CommandLine)
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
