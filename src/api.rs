//! flashlab as a library call: run one of the command line's commands from its arguments
//! and get back what `--json` prints and, if asked, the recordings (figures per interval,
//! latency histograms, every request) as column tables. The Python package is built on
//! this: its `flashlab.sim(queue_depth=32, ...)` becomes `sim --queue-depth 32 ... --json`
//! parsed by the same parser as the command line, so options, defaults, checks and error
//! messages are the command line's, with no second list of them to drift.
//!
//! Each call runs on the caller's thread under its own cancellation token
//! ([`trace::cancel::with_token`]); nothing here installs a signal handler.

use crate::cli::emit;
use crate::Cli;
use clap::{ArgAction, CommandFactory, FromArgMatches};
use flash::timeline::TimeSeries;
use serde_json::Value;

pub use crate::cli::emit::Want;
pub use trace::Cancel;

/// The commands a library call may run: those that compute a result and print it as
/// JSON. The others manage the machine (`capture`, `validate`, `calibrate`), run the whole
/// report (`reproduce`) or measure flashlab itself (`bench`): use the command line.
pub const COMMANDS: &[&str] = &[
    "sim", "replay", "fio", "join", "btree", "kv", "simfs", "presets",
];

/// Why a call gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The arguments do not parse, or name an option the command does not have (clap's
    /// message, as the command line prints it).
    Usage(String),
    /// The command ran and failed (its message, as the command line prints it after
    /// "flashlab: error: ").
    Failed(String),
    /// The call's token was cancelled; what the run made was removed.
    Cancelled(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(m) | Error::Failed(m) | Error::Cancelled(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

/// A column of a [`Table`].
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Whole numbers (counts, bytes, nanoseconds).
    U64(Vec<u64>),
    /// Real numbers; `valid[i]` false where row `i` has none (an interval without reads
    /// has no read p99).
    F64 { values: Vec<f64>, valid: Vec<bool> },
    /// Text, each row a position in `names` (a run's name, an operation).
    Text { codes: Vec<u32>, names: Vec<String> },
}

impl Column {
    pub fn len(&self) -> usize {
        match self {
            Column::U64(v) => v.len(),
            Column::F64 { values, .. } => values.len(),
            Column::Text { codes, .. } => codes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Named columns of equal length.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub columns: Vec<(String, Column)>,
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |(_, c)| c.len())
    }
}

/// What a call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// What the command prints with `--json`.
    pub json: Value,
    /// The recordings asked for: `timeseries` (a row per run and interval, the columns of
    /// `--timeseries`), `histograms` (a row per run, operation and latency bucket) and
    /// `requests` (a row per request, the columns of `--request-log`).
    pub tables: Vec<(String, Table)>,
}

/// The arguments of `command` from named values, as the command line spells them: a name
/// is an option's (`queue_depth` or `queue-depth` for `--queue-depth`), a positional's
/// (`jobfile`); a value is its text. A switch or an on/off option takes `true`/`false`; a
/// list gives a repeatable option once per value and any other comma-separated
/// (`preset=["mx500", "980"]` is `--preset mx500,980`). A name the
/// command has no option for is refused with the options it has.
pub fn argv(command: &str, named: &[(String, Value)]) -> Result<Vec<String>, Error> {
    let cli = Cli::command();
    let Some(cmd) = cli.find_subcommand(command) else {
        return Err(Error::Usage(format!(
            "no command {command:?}; a library call runs one of: {}",
            COMMANDS.join(", ")
        )));
    };
    let mut out = vec![command.to_string()];
    let mut positionals = Vec::new();
    for (name, value) in named {
        let id = name.replace('-', "_");
        let Some(arg) = cmd.get_arguments().find(|a| a.get_id().as_str() == id) else {
            let mut known: Vec<&str> = cmd
                .get_arguments()
                .map(|a| a.get_id().as_str())
                .filter(|a| *a != "help" && *a != "json")
                .collect();
            known.sort_unstable();
            return Err(Error::Usage(format!(
                "{command} has no option {name:?}; its options: {}",
                known.join(", ")
            )));
        };
        // A list: the option given once per value where it is repeatable, otherwise once
        // with the values comma-separated (`--preset mx500,980`), as the command line reads
        // several drives.
        let joined;
        let values: Vec<&Value> = match value {
            Value::Array(items) if matches!(arg.get_action(), ArgAction::Append) => {
                items.iter().collect()
            }
            Value::Array(items) => {
                let texts: Vec<String> = items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect();
                joined = Value::String(texts.join(","));
                vec![&joined]
            }
            Value::Null => continue,
            v => vec![v],
        };
        let flag = arg.get_long().map(|l| format!("--{l}"));
        let takes_value = !matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
        for v in values {
            let text = match v {
                Value::Bool(b) if !takes_value => {
                    if *b {
                        out.extend(flag.clone());
                    }
                    continue;
                }
                Value::Bool(b) => if *b { "on" } else { "off" }.to_string(),
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(Error::Usage(format!(
                        "{command} {name}: {other} is not a value (give text, a number, true/false or a list)"
                    )))
                }
            };
            if !takes_value {
                return Err(Error::Usage(format!(
                    "{command} {name} is a switch: give true or false, not {text:?}"
                )));
            }
            match &flag {
                // `--flag=value`, so a negative number reads as a value, not a flag.
                Some(f) => out.push(format!("{f}={text}")),
                None => positionals.push(text),
            }
        }
    }
    if !positionals.is_empty() {
        out.push("--".to_string());
        out.extend(positionals);
    }
    Ok(out)
}

