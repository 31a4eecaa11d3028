//! Durations a scenario may write with their unit beside the older fields whose name carries
//! it: `window = "60s"` or `window_s = 60`, `think = ["0ms", "2s"]` or `think_ms = [0, 2000]`.
//! One of the two per field; the written one is turned into the older field as the file is
//! read, so the rest of the code (and `report.json`) keeps the older keys.

use super::validate::{bad, FieldError};
use super::Scenario;
use crate::duration::Written;

/// The older seconds field when the file does not give it (filled in here).
pub(super) fn unset() -> f64 {
    f64::NAN
}

/// The older milliseconds field when the file does not give it.
pub(super) fn unset_ms() -> u64 {
    u64::MAX
}

/// The older milliseconds range when the file does not give it.
pub(super) fn unset_range() -> [u64; 2] {
    [u64::MAX; 2]
}

/// What "one of the two" says when both are given.
const ONCE: &str = "given once: with its unit (`window = \"60s\"`) or in the older field \
                    whose name carries the unit (`window_s = 60`), not both";

/// Seconds: `old` from `new` (or `default`); both given is refused under `field`.
fn seconds(
    field: &'static str,
    old: &mut f64,
    new: Option<Written>,
    default: Option<f64>,
) -> Result<(), FieldError> {
    match (old.is_nan(), new, default) {
        (false, Some(w), _) => bad(field, ONCE, crate::duration::shown(w.0)),
        (true, Some(w), _) => {
            *old = w.0.as_secs_f64();
            Ok(())
        }
        (true, None, Some(d)) => {
            *old = d;
            Ok(())
        }
        (true, None, None) => bad(
            field,
            "given: a duration with its unit, e.g. \"60s\" (or the older seconds field)",
            "nothing",
        ),
        (false, None, _) => Ok(()),
    }
}

/// Milliseconds: `old` from `new`, else `default`; both given is refused under `field`.
fn millis(
    field: &'static str,
    old: &mut u64,
    new: Option<Written>,
    default: u64,
) -> Result<(), FieldError> {
    match (*old == u64::MAX, new) {
        (false, Some(w)) => bad(field, ONCE, crate::duration::shown(w.0)),
        (true, Some(w)) => {
            *old = ms(w);
            Ok(())
        }
        (true, None) => {
            *old = default;
            Ok(())
        }
        (false, None) => Ok(()),
    }
}

/// A milliseconds range: `old` from `new`, else `default`.
fn range(
    field: &'static str,
    old: &mut [u64; 2],
    new: Option<[Written; 2]>,
    default: [u64; 2],
) -> Result<(), FieldError> {
    match (*old == [u64::MAX; 2], new) {
        (false, Some(w)) => bad(
            field,
            ONCE,
            format!("{:?}", w.map(|d| crate::duration::shown(d.0))),
        ),
        (true, Some(w)) => {
            *old = w.map(ms);
            Ok(())
        }
        (true, None) => {
            *old = default;
            Ok(())
        }
        (false, None) => Ok(()),
    }
}

