//! The report writer: one HTML page with a section per experiment (what it checks, the
//! reference numbers, ours, plots, tables, computed verdicts), SVG plots and CSV tables
//! beside it, and `results.json` with every measured number, reference and verdict.

use crate::safe_dir::{Kind, SafeDir};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed without markers (reference curves).
    pub reference: bool,
}

#[derive(Debug, Clone)]
pub struct LinePlot {
    pub file_stem: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// Grouped bars: one group per category, one bar per series (e.g. "paper" and "ours").
#[derive(Debug, Clone)]
pub struct BarPlot {
    pub file_stem: String,
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// (series name, one value per category; `None` = no value, no bar).
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

/// A figure of the report.
#[derive(Debug, Clone)]
pub enum Plot {
    Line(LinePlot),
    Bars(BarPlot),
}

impl Plot {
    fn file_stem(&self) -> &str {
        match self {
            Plot::Line(p) => &p.file_stem,
            Plot::Bars(p) => &p.file_stem,
        }
    }
    fn title(&self) -> &str {
        match self {
            Plot::Line(p) => &p.title,
            Plot::Bars(p) => &p.title,
        }
    }
    pub fn svg(&self) -> Result<String, crate::LabError> {
        match self {
            Plot::Line(p) => line_plot_svg(p),
            Plot::Bars(p) => bar_plot_svg(p),
        }
    }
}

impl From<LinePlot> for Plot {
    fn from(p: LinePlot) -> Plot {
        Plot::Line(p)
    }
}

impl From<BarPlot> for Plot {
    fn from(p: BarPlot) -> Plot {
        Plot::Bars(p)
    }
}

/// Renders grouped bars as an SVG document, values printed above the bars, the legend
/// beside the plot (never over a bar).
pub fn bar_plot_svg(p: &BarPlot) -> Result<String, crate::LabError> {
    let ymax = p
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, &b| a.max(b));
    if ymax <= 0.0 {
        return Err(format!("plot {} has no positive value", p.file_stem).into());
    }
    let n = p.categories.len();
    let k = p.series.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_PX.0 + LEGEND_PX, PLOT_PX.1))
            .into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let (plot_area, legend_area) = root.split_horizontally(PLOT_PX.0);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(&p.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..n as f64, 0f64..ymax * 1.18)
            .map_err(e)?;
        let cats = p.categories.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&move |x| {
                let i = (x - 0.5).round();
                if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
                    cats[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_desc(p.y_label.as_str())
            .y_label_formatter(&|v| axis_label(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(e)?;
        let width = 0.8 / k as f64;
        for (si, (_, values)) in p.series.iter().enumerate() {
            let color = Palette99::pick(si).to_rgba();
            let bars: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(ci, v)| v.map(|v| (ci, v)))
                .map(|(ci, v)| {
                    let x0 = ci as f64 + 0.1 + si as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], color.filled())
                })
                .collect();
            chart.draw_series(bars).map_err(e)?;
            let labels: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(ci, v)| v.map(|v| (ci, v)))
                .map(|(ci, v)| {
                    let x = ci as f64 + 0.1 + si as f64 * width + width * 0.1;
                    Text::new(format!("{v:.2}"), (x, v + ymax * 0.03), ("sans-serif", 11))
                })
                .collect();
            chart.draw_series(labels).map_err(e)?;
        }
        let names: Vec<&str> = p.series.iter().map(|(n, _)| n.as_str()).collect();
        legend_entries(&legend_area, &names, |area, i, y| {
            let color = Palette99::pick(i).to_rgba();
            area.draw(&Rectangle::new([(10, y - 6), (30, y + 6)], color.filled()))
                .map_err(e)
        })?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// A table, written as HTML and as CSV.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Table {
    pub file_stem: String,
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The table as CSV (RFC 4180 quoting where a cell needs it), headers first.
    pub fn to_csv(&self) -> String {
        // Rows of another length than the headers are written as they are (flexible), and
        // writing to memory cannot fail otherwise.
        let mut w = csv::WriterBuilder::new()
            .flexible(true)
            .from_writer(Vec::new());
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let _ = w.write_record(row);
        }
        let bytes = w.into_inner().unwrap_or_default();
        String::from_utf8(bytes).unwrap_or_default()
    }
}

/// A headline ratio holds within ±30% of the paper's value.
pub const HEADLINE_TOLERANCE: f64 = 0.3;

/// A claim checked against the run's numbers. In results.json a preview never holds:
/// its `holds` is false, `outcome` is `preview` and `holds_at_this_scale` is what this run
/// measured (see [`Verdict::outcome`]).
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The numbers a script reads (id, role, ours, paper, tolerance), where given.
    pub score: Option<Score>,
    pub claim: String,
    pub reference: String,
    pub measured: String,
    pub holds: bool,
    /// Set where this scale is only a preview of the verdict: the claim is judged at the
    /// paper's size (`--scale full`), and the text says why this scale cannot keep it.
    /// `holds` is still what this run measured.
    pub preview: Option<String>,
    /// For a prediction: what we believe the model lacks when it fails, with a source or a
    /// measured sensitivity (shown, and written to results.json as `believed_missing`,
    /// only when it fails). A failing prediction without one is marked as unexplained.
    pub if_missed: Option<String>,
}

/// How a verdict came out: a preview is neither (it is judged at `--scale full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Holds,
    Fails,
    Preview,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Holds => "holds",
            Outcome::Fails => "fails",
            Outcome::Preview => "preview",
        }
    }
}

impl Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        if let Some(sc) = &self.score {
            m.serialize_entry("id", &sc.id)?;
            m.serialize_entry("role", &sc.role)?;
            m.serialize_entry("ours", &sc.ours)?;
            m.serialize_entry("paper", &sc.paper)?;
            m.serialize_entry("tolerance", &sc.tolerance)?;
        }
        m.serialize_entry("claim", &self.claim)?;
        m.serialize_entry("reference", &self.reference)?;
        m.serialize_entry("measured", &self.measured)?;
        m.serialize_entry("holds", &(self.outcome() == Outcome::Holds))?;
        m.serialize_entry("outcome", self.outcome().word())?;
        if let Some(p) = &self.preview {
            m.serialize_entry("preview", p)?;
            m.serialize_entry("holds_at_this_scale", &self.holds)?;
        }
        if self.unexplained_miss() {
            m.serialize_entry("believed_missing", &serde_json::Value::Null)?;
        } else if let (Outcome::Fails, Some(why)) = (self.outcome(), &self.if_missed) {
            m.serialize_entry("believed_missing", why)?;
        }
        m.end()
    }
}

/// A section's verdicts counted apart: predictions that hold and fail, previews (judged at
/// `--scale full`, never counted as holding), model checks and calibrated numbers (each
/// with how many fail).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Tally {
    pub holds: usize,
    pub fails: usize,
    pub previews: usize,
    pub checks: usize,
    pub checks_failing: usize,
    pub calibrated: usize,
    pub calibrated_failing: usize,
    /// Failing predictions that do not say what is believed missing.
    pub fails_unexplained: usize,
}

impl Tally {
    pub fn of(verdicts: &[Verdict]) -> Tally {
        Self::counted(verdicts.iter().map(|v| {
            let role = v.score.as_ref().map_or(Role::Predicted, |s| s.role);
            (v.outcome(), role, v.unexplained_miss())
        }))
    }

    /// The counts of a section's verdicts as results.json holds them (its `verdicts`
    /// list): a kept section is counted from its verdicts, not from the tally saved beside
    /// them. None if an entry does not read as a verdict.
    pub fn of_json(verdicts: &serde_json::Value) -> Option<Tally> {
        let entries = verdicts.as_array()?;
        let mut read = Vec::with_capacity(entries.len());
        for v in entries {
            let outcome = match v.get("outcome")?.as_str()? {
                "holds" => Outcome::Holds,
                "fails" => Outcome::Fails,
                "preview" => Outcome::Preview,
                _ => return None,
            };
            let role = match v.get("role").and_then(|r| r.as_str()) {
                None | Some("predicted") => Role::Predicted,
                Some("check") => Role::Check,
                Some("calibrated") => Role::Calibrated,
                Some(_) => return None,
            };
            let unexplained = v.get("believed_missing").is_some_and(|b| b.is_null());
            read.push((outcome, role, unexplained));
        }
        Some(Self::counted(read.into_iter()))
    }

    /// Counts (outcome, role, whether a failing prediction leaves its miss unexplained).
    fn counted(verdicts: impl Iterator<Item = (Outcome, Role, bool)>) -> Tally {
        let mut t = Tally::default();
        for (outcome, role, unexplained) in verdicts {
            match (outcome, role) {
                (Outcome::Preview, _) => t.previews += 1,
                (o, Role::Check) => {
                    t.checks += 1;
                    t.checks_failing += usize::from(o == Outcome::Fails);
                }
                (o, Role::Calibrated) => {
                    t.calibrated += 1;
                    t.calibrated_failing += usize::from(o == Outcome::Fails);
                }
                (Outcome::Holds, Role::Predicted) => t.holds += 1,
                (_, Role::Predicted) => {
                    t.fails += 1;
                    t.fails_unexplained += usize::from(unexplained);
                }
            }
        }
        t
    }

