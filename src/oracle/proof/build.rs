//! Each failing finding's proof, from the rows the second pass kept, the clients' records and
//! the findings' own figures. A proof never claims more than its orders show: the tests
//! re-derive every one from the rows and the records (`tests/api/proofs.rs`).

use super::clients::{clients_owner, clients_peak, lost, sample};
use super::rows::{phantoms, restocks, rows_end, rows_owner, rows_peak};
use super::totals::{counts, per_key, wrong};
use super::Proof;
use crate::oracle::clients::ClientWitness;
use crate::oracle::rows::Checked;
use crate::oracle::{Evidence, Findings};

/// Every proof of `f`'s failing findings (`checked`: the order rows' findings, when the oracle
/// read rows; `w`: what the clients' records showed).
pub(in crate::oracle) fn collect(
    f: &Findings,
    e: &Evidence<'_>,
    checked: Option<&Checked>,
    w: &ClientWitness,
) -> Vec<Proof> {
    let c = e.clients;
    let mut out = Vec::new();
    if let Some(rows) = checked {
        out.extend(rows_peak(rows, e));
        out.extend(rows_end(rows, e, f));
        for (user, orders) in &rows.witnesses().owners {
            out.push(rows_owner(user, orders, e));
        }
        if f.phantom_orders > Some(0) {
            out.push(phantoms(rows, f, e.opened_ms));
        }
    }
    let c_peak = w
        .peak
        .as_ref()
        .map(|(t, held)| clients_peak(*t, held, w.untimed, e));
    let rows_proved = out.iter().any(|p| p.proves("peak_oversell"));
    out.extend(c_peak.map(|mut p| {
        if !rows_proved {
            p.findings.push("oversell".into());
        }
        p
    }));
    if let Some((s, held)) = &w.sample {
        out.push(sample(s, held, e));
    }
    for (finding, owner) in [
        ("client_duplicate_buyers", &w.user),
        ("client_duplicate_devices", &w.device),
    ] {
        if let Some((who, held)) = owner {
            out.push(clients_owner(finding, who, held, e));
        }
    }
    if f.lost_acks > Some(0) {
        out.push(lost(f, c));
    }
    out.extend(per_key(f));
    out.extend(wrong(f));
    if let Some(l) = e.restocks.as_ref().filter(|l| l.extra_restocks > 0) {
        out.push(restocks(l, e, c));
    }
    let counted: Vec<Proof> = counts(f)
        .into_iter()
        .filter(|p| !out.iter().any(|q| q.proves(&p.findings[0])))
        .collect();
    out.extend(counted);
    headline(f, &mut out);
    out.extend(remaining(f, &out));
    out
}

/// The headline's proof: the first proof of an oversell it rests on, when none names it yet.
pub(super) fn headline(f: &Findings, out: &mut [Proof]) {
    if f.oversell <= Some(0) || out.iter().any(|p| p.proves("oversell")) {
        return;
    }
    let rest = [
        "peak_oversell",
        "client_peak_oversell",
        "oversold_at_end",
        "client_oversell",
    ];
    if let Some(p) = rest
        .iter()
        .find_map(|m| out.iter().position(|p| p.proves(m)))
    {
        out[p].findings.push("oversell".into());
    }
}

/// What each correctness figure counts and where it is read, for a proof made of its figure.
const FIGURES: [(&str, &str, &str); 12] = [
    (
        "oversold_at_end",
        "units sold beyond the stock after the run settled",
        "the oracle's sold against the initial stock",
    ),
    ("oversell", "units promised beyond the stock", "the oracle"),
    (
        "duplicate_acks",
        "order ids acknowledged to more than one attempt",
        "the clients' acknowledgements (order ids and keys)",
    ),
    (
        "refused_committed",
        "orders committed for requests the shop refused",
        "the order rows' idempotency keys against the attempts' answers",
    ),
    (
        "indeterminate_committed",
        "orders committed whose clients were never told",
        "the order rows' idempotency keys against the attempts' answers",
    ),
    (
        "dead_letters",
        "stream entries the database refused, moved aside",
        "Redis's dead-letter stream",
    ),
    (
        "duplicate_devices",
        "devices holding more than the purchase limit",
        "the order rows' device ids",
    ),
    (
        "status_mismatches",
        "orders not in the state their clients were told (paid or cancelled)",
        "the order rows' statuses against the clients' pay and cancel answers",
    ),
    (
        "redis_drift",
        "Redis's stock minus the database's after reconciliation",
        "Redis and the item's row",
    ),
    (
        "reconcile_residual",
        "the residual the final reconciliation corrected",
        "the shop's reconciliation",
    ),
    (
        "undersell",
        "units left unsold while buyers were refused for reasons other than sold out",
        "the clients' answers against the stock",
    ),
    (
        "nothing_sold",
        "the item had stock and the shop acknowledged no order: the run tested nothing",
        "the clients' acknowledgements",
    ),
];

/// The value of one of [`FIGURES`] in `f`.
fn figure(f: &Findings, name: &str) -> Option<i64> {
    let n = |v: Option<u64>| v.map(|v| v as i64);
    match name {
        "oversold_at_end" => f.oversold_at_end,
        "oversell" => f.oversell,
        "duplicate_acks" => n(f.duplicate_acks),
        "refused_committed" => n(f.refused_committed),
        "indeterminate_committed" => n(f.indeterminate_committed),
        "dead_letters" => n(f.dead_letters),
        "duplicate_devices" => n(f.duplicate_devices),
        "status_mismatches" => n(f.status_mismatches),
        "redis_drift" => f.redis_drift,
        "reconcile_residual" => f.reconcile_residual,
        "undersell" => f.undersell,
        "nothing_sold" => Some(i64::from(f.nothing_sold)),
        _ => None,
    }
}

/// Every other correctness finding above 0 with no proof of its own yet: its figure and where
/// it was read, so no FAIL of the oracle goes without one.
pub(super) fn remaining(f: &Findings, out: &[Proof]) -> Vec<Proof> {
    FIGURES
        .into_iter()
        .filter_map(|(m, what, source)| Some((m, figure(f, m).filter(|v| *v != 0)?, what, source)))
        .filter(|(m, ..)| !out.iter().any(|p| p.proves(m)))
        .map(|(m, v, what, source)| Proof {
            findings: vec![m.to_string()],
            claim: format!("{v}: {what}"),
            source: source.into(),
            ..Proof::default()
        })
        .collect()
}
