//! One row of the diagnosis: a class, its status, what shows it (or what was tried, or what to
//! declare), its proof and figures, its remedy.

use super::battery::Kind;
use super::class::{Class, Status};
use super::run::Done;
use crate::oracle::Proof;
use serde::Serialize;

/// A figure of a found class, with where it was read.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What it is: `units oversold at the peak`, `error rate when the pool drained`, ...
    pub name: String,
    pub value: f64,
    /// The value for people (`3 units`, `12.50 %`, `840 ms`).
    pub shown: String,
    /// Where it was read.
    pub source: String,
}

impl Figure {
    pub fn new(name: &str, value: f64, shown: String, source: impl Into<String>) -> Figure {
        Figure {
            name: name.into(),
            value,
            shown,
            source: source.into(),
        }
    }
}

/// One class's row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub class: Class,
    pub status: Status,
    /// found: what shows it; not_found: what was tried, at what intensity; not_testable: what
    /// to declare or map.
    pub detail: String,
    /// The experiment that showed it (found).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub experiment: Option<Kind>,
    /// That experiment's report (`report.md`), relative to the diagnosis's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// The minimal counterexample the run's oracle found (found, when it has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<Proof>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<Figure>,
    pub remedy: &'static str,
    pub link: String,
}

impl Row {
    fn new(class: Class, status: Status, detail: String) -> Row {
        Row {
            class,
            status,
            detail,
            experiment: None,
            report: None,
            proof: None,
            figures: Vec::new(),
            remedy: class.remedy(),
            link: class.link(),
        }
    }

    /// Found in `done`'s run.
    pub fn found(class: Class, done: &Done, dir: &std::path::Path, detail: String) -> Row {
        Row {
            experiment: Some(done.kind),
            report: Some(report_link(done, dir)),
            ..Row::new(class, Status::Found, detail)
        }
    }

    /// Driven and not seen: `tried` says what and how hard.
    pub fn not_found(class: Class, tried: String) -> Row {
        Row::new(class, Status::NotFound, tried)
    }

    /// Not driven or not measured: `what` says what to declare or map.
    pub fn not_testable(class: Class, what: String) -> Row {
        Row::new(class, Status::NotTestable, what)
    }
}

/// `done`'s `report.md`, relative to the diagnosis's folder `dir`.
pub fn report_link(done: &Done, dir: &std::path::Path) -> String {
    let md = done.dir.join("report.md");
    md.strip_prefix(dir).unwrap_or(&md).display().to_string()
}

/// What an experiment sent, in a clause: `rush: 260 buyers, 10 units, 208 arriving in the
/// first 0.25s (832/s)`.
pub fn intensity(done: &Done) -> String {
    let s = &done.scenario;
    let burst = (f64::from(s.buyers.count) * s.buyers.burst_share).round();
    let mut text = format!(
        "{}: {} buyers for {} units, {burst:.0} in the first {}s ({:.0}/s)",
        done.kind.as_str(),
        s.total_buyers(),
        s.item.stock,
        s.buyers.burst_s,
        burst / s.buyers.burst_s.max(0.001)
    );
    if let Some(r) = done.report.runs.first() {
        text.push_str(&format!(", {} order attempts", r.order_attempts));
    }
    text
}