    /// Another section's counts added.
    pub fn add(&mut self, o: &Tally) {
        self.holds += o.holds;
        self.fails += o.fails;
        self.previews += o.previews;
        self.checks += o.checks;
        self.checks_failing += o.checks_failing;
        self.calibrated += o.calibrated;
        self.calibrated_failing += o.calibrated_failing;
        self.fails_unexplained += o.fails_unexplained;
    }

    /// Whether anything failed (a prediction, a check or a calibrated number).
    pub fn any_failing(&self) -> bool {
        self.fails + self.checks_failing + self.calibrated_failing > 0
    }

    /// "5 of 8 predictions hold (3 fail) · 1 preview (judged at --scale full) · 4 checks
    /// hold · 3 calibrated numbers hold".
    pub fn sentence(&self) -> String {
        // "1 check holds", "4 checks hold", "4 checks (1 fails)".
        let counted = |n: usize, failing: usize, one: &str, many: &str| match (n, failing) {
            (0, _) => None,
            (1, 0) => Some(format!("1 {one} holds")),
            (n, 0) => Some(format!("{n} {many} hold")),
            (n, f) => Some(format!(
                "{n} {} ({f} {})",
                if n == 1 { one } else { many },
                if f == 1 { "fails" } else { "fail" }
            )),
        };
        let predictions = self.holds + self.fails;
        let mut parts = vec![match (predictions, self.fails) {
            (0, _) => "no predictions".to_string(),
            (1, _) => format!(
                "{} of 1 prediction holds{}",
                self.holds,
                match (self.fails, self.fails_unexplained) {
                    (0, _) => "",
                    (_, 0) => " (1 fails)",
                    _ => " (1 fails, without what is believed missing)",
                }
            ),
            (n, 0) => format!("{} of {n} predictions hold", self.holds),
            (n, f) => format!(
                "{} of {n} predictions hold ({f} {}{})",
                self.holds,
                if f == 1 { "fails" } else { "fail" },
                match self.fails_unexplained {
                    0 => String::new(),
                    u => format!(", {u} without what is believed missing"),
                }
            ),
        }];
        if self.previews > 0 {
            parts.push(format!(
                "{} preview{} (judged at --scale full)",
                self.previews,
                if self.previews == 1 { "" } else { "s" }
            ));
        }
        parts.extend(counted(self.checks, self.checks_failing, "check", "checks"));
        parts.extend(counted(
            self.calibrated,
            self.calibrated_failing,
            "calibrated number",
            "calibrated numbers",
        ));
        parts.join(" · ")
    }
}

impl Verdict {
    /// A predicted number the paper gives: holds within `tolerance` (relative) of it.
    pub fn numeric(
        id: &str,
        claim: &str,
        reference: &str,
        ours: f64,
        paper: f64,
        tolerance: f64,
        measured: String,
    ) -> Verdict {
        let score = Score {
            id: id.into(),
            role: Role::Predicted,
            ours: Some(ours),
            paper: Some(paper),
            tolerance: Some(tolerance),
        };
        Verdict {
            holds: score.within(),
            score: Some(score),
            claim: claim.into(),
            reference: reference.into(),
            measured,
            preview: None,
            if_missed: None,
        }
    }

    /// Whether the verdict `id` in `verdicts` holds (panics if there is none: for tests).
    #[cfg(test)]
    pub(crate) fn holds_in(verdicts: &[Verdict], id: &str) -> bool {
        verdicts
            .iter()
            .find(|v| v.score.as_ref().is_some_and(|s| s.id == id))
            .unwrap_or_else(|| panic!("no verdict {id}"))
            .holds
    }

    /// Test helper: asserts that every id of `ids` names a verdict of `verdicts` (a list of
    /// ids kept beside the verdicts, such as an experiment's quick-scale previews).
    #[cfg(test)]
    pub(crate) fn assert_ids_exist(verdicts: &[Verdict], ids: &[&str]) {
        for id in ids {
            assert!(verdicts.iter().any(|v| v.id() == *id), "no verdict {id}");
        }
    }

    /// "N of M": how many of the `predicted` verdicts among `verdicts` hold (a sensitivity
    /// table's last column).
    pub fn predictions_holding(verdicts: &[Verdict]) -> String {
        let predicted: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| v.score.as_ref().is_some_and(|s| s.role == Role::Predicted))
            .collect();
        format!(
            "{} of {}",
            predicted.iter().filter(|v| v.holds).count(),
            predicted.len()
        )
    }

    /// Test helper for null models: asserts that no `predicted` verdict of `verdicts`
    /// holds (a model without the mechanism must fail every prediction).
    #[cfg(test)]
    pub(crate) fn assert_no_prediction_holds(verdicts: &[Verdict]) {
        let holding: Vec<&str> = verdicts
            .iter()
            .filter(|v| v.holds)
            .filter_map(|v| v.score.as_ref())
            .filter(|s| s.role == Role::Predicted)
            .map(|s| s.id.as_str())
            .collect();
        assert!(
            holding.is_empty(),
            "predictions a null model passes: {holding:?}"
        );
    }

    /// Test helper: every verdict holds and no two share an id; returns the ids.
    #[cfg(test)]
    pub(crate) fn all_hold_with_unique_ids(
        verdicts: &[Verdict],
    ) -> std::collections::HashSet<String> {
        for v in verdicts {
            assert!(v.holds, "{}: {}", v.claim, v.measured);
        }
        let ids: std::collections::HashSet<String> = verdicts
            .iter()
            .map(|v| v.score.as_ref().expect("a scored verdict").id.clone())
            .collect();
        assert_eq!(ids.len(), verdicts.len(), "ids are unique: {ids:?}");
        ids
    }

    /// The same verdict with what we believe is missing should it fail (see
    /// [`Verdict::if_missed`]).
    pub fn if_missed(mut self, why: impl Into<String>) -> Verdict {
        self.if_missed = Some(why.into());
        self
    }

    /// A prediction that fails and does not say what is believed missing.
    pub fn unexplained_miss(&self) -> bool {
        self.outcome() == Outcome::Fails
            && self.if_missed.is_none()
            && self
                .score
                .as_ref()
                .is_none_or(|s| s.role == Role::Predicted)
    }

    /// The same verdict with another role (e.g. [`Role::Check`] for a model check).
    pub fn with_role(mut self, role: Role) -> Verdict {
        if let Some(s) = &mut self.score {
            s.role = role;
        }
        self
    }

    /// How it came out: a preview, else whether it holds.
    pub fn outcome(&self) -> Outcome {
        match (&self.preview, self.holds) {
            (Some(_), _) => Outcome::Preview,
            (None, true) => Outcome::Holds,
            (None, false) => Outcome::Fails,
        }
    }

    /// The id of the verdict (empty for one without a score).
    pub fn id(&self) -> &str {
        self.score.as_ref().map_or("", |s| s.id.as_str())
    }

    /// A predicted ordering the paper states (no number to be near): `ours` is the number
    /// the ordering is read from, `holds` whether it goes the paper's way.
    pub fn ordering(
        id: &str,
        claim: &str,
        reference: &str,
        ours: f64,
        holds: bool,
        measured: String,
    ) -> Verdict {
        Verdict {
            score: Some(Score {
                id: id.into(),
                role: Role::Predicted,
                ours: Some(ours),
                paper: None,
                tolerance: None,
            }),
            claim: claim.into(),
            reference: reference.into(),
            measured,
            holds,
            preview: None,
            if_missed: None,
        }
    }
}

/// What a verdict's number is to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The reference number set a model parameter: the verdict holds by construction.
    Calibrated,
    /// No parameter was set from it: the model predicts it.
    Predicted,
    /// A check of the model (against theory or its own limits), not a paper's finding.
    Check,
}

/// A verdict's numbers: `ours` and `paper` in the same unit (null where the claim is an
/// ordering); it holds when `|ours - paper| <= tolerance * paper`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// Stable and unique across the report: `<experiment>.<finding>`, kebab-case.
    pub id: String,
    pub role: Role,
    pub ours: Option<f64>,
    pub paper: Option<f64>,
    pub tolerance: Option<f64>,
}

impl Score {
    /// Whether `ours` lies within the tolerance of `paper` (false if either is missing).
    pub fn within(&self) -> bool {
        match (self.ours, self.paper, self.tolerance) {
            (Some(o), Some(p), Some(t)) => o.is_finite() && (o - p).abs() <= t * p.abs(),
            _ => false,
        }
    }
}

/// Where a reference number enters the model: used to set a parameter (calibrated), or
/// only compared with (predicted).
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    pub number: String,
    pub role: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub id: String,
    pub title: String,
    /// What the experiment checks and how, in a few sentences.
    pub question: String,
    pub seed: u64,
    pub runtime_s: f64,
    #[serde(skip)]
    pub plots: Vec<Plot>,
    pub tables: Vec<Table>,
    pub verdicts: Vec<Verdict>,
    pub provenance: Vec<Provenance>,
    /// Every measured and reference number, for scripts.
    pub results: serde_json::Value,
}

