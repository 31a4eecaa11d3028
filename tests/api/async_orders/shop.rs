//! The asynchronous stand-in shop: `POST /orders` answers 202 with a ticket and a background
//! task decides the order 0.5–2 s later on an atomic stock counter; `GET /orders/{ticket}`
//! answers its state; a writer task inserts decided rows into a real PostgreSQL table
//! (`shop_orders`, with `shop_outbox` holding the rows not written yet); `GET /backlog` counts
//! them. Variants lose decided orders, pause the writer, never decide, or answer 401.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Which orders the stand-in drops after telling the client "confirmed".
#[derive(Clone, Copy, PartialEq)]
pub enum Drop {
    None,
    /// Every n-th confirmed order.
    Every(u64),
    /// Only the n-th confirmed order.
    Only(u64),
}

#[derive(Clone, Copy)]
pub struct Shape {
    pub drop: Drop,
    /// The writer holds every row this long after the sale is set up.
    pub writer_paused: Duration,
    /// Every order is answered 401.
    pub unauthorized: bool,
    /// Orders are accepted and never decided.
    pub never_decides: bool,
}

impl Shape {
    pub const HONEST: Shape = Shape {
        drop: Drop::None,
        writer_paused: Duration::ZERO,
        unauthorized: false,
        never_decides: false,
    };
}

#[derive(Clone)]
pub struct Shop {
    pub shape: Shape,
    pub db: PgPool,
    pub stock: Arc<AtomicI64>,
    pub tickets: Arc<AtomicU64>,
    pub confirmed: Arc<AtomicU64>,
    /// Ticket → "queued", "confirmed" or "sold_out".
    pub status: Arc<Mutex<HashMap<String, &'static str>>>,
    /// Tickets confirmed to the client whose row was never written.
    pub dropped: Arc<Mutex<BTreeSet<String>>>,
    /// Rows decided and not written yet.
    pub backlog: Arc<AtomicI64>,
    pub writes: mpsc::UnboundedSender<(String, String)>,
    /// When the writer may write (the set-up moves it).
    pub writer_from: Arc<Mutex<tokio::time::Instant>>,
}

async fn reset(State(s): State<Shop>, Json(b): Json<Value>) -> StatusCode {
    s.stock
        .store(b["stock"].as_i64().unwrap_or(0), Ordering::SeqCst);
    *s.writer_from.lock().unwrap() = tokio::time::Instant::now() + s.shape.writer_paused;
    StatusCode::OK
}

async fn order(State(s): State<Shop>, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    if s.shape.unauthorized {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "login first"})),
        );
    }
    let n = s.tickets.fetch_add(1, Ordering::SeqCst);
    let ticket = format!("t-{n}");
    let user = b["user"].as_str().unwrap_or_default().to_string();
    s.status.lock().unwrap().insert(ticket.clone(), "queued");
    if s.shape.never_decides {
        return (StatusCode::ACCEPTED, Json(json!({"ticket": ticket})));
    }
    let shop = s.clone();
    let t = ticket.clone();
    tokio::spawn(async move {
        // Decided 0.5–2 s after it was accepted.
        tokio::time::sleep(Duration::from_millis(500 + (n * 389) % 1500)).await;
        let bought = shop
            .stock
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v > 0).then(|| v - 1)
            })
            .is_ok();
        if !bought {
            shop.status.lock().unwrap().insert(t, "sold_out");
            return;
        }
        let k = shop.confirmed.fetch_add(1, Ordering::SeqCst) + 1;
        let lose = match shop.shape.drop {
            Drop::None => false,
            Drop::Every(e) => k % e == 0,
            Drop::Only(o) => k == o,
        };
        if lose {
            shop.dropped.lock().unwrap().insert(t.clone());
        } else {
            // The outbox (the backlog in SQL) holds the row until the writer has written it.
            shop.backlog.fetch_add(1, Ordering::SeqCst);
            sqlx::query("INSERT INTO shop_outbox VALUES ($1)")
                .bind(&t)
                .execute(&shop.db)
                .await
                .expect("the outbox takes the row");
            let _ = shop.writes.send((t.clone(), user));
        }
        shop.status.lock().unwrap().insert(t, "confirmed");
    });
    (StatusCode::ACCEPTED, Json(json!({"ticket": ticket})))
}

async fn poll(State(s): State<Shop>, Path(ticket): Path<String>) -> (StatusCode, Json<Value>) {
    match s.status.lock().unwrap().get(&ticket) {
        Some(st) => (StatusCode::OK, Json(json!({"state": st}))),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no such ticket"})),
        ),
    }
}

async fn backlog(State(s): State<Shop>) -> Json<Value> {
    Json(json!({"queue": {"depth": s.backlog.load(Ordering::SeqCst)}}))
}

/// Writes decided rows, one at a time, once the pause is over.
async fn writer(db: PgPool, shop: Shop, mut rows: mpsc::UnboundedReceiver<(String, String)>) {
    while let Some((ticket, user)) = rows.recv().await {
        let from = *shop.writer_from.lock().unwrap();
        tokio::time::sleep_until(from).await;
        sqlx::query(
            "INSERT INTO shop_orders (order_id, user_id, qty, status) VALUES ($1, $2, 1, 'confirmed')",
        )
        .bind(&ticket)
        .bind(&user)
        .execute(&db)
        .await
        .expect("the writer writes");
        sqlx::query("DELETE FROM shop_outbox WHERE ticket = $1")
            .bind(&ticket)
            .execute(&db)
            .await
            .expect("the writer empties the outbox");
        shop.backlog.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The stand-in on 127.0.0.1:0 with a fresh database: its base URL, database URL and state.
pub async fn spawn_shop(shape: Shape) -> (String, String, Shop) {
    use sqlx::migrate::MigrateDatabase;
    let url = fresh_db_url(Backend::Postgres);
    sqlx::Postgres::create_database(&url).await.unwrap();
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .unwrap();
    for ddl in [
        "CREATE TABLE shop_orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, \
         qty INT NOT NULL, status TEXT NOT NULL)",
        "CREATE TABLE shop_outbox (ticket TEXT PRIMARY KEY)",
    ] {
        sqlx::query(ddl).execute(&db).await.unwrap();
    }
    // An order of an earlier sale: present before this run, never this run's.
    sqlx::query("INSERT INTO shop_orders VALUES ('old-1', 'someone', 1, 'confirmed')")
        .execute(&db)
        .await
        .unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let shop = Shop {
        shape,
        db: db.clone(),
        stock: Arc::default(),
        tickets: Arc::default(),
        confirmed: Arc::default(),
        status: Arc::default(),
        dropped: Arc::default(),
        backlog: Arc::default(),
        writes: tx,
        writer_from: Arc::new(Mutex::new(tokio::time::Instant::now())),
    };
    tokio::spawn(writer(db, shop.clone(), rx));
    let app = Router::new()
        .route("/sale", post(reset))
        .route("/orders", post(order))
        .route("/orders/{ticket}", get(poll))
        .route("/backlog", get(backlog))
        .with_state(shop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, url, shop)
}
