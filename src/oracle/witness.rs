//! The order rows a proof names, collected in a second pass over the same snapshot: the first
//! pass only counts (the most units held at once and when, each user's holdings), so the rows
//! that show a finding are known only once it has ended. What the second pass keeps is bounded
//! by the finding, never by the sale: the rows held at the peak instant (at most
//! [`super::proof::LISTED`]), the holding rows at the end when more were sold than stocked
//! (as many), and the rows of a few users who hold more than the limit.

use super::proof::LISTED;
use crate::model::Order;
use std::collections::{BTreeMap, BTreeSet};

/// How many users over the limit a proof names.
pub(super) const OWNERS: usize = 3;

/// What the second pass looks for, decided from the first pass's totals.
#[derive(Debug, Default)]
pub(super) struct Wanted {
    /// The peak instant (the rows' own clock, ms) when more units were held than stocked.
    pub peak_at: Option<i64>,
    /// More units held at the end than stocked: collect the holding rows.
    pub end: bool,
    /// Users (as the rows spell them) holding more than the limit.
    pub owners: BTreeSet<String>,
    /// Users whose rows no attempt of theirs explains, and by how many rows.
    pub phantom_users: BTreeMap<String, u64>,
}

impl Wanted {
    /// Whether anything is wanted.
    pub(super) fn any(&self) -> bool {
        self.peak_at.is_some()
            || self.end
            || !self.owners.is_empty()
            || !self.phantom_users.is_empty()
    }
}

/// The rows the second pass kept.
#[derive(Debug, Clone, Default)]
pub struct Witnesses {
    /// The instant of the peak and the rows held then (at most [`LISTED`]; `peak_rows` counts
    /// them all).
    pub peak_at: Option<i64>,
    pub peak: Vec<Order>,
    pub peak_rows: u64,
    /// Rows holding stock at the end (at most [`LISTED`]; `end_rows` counts them all), when
    /// more units were sold than stocked.
    pub end: Vec<Order>,
    pub end_rows: u64,
    /// The holding rows of users over the limit, by user.
    pub owners: Vec<(String, Vec<Order>)>,
    /// Users whose rows no attempt of theirs explains: how many rows too many, and the rows
    /// no id or key explains (at most [`super::proof::EXAMPLES`] each).
    pub phantoms: Vec<(String, u64, Vec<Order>)>,
}

impl Witnesses {
    /// Keeps `o` if a wanted proof names it (`left`: neither its id nor a key explains it).
    pub(super) fn row(&mut self, want: &Wanted, o: &Order, left: bool) {
        let holds = o.status.holds_stock();
        if let Some(t) = want.peak_at {
            // Held at `t`: created by then and not released by then (a release at the same
            // millisecond comes first, as in the replay).
            let released = (!holds).then(|| o.updated_at_ms.max(o.created_at_ms));
            if o.created_at_ms <= t && released.is_none_or(|r| r > t) {
                self.peak_rows += 1;
                if self.peak.len() < LISTED {
                    self.peak.push(o.clone());
                }
            }
        }
        if want.end && holds {
            self.end_rows += 1;
            if self.end.len() < LISTED {
                self.end.push(o.clone());
            }
        }
        if let Some(n) = want.phantom_users.get(o.user_id.as_str()).filter(|_| left) {
            match self.phantoms.iter_mut().find(|(u, ..)| *u == o.user_id) {
                Some((.., rows)) if rows.len() < super::proof::EXAMPLES => rows.push(o.clone()),
                Some(_) => {}
                None => self.phantoms.push((o.user_id.clone(), *n, vec![o.clone()])),
            }
        }
        if holds && want.owners.contains(o.user_id.as_str()) {
            match self.owners.iter_mut().find(|(u, _)| *u == o.user_id) {
                Some((_, rows)) => rows.push(o.clone()),
                None => self.owners.push((o.user_id.clone(), vec![o.clone()])),
            }
        }
    }
}
