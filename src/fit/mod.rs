//! `oversell fit ACCESS_LOG --out fitted.toml`: a scenario fitted from a real sale's access log,
//! each number commented with where it came from, plus `fit.md` and a chart of the log's
//! arrivals per second against the model's, beside the scenario.
//!
//! # Layout
//!
//! - `lines`: the log read one line at a time into one buffer (bounded memory);
//! - `time`: the time formats a log holds (`$time_local`, RFC 3339, `$msec`);
//! - `route`: `--route ACTION='METHOD /path/{id}'`, the reference shop's routes by default;
//! - `parse`: one line (combined or JSON) into a request: its action, time, status, buyer;
//! - `scan`: one pass over the log, bad lines counted up to `--max-bad-lines`, and the
//!   errors a log can end a fit with ([`FitError`]);
//! - `tally`: per-buyer state and the histograms of the gaps measured;
//! - `model`: the fitted numbers (trace, closest burst/uniform, shares, quantile ranges);
//! - `emit`: the commented scenario TOML; `report`: `fit.md`; `chart`: the arrivals chart.
//!
//! The default sale start (the first order) takes a pass of its own, so the log is read twice;
//! `--sale-start` saves it.

mod chart;
mod emit;
pub mod lines;
pub mod model;
pub mod parse;
mod report;
pub mod route;
pub mod scan;
pub mod tally;
#[cfg(test)]
mod tests;
pub mod time;

use crate::traffic::scenario::MAX_BUYERS;
use crate::traffic::{schedule, Scenario};
use anyhow::Context;
pub use model::{Model, Shaping};
pub use parse::{BuyerSource, Fields, Format, Reader};
use route::Action;
pub use scan::{Counted, FitError};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tally::Tally;

/// What `oversell fit` was asked for, checked.
#[derive(Debug, Clone)]
pub struct FitPlan {
    pub log: PathBuf,
    /// The scenario file to write; `fit.md` and the chart go beside it.
    pub out: PathBuf,
    pub reader: Reader,
    /// µs since the epoch; `None`: the first order.
    pub sale_start: Option<i64>,
    pub sale_end: Option<i64>,
    pub max_bad_lines: u64,
    /// Two order attempts of one buyer this close make it a bot.
    pub bot_window: Duration,
    pub shaping: Shaping,
}

/// Where the numbers came from, for the comments and `fit.md`.
pub struct Source<'a> {
    pub plan: &'a FitPlan,
    /// The sale start (µs since the epoch), and whether it was given.
    pub start: i64,
    pub start_given: bool,
    pub counted: Counted,
    pub tally: &'a Tally,
}

/// A finished fit.
pub struct Fitted {
    pub scenario: Scenario,
    pub model: Model,
    /// The files written: the scenario, `fit.md`, the chart's SVG and PNG.
    pub files: Vec<PathBuf>,
    /// One paragraph for the terminal.
    pub summary: String,
}

/// The file name of the fit report, beside the scenario.
pub const REPORT_FILE: &str = "fit.md";
/// The chart's file stem, beside the scenario.
pub const CHART: &str = "fit-arrivals";

