//! The classes the oracle's findings show: each experiment's run judged as `gate` judges it
//! (the catalog's default limits, [`Verdict::judge`]), every breached check given to the class
//! the experiment isolates, with the check's proof.
//!
//! Which experiment a finding is read from decides its class: oversell in the rush (no
//! release) is the order path's race; conservation, restock and state findings in
//! `cancel-after-pay` are that script's, in `restock` the releases'. Oversell and conservation
//! in the release experiments count only when the order path itself did not oversell (a race
//! breaks them too); the restock ledger, the clients' answers and status mismatches always
//! count.

use super::battery::Kind;
use super::class::Class;
use super::row::{intensity, Figure, Row};
use super::run::{Done, Ran};
use crate::gate::{self, Check, Metric, Status, Verdict};
use crate::runner::Levers;
use std::path::Path;

/// The order path's oversell figures.
const OVERSELL: [Metric; 7] = [
    Metric::Oversell,
    Metric::PeakOversell,
    Metric::OversoldAtEnd,
    Metric::ClientOversell,
    Metric::ClientPeakOversell,
    Metric::StockPeakOversell,
    Metric::StockBelowZero,
];
/// What a release path that restocks wrongly breaks besides oversell (read only when the
/// order path did not oversell: a race breaks them too).
const CONSERVATION: [Metric; 3] = [
    Metric::ConservationDrift,
    Metric::StockAboveInitial,
    Metric::RedisDrift,
];
/// What only a wrong release or state transition breaks.
const STATE: [Metric; 3] = [
    Metric::RestockMismatch,
    Metric::StatusMismatches,
    Metric::WrongAnswers,
];
const LIMIT: [Metric; 4] = [
    Metric::DuplicateBuyers,
    Metric::DuplicateDevices,
    Metric::ClientDuplicateBuyers,
    Metric::ClientDuplicateDevices,
];
const KEY: [Metric; 2] = [Metric::DuplicateOrdersPerKey, Metric::DuplicateAcks];
const LOST: [Metric; 2] = [Metric::LostAcks, Metric::OracleDisagreement];
const PHANTOM: [Metric; 2] = [Metric::PhantomOrders, Metric::RefusedCommitted];
const RESIDUAL: [Metric; 1] = [Metric::ReconcileResidual];

/// The metrics that show `class`, and the experiments it is read in.
fn sources(class: Class, race: bool) -> (Vec<Metric>, &'static [Kind]) {
    let release = |extra: bool| {
        let mut m = STATE.to_vec();
        if extra {
            m.extend(OVERSELL);
            m.extend(CONSERVATION);
        }
        m
    };
    match class {
        Class::OversellRace => (OVERSELL.to_vec(), &[Kind::Rush, Kind::Adversarial]),
        Class::LimitRace => (LIMIT.to_vec(), &[Kind::Rush, Kind::Adversarial]),
        Class::DuplicateOnRetry => (KEY.to_vec(), &[Kind::Adversarial]),
        Class::LostAck => (LOST.to_vec(), &[Kind::Rush, Kind::Adversarial]),
        Class::PhantomOrder => (PHANTOM.to_vec(), &[Kind::Rush, Kind::Adversarial]),
        Class::CancelAfterPay => (release(!race), &[Kind::CancelAfterPay]),
        Class::RestockNotIdempotent => (release(!race), &[Kind::Restock]),
        Class::ReconcileResidual => (
            RESIDUAL.to_vec(),
            &[Kind::Rush, Kind::Adversarial, Kind::Restock],
        ),
        _ => (Vec::new(), &[]),
    }
}

/// Each experiment's checks: its run judged by the catalog's default limits.
pub struct Judged<'a> {
    pub done: &'a Done,
    pub checks: Vec<Check>,
}

/// Every experiment's run judged.
pub fn judge(ran: &Ran) -> Vec<Judged<'_>> {
    let limits = gate::limits(&Default::default(), None, &[], true);
    ran.done
        .iter()
        .map(|done| Judged {
            done,
            checks: Verdict::judge(&done.report, &limits, false).checks,
        })
        .collect()
}

/// Whether the order path oversold (the rush or the adversarial buyers).
pub fn race(judged: &[Judged]) -> bool {
    judged.iter().any(|j| {
        matches!(j.done.kind, Kind::Rush | Kind::Adversarial)
            && j.checks
                .iter()
                .any(|c| c.status == Status::Breached && OVERSELL.contains(&c.limit.metric))
    })
}

/// `class`'s row from the judged runs; `skipped`: why each experiment did not run.
pub fn row(
    class: Class,
    judged: &[Judged],
    skipped: &[(Kind, String)],
    dir: &Path,
    shop: &Levers,
) -> Row {
    if let Some(what) = undriven(class, shop) {
        return Row::not_testable(class, what.into());
    }
    let audited_whole = shop.audited_whole;
    let (metrics, kinds) = sources(class, race(judged));
    let driving: Vec<&Judged> = judged
        .iter()
        .filter(|j| kinds.contains(&j.done.kind))
        .collect();
    let checks = |j: &&Judged| -> Vec<Check> {
        j.checks
            .iter()
            .filter(|c| metrics.contains(&c.limit.metric))
            .cloned()
            .collect()
    };
    for j in &driving {
        let breached: Vec<Check> = checks(j)
            .into_iter()
            .filter(|c| c.status == Status::Breached)
            .collect();
        if breached.is_empty() || !attributable(class, j) {
            continue;
        }
        return found(class, j, &breached, dir);
    }
    let measured: Vec<(Kind, Check)> = driving
        .iter()
        .flat_map(|j| checks(j).into_iter().map(|c| (j.done.kind, c)))
        .filter(|(_, c)| c.status == Status::Passed)
        .collect();
    if !measured.is_empty() {
        return Row::not_found(class, tried(&driving, &measured));
    }
    let reasons: Vec<String> = driving
        .iter()
        .flat_map(checks)
        .filter_map(|c| match c.status {
            Status::NotVerified(w) | Status::NotRequired(w) => Some(w),
            _ => None,
        })
        .collect();
    let why = untestable(class, &driving, kinds, skipped, audited_whole);
    match reasons.first() {
        Some(w) if !audited_whole && !driving.is_empty() => {
            Row::not_testable(class, format!("{why} (the oracle: {w})"))
        }
        _ => Row::not_testable(class, why),
    }
}

