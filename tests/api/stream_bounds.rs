//! redis-lua's stream stays exact and bounded: two consumers committing out of order around a
//! reconciliation snapshot, the applied ids kept as runs and read back exactly, and a 100 000-entry
//! backlog whose probes must stay O(1). Redis's own counters (SLOWLOG, INFO commandstats) measure
//! cost, never wall clock.

use crate::helpers::{spawn_app, TestApp};
use crate::pipeline_faults::{redis_conn, Parts};
use oversell::testing::inventory::redis_lua::GROUP;
use oversell::testing::inventory::Strategy;
use oversell::testing::model::OrderStatus;
use oversell::testing::pipeline;
use oversell::testing::store::{Backend, PersistEvent, PersistKind};
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_is_exact_when_two_consumers_commit_out_of_order_around_the_snapshot() {
    let mut parts = Parts::new().await;
    parts.config.pipeline.batch = 2;
    parts.sale(10).await;
    for u in ["a1", "a2", "b1", "b2"] {
        parts.buy(u).await;
    }
    // Consumer A takes the two oldest entries, consumer B the two newest.
    let mut a = parts.consumer("A");
    let mut b = parts.consumer("B");
    let batch_a = a.read(">").await.unwrap();
    let batch_b = b.read(">").await.unwrap();
    assert_eq!((batch_a.len(), batch_b.len()), (2, 2));
    assert_eq!(batch_a.len() + batch_b.len(), 4);

    // B commits first; reconciliation takes its database snapshot; then A commits, below
    // every id B applied, before reconciliation runs its Redis half.
    b.persist(&batch_b).await.unwrap();
    b.ack().await.unwrap();
    let snapshot = parts.store.reconcile_snapshot(1).await.unwrap().unwrap();
    a.persist(&batch_a).await.unwrap();
    a.ack().await.unwrap();
    let r = parts
        .redis
        .reconcile(1, &snapshot, true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.redis_stock, 6);
    assert_eq!(
        r.residual, 0,
        "A's two orders are in flight for that snapshot: {r:?}"
    );
    assert!(!r.deferred);
    assert_eq!(
        parts.redis.stock(1).await.unwrap(),
        Some(6),
        "nothing was 'corrected'"
    );

    // Once both are acknowledged the mark covers all four, and the database agrees.
    let mark = parts
        .store
        .advance_mark(
            1,
            &parts.redis.low_water_candidate(1).await.unwrap().unwrap(),
        )
        .await
        .unwrap();
    let last = batch_b.last().unwrap().id.clone();
    assert_eq!(mark, last);
    let after = parts.store.reconcile_snapshot(1).await.unwrap().unwrap();
    assert_eq!((after.db_stock, after.applied_above.len()), (6, 0));
    let r = parts
        .redis
        .reconcile(1, &after, true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((r.residual, r.in_flight), (0, 0));
    parts.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_pay_or_cancel_reached_the_database_first_is_not_in_flight() {
    let mut parts = Parts::new().await;
    parts.config.pipeline.batch = 2;
    parts.sale(10).await;
    // Consumer A takes two orders; their pay and cancel come after, to consumer B.
    let paid = parts.buy("a").await;
    let cancelled = parts.buy("b").await;
    let mut a = parts.consumer("A");
    let mut b = parts.consumer("B");
    let orders = a.read(">").await.unwrap();
    parts.inventory.pay(&paid).await.unwrap();
    parts
        .inventory
        .release(&cancelled, OrderStatus::Cancelled)
        .await
        .unwrap();
    let follow_ups = b.read(">").await.unwrap();
    assert_eq!((orders.len(), follow_ups.len()), (2, 2));

    // B commits first (as after a database outage, when both hold a backlog): the pay
    // inserts its order as paid (stock taken), the cancel its order as cancelled (none taken).
    // A's two `order` entries, still pending, will insert nothing: they are not in flight.
    b.persist(&follow_ups).await.unwrap();
    b.ack().await.unwrap();
    let snapshot = parts.store.reconcile_snapshot(1).await.unwrap().unwrap();
    assert_eq!(snapshot.db_stock, 9);
    let r = parts
        .redis
        .reconcile(1, &snapshot, true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((r.redis_stock, r.expected), (9, 9), "{r:?}");
    assert_eq!(r.residual, 0, "nothing to correct: {r:?}");
    assert_eq!(parts.redis.stock(1).await.unwrap(), Some(9));

    // A commits its late orders (nothing inserted, nothing deducted); everything agrees.
    a.persist(&orders).await.unwrap();
    a.ack().await.unwrap();
    let candidate = parts.redis.low_water_candidate(1).await.unwrap().unwrap();
    parts.store.advance_mark(1, &candidate).await.unwrap();
    let after = parts.store.reconcile_snapshot(1).await.unwrap().unwrap();
    assert_eq!(after.db_stock, 9);
    let r = parts
        .redis
        .reconcile(1, &after, true)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((r.residual, r.in_flight), (0, 0), "{r:?}");
    parts.teardown().await;
}

/// `(calls, usec)` of one command in `INFO commandstats` (server-wide, cumulative).
async fn commandstats(conn: &mut redis::aio::MultiplexedConnection, cmd: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        .unwrap_or("");
    let field = |k: &str| {
        line.split([':', ','])
            .find_map(|f| f.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls="), field("usec="))
}

/// Durations (µs) of the SLOWLOG entries whose arguments name `key`, by command.
async fn slow_on(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<(String, i64)> {
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1000)
        .query_async(conn)
        .await
        .unwrap();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    log.iter()
        .filter_map(|e| {
            let redis::Value::Array(fields) = e else {
                return None;
            };
            let usec = match fields.get(2)? {
                redis::Value::Int(n) => *n,
                _ => return None,
            };
            let redis::Value::Array(args) = fields.get(3)? else {
                return None;
            };
            let args: Vec<String> = args.iter().map(text).collect();
            args.iter()
                .any(|a| a == key)
                .then(|| (args[0].to_ascii_uppercase(), usec))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100k_backlog_keeps_probes_o1_reconciliation_bounded_and_the_stream_trimmed() {
    let parts = Parts::new().await;
    parts.sale(1_000_000).await;
    let keys = parts.redis.keys(1);
    let mut conn = redis_conn().await;
    // 100 000 order entries no consumer has read yet (a stalled or slow consumer).
    for chunk in 0..20 {
        let mut pipe = redis::pipe();
        for i in 0..5000 {
            pipe.cmd("XADD")
                .arg(&keys.events)
                .arg("*")
                .arg(&["type", "order", "order", &format!("1-{chunk}-{i}"), "user"])
                .arg(format!("u{chunk}-{i}"))
                .arg(&["device", "", "qty", "1", "at", "1"])
                .ignore();
        }
        let _: () = pipe.query_async(&mut conn).await.unwrap();
    }
    // What reading that tail costs, once (SLOWLOG keeps commands over 10 ms).
    let _: redis::streams::StreamRangeReply = conn.xrange_all(&keys.events).await.unwrap();
    let xrange_usec = slow_on(&mut conn, &keys.events)
        .await
        .into_iter()
        .filter(|(c, _)| c == "XRANGE")
        .map(|(_, us)| us)
        .max()
        .expect("an XRANGE of 100 000 entries takes over 10 ms");

    // The probes: lag and pending as the consumer's gauge, `drained()` and the audit read them.
    let before = commandstats(&mut conn, "xinfo|groups").await;
    for _ in 0..50 {
        let b = parts.redis.backlog(1).await.unwrap();
        assert_eq!((b.lag, b.pending, b.lag_exact), (100_000, 0, true));
        assert!(!parts.redis.drained(1).await.unwrap());
    }
    let after = commandstats(&mut conn, "xinfo|groups").await;
    let per_call = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
    eprintln!(
        "100k backlog: XRANGE of the tail {xrange_usec} µs; XINFO GROUPS {per_call:.1} µs a call"
    );
    assert!(
        per_call * 20.0 < xrange_usec as f64,
        "XINFO GROUPS costs {per_call:.0} µs a call; reading the tail costs {xrange_usec} µs"
    );
    let slow: Vec<_> = slow_on(&mut conn, &keys.events)
        .await
        .into_iter()
        .filter(|(c, _)| c != "XRANGE" && c != "XADD")
        .collect();
    assert!(slow.is_empty(), "no probe command is slow: {slow:?}");

    // The backlog is delivered and acknowledged (as consumers would), the database's mark
    // follows, and the stream is trimmed below it, at most 10 000 entries a call.
    let last: String = {
        let r: redis::streams::StreamRangeReply = conn
            .xrevrange_count(&keys.events, "+", "-", 1)
            .await
            .unwrap();
        r.ids[0].id.clone()
    };
    let _: () = redis::cmd("XGROUP")
        .arg("SETID")
        .arg(&keys.events)
        .arg(GROUP)
        .arg(&last)
        .query_async(&mut conn)
        .await
        .unwrap();
    let candidate = parts.redis.low_water_candidate(1).await.unwrap().unwrap();
    assert_eq!(candidate, last);
    let mark = parts.store.advance_mark(1, &candidate).await.unwrap();
    let mut calls = 0;
    while parts.redis.trim(1, &mark).await.unwrap() > 0 {
        calls += 1;
        assert!(calls <= 20);
    }
    let len: u64 = conn.xlen(&keys.events).await.unwrap();
    assert!(len <= 100, "only the last node is left: {len}");

    // Ten orders arrive unapplied: reconciliation walks those, not the history.
    let before = commandstats(&mut conn, "evalsha").await;
    for i in 0..10 {
        parts.buy(&format!("late-{i}")).await;
    }
    let pass = pipeline::reconcile::pass(&parts.inventory, 1, &parts.config.pipeline.reconcile)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((pass.residual, pass.in_flight), (0, 10), "{pass:?}");
    let after = commandstats(&mut conn, "evalsha").await;
    let per_call = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
    eprintln!("100k backlog: EVALSHA (purchases, reconcile) {per_call:.1} µs a call");
    assert!(
        per_call * 20.0 < xrange_usec as f64,
        "scripts cost {per_call:.0} µs a call; reading the tail costs {xrange_usec} µs"
    );
    let slow: Vec<_> = slow_on(&mut conn, &keys.events)
        .await
        .into_iter()
        .filter(|(c, _)| c != "XRANGE" && c != "XADD")
        .collect();
    assert!(
        slow.is_empty(),
        "no reconciliation or trim call is slow: {slow:?}"
    );
    parts.teardown().await;
}

#[tokio::test]
async fn applied_ids_are_kept_as_runs_and_read_back_exactly_on_both_databases() {
    for backend in [Backend::Postgres, Backend::Mysql] {
        applied_ids_as_runs(backend).await;
    }
}

/// Batches of ids within two milliseconds (with a gap), replays that overlap them (a claimed
/// batch), then the mark raised into the middle of a run and past it.
async fn applied_ids_as_runs(backend: Backend) {
    let app = spawn_app(Strategy::ForUpdate, backend).await;
    app.setup_sale(1, 100, 100).await;
    let store = app.app_inventory.store();
    let batch = |ids: &[&str]| -> Vec<PersistEvent> {
        ids.iter()
            .map(|sid| PersistEvent {
                stream_id: sid.to_string(),
                kind: PersistKind::Order,
                order_id: format!("1-o{sid}"),
                user_id: format!("user-{sid}"),
                device_id: None,
                qty: 1,
                at_ms: 1,
                idempotency_key: None,
            })
            .collect()
    };
    let applied = |ids: &[&str]| {
        let events = batch(ids);
        async move {
            let s = store.apply_events(1, &events, None).await.unwrap();
            (s.inserted, s.replayed)
        }
    };
    assert_eq!(applied(&["5-1", "5-2", "5-3", "6-0", "6-2"]).await, (5, 0));
    // The same last id, an earlier start: the run grows down to 5-0.
    assert_eq!(applied(&["5-0", "5-1", "5-2", "5-3"]).await, (1, 3));
    // The same last id, a later start: the run keeps 5-0 and 5-1.
    assert_eq!(applied(&["5-2", "5-3"]).await, (0, 2));
    // Overlapping and going further: a second run.
    assert_eq!(applied(&["5-3", "5-4", "5-5"]).await, (2, 1));
    let ids = ["5-0", "5-1", "5-2", "5-3", "5-4", "5-5", "6-0", "6-2"];
    assert_eq!(applied_above(&app, "0-0").await, ids, "{backend:?}");
    // Eight ids in four rows: 5-0..5-3, 5-3..5-5, 6-0, 6-2.
    assert_eq!(run_rows(&app.database_url).await, 4, "{backend:?}");
    // The mark inside a run: only the run's ids above it are applied above the mark.
    assert_eq!(store.advance_mark(1, "5-2").await.unwrap(), "5-2");
    assert_eq!(applied_above(&app, "5-2").await, &ids[3..], "{backend:?}");
    // Past a run's end: the runs it covers are forgotten, the one above stays.
    assert_eq!(store.advance_mark(1, "6-0").await.unwrap(), "6-0");
    assert_eq!(applied_above(&app, "6-0").await, ["6-2"], "{backend:?}");
    assert_eq!(run_rows(&app.database_url).await, 1, "{backend:?}");
    app.teardown().await;
}

/// The ids applied above the item's mark, from reconciliation's snapshot (which must hold `mark`).
async fn applied_above(app: &TestApp, mark: &str) -> Vec<String> {
    let snap = app
        .app_inventory
        .store()
        .reconcile_snapshot(1)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snap.mark, mark);
    snap.applied_above
}

/// Rows of `applied_runs`.
async fn run_rows(url: &str) -> i64 {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM applied_runs")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    n
}
