//! `flashlab sweep`: `flashlab sim` over a grid. Every sim flag may take comma-separated
//! values; the points are the cartesian product, run on all cores (each deterministic: a
//! point's numbers depend only on its flags), written to `DIR/results.csv` and
//! `DIR/results.json` (one row per point, every field of `sim --json`) with an SVG of WAF
//! against the first numeric axis.

use anyhow::{bail, Context, Result};
use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct SweepArgs {
    /// Directory for results.csv, results.json and waf.svg (created if missing).
    #[arg(long, default_value = "sweep")]
    out: PathBuf,
    /// Points run at once (default: the machine's cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run only shard K of N (0 <= K < N): the points whose position in the grid is K
    /// modulo N, so N machines (a Slurm job array: `--shard
    /// $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT`) share a grid; `flashlab sweep merge`
    /// combines their directories.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<Shard>,
    /// `flashlab sim`'s flags, any of them with comma-separated values, e.g.
    /// `--preset mx500,840pro --op 0.07,0.15,0.28 --gc greedy,fifo --workload uniform
    /// --writes 1x --timing off`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    sim: Vec<String>,
}

/// One shard of a grid: the points whose position is `index` modulo `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shard {
    index: usize,
    count: usize,
}

fn parse_shard(s: &str) -> std::result::Result<Shard, String> {
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: a shard is K/N, e.g. 0/4"))?;
    let index: usize = k
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: K must be a whole number"))?;
    let count: usize = n
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: N must be a whole number"))?;
    if count == 0 {
        return Err(format!(
            "{s:?}: N, the number of shards, must be at least 1"
        ));
    }
    if index >= count {
        return Err(format!(
            "{s:?}: K must be from 0 to N-1 (shards 0/{count} to {}/{count})",
            count - 1
        ));
    }
    Ok(Shard { index, count })
}

/// `flashlab sweep merge`'s arguments.
#[derive(Parser)]
#[command(name = "flashlab sweep merge")]
struct MergeArgs {
    /// The shards' directories (each `flashlab sweep --shard K/N --out DIR`).
    #[arg(required = true)]
    shards: Vec<PathBuf>,
    /// Directory for the merged results.csv, results.json and waf.svg.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `sim` parsed on its own, to check and run one point.
#[derive(Parser)]
#[command(name = "flashlab sim")]
struct SimOnly {
    #[command(flatten)]
    sim: super::sim::SimArgs,
}

/// One axis of the grid: a flag and its values.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    flag: String,
    values: Vec<String>,
}

/// Splits the sim flags into the fixed ones and the axes (flags given several values).
fn axes(args: &[String]) -> Result<(Vec<String>, Vec<Axis>)> {
    let mut fixed = Vec::new();
    let mut axes: Vec<Axis> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if !a.starts_with("--") {
            bail!("{a:?}: expected a sim flag (--name value)");
        }
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => {
                    i += 1;
                    (a.clone(), Some(v.clone()))
                }
                _ => (a.clone(), None),
            },
        };
        i += 1;
        if flag == "--json" {
            continue; // every point is recorded whole anyway
        }
        if matches!(
            flag.as_str(),
            "--timeseries" | "--timeseries-plot" | "--histograms" | "--request-log" | "--interval"
        ) {
            bail!(
                "{flag} records one run over time, and sweep records none per point: run `flashlab sim` with the point's flags and {flag}"
            );
        }
        if flag == "--wear-plot" {
            bail!(
                "--wear-plot writes one run's wear plot, and sweep writes none per point: run `flashlab sim` with the point's flags and --wear-plot FILE"
            );
        }
        // An age is itself a comma list (pe=N,retention=T): several are separated by ';'.
        let sep = if flag == "--age" { ';' } else { ',' };
        match value {
            Some(v) if v.contains(sep) => {
                let values: Vec<String> = v.split(sep).map(|s| s.trim().to_string()).collect();
                if values.iter().any(|v| v.is_empty()) {
                    bail!("{flag} {v}: an empty value in the list");
                }
                if axes.iter().any(|x| x.flag == flag) {
                    bail!("{flag} is given twice");
                }
                axes.push(Axis { flag, values });
            }
            Some(v) => {
                fixed.push(flag);
                fixed.push(v);
            }
            None => fixed.push(flag),
        }
    }
    Ok((fixed, axes))
}