/// What the mapping must carry for the battery to drive `class` at all, when it does not.
fn undriven(class: Class, shop: &Levers) -> Option<&'static str> {
    match class {
        Class::LimitRace if !shop.buyer_in_order => Some(
            "map the buyer into [target] order (a {user_id} in its path, body or headers, or a \
             [target.login]): a shop that does not know who orders cannot hold a buyer to a limit",
        ),
        Class::DuplicateOnRetry if !shop.pay => Some(
            "map [target] pay: the buyers who resend their order with its Idempotency-Key pay \
             the order they got, so without pay the resend is not sent",
        ),
        _ => None,
    }
}

/// A limit race shows as duplicate buyers; a shop that buys twice under one key makes them
/// too: they are the limit's only when there are more of them than the key's duplicates.
fn attributable(class: Class, j: &Judged) -> bool {
    if class != Class::LimitRace {
        return true;
    }
    let value = |ms: &[Metric]| {
        j.checks
            .iter()
            .filter(|c| ms.contains(&c.limit.metric))
            .filter_map(|c| c.measured)
            .fold(0.0, f64::max)
    };
    value(&LIMIT) > value(&KEY)
}

fn found(class: Class, j: &Judged, breached: &[Check], dir: &Path) -> Row {
    let said: Vec<String> = breached
        .iter()
        .map(|c| format!("{} = {}", c.limit.name(), c.measured_text()))
        .collect();
    let mut row = Row::found(
        class,
        j.done,
        dir,
        format!(
            "{} in the {} experiment",
            said.join(", "),
            j.done.kind.as_str()
        ),
    );
    row.proof = breached.iter().find_map(|c| c.proof.clone());
    row.figures = figures(class, breached);
    row
}

/// The class's headline figures: units oversold at the peak for oversell, the counts
/// otherwise.
fn figures(class: Class, breached: &[Check]) -> Vec<Figure> {
    if class == Class::OversellRace {
        let peak = breached
            .iter()
            .filter(|c| c.limit.metric != Metric::StockBelowZero)
            .filter_map(|c| c.measured.map(|v| (v, c)))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((v, c)) = peak {
            return vec![Figure::new(
                "units oversold at the peak",
                v,
                c.limit.metric.format(v),
                format!("{} ({})", c.limit.name(), c.source),
            )];
        }
    }
    breached
        .iter()
        .filter_map(|c| {
            let v = c.measured?;
            Some(Figure::new(
                c.limit.metric.spec().label,
                v,
                c.limit.metric.format(v),
                format!("{} ({})", c.limit.name(), c.source),
            ))
        })
        .collect()
}

/// What was tried: each experiment's intensity, and the figures measured at 0.
fn tried(driving: &[&Judged], measured: &[(Kind, Check)]) -> String {
    let runs: Vec<String> = driving.iter().map(|j| intensity(j.done)).collect();
    let mut names: Vec<String> = Vec::new();
    for (_, c) in measured {
        let n = format!("{} = {}", c.limit.name(), c.measured_text());
        if !names.contains(&n) {
            names.push(n);
        }
    }
    format!("tried {}; measured {}", runs.join("; "), names.join(", "))
}

/// What to declare or map: why the experiments did not run, or why their oracle could not
/// measure the class.
fn untestable(
    class: Class,
    driving: &[&Judged],
    kinds: &[Kind],
    skipped: &[(Kind, String)],
    audited_whole: bool,
) -> String {
    if driving.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .filter(|(k, _)| kinds.contains(k))
            .map(|(k, w)| format!("{} skipped: {w}", k.as_str()))
            .collect();
        if !why.is_empty() {
            return why.join("; ");
        }
    }
    let advice = match class {
        Class::LostAck | Class::PhantomOrder => {
            "give an oracle that reads the shop's order rows (--oracle-sql with --orders-query) \
             and map [target] order_id_field, so each acknowledged order can be looked up"
        }
        Class::LimitRace => {
            "map [target] order_id_field (or give --orders-query) so the orders each buyer holds \
             can be counted"
        }
        Class::DuplicateOnRetry => {
            "map [target] pay (the same-key buyers pay the order they got) and order_id_field, \
             or give --orders-query with an idempotency_key column"
        }
        Class::ReconcileResidual if audited_whole => {
            "this strategy keeps its stock in the database alone: there is no cache to reconcile"
        }
        Class::ReconcileResidual => {
            "a shop with a cache in front of its database: declare [watch.reconcile_residual] \
             reading the difference between the two after the sale"
        }
        _ => {
            "give an oracle that reads the stock left (--stock-query, --stock-field) and the \
             order rows (--orders-query), so releases can be checked against the stock"
        }
    };
    advice.to_string()
}
