//! The figures over time as one SVG (`--timeseries-plot`): a panel per figure (IOPS, read
//! and write p99 latency, queue depth, WAF per interval, SLC cache fill), stacked over one
//! time axis, a line per run in its own colour (several runs overlaid: the compare view).

use flash::timeline::{IntervalRow, TimeSeries};
use plotters::prelude::*;

/// A line per run, in colours that read on white (Tableau's ten).
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Legend entries per row, each this wide.
const LEGEND_PER_ROW: usize = 4;
const LEGEND_ENTRY_PX: i32 = 230;

fn color(i: usize) -> RGBAColor {
    COLORS[i % COLORS.len()].to_rgba()
}

/// An axis value without trailing zeros (100000, 2.5, 0.03).
fn tick(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.3}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

const WIDTH_PX: u32 = 1000;
const PANEL_PX: u32 = 200;
const LEGEND_PX: u32 = 36;

/// One panel: its title, unit and the figure it plots from a row.
struct Panel {
    title: &'static str,
    unit: &'static str,
    log: bool,
    value: fn(&IntervalRow) -> Option<f64>,
}

const PANELS: [Panel; 6] = [
    Panel {
        title: "operations completed per second",
        unit: "IOPS",
        log: false,
        value: |r| Some(r.iops),
    },
    Panel {
        title: "read latency p99 (ms)",
        unit: "ms",
        log: true,
        value: |r| r.read.p99_us.map(|v| v / 1e3),
    },
    Panel {
        title: "write latency p99 (ms)",
        unit: "ms",
        log: true,
        value: |r| r.write.p99_us.map(|v| v / 1e3),
    },
    Panel {
        title: "mean requests outstanding",
        unit: "queue depth",
        log: false,
        value: |r| Some(r.queue_depth),
    },
    Panel {
        title: "WAF in the interval (flash pages / host pages written)",
        unit: "WAF",
        log: false,
        value: |r| r.waf,
    },
    Panel {
        title: "data in the SLC cache awaiting a fold (MB)",
        unit: "MB",
        log: false,
        value: |r| r.slc_held_bytes.map(|b| b as f64 / 1e6),
    },
];

/// Runs of consecutive defined points (an interval without the figure breaks the line).
fn segments(
    rows: &[IntervalRow],
    value: fn(&IntervalRow) -> Option<f64>,
    log: bool,
) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for r in rows {
        match value(r).filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            Some(v) => out
                .last_mut()
                .expect("one segment")
                .push((r.t_s + r.interval_s / 2.0, v)),
            None if out.last().is_some_and(|s| !s.is_empty()) => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// One panel on `area`: its axes (time, and `ys`, linear or log), then each run's line
/// segments in the run's colour.
fn draw_panel<Y>(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    p: &Panel,
    t_end: f64,
    ys: Y,
    lines: &[Vec<Vec<(f64, f64)>>],
) -> Result<(), String>
where
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut c = ChartBuilder::on(area)
        .caption(p.title, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_end, ys)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc(p.unit)
        .y_labels(6)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    for (i, segs) in lines.iter().enumerate() {
        for s in segs {
            c.draw_series(LineSeries::new(s.iter().copied(), color(i).stroke_width(2)))
                .map_err(e)?;
        }
    }
    Ok(())
}

/// The SVG of `runs` (a name and its figures each); panels no run has a value for are left
/// out.
pub fn timeseries_svg(runs: &[(String, &TimeSeries)]) -> Result<String, crate::LabError> {
    let panels: Vec<&Panel> = PANELS
        .iter()
        .filter(|p| {
            runs.iter().any(|(_, t)| {
                t.rows
                    .iter()
                    .any(|r| (p.value)(r).is_some_and(|v| !p.log || v > 0.0))
            })
        })
        .collect();
    let t_end = runs
        .iter()
        .flat_map(|(_, t)| t.rows.last().map(|r| r.t_s + r.interval_s))
        .fold(0.0f64, f64::max);
    if panels.is_empty() || t_end <= 0.0 {
        return Err("no interval has a figure to plot (the run completed no request)".into());
    }
    let legend_px = LEGEND_PX * runs.len().div_ceil(LEGEND_PER_ROW).max(1) as u32;
    let height = legend_px + PANEL_PX * panels.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, height)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let (legend, body) = root.split_vertically(legend_px);
        for (i, (name, _)) in runs.iter().enumerate() {
            let x = 70 + LEGEND_ENTRY_PX * (i % LEGEND_PER_ROW) as i32;
            let row = LEGEND_PX as i32 * (i / LEGEND_PER_ROW) as i32;
            let color = color(i);
            legend
                .draw(&PathElement::new(
                    vec![(x, 18), (x + 24, 18)],
                    color.stroke_width(3),
                ))
                .map_err(e)?;
            legend
                .draw(&Text::new(
                    name.clone(),
                    (x + 30, row + 10),
                    ("sans-serif", 15),
                ))
                .map_err(e)?;
        }
        let areas = body.split_evenly((panels.len(), 1));
        for (area, p) in areas.iter().zip(&panels) {
            let lines: Vec<Vec<Vec<(f64, f64)>>> = runs
                .iter()
                .map(|(_, t)| segments(&t.rows, p.value, p.log))
                .collect();
            let ys = lines.iter().flatten().flatten().map(|&(_, y)| y);
            let (lo, hi) = ys.fold((f64::MAX, f64::MIN), |(a, b), y| (a.min(y), b.max(y)));
            if lo > hi {
                continue;
            }
            if p.log {
                draw_panel(area, p, t_end, (lo / 1.5..hi * 1.5).log_scale(), &lines)?;
            } else {
                let top = if hi > 0.0 { hi * 1.1 } else { 1.0 };
                draw_panel(area, p, t_end, lo.min(0.0)..top, &lines)?;
            }
        }
        root.present().map_err(e)?;
    }
    Ok(svg)
}