impl Section {
    /// A section for an experiment that failed: the error, and no numbers;
    /// `results.failed` carries the error for scripts.
    pub fn failed(id: &str, about: &str, error: &str, seed: u64) -> Section {
        Self::without_numbers(
            id,
            &format!("{id}: failed"),
            format!("This experiment ({about}) failed: {error}"),
            seed,
            serde_json::json!({ "failed": error }),
        )
    }

    /// Marks the verdicts `ids` as previews at a scale that cannot keep them (`why`
    /// says what the scale changes); the claims are judged at `--scale full`.
    /// An id that names no verdict is an error (a renamed verdict would otherwise
    /// silently stop being marked).
    pub fn mark_previews(&mut self, ids: &[&str], why: &str) -> Result<(), crate::LabError> {
        for id in ids {
            let v = self
                .verdicts
                .iter_mut()
                .find(|v| v.id() == *id)
                .ok_or_else(|| format!("{}: no verdict {id} to mark as a preview", self.id))?;
            v.preview = Some(why.to_string());
        }
        Ok(())
    }

    /// The section's verdicts counted apart, in words ([`Tally::sentence`]).
    pub fn claims_summary(&self) -> String {
        self.tally().sentence()
    }

    /// The section's verdicts counted apart.
    pub fn tally(&self) -> Tally {
        Tally::of(&self.verdicts)
    }

    /// A section that says why it has no numbers.
    fn without_numbers(
        id: &str,
        title: &str,
        question: String,
        seed: u64,
        results: serde_json::Value,
    ) -> Section {
        Section {
            id: id.into(),
            title: title.into(),
            question,
            seed,
            runtime_s: 0.0,
            plots: vec![],
            tables: vec![],
            verdicts: vec![],
            provenance: vec![],
            results,
        }
    }

    /// Whether the experiment failed (see [`Section::failed`]).
    pub fn failed_with(&self) -> Option<&str> {
        self.results.get("failed").and_then(|f| f.as_str())
    }

    /// A section for an experiment that could not run here: `reason` says why, `needs`
    /// what it would take; `results.skipped` carries the reason for scripts.
    pub fn skipped(id: &str, title: &str, reason: &str, needs: &str, seed: u64) -> Section {
        Self::without_numbers(
            id,
            title,
            format!("Skipped: {reason}. {needs}"),
            seed,
            serde_json::json!({ "skipped": reason }),
        )
    }
}

/// Prose for the page: escaped, with `code` in backticks set as code.
fn prose(s: &str) -> String {
    let escaped = html_escape(s);
    let mut out = String::with_capacity(escaped.len());
    for (i, part) in escaped.split('`').enumerate() {
        // Odd parts lie between a pair of backticks (a lone last one stays as text).
        if i % 2 == 1 && escaped.matches('`').count() > i {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            if i % 2 == 1 {
                out.push('`');
            }
            out.push_str(&digits_grouped_in_text(part));
        }
    }
    out
}

/// Text with every whole number of five or more digits grouped by thousands ("2500853760
/// bytes" → "2,500,853,760 bytes"); digits that are part of a word, an identifier or a
/// number's fraction ("0.123456", "v12345", "#12345", "2503.11665") are left as they are.
fn digits_grouped_in_text(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        let run: String = chars[start..i].iter().collect();
        let before = start.checked_sub(1).map(|b| chars[b]);
        let after = chars.get(i).copied();
        let glued = |c: Option<char>| {
            c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | ',' | '#' | '_' | '/'))
        };
        // A decimal point after the digits is fine ("12345.6"), one before is a fraction;
        // a comma or a full stop that ends a clause or a sentence is fine too.
        let next_is_digit = chars.get(i + 1).is_some_and(|c| c.is_ascii_digit());
        let after_ok = !glued(after)
            || (after == Some('.') && next_is_digit)
            || (matches!(after, Some(',') | Some('.')) && !next_is_digit);
        if run.len() >= 5 && !glued(before) && after_ok {
            out.push_str(&digits_grouped(&run));
        } else {
            out.push_str(&run);
        }
    }
    out
}

/// A measured-value cell: the number first, a long explanation folded under it.
fn ours_cell(ours: Option<f64>, paper: Option<f64>, measured: &str) -> String {
    const SHORT: usize = 90;
    if measured.chars().count() <= SHORT {
        return prose(measured);
    }
    let num = |v: f64| axis_label((v * 1000.0).round() / 1000.0);
    // Ours beside the paper's number in the same unit: the reference column words it as
    // the paper does ("61 s vs 78 s"), the score holds the ratio both are judged in.
    let head = match (ours, paper) {
        (Some(v), Some(p)) if v.is_finite() => format!("{} (paper {})", num(v), num(p)),
        (Some(v), None) if v.is_finite() => num(v),
        _ => measured.chars().take(40).collect::<String>() + "…",
    };
    format!(
        "<details><summary>{}</summary>{}</details>",
        html_escape(&head),
        prose(measured)
    )
}

/// A table cell that is a plain number of five or more integer digits, with thousands
/// separators ("2536198144" → "2,536,198,144", "-12345.5" → "-12,345.5"); anything else
/// as it is. The CSV keeps the plain number for scripts.
fn digits_grouped(cell: &str) -> String {
    let (sign, rest) = match cell.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", cell),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let plain = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    if int.len() < 5 || !plain(int) || frac.is_some_and(|f| !plain(f)) {
        return cell.to_string();
    }
    let mut out = String::from(sign);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number for an axis label: whole numbers without a fraction ("2", not "2.0").
fn axis_label(v: f64) -> String {
    // A tick at zero reached by adding steps can be -1e-17: never "-0".
    let v = if v.abs() < 1e-9 { 0.0 } else { v };
    if v == v.round() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.3}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Whether x values are positive powers of two spanning at least 16x (batch sizes, buffer
/// sizes): such an axis is drawn in log2 so the small values do not crowd together.
fn powers_of_two_axis(p: &LinePlot) -> bool {
    let xs: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|pt| pt.0))
        .collect();
    let (lo, hi) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    !xs.is_empty()
        && lo > 0.0
        && hi / lo >= 16.0
        && xs.iter().all(|&x| x.log2() == x.log2().round())
}

/// Whether x values are positive and span at least two decades (a cost swept from 0.03
/// to 10 ms): such an axis is drawn in log10, ticked in the quantity's own units.
fn decades_axis(p: &LinePlot) -> bool {
    let xs = p.series.iter().flat_map(|s| s.points.iter().map(|pt| pt.0));
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    lo > 0.0 && hi / lo >= 100.0
}

/// Pixels of the plot (left) and of its legend (right, outside the data).
const PLOT_PX: (u32, u32) = (760, 460);
const LEGEND_PX: u32 = 250;

/// Renders a line plot as an SVG document: the lines in a plot area, their legend beside
/// it (never over the data); each line its own colour and marker shape, reference curves
/// dashed, each with its own dash; an x axis of powers of two in log2.
pub fn line_plot_svg(p: &LinePlot) -> Result<String, crate::LabError> {
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(format!("plot {} has no points", p.file_stem).into());
    }
    let ypad = ((y1 - y0) * 0.08).max(1e-9);
    let (y0, y1) = ((y0 - ypad).min(0.0f64.max(y0 - ypad)), y1 + ypad);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_PX.0 + LEGEND_PX, PLOT_PX.1))
            .into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let (plot_area, legend_area) = root.split_horizontally(PLOT_PX.0);
        if powers_of_two_axis(p) {
            let xr = (x0 / 1.25..x1 * 1.25).log_scale().base(2.0);
            draw_lines(&plot_area, p, xr, y0..y1)?;
        } else if decades_axis(p) {
            // Ticked in the quantity's own units (0.1, 1, 10), not in its logarithm.
            let xr = (x0 / 1.5..x1 * 1.5).log_scale();
            draw_lines(&plot_area, p, xr, y0..y1)?;
        } else {
            let xpad = ((x1 - x0) * 0.03).max(1e-9);
            draw_lines(&plot_area, p, x0 - xpad..x1 + xpad, y0..y1)?;
        }
        draw_legend(&legend_area, p)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// The style of line `i` of a plot: colour, and for reference curves the dash.
fn series_style(s: &Series, i: usize) -> (RGBAColor, u32, u32) {
    if s.reference {
        // Reference curves: shades of grey, each its own dash.
        let grey = [0u8, 90, 150][i % 3];
        (
            RGBColor(grey, grey, grey).to_rgba(),
            4 + 4 * (i as u32 % 3),
            4,
        )
    } else {
        (Palette99::pick(i).to_rgba(), 0, 0)
    }
}

