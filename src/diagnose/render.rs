//! The diagnosis for people and programs: `diagnosis.md`, `diagnosis.html`, `diagnosis.json`
//! and the short terminal summary (one row per class, the proofs and remedies of what was
//! found, where the time goes).

use super::class::{Status, BOOK};
use super::row::Row;
use super::{time, Diagnosis};
use crate::report::markup::{escape, md_cell};
use crate::report::table::{text, Align};
use anyhow::Context;
use std::fmt::Write;
use std::path::Path;

/// Writes the three files into `dir`.
pub fn write(d: &Diagnosis, dir: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(d)?;
    for (name, body) in [
        ("diagnosis.json", json + "\n"),
        ("diagnosis.md", markdown(d)),
        ("diagnosis.html", html(d)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The detail cut to a terminal line.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let cut: String = s.chars().take(n.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// The terminal summary: one row per class, then each finding's proof and remedy, where the
/// time goes, the verdict and where the diagnosis is.
pub fn terminal(d: &Diagnosis, dir: &Path) -> String {
    let header = ["class", "status", "what"].map(String::from);
    let body: Vec<Vec<String>> = d
        .rows
        .iter()
        .map(|r| {
            vec![
                r.class.as_str().to_string(),
                r.status.as_str().to_string(),
                short(&r.detail, 64),
            ]
        })
        .collect();
    let mut out = format!("oversell diagnose: {} ({})\n", d.subject, d.scenario);
    out.push_str(&text(
        &header,
        &body,
        &[Align::Left, Align::Left, Align::Left],
    ));
    for r in d.rows.iter().filter(|r| r.status == Status::Found) {
        let _ = writeln!(out, "{}:", r.class);
        if let Some(p) = &r.proof {
            for line in crate::oracle::proof::line(p).lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        let figures: Vec<String> = r
            .figures
            .iter()
            .map(|f| format!("{} {}", f.name, f.shown))
            .collect();
        if !figures.is_empty() {
            let _ = writeln!(out, "  figures: {}", figures.join("; "));
        }
        let _ = writeln!(out, "  remedy: {} ({})", r.remedy, r.link);
    }
    if let Some(t) = &d.time {
        out.push_str("where the time goes:\n");
        for line in time::lines(t, d.capacity.as_ref()) {
            let _ = writeln!(out, "  {line}");
        }
    }
    for s in &d.skipped {
        let _ = writeln!(out, "skipped {}: {}", s.experiment.as_str(), s.why);
    }
    let _ = writeln!(
        out,
        "took {:.0}s of the {:.0}s budget\noversell diagnose: {}\ndiagnosis: {}",
        d.elapsed_s,
        d.budget_s,
        d.verdict,
        dir.join("diagnosis.md").display()
    );
    out
}

/// `diagnosis.md`.
pub fn markdown(d: &Diagnosis) -> String {
    let mut s = format!(
        "# Diagnosis: {}\n\nScenario `{}` ({}){}. Budget {:.0} s, took {:.0} s.\n\n**{}**\n\n",
        d.subject,
        d.scenario,
        d.scenario_file,
        d.fitted_from.as_ref().map_or(String::new(), |f| format!(
            ", fitted from the access log {f}"
        )),
        d.budget_s,
        d.elapsed_s,
        d.verdict
    );
    s.push_str("| class | status | what | remedy |\n|---|---|---|---|\n");
    for r in &d.rows {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} ([book]({})) |",
            r.class,
            r.status.as_str(),
            md_cell(&r.detail),
            md_cell(r.remedy),
            r.link
        );
    }
    for r in d.rows.iter().filter(|r| r.status == Status::Found) {
        s.push_str(&found_md(r));
    }
    if let Some(t) = &d.time {
        let _ = write!(
            s,
            "\n## Where the time goes\n\nThe rush ([report]({})):\n\n",
            t.report
        );
        for line in time::lines(t, d.capacity.as_ref()) {
            let _ = writeln!(s, "- {line}");
        }
        if let Some(c) = &d.capacity {
            let _ = writeln!(s, "- the capacity search: [report]({})", c.report);
        }
    }
    s.push_str("\n## The battery\n\n| experiment | what | planned | took | report |\n|---|---|---:|---:|---|\n");
    for p in &d.plan {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} s | {} | {} |",
            p.experiment.as_str(),
            md_cell(&p.what),
            p.planned_s,
            p.elapsed_s.map_or("-".into(), |e| format!("{e:.0} s")),
            p.report
                .as_ref()
                .map_or("-".into(), |r| format!("[report]({r})"))
        );
    }
    for k in &d.skipped {
        let _ = writeln!(s, "\nSkipped {}: {}", k.experiment.as_str(), k.why);
    }
    let _ = writeln!(
        s,
        "\nEach class, its remedy and how the battery drives it: the book's chapter \
         [Diagnose a shop]({BOOK})."
    );
    s
}

/// A found class's section: what shows it, the proof, the figures, the remedy.
fn found_md(r: &Row) -> String {
    let mut s = format!("\n## `{}`: found\n\n{}", r.class, r.detail);
    if let Some(report) = &r.report {
        let _ = write!(s, " ([report]({report}))");
    }
    s.push_str("\n\n");
    if let Some(p) = &r.proof {
        let _ = writeln!(s, "Proof: {} (from {}).\n", p.claim, p.source);
        for fact in p.facts.iter().take(5) {
            let _ = writeln!(s, "- {fact}");
        }
        for o in p.orders.iter().take(10) {
            let _ = writeln!(
                s,
                "- order {} (buyer {}, qty {}{})",
                o.id.as_deref().unwrap_or("-"),
                o.user.as_deref().unwrap_or("-"),
                o.qty,
                o.stock_read
                    .map_or(String::new(), |r| format!(", read stock {r}"))
            );
        }
        if p.orders.len() > 10 {
            let _ = writeln!(s, "- and {} more in the run's report", p.orders.len() - 10);
        }
        s.push('\n');
    }
    for f in &r.figures {
        let _ = writeln!(s, "- {}: **{}** ({})", f.name, f.shown, f.source);
    }
    let _ = writeln!(s, "\nRemedy: {} ([book]({}))", r.remedy, r.link);
    s
}

/// `diagnosis.html`: the same as the Markdown, as one page.
pub fn html(d: &Diagnosis) -> String {
    let mut s = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Diagnosis: {t}</title>\
         <style>body{{font-family:sans-serif;max-width:1240px;margin:auto}}table{{border-collapse:\
         collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top}}\
         .found{{color:#b00;font-weight:bold}}.not_testable{{color:#777}}</style></head><body>\
         <h1>Diagnosis: {t}</h1><p>Scenario <code>{}</code>. Budget {:.0} s, took {:.0} s.</p>\
         <p><strong>{}</strong></p><table><tr><th>class</th><th>status</th><th>what</th>\
         <th>remedy</th></tr>",
        escape(&d.scenario),
        d.budget_s,
        d.elapsed_s,
        escape(&d.verdict),
        t = escape(&d.subject)
    );
    for r in &d.rows {
        let _ = write!(
            s,
            "<tr><td><code>{}</code></td><td class=\"{st}\">{st}</td><td>{}</td><td>{} \
             (<a href=\"{}\">book</a>)</td></tr>",
            r.class,
            escape(&r.detail),
            escape(r.remedy),
            escape(&r.link),
            st = r.status.as_str()
        );
    }
    s.push_str("</table>");
    for r in d.rows.iter().filter(|r| r.status == Status::Found) {
        s.push_str(&found_html(r));
    }
    if let Some(t) = &d.time {
        s.push_str("<h2>Where the time goes</h2><ul>");
        for line in time::lines(t, d.capacity.as_ref()) {
            let _ = write!(s, "<li>{}</li>", escape(&line));
        }
        s.push_str("</ul>");
    }
    s.push_str("<h2>The battery</h2><table><tr><th>experiment</th><th>what</th><th>planned</th><th>took</th><th>report</th></tr>");
    for p in &d.plan {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{:.0} s</td><td>{}</td><td>{}</td></tr>",
            p.experiment.as_str(),
            escape(&p.what),
            p.planned_s,
            p.elapsed_s.map_or("-".into(), |e| format!("{e:.0} s")),
            p.report.as_ref().map_or("-".into(), |r| format!(
                "<a href=\"{}\">report</a>",
                escape(r)
            ))
        );
    }
    s.push_str("</table>");
    for k in &d.skipped {
        let _ = write!(
            s,
            "<p>Skipped {}: {}</p>",
            k.experiment.as_str(),
            escape(&k.why)
        );
    }
    s.push_str("</body></html>\n");
    s
}

/// A found class's section of the page.
fn found_html(r: &Row) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<h2><code>{}</code>: found</h2><p>{}",
        r.class,
        escape(&r.detail)
    );
    if let Some(report) = &r.report {
        let _ = write!(s, " (<a href=\"{}\">report</a>)", escape(report));
    }
    s.push_str("</p>");
    if let Some(p) = &r.proof {
        let _ = write!(s, "<pre>{}</pre>", escape(&crate::oracle::proof::line(p)));
    }
    if !r.figures.is_empty() {
        s.push_str("<ul>");
        for f in &r.figures {
            let _ = write!(
                s,
                "<li>{}: <strong>{}</strong> ({})</li>",
                escape(&f.name),
                escape(&f.shown),
                escape(&f.source)
            );
        }
        s.push_str("</ul>");
    }
    s
}
