//! The generator tells its own lateness apart from the shop's: a generator that stalls shows
//! send lag (intended → actual send), not service time; a slow shop shows service time
//! (actual send → full answer), not send lag. Both fire the real traffic model at a loopback
//! test server that runs on its own runtime thread, so stalling the generator's runtime never
//! stalls the shop.

use axum::routing::post;
use axum::Router;
use oversell::testing::traffic::attack::{self, Sending};
use oversell::testing::traffic::mapping::Mapping;
use oversell::testing::traffic::recorder::{Kind, Measurements, Recorder};
use oversell::testing::traffic::schedule;
use oversell::testing::traffic::target::{Sale, Target, Targets};
use oversell::testing::traffic::Scenario;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A shop that answers every order `201` with a fresh order id after `delay`, on a runtime of
/// its own (a thread the test's runtime cannot block).
fn spawn_shop(delay: Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let next = Arc::new(AtomicU64::new(1));
            let app = Router::new().route(
                "/api/orders",
                post(move || {
                    let next = next.clone();
                    async move {
                        tokio::time::sleep(delay).await;
                        let id = next.fetch_add(1, Ordering::Relaxed);
                        (
                            axum::http::StatusCode::CREATED,
                            format!(r#"{{"order_id": "o-{id}"}}"#),
                        )
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

/// `buyers` buyers arriving uniformly over `window_s`, ordering at once and walking away.
fn scenario(buyers: u32, window_s: u32) -> Scenario {
    Scenario::parse(&format!(
        r#"
name = "generator-test"
[item]
stock = 1000000
[buyers]
count = {buyers}
arrival = "uniform"
window_s = {window_s}
seed = 11
[after_order]
pay = 0.0
cancel = 0.0
abandon = 1.0
"#
    ))
    .unwrap()
}

/// Fires `s` at `base_url`; `stall`, when set, blocks the generator's own runtime thread
/// for that long, 300 ms after the sale opens.
async fn fire(s: &Scenario, base_url: String, stall: Option<Duration>) -> Measurements {
    fire_with_goose(s, base_url, stall).await.0
}

async fn fire_with_goose(
    s: &Scenario,
    base_url: String,
    stall: Option<Duration>,
) -> (Measurements, Vec<attack::GooseCrossCheck>) {
    let plan = schedule::build(s);
    let target = Arc::new(Target::new(&base_url, Mapping::default(), Sale::of(s)));
    let sending = Sending::of(&s.client);
    let recorder = Arc::new(Recorder::new(
        Instant::now() + sending.launch_lead(plan.len()),
    ));
    if let Some(stall) = stall {
        let at = recorder.opened() + Duration::from_millis(300);
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            // Deliberately blocks the (current-thread) runtime: nobody can send meanwhile.
            std::thread::sleep(stall);
        });
    }
    let (goose, _) = attack::fire(plan, Targets::one(target), recorder.clone(), &s.client)
        .await
        .unwrap();
    (recorder.finish(), goose)
}

fn p99_ms(h: &hdrhistogram::Histogram<u64>) -> f64 {
    h.value_at_quantile(0.99) as f64 / 1000.0
}

#[tokio::test(flavor = "current_thread")]
async fn a_stalled_generator_shows_send_lag_not_service_time() {
    // Arrange: a fast shop, 200 buyers over 1 s, and a 250 ms stall of the generator.
    let base = spawn_shop(Duration::ZERO);
    let s = scenario(200, 1);

    // Act
    let m = fire(&s, base, Some(Duration::from_millis(250))).await;

    // Assert
    let lag = m.send_lag.get(&Kind::Order).expect("orders were sent");
    let service = m.service.get(&Kind::Order).expect("orders were answered");
    assert_eq!(lag.len(), 200);
    assert_eq!(service.len(), 200);
    assert!(
        lag.max() >= 150_000,
        "a buyer due during the stall was sent late by most of it: max lag {} µs",
        lag.max()
    );
    assert!(
        p99_ms(lag) >= 100.0,
        "the stall is in the send lag's p99: {} ms",
        p99_ms(lag)
    );
    assert!(
        p99_ms(service) < p99_ms(lag) / 2.0,
        "the shop was fast: service p99 {} ms vs send lag p99 {} ms",
        p99_ms(service),
        p99_ms(lag)
    );
    let latency = m.by_kind(Kind::Order);
    assert!(
        latency.max() >= lag.max(),
        "latency (from the intended send) carries the lag"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_shop_shows_service_time_not_send_lag() {
    // Arrange: a shop that takes 150 ms per order, 100 buyers over 1 s.
    let base = spawn_shop(Duration::from_millis(150));
    let s = scenario(100, 1);

    // Act
    let m = fire(&s, base, None).await;

    // Assert
    let lag = m.send_lag.get(&Kind::Order).expect("orders were sent");
    let service = m.service.get(&Kind::Order).expect("orders were answered");
    assert_eq!(service.len(), 100);
    assert!(
        service.value_at_quantile(0.01) >= 150_000,
        "every answer took the shop's 150 ms: p1 {} µs",
        service.value_at_quantile(0.01)
    );
    assert!(
        p99_ms(lag) < 75.0,
        "the generator was on time: send lag p99 {} ms",
        p99_ms(lag)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_shop_that_holds_every_sender_shows_sender_wait_not_send_lag() {
    // Arrange: a shop that takes 150 ms per order and 40 buyers arriving within 50 ms, through
    // a pool capped at 4 senders: 36 of them find every sender held by an unanswered request.
    let base = spawn_shop(Duration::from_millis(150));
    let mut s = scenario(40, 1);
    s.buyers.window_s = 0.05;
    s.client.senders = 4;

    // Act
    let m = fire(&s, base, None).await;

    // Assert: the wait for a sender is the shop's (sender wait), never the generator's.
    let lag = m.send_lag.get(&Kind::Order).expect("orders were sent");
    let wait = m.sender_wait.get(&Kind::Order).expect("orders were sent");
    assert_eq!(wait.len(), 40);
    assert!(
        p99_ms(wait) >= 900.0,
        "the last buyers waited for ~9 rounds of 150 ms: sender wait p99 {} ms",
        p99_ms(wait)
    );
    assert!(
        p99_ms(lag) < 75.0,
        "the generator itself was on time: send lag p99 {} ms",
        p99_ms(lag)
    );
    let latency = m.by_kind(Kind::Order);
    assert!(
        latency.max() >= wait.max(),
        "latency (from the intended send) carries the wait"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_far_larger_than_the_sender_pool_fires_every_buyer_exactly_once() {
    // Arrange: many more buyers than goose senders, so every sender sends for many buyers.
    let senders = 64;
    let buyers = senders * 20 + 1_500;
    let base = spawn_shop(Duration::ZERO);
    let mut s = scenario(buyers, 3);
    s.client.senders = senders;

    // Act
    let (m, goose) = fire_with_goose(&s, base, None).await;

    // Assert: one order attempt per buyer, none twice, and goose saw them all.
    let mut keys: Vec<String> = m.attempts().map(|a| a.key.to_string()).collect();
    assert_eq!(keys.len(), buyers as usize);
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), buyers as usize, "no buyer fired twice");
    assert_eq!(m.buyers.len(), buyers as usize, "every buyer finished");
    let orders = goose.iter().find(|g| g.name.ends_with("order")).unwrap();
    assert_eq!(orders.count, buyers as usize, "{goose:?}");
}