/// Draws marker `k` (circle, triangle, square, diamond, cross, in turn) at `(x, y)`.
fn marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    k: usize,
    (x, y): (i32, i32),
    color: RGBAColor,
    r: i32,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    match k % 5 {
        0 => area
            .draw(&Circle::new((x, y), r, color.filled()))
            .map_err(e),
        1 => area
            .draw(&Polygon::new(
                vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)],
                color.filled(),
            ))
            .map_err(e),
        2 => area
            .draw(&Rectangle::new(
                [(x - r, y - r), (x + r, y + r)],
                color.filled(),
            ))
            .map_err(e),
        3 => area
            .draw(&Polygon::new(
                vec![
                    (x, y - r - 1),
                    (x + r + 1, y),
                    (x, y + r + 1),
                    (x - r - 1, y),
                ],
                color.filled(),
            ))
            .map_err(e),
        _ => {
            area.draw(&PathElement::new(
                vec![(x - r, y - r), (x + r, y + r)],
                color.stroke_width(2),
            ))
            .map_err(e)?;
            area.draw(&PathElement::new(
                vec![(x - r, y + r), (x + r, y - r)],
                color.stroke_width(2),
            ))
            .map_err(e)
        }
    }
}

/// The plot's lines on `area` with x coordinates `xs` (linear or log).
fn draw_lines<XS>(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    p: &LinePlot,
    xs: XS,
    ys: std::ops::Range<f64>,
) -> Result<(), String>
where
    XS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(xs, ys)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&|v| axis_label(*v))
        .y_label_formatter(&|v| axis_label(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    // Reference curves first, so the simulated lines and markers are drawn over them;
    // their markers smaller.
    let order = p
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.reference)
        .chain(p.series.iter().enumerate().filter(|(_, s)| !s.reference));
    for (i, s) in order {
        let (color, dash, gap) = series_style(s, i);
        if s.reference {
            chart
                .draw_series(DashedLineSeries::new(
                    s.points.clone(),
                    dash,
                    gap,
                    color.stroke_width(2),
                ))
                .map_err(e)?;
        } else {
            chart
                .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
                .map_err(e)?;
        }
        let plotting = chart.plotting_area();
        for &pt in &s.points {
            let at = plotting.map_coordinate(&pt);
            let (ox, oy) = plotting.get_base_pixel();
            marker(
                &plotting.strip_coord_spec(),
                i,
                (at.0 - ox, at.1 - oy),
                color,
                if s.reference { 2 } else { 4 },
            )?;
        }
    }
    Ok(())
}

/// The legend in its own area: each line's dash or colour and marker, and its name
/// (wrapped when long).
fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    p: &LinePlot,
) -> Result<(), String> {
    let names: Vec<&str> = p.series.iter().map(|s| s.name.as_str()).collect();
    legend_entries(area, &names, |area, i, y| {
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        let s = &p.series[i];
        let (color, dash, gap) = series_style(s, i);
        if s.reference {
            let mut x = 6;
            while x < 34 {
                area.draw(&PathElement::new(
                    vec![(x, y), ((x + dash as i32).min(34), y)],
                    color.stroke_width(2),
                ))
                .map_err(e)?;
                x += (dash + gap) as i32;
            }
        } else {
            area.draw(&PathElement::new(
                vec![(6, y), (34, y)],
                color.stroke_width(2),
            ))
            .map_err(e)?;
        }
        marker(area, i, (20, y), color, if s.reference { 3 } else { 4 })
    })
}

/// A legend down `area`: for entry `i`, `swatch(area, i, y)` draws its key at height `y`
/// (x 6 to 34), and its name follows, wrapped at about 30 characters a line.
fn legend_entries(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    names: &[&str],
    swatch: impl Fn(&DrawingArea<SVGBackend, plotters::coord::Shift>, usize, i32) -> Result<(), String>,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    let font = ("sans-serif", 13).into_font();
    let mut y = 48;
    for (i, name) in names.iter().enumerate() {
        swatch(area, i, y)?;
        let mut line = String::new();
        let mut lines = Vec::new();
        for word in name.split_whitespace() {
            if !line.is_empty() && line.len() + word.len() > 30 {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
        for (k, l) in lines.iter().enumerate() {
            area.draw(&Text::new(
                l.clone(),
                (42, y - 7 + 15 * k as i32),
                font.clone(),
            ))
            .map_err(e)?;
        }
        y += 15 * lines.len() as i32 + 10;
    }
    Ok(())
}

/// Run-wide facts shown at the top of the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunInfo {
    pub scale: String,
    pub command: String,
    pub version: String,
    pub total_runtime_s: f64,
    /// When the run started, UTC ("2026-11-28 21:34 UTC"; empty where unknown).
    #[serde(default)]
    pub started_utc: String,
}

/// `t` as "YYYY-MM-DD HH:MM UTC".
pub fn utc_minute(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    format!(
        "{} {:02}:{:02} UTC",
        civil_date(days),
        rem / 3_600,
        rem % 3_600 / 60
    )
}

/// The proleptic Gregorian date ("YYYY-MM-DD") of day `days` since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
pub fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A section of an earlier report kept as it was (`reproduce --only X` into a report):
/// its contents line, its HTML and its results.json entry, as the run that made it wrote
/// them (each section's HTML says which run that was).
#[derive(Debug, Clone)]
pub struct KeptSection {
    pub id: String,
    pub toc: String,
    pub html: String,
    pub json: serde_json::Value,
    pub tally: Tally,
}

/// What a section keeps of itself beside its figures, so a later run can keep it.
const SECTION_HTML: &str = "section.html";
const SECTION_TOC: &str = "toc.html";

/// The sections `ids` of the report in `dir`, as its run wrote them; a section missing
/// any part (an older report, a failed write) is left out, to be removed as stale.
pub fn kept_sections(dir: &Path, ids: &[String]) -> Vec<KeptSection> {
    // Read inside the open directory only: never through a symlink (a section directory
    // or a file), never from a FIFO.
    let Ok(root) = SafeDir::open(dir) else {
        return Vec::new();
    };
    let json = results_json_in(&root);
    ids.iter()
        .filter_map(|id| {
            let mut entry = json.get("experiments")?.get(id)?.clone();
            let tally = Tally::of_json(entry.get("verdicts")?)?;
            entry
                .as_object_mut()?
                .insert("tally".into(), serde_json::to_value(tally).ok()?);
            let sec = root.subdir_existing(id).ok().flatten()?;
            let read = |f: &str| sec.read_text(f).ok().flatten();
            Some(KeptSection {
                id: id.clone(),
                toc: read(SECTION_TOC)?,
                html: read(SECTION_HTML)?,
                json: entry,
                tally,
            })
        })
        .collect()
}

/// The file that marks a directory as a report flashlab made (so a later run may replace
/// what is in it). It lists the sections the report holds, one `section ID` line each: a
/// later run removes only those of them it does not write again.
pub const REPORT_MARK: &str = ".flashlab-report";

/// The first line of [`REPORT_MARK`].
const MARK_HEADER: &str =
    "made by flashlab reproduce: a later run may replace what is in this directory";

/// What [`prepare_report_dir`] found in the directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReportDir {
    /// The sections an earlier report of flashlab's wrote there (from its mark).
    pub earlier_sections: Vec<String>,
}

/// Makes `dir` ready for a report before any experiment runs: a new or empty directory
/// is created and marked; one flashlab made (its mark, a regular file; or a report
/// written before marks existed: an `index.html` titled "flashlab report", whose sections
/// are then left alone) is kept and marked; anything else is refused, as is a directory
/// that cannot be written (found now, not after the run). Nothing is written through a
/// symlink.
pub fn prepare_report_dir(dir: &Path) -> Result<ReportDir, crate::LabError> {
    let mut found = ReportDir::default();
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(format!("--out {}: not a directory", dir.display()).into())
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir)
                .map_err(|e| format!("--out {}: cannot read it: {e}", dir.display()))?;
            let empty = entries.next().is_none();
            let mark = dir.join(REPORT_MARK);
            let marked = match std::fs::symlink_metadata(&mark) {
                Ok(m) if m.file_type().is_file() => true,
                Ok(_) => {
                    return Err(format!(
                        "--out {}: its {REPORT_MARK} is not a regular file (a symlink or directory); nothing was touched",
                        dir.display()
                    )
                    .into())
                }
                Err(_) => false,
            };
            if marked {
                let text = std::fs::read_to_string(&mark).unwrap_or_default();
                found.earlier_sections = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("section "))
                    .map(str::to_string)
                    .collect();
            }
            let legacy = !marked
                && std::fs::symlink_metadata(dir.join("index.html"))
                    .is_ok_and(|m| m.file_type().is_file())
                && std::fs::read_to_string(dir.join("index.html"))
                    .is_ok_and(|h| h.contains("<title>flashlab report</title>"));
            if legacy {
                // A report whose mark was removed by hand: the sections it can give back
                // whole are kept as a marked report's would be.
                found.earlier_sections = keepable_sections(dir);
            }
            if !empty && !marked && !legacy {
                return Err(format!(
                    "--out {}: not empty, and not a report flashlab made (no {REPORT_MARK} in it): give a new or empty directory (nothing in it was touched)",
                    dir.display()
                )
                .into());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("--out {}: cannot create it: {e}", dir.display()))?;
        }
        Err(e) => return Err(format!("--out {}: {e}", dir.display()).into()),
    }
    SafeDir::open(dir)
        .and_then(|d| write_mark(&d, &found.earlier_sections))
        .map_err(|e| format!("--out {}: cannot write in it: {e}", dir.display()))?;
    Ok(found)
}

