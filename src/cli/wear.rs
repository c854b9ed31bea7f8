//! The wear report's text and plot (`sim --wear`, `--wear-plot`).

use super::*;

fn tb(bytes: f64) -> String {
    format!("{:.1} TB", bytes / 1e12)
}

/// `--wear`'s lines for a run on `preset`: the report, or why there is none.
pub(crate) fn print_wear_or_why(w: Option<&flash::WearReport>, preset: &flash::Preset) {
    match w {
        Some(w) => print_wear(w),
        None if preset.ssd_config().is_none() => println!(
            "  wear              preset {} is a hard disk: no flash to wear",
            preset.name
        ),
        None => println!(
            "  wear              no rated endurance for preset {} (give [ssd.endurance] in its TOML)",
            preset.name
        ),
    }
}

/// `--wear` of an engine command (`join`, `btree`, `kv`) on `backend` (a simulated drive:
/// `BackendArgs` refuses --wear on any other): the report's lines, or why there is none.
pub(crate) fn print_engine_wear(backend: &lab::backend::Backend, w: Option<&flash::WearReport>) {
    if let lab::backend::Backend::Sim { preset } = backend {
        print_wear_or_why(w, preset);
    }
}

/// `--wear --json` of an engine command: the report as `v["wear"]` (null without one).
pub(crate) fn add_wear_json(
    v: &mut serde_json::Value,
    w: Option<&flash::WearReport>,
) -> Result<()> {
    v["wear"] = serde_json::to_value(w)?;
    Ok(())
}

pub(crate) fn print_wear(w: &flash::WearReport) {
    println!(
        "  erase counts      {} blocks: min {} max {} mean {:.2} since new{}",
        w.blocks,
        w.erase_count_min,
        w.erase_count_max,
        w.erase_count_mean,
        if w.slc_mode_erases > 0 {
            format!(", plus {} SLC-mode block erases", w.slc_mode_erases)
        } else {
            String::new()
        }
    );
    let bins: Vec<String> = w
        .histogram
        .iter()
        .map(|b| {
            if b.erases_from == b.erases_to {
                format!("{}:{}", b.erases_from, b.blocks)
            } else {
                format!("{}-{}:{}", b.erases_from, b.erases_to, b.blocks)
            }
        })
        .collect();
    println!("  erase histogram   erases:blocks {}", bins.join(" "));
    println!(
        "  life used         {:.4}% (mean erases / rated {} P/E cycles), worst block {:.4}%",
        100.0 * w.life_used,
        w.rated_pe_cycles,
        100.0 * w.life_used_worst_block
    );
    if let Some(waf) = w.waf_bytes {
        println!(
            "  WAF (bytes)       {waf:.3} ({} host bytes, {} flash bytes programmed)",
            w.host_write_bytes, w.flash_write_bytes
        );
    }
    if let Some(per_tb) = w.life_used_per_tb_written {
        println!(
            "  life per TB       {:.4}% of the rated drive's life per TB host-written",
            100.0 * per_tb
        );
    }
    let rated = w.rated_tbw_bytes.map_or("none given".to_string(), |b| {
        format!(
            "{}{}",
            tb(b as f64),
            w.warranty_years
                .map_or(String::new(), |y| format!(", {y} years"))
        )
    });
    match w.projected_tbw_bytes {
        Some(t) => {
            println!(
                "  projected TBW     {} (datasheet: {rated}); worst block first: {}",
                tb(t),
                w.projected_tbw_worst_block_bytes.map_or("-".into(), tb)
            );
            let scaled = if w.capacity_scale != 1.0 {
                format!(
                    " of the rated drive (raw flash of this run x {:.3})",
                    w.capacity_scale
                )
            } else {
                String::new()
            };
            println!(
                "  formula           rated P/E x {} raw bytes{scaled} / WAF; {}",
                w.rated_raw_bytes,
                w.formula
                    .split_once("; ")
                    .map_or("", |(_, assumptions)| assumptions)
            );
        }
        None => println!("  projected TBW     - (no host writes measured); datasheet: {rated}"),
    }
    match (w.host_write_bytes_per_s, w.projected_days) {
        (Some(rate), Some(days)) => println!(
            "  projected life    {days:.1} days ({:.2} years) at the measured write rate, {:.1} MB/s (host bytes / simulated s)",
            days / 365.25,
            rate / 1e6
        ),
        _ if w.host_write_bytes == 0 => {
            println!("  projected life    - (no host writes measured)")
        }
        _ => println!("  projected life    - (days need the timed path: --timing on)"),
    }
}

/// Draws the erase-count distribution as bars into `path`.
pub(crate) fn plot_wear(
    w: &flash::WearReport,
    preset: &str,
    workload: &str,
    path: &std::path::Path,
) -> Result<()> {
    let plot = lab::report::BarPlot {
        file_stem: "wear".into(),
        title: format!("Erase counts: {preset}, {workload}"),
        y_label: "blocks".into(),
        categories: w
            .histogram
            .iter()
            .map(|b| {
                if b.erases_from == b.erases_to {
                    b.erases_from.to_string()
                } else {
                    format!("{}-{}", b.erases_from, b.erases_to)
                }
            })
            .collect(),
        series: vec![(
            "blocks".into(),
            w.histogram.iter().map(|b| Some(b.blocks as f64)).collect(),
        )],
    };
    let svg = lab::report::bar_plot_svg(&plot).map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::write(path, svg).with_context(|| format!("--wear-plot: writing {}", path.display()))
}
