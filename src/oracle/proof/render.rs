//! A proof in one or two lines, for the terminal and the JUnit failure text (`report::proofs`
//! writes the tables of `report.md` and the timeline of `report.html`).

pub use super::orders::seconds;
use super::{Proof, ProofOrder};
use std::fmt::Write;

/// The proof in one or two lines: the claim, then the first facts (the race) or the first
/// orders it names.
pub fn line(p: &Proof) -> String {
    let mut s = format!("proof: {}", p.claim);
    if let Some(fact) = p.facts.first() {
        let _ = write!(s, "\n  {fact}");
    } else if !p.orders.is_empty() {
        let named: Vec<String> = p.orders.iter().take(3).map(short).collect();
        let more = p.orders.len().saturating_sub(3);
        let _ = write!(
            s,
            "\n  e.g. {}{}",
            named.join("; "),
            if more > 0 {
                format!("; and {more} more in report.md")
            } else {
                String::new()
            }
        );
    }
    s
}

/// An order in a few words: `1-ab12 (u-17, sent +0.401 s, acked +0.409 s, read 1)`.
fn short(o: &ProofOrder) -> String {
    let mut parts = Vec::new();
    if let Some(u) = &o.user {
        parts.push(u.clone());
    }
    if let Some(t) = o.sent_ms {
        parts.push(format!("sent +{}", seconds(t as i64)));
    }
    if let Some(t) = o.acked_ms {
        parts.push(format!("acked +{}", seconds(t as i64)));
    }
    if let Some(r) = o.stock_read {
        parts.push(format!("read stock {r}"));
    }
    format!(
        "{} ({})",
        o.id.as_deref().or(o.key.as_deref()).unwrap_or("an order"),
        parts.join(", ")
    )
}

/// The proofs for the terminal: the first of each finding (the rows' proof of an oversell
/// before the clients' of the same), at most four, then how many more the report holds.
pub fn terminal(proofs: &[Proof]) -> Vec<String> {
    let mut shown: Vec<&str> = Vec::new();
    let mut lines = Vec::new();
    for p in proofs {
        if p.findings.iter().any(|f| shown.contains(&f.as_str())) || lines.len() == 4 {
            continue;
        }
        shown.extend(p.findings.iter().map(String::as_str));
        lines.push(line(p));
    }
    if proofs.len() > lines.len() {
        lines.push(format!("({} proofs in all: report.md)", proofs.len()));
    }
    lines
}