/// The report's results.json in `root`, read inside the directory (never through a
/// symlink); null if it is missing or not JSON.
fn results_json_in(root: &SafeDir) -> serde_json::Value {
    root.read_text("results.json")
        .ok()
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// The sections of the report in `dir` (its results.json) that [`kept_sections`] could
/// keep whole: each with its saved HTML and contents line.
fn keepable_sections(dir: &Path) -> Vec<String> {
    let Ok(root) = SafeDir::open(dir) else {
        return Vec::new();
    };
    let json = results_json_in(&root);
    let Some(experiments) = json.get("experiments").and_then(|e| e.as_object()) else {
        return Vec::new();
    };
    experiments
        .keys()
        .filter(|id| {
            root.subdir_existing(id).ok().flatten().is_some_and(|sec| {
                [SECTION_HTML, SECTION_TOC]
                    .iter()
                    .all(|f| sec.read_text(f).ok().flatten().is_some())
            })
        })
        .cloned()
        .collect()
}

/// Writes the mark listing `sections` into the report directory `dir`.
fn write_mark(dir: &SafeDir, sections: &[String]) -> std::io::Result<()> {
    let mut text = format!("{MARK_HEADER}\n");
    for s in sections {
        text.push_str(&format!("section {s}\n"));
    }
    dir.write(REPORT_MARK, text.as_bytes())
}

/// Removes what an earlier report wrote in its section `id` of the report directory
/// `out` (the section's SVG and CSV files) and the section if nothing else is left in it;
/// returns what was left (things flashlab did not write), for the caller to say. Nothing
/// is followed: a symlink by the section's name is removed itself.
pub fn remove_stale_section(out: &Path, id: &str) -> Vec<PathBuf> {
    let mut left = Vec::new();
    let Ok(root) = SafeDir::open(out) else {
        return left;
    };
    match root.kind(id) {
        Ok(Some(Kind::Dir)) => {}
        Ok(Some(Kind::Symlink)) => {
            let _ = root.remove_file(id);
            return left;
        }
        _ => return left,
    }
    let Ok(Some(sec)) = root.subdir_existing(id) else {
        return left;
    };
    for name in sec.names().unwrap_or_default() {
        let ours = (name.ends_with(".svg")
            || name.ends_with(".csv")
            || name == SECTION_HTML
            || name == SECTION_TOC)
            && sec.kind(&name).ok().flatten() == Some(Kind::File);
        if !(ours && sec.remove_file(&name).is_ok()) {
            left.push(out.join(id).join(&name));
        }
    }
    if left.is_empty() {
        let _ = root.remove_dir(id);
    }
    left
}

/// A section's heading, question, run line and previews' explanation.
fn section_head(s: &Section, info: &RunInfo) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<section id=\"{}\"><h2>{}</h2>",
        s.id,
        html_escape(&s.title)
    );
    if s.failed_with().is_none() && !s.verdicts.is_empty() {
        let _ = writeln!(
            body,
            "<p class=\"tally\">{}</p>",
            html_escape(&s.tally().sentence())
        );
    }
    let class = if s.failed_with().is_some() {
        " class=\"fails\""
    } else {
        ""
    };
    let _ = writeln!(body, "<p{class}>{}</p>", prose(&s.question));
    // Experiments run side by side, their jobs sharing the cores: the time one ended
    // after says little of its own work, so its jobs' time goes beside it.
    let jobs_s: f64 = s
        .results
        .get("job_wall_s")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_f64()).sum())
        .unwrap_or(0.0);
    let time = if jobs_s > 0.0 {
        format!(
            "ended after {:.1} s (its jobs: {jobs_s:.1} s on the cores it shared)",
            s.runtime_s
        )
    } else {
        format!("ended after {:.1} s", s.runtime_s)
    };
    let _ = writeln!(
        body,
        "<p class=\"meta\">seed {} · {time} · reproduce: <code>flashlab reproduce --only {} --scale {}</code></p>",
        s.seed, s.id, info.scale
    );
    let _ = writeln!(
        body,
        "<p class=\"meta\">Made by <code>{}</code> (flashlab {}, scale {}{}).</p>",
        html_escape(&info.command),
        html_escape(&info.version),
        html_escape(&info.scale),
        if info.started_utc.is_empty() {
            String::new()
        } else {
            format!(", started {}", html_escape(&info.started_utc))
        }
    );
    let mut whys: Vec<&str> = s
        .verdicts
        .iter()
        .filter_map(|v| v.preview.as_deref())
        .collect();
    whys.dedup();
    for why in whys {
        let _ = writeln!(
            body,
            "<p class=\"meta\"><b>Previews.</b> The verdicts marked preview are judged at <code>--scale full</code>: {}.</p>",
            prose(why)
        );
    }
    body
}

/// A section's verdicts as a table, each with its role and id.
fn verdicts_html(s: &Section) -> String {
    let mut body = String::new();
    body.push_str("<div class=\"scroll\"><table class=\"verdicts\"><tr><th>claim</th><th>reference</th><th>ours</th><th>verdict</th></tr>\n");
    for v in &s.verdicts {
        let _ = writeln!(
            body,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
            prose(&v.claim),
            v.score.as_ref().map_or(String::new(), |sc| format!(
                "<br><span class=\"meta\"><code>{}</code> · {}</span>",
                html_escape(&sc.id),
                match sc.role {
                    Role::Calibrated => "calibrated: holds by construction",
                    Role::Predicted => "predicted",
                    Role::Check => "model check",
                }
            )),
            prose(&v.reference),
            ours_cell(
                v.score.as_ref().and_then(|sc| sc.ours),
                v.score.as_ref().and_then(|sc| sc.paper),
                &v.measured
            ),
            match (&v.preview, v.holds) {
                (Some(_), _) => "preview",
                (None, true) => "holds",
                (None, false) => "fails",
            },
            match (&v.preview, v.holds) {
                (Some(_), held) => format!(
                    "preview: {} at this scale<br><span class=\"meta\">judged at <code>--scale full</code> (see above)</span>",
                    if held { "holds" } else { "does not hold" },
                ),
                (None, true) => "holds".into(),
                (None, false) => "does not hold".into(),
            }
        );
        body.push_str(&miss_html(v));
    }
    body.push_str("</table></div>\n");
    body
}

/// Under a failing prediction: what is believed missing, or that nothing is said.
fn miss_html(v: &Verdict) -> String {
    match (&v.if_missed, v.outcome()) {
        (Some(why), Outcome::Fails) => format!(
            "<tr class=\"miss\"><td colspan=\"4\"><b>Believed missing</b> ({}): {}</td></tr>\n",
            html_escape(v.id()),
            prose(why)
        ),
        _ if v.unexplained_miss() => format!(
            "<tr class=\"miss\"><td colspan=\"4\" class=\"fails\">{}: nothing is said about what the model lacks (a defect)</td></tr>\n",
            html_escape(v.id())
        ),
        _ => String::new(),
    }
}

/// Where the section's numbers come from.
fn provenance_html(s: &Section) -> String {
    let mut body = String::new();
    if !s.provenance.is_empty() {
        body.push_str("<h3>Calibrated or predicted</h3><ul>\n");
        for p in &s.provenance {
            let _ = writeln!(
                body,
                "<li><b>{}</b>: {}</li>",
                prose(&p.number),
                prose(&p.role)
            );
        }
        body.push_str("</ul>\n");
    }
    body
}

/// A section's plots: each written as `ID/STEM.svg` and shown (one that cannot be drawn is
/// said instead).
fn figures_html(s: &Section, sec: &SafeDir, sdir: &Path) -> Result<String, crate::LabError> {
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    let mut body = String::new();
    for p in &s.plots {
        let svg = match p.svg() {
            Ok(svg) => svg,
            Err(e) => {
                // One plot that cannot be drawn does not cost the report.
                let _ = writeln!(
                    body,
                    "<p class=\"fails\">plot {} could not be drawn: {}</p>",
                    html_escape(p.title()),
                    html_escape(&e.to_string())
                );
                continue;
            }
        };
        let name = format!("{}.svg", p.file_stem());
        sec.write(&name, svg.as_bytes())
            .map_err(|e| io(&sdir.join(&name), e))?;
        let _ = writeln!(
            body,
            "<figure><img src=\"{id}/{f}.svg\" alt=\"{t}\"><figcaption>{t} (<a href=\"{id}/{f}.svg\">SVG</a>)</figcaption></figure>",
            id = s.id,
            f = p.file_stem(),
            t = html_escape(p.title())
        );
    }
    Ok(body)
}

