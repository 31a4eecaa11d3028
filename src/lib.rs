//! # oversell
//!
//! Reproduces, measures and gates oversell in flash sales: a reference shop with every
//! inventory strategy behind one switch, a goose traffic model, an oracle that audits the
//! databases against what every client was told, and reports.
//!
//! # Layout
//!
//! - [`cli`]: clap commands and flags, turned into typed plans; `gate` and `attack` each in
//!   their own file, the flags they share (oracle, plan, output) in `cli/plan.rs`.
//! - [`shop`]: the reference shop: `app(state) -> Router`, handlers, errors, `/metrics`;
//!   [`shop::ShopKnobs`], its knobs (the `serve` flags and a scenario's `[shop]` table); the
//!   admin routes behind `--admin-token` (`shop/admin.rs`), the client address behind
//!   `--trusted-proxy` ([`shop::client_ip`]), and the watch that rebuilds a redis-lua sale
//!   Redis lost ([`shop::rewarm`]).
//! - [`inventory`]: the [`inventory::Strategy`] enum and one file per strategy
//!   (`naive`, `for_update`, `optimistic`, `redis_lua`); `redis_lua::keys` is the Redis key
//!   layout of a sale and the clean-up of a key prefix, `redis_lua::durability` what a 201
//!   survives (`--redis-durability`), `redis_lua/rewarm.rs` the rebuild from the database.
//! - [`gateway`]: rate limits (bounded per-IP buckets) and dedup in front of redis-lua's
//!   pre-deduct.
//! - [`store`]: PostgreSQL / MySQL access (`backend`, `error`, `orders`, `rows`, `tx`,
//!   `persist`); every statement and all that differs per backend lives in `store::dialect`.
//! - [`pipeline`]: redis-lua's stream consumer, reconciliation, and the payment-timeout sweeper.
//! - [`traffic`]: scenario files (each section validates itself) → seeded plan → goose users;
//!   our HdrHistogram recorder. [`traffic::mapping`] is the `[target]` table (a shop's API,
//!   parsed into methods, status patterns and outcomes when the file is read);
//!   [`traffic::target`] turns it into requests and answers at run time;
//!   [`traffic::buyers_csv`] reads `--buyers-csv` with the `csv` crate.
//! - [`runner`]: a run against the reference shop (child process per strategy) or a foreign
//!   shop: sale set-up, traffic, drain; both end through one `finish` (oracle, report
//!   section); `runner::RunError` for runs that cannot start.
//! - [`rehearsal`]: foreign targets: the loopback guard, the dry-run plan, the user's oracle.
//! - [`metric`]: the metric catalog: each metric's one name (and older aliases), unit,
//!   direction, comparison rule, threshold rule and format; `[thresholds]` parsed into it.
//! - [`gate`]: thresholds checked against a report: verdict, JUnit XML, CI Markdown summary.
//! - [`probe`]: DB QPS, Redis ops/s, stock and shop metrics sampled every second.
//! - [`oracle`]: audits the final database/Redis state against the clients' records.
//! - [`report`]: `report.json` (`oversell.report/v2`; `report::v1` reads v1 files),
//!   `report.md`, `report.html`, the tables (`report::table`); `report::catalog` (how each
//!   catalog metric is read from a run, in the run's unit), `report::charts` (plotters, SVG +
//!   PNG), `report::hlog` (HdrHistogram interval logs), `report::csv` (per-second timelines),
//!   `report::markup` (the XML/HTML and Markdown escapers).
//! - [`diff`]: `oversell diff`: two reports compared run by run, metric by metric.
//! - [`bench`]: `oversell bench redis`: our pre-deduct path vs redis-benchmark, same run.
//! - [`model`]: items, orders and the order state machine.
//! - [`services`]: the outside services and how to start one that is down (`cli` decides
//!   which errors mean "unreachable": exit 3).
//! - [`telemetry`]: logging set-up.
//!
//! Data flows one way: scenario → plan → traffic (goose) → shop → databases; probes and
//! clients' records → oracle → report.

pub mod bench;
pub mod cli;
pub mod diff;
pub mod gate;
pub mod gateway;
pub mod inventory;
pub mod metric;
pub mod model;
pub mod oracle;
pub mod pipeline;
pub mod probe;
pub mod rehearsal;
pub mod report;
pub mod runner;
pub mod services;
pub mod shop;
pub mod store;
pub mod telemetry;
pub mod traffic;
