//! Drives side by side (`--preset a,b,c` on `sim` and `replay`): one table, a column per
//! drive, the better value of each row marked, and the same rows in JSON.

use flash::DeviceStats;

/// One drive's run, as the table compares it.
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) stats: DeviceStats,
    /// An open-loop replay's load: requests per second offered and served.
    pub(crate) load: Option<(f64, f64)>,
}

/// Which value of a row is the better one.
#[derive(Clone, Copy, PartialEq)]
enum Better {
    Higher,
    Lower,
    /// Neither (a warning, not a figure of merit).
    Neither,
}

struct Row {
    label: &'static str,
    better: Better,
    /// Digits after the point.
    digits: usize,
    value: fn(&Column) -> Option<f64>,
}

/// Whether the run had time (the WAF-only path, `--timing off`, has no IOPS or latency).
fn timed(c: &Column) -> bool {
    c.stats.simulated_ns > 0
}

fn ms(ns: u64, count: u64) -> Option<f64> {
    (count > 0).then_some(ns as f64 / 1e6)
}

const ROWS: &[Row] = &[
    Row {
        label: "IOPS",
        better: Better::Higher,
        digits: 0,
        value: |c| timed(c).then_some(c.stats.iops),
    },
    Row {
        label: "read MB/s",
        better: Better::Higher,
        digits: 1,
        value: |c| timed(c).then_some(c.stats.read_mb_per_s),
    },
    Row {
        label: "write MB/s",
        better: Better::Higher,
        digits: 1,
        value: |c| timed(c).then_some(c.stats.write_mb_per_s),
    },
    Row {
        label: "read mean (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.read_latency_ns.mean, c.stats.read_latency_ns.count),
    },
    Row {
        label: "read p50 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.read_latency_ns.p50, c.stats.read_latency_ns.count),
    },
    Row {
        label: "read p99 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.read_latency_ns.p99, c.stats.read_latency_ns.count),
    },
    Row {
        label: "read p99.9 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.read_latency_ns.p999, c.stats.read_latency_ns.count),
    },
    Row {
        label: "write mean (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| {
            ms(
                c.stats.write_latency_ns.mean,
                c.stats.write_latency_ns.count,
            )
        },
    },
    Row {
        label: "write p50 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.write_latency_ns.p50, c.stats.write_latency_ns.count),
    },
    Row {
        label: "write p99 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| ms(c.stats.write_latency_ns.p99, c.stats.write_latency_ns.count),
    },
    Row {
        label: "write p99.9 (ms)",
        better: Better::Lower,
        digits: 3,
        value: |c| {
            ms(
                c.stats.write_latency_ns.p999,
                c.stats.write_latency_ns.count,
            )
        },
    },
    Row {
        label: "WAF",
        better: Better::Lower,
        digits: 3,
        value: |c| c.stats.waf,
    },
    Row {
        label: "unwritten reads (%)",
        better: Better::Neither,
        digits: 1,
        value: |c| {
            (c.stats.host_read_bytes > 0).then(|| {
                100.0 * c.stats.unwritten_read_bytes as f64 / c.stats.host_read_bytes as f64
            })
        },
    },
    Row {
        label: "served / offered (%)",
        better: Better::Higher,
        digits: 1,
        value: |c| {
            c.load
                .map(|(offered, served)| 100.0 * served / offered.max(1e-9))
        },
    },
];

/// Which columns hold the row's better value (none when all are equal or the row has no
/// better).
fn best(row: &Row, values: &[Option<f64>]) -> Vec<bool> {
    let known: Vec<f64> = values.iter().flatten().copied().collect();
    let pick = match row.better {
        Better::Higher => known.iter().copied().fold(f64::MIN, f64::max),
        Better::Lower => known.iter().copied().fold(f64::MAX, f64::min),
        Better::Neither => return vec![false; values.len()],
    };
    let round = |v: f64| format!("{v:.*}", row.digits);
    let all_same = known.iter().all(|&v| round(v) == round(known[0]));
    values
        .iter()
        .map(|v| !all_same && known.len() > 1 && v.is_some_and(|v| round(v) == round(pick)))
        .collect()
}