/// Whole milliseconds, rounded (a written `1.5ms` is 2 ms: the schedule draws whole ms).
fn ms(w: Written) -> u64 {
    u64::try_from(w.0.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

impl Scenario {
    /// Every duration written with its unit turned into its older field; defaults filled in.
    pub(super) fn resolve_units(&mut self) -> Result<(), FieldError> {
        let b = &mut self.buyers;
        seconds("buyers.window", &mut b.window_s, b.window, None)?;
        seconds("buyers.burst", &mut b.burst_s, b.burst, Some(5.0))?;
        if let Some(w) = &mut self.second_wave {
            seconds("second_wave.at", &mut w.at_s, w.at, None)?;
            seconds("second_wave.window", &mut w.window_s, w.window, None)?;
        }
        let c = &mut self.client;
        millis("client.timeout", &mut c.timeout_ms, c.timeout, 10_000)?;
        let think = super::BrowseSpec::default().think_ms;
        range(
            "browse.think",
            &mut self.browse.think_ms,
            self.browse.think,
            think,
        )?;
        let interval = super::BotsSpec::default().interval_ms;
        range(
            "bots.interval",
            &mut self.bots.interval_ms,
            self.bots.interval,
            interval,
        )?;
        let think = super::AfterOrderSpec::default().think_ms;
        let a = &mut self.after_order;
        range("after_order.think", &mut a.think_ms, a.think, think)
    }

    /// Every `[[faults]]` entry's `at`/`duration` into `at_s`/`duration_ms`.
    pub(super) fn resolve_fault_units(&mut self) -> Result<(), crate::nemesis::SpecError> {
        for (i, f) in self.faults.iter_mut().enumerate() {
            f.resolve_units()
                .map_err(|e| e.under(&format!("faults[{i}]")))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::traffic::Scenario;

    const HEAD: &str = "name = \"t\"\n[item]\nstock = 5\n";

    #[test]
    fn a_duration_with_its_unit_is_the_older_field_and_fractions_are_kept() {
        let s = Scenario::parse(&format!(
            "{HEAD}[buyers]\ncount = 10\narrival = \"burst\"\nwindow = \"2.5s\"\nburst = \"500ms\"\n\
             [browse]\nview_share = 0.5\nthink = [\"0ms\", \"1.5s\"]\n\
             [second_wave]\ncount = 2\nat = \"20s\"\nwindow = \"1m\"\n\
             [client]\ntimeout = \"3s\"\n"
        ))
        .unwrap();
        assert_eq!((s.buyers.window_s, s.buyers.burst_s), (2.5, 0.5));
        assert_eq!(s.browse.think_ms, [0, 1500]);
        let w = s.second_wave.unwrap();
        assert_eq!((w.at_s, w.window_s), (20.0, 60.0));
        assert_eq!(s.client.timeout_ms, 3000);
        assert_eq!(s.bots.interval_ms, [20, 100], "the default");
    }

    #[test]
    fn a_fault_takes_at_and_duration_with_units_or_the_older_fields() {
        let base = format!("{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\nwindow = \"3s\"\n");
        let s = Scenario::parse(&format!(
            "{base}[[faults]]\nkind = \"db-outage\"\nat = \"500ms\"\nduration = \"1.5s\"\n\
             [[faults]]\nkind = \"db-lock\"\nat_s = 1.0\n"
        ))
        .unwrap();
        assert_eq!((s.faults[0].at_s, s.faults[0].duration_ms), (0.5, 1500));
        assert_eq!((s.faults[1].at_s, s.faults[1].duration_ms), (1.0, 1000));
        let e = Scenario::parse(&format!(
            "{base}[[faults]]\nkind = \"db-lock\"\nat = \"1s\"\nat_s = 1.0\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("faults[0].at") && e.contains("not both"), "{e}");
        let e = Scenario::parse(&format!(
            "{base}[[faults]]\nkind = \"db-lock\"\nduration = 500\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("no unit"), "{e}");
    }

    #[test]
    fn the_older_fields_and_their_defaults_still_read() {
        let s = Scenario::parse(&format!(
            "{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\nwindow_s = 3.0\n[client]\ntimeout_ms = 700\n"
        ))
        .unwrap();
        assert_eq!((s.buyers.window_s, s.buyers.burst_s), (3.0, 5.0));
        assert_eq!(s.client.timeout_ms, 700);
    }

    #[test]
    fn both_spellings_a_bare_number_or_none_are_refused_naming_the_field() {
        let both = format!(
            "{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\nwindow = \"3s\"\nwindow_s = 3\n"
        );
        let e = Scenario::parse(&both).unwrap_err().to_string();
        assert!(e.contains("buyers.window") && e.contains("not both"), "{e}");
        let bare = format!("{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\nwindow = 3\n");
        let e = Scenario::parse(&bare).unwrap_err().to_string();
        assert!(e.contains("no unit") && e.contains("\"3s\""), "{e}");
        let none = format!("{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\n");
        let e = Scenario::parse(&none).unwrap_err().to_string();
        assert!(e.contains("buyers.window") && e.contains("60s"), "{e}");
        let negative =
            format!("{HEAD}[buyers]\ncount = 10\narrival = \"uniform\"\nwindow = \"-3s\"\n");
        let e = Scenario::parse(&negative).unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
    }
}
