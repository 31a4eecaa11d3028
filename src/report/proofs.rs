//! Proofs in the report: each failing finding's counterexample as a table in `report.md` (and
//! the HTML page, which also draws an oversell proof as a timeline: its orders as bars against
//! the stock).

use super::markup::md_cell;
use crate::oracle::proof::{seconds, Proof, ProofOrder};
use std::fmt::Write;

/// The proof as Markdown: the claim, its source, its facts, and its orders as a table.
pub fn markdown(p: &Proof) -> String {
    let opened_ms = p.opened_at_ms;
    let mut s = format!(
        "**Proof of `{}`**: {}\n\n",
        p.findings.join("`, `"),
        p.claim
    );
    let _ = writeln!(s, "Source: {}.\n", p.source);
    for f in &p.facts {
        let _ = writeln!(s, "- {f}");
    }
    if !p.facts.is_empty() {
        s.push('\n');
    }
    if p.orders.is_empty() {
        return s;
    }
    let rows = p.orders.iter().any(|o| o.created_at_ms.is_some());
    let reads = p.orders.iter().any(|o| o.stock_read.is_some());
    let mut head = vec!["order", "buyer", "qty", "sent", "acknowledged", "then"];
    if rows {
        head.extend(["row created", "row status"]);
    }
    if reads {
        head.push("stock read");
    }
    let _ = writeln!(s, "| {} |", head.join(" | "));
    let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
    for o in &p.orders {
        let at = |t: Option<u64>| t.map_or("—".into(), |t| format!("+{}", seconds(t as i64)));
        let then = match (o.paid_ms, o.cancel_sent_ms) {
            (_, Some(c)) => format!("cancel sent +{}", seconds(c as i64)),
            (Some(p), None) => format!("paid +{}", seconds(p as i64)),
            (None, None) => "—".into(),
        };
        let mut cells = vec![
            format!(
                "`{}`",
                md_cell(o.id.as_deref().or(o.key.as_deref()).unwrap_or("—"))
            ),
            md_cell(o.user.as_deref().unwrap_or("—")),
            o.qty.to_string(),
            at(o.sent_ms),
            at(o.acked_ms),
            then,
        ];
        if rows {
            let created = o.created_at_ms.map_or("—".into(), |c| match opened_ms {
                Some(open) => format!("{c} (+{})", seconds(c - open)),
                None => c.to_string(),
            });
            cells.push(created);
            cells.push(md_cell(o.status.as_deref().unwrap_or("—")));
        }
        if reads {
            cells.push(o.stock_read.map_or("—".into(), |r| r.to_string()));
        }
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s.push('\n');
    s
}

/// Where an order of a proof begins and ends on its timeline (ms after the sale opened): from
/// its send to the moment its units were held and on to their release, open at the right edge
/// when they never were. `rows`: the proof is about the rows' instant, so held and released are
/// the row's own times (creation, release), on the sale's clock through `opened_ms`; otherwise
/// the client's (acknowledgement, the cancel's send).
fn span(
    o: &ProofOrder,
    opened_ms: Option<i64>,
    rows: bool,
) -> Option<(i64, Option<i64>, Option<i64>)> {
    let row = |t: Option<i64>| t.zip(opened_ms).map(|(t, open)| t - open);
    let (held_from, end) = if rows {
        (row(o.created_at_ms)?, row(o.released_at_ms))
    } else {
        (
            o.acked_ms.map(|t| t as i64)?,
            o.cancel_sent_ms.map(|t| t as i64),
        )
    };
    let start = o
        .sent_ms
        .map(|t| t as i64)
        .unwrap_or(held_from)
        .min(held_from);
    Some((start, Some(held_from), end))
}

/// The proof for the HTML page: the claim, its facts, a timeline of its orders against the
/// stock when it is about an instant, and its orders as a table.
pub fn html(p: &Proof) -> String {
    let esc = super::markup::escape;
    let mut s = format!(
        "<div class=\"proof\"><p><b>Proof of <code>{}</code></b>: {}</p>\n<p class=\"source\">Source: {}.</p>\n",
        esc(&p.findings.join(", ")),
        esc(&p.claim),
        esc(&p.source)
    );
    if !p.facts.is_empty() {
        s.push_str("<ul>");
        for f in &p.facts {
            let _ = write!(s, "<li>{}</li>", esc(f));
        }
        s.push_str("</ul>\n");
    }
    if let Some(svg) = timeline(p) {
        s.push_str(&svg);
    }
    if !p.orders.is_empty() {
        // The Markdown table's rows, as HTML: one source for the columns.
        let md = markdown(p);
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        s.push_str("<table class=\"proof-orders\">\n");
        for (i, line) in rows.iter().enumerate() {
            if i == 1 {
                continue;
            }
            let tag = if i == 0 { "th" } else { "td" };
            s.push_str("<tr>");
            for cell in line.trim_matches('|').split(" | ") {
                let cell = cell.trim().trim_matches('`').replace("\\|", "|");
                let _ = write!(s, "<{tag}>{}</{tag}>", esc(&cell));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
    }
    s.push_str("</div>\n");
    s
}

/// The orders of a proof about an instant as bars, one row each in the order they were held:
/// a thin bar while the request was in flight, a thick one while the order held its units, a
/// vertical line at the instant and a horizontal one at the stock: every bar above the stock
/// line and across the instant is a unit promised beyond the stock.
fn timeline(p: &Proof) -> Option<String> {
    let at = p.at_ms?;
    let stock = p.stock?;
    let opened_ms = p.opened_at_ms;
    let mut spans: Vec<(i64, Option<i64>, Option<i64>, &ProofOrder)> = p
        .orders
        .iter()
        .filter_map(|o| span(o, opened_ms, p.at_row_ms.is_some()).map(|(a, b, c)| (a, b, c, o)))
        .collect();
    if spans.len() < 2 {
        return None;
    }
    spans.sort_by_key(|(_, held, _, _)| *held);
    let lo = spans.iter().map(|s| s.0).min().unwrap_or(at).min(at);
    let hi = spans
        .iter()
        .filter_map(|s| s.2)
        .chain([at])
        .max()
        .unwrap_or(at);
    let hi = hi.max(lo + 1) + (hi - lo).max(10) / 10;
    let (width, left, row) = (760.0, 60.0, 4.0);
    let n = spans.len();
    // Rows held before the proof's set began are below it: the set's first order sits at
    // height `held - listed` of the stock.
    let below = (stock + 1 - n as i64).max(0);
    let height = n as f64 * row + 40.0;
    let x = |t: i64| left + (t - lo) as f64 / (hi - lo) as f64 * (width - left - 10.0);
    let y = |i: usize| height - 25.0 - (i as f64 + 1.0) * row;
    let mut s = format!(
        "<svg class=\"proof-timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"the proof's orders against the stock\">\n"
    );
    for (i, (start, held, end, o)) in spans.iter().enumerate() {
        let end = end.unwrap_or(hi);
        let held = held.unwrap_or(*start);
        let over = below + i as i64 + 1 > stock;
        let colour = if over { "#d62728" } else { "#1f77b4" };
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"1\" fill=\"#999\"/><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}</title></rect>",
            x(*start),
            y(i) + row / 2.0,
            (x(held) - x(*start)).max(0.5),
            x(held),
            y(i),
            (x(end) - x(held)).max(1.0),
            row - 1.0,
            super::markup::escape(o.id.as_deref().unwrap_or("order"))
        );
    }
    // The stock line: the row of the stock's last unit.
    let stock_row = (stock - below).clamp(0, n as i64) as usize;
    let ys = height - 25.0 - stock_row as f64 * row;
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" x2=\"{width}\" y1=\"{ys:.1}\" y2=\"{ys:.1}\" stroke=\"#000\" stroke-dasharray=\"4 3\"/><text x=\"2\" y=\"{:.1}\" font-size=\"11\">stock {stock}</text>",
        ys + 4.0
    );
    let xa = x(at);
    let _ = writeln!(
        s,
        "<line x1=\"{xa:.1}\" x2=\"{xa:.1}\" y1=\"5\" y2=\"{:.1}\" stroke=\"#d62728\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">+{}</text>",
        height - 20.0,
        xa + 3.0,
        height - 8.0,
        seconds(at)
    );
    let _ = writeln!(
        s,
        "<text x=\"{left}\" y=\"{:.1}\" font-size=\"11\">+{}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">+{}</text>",
        height - 8.0,
        seconds(lo),
        width - 10.0,
        height - 8.0,
        seconds(hi)
    );
    s.push_str("</svg>\n");
    Some(s)
}
