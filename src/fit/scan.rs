//! One pass over the log: every line read ([`super::lines`]) and parsed
//! ([`super::parse::Reader`]), the matched requests handed on, the rest counted: blank lines,
//! requests no route matched (a bounded sample of them, for the "no order route" error), and
//! bad lines, up to `--max-bad-lines`.

use super::lines::{self, Line, MAX_LINE};
use super::parse::{LineError, Parsed, Reader, Request};
use std::collections::HashMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// How many distinct unmatched requests are counted (later new ones are only totalled).
const SAMPLE_KEYS: usize = 1000;
/// How many bad lines are kept to show.
const SHOWN: usize = 5;

/// What a log could not give.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{}: cannot read the log: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{}: more than --max-bad-lines {limit} lines could not be read; {}{}",
        file.display(),
        shown(first),
        hint(first)
    )]
    BadLines {
        file: PathBuf,
        limit: u64,
        first: Vec<LineError>,
    },
    #[error(
        "{}: no request matched the order route `{route}` ({lines} lines read){}; give the \
         route your shop takes orders on, e.g. --route order='POST /checkout'",
        file.display(),
        seen_list(seen)
    )]
    NoOrders {
        file: PathBuf,
        route: String,
        lines: u64,
        seen: Vec<(String, u64)>,
    },
    #[error(
        "{}: the log is empty ({}): there is nothing to fit; give the access log of the sale",
        file.display(),
        if *lines == 0 { "0 lines".to_string() } else { format!("{lines} blank lines, nothing else") }
    )]
    Empty { file: PathBuf, lines: u64 },
    #[error(
        "{}: no line reads as a {format} access log ({bad} of {lines} lines could not be read); \
         the first bad line, line {}: `{}` (field `{}`: {}){}",
        file.display(),
        first.line,
        first.text,
        first.field,
        first.problem,
        hint(std::slice::from_ref(first.as_ref()))
    )]
    NothingParsed {
        file: PathBuf,
        format: String,
        lines: u64,
        bad: u64,
        first: Box<LineError>,
    },
    #[error(
        "{}: no order attempt between the sale start ({start}) and {end}: nothing to fit",
        file.display()
    )]
    NoBuyers {
        file: PathBuf,
        start: String,
        end: String,
    },
    #[error(
        "{}: is not a regular file (a pipe?) and the default --sale-start (the first order) \
         takes a pass over the log of its own: give --sale-start, or write the log to a file",
        file.display()
    )]
    NotAFile { file: PathBuf },
    #[error(
        "the sale's arrivals span {seconds} s of the log{}, more than a scenario's window of \
         at most 3600 s: give --sale-end, or a --compress of at least {}",
        compressed(*seconds, *compress),
        (*seconds as f64 / 3600.0).ceil()
    )]
    TooLong { seconds: u64, compress: f64 },
}

fn compressed(seconds: u64, compress: f64) -> String {
    if compress == 1.0 {
        return String::new();
    }
    format!(
        " ({:.0} s compressed ×{compress})",
        seconds as f64 / compress
    )
}

fn shown(first: &[LineError]) -> String {
    let lines: Vec<String> = first.iter().map(|e| e.to_string()).collect();
    let text = first
        .first()
        .map(|e| format!(" (line {} reads `{}`)", e.line, e.text))
        .unwrap_or_default();
    format!("the first: {}{text}", lines.join("; "))
}

fn hint(first: &[LineError]) -> String {
    let Some(e) = first.first() else {
        return String::new();
    };
    let json_like = e.text.starts_with('{');
    let combined_like = e.text.contains(" - ") && e.text.contains('[') && e.text.contains('"');
    if e.problem.contains("not a JSON object") && combined_like {
        " (a combined-format log? give --format combined)".into()
    } else if e.problem.contains("not the combined format") && json_like {
        " (JSON lines? give --format json)".into()
    } else if !json_like && !combined_like {
        " (not an access log? fit reads nginx/Apache combined lines, or JSON lines with \
         --format json)"
            .into()
    } else {
        String::new()
    }
}

fn seen_list(seen: &[(String, u64)]) -> String {
    if seen.is_empty() {
        return "; no request matched any route".into();
    }
    let top: Vec<String> = seen
        .iter()
        .take(5)
        .map(|(r, n)| format!("{r} ×{n}"))
        .collect();
    format!("; the most frequent requests: {}", top.join(", "))
}

/// What one pass counted besides the requests it handed on.
#[derive(Debug, Clone, Default)]
pub struct Counted {
    pub lines: u64,
    pub blank: u64,
    pub matched: u64,
    pub bad: u64,
    /// The first bad lines.
    pub first_bad: Vec<LineError>,
    /// Requests no route matched, by `METHOD /shape`.
    pub others: HashMap<String, u64>,
    pub other_total: u64,
}

impl Counted {
    /// The unmatched requests, most frequent first.
    pub fn top_others(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self.others.iter().map(|(k, n)| (k.clone(), *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// Reads `file` once, handing each matched request to `each`; stops with
/// [`FitError::BadLines`] as soon as more than `max_bad` lines could not be read.
pub fn pass(
    file: &Path,
    reader: &Reader,
    max_bad: u64,
    mut each: impl FnMut(&Request),
) -> Result<Counted, FitError> {
    let read_err = |source| FitError::Read {
        file: file.to_path_buf(),
        source,
    };
    let f = std::fs::File::open(file).map_err(read_err)?;
    let mut r = BufReader::with_capacity(256 * 1024, f);
    let mut buf = Vec::with_capacity(4096);
    let mut c = Counted::default();
    while let Some(line) = lines::next(&mut r, &mut buf).map_err(read_err)? {
        c.lines += 1;
        let parsed = match line {
            Line::TooLong => Err(LineError {
                line: c.lines,
                field: "(line)".into(),
                problem: format!("longer than {} KiB", MAX_LINE / 1024),
                text: super::parse::shown_text(&buf),
            }),
            Line::Read => reader.line(c.lines, &buf),
        };
        match parsed {
            Ok(Parsed::Blank) => c.blank += 1,
            Ok(Parsed::Other(key)) => {
                c.other_total += 1;
                let full = c.others.len() >= SAMPLE_KEYS;
                match c.others.get_mut(&key) {
                    Some(n) => *n += 1,
                    None if !full => {
                        c.others.insert(key, 1);
                    }
                    None => {}
                }
            }
            Ok(Parsed::Request(req)) => {
                c.matched += 1;
                each(&req);
            }
            Err(e) => {
                c.bad += 1;
                if c.first_bad.len() < SHOWN {
                    c.first_bad.push(e);
                }
                if c.bad > max_bad {
                    return Err(FitError::BadLines {
                        file: file.to_path_buf(),
                        limit: max_bad,
                        first: c.first_bad,
                    });
                }
            }
        }
    }
    Ok(c)
}
