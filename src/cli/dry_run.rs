//! `run --dry-run` and `compare --dry-run`: the plan of every run, printed instead of sending.
//! Nothing is started (no servers, no shop) and nothing is sent; the scenario and the flags are
//! checked as a real run checks them.

use super::{load_scenario, plan, ScenarioArgs};
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::rehearsal::PlanSummary;
use crate::store::Backend;
use crate::traffic::schedule;

/// Prints the plan of each run (strategy, backend, repeat), the `servers` it would use (their
/// URLs already checked against their roles) and the one schedule every run fires; with
/// `--json`, the plan as one document. Exit 0.
pub(super) fn print(
    sa: &ScenarioArgs,
    cells: &[(Strategy, Backend)],
    servers: &[String],
) -> anyhow::Result<Exit> {
    let (mut s, scenario_file) = load_scenario(&sa.scenario)?;
    sa.overrides().apply(&mut s);
    s.item
        .reference_check()
        .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    for (strategy, _) in cells {
        s.shop.check_defect(*strategy)?;
    }
    plan::max_send_lag(&mut s, sa.send_lag.ms())?;
    let buyers = schedule::build(&s);
    let summary = PlanSummary::of(&s, &buyers);
    let runs = labels(cells, sa.repeat);
    let mut text = format!(
        "dry run: nothing is sent. {} run(s) of scenario {}, each on a fresh sale of {} units:\n",
        runs.len(),
        s.name,
        s.item.stock
    );
    for (i, label) in runs.iter().enumerate() {
        text.push_str(&format!("  run {}/{}: {label}\n", i + 1, runs.len()));
    }
    text.push_str("  servers (not contacted):\n");
    for line in servers {
        text.push_str(&format!("    {line}\n"));
    }
    if !s.faults.is_empty() {
        let faults: Vec<String> = s.faults.iter().map(|f| f.label()).collect();
        text.push_str(&format!("  faults in each run: {}\n", faults.join(", ")));
    }
    text.push_str("Each run fires this plan:\n");
    let rendered = summary.render("each run");
    // The summary's own first line says "dry run" again: keep only its figures.
    text.extend(rendered.lines().skip(1).map(|l| format!("{l}\n")));
    sa.output
        .human(&crate::report::table::fit(&text, sa.output.wide));
    if sa.output.json.wanted() {
        let mut v = super::output::dry_run("the reference shop", &summary);
        v["runs"] = runs.into();
        v["servers"] = servers.into();
        super::output::json_line(&v);
    }
    Ok(Exit::Success)
}

/// `naive/postgres`, or `naive/postgres #2` for each repeat.
fn labels(cells: &[(Strategy, Backend)], repeat: u32) -> Vec<String> {
    cells
        .iter()
        .flat_map(|(strategy, backend)| {
            let label = format!("{strategy}/{}", backend.as_str());
            (1..=repeat.max(1)).map(move |r| match repeat {
                0 | 1 => label.clone(),
                _ => format!("{label} #{r}"),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repeat_of_each_cell_is_one_run() {
        let cells = [
            (Strategy::Naive, Backend::Postgres),
            (Strategy::RedisLua, Backend::Mysql),
        ];
        assert_eq!(labels(&cells, 1), ["naive/postgres", "redis-lua/mysql"]);
        assert_eq!(
            labels(&cells[..1], 2),
            ["naive/postgres #1", "naive/postgres #2"]
        );
    }
}
