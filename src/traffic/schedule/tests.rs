use super::*;
use crate::traffic::adversary::Script;
use crate::traffic::scenario::Scenario;

/// Every buyer of `s`, drawn.
fn all(s: &Schedule) -> Vec<BuyerPlan> {
    s.iter().collect()
}

fn scenario(shape: &str) -> Scenario {
    Scenario::parse(&format!(
        r#"
name = "t"
[item]
stock = 10
[buyers]
count = 2000
seed = 7
arrival = "{shape}"
window_s = 10
burst_s = 2
burst_share = 0.75
[bots]
share = 0.1
resubmits = 3
[after_order]
pay = 0.5
cancel = 0.25
abandon = 0.25
"#
    ))
    .unwrap()
}

#[test]
fn the_same_seed_gives_the_same_schedule() {
    let a = all(&build(&scenario("burst")));
    let b = all(&build(&scenario("burst")));
    assert_eq!(a, b);
    let mut other = scenario("burst");
    other.buyers.seed = 8;
    assert_ne!(all(&build(&other)), a);
}

#[test]
fn a_burst_puts_its_share_in_the_opening_seconds() {
    let plan = all(&build(&scenario("burst")));
    let early = plan
        .iter()
        .filter(|b| b.arrival < Duration::from_secs(2))
        .count();
    assert_eq!(early, 1500, "75% of 2000 arrive within burst_s");
    assert!(plan.iter().all(|b| b.arrival < Duration::from_secs(10)));
    assert!(
        plan.windows(2).all(|w| w[0].arrival <= w[1].arrival),
        "sorted"
    );
}

#[test]
fn uniform_arrivals_spread_evenly_over_the_window() {
    let per = build(&scenario("uniform")).per_second();
    assert_eq!(per.len(), 10);
    for (s, n) in per.iter().enumerate() {
        assert!(
            (140..=260).contains(n),
            "second {s}: {n} arrivals, expected about 200"
        );
    }
}

#[test]
fn a_ramp_rises_through_the_window() {
    let per = build(&scenario("ramp")).per_second();
    // f(t) = 2t/W²: second k holds (2k+1)/100 of the buyers.
    assert!(per[0] < 60, "{per:?}");
    assert!(per[9] > 320, "{per:?}");
    assert!(per.windows(3).all(|w| w[0] < w[2]), "{per:?}");
}

#[test]
fn bots_and_after_order_mix_follow_the_scenario() {
    let plan = all(&build(&scenario("uniform")));
    let bots = plan.iter().filter(|b| b.bot).count();
    assert!((140..=260).contains(&bots), "{bots} bots of 2000 at 10%");
    assert!(plan
        .iter()
        .filter(|b| b.bot)
        .all(|b| b.resubmits.len() == 3 && b.views.is_empty()));
    let pays = plan
        .iter()
        .filter(|b| matches!(b.after, AfterOrder::Pay { .. }))
        .count();
    assert!((900..=1100).contains(&pays), "{pays}");
}

#[test]
fn adversarial_shares_give_each_script_its_buyers_the_same_way_every_time() {
    let plain = all(&build(&scenario("uniform")));
    let mut s = scenario("uniform");
    s.adversarial = crate::traffic::scenario::AdversarialSpec {
        cancel_after_pay: 0.1,
        cancel_twice: 0.1,
        pay_twice: 0.1,
        pay_after_cancel: 0.1,
        pay_and_cancel: 0.1,
        at_timeout: 0.1,
        resend_same_key: 0.1,
    };
    s.shop.payment_timeout = std::time::Duration::from_secs(3);
    let plan = all(&build(&s));
    assert_eq!(plan, all(&build(&s)), "seeded");
    for script in Script::ALL {
        let n = plan
            .iter()
            .filter(|b| matches!(b.after, AfterOrder::Script { script: x, .. } if x == script))
            .count();
        assert!((140..=260).contains(&n), "{script:?}: {n} of 2000 at 10%");
    }
    let scripted = plan
        .iter()
        .filter(|b| matches!(b.after, AfterOrder::Script { .. }))
        .count();
    assert!(
        (1300..=1500).contains(&scripted),
        "{scripted}: 70% scripted"
    );
    for b in &plan {
        if let AfterOrder::Script {
            script: Script::AtTimeout,
            think,
        } = b.after
        {
            assert!(
                (Duration::from_millis(2750)..=Duration::from_millis(3250)).contains(&think),
                "at the 3 s window's end: {think:?}"
            );
        }
    }
    // Everything else about each buyer is the plan without [adversarial].
    for (a, b) in plain.iter().zip(&plan) {
        assert_eq!(
            (a.arrival, &a.views, a.bot, &a.ip),
            (b.arrival, &b.views, b.bot, &b.ip)
        );
        if !matches!(b.after, AfterOrder::Script { .. }) {
            assert_eq!(a.after, b.after);
        }
    }
}