/// The table as text: a row per figure, a column per drive, `*` by the better value.
pub(crate) fn table(cols: &[Column]) -> String {
    let width = cols.iter().map(|c| c.name.len()).max().unwrap_or(0).max(11) + 2;
    let mut out = format!("  {:<22}", "");
    for c in cols {
        out.push_str(&format!("{:>width$}", c.name));
    }
    out.push('\n');
    for row in ROWS {
        let values: Vec<Option<f64>> = cols.iter().map(|c| (row.value)(c)).collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let marks = best(row, &values);
        out.push_str(&format!("  {:<22}", row.label));
        for (v, &m) in values.iter().zip(&marks) {
            let cell = match v {
                Some(v) => format!("{v:.*}{}", row.digits, if m { "*" } else { " " }),
                None => "- ".to_string(),
            };
            out.push_str(&format!("{cell:>width$}"));
        }
        out.push('\n');
    }
    out.push_str("  (* the better value of the row)\n");
    out
}

/// The same rows as JSON: `{label: {drive: value}}` with `better` naming the drives marked.
pub(crate) fn json(cols: &[Column]) -> serde_json::Value {
    let mut rows = serde_json::Map::new();
    for row in ROWS {
        let values: Vec<Option<f64>> = cols.iter().map(|c| (row.value)(c)).collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let marks = best(row, &values);
        let by: serde_json::Map<String, serde_json::Value> = cols
            .iter()
            .zip(&values)
            .map(|(c, v)| (c.name.clone(), serde_json::json!(v)))
            .collect();
        let better: Vec<&str> = cols
            .iter()
            .zip(&marks)
            .filter(|(_, &m)| m)
            .map(|(c, _)| c.name.as_str())
            .collect();
        rows.insert(
            row.label.to_string(),
            serde_json::json!({"values": by, "better": better}),
        );
    }
    serde_json::Value::Object(rows)
}

/// The run names of `names`: each as given, `#N` (its position) added where one repeats;
/// never two alike.
pub(crate) fn run_names(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let mut name = if names.iter().filter(|m| *m == n).count() > 1 {
            format!("{n}#{}", i + 1)
        } else {
            n.clone()
        };
        while out.contains(&name) || (names.contains(&name) && name != *n) {
            name.push('\'');
        }
        out.push(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, iops: f64, waf: f64) -> Column {
        let mut stats = DeviceStats {
            iops,
            waf: Some(waf),
            simulated_ns: 1_000_000,
            ..Default::default()
        };
        stats.read_latency_ns.count = 1;
        stats.read_latency_ns.p99 = (1e9 / iops) as u64;
        Column {
            name: name.into(),
            stats,
            load: None,
        }
    }

    #[test]
    fn the_better_value_of_each_row_is_marked_and_ties_are_not() {
        let cols = [col("a", 1000.0, 2.0), col("b", 2000.0, 2.0)];
        let t = table(&cols);
        let line = |label: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(label))
                .unwrap()
                .to_string()
        };
        assert!(
            line("IOPS").contains("2000*") && !line("IOPS").contains("1000*"),
            "{t}"
        );
        assert!(line("read p99").contains("0.500*"), "{t}");
        assert!(
            !line("WAF").contains('*'),
            "equal values are not marked: {t}"
        );
        assert!(
            !t.contains("served / offered"),
            "rows without values are left out: {t}"
        );
        let j = json(&cols);
        assert_eq!(j["IOPS"]["better"], serde_json::json!(["b"]));
        assert_eq!(j["IOPS"]["values"]["a"], 1000.0);
    }

    #[test]
    fn repeated_names_get_numbers() {
        let names = ["mx500".to_string(), "980".into(), "mx500".into()];
        assert_eq!(run_names(&names), ["mx500#1", "980", "mx500#3"]);
    }
}