/// Every point of the grid: its axis values, in axis order (the first axis varies slowest).
fn points(axes: &[Axis]) -> Vec<Vec<String>> {
    axes.iter().fold(vec![vec![]], |acc, axis| {
        acc.iter()
            .flat_map(|p| {
                axis.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push(v.clone());
                    q
                })
            })
            .collect()
    })
}

/// A number from an axis value: plain numbers and sizes (`4GiB`), multiples (`2x`).
fn numeric(v: &str) -> Option<f64> {
    v.parse::<f64>()
        .ok()
        .or_else(|| crate::units::parse_size(v).ok().map(|b| b as f64))
        .or_else(|| crate::units::parse_multiple(v).ok())
}

/// Flattens a JSON object one level deep (`a.b`); arrays and deeper objects as JSON text.
/// Fields a point run with `--timing off` did not measure (times, rates, latencies),
/// which it reports as 0: null in JSON and empty in the CSV, so a script cannot take them
/// for zero.
const TIMED_FIELDS: &[&str] = &[
    "iops",
    "read_mb_per_s",
    "write_mb_per_s",
    "simulated_ns",
    "trim_busy_ns",
    "trim_interface_ns",
];

pub(crate) fn unmeasured_as_null(v: &mut serde_json::Value) {
    let Some(m) = v.as_object_mut() else {
        return;
    };
    for (k, x) in m.iter_mut() {
        if TIMED_FIELDS.contains(&k.as_str()) {
            *x = serde_json::Value::Null;
        } else if k.ends_with("_latency_ns") {
            // Its count is of commands, measured either way; its times are not.
            if let Some(lat) = x.as_object_mut() {
                for (f, t) in lat.iter_mut() {
                    if f != "count" {
                        *t = serde_json::Value::Null;
                    }
                }
            }
        }
    }
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match x {
                    serde_json::Value::Object(_) if prefix.is_empty() => flatten(&key, x, out),
                    serde_json::Value::String(s) => out.push((key, s.clone())),
                    serde_json::Value::Null => out.push((key, String::new())),
                    other => out.push((key, other.to_string())),
                }
            }
        }
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One point's outcome: `sim --json`'s result (fields a point without timing did not
/// measure as null), or its error.
type Outcome = std::result::Result<serde_json::Value, String>;

/// A finished point's outcome as the results files keep it.
fn outcome(r: std::result::Result<lab::sim::SimResult, lab::LabError>) -> Result<Outcome> {
    Ok(match r {
        Ok(res) => {
            let mut v = serde_json::to_value(&res)?;
            if !res.timing {
                unmeasured_as_null(&mut v);
            }
            Ok(v)
        }
        Err(e) => Err(e.to_string()),
    })
}

/// The columns that lead results.csv after the axes, when a point has them.
const LEADING_COLUMNS: &[&str] = &[
    "waf",
    "iops",
    "read_latency_ns.mean",
    "read_latency_ns.p50",
    "read_latency_ns.p99",
    "read_latency_ns.p999",
    "write_latency_ns.mean",
    "write_latency_ns.p50",
    "write_latency_ns.p99",
    "write_latency_ns.p999",
];

pub fn run(a: SweepArgs) -> Result<()> {
    if a.sim.first().is_some_and(|w| w == "merge") {
        return merge(&a);
    }
    let (fixed, axes) = axes(&a.sim)?;
    let grid = points(&axes);
    // Every point's flags parse before anything runs.
    let mut specs = Vec::new();
    let mut invalid = Vec::new();
    for p in &grid {
        let mut args = vec!["sim".to_string()];
        args.extend(fixed.iter().cloned());
        for (axis, v) in axes.iter().zip(p) {
            // `--flag=value`, so a negative value reads as a value, not a flag.
            args.push(format!("{}={v}", axis.flag));
        }
        let spec = SimOnly::try_parse_from(&args)
            .map_err(|e| {
                e.to_string()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
                    .to_string()
            })
            .and_then(|parsed| super::sim::sim_spec(&parsed.sim).map_err(|e| format!("{e:#}")));
        match spec {
            Ok(spec) => specs.push(spec),
            Err(e) => invalid.push(format!("point {}: {e}", describe(&axes, p))),
        }
    }
    if !invalid.is_empty() {
        const SHOWN: usize = 10;
        let more = invalid.len().saturating_sub(SHOWN);
        let mut msg = format!(
            "{} of {} points are invalid (nothing ran):\n  {}",
            invalid.len(),
            grid.len(),
            invalid[..invalid.len().min(SHOWN)].join("\n  ")
        );
        if more > 0 {
            msg.push_str(&format!("\n  ... and {more} more"));
        }
        anyhow::bail!(msg);
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let jobs = a.jobs.unwrap_or_else(lab::experiments::threads).max(1);
    // This run's points: the whole grid, or one shard of it.
    let mine: Vec<usize> = (0..grid.len())
        .filter(|i| a.shard.is_none_or(|s| i % s.count == s.index))
        .collect();
    let shard_text = a.shard.map_or(String::new(), |s| {
        format!(
            " (shard {}/{}: {} of the grid's {} points)",
            s.index,
            s.count,
            mine.len(),
            grid.len()
        )
    });
    eprintln!(
        "flashlab sweep: {} point(s) over {} axis(es){shard_text}, {jobs} at a time, results in {}",
        mine.len(),
        axes.len(),
        a.out.display()
    );
    let grid_def = GridDef {
        fixed: &fixed,
        axes: &axes,
        grid: &grid,
        shard: a.shard,
    };
    let pb = ProgressBar::new(mine.len() as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} points ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message("sweep");
    // Points run on `jobs` threads; each finished point is in the result files at once
    // (they are rewritten whole, by rename), so an interrupt or a crash loses no finished
    // point. An interrupt lets the points under way finish and starts no more.
    let cancel = crate::signals::cancel_token();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let outcomes: std::sync::Mutex<(Vec<Option<Outcome>>, Option<anyhow::Error>)> =
        std::sync::Mutex::new(((0..grid.len()).map(|_| None).collect(), None));
    std::thread::scope(|s| {
        for _ in 0..jobs.min(mine.len()) {
            s.spawn(|| loop {
                if cancel.is_cancelled() {
                    break;
                }
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&i) = mine.get(n) else {
                    break;
                };
                let r = outcome(lab::sim::run(&specs[i], &mut |_, _| {}));
                let mut g = outcomes.lock().expect("no sweep worker panicked");
                match r {
                    Ok(r) => g.0[i] = Some(r),
                    Err(e) => g.1 = g.1.take().or(Some(e)),
                }
                if g.1.is_none() {
                    if let Err(e) = write_results(&a.out, &grid_def, &g.0) {
                        g.1 = Some(e);
                    }
                }
                drop(g);
                pb.inc(1);
                if !pb.is_hidden() {
                    continue;
                }
                // Not on a terminal: a line per point instead of a bar.
                eprintln!(
                    "flashlab sweep: point {} of {} done ({})",
                    pb.position(),
                    mine.len(),
                    describe(&axes, &grid[i])
                );
            });
        }
    });
    pb.finish_and_clear();
    let (results, write_error) = outcomes.into_inner().expect("workers finished");
    if let Some(e) = write_error {
        return Err(e);
    }
    let finished = results.iter().filter(|r| r.is_some()).count();
    if cancel.is_cancelled() {
        write_results(&a.out, &grid_def, &results)?;
        eprintln!(
            "flashlab sweep: interrupted: {finished} of {} point(s) finished; they are in {}/results.csv and results.json",
            mine.len(),
            a.out.display()
        );
        std::process::exit(crate::signals::EXIT_INTERRUPTED);
    }
    finish(
        &a.out,
        &grid_def,
        &results,
        &format!("{} point(s){shard_text}", mine.len()),
    )
}

/// Writes the results files and the plot of a finished grid (or shard, or merge), says so,
/// and fails naming the points that failed.
fn finish(
    out: &std::path::Path,
    g: &GridDef,
    results: &[Option<Outcome>],
    what: &str,
) -> Result<()> {
    let failed = write_results(out, g, results)?;
    let plotted = plot_waf(out, g.axes, g.grid, results)?;
    println!(
        "flashlab sweep: {what} written to {}/results.csv and results.json; {plotted}",
        out.display(),
    );
    if !failed.is_empty() {
        bail!(
            "{} of {} point(s) failed: {}",
            failed.len(),
            results.iter().flatten().count(),
            failed.join("; ")
        );
    }
    Ok(())
}

/// A grid as the results files describe it: the fixed flags, the axes, every point, and
/// the shard run (if one).
struct GridDef<'a> {
    fixed: &'a [String],
    axes: &'a [Axis],
    grid: &'a [Vec<String>],
    shard: Option<Shard>,
}