#[test]
fn a_buyer_is_the_same_whenever_and_wherever_it_is_drawn() {
    let s = scenario("burst");
    let whole = build(&s);
    let forwards = all(&whole);
    let backwards: Vec<BuyerPlan> = (0..whole.len()).rev().map(|k| whole.get(k)).collect();
    assert!(
        forwards.iter().eq(backwards.iter().rev()),
        "drawn in any order"
    );
    for (k, b) in forwards.iter().enumerate() {
        assert_eq!(b.index, k, "the index order is the arrival order");
    }
    // Three shards' shares: every third buyer, each the very buyer of the whole schedule.
    let mut seen = 0;
    for shard in 0..3 {
        let part = whole.share(shard, 3);
        assert_eq!(part.len(), (2000 - shard).div_ceil(3));
        for b in part.iter() {
            assert_eq!(b.index % 3, shard);
            assert_eq!(b, forwards[b.index]);
            seen += 1;
        }
        // A share of a share: every ninth.
        let ninth = part.share(1, 3);
        assert!(ninth.indexes().all(|i| i % 9 == shard + 3));
    }
    assert_eq!(seen, 2000, "the shares cover every buyer once");
    assert_eq!(whole.share(7, 3000).len(), 1, "buyer 7 alone");
    assert_eq!(
        whole.share(2500, 3000).len(),
        0,
        "a shard past the last buyer has none"
    );
}

#[test]
fn a_schedule_holds_eight_bytes_a_buyer_before_the_sale() {
    let mut s = scenario("uniform");
    s.buyers.count = 100_000;
    s.browse.view_share = 1.0;
    let plan = build(&s);
    assert_eq!(plan.len(), 100_000);
    assert_eq!(plan.stored_bytes(), 800_000);
    // Drawn when asked for: every person views (view_share 1), no bot does.
    assert!(plan.iter().take(100).all(|b| b.bot == b.views.is_empty()));
}

#[test]
fn a_second_wave_arrives_after_its_start_and_is_told_apart() {
    let mut s = scenario("uniform");
    s.second_wave = Some(crate::traffic::scenario::WaveSpec {
        at_s: 20.0,
        at: None,
        count: 500,
        window_s: 5.0,
        window: None,
    });
    let plan = all(&build(&s));
    assert_eq!(plan.len(), 2500);
    assert!(
        plan.windows(2).all(|w| w[0].arrival <= w[1].arrival),
        "sorted"
    );
    let second: Vec<&BuyerPlan> = plan.iter().filter(|b| b.wave == 2).collect();
    assert_eq!(second.len(), 500);
    assert!(second
        .iter()
        .all(|b| (Duration::from_secs(20)..Duration::from_secs(25)).contains(&b.arrival)));
    assert!(plan
        .iter()
        .filter(|b| b.wave == 1)
        .all(|b| b.arrival < Duration::from_secs(10)));
}

