//! `oversell diff BASELINE CANDIDATE`: compares two reports run by run (matched on strategy and
//! backend), metric by metric, and says for each whether the candidate is better, worse or the
//! same within a noise band.
//!
//! Counts the oracle produces (oversold units, lost acknowledged orders, phantom orders,
//! duplicate buyers, drifts, undersold units, ...) are compared exactly: any increase is worse. Every other metric is the same
//! when the change is within the band, relative to the baseline (`--band`, 5 % by default).
//! A metric the baseline measured and the candidate did not (e.g. oversell could not be
//! verified) counts as worse. The metrics, their names, directions and rules are the catalog's
//! ([`crate::metric`]), read from each run through `report::catalog`.
//!
//! Reports made with `--repeat N` are compared by their spread ([`spread`]): a band metric
//! changed only when the candidate's median leaves the baseline's min–max and the baseline's
//! median leaves the candidate's; the oracle's counts compare their worst repeat exactly.
//!
//! Runs on one side only ([`lone`]): a run only the candidate has is judged on its own figures
//! against each `--fail-on` metric's default limit, and a run only the baseline has fails
//! `--fail-on` ([`verdict`] gathers both with the regressions into one PASS or FAIL).

mod json;
mod lone;
mod spread;
mod text;
mod verdict;

pub use lone::{LoneCheck, LoneRun};

use crate::exit::Exit;
use crate::metric::{Better, Metric, Rule};
use crate::report::repeats::{self, Spread};
use crate::report::{self, Report, RunReport};
use anyhow::Context;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Every metric `diff` compares, in report order: the whole catalog.
pub static METRICS: &[Metric] = Metric::RUN;

/// The names `--fail-on` takes.
pub fn metric_names() -> Vec<&'static str> {
    METRICS.iter().map(|m| m.name()).collect()
}

/// A bad `diff` command line.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error(
        "--fail-on: unknown metric {0:?}{near}; allowed: {names}",
        near = Metric::did_you_mean(.0),
        names = metric_names().join(", ")
    )]
    UnknownMetric(String),
    #[error("--band must be a percentage from 0 to 1000, got {0}")]
    BadBand(f64),
}

/// A `--fail-on` metric, and the name it was given by (echoed in the verdict line).
#[derive(Debug, Clone)]
pub struct FailOn {
    pub metric: Metric,
    pub given: String,
}

/// A `diff` decided before any file is read.
#[derive(Debug)]
pub struct DiffPlan {
    pub baseline: PathBuf,
    pub candidate: PathBuf,
    /// The noise band as a fraction (0.05 = 5 %).
    pub band: f64,
    pub fail_on: Vec<FailOn>,
    pub out: Option<PathBuf>,
}

impl DiffPlan {
    /// Checks the band and the `--fail-on` names.
    pub fn new(
        baseline: PathBuf,
        candidate: PathBuf,
        band_percent: f64,
        fail_on: &[String],
        out: Option<PathBuf>,
    ) -> Result<Self, DiffError> {
        if !band_percent.is_finite() || !(0.0..=1000.0).contains(&band_percent) {
            return Err(DiffError::BadBand(band_percent));
        }
        let fail_on = fail_on
            .iter()
            .filter(|n| !n.trim().is_empty())
            .map(|n| match Metric::named(n) {
                Some(metric) => Ok(FailOn {
                    metric,
                    given: n.trim().to_string(),
                }),
                None => Err(DiffError::UnknownMetric(n.clone())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DiffPlan {
            baseline,
            candidate,
            band: band_percent / 100.0,
            fail_on,
            out,
        })
    }
}

/// The judgement on one metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    Same,
    /// Neither report measured it.
    NotComparable,
    /// Only the candidate measured it.
    New,
}

impl Verdict {
    /// Markdown spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "**worse**",
            Verdict::Same => "same",
            Verdict::NotComparable => "n/a",
            Verdict::New => "new",
        }
    }
}

/// Judges one metric by its catalog rule: oracle counts exactly, the rest within `band` (a
/// fraction of the baseline).
pub fn judge(metric: Metric, baseline: Option<f64>, candidate: Option<f64>, band: f64) -> Verdict {
    let (b, c) = match (baseline, candidate) {
        (Some(b), Some(c)) => (b, c),
        (Some(_), None) => return Verdict::Worse,
        (None, Some(_)) => return Verdict::New,
        (None, None) => return Verdict::NotComparable,
    };
    let delta = c - b;
    let within = match metric.spec().rule {
        Rule::Exact => delta == 0.0,
        Rule::Band => delta.abs() <= band * b.abs(),
    };
    if within {
        return Verdict::Same;
    }
    let up = delta > 0.0;
    match (metric.spec().better, up) {
        (Better::Lower, true) | (Better::Higher, false) => Verdict::Worse,
        _ => Verdict::Better,
    }
}

