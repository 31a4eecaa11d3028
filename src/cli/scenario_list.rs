//! `oversell scenarios`: the bundled scenarios as a table that fits 100 columns.

use super::JsonArgs;
use crate::exit::Exit;
use clap::Args;

/// `oversell scenarios`.
#[derive(Debug, Args, Clone)]
pub struct ScenariosArgs {
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `oversell scenarios`: the table on stdout, and the list as one document with `--json`.
pub(super) fn scenarios(args: ScenariosArgs) -> Exit {
    crate::console::out!("{}", render());
    if args.json.wanted() {
        super::output::json_line(&json());
    }
    Exit::Success
}

/// `oversell scenarios`: name, size and description of every bundled scenario, in 100
/// columns (a long description continues on the rows below its scenario).
pub(super) fn render() -> String {
    use crate::report::table::{text, wrap, Align, TERMINAL_WIDTH};
    let rows: Vec<[String; 4]> = crate::scenarios::BUNDLED
        .iter()
        .map(|b| match b.load() {
            Ok(s) => [
                b.name.to_string(),
                s.total_buyers().to_string(),
                s.item.stock.to_string(),
                s.description
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" "),
            ],
            Err(e) => [b.name.to_string(), "-".into(), "-".into(), e.to_string()],
        })
        .collect();
    let header = ["scenario", "buyers", "stock", "description"].map(String::from);
    let col = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    // Three columns and their gaps before the description.
    let room = TERMINAL_WIDTH
        .saturating_sub(col(0) + col(1) + col(2) + 6)
        .max(30);
    let mut lines: Vec<Vec<String>> = Vec::new();
    for r in &rows {
        for (i, part) in wrap(&r[3], room).lines().enumerate() {
            let part = part.trim_start().to_string();
            lines.push(match i {
                0 => vec![r[0].clone(), r[1].clone(), r[2].clone(), part],
                _ => vec![
                    String::new(),
                    String::new(),
                    String::new(),
                    format!("  {part}"),
                ],
            });
        }
    }
    let mut s = text(
        &header,
        &lines,
        &[Align::Left, Align::Right, Align::Right, Align::Left],
    );
    s.push_str(
        "
Use one with --scenario NAME (a file of that path, if one exists, is used instead).
",
    );
    s
}

/// `oversell scenarios --json`: every bundled scenario's name, buyers, stock and description.
pub(super) fn json() -> serde_json::Value {
    let scenarios: Vec<serde_json::Value> = crate::scenarios::BUNDLED
        .iter()
        .map(|b| match b.load() {
            Ok(s) => serde_json::json!({
                "name": b.name,
                "buyers": s.total_buyers(),
                "stock": s.item.stock,
                "description": s.description.split_whitespace().collect::<Vec<_>>().join(" "),
            }),
            Err(e) => serde_json::json!({ "name": b.name, "error": e.to_string() }),
        })
        .collect();
    serde_json::json!({
        "schema": super::SUMMARY_SCHEMA,
        "scenarios": scenarios,
        "exit_code": crate::exit::Exit::Success,
    })
}
