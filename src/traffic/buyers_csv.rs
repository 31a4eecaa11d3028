//! Real-looking accounts for a rehearsal: a CSV file with columns `user_id,device_id,ip` (a
//! header line naming them, in any order), one buyer per row, read with the `csv` crate (quoted
//! fields, a byte-order mark). Rows are given to the plan's buyers in arrival order; arrivals,
//! think times and the bot share stay the scenario's.
//!
//! Every other column is a placeholder of the buyer's requests (`email` makes `{email}`), kept
//! in a [`Columns`] table beside the plan; a column's name must be a placeholder name (a-z,
//! 0-9, `_`) that is not a built-in one.

use super::schedule::{Names, Schedule};
use super::session::Columns;
use crate::model::MAX_ID_LEN;
use crate::template;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// One account from the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub user_id: String,
    pub device_id: String,
    pub ip: String,
}

/// A CSV that could not be used; names the file and, where it applies, the line.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", .line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct CsvError {
    pub file: PathBuf,
    /// 1-based line number.
    pub line: Option<usize>,
    pub message: String,
}

const COLUMNS: [&str; 3] = ["user_id", "device_id", "ip"];

/// The 1-based line a record starts on.
fn line_of(r: &csv::StringRecord) -> Option<usize> {
    r.position().map(|p| p.line() as usize)
}

/// Parses the file's text (`file` is only used in errors): the accounts.
#[cfg(test)]
pub fn parse(file: &Path, text: &str) -> Result<Vec<Account>, CsvError> {
    read(file, text).map(|(accounts, _)| accounts)
}

/// Parses the file's text (`file` is only used in errors): the accounts and the extra
/// columns. Fields may be quoted (`"a, b"`, `""` for a quote), cells are trimmed, blank lines
/// and a UTF-8 byte-order mark are skipped.
#[cfg(test)]
pub fn read(file: &Path, text: &str) -> Result<(Vec<Account>, Columns), CsvError> {
    read_from(file, text.as_bytes(), None)
}

/// [`read`] from a stream, keeping at most `limit` rows: the file is read only as far as the
/// rows kept (a plan of 10 buyers reads 10 rows of a file of millions, holding only those).
pub fn read_from(
    file: &Path,
    source: impl std::io::Read,
    limit: Option<usize>,
) -> Result<(Vec<Account>, Columns), CsvError> {
    let mut records = records(file, source);
    let header = records.next().transpose()?.ok_or_else(|| {
        CsvError::at(
            file,
            None,
            "the file is empty; expected a header `user_id,device_id,ip`",
        )
    })?;
    let header = Header::read(file, &header)?;
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    // Never a record past the limit: the rest of the file is not read.
    while limit.is_none_or(|l| out.len() < l) {
        let Some(row) = records.next() else { break };
        let row = row?;
        let line = line_of(&row);
        let acc = header.account(file, &row)?;
        if let Some(first) = seen.insert(acc.user_id.clone(), line.unwrap_or_default()) {
            return Err(CsvError::at(
                file,
                line,
                format!(
                    "user_id {:?} already appears on line {first}; one row per person",
                    acc.user_id
                ),
            ));
        }
        out.push(acc);
        if !header.extra.is_empty() {
            rows.push(
                header
                    .extra
                    .iter()
                    .map(|(i, _)| row[*i].to_string())
                    .collect(),
            );
        }
    }
    let names = header.extra.into_iter().map(|(_, n)| n).collect();
    Ok((out, Columns::new(names, rows)))
}

/// The file's records, trimmed; lines of blanks left out.
fn records<'a>(
    file: &'a Path,
    source: impl std::io::Read + 'a,
) -> impl Iterator<Item = Result<csv::StringRecord, CsvError>> + 'a {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(source)
        .into_records()
        .map(|r| {
            r.map_err(|e| {
                CsvError::at(file, e.position().map(|p| p.line() as usize), e.to_string())
            })
        })
        // A line of blanks is one empty cell; csv itself skips empty lines.
        .filter(|r| !matches!(r, Ok(rec) if rec.len() == 1 && rec[0].is_empty()))
}

impl CsvError {
    /// An error in `file`, at `line` where there is one.
    fn at(file: &Path, line: Option<usize>, message: impl Into<String>) -> CsvError {
        CsvError {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        }
    }
}

/// The header line read: where each of [`COLUMNS`] is, and the extra columns with their names.
struct Header {
    /// How many columns it names.
    width: usize,
    index: HashMap<&'static str, usize>,
    extra: Vec<(usize, String)>,
}

