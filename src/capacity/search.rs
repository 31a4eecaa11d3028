//! The search over arrival rates: doubling from the start rate until the objective breaks,
//! then bisection of the bracket until it is tighter than the precision. Pure: the caller runs
//! each probe and tells the search how it went ([`Judged`]); the search names the next rate
//! or its [`Answer`].
//!
//! A probe whose objective broke while the generator was the limit (send lag over its bound,
//! or every sender held with requests waiting) is not held against the shop: it caps the
//! search like a failure, but the answer above the last rate that held is "at least".

use serde::{Deserialize, Serialize};

/// How one probe was judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "judged", rename_all = "snake_case")]
pub enum Judged {
    /// Every limit of the objective held.
    Held,
    /// A limit broke (the metric named first broke first, in the catalog's order).
    Broke { metric: String },
    /// A limit broke while the generator could not send on time: not the shop's failure.
    GeneratorLimit { why: String },
    /// Oversell or lost acknowledged orders: correctness broke at this rate.
    Incorrect { metric: String },
}

/// Where the search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Answer {
    /// The objective held at `lo` and broke at `hi`, the bracket tighter than the precision
    /// (`budget_ran_out`: the budget ended the bisection first).
    Bracket {
        lo: f64,
        hi: f64,
        budget_ran_out: bool,
    },
    /// The objective held at `lo` (when any rate held); above it only the generator's limit,
    /// the budget or the `--max-rate` cap was found (`shop_broke_at`: the lowest rate above
    /// the generator's limit where the objective broke anyway).
    AtLeast {
        lo: Option<f64>,
        why: Limit,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shop_broke_at: Option<f64>,
    },
    /// No rate tried held; the lowest tried was `hi`.
    Below { hi: f64 },
    /// Correctness broke at `at` (`held`: the highest rate below it where the objective held).
    Incorrect {
        at: f64,
        metric: String,
        held: Option<f64>,
    },
}

/// What stopped a search short of a bracket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "limit", rename_all = "snake_case")]
pub enum Limit {
    /// The generator could not offer `at` on time (the probe's reason).
    Generator { at: f64, why: String },
    /// The search reached `--max-rate`.
    MaxRate { at: f64 },
    /// The budget ran out before any rate broke the objective.
    Budget,
}

impl Answer {
    /// The capacity: the highest rate that held, unless correctness broke.
    pub fn capacity(&self) -> Option<f64> {
        match self {
            Answer::Bracket { lo, .. } => Some(*lo),
            Answer::AtLeast { lo, .. } => *lo,
            Answer::Below { .. } | Answer::Incorrect { .. } => None,
        }
    }

    /// The bracket `[held, broke]` (either end absent when not found).
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        match self {
            Answer::Bracket { lo, hi, .. } => (Some(*lo), Some(*hi)),
            Answer::AtLeast { lo, why, .. } => (
                *lo,
                match why {
                    Limit::Generator { at, .. } => Some(*at),
                    _ => None,
                },
            ),
            Answer::Below { hi } => (None, Some(*hi)),
            Answer::Incorrect { at, held, .. } => (*held, Some(*at)),
        }
    }

    /// The answer for people: `120.0/s (bracket 120.0–130.0/s)`, `at least 80.0/s (...)`.
    pub fn describe(&self) -> String {
        let r = |v: f64| format!("{}/s", rate(v));
        match self {
            Answer::Bracket {
                lo,
                hi,
                budget_ran_out,
            } => format!(
                "{} (bracket {}–{}{})",
                r(*lo),
                rate(*lo),
                r(*hi),
                if *budget_ran_out {
                    "; the budget ran out before the precision was reached"
                } else {
                    ""
                }
            ),
            Answer::AtLeast {
                lo,
                why,
                shop_broke_at,
            } => {
                let held = lo.map_or("no rate held yet".to_string(), |v| {
                    format!("at least {}", r(v))
                });
                let why = match why {
                    Limit::Generator { at, why } => {
                        format!("generator limit at {}: {why}", r(*at))
                    }
                    Limit::MaxRate { at } => format!("--max-rate {} reached", r(*at)),
                    Limit::Budget => "the budget ran out before the objective broke".to_string(),
                };
                let broke = shop_broke_at.map_or(String::new(), |b| {
                    format!("; the objective broke at {}", r(b))
                });
                format!("{held} ({why}{broke})")
            }
            Answer::Below { hi } => format!("below {} (the lowest rate tried broke)", r(*hi)),
            Answer::Incorrect { at, metric, held } => format!(
                "CORRECTNESS BROKE at {}: {metric}{}",
                r(*at),
                held.map_or(String::new(), |h| format!(
                    " (the objective held at {})",
                    r(h)
                ))
            ),
        }
    }
}

