//! The fitted scenario as TOML, each number under a comment saying what it was measured from
//! (which route, how many buyers or gaps, which quantiles), so a reader can check it against
//! the log and change it knowingly.

use super::model::{ratio, Model, Range, Stock};
use super::route::Action;
use super::{time, Source, CHART, REPORT_FILE};
use std::fmt::Write;

/// Comment lines are folded at this width.
const WIDTH: usize = 96;

/// Appends `text` as `# ` comment lines folded at [`WIDTH`].
pub fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > WIDTH && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A share as the scenario writes it.
fn share(v: f64) -> String {
    format!("{v:.4}")
}

fn pct(part: u64, whole: u64) -> String {
    format!("{:.1} %", ratio(part, whole) * 100.0)
}

/// `` `METHOD /path` `` of an action's route.
fn route(s: &Source<'_>, a: Action) -> String {
    format!("`{}`", s.plan.reader.routes.of(a))
}

/// How a range was measured, for its comment.
pub fn range_text(r: &Range, what: &str) -> String {
    format!(
        "{what}: p10 {} ms, median {} ms, p90 {} ms of {} gaps; the range is the uniform draw \
         with the same p10 and p90{}.",
        r.p10,
        r.p50,
        r.p90,
        r.n,
        if r.clamped {
            ", its top cut to the scenario's limit"
        } else {
            ""
        }
    )
}

/// The scenario's name: `fitted-` and the log's file stem, in the characters a name allows.
pub fn name(s: &Source<'_>) -> String {
    let stem = s
        .plan
        .log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let clean: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("fitted-{}", clean.trim_matches('-'))
        .trim_end_matches('-')
        .to_string()
}

/// The whole scenario file.
pub fn scenario(m: &Model, s: &Source<'_>) -> String {
    let mut out = String::new();
    let c = &s.counted;
    comment(
        &mut out,
        &format!(
            "Fitted by `oversell fit` from {} ({} format, {} lines: {} matched a route, {} did \
             not, {} could not be read). Every number below says where it came from; {} beside \
             this file has the details and {}.png the arrival curve.",
            s.plan.log.display(),
            s.plan.reader.format.as_str(),
            c.lines,
            c.matched,
            c.other_total,
            c.bad,
            REPORT_FILE,
            CHART
        ),
    );
    let _ = writeln!(out, "name = {:?}", name(s));
    let _ = writeln!(
        out,
        "description = {:?}\n",
        format!(
            "Fitted from {}: {} buyers from {}",
            s.plan
                .log
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            m.count(),
            time::show(s.start)
        )
    );
    item(&mut out, m, s);
    buyers(&mut out, m, s);
    browse(&mut out, m, s);
    bots(&mut out, m, s);
    after_order(&mut out, m, s);
    out
}

