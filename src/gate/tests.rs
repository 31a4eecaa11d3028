//! Unit tests of the gate: limits in force, names taken, the verdict's policy.

mod limits_in_force {
    use super::super::*;

    #[test]
    fn flags_override_the_scenario_which_overrides_the_defaults() {
        let mut t = Thresholds::default();
        t.set("oversell", 2.0).unwrap();
        t.set("p99_ms", 300.0).unwrap();
        let flags: Vec<Override> = ["p99_ms=500", "error_rate=0.1", "p99_ms=700"]
            .iter()
            .map(|f| f.parse().unwrap())
            .collect();
        let l = limits(&t, None, &flags, false);
        let get = |m| l.iter().find(|x| x.metric == m).cloned();
        assert_eq!(get(Metric::Oversell).unwrap().value, 2.0);
        assert_eq!(get(Metric::Oversell).unwrap().origin, Origin::Scenario);
        assert_eq!(get(Metric::LostAcks).unwrap().origin, Origin::Default);
        assert_eq!(
            get(Metric::P99Ms).unwrap().value,
            700.0,
            "the last flag wins"
        );
        assert_eq!(get(Metric::ErrorRate).unwrap().origin, Origin::Flag);
        assert!(
            get(Metric::TurnedAwayBuyers).is_none(),
            "no default for turned-away buyers: sold out turns buyers away by design"
        );
        assert_eq!(get(Metric::Undersell).unwrap().value, 0.0);
        assert_eq!(get(Metric::NothingSold).unwrap().value, 0.0);
        assert_eq!(get(Metric::ClientOversell).unwrap().value, 0.0);
        assert_eq!(get(Metric::Unclassified).unwrap().value, 0.01);
        let l = limits(&t, Some(0.2), &[], false);
        let u = l.iter().find(|x| x.metric == Metric::Unclassified).unwrap();
        assert_eq!((u.value, u.origin), (0.2, Origin::Scenario));
        let l = limits(&t, None, &flags, true);
        let get = |m| l.iter().find(|x| x.metric == m).cloned();
        assert_eq!(get(Metric::Oversell).unwrap().origin, Origin::Bundled);
        assert_eq!(get(Metric::P99Ms).unwrap().origin, Origin::Flag);
    }

    #[test]
    fn gate_takes_every_name_diff_takes_and_diff_every_name_gate_takes() {
        // Both lists come from the catalog; the count guards against an empty catalog
        // passing vacuously.
        let names: Vec<(&str, Metric)> = Metric::every_name().collect();
        assert!(
            names.len() > Metric::ALL.len(),
            "names and aliases: {names:?}"
        );
        for n in ["latency_mean", "p50_ms", "db_qps_peak", "throughput"] {
            assert!(names.iter().any(|(x, _)| *x == n), "{n}");
        }
        for (name, metric) in &names {
            // A latency under its own name takes its unit; every older name a bare number.
            let one = match metric.spec().unit {
                crate::metric::Unit::Millis => "1ms",
                _ => "1",
            };
            let o: Override = format!("{name}={one}")
                .parse()
                .unwrap_or_else(|e| panic!("gate --threshold {name}=1: {e}"));
            assert_eq!(o.metric, *metric, "{name}");
            let d =
                crate::diff::DiffPlan::new("a".into(), "b".into(), 5.0, &[name.to_string()], None)
                    .unwrap_or_else(|e| panic!("diff --fail-on {name}: {e}"));
            assert_eq!(d.fail_on[0].metric, *metric, "{name}");
        }
        for name in crate::diff::metric_names() {
            assert!(crate::metric::limitable_names().contains(name), "{name}");
        }
    }

    #[test]
    fn a_throughput_limit_is_a_floor_and_the_rest_are_ceilings() {
        assert!(Metric::Throughput.within(120.0, 100.0));
        assert!(!Metric::Throughput.within(80.0, 100.0));
        assert!(Metric::MeanMs.within(80.0, 100.0));
        assert!(!Metric::MeanMs.within(120.0, 100.0));
        assert_eq!(Metric::Throughput.bound(), ">=");
        assert_eq!(Metric::Oversell.bound(), "<=");
    }

