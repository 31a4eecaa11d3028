//! A query that only reads: the check every user-given SQL (the oracle's, the order rows',
//! a watched gauge's) passes before it is sent, so a mistake is named in the user's terms (a
//! DELETE is "a DELETE", not a server error). What keeps the query from writing is the server:
//! it runs as a role that can only read, in a read-only transaction (`guard::Reader`).

/// MariaDB's and MySQL's clauses that write a file on the server, refused before anything is
/// sent (they are syntax: no escape spells them another way). This is not what keeps the
/// user's SQL from writing: the server is, by the role the query runs as
/// (`guard::Reader`). A word list cannot be that: PostgreSQL's `U&"lo\005Fexport"` names
/// `lo_export` without its letters.
const REFUSED_WORDS: [&str; 2] = ["outfile", "dumpfile"];

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