/// Fits the scenario and writes it, `fit.md` and the chart.
pub fn run(plan: &FitPlan) -> anyhow::Result<Fitted> {
    let (start, start_given) = match plan.sale_start {
        Some(s) => (s, true),
        None => (first_order(plan)?, false),
    };
    let bot_window = i64::try_from(plan.bot_window.as_micros()).unwrap_or(i64::MAX);
    let mut tally = Tally::new(start, plan.sale_end, bot_window);
    let mut orders_seen = 0u64;
    let counted = scan::pass(&plan.log, &plan.reader, plan.max_bad_lines, |r| {
        orders_seen += u64::from(r.action == Action::Order);
        tally.add(r);
    })?;
    if orders_seen == 0 {
        return Err(no_orders(plan, &counted).into());
    }
    if tally.ordering().next().is_none() {
        return Err(FitError::NoBuyers {
            file: plan.log.clone(),
            start: time::show(start),
            end: plan.sale_end.map_or("the log's end".into(), time::show),
        }
        .into());
    }
    // Judged before the model allocates a slot per second of the span: a log of three lines
    // eight years apart is refused here, not after gigabytes.
    let last = tally
        .ordering()
        .map(|b| b.first - tally.start)
        .max()
        .unwrap_or(0);
    let seconds = |compress: f64| (last.max(0) as f64 / 1e6 / compress).floor() + 1.0;
    if seconds(plan.shaping.compress) > 3600.0 {
        return Err(FitError::TooLong {
            seconds: seconds(1.0) as u64,
            compress: plan.shaping.compress,
        }
        .into());
    }
    let model = Model::fit(&tally, plan.shaping);
    let count = model.count();
    anyhow::ensure!(
        (1..=u64::from(MAX_BUYERS)).contains(&count),
        "--scale {} gives {count} buyers from the log's {}: a scenario has 1 to {MAX_BUYERS}",
        plan.shaping.scale,
        model.log_buyers
    );
    if model.trace.len() > 3600 {
        return Err(FitError::TooLong {
            seconds: model.log_trace.len() as u64,
            compress: plan.shaping.compress,
        }
        .into());
    }
    let source = Source {
        plan,
        start,
        start_given,
        counted,
        tally: &tally,
    };
    let text = emit::scenario(&model, &source);
    let scenario = Scenario::parse(&text)
        .context("the fitted scenario does not load (a defect of `oversell fit`)")?;
    let mut replayed = schedule::build(&scenario).per_second();
    let fits = replayed.len() <= model.trace.len();
    replayed.resize(model.trace.len(), 0);
    anyhow::ensure!(
        fits && replayed == model.trace,
        "the fitted scenario's schedule does not replay its trace (a defect of `oversell fit`)"
    );
    let files = write(plan, &model, &source, &text, &replayed)?;
    Ok(Fitted {
        summary: report::summary(&model, &source, &files),
        scenario,
        model,
        files,
    })
}

/// Pass 1: the time of the first order attempt (the default sale start).
fn first_order(plan: &FitPlan) -> anyhow::Result<i64> {
    let is_file = std::fs::metadata(&plan.log)
        .map(|m| m.is_file())
        .map_err(|source| FitError::Read {
            file: plan.log.clone(),
            source,
        })?;
    if !is_file {
        return Err(FitError::NotAFile {
            file: plan.log.clone(),
        }
        .into());
    }
    let mut first: Option<i64> = None;
    let counted = scan::pass(&plan.log, &plan.reader, plan.max_bad_lines, |r| {
        if r.action == Action::Order && plan.sale_end.is_none_or(|e| r.at.micros <= e) {
            first = Some(first.map_or(r.at.micros, |f| f.min(r.at.micros)));
        }
    })?;
    first.ok_or_else(|| no_orders(plan, &counted).into())
}

/// Why a pass found no order: the log was empty, no line of it could be read, or the lines
/// read are requests none of which took the order route.
fn no_orders(plan: &FitPlan, counted: &Counted) -> FitError {
    if counted.lines == counted.blank {
        return FitError::Empty {
            file: plan.log.clone(),
            lines: counted.lines,
        };
    }
    if counted.matched == 0 && counted.other_total == 0 {
        if let Some(first) = counted.first_bad.first() {
            return FitError::NothingParsed {
                file: plan.log.clone(),
                format: plan.reader.format.as_str().to_string(),
                lines: counted.lines,
                bad: counted.bad,
                first: Box::new(first.clone()),
            };
        }
    }
    FitError::NoOrders {
        file: plan.log.clone(),
        route: plan.reader.routes.of(Action::Order).to_string(),
        lines: counted.lines,
        seen: counted.top_others(),
    }
}

/// Writes the scenario, `fit.md` and the chart; returns their paths.
fn write(
    plan: &FitPlan,
    model: &Model,
    source: &Source<'_>,
    text: &str,
    replayed: &[u32],
) -> anyhow::Result<Vec<PathBuf>> {
    let dir = plan
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(&plan.out, text).with_context(|| format!("writing {}", plan.out.display()))?;
    chart::draw(dir, model, replayed)?;
    let md = dir.join(REPORT_FILE);
    std::fs::write(&md, report::markdown(model, source))
        .with_context(|| format!("writing {}", md.display()))?;
    Ok(vec![
        plan.out.clone(),
        md,
        dir.join(format!("{CHART}.svg")),
        dir.join(format!("{CHART}.png")),
    ])
}
