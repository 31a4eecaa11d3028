//! Which `report.json` a path given on the command line names.

use anyhow::Context;
use std::path::{Path, PathBuf};

/// The `report.json` a path names: the file itself, the one in a report folder, or the one
/// report folder inside an `--out` folder (`--out candidate` makes
/// `candidate/<UTC timestamp>-<scenario>/`). An `--out` folder holding several reports is
/// refused, naming them.
pub(super) fn report_file(path: &Path) -> anyhow::Result<PathBuf> {
    if !path.is_dir() || path.join("report.json").exists() {
        return Ok(if path.is_dir() {
            path.join("report.json")
        } else {
            path.to_path_buf()
        });
    }
    let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading the folder {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("report.json").is_file())
        .collect();
    inside.sort();
    match inside.as_slice() {
        [one] => Ok(one.join("report.json")),
        [] => anyhow::bail!(
            "{} holds no report.json, nor a report folder with one: give a report.json, its \
             folder, or the --out folder of one run",
            path.display()
        ),
        several => anyhow::bail!(
            "{} holds {} reports ({}): name the one to read",
            path.display(),
            several.len(),
            several
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_folder_with_one_report_names_it_and_with_two_is_refused() {
        let out = tempfile::tempdir().unwrap();
        let first = out.path().join("20261201T090000Z-smoke");
        std::fs::create_dir(&first).unwrap();
        std::fs::write(first.join("report.json"), "{}").unwrap();
        assert_eq!(report_file(out.path()).unwrap(), first.join("report.json"));
        assert_eq!(report_file(&first).unwrap(), first.join("report.json"));
        let second = out.path().join("20261202T090000Z-smoke");
        std::fs::create_dir(&second).unwrap();
        std::fs::write(second.join("report.json"), "{}").unwrap();
        let e = report_file(out.path()).unwrap_err().to_string();
        assert!(
            e.contains("holds 2 reports") && e.contains("20261202T090000Z-smoke"),
            "{e}"
        );
        let empty = tempfile::tempdir().unwrap();
        let e = report_file(empty.path()).unwrap_err().to_string();
        assert!(e.contains("holds no report.json"), "{e}");
    }
}
