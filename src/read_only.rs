//! A query that only reads: the check every user-given SQL (the oracle's, the order rows',
//! a watched gauge's) passes before it is run, on top of the read-only transaction it runs in.

/// Words that reach outside the database from a read-only query.
const REFUSED_WORDS: [&str; 3] = ["outfile", "dumpfile", "lo_export"];

/// Statements a query may start with.
const READS: [&str; 4] = ["select", "with", "values", "table"];

/// Refuses a query that is not one read, or that would write a file.
pub fn refuse(query: &str) -> Result<(), String> {
    let q = query.trim().trim_start_matches('(').trim_start();
    let first: String = q
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<String>()
        .to_ascii_lowercase();
    if !READS.contains(&first.as_str()) {
        let starts = match first.as_str() {
            "" => "it starts with no statement".to_string(),
            word => format!("it is a {}", word.to_uppercase()),
        };
        return Err(format!(
            "only SELECT is allowed (a read: a query starting with {}, no comment before it); \
             {starts}",
            READS.map(str::to_uppercase).join(", ")
        ));
    }
    let lower = query.to_ascii_lowercase();
    if let Some(w) = REFUSED_WORDS.iter().find(|w| lower.contains(*w)) {
        return Err(format!(
            "it names {}, which writes a file on the database server",
            w.to_uppercase()
        ));
    }
    Ok(())
}