impl Header {
    /// Reads the header (names lower-cased): each column once, every one of [`COLUMNS`], and
    /// extra columns named as placeholders that are not built-in ones.
    fn read(file: &Path, header: &csv::StringRecord) -> Result<Header, CsvError> {
        let line = line_of(header);
        let names: Vec<String> = header.iter().map(str::to_ascii_lowercase).collect();
        let mut index: HashMap<&'static str, usize> = HashMap::new();
        let mut extra: Vec<(usize, String)> = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let twice = || CsvError::at(file, line, format!("column `{n}` appears twice"));
            match COLUMNS.iter().find(|c| **c == n.as_str()) {
                Some(c) if index.insert(c, i).is_some() => return Err(twice()),
                Some(_) => {}
                None if extra.iter().any(|(_, e)| e == n) => return Err(twice()),
                None => match not_a_placeholder(n) {
                    Some(why) => return Err(CsvError::at(file, line, why)),
                    None => extra.push((i, n.clone())),
                },
            }
        }
        if let Some(missing) = COLUMNS.iter().find(|c| !index.contains_key(*c)) {
            return Err(CsvError::at(
                file,
                line,
                format!("the header has no `{missing}` column; expected `user_id,device_id,ip`"),
            ));
        }
        Ok(Header {
            width: names.len(),
            index,
            extra,
        })
    }

    /// One row's account: as many fields as the header, ids of 1 to [`MAX_ID_LEN`]
    /// characters, an IP address.
    fn account(&self, file: &Path, row: &csv::StringRecord) -> Result<Account, CsvError> {
        let line = line_of(row);
        let err = |message: String| CsvError::at(file, line, message);
        if row.len() != self.width {
            return Err(err(format!(
                "{} fields, the header has {}",
                row.len(),
                self.width
            )));
        }
        let get = |c: &str| row[self.index[c]].to_string();
        let acc = Account {
            user_id: get("user_id"),
            device_id: get("device_id"),
            ip: get("ip"),
        };
        for (column, value) in [("user_id", &acc.user_id), ("device_id", &acc.device_id)] {
            if value.is_empty() || value.len() > MAX_ID_LEN {
                return Err(err(format!(
                    "{column} must be 1 to {MAX_ID_LEN} characters"
                )));
            }
        }
        if acc.ip.parse::<IpAddr>().is_err() {
            return Err(err(format!(
                "ip {:?} is not an IPv4 or IPv6 address",
                acc.ip
            )));
        }
        Ok(acc)
    }
}

/// Why extra column `n` cannot be a placeholder, if it cannot.
fn not_a_placeholder(n: &str) -> Option<String> {
    if !template::is_name(n) {
        Some(format!(
            "column `{n}` cannot be a placeholder: an extra column's name is a-z, \
             0-9 and _ (like `email`), used as {{email}}"
        ))
    } else if template::builtin(n).is_some() {
        Some(format!(
            "column `{n}` is a built-in placeholder ({{{n}}} is the scenario's); \
             rename the column"
        ))
    } else {
        None
    }
}