/// A rate for people: `12.5`, `120`.
pub fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The search's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The first rate probed (buyers/s).
    pub start: f64,
    /// The bracket is done when `(hi - lo) / lo` is at most this.
    pub precision: f64,
    /// The highest rate probed.
    pub max_rate: f64,
    /// Below this no rate is probed (halving stops).
    pub min_rate: f64,
}

/// The state of one strategy's search.
#[derive(Debug, Clone)]
pub struct Search {
    settings: Settings,
    /// Highest rate that held.
    held: Option<f64>,
    /// Lowest rate that broke (the shop's failure).
    broke: Option<f64>,
    /// Lowest rate the generator could not offer, and why.
    generator: Option<(f64, String)>,
    /// Correctness broke: the rate and the metric.
    incorrect: Option<(f64, String)>,
}

impl Search {
    /// A search that has probed nothing yet.
    pub fn new(settings: Settings) -> Self {
        Search {
            settings,
            held: None,
            broke: None,
            generator: None,
            incorrect: None,
        }
    }

    /// Records how the probe at `rate` was judged.
    pub fn record(&mut self, rate: f64, judged: &Judged) {
        match judged {
            Judged::Held => self.held = Some(self.held.map_or(rate, |h| h.max(rate))),
            Judged::Broke { .. } => self.broke = Some(self.broke.map_or(rate, |b| b.min(rate))),
            Judged::GeneratorLimit { why } => {
                if self.generator.as_ref().is_none_or(|(g, _)| rate < *g) {
                    self.generator = Some((rate, why.clone()));
                }
            }
            Judged::Incorrect { metric } => {
                if self.incorrect.is_none() {
                    self.incorrect = Some((rate, metric.clone()));
                }
            }
        }
    }

    /// The lowest rate the search may not go above: a failure's or the generator's.
    fn ceiling(&self) -> Option<f64> {
        let g = self.generator.as_ref().map(|(g, _)| *g);
        match (self.broke, g) {
            (Some(b), Some(g)) => Some(b.min(g)),
            (b, g) => b.or(g),
        }
    }

    /// The next rate to probe, or `None` when the search is done.
    pub fn next(&self) -> Option<f64> {
        if self.incorrect.is_some() {
            return None;
        }
        let s = &self.settings;
        match (self.held, self.ceiling()) {
            (None, None) => Some(s.start.min(s.max_rate)),
            (Some(lo), None) => (lo < s.max_rate).then(|| (lo * 2.0).min(s.max_rate)),
            (None, Some(hi)) => {
                let next = hi / 2.0;
                (next >= s.min_rate).then_some(next)
            }
            (Some(lo), Some(hi)) => {
                ((hi - lo) / lo > s.precision && hi > lo).then_some((lo + hi) / 2.0)
            }
        }
    }

