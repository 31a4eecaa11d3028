//! `fit.md`: how the log was read (lines, routes, what was left out and why), the arrival
//! curve against the model's, every fitted number with its source, what a buyer known only
//! by its IP costs, and what was not fitted; and the paragraph the terminal gets.

use super::emit::range_text;
use super::model::{ratio, Model, Range, Stock};
use super::route::Action;
use super::{time, Source, CHART};
use crate::report::markup::md_cell;
use std::fmt::Write;
use std::path::PathBuf;

/// What identifying buyers by their client IP costs, or `None` when no buyer was.
pub fn ip_cost(m: &Model, s: &Source<'_>) -> Option<String> {
    if m.by_ip == 0 {
        return None;
    }
    let why = match s.plan.reader.buyer {
        super::BuyerSource::ClientIp => "as --buyer-field remote_addr asks".to_string(),
        ref b => format!("because {} was missing on their lines", b.describe()),
    };
    Some(format!(
        "{} of {} buyers ({:.1} %) are known only by their client IP, {why}. People behind one \
         address (an office or a carrier's NAT, a proxy) merge into one buyer: their order \
         attempts look like one buyer's resubmits (the bot share and resubmits read high), \
         their views add up (views per viewer read high) and the buyer count reads low; one \
         person whose address changed counts twice. Log a user id ($remote_user, a cookie, a \
         query parameter) and fit again to remove this.",
        m.by_ip,
        m.log_buyers,
        ratio(m.by_ip, m.log_buyers) * 100.0
    ))
}

/// What whole-second times cost, or `None` when the log had fractions.
pub fn resolution_cost(s: &Source<'_>) -> Option<String> {
    (!s.tally.fractions).then(|| {
        "The log's times are whole seconds: every gap measured (think times, a bot's interval, \
         the delays before pay and cancel) is a whole number of seconds, so gaps below a second \
         read as 0 or 1000 ms and their ranges are coarse. The arrivals per second are exact. \
         Log the time to the millisecond (nginx $msec, Apache %{msec_frac}t) for finer ranges."
            .to_string()
    })
}