/// A section's tables: each written as `ID/STEM.csv` and shown (long ones folded).
fn tables_html(s: &Section, sec: &SafeDir, sdir: &Path) -> Result<String, crate::LabError> {
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    let mut body = String::new();
    for t in &s.tables {
        let name = format!("{}.csv", t.file_stem);
        sec.write(&name, t.to_csv().as_bytes())
            .map_err(|e| io(&sdir.join(&name), e))?;
        // Long tables fold away (the CSV has them whole).
        const LONG_TABLE_ROWS: usize = 20;
        let folded = t.rows.len() > LONG_TABLE_ROWS;
        if folded {
            let _ = writeln!(
                body,
                "<details><summary>{}: {} rows (click to show)</summary>",
                prose(&t.caption),
                t.rows.len()
            );
        }
        let _ = writeln!(
            body,
            "<h3>{} (<a href=\"{}/{}.csv\">CSV</a>)</h3><div class=\"scroll\"><table><tr>{}</tr>",
            prose(&t.caption),
            s.id,
            t.file_stem,
            t.headers
                .iter()
                .map(|h| format!("<th>{}</th>", html_escape(h)))
                .collect::<String>()
        );
        for row in &t.rows {
            let _ = writeln!(
                body,
                "<tr>{}</tr>",
                row.iter()
                    .map(|c| format!("<td>{}</td>", digits_grouped_in_text(&html_escape(c))))
                    .collect::<String>()
            );
        }
        body.push_str("</table></div>\n");
        if folded {
            body.push_str("</details>\n");
        }
    }
    Ok(body)
}

