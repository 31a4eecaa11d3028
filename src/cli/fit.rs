//! `oversell fit ACCESS_LOG --out fitted.toml`: the flags, checked into a [`FitPlan`]; the
//! work is in [`crate::fit`].

use crate::exit::Exit;
use crate::fit::{self, BuyerSource, Fields, FitPlan, Format, Reader, Shaping};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// `--help` heading: how the log is read.
const LOG: &str = "Log";
/// `--help` heading: what the scenario makes of it.
const MODEL: &str = "Model";

/// `oversell fit`.
#[derive(Debug, Args, Clone)]
pub struct FitArgs {
    /// The sale's access log: a file, read one line at a time (any size).
    #[arg(value_name = "ACCESS_LOG", value_parser = super::values::file)]
    pub log: PathBuf,
    /// The scenario file to write; fit.md and fit-arrivals.svg/.png are written beside it.
    #[arg(short, long, value_name = "FILE", value_parser = super::values::file,
          help_heading = super::values::OUTPUT)]
    pub out: PathBuf,
    /// How each line is written: combined (nginx/Apache `$remote_addr - $remote_user
    /// [$time_local] "$request" $status …`) or json (one JSON object per line).
    #[arg(long, value_enum, default_value_t = Format::Combined, help_heading = LOG)]
    pub format: Format,
    /// JSON: the field holding the request's time ($time_iso8601, $msec or $time_local form)
    /// [default: time_iso8601].
    #[arg(long, value_name = "FIELD", help_heading = LOG)]
    pub time_field: Option<String>,
    /// JSON: the field holding the request's method [default: request_method].
    #[arg(long, value_name = "FIELD", help_heading = LOG)]
    pub method_field: Option<String>,
    /// JSON: the field holding the request's path (the query is ignored by the routes)
    /// [default: request_uri].
    #[arg(long, value_name = "FIELD", help_heading = LOG)]
    pub path_field: Option<String>,
    /// JSON: the field holding the answer's status [default: status].
    #[arg(long, value_name = "FIELD", help_heading = LOG)]
    pub status_field: Option<String>,
    /// Who the buyer is: remote_user (the default; `-` means none), a JSON field's name,
    /// query:NAME (a query parameter), cookie:NAME (from the JSON field http_cookie) or
    /// remote_addr. A line without one is its client IP's (fit.md says what that costs).
    #[arg(long, value_name = "SOURCE", help_heading = LOG)]
    pub buyer_field: Option<String>,
    /// ACTION='METHOD /path', ACTION one of view, order, pay, cancel; `{id}` matches any one
    /// segment (repeat the flag; default: the reference shop's routes, e.g.
    /// order='POST /api/orders', pay='POST /api/orders/{id}/pay').
    #[arg(long, value_name = "ACTION='METHOD /path'", help_heading = LOG)]
    pub route: Vec<String>,
    /// When the sale opened (RFC 3339, epoch seconds or $time_local form) [default: the first
    /// order attempt in the log]. Requests before it are left out.
    #[arg(long, value_name = "TIME", value_parser = fit::time::arg, help_heading = LOG)]
    pub sale_start: Option<i64>,
    /// Leave out requests after this time [default: the end of the log].
    #[arg(long, value_name = "TIME", value_parser = fit::time::arg, help_heading = LOG)]
    pub sale_end: Option<i64>,
    /// Skip up to N lines that cannot be read (counted in fit.md); one more stops the fit,
    /// naming the first lines and their field.
    #[arg(long, value_name = "N", default_value_t = 100, help_heading = LOG)]
    pub max_bad_lines: u64,
    /// A buyer whose order attempt comes within this of its previous one is a bot.
    #[arg(long, value_name = "DURATION", default_value = "2s",
          value_parser = super::values::duration, help_heading = MODEL)]
    pub bot_window: Duration,
    /// More buyers, the same shape: every second's arrivals times F (0.01 to 1000).
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = factor,
          help_heading = MODEL)]
    pub scale: f64,
    /// The same buyers, faster: the arrival curve in 1/F of the time (0.01 to 1000).
    #[arg(long, value_name = "F", default_value_t = 1.0, value_parser = factor,
          help_heading = MODEL)]
    pub compress: f64,
    /// The sale's stock [default: inferred, the most units held at once in the log].
    #[arg(long, value_name = "UNITS", value_parser = clap::value_parser!(i64).range(0..=1_000_000),
          help_heading = MODEL)]
    pub stock: Option<i64>,
    #[command(flatten)]
    pub json: super::JsonArgs,
}