/// Reads the file, streamed and only as far as the plan needs, and gives its accounts to
/// `plan`'s buyers in order; returns the extra columns of those rows. The file must have at
/// least one row per planned buyer (the rows after those are not read).
pub fn apply(file: &Path, plan: &mut Schedule) -> Result<Columns, CsvError> {
    let source = std::fs::File::open(file).map_err(|e| CsvError {
        file: file.to_path_buf(),
        line: None,
        message: format!("cannot read the file: {e}"),
    })?;
    let (accounts, mut columns) =
        read_from(file, std::io::BufReader::new(source), Some(plan.len()))?;
    if accounts.len() < plan.len() {
        return Err(CsvError {
            file: file.to_path_buf(),
            line: None,
            message: format!(
                "{} buyers in the file, but the scenario plans {}; add rows or lower buyers.count",
                accounts.len(),
                plan.len()
            ),
        });
    }
    let names = accounts.into_iter().take(plan.len()).map(|a| Names {
        user_id: a.user_id.into(),
        device_id: a.device_id.into(),
        ip: a.ip.into(),
    });
    plan.rename(names.collect());
    columns.truncate(plan.len());
    Ok(columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("buyers.csv")
    }

    #[test]
    fn columns_may_come_in_any_order() {
        let a = parse(
            p(),
            "ip,user_id,device_id\n10.0.0.1, alice ,phone-1\r\n\n::1,bob,pc\n",
        )
        .unwrap();
        assert_eq!(
            a,
            vec![
                Account {
                    user_id: "alice".into(),
                    device_id: "phone-1".into(),
                    ip: "10.0.0.1".into()
                },
                Account {
                    user_id: "bob".into(),
                    device_id: "pc".into(),
                    ip: "::1".into()
                }
            ]
        );
    }

    #[test]
    fn a_bad_row_names_the_file_and_the_line() {
        let e = parse(
            p(),
            "user_id,device_id,ip\nu1,d1,10.0.0.1\nu2,d2,not-an-ip\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(3));
        let msg = e.to_string();
        assert!(
            msg.starts_with("buyers.csv line 3:") && msg.contains("not-an-ip"),
            "{msg}"
        );
        let e = parse(p(), "user_id,device_id,ip\nu1,d1\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        let e = parse(p(), "user_id,device,ip\n").unwrap_err();
        assert!(e.to_string().contains("no `device_id` column"), "{e}");
        let e = parse(p(), "user_id,device_id,ip,qty\n").unwrap_err();
        assert!(e.to_string().contains("column `qty` is a built-in"), "{e}");
        let e = parse(p(), "user_id,device_id,ip,E-Mail\n").unwrap_err();
        assert!(e.to_string().contains("column `e-mail` cannot be"), "{e}");
        let e = parse(p(), "user_id,device_id,ip\nu1,d1,::1\nu1,d2,::1\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn extra_columns_become_each_buyers_placeholders() {
        let (a, cols) = read(
            p(),
            "email,user_id,device_id,ip,password\na@x,u1,d1,::1,\"p,1\"\nb@x,u2,d2,::1,p2\n",
        )
        .unwrap();
        assert_eq!(a[1].user_id, "u2");
        assert_eq!(cols.names(), ["email".to_string(), "password".to_string()]);
        assert_eq!(
            cols.row(0),
            vec![
                ("email".to_string(), "a@x".to_string()),
                ("password".to_string(), "p,1".to_string())
            ]
        );
        assert_eq!(cols.row(1)[0].1, "b@x");
        let e = parse(p(), "user_id,device_id,ip,email,email\n").unwrap_err();
        assert!(e.to_string().contains("`email` appears twice"), "{e}");
    }

    #[test]
    fn a_quoted_field_may_hold_a_comma_and_a_quote() {
        let a = parse(
            p(),
            "user_id,device_id,ip\n\"doe, jane\",\"phone \"\"x\"\"\",10.0.0.1\n",
        )
        .unwrap();
        assert_eq!(a[0].user_id, "doe, jane");
        assert_eq!(a[0].device_id, "phone \"x\"");
        assert_eq!(a[0].ip, "10.0.0.1");
    }

    #[test]
    fn a_byte_order_mark_before_the_header_is_accepted() {
        let a = parse(p(), "\u{feff}user_id,device_id,ip\nu1,d1,::1\n").unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].user_id, "u1");
        let e = parse(p(), "\u{feff}user_id,device_id,ip\nu1,d1,::1\nu2,,::1\n").unwrap_err();
        assert_eq!(e.line, Some(3), "lines still count from the top: {e}");
        assert!(e.to_string().contains("device_id"), "{e}");
    }

    #[test]
    fn too_few_rows_for_the_plan_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("b.csv");
        std::fs::write(&f, "user_id,device_id,ip\nu1,d1,::1\n").unwrap();
        let s = crate::traffic::Scenario::parse(
            "name = \"t\"\n[item]\nstock = 1\n[buyers]\ncount = 2\narrival = \"uniform\"\nwindow_s = 1\n",
        )
        .unwrap();
        let mut plan = crate::traffic::schedule::build(&s);
        let e = apply(&f, &mut plan).unwrap_err();
        assert!(
            e.to_string()
                .contains("1 buyers in the file, but the scenario plans 2"),
            "{e}"
        );
        std::fs::write(&f, "user_id,device_id,ip\nu1,d1,::1\nu2,d2,10.1.1.1\n").unwrap();
        apply(&f, &mut plan).unwrap();
        assert_eq!(plan.get(1).user_id, "u2");
        assert_eq!(plan.get(1).ip, "10.1.1.1");
    }

    #[test]
    fn only_the_rows_the_plan_needs_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("b.csv");
        // Two good rows, then what a reader of the whole file would choke on.
        let mut text = String::from("user_id,device_id,ip,password\nu1,d1,::1,p1\nu2,d2,::1,p2\n");
        text.push_str("u3,d3,not-an-ip,p3\n");
        text.push_str(&"x,".repeat(100_000));
        std::fs::write(&f, text).unwrap();
        let s = crate::traffic::Scenario::parse(
            "name = \"t\"\n[item]\nstock = 1\n[buyers]\ncount = 2\narrival = \"uniform\"\nwindow_s = 1\n",
        )
        .unwrap();
        let mut plan = crate::traffic::schedule::build(&s);
        let columns = apply(&f, &mut plan).unwrap();
        assert_eq!(plan.get(1).user_id, "u2");
        assert_eq!(
            columns.row(1),
            vec![("password".to_string(), "p2".to_string())]
        );
    }
}