/// The page around the sections: style, run line, contents.
fn page_html(
    info: &RunInfo,
    total: &Tally,
    toc: &str,
    body: &str,
    kept: &[String],
    failed: &[String],
) -> String {
    let failed_line = if failed.is_empty() {
        String::new()
    } else {
        let named: Vec<String> = failed
            .iter()
            .map(|id| {
                if kept.contains(id) {
                    format!("{id} (kept from an earlier run)")
                } else {
                    id.clone()
                }
            })
            .collect();
        format!(
            "<p class=\"fails\">{} could not run to the end: {}; the section says why.</p>\n",
            if failed.len() == 1 {
                "One section"
            } else {
                "Some sections"
            },
            html_escape(&named.join(", "))
        )
    };
    let whose =
        if kept.is_empty() {
            "Every number below was computed by this run".to_string()
        } else {
            format!(
            "Every number below was computed by the run that made its section, which the section \
             names: this run's command is above; {} kept from earlier runs ({})",
            if kept.len() == 1 { "one section is" } else { "these sections are" },
            html_escape(&kept.join(", "))
        )
        };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>flashlab report</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.2em; font-size: 0.92em; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
th {{ background: #f3f3f3; }}
td:first-child {{ text-align: left; }}
.verdicts td {{ text-align: left; }}
td.holds {{ background: #e3f6e3; font-weight: bold; }}
td.preview {{ background: #f3f0e0; }}
td.fails {{ background: #fbe3e3; font-weight: bold; }}
p.fails, b.fails {{ color: #a00000; font-weight: bold; }}
.meta {{ color: #666; font-size: 0.9em; }}
tr.miss td {{ background: #fff8e6; font-size: 0.9em; border-top: none; }}
div.scroll {{ overflow-x: auto; max-width: 100%; }}
figure {{ margin: 1em 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}
section {{ border-top: 2px solid #ddd; margin-top: 2em; }}
span.holds {{ color: #1a7f1a; font-weight: bold; }} span.fails {{ color: #a00000; font-weight: bold; }}
p.tally {{ background: #f6f6f6; padding: 0.5em 0.8em; }}
</style></head><body>
<h1>flashlab report</h1>
<p class="meta">flashlab {ver} · scale <b>{scale}</b> · total run time {rt:.1} s · command <code>{cmd}</code></p>
<p>{whose}; every verdict is computed from those numbers.
Results are deterministic: the same command gives the same numbers (run times aside).
Machine-readable results: <a href="results.json">results.json</a>.</p>
<p class="tally"><b>All sections:</b> {tally}. A preview is judged at <code>--scale full</code> and never counted as holding; checks test the model (theory, datasheets, its own limits), calibrated numbers hold by construction.</p>
{failed_line}<ul class="toc">
{toc}</ul>
{body}</body></html>
"#,
        ver = html_escape(&info.version),
        scale = html_escape(&info.scale),
        rt = info.total_runtime_s,
        cmd = html_escape(&info.command),
        tally = html_escape(&total.sentence()),
    )
}

/// Writes `dir/index.html`, `dir/results.json`, and per section `dir/ID/*.svg|csv` (and
/// the section's HTML and contents line, which a later `--only` run keeps); `kept`, an
/// earlier report's sections this run did not make, go beside them as they were. The
/// sections come in the order of `order` (ids), any other last.
pub fn write_report(
    dir: &Path,
    info: &RunInfo,
    sections: &[Section],
    kept: &[KeptSection],
    order: &[&str],
) -> Result<PathBuf, crate::LabError> {
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let root = SafeDir::open(dir).map_err(|e| io(dir, e))?;
    // Each section's contents line, HTML, results.json entry and tally, by id.
    let mut parts: Vec<(String, String, String, serde_json::Value, Tally)> = Vec::new();
    for s in sections {
        let (toc, html) = section_html(s, info, &root, dir)?;
        for (name, text) in [(SECTION_HTML, &html), (SECTION_TOC, &toc)] {
            root.subdir(&s.id)
                .and_then(|d| d.write(name, text.as_bytes()))
                .map_err(|e| io(&dir.join(&s.id).join(name), e))?;
        }
        let mut v = serde_json::to_value(s).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert(
                "tally".into(),
                serde_json::to_value(s.tally()).unwrap_or_default(),
            );
            o.insert(
                "made_by".into(),
                serde_json::to_value(info).unwrap_or_default(),
            );
        }
        parts.push((s.id.clone(), toc, html, v, s.tally()));
    }
    for k in kept {
        parts.push((
            k.id.clone(),
            k.toc.clone(),
            k.html.clone(),
            k.json.clone(),
            k.tally,
        ));
    }
    let rank = |id: &str| order.iter().position(|o| *o == id).unwrap_or(order.len());
    parts.sort_by_key(|p| rank(&p.0));
    let mut total = Tally::default();
    for p in &parts {
        total.add(&p.4);
    }
    let toc: String = parts.iter().map(|p| p.1.as_str()).collect();
    let body: String = parts.iter().map(|p| p.2.as_str()).collect();
    let kept_ids: Vec<String> = kept.iter().map(|k| k.id.clone()).collect();
    // Sections that did not run to the end, this run's or kept ones.
    let failed: Vec<String> = parts
        .iter()
        .filter(|p| {
            p.3.pointer("/results/failed")
                .is_some_and(|f| f.is_string())
        })
        .map(|p| p.0.clone())
        .collect();
    let html = page_html(info, &total, &toc, &body, &kept_ids, &failed);
    let index = dir.join("index.html");
    root.write("index.html", html.as_bytes())
        .map_err(|e| io(&index, e))?;
    let json = serde_json::json!({
        "run": info,
        "tally": total,
        "kept_from_earlier_runs": kept_ids,
        "sections_failed": failed,
        "experiments": parts
            .iter()
            .map(|p| (p.0.clone(), p.3.clone()))
            .collect::<serde_json::Map<_, _>>(),
    });
    let path = dir.join("results.json");
    root.write(
        "results.json",
        serde_json::to_string_pretty(&json)?.as_bytes(),
    )
    .map_err(|e| io(&path, e))?;
    let ids: Vec<String> = parts.iter().map(|p| p.0.clone()).collect();
    write_mark(&root, &ids).map_err(|e| io(&dir.join(REPORT_MARK), e))?;
    Ok(index)
}

/// A section's contents line and HTML (its figures and tables written into its
/// directory on the way).
fn section_html(
    s: &Section,
    info: &RunInfo,
    root: &SafeDir,
    dir: &Path,
) -> Result<(String, String), crate::LabError> {
    let io = |what: &Path, e: std::io::Error| format!("cannot write {}: {e}", what.display());
    let sdir = dir.join(&s.id);
    let sec = root.subdir(&s.id).map_err(|e| io(&sdir, e))?;
    let mut toc = String::new();
    let mut body = String::new();
    let tally = s.tally();
    let status = match s.failed_with() {
        Some(_) => "<b class=\"fails\">failed</b>".to_string(),
        None => html_escape(&tally.sentence()),
    };
    // A mark in the contents: something fails (or the section failed), or nothing does.
    let mark = if s.failed_with().is_some() || tally.any_failing() {
        "<span class=\"fails\">✗</span>"
    } else {
        "<span class=\"holds\">✓</span>"
    };
    let _ = writeln!(
        toc,
        "<li>{mark} <a href=\"#{id}\">{t}</a> — {status}</li>",
        id = s.id,
        t = html_escape(&s.title),
    );
    body.push_str(&section_head(s, info));
    body.push_str(&verdicts_html(s));
    body.push_str(&provenance_html(s));
    body.push_str(&figures_html(s, &sec, &sdir)?);
    body.push_str(&tables_html(s, &sec, &sdir)?);
    body.push_str("</section>\n");
    Ok((toc, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_never_counts_as_holding_and_each_kind_is_counted_apart() {
        let mut v = vec![
            Verdict::numeric("x.a", "a", "r", 1.0, 1.0, 0.1, "m".into()),
            Verdict::numeric("x.b", "b", "r", 3.0, 1.0, 0.1, "m".into()),
            Verdict::numeric("x.c", "c", "r", 1.0, 1.0, 0.1, "m".into()).with_role(Role::Check),
            Verdict::numeric("x.d", "d", "r", 2.0, 1.0, 0.1, "m".into())
                .with_role(Role::Calibrated),
            Verdict::numeric("x.e", "e", "r", 1.0, 1.0, 0.1, "m".into()),
        ];
        v[4].preview = Some("a small scale".into());
        let t = Tally::of(&v);
        assert_eq!(
            t,
            Tally {
                holds: 1,
                fails: 1,
                previews: 1,
                checks: 1,
                checks_failing: 0,
                calibrated: 1,
                calibrated_failing: 1,
                fails_unexplained: 1,
            }
        );
        assert!(t.any_failing());
        assert_eq!(
            t.sentence(),
            "1 of 2 predictions hold (1 fails, 1 without what is believed missing) · 1 preview (judged at --scale full) · 1 check holds · 1 calibrated number (1 fails)"
        );
        // A miss that says what is believed missing is no longer counted as unexplained.
        let explained: Vec<Verdict> = v.iter().cloned().map(|x| x.if_missed("why")).collect();
        assert_eq!(Tally::of(&explained).fails_unexplained, 0);
        // In results.json the preview does not hold; what this scale measured is beside it.
        let p = serde_json::to_value(&v[4]).unwrap();
        assert_eq!(p["holds"], false);
        assert_eq!(p["outcome"], "preview");
        assert_eq!(p["holds_at_this_scale"], true);
        let h = serde_json::to_value(&v[0]).unwrap();
        assert_eq!(
            (h["holds"].clone(), h["outcome"].clone()),
            (true.into(), "holds".into())
        );
        assert!(h.get("holds_at_this_scale").is_none());
        for k in [
            "id",
            "role",
            "ours",
            "paper",
            "tolerance",
            "claim",
            "reference",
            "measured",
        ] {
            assert!(h.get(k).is_some(), "{k}");
        }
    }

    #[test]
    fn csv_escapes_commas_and_quotes() {
        let t = Table {
            headers: vec!["a".into(), "b".into()],
            rows: vec![vec!["1,5".into(), "say \"hi\"".into()]],
            ..Default::default()
        };
        assert_eq!(t.to_csv(), "a,b\n\"1,5\",\"say \"\"hi\"\"\"\n");
    }

    #[test]
    fn a_preview_is_marked_counted_and_serialised_and_an_unknown_id_is_an_error() {
        let mut s = Section::without_numbers("x", "X", "q".into(), 1, serde_json::json!({}));
        s.verdicts = vec![
            Verdict::numeric("x.a", "a", "r", 1.0, 1.0, 0.1, "m".into()),
            Verdict::numeric("x.b", "b", "r", 3.0, 1.0, 0.1, "m".into()),
        ];
        assert_eq!(
            s.claims_summary(),
            "1 of 2 predictions hold (1 fails, 1 without what is believed missing)"
        );
        s.mark_previews(&["x.b"], "quick is smaller").unwrap();
        assert_eq!(
            s.claims_summary(),
            "1 of 1 prediction holds · 1 preview (judged at --scale full)"
        );
        let b = serde_json::to_value(&s.verdicts[1]).unwrap();
        assert_eq!(b["preview"], "quick is smaller");
        assert_eq!(b["holds"], false, "a preview never holds");
        assert_eq!(b["holds_at_this_scale"], false, "what this run measured");
        let a = serde_json::to_value(&s.verdicts[0]).unwrap();
        assert!(a.get("preview").is_none());
        let e = s.mark_previews(&["x.renamed"], "w").unwrap_err();
        assert!(e.to_string().contains("x.renamed"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let index = write_report(dir.path(), &RunInfo::default(), &[s], &[], &[]).unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        assert_eq!(html.matches("<b>Previews.</b>").count(), 1, "the why once");
        assert!(html.contains("quick is smaller"));
        assert!(html.contains("preview: does not hold at this scale"));
        assert!(html.contains("1 preview (judged at --scale full)"));
        // The contents mark the section: nothing in it fails.
        assert!(html.contains("<span class=\"holds\">✓</span> <a href=\"#x\">"));
        // The overall tally at the top.
        assert!(html.contains("<b>All sections:</b> 1 of 1 prediction holds"));
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["tally"]["previews"], 1);
        assert_eq!(json["experiments"]["x"]["tally"]["holds"], 1);
    }

    #[test]
    fn a_run_of_one_section_into_a_report_replaces_it_and_keeps_the_others_as_they_were() {
        let dir = tempfile::tempdir().unwrap();
        let section = |id: &str, ours: f64| {
            let mut s = Section::without_numbers(
                id,
                &id.to_uppercase(),
                "q".into(),
                1,
                serde_json::json!({}),
            );
            s.verdicts = vec![Verdict::numeric(
                &format!("{id}.v"),
                "c",
                "r",
                ours,
                1.0,
                0.1,
                format!("ours {ours}"),
            )];
            s
        };
        let info = |cmd: &str| RunInfo {
            command: cmd.into(),
            started_utc: "2026-11-28 21:00 UTC".into(),
            ..Default::default()
        };
        let order = ["a", "b"];
        write_report(
            dir.path(),
            &info("full run"),
            &[section("a", 1.0), section("b", 1.0)],
            &[],
            &order,
        )
        .unwrap();
        // `--only b` into it: b replaced (now failing), a kept as the full run made it.
        let kept = kept_sections(dir.path(), &["a".to_string()]);
        assert_eq!(kept.len(), 1);
        let index = write_report(
            dir.path(),
            &info("only b"),
            &[section("b", 3.0)],
            &kept,
            &order,
        )
        .unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        let (a, b) = (
            html.find("id=\"a\"").unwrap(),
            html.find("id=\"b\"").unwrap(),
        );
        assert!(a < b, "in the experiments' order");
        assert!(html.contains("Made by <code>full run</code>"));
        assert!(html.contains("one section is kept from earlier runs (a)"));
        assert!(html.contains("Made by <code>only b</code>"));
        assert!(html.contains("ours 1") && html.contains("ours 3"));
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["experiments"]["a"]["made_by"]["command"], "full run");
        assert_eq!(json["experiments"]["b"]["made_by"]["command"], "only b");
        assert_eq!(json["kept_from_earlier_runs"][0], "a");
        // The overall tally counts both: a holds, b fails.
        assert_eq!(
            (
                json["tally"]["holds"].clone(),
                json["tally"]["fails"].clone()
            ),
            (1.into(), 1.into())
        );
        // A section directory that is a symlink is never read through.
        let outside = tempfile::tempdir().unwrap();
        let moved = outside.path().join("a");
        std::fs::rename(dir.path().join("a"), &moved).unwrap();
        std::os::unix::fs::symlink(&moved, dir.path().join("a")).unwrap();
        assert!(kept_sections(dir.path(), &["a".to_string()]).is_empty());
        std::fs::remove_file(dir.path().join("a")).unwrap();
        std::fs::rename(&moved, dir.path().join("a")).unwrap();
        assert_eq!(kept_sections(dir.path(), &["a".to_string()]).len(), 1);
        // A section without its saved parts (an older report's) is not kept.
        std::fs::remove_file(dir.path().join("a").join(SECTION_HTML)).unwrap();
        assert!(kept_sections(dir.path(), &["a".to_string()]).is_empty());
        assert_eq!(utc_minute(std::time::UNIX_EPOCH), "1970-01-01 00:00 UTC");
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_901_640);
        assert_eq!(utc_minute(t), "2026-11-28 21:34 UTC");
    }

    #[test]
    fn a_kept_section_is_counted_from_its_verdicts_flagged_if_it_failed_and_kept_without_the_mark()
    {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Section::without_numbers("a", "A", "q".into(), 1, serde_json::json!({}));
        a.verdicts = vec![
            Verdict::numeric("a.v", "c", "r", 3.0, 1.0, 0.1, "m".into()),
            Verdict::numeric("a.w", "c", "r", 1.0, 1.0, 0.1, "m".into()).with_role(Role::Check),
        ];
        let b = Section::without_numbers(
            "b",
            "B",
            "q".into(),
            1,
            serde_json::json!({"failed": "the drive ran out of space"}),
        );
        let order = ["a", "b"];
        write_report(
            dir.path(),
            &RunInfo::default(),
            &[a.clone(), b],
            &[],
            &order,
        )
        .unwrap();
        // The verdicts read back count as the section's own do.
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("results.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            Tally::of_json(&json["experiments"]["a"]["verdicts"]),
            Some(a.tally())
        );
        assert_eq!(json["sections_failed"], serde_json::json!(["b"]));
        // A tally edited by hand is not believed: the kept section is counted again.
        let mut edited = json.clone();
        edited["experiments"]["a"]["tally"]["holds"] = 5.into();
        std::fs::write(
            dir.path().join("results.json"),
            serde_json::to_string(&edited).unwrap(),
        )
        .unwrap();
        // The mark removed by hand: the report is still found, its sections still kept.
        std::fs::remove_file(dir.path().join(REPORT_MARK)).unwrap();
        let found = prepare_report_dir(dir.path()).unwrap();
        assert_eq!(
            found.earlier_sections,
            vec!["a".to_string(), "b".to_string()]
        );
        let kept = kept_sections(dir.path(), &["b".to_string()]);
        let index = write_report(dir.path(), &RunInfo::default(), &[a], &kept, &order).unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        assert!(
            html.contains("One section could not run to the end: b (kept from an earlier run)"),
            "{html}"
        );
        let kept = kept_sections(dir.path(), &["a".to_string()]);
        assert_eq!(kept[0].tally.holds, 0);
        assert_eq!(kept[0].tally.fails, 1);
        assert_eq!(kept[0].json["tally"]["holds"], 0);
        // Something that is not a verdict list is not counted.
        assert_eq!(
            Tally::of_json(&serde_json::json!([{"outcome": "maybe"}])),
            None
        );
    }

    #[test]
    fn an_axis_over_decades_is_ticked_in_its_own_units_and_references_sit_under_the_lines() {
        let costs = [0.03, 0.3, 1.0, 3.0, 10.0];
        let p = LinePlot {
            file_stem: "t".into(),
            title: "t".into(),
            x_label: "cost, ms (log scale)".into(),
            y_label: "y".into(),
            series: vec![
                Series {
                    name: "paper".into(),
                    points: costs.iter().map(|&c| (c, 2.7)).collect(),
                    reference: true,
                },
                Series {
                    name: "ours".into(),
                    points: costs.iter().map(|&c| (c, 1.0 + c)).collect(),
                    reference: false,
                },
            ],
        };
        assert!(decades_axis(&p) && !powers_of_two_axis(&p));
        let svg = line_plot_svg(&p).unwrap();
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').map(|(_, rest)| rest))
            .filter_map(|t| t.split("</text>").next())
            .map(str::trim)
            .collect();
        for tick in ["0.1", "1", "10"] {
            assert!(texts.contains(&tick), "no tick {tick}: {texts:?}");
        }
        assert!(!texts.contains(&"-1"), "ticks in the logarithm: {texts:?}");
        // The reference's dashes come before (under) the simulated line in the SVG.
        let dashed = svg.find("stroke-dasharray").unwrap_or(usize::MAX);
        let solid = svg.find("<polyline").unwrap();
        assert!(
            dashed < solid || !svg.contains("stroke-dasharray"),
            "reference drawn last"
        );
    }

    #[test]
    fn large_numbers_have_separators_in_the_html_and_tables_scroll_sideways() {
        assert_eq!(
            prose("2500853760 bytes; 0.123456; v12345; #12345; arXiv 2503.11665; 12345.6 s; `--ops 100000`"),
            "2,500,853,760 bytes; 0.123456; v12345; #12345; arXiv 2503.11665; 12,345.6 s; <code>--ops 100000</code>"
        );
        // At the end of a clause or a sentence too.
        assert_eq!(
            prose("ext4 219718235477, simfs 12345. Then 1,024 files"),
            "ext4 219,718,235,477, simfs 12,345. Then 1,024 files"
        );
        assert_eq!(digits_grouped("2536198144"), "2,536,198,144");
        assert_eq!(digits_grouped("-12345.50"), "-12,345.50");
        assert_eq!(digits_grouped("9999"), "9999");
        assert_eq!(digits_grouped("1.5e10"), "1.5e10");
        assert_eq!(digits_grouped("12345 MB"), "12345 MB");
        let mut s = Section::without_numbers("x", "X", "q".into(), 1, serde_json::json!({}));
        s.tables = vec![Table {
            file_stem: "t".into(),
            caption: "c".into(),
            headers: vec!["bytes".into(), "ratio".into()],
            rows: vec![
                vec!["2536198144".into(), "12345.678".into()],
                vec!["31301 inserts".into(), "11600 (10967–12302)".into()],
            ],
        }];
        let dir = tempfile::tempdir().unwrap();
        let index = write_report(dir.path(), &RunInfo::default(), &[s], &[], &[]).unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        // In table cells, no run of five digits without a separator.
        for cell in html.split("<td>").skip(1) {
            let text = cell.split("</td>").next().unwrap();
            let mut run = 0;
            for ch in text.chars() {
                run = if ch.is_ascii_digit() { run + 1 } else { 0 };
                assert!(run < 5, "{text}");
            }
        }
        assert!(html.contains("<td>2,536,198,144</td><td>12,345.678</td>"));
        assert!(html.contains("<td>31,301 inserts</td><td>11,600 (10,967–12,302)</td>"));
        assert!(html.contains("<div class=\"scroll\"><table>"));
        // The CSV keeps the plain number for scripts.
        let csv = std::fs::read_to_string(dir.path().join("x/t.csv")).unwrap();
        assert!(csv.contains("2536198144"));
    }

    #[test]
    fn a_score_holds_within_its_tolerance_of_the_paper_and_serialises_flat() {
        let score = |ours: Option<f64>| Score {
            id: "x.y".into(),
            role: Role::Predicted,
            ours,
            paper: Some(2.7),
            tolerance: Some(0.3),
        };
        assert!(score(Some(2.7)).within());
        assert!(score(Some(3.5)).within()); // 3.51 is the edge
        assert!(!score(Some(3.6)).within());
        assert!(!score(Some(1.8)).within());
        assert!(!score(Some(f64::NAN)).within());
        assert!(
            !score(None).within(),
            "an ordering has no number to be near"
        );
        let v = Verdict {
            score: Some(score(Some(1.37))),
            claim: "c".into(),
            reference: "r".into(),
            measured: "m".into(),
            holds: false,
            preview: None,
            if_missed: None,
        };
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["id"], "x.y");
        assert_eq!(j["role"], "predicted");
        assert_eq!(j["paper"], 2.7);
        assert_eq!(j["holds"], false);
        // A failing prediction says what is believed missing, or is marked as saying nothing.
        assert!(v.unexplained_miss());
        assert!(j["believed_missing"].is_null() && j.get("believed_missing").is_some());
        let v = v.if_missed("the drive's read retries");
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["believed_missing"], "the drive's read retries");
        let held = Verdict { holds: true, ..v };
        let j = serde_json::to_value(&held).unwrap();
        assert!(j.get("believed_missing").is_none(), "only a miss says it");
    }

    #[test]
    fn prose_sets_backticks_as_code_and_long_cells_fold_under_their_number() {
        assert_eq!(
            prose("table `batch_files` <b>"),
            "table <code>batch_files</code> &lt;b&gt;"
        );
        assert_eq!(prose("a lone ` stays"), "a lone ` stays");
        assert_eq!(ours_cell(Some(1.5), None, "1.5x"), "1.5x");
        let long = "x".repeat(200);
        let cell = ours_cell(Some(2.0), None, &long);
        assert!(cell.starts_with("<details><summary>2</summary>"), "{cell}");
        // Beside the paper's number in the same unit.
        let cell = ours_cell(Some(0.153), Some(0.218), &long);
        assert!(
            cell.starts_with("<details><summary>0.153 (paper 0.218)</summary>"),
            "{cell}"
        );
        assert_eq!(
            (axis_label(2.0), axis_label(2.5)),
            ("2".into(), "2.5".into())
        );
        assert_eq!(
            (axis_label(-0.0), axis_label(-1e-17)),
            ("0".into(), "0".into())
        );
    }

    #[test]
    fn legends_sit_beside_the_data_and_powers_of_two_go_on_a_log_axis() {
        let plot = |xs: &[f64]| LinePlot {
            file_stem: "t".into(),
            title: "t".into(),
            x_label: "batch".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "ours".into(),
                points: xs.iter().map(|&x| (x, x)).collect(),
                reference: false,
            }],
        };
        assert!(powers_of_two_axis(&plot(&[1.0, 4.0, 16.0, 64.0, 256.0])));
        assert!(!powers_of_two_axis(&plot(&[1.0, 2.0, 3.0, 4.0])));
        let svg = line_plot_svg(&plot(&[1.0, 4.0, 16.0, 64.0, 256.0])).unwrap();
        // The legend's text lies right of the plot area.
        let text = svg
            .split("<text ")
            .find(|t| {
                t.split("</text>")
                    .next()
                    .is_some_and(|t| t.contains("ours"))
            })
            .expect("legend text");
        let x: f64 = text
            .strip_prefix("x=\"")
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .expect("the legend text's x");
        assert!(x >= PLOT_PX.0 as f64, "legend at x {x}");
    }

    #[test]
    fn plot_renders_svg_with_labels() {
        let p = LinePlot {
            file_stem: "x".into(),
            title: "WAF vs OP".into(),
            x_label: "op".into(),
            y_label: "waf".into(),
            series: vec![
                Series {
                    name: "greedy".into(),
                    points: vec![(0.1, 4.0), (0.2, 2.5)],
                    reference: false,
                },
                Series {
                    name: "model".into(),
                    points: vec![(0.1, 5.6), (0.2, 3.0)],
                    reference: true,
                },
            ],
        };
        let svg = line_plot_svg(&p).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("greedy") && svg.contains("WAF vs OP"));
    }
}
