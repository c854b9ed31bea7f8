//! The grammar of every job option's value flashlab takes: numbers, sizes, enumerations
//! and booleans as fio reads them, and free text (a file or job name) of at most
//! [`MAX_TEXT_BYTES`] printable ASCII bytes without whitespace or `$`.
//!
//! Nothing reaches fio's job file that is not checked here: a value that kept whitespace
//! or ran past fio's 8 KiB line buffer could be read by fio as an option of its own
//! (`exec_prerun=...`, `write_bw_log=...`), so a value is either one of these shapes or
//! refused, naming its key.

/// Longest free-text value (a file name, a job name): a path component's limit.
pub(crate) const MAX_TEXT_BYTES: usize = 255;

/// Longest value of any option: with its key, a line written for fio stays well under
/// the 4 KiB flashlab allows (fio's own line buffer holds 8 KiB).
pub(crate) const MAX_VALUE_BYTES: usize = 3072;

/// Longest `description` (dropped before fio; kept for the report).
const MAX_DESCRIPTION_BYTES: usize = 1024;

/// fio's I/O patterns (`rw=`), each optionally `:N` (a sequential job's gap or a random
/// one's run of N sequential blocks).
const RW: &[&str] = &[
    "read",
    "write",
    "trim",
    "randread",
    "randwrite",
    "randtrim",
    "rw",
    "readwrite",
    "randrw",
    "trimwrite",
    "randtrimwrite",
];

/// fio's random distributions (`random_distribution=`), each optionally `:PARAMS`.
const DISTRIBUTIONS: &[&str] = &[
    "random",
    "zipf",
    "pareto",
    "normal",
    "gauss",
    "zoned",
    "zoned_abs",
];

/// How a key's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// 1/0, true/false, yes/no, on/off; a bare key is true.
    Bool,
    /// A whole number, optionally with a unit suffix (fio reads `1k` as 1024 here too).
    Number,
    /// A whole percentage, 0 to 100.
    Percent,
    /// A size: a whole or hex number with an optional unit (`4k`, `1GiB`, `0x1000`).
    Size,
    /// Up to three sizes separated by commas (read, write, trim); an entry may be empty.
    SizeList,
    /// Up to three `MIN-MAX` size ranges separated by commas.
    RangeList,
    /// Up to three `SIZE/PERCENT:SIZE/PERCENT...` lists separated by commas.
    Split,
    /// One of [`RW`], optionally `:N`.
    Pattern,
    /// One of [`DISTRIBUTIONS`], optionally `:PARAMS`.
    Distribution,
    /// A name: a file, a job, an engine.
    Text,
    /// Free words, dropped before fio.
    Description,
}

fn shape(key: &str) -> Option<Shape> {
    use Shape::*;
    Some(match key {
        "norandommap" | "randrepeat" | "direct" | "buffered" | "thread" | "group_reporting" => Bool,
        "number_ios" | "loops" | "randseed" | "fsync" | "fdatasync" | "iodepth" | "numjobs" => {
            Number
        }
        "rwmixread" | "rwmixwrite" => Percent,
        "size" | "io_size" | "io_limit" | "offset" => Size,
        "bs" | "blocksize" | "blockalign" | "ba" => SizeList,
        "bsrange" | "blocksize_range" => RangeList,
        "bssplit" => Split,
        "rw" | "readwrite" => Pattern,
        "random_distribution" => Distribution,
        "name" | "filename" | "directory" | "ioengine" => Text,
        "description" => Description,
        _ => return None,
    })
}

