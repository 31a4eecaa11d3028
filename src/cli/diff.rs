//! `oversell diff`: two reports compared run by run.

use super::{values, JsonArgs};
use crate::diff::DiffPlan;
use crate::exit::Exit;
use clap::Args;
use std::path::PathBuf;

/// `oversell diff`.
#[derive(Debug, Args, Clone)]
pub struct DiffArgs {
    /// The baseline: a report.json or a report folder.
    pub baseline: PathBuf,
    /// The candidate: a report.json or a report folder.
    pub candidate: PathBuf,
    /// Noise band in percent of the baseline: smaller changes are "same" (oracle counts such
    /// as oversell compare exactly).
    #[arg(long, default_value_t = 5.0)]
    pub band: f64,
    /// Exit 1 when the candidate is worse on any of these metrics (comma-separated), e.g.
    /// oversell,lost_acks,p99 (the names `gate --threshold` takes). A run only the candidate
    /// has is held to each metric's default limit; a run only the baseline has fails.
    #[arg(long, value_delimiter = ',')]
    pub fail_on: Vec<String>,
    /// Also write the Markdown to this file.
    #[arg(long, value_name = "FILE", alias = "out", value_parser = values::file)]
    pub markdown: Option<PathBuf>,
    /// On a terminal, print the Markdown (every metric's long label, min–max of repeats) as a
    /// pipe gets it, instead of the 100-column tables.
    #[arg(long)]
    pub wide: bool,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `oversell diff`: prints the comparison; exit 1 when a `--fail-on` metric got worse.
pub(super) fn diff(args: DiffArgs) -> anyhow::Result<Exit> {
    let plan = DiffPlan::new(
        args.baseline,
        args.candidate,
        args.band,
        &args.fail_on,
        args.markdown,
    )?;
    let (code, doc) = crate::diff::run(&plan, args.wide)?;
    if args.json.wanted() {
        super::output::json_line(&doc);
    }
    Ok(code)
}