/// `flashlab sweep merge DIR... --out DIR`: the shards of one grid combined into the
/// results files the whole grid run at once writes. Refused if the shards are of
/// different grids, overlap, or leave points out.
fn merge(a: &SweepArgs) -> Result<()> {
    if a.shard.is_some() || a.jobs.is_some() {
        bail!("sweep merge runs no points: --shard and --jobs belong to the runs of the shards");
    }
    let args =
        std::iter::once("flashlab sweep merge".to_string()).chain(a.sim[1..].iter().cloned());
    let m = match MergeArgs::try_parse_from(args) {
        Ok(m) => m,
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            print!("{}", e.render());
            return Ok(());
        }
        Err(e) => {
            let text = e.render().to_string();
            bail!("{}", text.trim_end().trim_start_matches("error: "));
        }
    };
    let out = m.out.unwrap_or_else(|| a.out.clone());
    let mut grid_of: Option<(Vec<Vec<String>>, serde_json::Value, usize)> = None;
    let mut first_fixed = serde_json::Value::Null;
    let mut results: Vec<Option<Outcome>> = Vec::new();
    let mut from: Vec<Option<PathBuf>> = Vec::new();
    for dir in &m.shards {
        let path = dir.join("results.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("shard {}: cannot read {}", dir.display(), path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a sweep's results.json", path.display()))?;
        let total = v["points_total"].as_u64().with_context(|| {
            format!(
                "{}: no points_total: not a sweep's results.json",
                path.display()
            )
        })? as usize;
        // The fixed flags in any order (they are options); the axes in theirs (it numbers
        // the points).
        let this = (flag_pairs(&v["sim_flags"]), v["axes"].clone(), total);
        match &grid_of {
            None => {
                results = vec![None; total];
                from = vec![None; total];
                first_fixed = v["sim_flags"].clone();
                grid_of = Some(this);
            }
            Some(g) if *g != this => bail!(
                "{} is a shard of another grid than {} (its sim flags, axes or point count differ)",
                dir.display(),
                m.shards[0].display()
            ),
            Some(_) => {}
        }
        for row in v["points"].as_array().into_iter().flatten() {
            let i = row["index"].as_u64().with_context(|| {
                format!("{}: a point without its index (written by an older flashlab? run the shard again)", path.display())
            })? as usize;
            if i >= total {
                bail!(
                    "{}: point {i} is outside the grid's {total}",
                    path.display()
                );
            }
            if let Some(other) = &from[i] {
                bail!(
                    "point {i} is in both {} and {}: the shards overlap",
                    other.display(),
                    dir.display()
                );
            }
            results[i] = Some(match row.get("error") {
                Some(e) => Err(e.as_str().unwrap_or_default().to_string()),
                None => Ok(row["result"].clone()),
            });
            from[i] = Some(dir.clone());
        }
    }
    let (_, axes_json, total) = grid_of.context("no shards given")?;
    let fixed = first_fixed;
    let missing: Vec<usize> = (0..total).filter(|&i| results[i].is_none()).collect();
    if !missing.is_empty() {
        let shown: Vec<String> = missing.iter().take(10).map(|i| i.to_string()).collect();
        bail!(
            "{} of the grid's {total} points are in none of the shards given (points {}{}): merge every shard, or run the missing ones",
            missing.len(),
            shown.join(", "),
            if missing.len() > 10 { ", ..." } else { "" }
        );
    }
    let fixed: Vec<String> = serde_json::from_value(fixed)?;
    let axes: Vec<Axis> = axes_json
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| Axis {
            flag: x["flag"].as_str().unwrap_or_default().to_string(),
            values: serde_json::from_value(x["values"].clone()).unwrap_or_default(),
        })
        .collect();
    let grid = points(&axes);
    if grid.len() != total {
        bail!(
            "the shards' axes give {} points, their results say {total}",
            grid.len()
        );
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let g = GridDef {
        fixed: &fixed,
        axes: &axes,
        grid: &grid,
        shard: None,
    };
    finish(
        &out,
        &g,
        &results,
        &format!("{} shard(s), {total} point(s),", m.shards.len()),
    )
}