/// A factor between 0.01 and 1000.
fn factor(v: &str) -> Result<f64, String> {
    let f: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{v:?} is not a number (0.01 to 1000)"))?;
    if (0.01..=1000.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{v} is outside 0.01 to 1000"))
    }
}

impl FitArgs {
    /// The plan the flags describe; a flag that does not fit the format is refused.
    pub fn plan(self) -> anyhow::Result<FitPlan> {
        let defaults = Fields::default();
        let named = [
            ("--time-field", &self.time_field),
            ("--method-field", &self.method_field),
            ("--path-field", &self.path_field),
            ("--status-field", &self.status_field),
        ];
        if self.format == Format::Combined {
            if let Some((flag, _)) = named.iter().find(|(_, v)| v.is_some()) {
                anyhow::bail!(
                    "{flag} names a JSON field: the combined format's fields are in fixed places \
                     (give --format json for JSON lines)"
                );
            }
        }
        if let Some((flag, _)) = named
            .iter()
            .find(|(_, v)| v.as_deref().is_some_and(|f| f.trim().is_empty()))
        {
            anyhow::bail!("{flag} is empty: give the field's name");
        }
        let field = |v: Option<String>, d: String| v.map(|s| s.trim().to_string()).unwrap_or(d);
        let fields = Fields {
            time: field(self.time_field, defaults.time),
            method: field(self.method_field, defaults.method),
            path: field(self.path_field, defaults.path),
            status: field(self.status_field, defaults.status),
        };
        let buyer = match &self.buyer_field {
            Some(b) => BuyerSource::parse(b, self.format).map_err(anyhow::Error::msg)?,
            None => BuyerSource::RemoteUser,
        };
        let routes = fit::route::Routes::with(&self.route).map_err(anyhow::Error::msg)?;
        if let (Some(s), Some(e)) = (self.sale_start, self.sale_end) {
            anyhow::ensure!(
                e > s,
                "--sale-end {} is not after --sale-start {}",
                fit::time::show(e),
                fit::time::show(s)
            );
        }
        anyhow::ensure!(
            self.bot_window > Duration::ZERO && self.bot_window <= Duration::from_secs(60),
            "--bot-window {} must be more than 0 and at most 60s (a bot's interval_ms is at most \
             60000)",
            crate::duration::shown(self.bot_window)
        );
        Ok(FitPlan {
            log: self.log,
            out: self.out,
            reader: Reader {
                format: self.format,
                fields,
                buyer,
                routes,
            },
            sale_start: self.sale_start,
            sale_end: self.sale_end,
            max_bad_lines: self.max_bad_lines,
            bot_window: self.bot_window,
            shaping: Shaping {
                scale: self.scale,
                compress: self.compress,
                stock: self.stock,
            },
        })
    }
}

/// `oversell fit`: writes the scenario, fit.md and the chart; prints where (and with
/// `--json`, the files and the fitted figures as one document).
pub fn fit(args: FitArgs) -> anyhow::Result<Exit> {
    let json = args.json.clone();
    let plan = args.plan()?;
    let fitted = fit::run(&plan)?;
    crate::console::outln!("{}", fitted.summary);
    if json.wanted() {
        let m = &fitted.model;
        let absolute = |p: &std::path::Path| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .display()
                .to_string()
        };
        super::output::json_line(&serde_json::json!({
            "schema": super::SUMMARY_SCHEMA,
            "scenario": absolute(&plan.out),
            "files": fitted.files.iter().map(|f| absolute(f)).collect::<Vec<_>>(),
            "buyers": fitted.scenario.total_buyers(),
            "stock": fitted.scenario.item.stock,
            "seconds": m.trace.len(),
            "log": {
                "buyers": m.log_buyers,
                "by_ip": m.by_ip,
                "only_viewed": m.only_viewed,
                "bots": m.bots,
                "ordered": m.ordered,
                "paid": m.paid,
                "cancelled": m.cancelled,
            },
            "exit_code": Exit::Success,
        }));
    }
    Ok(Exit::Success)
}