    #[test]
    fn a_mistyped_threshold_gets_a_suggestion() {
        let e = "p95_ms=3".parse::<Override>().unwrap_err().to_string();
        assert!(e.contains("(did you mean `p99`?)"), "{e}");
        let e = "latency_p95=3".parse::<Override>().unwrap_err().to_string();
        assert!(
            e.contains("(did you mean `p99`?)"),
            "an alias's metric: {e}"
        );
        let e = "xyzzy=3".parse::<Override>().unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "{e}");
    }

    #[test]
    fn a_bad_threshold_flag_names_the_allowed_ones() {
        let e = "p95_ms=3".parse::<Override>().unwrap_err().to_string();
        assert!(
            e.contains("p95_ms") && e.contains("p999") && e.contains("oversell"),
            "{e}"
        );
        assert!("oversell".parse::<Override>().is_err());
        assert!("oversell=-1".parse::<Override>().is_err());
        assert!("oversell=0.5".parse::<Override>().is_err());
        assert!("error_rate=2".parse::<Override>().is_err());
        assert!("p99_ms=0".parse::<Override>().is_err());
        assert_eq!("error_rate = 0.05".parse::<Override>().unwrap().value, 0.05);
    }
}

mod policy {
    use super::super::*;
    use crate::report::v1;

    /// A report of one run judged by a totals-only oracle: sold, stock, no order rows.
    fn totals_only() -> Report {
        let mut r = v1::read(serde_json::from_str(v1::FIXTURE).unwrap());
        r.runs.truncate(1);
        let f = &mut r.runs[0].findings;
        f.verified = true;
        (f.oversell, f.sold, f.client_oversell) = (Some(0), Some(10), Some(0));
        (f.lost_acks, f.duplicate_buyers, f.duplicate_devices) = (None, None, None);
        (f.client_duplicate_buyers, f.client_duplicate_devices) = (Some(0), Some(2));
        (f.peak_oversell, f.min_stock_seen, f.db_stock) = (None, None, Some(0));
        r
    }

    fn status(v: &Verdict, m: Metric) -> &Status {
        &v.checks
            .iter()
            .find(|c| c.limit.metric == m)
            .unwrap()
            .status
    }