fn item(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("[item]\n");
    match &m.stock {
        Stock::Given(n) => comment(out, &format!("Given with --stock ({n}).")),
        Stock::Inferred { units, refused } => {
            let refused_n: u64 = refused.iter().map(|(_, n)| n).sum();
            let statuses: Vec<String> =
                refused.iter().map(|(st, n)| format!("{st} ×{n}")).collect();
            let sold_out = if refused_n > 0 {
                format!(
                    "{refused_n} order attempts were answered otherwise ({}), so it sold out",
                    statuses.join(", ")
                )
            } else {
                "no order attempt was refused, so it may not have sold out and the stock may be \
                 larger: give --stock if you know it"
                    .into()
            };
            comment(
                out,
                &format!(
                    "Inferred: the most units held at once, counting order attempts answered 2xx \
                     ({} in all) less cancels answered 2xx, in log order: {units}. {sold_out}.{}",
                    s.tally.orders_ok,
                    if m.shaping.scale != 1.0 {
                        " Not scaled by --scale: the same sale, more buyers (give --stock to \
                         change it)."
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    let _ = writeln!(out, "stock = {}\n", m.stock.units());
}

fn buyers(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("[buyers]\n");
    let ip = if m.by_ip > 0 {
        format!(
            " {} of them known only by their client IP (see {REPORT_FILE} for what that costs).",
            m.by_ip
        )
    } else {
        String::new()
    };
    let scaled = if m.shaping.scale != 1.0 {
        format!(
            " Scaled ×{} (--scale): {} buyers, each second's count scaled alike.",
            m.shaping.scale,
            m.count()
        )
    } else {
        String::new()
    };
    comment(
        out,
        &format!(
            "{} buyers in the log: visitors (by {}) with at least one order attempt ({}) in the \
             sale.{ip}{scaled}",
            m.log_buyers,
            s.plan.reader.buyer.describe(),
            route(s, Action::Order)
        ),
    );
    let _ = writeln!(out, "count = {}", m.count());
    out.push_str("seed = 1\n");
    let compressed = if m.shaping.compress != 1.0 {
        format!(
            " Compressed ×{} (--compress): the same buyers in 1/{} of the time.",
            m.shaping.compress, m.shaping.compress
        )
    } else {
        String::new()
    };
    comment(
        out,
        &format!(
            "Arrivals per second from the sale start ({}, {}): each buyer's first request (view \
             or order) at or after it.{compressed} `oversell fit` built this scenario's schedule \
             and checked that it replays these counts exactly, second by second.",
            time::show(s.start),
            if s.start_given {
                "--sale-start"
            } else {
                "the first order attempt"
            }
        ),
    );
    out.push_str("arrival = \"trace\"\n");
    let _ = writeln!(out, "window_s = {}", m.trace.len());
    out.push_str("trace = [\n");
    for chunk in m.trace.chunks(16) {
        let row: Vec<String> = chunk.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(out, "  {},", row.join(", "));
    }
    out.push_str("]\n");
    comment(
        out,
        "The closest other shapes, to swap in for the trace (in brackets the largest gap between \
         their cumulative share of arrivals and the trace's, 0 to 1):",
    );
    let _ = writeln!(
        out,
        "#   arrival = \"burst\", burst_s = {}, burst_share = {}   ({:.3})",
        m.burst.burst_s,
        share(m.burst.share),
        m.burst.distance
    );
    let _ = writeln!(
        out,
        "#   arrival = \"uniform\"   ({:.3})\n",
        m.uniform_distance
    );
}

fn browse(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("[browse]\n");
    comment(
        out,
        &format!(
            "{} ({}) of the {} buyers who are not bots viewed {} before their first order \
             attempt.",
            pct(m.viewers, m.people),
            m.viewers,
            m.people,
            route(s, Action::View)
        ),
    );
    let _ = writeln!(out, "view_share = {}", share(m.view_share()));
    if m.viewers == 0 {
        comment(out, "views and think_ms: not fitted (no buyer viewed).");
        out.push('\n');
        return;
    }
    let (lo, mid, hi) = (
        m.views.quantile(0.05),
        m.views.quantile(0.5),
        m.views.quantile(0.95),
    );
    comment(
        out,
        &format!(
            "Views per viewer before ordering: 5th percentile {lo}, median {mid}, 95th \
             percentile {hi} ({} viewers; at most 20).",
            m.views.n()
        ),
    );
    let _ = writeln!(out, "views = [{}, {}]", lo.max(1), hi.max(1));
    match &m.view_think {
        Some(r) => {
            comment(
                out,
                &range_text(r, "Think time after a view, to the buyer's next request"),
            );
            let _ = writeln!(out, "think_ms = [{}, {}]", r.lo, r.hi);
        }
        None => comment(
            out,
            "think_ms: not fitted (no viewer made a second request).",
        ),
    }
    out.push('\n');
}

fn bots(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("[bots]\n");
    comment(
        out,
        &format!(
            "{} of {} buyers ({}) sent an order attempt within {} (--bot-window) of their \
             previous one.",
            m.bots,
            m.log_buyers,
            pct(m.bots, m.log_buyers),
            crate::duration::shown(s.plan.bot_window)
        ),
    );
    let _ = writeln!(out, "share = {}", share(m.bot_share()));
    if m.bots > 0 {
        let r = &m.resubmits;
        comment(
            out,
            &format!(
                "Attempts within the window per bot (its resubmits): median {} (p10 {}, p90 {}; \
                 {} bots).",
                r.quantile(0.5),
                r.quantile(0.1),
                r.quantile(0.9),
                r.n()
            ),
        );
        let _ = writeln!(out, "resubmits = {}", r.quantile(0.5));
        if let Some(r) = &m.bot_interval {
            comment(out, &range_text(r, "Gap between a bot's attempts"));
            let _ = writeln!(out, "interval_ms = [{}, {}]", r.lo, r.hi);
        }
    }
    comment(out, "ip_pool: not fitted (the default).");
    out.push('\n');
}

fn after_order(out: &mut String, m: &Model, s: &Source<'_>) {
    out.push_str("[after_order]\n");
    let [pay, cancel, abandon] = m.after_bp();
    if m.ordered == 0 {
        comment(
            out,
            "No order attempt was answered 2xx: pay, cancel and abandon are not fitted (every \
             buyer who gets an order pays).",
        );
    } else {
        comment(
            out,
            &format!(
                "Of the {} buyers whose order was answered 2xx: {} paid ({}), {} cancelled ({}), \
                 {} did neither (abandoned: their orders wait for the payment timeout).",
                m.ordered,
                m.paid,
                route(s, Action::Pay),
                m.cancelled,
                route(s, Action::Cancel),
                m.ordered - m.paid - m.cancelled
            ),
        );
    }
    for (key, bp) in [("pay", pay), ("cancel", cancel), ("abandon", abandon)] {
        let _ = writeln!(out, "{key} = {}", share(bp as f64 / 10_000.0));
    }
    if let Some(r) = &m.after_think {
        let part = |r: &Option<Range>, what: &str| {
            r.map(|r| {
                format!(
                    "to its {what}: p10 {} ms, median {} ms, p90 {} ms",
                    r.p10, r.p50, r.p90
                )
            })
        };
        let parts: Vec<String> = [part(&m.pay_delay, "pay"), part(&m.cancel_delay, "cancel")]
            .into_iter()
            .flatten()
            .collect();
        comment(
            out,
            &format!(
                "From the buyer's last order attempt {}. {}",
                parts.join("; "),
                range_text(r, "The scenario has one think time for both")
            ),
        );
        let _ = writeln!(out, "think_ms = [{}, {}]", r.lo, r.hi);
    }
}