#[test]
fn a_renamed_buyer_keeps_its_draws_and_takes_its_accounts_ids() {
    let s = scenario("uniform");
    let seeded = build(&s);
    let mut renamed = seeded.clone();
    renamed.rename(vec![Names {
        user_id: "alice".into(),
        device_id: "phone-1".into(),
        ip: "10.9.9.9".into(),
    }]);
    let (a, b) = (seeded.get(0), renamed.get(0));
    assert_eq!(
        (
            b.user_id.to_string(),
            b.device_id.to_string(),
            b.ip.to_string()
        ),
        ("alice".into(), "phone-1".into(), "10.9.9.9".into())
    );
    assert_eq!(
        (a.arrival, &a.views, a.bot, a.after),
        (b.arrival, &b.views, b.bot, b.after)
    );
    assert_eq!(
        renamed.get(1),
        seeded.get(1),
        "past the accounts: the seeded ids"
    );
}

fn traced(counts: &[u32], count: u32, window_s: f64, seed: u64) -> Scenario {
    let trace: Vec<String> = counts.iter().map(|n| n.to_string()).collect();
    Scenario::parse(&format!(
        "name = \"t\"\n[item]\nstock = 10\n[buyers]\ncount = {count}\nseed = {seed}\n\
         arrival = \"trace\"\nwindow_s = {window_s}\ntrace = [{}]\n[bots]\nshare = 0.1\n\
         resubmits = 2\n",
        trace.join(", ")
    ))
    .unwrap()
}

#[test]
fn a_trace_replays_its_counts_per_second_exactly_and_the_same_seed_the_same_instants() {
    let counts = [0, 250, 1200, 7, 0, 0, 31, 1, 0, 90, 3];
    let total: u32 = counts.iter().sum();
    let s = traced(&counts, total, counts.len() as f64, 5);
    let plan = build(&s);
    assert_eq!(plan.len(), total as usize);
    let mut per = plan.per_second();
    per.resize(counts.len(), 0);
    assert_eq!(per, counts, "each second holds exactly its count");
    let again = build(&traced(&counts, total, counts.len() as f64, 5));
    assert_eq!(all(&plan), all(&again), "the same seed, the same buyers");
    let other = build(&traced(&counts, total, counts.len() as f64, 6));
    assert_eq!(other.per_second()[..counts.len()], counts[..]);
    assert_ne!(
        (0..plan.len()).map(|k| plan.arrival(k)).collect::<Vec<_>>(),
        (0..other.len())
            .map(|k| other.arrival(k))
            .collect::<Vec<_>>(),
        "another seed, other instants within the seconds"
    );
}

#[test]
fn a_trace_with_another_count_or_window_keeps_its_shape() {
    let counts = [100, 300, 0, 100];
    // Twice the buyers: each interval twice its count.
    let doubled = build(&traced(&counts, 1000, 4.0, 1));
    assert_eq!(doubled.per_second(), vec![200, 600, 0, 200]);
    // The same buyers in half the time: intervals of 0.5 s.
    let fast = build(&traced(&counts, 500, 2.0, 1));
    assert_eq!(fast.per_second(), vec![400, 100]);
    let intervals: Vec<u64> = (0..fast.len())
        .map(|k| fast.arrival(k).as_millis() as u64 / 500)
        .fold(vec![0; 4], |mut v, k| {
            v[k as usize] += 1;
            v
        });
    assert_eq!(intervals, vec![100, 300, 0, 100]);
}

#[test]
fn apportion_shares_out_exactly_and_keeps_the_counts_when_they_add_up() {
    assert_eq!(apportion(10, &[1, 2, 3, 4]), vec![1, 2, 3, 4]);
    assert_eq!(apportion(30, &[1, 2, 3, 4]), vec![3, 6, 9, 12]);
    let shared = apportion(7, &[1, 1, 1]);
    assert_eq!(shared.iter().sum::<u64>(), 7);
    assert!(shared.iter().all(|n| (2..=3).contains(n)), "{shared:?}");
    assert_eq!(apportion(5, &[0, 0]), vec![0, 0]);
}