/// Checks `value` against `key`'s grammar; `Err` says what was expected.
pub(crate) fn check(key: &str, value: Option<&str>) -> Result<(), String> {
    let Some(shape) = shape(key) else {
        // Only keys flashlab takes reach here; one without a grammar is a bug.
        return Err(format!("option `{key}` has no value grammar in flashlab"));
    };
    if let Some(v) = value.filter(|v| v.len() > MAX_VALUE_BYTES) {
        return Err(format!(
            "{key}: a value of {} bytes; at most {MAX_VALUE_BYTES}",
            v.len()
        ));
    }
    let Some(v) = value else {
        return match shape {
            Shape::Bool => Ok(()),
            _ => Err(format!("{key} needs a value ({})", expected(shape))),
        };
    };
    let ok = match shape {
        Shape::Bool => is_bool(v),
        Shape::Number => is_size(v),
        Shape::Percent => v.parse::<u8>().is_ok_and(|p| p <= 100),
        Shape::Size => is_size(v),
        Shape::SizeList => list(v, |e| e.is_empty() || is_size(e)),
        Shape::RangeList => list(v, |e| {
            e.is_empty()
                || e.split_once('-')
                    .is_some_and(|(a, b)| is_size(a) && is_size(b))
        }),
        Shape::Split => list(v, |group| {
            !group.is_empty() && group.split(':').all(is_split_entry)
        }),
        Shape::Pattern => {
            let (name, gap) = v.split_once(':').unwrap_or((v, "0"));
            RW.contains(&name) && is_size(gap)
        }
        Shape::Distribution => {
            let (name, params) = v.split_once(':').unwrap_or((v, "0"));
            DISTRIBUTIONS.contains(&name)
                && !params.is_empty()
                && params
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".,/:%-".contains(c))
        }
        Shape::Text if key == "name" => return job_name(key, v),
        Shape::Text => return text(key, v),
        Shape::Description => {
            return if v.len() <= MAX_DESCRIPTION_BYTES && !v.chars().any(char::is_control) {
                Ok(())
            } else {
                Err(format!(
                    "{key}: at most {MAX_DESCRIPTION_BYTES} bytes without control characters"
                ))
            };
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{key}={}: expected {}", shown(v), expected(shape)))
    }
}

/// A free-text value (a file or job name): printable ASCII without whitespace or `$`
/// (fio would read `${VAR}` from the environment, and fio seeds its distributions from
/// the file's name, so the run would depend on the environment).
pub(crate) fn text(what: &str, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if v.len() > MAX_TEXT_BYTES {
        return Err(format!(
            "{what} is {} bytes long; at most {MAX_TEXT_BYTES}",
            v.len()
        ));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '$' | ';' | '#'))
    {
        return Err(format!(
            "{what}={}: {}; a name is printable ASCII without whitespace, `$`, `;` or `#` (fio takes `$` for an environment variable and cuts a line at `;` or `#`)",
            shown(v),
            match c {
                c if c.is_whitespace() => "holds whitespace".to_string(),
                c => format!("holds `{c}`"),
            }
        ));
    }
    Ok(())
}

/// A job's name (a section's, or `name=`): a [`text`] without `:`, since fio names the
/// job's file after it when it gives none, and reads `:` in a file name as a list of files.
pub(crate) fn job_name(what: &str, v: &str) -> Result<(), String> {
    text(what, v)?;
    if v.contains(':') {
        return Err(format!(
            "{what}={}: holds `:`; fio names the job's file after the job and reads `:` there as a list of files",
            shown(v)
        ));
    }
    Ok(())
}

/// The value as an error shows it: at most 60 characters, quoted where it has spaces.
fn shown(v: &str) -> String {
    let cut: String = v.chars().take(60).collect();
    let cut = if cut.len() < v.len() {
        format!("{cut}...")
    } else {
        cut
    };
    if cut.contains(|c: char| !c.is_ascii_graphic()) {
        format!("{cut:?}")
    } else {
        cut
    }
}

fn expected(shape: Shape) -> String {
    match shape {
        Shape::Bool => "1 or 0".into(),
        Shape::Number => "a whole number (e.g. 8 or 1k)".into(),
        Shape::Percent => "a whole percentage from 0 to 100".into(),
        Shape::Size => "a size in bytes (e.g. 4k, 1m, 1GiB, 0x1000)".into(),
        Shape::SizeList => "a size, or up to three (read,write,trim) separated by commas".into(),
        Shape::RangeList => "a range MIN-MAX (e.g. 4k-64k), or up to three separated by commas".into(),
        Shape::Split => "SIZE/PERCENT entries separated by `:` (e.g. 4k/50:64k/50), up to three lists separated by commas".into(),
        Shape::Pattern => format!("one of {}, optionally :N", RW.join(", ")),
        Shape::Distribution => format!(
            "one of {}, optionally :PARAMETERS (e.g. zipf:1.2)",
            DISTRIBUTIONS.join(", ")
        ),
        Shape::Text => format!("a name of at most {MAX_TEXT_BYTES} printable ASCII bytes"),
        Shape::Description => "text".into(),
    }
}