/// Writes results.csv and results.json with every finished point (one row each: the axes,
/// then WAF, IOPS and latency, then every other field of `sim --json`, then the error);
/// returns the failed points' descriptions.
fn write_results(
    out: &std::path::Path,
    g: &GridDef,
    results: &[Option<Outcome>],
) -> Result<Vec<String>> {
    let (fixed, axes, grid) = (g.fixed, g.axes, g.grid);
    let mut rows: Vec<Vec<(String, String)>> = Vec::new();
    let mut json_rows = Vec::new();
    let mut failed = Vec::new();
    for (index, (p, r)) in grid.iter().zip(results).enumerate() {
        let Some(r) = r else {
            continue;
        };
        let mut row: Vec<(String, String)> = axes
            .iter()
            .zip(p)
            .map(|(x, v)| (x.flag.trim_start_matches("--").to_string(), v.clone()))
            .collect();
        let point: serde_json::Map<String, serde_json::Value> = row
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::json!(v)))
            .collect();
        match r {
            Ok(v) => {
                flatten("", v, &mut row);
                row.push(("error".into(), String::new()));
                json_rows.push(serde_json::json!({"index": index, "point": point, "result": v}));
            }
            Err(e) => {
                failed.push(format!("{}: {e}", describe(axes, p)));
                row.push(("error".into(), e.clone()));
                json_rows.push(serde_json::json!({"index": index, "point": point, "error": e}));
            }
        }
        rows.push(row);
    }
    // Columns: the axes, the leading measures, every other field in the order met, the
    // error last.
    let mut headers: Vec<String> = axes
        .iter()
        .map(|x| x.flag.trim_start_matches("--").to_string())
        .collect();
    let present = |h: &str| rows.iter().any(|r| r.iter().any(|(k, _)| k == h));
    headers.extend(
        LEADING_COLUMNS
            .iter()
            .filter(|h| present(h))
            .map(|h| h.to_string()),
    );
    for row in &rows {
        for (k, _) in row {
            if k != "error" && !headers.contains(k) {
                headers.push(k.clone());
            }
        }
    }
    headers.push("error".into());
    let mut csv = headers
        .iter()
        .map(|h| csv_field(h))
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for row in &rows {
        let cells: Vec<String> = headers
            .iter()
            .map(|h| {
                row.iter()
                    .find(|(k, _)| k == h)
                    .map_or(String::new(), |(_, v)| csv_field(v))
            })
            .collect();
        csv.push_str(&cells.join(","));
        csv.push('\n');
    }
    write_whole(out, "results.csv", &csv)?;
    write_whole(
        out,
        "results.json",
        &serde_json::to_string_pretty(&{
            let mut v = serde_json::json!({
                "sim_flags": fixed,
                "axes": axes.iter().map(|x| serde_json::json!({"flag": x.flag, "values": x.values})).collect::<Vec<_>>(),
                "points_total": grid.len(),
                "points": json_rows,
            });
            if let Some(sh) = g.shard {
                v["shard"] = serde_json::json!({"index": sh.index, "count": sh.count});
            }
            v
        })?,
    )?;
    Ok(failed)
}