/// The command line's help for `command`: its options, their defaults and what they do.
pub fn help(command: &str) -> Result<String, Error> {
    let mut cli = Cli::command();
    let Some(cmd) = cli.find_subcommand_mut(command) else {
        return Err(Error::Usage(format!("no command {command:?}")));
    };
    let mut cmd = cmd.clone().bin_name(format!("flashlab {command}"));
    Ok(cmd.render_long_help().to_string())
}

/// The flag that makes `command` print JSON: `--json`, or fio's `--output-format=json`.
fn json_flag(command: &str) -> Option<&'static str> {
    let cli = Cli::command();
    let cmd = cli.find_subcommand(command)?;
    let has = |id: &str| cmd.get_arguments().any(|a| a.get_id().as_str() == id);
    if has("json") {
        Some("--json")
    } else if has("output_format") {
        Some("--output-format=json")
    } else {
        None
    }
}

/// The commands that can record a run over virtual time (on a simulated drive).
const RECORDING: &[&str] = &["sim", "replay", "fio", "join", "btree", "kv"];

/// A usage error as a library caller reads it: without the `--json` the call added, and
/// pointing at the command's help.
fn usage_text(command: &str, rendered: &str) -> String {
    rendered
        .trim_end()
        .lines()
        .map(|l| {
            if l.starts_with("Usage:") {
                l.replace(" --json", "").replace(" --output-format=json", "")
            } else if l.starts_with("For more information, try '--help'") {
                format!("For more information: `flashlab {command} --help` (in Python, flashlab.help({command:?}))")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs the command `args` names (`["sim", "--preset", "mx500", ...]`, without the
/// program's name; `--json` is added where the command has it), recording as `want` asks,
/// stopping with [`Error::Cancelled`] when `cancel` is cancelled.
pub fn run(args: &[String], want: Want, cancel: &Cancel) -> Result<Output, Error> {
    let Some(command) = args.first() else {
        return Err(Error::Usage("no command given".into()));
    };
    if !COMMANDS.contains(&command.as_str()) {
        return Err(Error::Usage(format!(
            "{command:?} cannot be run as a library call; one of: {} (the others from the command line)",
            COMMANDS.join(", ")
        )));
    }
    if (want.series || want.requests) && !RECORDING.contains(&command.as_str()) {
        return Err(Error::Usage(format!(
            "{command} records nothing over virtual time: series and requests are for {}",
            RECORDING.join(", ")
        )));
    }
    let mut argv = vec!["flashlab".to_string(), command.clone()];
    if let Some(flag) = json_flag(command) {
        let given: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--output-format"))
            .collect();
        if given.iter().any(|a| !a.ends_with("json")) {
            return Err(Error::Usage(format!(
                "{command}: a library call's result is the command's JSON; leave output_format out"
            )));
        }
        if !args.iter().any(|a| a == "--json") && given.is_empty() {
            // Before the arguments: after a `--` it would be a positional.
            argv.push(flag.to_string());
        }
    }
    argv.extend(args[1..].iter().cloned());
    let usage = |e: clap::Error| Error::Usage(usage_text(command, &e.render().to_string()));
    let matches = Cli::command().try_get_matches_from(&argv).map_err(usage)?;
    let cli = Cli::from_arg_matches(&matches).map_err(usage)?;
    crate::cli::given::remember(&matches);
    let (result, captured) = trace::cancel::with_token(cancel, || {
        emit::capturing(want, || crate::run_command(cli.command))
    });
    if let Err(e) = result {
        let msg = crate::error_chain(&e);
        return Err(if cancel.is_cancelled() {
            Error::Cancelled(format!(
                "interrupted; what the run made was removed ({msg})"
            ))
        } else {
            Error::Failed(msg)
        });
    }
    let Some(json) = captured.json.into_iter().last() else {
        return Err(Error::Failed(format!("{command} printed no JSON")));
    };
    let mut tables = Vec::new();
    if want.series && !captured.series.is_empty() {
        tables.push(("timeseries".to_string(), timeseries_table(&captured.series)));
        tables.push(("histograms".to_string(), histogram_table(&captured.series)));
    }
    if want.requests {
        tables.push(("requests".to_string(), requests_table(captured.requests)));
    }
    Ok(Output { json, tables })
}

/// JSON objects' fields as columns, nested objects' fields joined with `_` (`read.p99_us`
/// becomes `read_p99_us`): whole numbers as [`Column::U64`] where every row's is one,
/// other numbers as [`Column::F64`], null as a missing value, text as [`Column::Text`].
pub fn rows_table(rows: &[Value]) -> Table {
    // Columns in the order first met; each row's cells placed by the column's position.
    let mut names: Vec<String> = Vec::new();
    let mut position: std::collections::HashMap<String, usize> = Default::default();
    let mut cells: Vec<Vec<Option<Value>>> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        for (k, v) in flatten("", row) {
            let c = *position.entry(k.clone()).or_insert_with(|| {
                names.push(k);
                cells.push(vec![None; rows.len()]);
                names.len() - 1
            });
            cells[c][r] = Some(v).filter(|v| !v.is_null());
        }
    }
    let columns = names
        .into_iter()
        .zip(cells)
        .map(|(name, col)| {
            let refs: Vec<Option<&Value>> = col.iter().map(Option::as_ref).collect();
            (name, column_of(&refs))
        })
        .collect();
    Table { columns }
}

fn flatten(prefix: &str, v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Object(map) => map
            .iter()
            .flat_map(|(k, v)| {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}_{k}")
                };
                flatten(&name, v)
            })
            .collect(),
        other => vec![(prefix.to_string(), other.clone())],
    }
}

fn column_of(cells: &[Option<&Value>]) -> Column {
    let present = || cells.iter().flatten();
    if cells.iter().all(|c| c.is_some_and(Value::is_u64)) {
        return Column::U64(present().map(|v| v.as_u64().unwrap_or(0)).collect());
    }
    if present().all(|v| v.is_number()) {
        return Column::F64 {
            values: cells
                .iter()
                .map(|c| c.and_then(Value::as_f64).unwrap_or(f64::NAN))
                .collect(),
            valid: cells.iter().map(Option::is_some).collect(),
        };
    }
    let mut names: Vec<String> = Vec::new();
    let codes = cells
        .iter()
        .map(|c| {
            let text = match c {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            emit::code_of(&mut names, &text)
        })
        .collect();
    Column::Text { codes, names }
}

/// Every run's intervals, a `run` column first.
fn timeseries_table(runs: &[(String, TimeSeries)]) -> Table {
    let mut rows = Vec::new();
    let mut codes = Vec::new();
    for (i, (_, ts)) in runs.iter().enumerate() {
        for r in &ts.rows {
            rows.push(serde_json::to_value(r).unwrap_or(Value::Null));
            codes.push(i as u32);
        }
    }
    let mut t = rows_table(&rows);
    // In the CSV's order (a row's JSON has its fields sorted).
    let order = TimeSeries::columns();
    t.columns
        .sort_by_key(|(name, _)| order.iter().position(|c| c == name).unwrap_or(usize::MAX));
    let names = runs.iter().map(|(n, _)| n.clone()).collect();
    t.columns
        .insert(0, ("run".to_string(), Column::Text { codes, names }));
    t
}

/// Every run's latency histograms: a row per run, operation and recorded bucket
/// (`latency_us`, the bucket's highest equivalent value; `count`).
fn histogram_table(runs: &[(String, TimeSeries)]) -> Table {
    let mut run_codes = Vec::new();
    let mut op_codes = Vec::new();
    let mut ops: Vec<String> = Vec::new();
    let mut latency_us = Vec::new();
    let mut count = Vec::new();
    for (i, (_, ts)) in runs.iter().enumerate() {
        for (op, h) in &ts.histograms {
            let code = emit::code_of(&mut ops, op);
            for v in h.iter_recorded() {
                run_codes.push(i as u32);
                op_codes.push(code);
                latency_us.push(h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3);
                count.push(v.count_at_value());
            }
        }
    }
    let n = latency_us.len();
    Table {
        columns: vec![
            (
                "run".into(),
                Column::Text {
                    codes: run_codes,
                    names: runs.iter().map(|(n, _)| n.clone()).collect(),
                },
            ),
            (
                "op".into(),
                Column::Text {
                    codes: op_codes,
                    names: ops,
                },
            ),
            (
                "latency_us".into(),
                Column::F64 {
                    values: latency_us,
                    valid: vec![true; n],
                },
            ),
            ("count".into(), Column::U64(count)),
        ],
    }
}

/// Every request as the drive served it: the columns of `--request-log`.
fn requests_table(r: emit::Requests) -> Table {
    let latency_ns = r
        .complete_ns
        .iter()
        .zip(&r.submit_ns)
        .map(|(c, s)| c - s)
        .collect();
    Table {
        columns: vec![
            (
                "run".into(),
                Column::Text {
                    codes: r.run,
                    names: r.runs,
                },
            ),
            ("submit_ns".into(), Column::U64(r.submit_ns)),
            ("complete_ns".into(), Column::U64(r.complete_ns)),
            ("latency_ns".into(), Column::U64(latency_ns)),
            (
                "op".into(),
                Column::Text {
                    codes: r.op,
                    names: r.ops,
                },
            ),
            ("offset_bytes".into(), Column::U64(r.offset_bytes)),
            ("len_bytes".into(), Column::U64(r.len_bytes)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(pairs: &[(&str, Value)]) -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn named_values_become_the_command_lines_flags() {
        let a = argv(
            "sim",
            &named(&[
                ("preset", json!(["mx500", "980"])),
                ("queue-depth", json!(32)),
                ("timing", json!(false)),
                ("rest", json!(false)),
                ("json", json!(true)),
                ("seed", Value::Null),
                ("op", json!(-0.5)),
            ]),
        )
        .unwrap();
        assert_eq!(
            a,
            [
                "sim",
                "--preset=mx500,980",
                "--queue-depth=32",
                "--timing=off",
                "--json",
                "--op=-0.5"
            ]
        );
        let p = argv("presets", &named(&[("name", json!("mx500"))])).unwrap();
        assert_eq!(p, ["presets", "--", "mx500"]);
    }

    #[test]
    fn an_unknown_option_or_a_value_for_a_switch_is_refused_by_name() {
        let e = argv("sim", &named(&[("queue_dpeth", json!(4))])).unwrap_err();
        assert!(
            matches!(&e, Error::Usage(m) if m.contains("queue_dpeth") && m.contains("queue_depth"))
        );
        let e = argv("sim", &named(&[("rest", json!("yes"))])).unwrap_err();
        assert!(matches!(&e, Error::Usage(m) if m.contains("switch")));
        assert!(argv("nosuch", &[]).is_err());
    }

    #[test]
    fn commands_outside_the_library_are_refused_and_bad_flags_are_usage_errors() {
        let cancel = Cancel::new();
        let e = run(&["capture".into()], Want::default(), &cancel).unwrap_err();
        assert!(matches!(&e, Error::Usage(m) if m.contains("command line")));
        let e = run(
            &["sim".into(), "--no-such".into()],
            Want::default(),
            &cancel,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Usage(_)));
    }

    #[test]
    fn a_call_gives_the_json_and_the_tables_asked_for() {
        let args: Vec<String> = [
            "sim",
            "--preset",
            "mx500",
            "--capacity",
            "1GiB",
            "--workload",
            "uniform",
            "--read-fraction",
            "0.5",
            "--writes",
            "0.01x",
            "--warmup",
            "0.05x",
        ]
        .map(String::from)
        .to_vec();
        let want = Want {
            series: true,
            requests: true,
        };
        let out = run(&args, want, &Cancel::new()).unwrap();
        assert!(out.json["waf"].as_f64().unwrap() >= 1.0);
        let names: Vec<&str> = out.tables.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["timeseries", "histograms", "requests"]);
        let requests = &out.tables[2].1;
        let reads = out.json["read_latency_ns"]["count"].as_u64().unwrap();
        let writes = out.json["write_latency_ns"]["count"].as_u64().unwrap();
        assert_eq!(requests.rows() as u64, reads + writes);
        let ts = &out.tables[0].1;
        let cols: Vec<&str> = ts.columns.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(cols[0], "run");
        assert_eq!(
            cols[1..],
            TimeSeries::columns()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()[..]
        );
        // A cancelled token stops the call with its own error.
        let cancel = Cancel::new();
        cancel.cancel();
        let e = run(&args, Want::default(), &cancel).unwrap_err();
        assert!(matches!(e, Error::Cancelled(_)), "{e:?}");
    }

    #[test]
    fn rows_become_typed_columns_with_missing_values() {
        let t = rows_table(&[
            json!({"a": 1, "b": {"c": 0.5}, "s": "x"}),
            json!({"a": 2, "b": {"c": null}, "s": "y"}),
        ]);
        assert_eq!(t.rows(), 2);
        assert_eq!(t.columns[0], ("a".into(), Column::U64(vec![1, 2])));
        let Column::F64 { valid, .. } = &t.columns[1].1 else {
            panic!("b_c is real")
        };
        assert_eq!(t.columns[1].0, "b_c");
        assert_eq!(valid, &[true, false]);
        assert_eq!(
            t.columns[2].1,
            Column::Text {
                codes: vec![0, 1],
                names: vec!["x".into(), "y".into()]
            }
        );
    }
}