    /// The answer so far; `budget_ran_out` when the budget, not the search, ended it.
    pub fn answer(&self, budget_ran_out: bool) -> Answer {
        if let Some((at, metric)) = &self.incorrect {
            return Answer::Incorrect {
                at: *at,
                metric: metric.clone(),
                held: self.held.filter(|h| h < at),
            };
        }
        let generator_caps = match (&self.generator, self.broke) {
            (Some((g, _)), Some(b)) => *g < b,
            (Some(_), None) => true,
            _ => false,
        };
        match (self.held, self.ceiling()) {
            (Some(lo), Some(_)) if generator_caps => {
                let (at, why) = self.generator.clone().unwrap_or_default();
                Answer::AtLeast {
                    lo: Some(lo),
                    why: Limit::Generator { at, why },
                    shop_broke_at: self.broke,
                }
            }
            (Some(lo), Some(hi)) => Answer::Bracket {
                lo,
                hi,
                budget_ran_out,
            },
            (lo, None) => Answer::AtLeast {
                lo,
                shop_broke_at: None,
                why: if budget_ran_out || lo.is_none() {
                    Limit::Budget
                } else {
                    Limit::MaxRate {
                        at: self.settings.max_rate,
                    }
                },
            },
            (None, Some(_)) if generator_caps => {
                let (at, why) = self.generator.clone().unwrap_or_default();
                Answer::AtLeast {
                    lo: None,
                    why: Limit::Generator { at, why },
                    shop_broke_at: self.broke,
                }
            }
            (None, Some(hi)) => Answer::Below { hi },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: Settings = Settings {
        start: 10.0,
        precision: 0.1,
        max_rate: 10_000.0,
        min_rate: 1.0,
    };

    /// Runs a search against a shop that holds up to `capacity`, whose generator cannot offer
    /// `generator` or more on time (the objective then breaks, not by the shop's fault), and
    /// that oversells from `incorrect`; returns the rates probed and the answer.
    fn search(capacity: f64, generator: f64, incorrect: f64) -> (Vec<f64>, Answer) {
        let mut s = Search::new(SETTINGS);
        let mut probed = Vec::new();
        while let Some(r) = s.next() {
            probed.push(r);
            let judged = if r >= incorrect {
                Judged::Incorrect {
                    metric: "oversell".into(),
                }
            } else if r >= generator {
                Judged::GeneratorLimit {
                    why: "send lag".into(),
                }
            } else if r <= capacity {
                Judged::Held
            } else {
                Judged::Broke {
                    metric: "p99_ms".into(),
                }
            };
            s.record(r, &judged);
            assert!(probed.len() < 50, "the search ends");
        }
        (probed, s.answer(false))
    }

    #[test]
    fn doubling_then_bisection_brackets_the_capacity_within_the_precision() {
        let (probed, answer) = search(100.0, f64::INFINITY, f64::INFINITY);
        assert_eq!(&probed[..5], &[10.0, 20.0, 40.0, 80.0, 160.0]);
        let Answer::Bracket { lo, hi, .. } = answer else {
            panic!("{answer:?}")
        };
        assert!(lo <= 100.0 && hi > 100.0, "{lo}..{hi}");
        assert!((hi - lo) / lo <= 0.1, "{lo}..{hi}");
    }

    #[test]
    fn a_first_rate_that_breaks_halves_until_one_holds() {
        let (probed, answer) = search(3.0, f64::INFINITY, f64::INFINITY);
        assert_eq!(&probed[..3], &[10.0, 5.0, 2.5]);
        assert!(matches!(answer, Answer::Bracket { lo, hi, .. } if lo <= 3.0 && hi > 3.0));
        let (_, answer) = search(0.1, f64::INFINITY, f64::INFINITY);
        assert!(
            matches!(answer, Answer::Below { hi } if hi < 2.0),
            "{answer:?}"
        );
    }

    #[test]
    fn a_generator_limit_below_the_shops_is_at_least() {
        let (_, answer) = search(1000.0, 50.0, f64::INFINITY);
        let Answer::AtLeast {
            lo: Some(lo),
            why: Limit::Generator { at, .. },
            ..
        } = &answer
        else {
            panic!("{answer:?}")
        };
        assert!(*lo < 50.0 && *at >= 50.0, "{answer:?}");
        assert!(
            answer.describe().starts_with("at least"),
            "{}",
            answer.describe()
        );
    }

    #[test]
    fn a_generator_limit_under_a_real_break_is_at_least_and_names_the_break() {
        let mut s = Search::new(SETTINGS);
        s.record(40.0, &Judged::Held);
        s.record(
            80.0,
            &Judged::Broke {
                metric: "error_rate".into(),
            },
        );
        assert_eq!(s.next(), Some(60.0));
        s.record(
            60.0,
            &Judged::GeneratorLimit {
                why: "send lag".into(),
            },
        );
        assert_eq!(s.next(), Some(50.0), "bisects below the generator's limit");
        let a = s.answer(false);
        assert_eq!(a.bracket(), (Some(40.0), Some(60.0)));
        assert!(
            matches!(a, Answer::AtLeast { shop_broke_at: Some(b), .. } if b == 80.0),
            "{a:?}"
        );
        assert!(
            a.describe().contains("the objective broke at 80.0/s"),
            "{}",
            a.describe()
        );
    }

    #[test]
    fn incorrect_ends_the_search_at_that_rate() {
        let (probed, answer) = search(1000.0, f64::INFINITY, 30.0);
        assert_eq!(probed, [10.0, 20.0, 40.0]);
        assert_eq!(
            answer,
            Answer::Incorrect {
                at: 40.0,
                metric: "oversell".into(),
                held: Some(20.0)
            }
        );
        assert_eq!(answer.capacity(), None);
    }

    #[test]
    fn the_max_rate_caps_the_doubling() {
        let (probed, answer) = search(f64::INFINITY, f64::INFINITY, f64::INFINITY);
        assert_eq!(probed.last(), Some(&10_000.0));
        assert!(
            matches!(answer, Answer::AtLeast { lo: Some(l), why: Limit::MaxRate { .. }, .. } if l == 10_000.0)
        );
    }
}
