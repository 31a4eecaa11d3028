//! `report.html`: one self-contained page (charts inline as SVG, CSS and script inline, no
//! network fetch): the headline table, the oracle's verdict per run in plain words, any run
//! that did not finish, the charts, each run's details and per-request table (the same as
//! `report.md`'s, from [`super::details`]), the scenario that produced them, the metadata, and
//! where every figure came from.
//!
//! A small inline script measures every chart once the page has loaded and writes
//! `data-charts-ok="<drawn>/<total>"` on `<body>` (and counts script errors in
//! `data-js-errors`), so a headless browser can check the page.

use super::charts::{run_colour, run_slug, Rendered};
use super::details;
use super::table::{Column, HEADLINE};
use super::{Report, RunReport};
use crate::metric::Metric;
use std::fmt::Write;

use super::markup::escape as esc;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

const STYLE: &str = r#"
body { font-family: "DejaVu Sans", Verdana, Arial, sans-serif; margin: 24px auto; max-width: 1260px; color: #222; padding: 0 16px; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 12px 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; }
table.headline td, table.headline th { white-space: nowrap; } table.headline { font-size: 0.9em; line-height: 1.3; }
p.more { margin: 14px 0 0; color: #444; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 6px; vertical-align: -0.1em; }
.verdict { font-size: 1.05em; margin: 6px 0 2px; } .proof { border-left: 3px solid #d62728; padding-left: 10px; margin: 8px 0; } .proof .source { color: #555; font-size: 0.9em; } .proof-orders td, .proof-orders th { font-size: 0.85em; padding: 1px 6px; } .facts { color: #444; margin: 0 0 12px 22px; }
figure.chart { margin: 18px 0 30px; } figure.chart svg { display: block; width: 100%; max-width: 1200px; height: auto; border: 1px solid #e3e3e3; }
figcaption { color: #444; font-size: 0.9em; margin-top: 6px; } figcaption b { color: #222; }
pre { background: #f7f7f7; padding: 10px; overflow-x: auto; font-size: 0.85em; }
.bad { color: #b00; font-weight: bold; } .good { color: #070; }
"#;

const SCRIPT: &str = r#"
window.addEventListener('error', function () {
  var b = document.body || document.documentElement;
  b.setAttribute('data-js-errors', String(Number(b.getAttribute('data-js-errors') || 0) + 1));
});
window.addEventListener('load', function () {
  var figures = document.querySelectorAll('figure.chart');
  var ok = 0;
  figures.forEach(function (f) {
    var svg = f.querySelector('svg');
    if (!svg) { return; }
    var r = svg.getBoundingClientRect();
    f.setAttribute('data-size', Math.round(r.width) + 'x' + Math.round(r.height));
    if (r.width > 0 && r.height > 0) { ok += 1; }
  });
  document.body.setAttribute('data-charts-ok', ok + '/' + figures.length);
  // The headline tables' layout, for the test that opens the page at 1280 px: the widest
  // table's width and the most lines any cell takes.
  var width = 0, lines = 0;
  document.querySelectorAll('table.headline').forEach(function (t) {
    width = Math.max(width, Math.ceil(t.getBoundingClientRect().width));
    t.querySelectorAll('td, th').forEach(function (c) {
      // The lines a cell's text takes: its text's boxes, those that overlap vertically
      // counted as one line.
      var range = document.createRange();
      range.selectNodeContents(c);
      var boxes = Array.prototype.filter.call(range.getClientRects(), function (r) {
        return r.width > 0;
      }).sort(function (a, b) { return a.top - b.top; });
      var n = 0, bottom = -1e9;
      boxes.forEach(function (r) {
        if (r.top >= bottom - 2) { n += 1; bottom = r.bottom; } else { bottom = Math.max(bottom, r.bottom); }
      });
      lines = Math.max(lines, n);
    });
  });
  document.body.setAttribute('data-headline', width + 'px ' + lines + 'lines');
});
"#;

fn swatch(run: &RunReport) -> String {
    let c = run_colour(run);
    format!(
        r#"<span class="swatch" style="background:#{:02x}{:02x}{:02x}"></span>"#,
        c.0, c.1, c.2
    )
}

/// The headline table in two parts of at most eight columns each (so it reads at 1280 px
/// without squeezing a cell: names and figures never break inside, a `--repeat` range goes on
/// its own line under its median).
fn headline(s: &mut String, r: &Report, mb: bool) {
    let (first, more) = HEADLINE.split_at(HEADLINE.len().min(HEADLINE_FIRST));
    headline_part(s, r, mb, first);
    if !more.is_empty() {
        s.push_str("<p class=\"more\">More figures per run:</p>\n");
        headline_part(s, r, mb, more);
    }
}

/// How many of the headline's columns go in its first table.
const HEADLINE_FIRST: usize = 7;

/// One table of the headline: the strategy and `columns`.
fn headline_part(s: &mut String, r: &Report, mb: bool, columns: &[Column]) {
    s.push_str("<table class=\"headline\">\n<tr><th>strategy</th>");
    for c in columns {
        let _ = write!(s, "<th>{}</th>", esc(c.header()));
    }
    s.push_str("</tr>\n");
    for (_, runs) in super::repeats::groups(r) {
        let run = runs[0];
        let _ = write!(
            s,
            "<tr><td>{}{}</td>",
            swatch(run),
            esc(&super::repeats::row_label(&runs, mb))
        );
        let worst = runs.iter().filter_map(|r| r.findings.oversell).max();
        for c in columns {
            let cell = super::table::repeats_cell(*c, &runs);
            let cell = if runs.len() > 1 {
                repeated_cell(&cell)
            } else {
                esc(&cell)
            };
            let _ = match (c, worst) {
                (Column::Metric(Metric::Oversell), Some(0)) => {
                    write!(s, r#"<td><span class="good">{cell}</span></td>"#)
                }
                (Column::Metric(Metric::Oversell), Some(_)) => {
                    write!(s, r#"<td><span class="bad">{cell}</span></td>"#)
                }
                _ => write!(s, "<td>{cell}</td>"),
            };
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</table>\n");
}

/// A headline cell of a `--repeat` row, escaped: its `(min–max)` and each further value
/// (` · `) on a line of its own.
fn repeated_cell(text: &str) -> String {
    esc(text).replace(" (", "<br>(").replace(" · ", "<br>")
}

fn headline_notes(s: &mut String, r: &Report) {
    if let Some(legend) = super::bound_legend(r) {
        let _ = writeln!(s, "<p>{}</p>", esc(legend));
    }
    s.push_str("<p>Oversold, sold, lost acks, duplicate buyers, undersell: the oracle. Latency: oversell's HdrHistograms of every order attempt. DB QPS: the database server's counters, each in its own unit (PostgreSQL transactions/s or pg_stat_statements statements/s, MySQL Questions/s). Error rate, orders/s, sell-out: the clients' records. Redis ops/s: Redis <code>INFO stats</code>. Details under <a href=\"#sources\">Where the figures come from</a>.</p>\n");
}

/// The strategy × fault table, when the runs went through faults.
fn faults(s: &mut String, r: &Report) {
    let Some((header, rows)) = super::faults::table(r) else {
        return;
    };
    s.push_str("<h2 id=\"faults\">What each design lost under faults</h2>\n<table>\n<tr>");
    for h in &header {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>\n");
    for row in &rows {
        s.push_str("<tr>");
        for c in row {
            let _ = write!(s, "<td>{}</td>", esc(c));
        }
        s.push_str("</tr>\n");
    }
    let _ = writeln!(s, "</table>\n<p>{}</p>", esc(super::faults::NOTE));
}

fn verdicts(s: &mut String, r: &Report, mb: bool) {
    for run in &r.runs {
        let f = &run.findings;
        let _ = writeln!(
            s,
            "<p class=\"verdict\">{}<b>{}</b>: {}</p>",
            swatch(run),
            esc(&run.run_label(mb)),
            esc(&f.verdict)
        );
        let mut facts = format!(
            "sold {} of {}; database stock {}; conservation drift {}; acknowledged {}, lost {}; phantom orders {}; duplicate buyers {}",
            opt(f.sold),
            f.initial_stock,
            opt(f.db_stock),
            opt(f.conservation_drift),
            f.acknowledged,
            opt(f.lost_acks),
            opt(f.phantom_orders),
            opt(f.duplicate_buyers),
        );
        if f.redis_stock.is_some() {
            let _ = write!(
                facts,
                "; Redis stock {}, Redis drift {}; dead letters {}",
                opt(f.redis_stock),
                opt(f.redis_drift),
                opt(f.dead_letters)
            );
        }
        let _ = writeln!(
            s,
            "<p class=\"facts\">{} — checked against {}.</p>",
            esc(&facts),
            esc(&f.truth_source)
        );
    }
}

fn run_details(s: &mut String, r: &Report, mb: bool) {
    for run in &r.runs {
        let _ = writeln!(
            s,
            "<h3 id=\"details-{}\">{}{}</h3>\n<p class=\"verdict\"><b>Verdict:</b> {}</p>\n<ul>",
            esc(&run_slug(run)),
            swatch(run),
            esc(&run.run_label(mb)),
            esc(&run.findings.verdict)
        );
        for fact in details::facts(run) {
            let _ = writeln!(s, "<li>{}</li>", fact.html());
        }
        s.push_str("</ul>\n");
        for p in &run.findings.proofs {
            s.push_str(&super::proofs::html(p));
        }
        s.push_str("<table class=\"requests\">\n<tr>");
        for h in details::REQUEST_HEADER {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr>\n");
        for row in details::requests(run) {
            s.push_str("<tr>");
            for (i, cell) in row.iter().enumerate() {
                let class = if i == 2 { " class=\"text\"" } else { "" };
                let _ = write!(s, "<td{class}>{}</td>", esc(cell));
            }
            s.push_str("</tr>\n");
        }
        s.push_str(
            "</table>\n<p>Latency in ms, measured from each request's intended send time.</p>\n",
        );
        let _ = write!(
            s,
            "<p>{}</p>\n<table class=\"timing\">\n<tr>",
            esc(details::TIMING_INTRO)
        );
        for h in details::TIMING_HEADER {
            let _ = write!(s, "<th>{}</th>", esc(h));
        }
        s.push_str("</tr>\n");
        for row in details::timing(run) {
            s.push_str("<tr>");
            for cell in &row {
                let _ = write!(s, "<td>{}</td>", esc(cell));
            }
            s.push_str("</tr>\n");
        }
        s.push_str("</table>\n");
        let goose = details::goose(run);
        if !goose.is_empty() {
            let _ = writeln!(s, "<p>{}</p>\n<ul>", esc(details::GOOSE_INTRO));
            for g in goose {
                let _ = writeln!(s, "<li>{}</li>", esc(&g));
            }
            s.push_str("</ul>\n");
        }
    }
}

fn metadata(s: &mut String, r: &Report) {
    s.push_str("<h2 id=\"metadata\">Metadata</h2>\n<table>\n");
    for (k, v) in details::metadata(r) {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"text\"><code>{}</code></td></tr>",
            esc(k),
            esc(&v)
        );
    }
    s.push_str("</table>\n");
}

fn sources(s: &mut String, r: &Report, mb: bool) {
    s.push_str("<h2 id=\"sources\">Where the figures come from</h2>\n<table>\n<tr><th>figure</th><th>source</th></tr>\n");
    for (k, v) in &r.sources {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"text\">{}</td></tr>",
            esc(k),
            esc(v)
        );
    }
    s.push_str("</table>\n");
    for run in &r.runs {
        let _ = writeln!(
            s,
            "<h3>{}{}: sampled series</h3>\n<table>\n<tr><th>series</th><th>unit</th><th>samples</th><th>peak</th><th>source</th></tr>",
            swatch(run),
            esc(&run.run_label(mb))
        );
        for series in &run.series {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"text\">{}</td><td>{}</td><td>{:.1}</td><td class=\"text\">{}</td></tr>",
                esc(&series.name),
                esc(&series.unit),
                series.points.len(),
                series.peak(),
                esc(&series.source)
            );
        }
        s.push_str("</table>\n");
    }
}

fn files(s: &mut String, r: &Report, charts: &[Rendered]) {
    s.push_str("<h2>Files next to this page</h2>\n<ul>\n<li><a href=\"report.json\">report.json</a> (schema <code>");
    s.push_str(&esc(&r.schema));
    s.push_str("</code>) and <a href=\"report.md\">report.md</a></li>\n");
    for run in &r.runs {
        let slug = run_slug(run);
        let _ = writeln!(
            s,
            "<li>{slug}: <a href=\"timeline-{slug}.csv\">timeline-{slug}.csv</a> (per-second timelines), <a href=\"latency-{slug}.hlog\">latency-{slug}.hlog</a> (HdrHistogram interval log of order latency, µs)</li>"
        );
    }
    let pngs: Vec<String> = charts
        .iter()
        .map(|c| format!("<a href=\"{0}.png\">{0}.png</a>", esc(&c.name)))
        .collect();
    let _ = writeln!(
        s,
        "<li>charts as PNG (1200 px wide): {}</li>\n</ul>",
        pngs.join(", ")
    );
}

/// The whole page.
pub fn render(r: &Report, charts: &[Rendered]) -> String {
    let mb = r.multi_backend();
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>oversell report: {}</title>\n<style>{STYLE}</style>\n<script>{SCRIPT}</script>\n</head>\n<body>\n",
        esc(&r.scenario.name)
    );
    let _ = writeln!(s, "<h1>oversell report: {}</h1>", esc(&r.scenario.name));
    let _ = writeln!(
        s,
        "<p>{} buyers, {} units, purchase limit {} — scenario <code>{}</code>, generated {} by oversell {} on {} cores ({}).</p>",
        r.scenario.buyers,
        r.scenario.spec.item.stock,
        r.scenario.spec.item.purchase_limit,
        esc(&r.scenario.file),
        esc(&r.generated_at),
        esc(&r.tool_version),
        r.machine.cores,
        esc(&r.machine.os)
    );
    if !r.scenario.description.trim().is_empty() {
        let _ = writeln!(
            s,
            "<blockquote>{}</blockquote>",
            esc(r.scenario.description.trim())
        );
    }
    s.push_str("<h2>Headline</h2>\n");
    headline(&mut s, r, mb);
    headline_notes(&mut s, r);
    faults(&mut s, r);
    s.push_str(&super::law::html(&r.law));
    s.push_str("<h2>Verdicts</h2>\n");
    verdicts(&mut s, r, mb);
    let failures = details::failures(r);
    if !failures.is_empty() {
        s.push_str("<h2 id=\"failed\">Runs that did not finish</h2>\n<ul>\n");
        for f in failures {
            let _ = writeln!(s, "<li class=\"bad\">{}</li>", esc(&f));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("<h2>Charts</h2>\n");
    for c in charts {
        let _ = writeln!(
            s,
            "<figure class=\"chart\" id=\"{0}\" data-chart=\"{0}\">\n{1}\n<figcaption><b>{2}</b> — {3}</figcaption>\n</figure>",
            esc(&c.name),
            c.svg.trim(),
            esc(&c.title),
            esc(&c.caption)
        );
    }
    s.push_str("<h2>Details</h2>\n");
    run_details(&mut s, r, mb);
    s.push_str("<h2>Scenario</h2>\n");
    let _ = writeln!(
        s,
        "<p>The traffic model that produced these figures (<code>{}</code>, as the run read it):</p>",
        esc(&r.scenario.file)
    );
    let spec = toml::to_string_pretty(&r.scenario.spec)
        .unwrap_or_else(|e| format!("(the scenario could not be shown: {e})"));
    let _ = writeln!(s, "<pre>{}</pre>", esc(&spec));
    metadata(&mut s, r);
    sources(&mut s, r, mb);
    files(&mut s, r, charts);
    s.push_str("</body>\n</html>\n");
    s
}