    #[test]
    fn a_figure_that_passes_only_on_an_undeclared_window_is_not_verified_and_a_breach_stays_one() {
        let mut r = totals_only();
        let f = &mut r.runs[0].findings;
        f.oracle_disagreement = Some(0);
        f.unsettled.insert(
            "oracle_disagreement".into(),
            "8 acknowledged units are missing unless the shop released them: declare it".into(),
        );
        let limits = limits(&Thresholds::default(), None, &[], true);
        let v = Verdict::judge(&r, &limits, false);
        match status(&v, Metric::OracleDisagreement) {
            Status::NotVerified(why) => assert!(why.contains("declare it"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(!v.passed(), "never a pass with 0");
        // A figure that proves a breach on its own is a breach, declared or not.
        r.runs[0].findings.oracle_disagreement = Some(3);
        let v = Verdict::judge(&r, &limits, false);
        assert_eq!(status(&v, Metric::OracleDisagreement), &Status::Breached);
    }

    #[test]
    fn a_default_or_bundled_limit_the_oracle_cannot_measure_is_listed_not_required() {
        let r = totals_only();
        for bundled in [false, true] {
            let v = Verdict::judge(
                &r,
                &limits(&Thresholds::default(), None, &[], bundled),
                false,
            );
            assert!(matches!(
                status(&v, Metric::LostAcks),
                Status::NotRequired(_)
            ));
            assert!(v
                .render()
                .contains("lost_acks: not required (default limit)"));
            assert_eq!(v.unverified(), 0, "{}", v.render());
        }
        let mut t = Thresholds::default();
        t.set("lost_acks", 0.0).unwrap();
        let v = Verdict::judge(&r, &limits(&t, None, &[], true), false);
        let lost = v.checks.iter().find(|c| c.limit.metric == Metric::LostAcks);
        assert_eq!(lost.unwrap().limit.origin, Origin::Bundled);
        assert!(matches!(
            status(&v, Metric::LostAcks),
            Status::NotRequired(_)
        ));
        assert!(v
            .markdown(&r, std::path::Path::new("."))
            .contains(NOT_REQUIRED));
    }

    #[test]
    fn a_limit_the_user_wrote_and_the_run_cannot_measure_fails_as_not_verified() {
        let mut r = totals_only();
        r.runs[0].findings.client_duplicate_devices = Some(0);
        let flag: Override = "lost_acks=0".parse().unwrap();
        let v = Verdict::judge(
            &r,
            &limits(&Thresholds::default(), None, &[flag], false),
            false,
        );
        assert!(matches!(
            status(&v, Metric::LostAcks),
            Status::NotVerified(_)
        ));
        assert!(!v.passed());
        let mut t = Thresholds::default();
        t.set("lost_acks", 0.0).unwrap();
        let v = Verdict::judge(&r, &limits(&t, None, &[], false), true);
        assert!(matches!(
            status(&v, Metric::LostAcks),
            Status::NotVerified(_)
        ));
        assert!(v.passed(), "allowed by --allow-unverified: {}", v.render());
    }

    #[test]
    fn duplicate_buyers_fall_back_to_the_clients_records_without_order_rows() {
        let r = totals_only();
        let v = Verdict::judge(&r, &limits(&Thresholds::default(), None, &[], true), false);
        let c = |m| v.checks.iter().find(|c| c.limit.metric == m).unwrap();
        assert_eq!(c(Metric::DuplicateBuyers).status, Status::Passed);
        assert!(c(Metric::DuplicateBuyers)
            .source
            .contains("clients' records"));
        assert_eq!(c(Metric::DuplicateDevices).status, Status::Breached);
        assert_eq!(c(Metric::DuplicateDevices).measured, Some(2.0));
    }

    #[test]
    fn without_any_oracle_an_unmeasured_default_limit_still_fails() {
        let mut r = totals_only();
        r.runs[0].findings.verified = false;
        let v = Verdict::judge(&r, &limits(&Thresholds::default(), None, &[], true), false);
        assert!(matches!(
            status(&v, Metric::LostAcks),
            Status::NotVerified(_)
        ));
        assert!(!v.passed());
    }
}

mod terminal_width {
    use super::super::*;
    use crate::report::table::{width, TERMINAL_WIDTH};
    use crate::report::v1;

    /// A gate over every strategy on both backends, the bundled limits and flags with the
    /// catalog's longest names, one run with no oracle (its checks not verified or not
    /// required) and one generator-bound.
    fn big_verdict() -> Verdict {
        let mut r = v1::every_strategy(1, |_, _| {});
        r.runs[3].findings.verified = false;
        r.runs[5].send_lag = r.runs[5]
            .requests
            .values()
            .next()
            .map(|k| k.latency.clone());
        r.runs[3].findings.lost_acks = None;
        let flags: Vec<Override> = [
            "client_duplicate_devices=0",
            "duplicate_orders_per_key=0",
            "indeterminate_committed=0",
            "throughput=100000",
            "p999_ms=2500",
            "send_lag_p99_ms=0.001",
        ]
        .iter()
        .map(|f| f.parse().unwrap())
        .collect();
        let mut t = Thresholds::default();
        t.set("p99_ms", 12345.0).unwrap();
        t.set("error_rate", 0.05).unwrap();
        Verdict::judge(&r, &limits(&t, Some(0.2), &flags, true), true)
    }

    #[test]
    fn the_default_verdict_fits_a_hundred_columns_and_wide_keeps_every_column() {
        let v = big_verdict();
        let runs = 2 * crate::inventory::Strategy::all().len();
        assert_eq!(v.checks.len() % runs, 0, "{runs} runs");
        assert!(
            v.breached() > 0 && v.not_required() + v.unverified() > 0,
            "every kind of row"
        );
        let narrow = v.render_for(false);
        print!("{narrow}");
        for line in narrow.lines() {
            assert!(line.chars().count() <= TERMINAL_WIDTH, "{line:?}");
        }
        for (run, check) in [
            ("redis-buckets/mysql", "client_duplicate_devices"),
            ("naive/postgres", "duplicate_orders_per_key"),
        ] {
            assert!(narrow.lines().any(|l| l == run), "{run} heads its checks");
            assert!(narrow.contains(check), "{check}");
        }
        assert!(narrow.contains("(bundled scenario)") || narrow.contains("(bundled)"));
        assert!(narrow.contains("FAIL (generator-bound)"), "{narrow}");
        assert!(
            narrow.contains("not required (default limit)"),
            "the reason is a note"
        );
        let wide = v.render_for(true);
        assert!(width(&wide) > TERMINAL_WIDTH, "{wide}");
        assert!(
            wide.contains(NOT_REQUIRED),
            "the full result in the wide table"
        );
        assert!(wide.lines().nth(1).unwrap().starts_with("run "), "{wide}");
        assert_eq!(
            narrow.matches("FAIL").count(),
            wide.matches("FAIL").count(),
            "the same checks, only laid out narrower"
        );
    }
}