fn is_bool(v: &str) -> bool {
    matches!(
        v.to_ascii_lowercase().as_str(),
        "1" | "0" | "true" | "false" | "yes" | "no" | "on" | "off"
    )
}

/// Up to three comma-separated entries, each `ok`.
fn list(v: &str, ok: impl Fn(&str) -> bool) -> bool {
    v.split(',').count() <= 3 && v.split(',').all(ok)
}

/// `SIZE`, `SIZE/` or `SIZE/PERCENT` (a percentage may have decimals).
fn is_split_entry(e: &str) -> bool {
    let (size, pct) = e.split_once('/').unwrap_or((e, ""));
    is_size(size)
        && (pct.is_empty()
            || (pct.len() <= 8
                && pct.chars().all(|c| c.is_ascii_digit() || c == '.')
                && pct.parse::<f64>().is_ok_and(|p| (0.0..=100.0).contains(&p))))
}

/// A whole decimal or hex number with an optional unit: k, m, g, t, p, e (any case),
/// each optionally followed by `i`, `b` or `ib`; or a bare `b`.
fn is_size(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        return !hex.is_empty() && hex.len() <= 16 && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    let digits = lower.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 20 {
        return false;
    }
    matches!(
        &lower[digits..],
        "" | "b"
            | "k"
            | "kb"
            | "ki"
            | "kib"
            | "m"
            | "mb"
            | "mi"
            | "mib"
            | "g"
            | "gb"
            | "gi"
            | "gib"
            | "t"
            | "tb"
            | "ti"
            | "tib"
            | "p"
            | "pb"
            | "pi"
            | "pib"
            | "e"
            | "eb"
            | "ei"
            | "eib"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_of_each_shape_are_taken() {
        for (k, v) in [
            ("size", "1m"),
            ("size", "1GiB"),
            ("offset", "0x1000"),
            ("bs", "4k"),
            ("bs", "4k,8k"),
            ("bs", ",8k"),
            ("bsrange", "4k-64k,8k-16k"),
            ("bssplit", "4k/10:64k/50:32k/40"),
            ("bssplit", "4k/:64k/,8k"),
            ("bssplit", "4k/12.5:8k/87.5"),
            ("rw", "randwrite"),
            ("rw", "write:4k"),
            ("rwmixread", "70"),
            ("random_distribution", "zipf:1.2"),
            ("random_distribution", "zoned:60/10:30/20:10/70"),
            ("random_distribution", "random"),
            ("norandommap", "1"),
            ("randseed", "1234"),
            ("number_ios", "1k"),
            ("filename", "/dev/disk/by-id/nvme-x\\:y"),
            ("name", "job-1"),
            ("description", "random 4k writes, one job"),
        ] {
            assert_eq!(check(k, Some(v)), Ok(()), "{k}={v}");
        }
        assert_eq!(check("thread", None), Ok(()));
    }

    #[test]
    fn values_that_are_not_of_their_shape_are_refused_by_key() {
        let padded = format!("write{}exec_prerun=touch /tmp/x", " ".repeat(10000));
        for (k, v) in [
            ("rw", padded.as_str()),
            ("rw", "write exec_prerun=x"),
            ("rw", "writes"),
            ("size", "1m 2m"),
            ("size", "(1024*4)"),
            ("size", "-1"),
            ("bs", "4k,4k,4k,4k"),
            ("bsrange", "4k"),
            ("bssplit", "4k/200"),
            ("rwmixread", "101"),
            ("random_distribution", "zipf:"),
            ("random_distribution", "zipf:1.2 x"),
            ("norandommap", "maybe"),
            ("iodepth", "8 numjobs=3"),
            ("filename", "a b"),
            ("filename", "${HOME}/x"),
            ("filename", "/x;y"),
            ("filename", "/x#y"),
            ("name", "a:/tmp/x"),
            ("name", "a\tb"),
            ("description", "a\nb"),
        ] {
            let e = check(k, Some(v)).unwrap_err();
            assert!(e.starts_with(k), "{k}={v}: {e}");
            assert!(
                e.len() < 400,
                "the error shows a bounded part of the value: {e}"
            );
        }
        assert!(check("size", None).unwrap_err().contains("needs a value"));
        let long = "x".repeat(256);
        assert!(check("filename", Some(&long))
            .unwrap_err()
            .contains("at most 255"));
        assert_eq!(check("filename", Some(&long[..255])), Ok(()));
    }
}