/// The terminal's paragraph.
pub fn summary(m: &Model, s: &Source<'_>, files: &[PathBuf]) -> String {
    let mut out = format!(
        "fitted {} buyers over {} s (the log: {} buyers from {}) into {}",
        m.count(),
        m.trace.len(),
        m.log_buyers,
        time::show(s.start),
        files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let c = &s.counted;
    if c.bad > 0 {
        let _ = write!(
            out,
            "\nlines that could not be read, skipped: {} (the first: {})",
            c.bad,
            c.first_bad
                .first()
                .map(|e| e.to_string())
                .unwrap_or_default()
        );
    }
    for note in [ip_cost(m, s), resolution_cost(s)].into_iter().flatten() {
        let _ = write!(out, "\nnote: {note}");
    }
    out
}

fn row(out: &mut String, cells: &[String]) {
    let cells: Vec<String> = cells.iter().map(|c| md_cell(c)).collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

fn range_cell(r: &Option<Range>, what: &str) -> String {
    r.as_ref().map_or_else(
        || format!("{what}: nothing measured"),
        |r| range_text(r, what),
    )
}

/// The whole `fit.md`.
pub fn markdown(m: &Model, s: &Source<'_>) -> String {
    let mut out = format!("# Fit of {}\n\n", s.plan.log.display());
    reading(&mut out, s);
    arrivals(&mut out, m);
    parameters(&mut out, m, s);
    out.push_str("## Caveats\n\n");
    let notes: Vec<String> = [ip_cost(m, s), resolution_cost(s)]
        .into_iter()
        .flatten()
        .collect();
    if notes.is_empty() {
        out.push_str(
            "Every buyer was known by its own identity and the times had fractions of a \
             second.\n\n",
        );
    }
    for n in notes {
        let _ = writeln!(out, "- {n}\n");
    }
    out.push_str(
        "## Not fitted\n\nThe item's id and purchase limit (1), `bots.ip_pool` and `[client]` \
         keep their defaults; `[shop]`, `[thresholds]` and `[target]` are yours to add (a \
         `[target]` table to fire it at your own shop with `oversell attack`). A second wave \
         needs no section: it is in the trace.\n",
    );
    out
}

fn reading(out: &mut String, s: &Source<'_>) {
    let c = &s.counted;
    let t = s.tally;
    let p = s.plan;
    let _ = writeln!(
        out,
        "Read as the {} format, buyers by {}. The sale from {} ({}){}. Bots: a buyer's order \
         attempt within {} of its previous one.\n",
        p.reader.format.as_str(),
        p.reader.buyer.describe(),
        time::show(s.start),
        if s.start_given {
            "--sale-start"
        } else {
            "the first order attempt"
        },
        p.sale_end
            .map_or(" to the end of the log".into(), |e| format!(
                " to {} (--sale-end)",
                time::show(e)
            )),
        crate::duration::shown(p.bot_window)
    );
    out.push_str("| lines | count |\n|---|---:|\n");
    let requests = |a: Action| t.requests.get(a.as_str()).copied().unwrap_or(0);
    let mut rows = vec![("lines read".to_string(), c.lines)];
    for a in Action::ALL {
        rows.push((
            format!("{} (`{}`), in the sale", a.as_str(), p.reader.routes.of(a)),
            requests(a),
        ));
    }
    rows.extend([
        (
            "matched a route, before the sale start (left out)".into(),
            t.before_start,
        ),
        (
            "matched a route, after --sale-end (left out)".into(),
            t.after_end,
        ),
        ("matched no route".into(), c.other_total),
        ("blank".into(), c.blank),
        (
            format!(
                "could not be read (limit: --max-bad-lines {})",
                p.max_bad_lines
            ),
            c.bad,
        ),
        (
            "pay or cancel with no acknowledged order of the buyer before it".into(),
            t.stray_follow_ups,
        ),
        (
            "read over a second out of time order (one buyer's)".into(),
            t.out_of_order,
        ),
    ]);
    for (what, n) in rows {
        row(out, &[what, n.to_string()]);
    }
    out.push('\n');
    if !c.first_bad.is_empty() {
        out.push_str("The first lines that could not be read:\n\n");
        for e in &c.first_bad {
            let _ = writeln!(out, "- {}", md_cell(&e.to_string()));
        }
        out.push('\n');
    }
    let top = c.top_others();
    if !top.is_empty() {
        out.push_str("The most frequent requests no route matched (ids as `{id}`):\n\n");
        for (r, n) in top.iter().take(10) {
            let _ = writeln!(out, "- `{r}` ×{n}");
        }
        out.push('\n');
    }
}

fn arrivals(out: &mut String, m: &Model) {
    let peak = m.log_trace.iter().enumerate().max_by_key(|(_, n)| **n);
    let _ = writeln!(
        out,
        "## Arrivals\n\n![The log's arrivals per second against the scenario's]({CHART}.png)\n\n\
         {} buyers in the log over {} s (each buyer's first request at or after the sale start), \
         {} at the peak in second {}. {} visitors only viewed and are not in the model (its \
         buyers all order). The scenario: {} buyers over {} s ({}), `arrival = \"trace\"`; \
         its schedule was built and replays those counts exactly, second by second.\n",
        m.log_buyers,
        m.log_trace.len(),
        peak.map_or(0, |p| *p.1),
        peak.map_or(0, |p| p.0),
        m.only_viewed,
        m.count(),
        m.trace.len(),
        shaping(m),
    );
    let _ = writeln!(
        out,
        "| shape | parameters | largest gap to the trace's cumulative arrivals |\n|---|---|---:|\n\
         | burst (maximum likelihood, whole seconds) | burst_s = {}, burst_share = {:.4} | {:.3} |\n\
         | uniform | window_s = {} | {:.3} |\n",
        m.burst.burst_s,
        m.burst.share,
        m.burst.distance,
        m.trace.len(),
        m.uniform_distance
    );
}

fn shaping(m: &Model) -> String {
    let sh = m.shaping;
    match (sh.scale != 1.0, sh.compress != 1.0) {
        (false, false) => "as logged".into(),
        (true, false) => format!("--scale {}: more buyers, the same shape", sh.scale),
        (false, true) => format!("--compress {}: the same buyers, faster", sh.compress),
        (true, true) => format!("--scale {} and --compress {}", sh.scale, sh.compress),
    }
}

fn parameters(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("## Parameters\n\n| scenario field | value | measured from |\n|---|---|---|\n");
    let stock = [
        "item.stock".into(),
        m.stock.units().to_string(),
        stock_source(m, s),
    ];
    let rows = [vec![stock], buyer_rows(m), bot_rows(m), after_order_rows(m)];
    for r in rows.iter().flatten() {
        row(out, r);
    }
    out.push('\n');
}

/// Where the stock came from: `--stock`, or the most units held at once in the log.
fn stock_source(m: &Model, s: &Source<'_>) -> String {
    match &m.stock {
        Stock::Given(_) => "--stock".to_string(),
        Stock::Inferred { refused, .. } => format!(
            "the most units held at once: order attempts answered 2xx ({}) less cancels answered \
             2xx, in log order; {} order attempts refused",
            s.tally.orders_ok,
            refused.iter().map(|(_, n)| n).sum::<u64>()
        ),
    }
}

/// `[lo, hi]`, or `-` when nothing was measured.
fn range_value(r: &Option<Range>) -> String {
    r.map_or("-".into(), |r| format!("[{}, {}]", r.lo, r.hi))
}

/// The `[buyers]` and `[browse]` rows.
fn buyer_rows(m: &Model) -> Vec<[String; 3]> {
    vec![
        [
            "buyers.count".into(),
            m.count().to_string(),
            format!(
                "{} buyers with an order attempt, {}",
                m.log_buyers,
                shaping(m)
            ),
        ],
        [
            "buyers.window_s".into(),
            m.trace.len().to_string(),
            "the trace's seconds".into(),
        ],
        [
            "browse.view_share".into(),
            format!("{:.4}", m.view_share()),
            format!(
                "{} of {} buyers who are not bots viewed before ordering",
                m.viewers, m.people
            ),
        ],
        [
            "browse.views".into(),
            format!(
                "[{}, {}]",
                m.views.quantile(0.05).max(1),
                m.views.quantile(0.95).max(1)
            ),
            format!(
                "5th and 95th percentiles of views per viewer ({} viewers)",
                m.views.n()
            ),
        ],
        [
            "browse.think_ms".into(),
            range_value(&m.view_think),
            range_cell(&m.view_think, "gap after a view"),
        ],
    ]
}

/// The `[bots]` rows.
fn bot_rows(m: &Model) -> Vec<[String; 3]> {
    vec![
        [
            "bots.share".into(),
            format!("{:.4}", m.bot_share()),
            format!(
                "{} of {} buyers repeated an order attempt within the bot window",
                m.bots, m.log_buyers
            ),
        ],
        [
            "bots.resubmits".into(),
            m.resubmits.quantile(0.5).to_string(),
            format!(
                "median attempts within the window per bot ({} bots)",
                m.resubmits.n()
            ),
        ],
        [
            "bots.interval_ms".into(),
            range_value(&m.bot_interval),
            range_cell(&m.bot_interval, "gap between a bot's attempts"),
        ],
    ]
}

/// The `[after_order]` rows.
fn after_order_rows(m: &Model) -> Vec<[String; 3]> {
    let [pay, cancel, abandon] = m.after_bp();
    let bp = |v: u64| format!("{:.4}", v as f64 / 10_000.0);
    vec![
        [
            "after_order.pay".into(),
            bp(pay),
            format!(
                "{} of {} buyers with an order answered 2xx paid",
                m.paid, m.ordered
            ),
        ],
        [
            "after_order.cancel".into(),
            bp(cancel),
            format!("{} of {} cancelled", m.cancelled, m.ordered),
        ],
        [
            "after_order.abandon".into(),
            bp(abandon),
            format!(
                "{} of {} did neither",
                m.ordered - m.paid - m.cancelled,
                m.ordered
            ),
        ],
        [
            "after_order.think_ms".into(),
            range_value(&m.after_think),
            format!(
                "{} {}",
                range_cell(&m.pay_delay, "last order attempt to pay"),
                range_cell(&m.cancel_delay, "last order attempt to cancel")
            ),
        ],
    ]
}