/// Writes `DIR/name` whole: a temporary file renamed over it, so a reader (or an
/// interrupt) never sees half a file.
fn write_whole(dir: &std::path::Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.tmp"));
    // A new file, never one that is there (a symlink planted under the temporary name
    // would otherwise be written through, as root anywhere): what is there is removed
    // (a link, not its target) and the file made with O_EXCL.
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Plots WAF against the first axis whose values are all numbers, one line per
/// combination of the other axes, into waf.svg; says what it plotted, or why nothing.
fn plot_waf(
    out: &std::path::Path,
    axes: &[Axis],
    grid: &[Vec<String>],
    results: &[Option<Outcome>],
) -> Result<String> {
    let Some(xi) = axes
        .iter()
        .position(|x| x.values.iter().all(|v| numeric(v).is_some()))
    else {
        return Ok(if axes.is_empty() {
            "no WAF plot: one point (give a flag several values to sweep it)".into()
        } else {
            format!(
                "no WAF plot: no axis has numbers for values ({} {}); give a numeric flag several values, e.g. --op 0.07,0.28",
                if axes.len() == 1 { "the axis is" } else { "the axes are" },
                axes.iter().map(|x| x.flag.as_str()).collect::<Vec<_>>().join(", ")
            )
        });
    };
    let mut series: Vec<lab::report::Series> = Vec::new();
    for (p, r) in grid.iter().zip(results) {
        let Some(waf) = r
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(|v| v["waf"].as_f64())
        else {
            continue; // failed, or no writes to amplify
        };
        let name = axes
            .iter()
            .zip(p)
            .enumerate()
            .filter(|(i, _)| *i != xi)
            .map(|(_, (x, v))| format!("{} {v}", x.flag.trim_start_matches("--")))
            .collect::<Vec<_>>()
            .join(", ");
        let point = (numeric(&p[xi]).expect("checked"), waf);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => series.push(lab::report::Series {
                name,
                points: vec![point],
                reference: false,
            }),
        }
    }
    if series.is_empty() {
        return Ok("no WAF plot: no point has a WAF (every point failed or wrote nothing)".into());
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let x = axes[xi].flag.trim_start_matches("--");
    let plot = lab::report::LinePlot {
        file_stem: "waf".into(),
        title: format!("WAF against {x}"),
        x_label: x.into(),
        y_label: "write amplification".into(),
        series,
    };
    write_whole(out, "waf.svg", &lab::report::line_plot_svg(&plot)?)?;
    Ok(format!("WAF against --{x} plotted in waf.svg"))
}

/// A results file's fixed flags as sorted groups (a flag and its value, if it has one).
fn flag_pairs(fixed: &serde_json::Value) -> Vec<Vec<String>> {
    let words: Vec<String> = serde_json::from_value(fixed.clone()).unwrap_or_default();
    let mut groups: Vec<Vec<String>> = Vec::new();
    for w in words {
        match groups.last_mut() {
            Some(g) if g.len() == 1 && !w.starts_with("--") => g.push(w),
            _ => groups.push(vec![w]),
        }
    }
    groups.sort();
    groups
}

/// A point for people: `--op 0.07 --gc greedy`.
fn describe(axes: &[Axis], p: &[String]) -> String {
    if axes.is_empty() {
        return "the only point".into();
    }
    axes.iter()
        .zip(p)
        .map(|(x, v)| format!("{} {v}", x.flag))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn comma_lists_become_axes_and_the_grid_is_their_product() {
        let (fixed, axes) = axes(&s(&[
            "--preset",
            "mx500,840pro",
            "--op=0.07,0.15,0.28",
            "--workload",
            "uniform",
            "--trim-background",
            "--json",
            "--writes",
            "1x",
        ]))
        .unwrap();
        assert_eq!(
            fixed,
            s(&[
                "--workload",
                "uniform",
                "--trim-background",
                "--writes",
                "1x"
            ])
        );
        assert_eq!(axes.len(), 2);
        assert_eq!(axes[1].values, s(&["0.07", "0.15", "0.28"]));
        let grid = points(&axes);
        assert_eq!(grid.len(), 6);
        assert_eq!(grid[0], s(&["mx500", "0.07"]));
        assert_eq!(grid[5], s(&["840pro", "0.28"]));
        assert!(axes_err(&["--op", "0.07,,0.1"]).contains("empty value"));
        assert!(axes_err(&["op", "1"]).contains("expected a sim flag"));
        assert!(axes_err(&["--op", "1,2", "--op", "3,4"]).contains("twice"));
    }

    #[test]
    fn an_age_axis_is_separated_by_semicolons() {
        // Ages are comma lists: ';' separates the points of an --age axis.
        let (fixed, grid) = axes(&s(&["--age", "pe=0,retention=0; pe=3000,retention=1y"])).unwrap();
        assert!(fixed.is_empty());
        assert_eq!(
            grid[0].values,
            s(&["pe=0,retention=0", "pe=3000,retention=1y"])
        );
        let (fixed, grid) = axes(&s(&["--age", "pe=3000,retention=1y"])).unwrap();
        assert_eq!(fixed, s(&["--age", "pe=3000,retention=1y"]));
        assert!(grid.is_empty());
    }

    fn axes_err(v: &[&str]) -> String {
        axes(&s(v)).unwrap_err().to_string()
    }

    #[test]
    fn a_symlink_under_the_temporary_name_is_replaced_not_written_through() {
        let dir = std::env::temp_dir().join(format!("flashlab-whole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".results.csv.tmp")).unwrap();
        write_whole(&dir, "results.csv", "a,b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(dir.join("results.csv")).unwrap(),
            "a,b\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn numbers_sizes_and_multiples_are_numeric_axes() {
        assert_eq!(numeric("0.07"), Some(0.07));
        assert_eq!(numeric("4GiB"), Some((4u64 << 30) as f64));
        assert_eq!(numeric("2x"), Some(2.0));
        assert_eq!(numeric("greedy"), None);
    }
}