/// One metric of one matched run.
#[derive(Debug, Clone)]
pub struct Row {
    pub metric: Metric,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// The unit of a database rate (the counter the baseline's probe read).
    pub unit: Option<String>,
    pub verdict: Verdict,
    /// `--repeat`: each side's spread over its repeats (`baseline`/`candidate` then hold the
    /// figure judged: the median, or the worst repeat for an exact metric).
    pub spreads: Option<(Option<Spread>, Option<Spread>)>,
}

impl Row {
    /// A value of this row for people.
    fn show(&self, v: f64) -> String {
        match &self.unit {
            Some(u) => format!("{} {u}", self.metric.number(v)),
            None => self.metric.format(v),
        }
    }

    /// One side's figure for people: its spread when it has one, else its value.
    fn side(&self, v: Option<f64>, spread: Option<&Spread>) -> String {
        match (spread, v) {
            (Some(s), _) if s.samples.len() > 1 => match &self.unit {
                Some(u) => format!("{} {u}", s.show(self.metric)),
                None => s.show(self.metric),
            },
            (_, Some(v)) => self.show(v),
            _ => "n/a".into(),
        }
    }
}

/// One run present in both reports.
#[derive(Debug, Clone)]
pub struct RunDiff {
    /// `strategy/backend`.
    pub label: String,
    pub rows: Vec<Row>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Diff {
    pub band: f64,
    pub runs: Vec<RunDiff>,
    pub only_in_baseline: Vec<String>,
    /// Runs only the candidate has, with their own figures.
    pub only_in_candidate: Vec<LoneRun>,
}

fn key(r: &RunReport) -> String {
    r.label(true)
}

/// One metric of two matched runs. Rates of different database counters (say transactions/s
/// against statements/s) are not compared.
fn row(m: Metric, b: &RunReport, c: &RunReport, band: f64) -> Row {
    let (bv, cv) = (m.read(b).ok(), m.read(c).ok());
    let (bu, cu) = (m.unit_in(b), m.unit_in(c));
    let verdict = if bv.is_some() && cv.is_some() && bu != cu {
        Verdict::NotComparable
    } else {
        judge(m, bv, cv, band)
    };
    Row {
        metric: m,
        baseline: bv,
        candidate: cv,
        unit: bu.or(cu).map(|u| u.counter),
        verdict,
        spreads: None,
    }
}

/// Compares two reports run by run.
pub fn compare(baseline: &Report, candidate: &Report, band: f64) -> Diff {
    let mut runs = Vec::new();
    let mut only_in_baseline = Vec::new();
    let cand = repeats::groups(candidate);
    for (label, b) in repeats::groups(baseline) {
        let Some((_, c)) = cand.iter().find(|(k, _)| *k == label) else {
            only_in_baseline.push(label);
            continue;
        };
        let rows = METRICS
            .iter()
            .map(|m| match (b.as_slice(), c.as_slice()) {
                ([b], [c]) => row(*m, b, c, band),
                _ => spread::row(*m, &b, c),
            })
            .collect();
        runs.push(RunDiff { label, rows });
    }
    let base = repeats::groups(baseline);
    let only_in_candidate = cand
        .into_iter()
        .filter(|(k, _)| !base.iter().any(|(b, _)| b == k))
        .map(|(k, runs)| LoneRun::of(k, &runs))
        .collect();
    Diff {
        band,
        runs,
        only_in_baseline,
        only_in_candidate,
    }
}

impl Diff {
    /// Each metric worse beyond the band, as "run metric (change)", the metric's name written
    /// by `name` (quoted for Markdown, bare on a terminal).
    fn worse(&self, name: impl Fn(&str) -> String) -> Vec<String> {
        self.runs
            .iter()
            .flat_map(|r| {
                r.rows
                    .iter()
                    .filter(|x| x.verdict == Verdict::Worse)
                    .map(|x| format!("{} {} ({})", r.label, name(x.metric.name()), change(x).0))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

fn change(row: &Row) -> (String, String) {
    match (row.baseline, row.candidate) {
        (Some(b), Some(c)) => {
            let d = c - b;
            let abs = if d == 0.0 {
                "0".to_string()
            } else {
                let s = row.show(d.abs());
                format!("{}{s}", if d > 0.0 { "+" } else { "−" })
            };
            let rel = if d == 0.0 {
                "0.0 %".to_string()
            } else if b != 0.0 {
                format!("{:+.1} %", d / b.abs() * 100.0)
            } else {
                "—".to_string()
            };
            (abs, rel)
        }
        _ => ("—".into(), "—".into()),
    }
}

fn describe(r: &Report, path: &std::path::Path) -> String {
    format!(
        "`{}` (scenario `{}`, {} run(s), generated {})",
        path.display(),
        r.scenario.name,
        r.runs.len(),
        r.generated_at
    )
}

/// The Markdown of a comparison.
pub fn render(plan: &DiffPlan, baseline: &Report, candidate: &Report, d: &Diff) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# oversell diff\n");
    let _ = writeln!(s, "- baseline: {}", describe(baseline, &plan.baseline));
    let _ = writeln!(s, "- candidate: {}", describe(candidate, &plan.candidate));
    let _ = writeln!(
        s,
        "- noise band: ±{:.1} % of the baseline; the oracle's counts (oversell, lost acks, phantom orders, drifts, undersell, ...) compare exactly: any increase is worse",
        d.band * 100.0
    );
    if baseline.scenario.name != candidate.scenario.name {
        let _ = writeln!(
            s,
            "- **warning**: the scenarios differ (`{}` vs `{}`): the figures may not be comparable",
            baseline.scenario.name, candidate.scenario.name
        );
    }
    for r in &d.runs {
        let _ = writeln!(s, "\n## {}\n", r.label);
        if r.rows.iter().any(|x| x.spreads.is_some()) {
            let _ = writeln!(s, "{}\n", spread::NOTE);
        }
        let _ = writeln!(
            s,
            "| metric | baseline | candidate | change | relative | verdict |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---|");
        for row in &r.rows {
            let (bs, cs) = match &row.spreads {
                Some((b, c)) => (b.as_ref(), c.as_ref()),
                None => (None, None),
            };
            let (abs, rel) = change(row);
            let cells = [
                format!("{} (`{}`)", row.metric.spec().label, row.metric.name()),
                row.side(row.baseline, bs),
                row.side(row.candidate, cs),
                abs,
                rel,
                row.verdict.as_str().to_string(),
            ]
            .map(|c| crate::report::markup::md_cell(&c));
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        }
    }
    for line in verdict::one_sided(plan, d, true) {
        // A list's items stay together; a paragraph gets its blank line.
        let gap = if line.starts_with("- ") { "" } else { "\n" };
        let _ = writeln!(s, "{gap}{line}");
    }
    let worse = d.worse(|m| format!("`{m}`"));
    let _ = writeln!(s, "\n## Summary\n");
    if worse.is_empty() {
        let _ = writeln!(s, "No metric is worse beyond the band.");
    } else {
        let _ = writeln!(s, "Worse: {}.", worse.join("; "));
    }
    if let Some(line) = verdict::fail_on_line(plan, d, true) {
        let _ = writeln!(s, "\n{line}");
    }
    s
}

/// Runs a `diff`: prints the Markdown, or on a terminal without `wide` the 100-column tables
/// (and writes the Markdown to `--markdown`); [`Exit::Failed`] when the candidate breaks
/// `--fail-on`, [`Exit::Success`] otherwise; with the comparison as `--json`'s document.
pub fn run(plan: &DiffPlan, wide: bool) -> anyhow::Result<(Exit, serde_json::Value)> {
    let baseline = report::read(&plan.baseline).context("reading the baseline")?;
    let candidate = report::read(&plan.candidate).context("reading the candidate")?;
    let d = compare(&baseline, &candidate, plan.band);
    if d.runs.is_empty() {
        anyhow::bail!(
            "no run is in both reports (baseline: {}; candidate: {}): runs are matched on strategy/backend",
            baseline.runs.iter().map(key).collect::<Vec<_>>().join(", "),
            candidate.runs.iter().map(key).collect::<Vec<_>>().join(", ")
        );
    }
    let md = render(plan, &baseline, &candidate, &d);
    if wide || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        crate::console::out!("{md}");
    } else {
        crate::console::out!("{}", text::render(plan, &baseline, &candidate, &d));
    }
    if let Some(out) = &plan.out {
        std::fs::write(out, &md).with_context(|| format!("writing {}", out.display()))?;
    }
    let code = Exit::judged(d.breaches(&plan.fail_on).is_empty());
    Ok((code, json::document(plan, &d, code)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> Metric {
        Metric::named(name).unwrap()
    }

    #[test]
    fn any_increase_of_a_count_is_worse() {
        assert_eq!(
            judge(m("oversell"), Some(0.0), Some(1.0), 0.5),
            Verdict::Worse
        );
        assert_eq!(
            judge(m("oversell"), Some(100.0), Some(101.0), 0.5),
            Verdict::Worse
        );
        assert_eq!(
            judge(m("oversell"), Some(7.0), Some(0.0), 0.05),
            Verdict::Better
        );
        assert_eq!(
            judge(m("lost_acks"), Some(0.0), Some(0.0), 0.05),
            Verdict::Same
        );
    }

    #[test]
    fn other_metrics_are_the_same_within_the_band() {
        let p99 = m("latency_p99");
        assert_eq!(judge(p99, Some(100.0), Some(104.9), 0.05), Verdict::Same);
        assert_eq!(judge(p99, Some(100.0), Some(95.1), 0.05), Verdict::Same);
        assert_eq!(judge(p99, Some(100.0), Some(106.0), 0.05), Verdict::Worse);
        assert_eq!(judge(p99, Some(100.0), Some(90.0), 0.05), Verdict::Better);
        assert_eq!(judge(p99, Some(100.0), Some(130.0), 0.5), Verdict::Same);
    }

    #[test]
    fn lower_throughput_is_worse() {
        let t = m("throughput");
        assert_eq!(judge(t, Some(100.0), Some(80.0), 0.05), Verdict::Worse);
        assert_eq!(judge(t, Some(100.0), Some(120.0), 0.05), Verdict::Better);
    }

    #[test]
    fn errors_appearing_from_zero_are_worse_whatever_the_band() {
        assert_eq!(
            judge(m("error_rate"), Some(0.0), Some(0.001), 10.0),
            Verdict::Worse
        );
        assert_eq!(
            judge(m("error_rate"), Some(0.0), Some(0.0), 0.0),
            Verdict::Same
        );
    }

    #[test]
    fn a_figure_the_candidate_no_longer_measures_is_worse() {
        assert_eq!(judge(m("oversell"), Some(0.0), None, 0.05), Verdict::Worse);
        assert_eq!(judge(m("oversell"), None, Some(0.0), 0.05), Verdict::New);
        assert_eq!(
            judge(m("oversell"), None, None, 0.05),
            Verdict::NotComparable
        );
    }

    #[test]
    fn unknown_fail_on_names_are_refused_with_the_allowed_list() {
        let e = DiffPlan::new("a".into(), "b".into(), 5.0, &["oversel".into()], None).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("\"oversel\""), "{msg}");
        assert!(msg.contains("(did you mean `oversell`?)"), "{msg}");
        for name in metric_names() {
            assert!(msg.contains(name), "{msg} lists {name}");
        }
        assert!(DiffPlan::new("a".into(), "b".into(), -1.0, &[], None).is_err());
        let ok = DiffPlan::new(
            "a".into(),
            "b".into(),
            5.0,
            &["oversell".into(), "latency_p99".into()],
            None,
        )
        .unwrap();
        assert_eq!(ok.fail_on.len(), 2);
        assert!((ok.band - 0.05).abs() < 1e-12);
    }

    #[test]
    fn every_diff_row_keeps_its_table_columns_even_with_a_pipe_in_the_label() {
        let r = crate::report::v1::read(serde_json::from_str(crate::report::v1::FIXTURE).unwrap());
        let d = compare(&r, &r, 0.05);
        let plan = DiffPlan::new("a".into(), "b".into(), 5.0, &[], None).unwrap();
        let md = render(&plan, &r, &r, &d);
        assert!(
            md.contains("\\|initial"),
            "the drift label is escaped: {md}"
        );
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert!(rows.len() > 3, "{md}");
        for row in rows {
            let cells = row.replace("\\|", "").matches('|').count();
            assert_eq!(cells, 7, "six cells: {row}");
        }
    }

    #[test]
    fn metric_names_are_unique() {
        let mut names = metric_names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len());
    }
}
