//! The preset TOML calibrate writes: every value followed by a comment that says which
//! probe measured it (with the date and what was probed) or that it is an assumption.

use super::fit::{Basis, Fitted, Param};
use std::fmt::Display;
use std::fmt::Write as _;

/// Who measured, when, on what: the start of every "measured" comment.
pub struct Provenance {
    /// The calendar date of the run (YYYY-MM-DD).
    pub date: String,
    /// The model string of the drive, or the file system and drive of a file.
    pub what: String,
}

impl Provenance {
    fn comment(&self, basis: &Basis) -> String {
        let text = match basis {
            Basis::Measured(probe) => format!(
                "measured by calibrate {}, {}, probe: {probe}",
                self.date, self.what
            ),
            Basis::Bound(probe, why) => format!(
                "measured by calibrate {}, {}, probe: {probe}; a bound, not the value: {why}",
                self.date, self.what
            ),
            Basis::Tied(probe, why) => format!(
                "measured by calibrate {}, {}, probe: {probe}; not alone: {why}",
                self.date, self.what
            ),
            Basis::Assumed(why) => format!("assumed (not identifiable by calibrate): {why}"),
        };
        // A comment ends at the line's end: no line breaks from a model string.
        text.replace(['\n', '\r'], " ")
    }
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(q, "\\u{:04X}", c as u32);
            }
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

struct Out<'a> {
    text: String,
    who: &'a Provenance,
}

impl Out<'_> {
    fn line(&mut self, key: &str, value: impl Display, basis: &Basis) {
        let _ = writeln!(self.text, "{key} = {value}  # {}", self.who.comment(basis));
    }

    fn param<T: Display>(&mut self, key: &str, p: &Param<T>) {
        self.line(key, &p.value, &p.basis);
    }

    fn raw(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }
}

/// The preset's TOML text.
pub fn preset_toml(f: &Fitted, name: &str, description: &str, who: &Provenance) -> String {
    let mut o = Out {
        text: String::new(),
        who,
    };
    o.raw(&format!(
        "# Written by `flashlab calibrate` on {} from {}.",
        who.date,
        who.what.replace(['\n', '\r'], " ")
    ));
    o.raw("# Every value says where it comes from: the probe that measured it (as flashlab's SSD");
    o.raw("# model explains the probe's numbers), a bound where the probe shows no more, or an");
    o.raw("# assumption where no probe can see it. See docs/commands/calibrate.md.");
    let label = |s: &str| Basis::Assumed(s.to_string());
    let _ = writeln!(
        o.text,
        "name = {}  # the preset's name (--name, or the output file's)",
        quoted(name)
    );
    let _ = writeln!(
        o.text,
        "description = {}  # written by calibrate",
        quoted(description)
    );

    o.raw("\n[ssd]");
    o.param("write_cache_bytes", &f.write_cache_bytes);
    o.line(
        "ftl",
        quoted("page"),
        &label("a page-mapped FTL; a hybrid mapping would show only under random writes past the drive's log blocks"),
    );

    o.raw("\n[ssd.geometry]");
    o.param("channels", &f.channels);
    let dies_basis = match &f.dies.basis {
        Basis::Measured(p) => {
            Basis::Measured(format!("{p} ({} dies over the channels)", f.dies.value))
        }
        Basis::Bound(p, why) => Basis::Bound(
            format!("{p} (at least {} dies, over the channels)", f.dies.value),
            why.clone(),
        ),
        Basis::Tied(p, why) => Basis::Tied(
            format!("{p} ({} dies over the channels)", f.dies.value),
            why.clone(),
        ),
        Basis::Assumed(why) => {
            Basis::Assumed(format!("{why} ({} dies over the channels)", f.dies.value))
        }
    };
    o.line(
        "chips_per_channel",
        f.dies.value / f.channels.value,
        &dies_basis,
    );
    o.line(
        "dies_per_chip",
        1,
        &label("only the number of dies is visible, not how they are packaged"),
    );
    o.line(
        "planes_per_die",
        1,
        &label(
            "the model sees only page size times planes (the superpage): page_size_bytes holds it",
        ),
    );
    o.param("pages_per_block", &f.pages_per_block);
    o.param("page_size_bytes", &f.superpage_bytes);
    o.param("mapping_unit_bytes", &f.mapping_unit_bytes);
    o.param("logical_bytes", &f.logical_bytes);
    o.param("op", &f.op);

    o.raw("\n[ssd.timing]");
    o.param("read_ns", &f.read_ns);
    o.param("program_ns", &f.program_ns);
    o.param("erase_ns", &f.erase_ns);
    o.param("channel_bytes_per_s", &f.channel_bytes_per_s);
    o.param("host_bytes_per_s", &f.host_bytes_per_s);
    o.param("command_overhead_ns", &f.command_overhead_ns);
    o.param("write_ack_ns", &f.write_ack_ns);

    match &f.slc {
        Ok(s) => {
            o.raw("\n[ssd.slc_cache]");
            o.param("program_ns", &s.program_ns);
            o.param("max_fraction", &s.max_fraction);
            o.param("bits_per_cell", &s.bits_per_cell);
            o.param("fold_idle_ns", &s.fold_idle_ns);
        }
        Err(basis) => {
            let _ = writeln!(o.text, "\n# No [ssd.slc_cache]: {}", who.comment(basis));
        }
    }

    o.raw("\n[ssd.gc]");
    o.line("policy", quoted(&f.gc.value.to_string()), &f.gc.basis);
    o.param("free_blocks", &f.gc_free_blocks);

    o.raw("\n[ssd.trim]");
    o.param("queued", &f.trim_queued);
    o.param("command_overhead_ns", &f.trim_command_overhead_ns);
    o.param("per_page_ns", &f.trim_per_page_ns);
    o.param("settle_ns", &f.trim_settle_ns);
    o.text
}
