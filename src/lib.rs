//! # oversell
//!
//! Reproduces, measures and gates oversell in flash sales: a reference shop with every
//! inventory strategy behind one switch, a goose traffic model, an oracle that audits the
//! databases against what every client was told, and reports.
//!
//! # Layout
//!
//! - [`cli`]: clap commands and flags, turned into typed plans; `serve`, `gate`, `attack` and
//!   `bench` each in their own file, the flags they share (oracle, plan) in `cli/plan.rs`, the
//!   output flags (`--json`, `--wide`, `--metrics-listen`, `--quiet`, `--out`), parsing and how
//!   a command ends in `cli/output.rs`, how values read (durations, listen addresses) and the
//!   help headings in `cli/values.rs`; `scenarios` and `completions`.
//! - [`scenarios`]: the files of `scenarios/`, compiled in; `--scenario` takes a path or a
//!   bundled name.
//! - [`shop`]: the reference shop: `app(state) -> Router`, handlers, errors, `/metrics`
//!   (`shop::telemetry`: the `/metrics` endpoint); [`shop::ShopKnobs`], its knobs (the `serve`
//!   flags and a scenario's `[shop]` table, from one list: `shop/knobs/declare.rs` the macro,
//!   `shop/knobs/unit.rs` the durations' old units and `report.json` form); the admin routes behind `--admin-token`
//!   (`shop/admin.rs`), the client address behind `--trusted-proxy` ([`shop::client_ip`]), and
//!   the watch that rebuilds a redis-lua sale Redis lost ([`shop::rewarm`]).
//! - [`inventory`]: the [`inventory::Strategy`] enum (`strategy`: its spelling, the
//!   [`inventory::EngineKind`] that runs it, what the runner asks before a shop starts, the knobs
//!   it owns, the defects built into it and its chart colour, each an exhaustive `match`); an
//!   [`inventory::Inventory`] holds ONE [`inventory::Engine`] (`engine`: `Db`, `Batched` or
//!   `Redis`, a Redis strategy's side in [`inventory::RedisEngine`]); the answers in
//!   `outcome`; one file per strategy
//!   (`naive`, `for_update`, `optimistic`, `redis_lua`, `conditional`: one conditional
//!   `UPDATE`; `batched`: per-item queues and one transaction per batch, its decisions unit-tested
//!   in `batched/tests.rs`; `redis_buckets`: redis-lua's scripts on B buckets of one sale, each
//!   in its own slot, with lend/receive transfers and their repair; `strategy`: the
//!   [`inventory::Strategy`] switch); [`inventory::defect`] names the known defects a shop can
//!   be started with (`--defect NAME`, a testing aid: each a branch marked `DEFECT` in its
//!   strategies' own code); [`inventory::idempotency`] is the
//!   `Idempotency-Key` rule they all share (a retry gets the order its key bought, never a
//!   second one); `redis_lua::keys` is the Redis key
//!   layout of a sale and the clean-up of a key prefix; `redis_lua::stream` is the stream's
//!   bookkeeping (O(1) backlog, low-water candidate, trimming, reconciliation, dead letters);
//!   `redis_lua::durability` what a 201 survives (`--redis-durability`; on a cluster checked
//!   on every master); `redis_lua/orders.rs` an order's pay, cancel
//!   and expiry (under `wait-replica` answered once a replica holds them);
//!   `redis_lua/rewarm.rs` the rebuild from the database.
//! - [`gateway`]: rate limits (bounded per-IP buckets) and dedup in front of redis-lua's
//!   pre-deduct.
//! - [`store`]: PostgreSQL / MySQL access (`backend`, `error`, `orders`, `rows`, `tx`,
//!   `persist`: stream batches and the low-water mark; a batch of several consumers commits only
//!   if the stock stays at zero or above); every statement and all that differs
//!   per backend lives in `store::dialect`; `store::redis_conn` is the one connection type
//!   for a single Redis and a Redis Cluster (`redis+cluster://`, `--redis-cluster`; node-level
//!   commands on every master; a stalled cluster connection replaced), the shop's and the
//!   harness's probes' and faults' alike.
//! - [`pipeline`]: redis-lua's stream consumer (one per item; redis-buckets: one per bucket,
//!   and the transfer repair loop) (`consumer`: reconnects, claims, acks;
//!   `batch`: refused entries isolated and dead-lettered; `mark`: the low-water mark's upkeep
//!   and trimming; `alert`), reconciliation, and the payment-timeout sweeper; a
//!   supervisor restarts any of them that dies.
//! - [`traffic`]: scenario files (each section validates itself) → seeded plan → buyer tasks,
//!   sent through a pool of goose users (`attack/journey.rs`, `attack/pool.rs`; an order
//!   answered `pending` is polled until the shop decides it: `attack/poll.rs`);
//!   our HdrHistogram recorder (latency from the intended send, split into send lag and
//!   service time; every order attempt's idempotency key and answer class: acknowledged,
//!   refused, indeterminate; the kinds and answers in `recorder/answer.rs`).
//!   [`traffic::mapping`] is the `[target]` table (a shop's API, parsed into methods, paths
//!   that stay on the target, headers, JSON or form bodies, placeholders, status patterns,
//!   outcomes (per request too), `extract` and `[target.login]` when the file is read —
//!   `mapping/check.rs` — and its named placeholders checked against the CSV's columns when
//!   the plan is built; `mapping::template` expands placeholders once, encoded);
//!   [`traffic::target`] turns it into requests and classified answers at run time, on the
//!   harness's client that follows no redirect and keeps no cookie; [`traffic::session`] is a
//!   buyer's session (CSV columns, extracted values, its cookie jar); [`traffic::login`] judges
//!   and tallies logins (the run's `login` section); [`traffic::buyers_csv`] reads
//!   `--buyers-csv` with the `csv` crate (extra columns become placeholders);
//!   [`traffic::adversary`] is `[adversarial]`'s scripts (run by `attack/script.rs`, their
//!   steps recorded as follow-ups) and `[client] retry`'s policy (retries recorded apart from
//!   first attempts).
//! - [`nemesis`]: the fault engine: [`nemesis::FaultSpec`] (a scenario's `[[faults]]`,
//!   `--fault KIND@AT[:DURATION]`) and `[nemesis]` (the private Redis's persistence); one file
//!   per group of kinds (`shop`: shop-kill through the runner's [`nemesis::ShopControl`];
//!   `redis`: the private `redis-server` child, restart/pause/conn-kill, redeliver; `cluster`:
//!   `redis-failover`/`redis-takeover` on a Redis Cluster (`CLUSTER NODES` read); `db`:
//!   outage and lock on the run's own database; `crash`: `db-crash`/`db-restart` of a managed
//!   database server; `replica`: `replica-lag` on the run's managed replica); `engine`: the schedule from the sale's
//!   opening and the undo (at the end, when dropped on an error, on ctrl-c).
//! - [`runner`]: a run against the shop under test, a [`runner::Subject`] (the
//!   [`runner::ShopUnderTest`] trait, implemented in [`under_test`]; the rest of the harness
//!   asks it and never matches on its kind; a shard's shop is one of them, through the same
//!   trait): sale set-up, traffic, drain;
//!   both end through one `finish` (oracle, report section); the report is written as each run finishes; one run per database at a time
//!   (`lock`); a run with faults starts the engine as the sale opens, gets a private Redis
//!   for Redis faults, and the reference shop's `faults` turns what was applied into the report's fault
//!   windows and recovery times; `runner::RunError` for runs that cannot start; `progress`
//!   (a bar on a terminal, a line a second elsewhere) and `metadata` (build, command line,
//!   server versions).
//!   `runner::sharded` fires one shard (`run --shard i/N`, or `attack --shard i/N` at the user's
//!   target) from the shared `--open-at` instant; `runner::merge` holds what both kinds'
//!   halves of `oversell merge` share.
//! - [`under_test`]: each kind of shop in its own house. `under_test::reference`: the
//!   reference shop's driver, its child processes (`shop_process`; `shops`: K of them on one
//!   database and Redis, `--shops K`), its `settle` (its settled state read for the oracle, a
//!   run's and a merge's), its `faults`, its `layout` (what probes and faults are handed of
//!   its insides), its read `replica` and its half of `merge`. `under_test::foreign`: the
//!   user's shop at a URL, its `login` (the buyers' logins before the sale) and its half of
//!   `merge` (the clients' evidence alone). `under_test::merge` is `oversell merge`.
//! - [`shard`]: the `--shard i/N` partition and `--open-at` rule, the `oversell.shard/v1` file
//!   (`shard::file`: V2 histograms, the clients' records, the interval log) and the checks and
//!   lossless sum of N shards (`shard::combine`).
//! - [`live`]: the harness's own Prometheus endpoint during a run (`--metrics-listen`): the
//!   clients' figures as the recorder sees them, the probes' samples, and `/targets` naming the
//!   child shop for Prometheus service discovery.
//! - [`rehearsal`]: foreign targets: the loopback guard (`guard`: every outbound address as
//!   its driver will use it, checked again before the first request), the dry-run plan
//!   (`plan`), the user's oracle (`oracle`: SQL run as a role that can only read, `reader`,
//!   its errors by SQLSTATE, `sqlstate`; or HTTP at field paths; read before and after the
//!   sale; `order_rows`: `--orders-query`, the shop's order rows), settling after the last buyer (`settle`: the oracle's reading at rest
//!   for the settle window, the backlog signal at 0), the preflight that checks every
//!   endpoint before the set-up request, and `attack --probe` (`mapping_check`).
//! - [`metric`]: the metric catalog: each metric's one name (and older aliases), unit,
//!   direction, comparison rule, threshold rule and format; `[thresholds]` parsed into it.
//! - [`gate`]: thresholds checked against a report: verdict (100 columns, or `--wide`), JUnit
//!   XML, CI Markdown summary.
//! - [`probe`]: DB QPS, Redis ops/s, stock, units sold and shop metrics sampled every second.
//! - [`oracle`]: audits the final database/Redis state against the clients' records, sorting
//!   every order by the attempt that asked for it (acknowledged, indeterminate and committed,
//!   refused and committed, phantom: `oracle::orders`);
//!   `oracle::clients` judges the clients' own evidence on every run (client-observed
//!   oversell, the oracle disagreeing with the clients, unclassified answers);
//!   `oracle::answers` is the table of answers a correct shop gives adversarial buyers
//!   (`wrong_answers`) and finds keys that bought twice (`duplicate_orders_per_key`);
//!   `oracle::verdict` writes the one-line verdict.
//! - [`report`]: `report.json` (`oversell.report/v2`; `report::v1` reads v1 files),
//!   `report.md`, `report.html` (both tell a run's details through `report::details`), the
//!   tables (`report::table`); `report::catalog` (how each
//!   catalog metric is read from a run, in the run's unit), `report::charts` (plotters, SVG +
//!   PNG), `report::hlog` (HdrHistogram interval logs), `report::csv` (per-second timelines),
//!   `report::markup` (the XML/HTML and Markdown escapers), `report::shops` (the K shop
//!   processes of a `--shops` run and what each answered), `report::faults` (each run's
//!   fault windows and the strategy × fault table), `report::repeats` (`--repeat N`: runs
//!   grouped per strategy, each metric's median and min–max, the tables' `median (min–max)`
//!   cells).
//! - [`diff`]: `oversell diff`: two reports compared run by run, metric by metric;
//!   `diff/spread.rs` compares repeated runs by their spread; `diff/text.rs` is the 100-column
//!   form a terminal gets (the Markdown otherwise).
//! - [`bench`]: our paths next to their raw ceiling, same run: `bench::redis` (`bench redis`:
//!   the pre-deduct path vs redis-benchmark EVALSHA), `bench::shop` (`bench shop`: the child
//!   shop over HTTP vs `bench::ceiling`, i.e. redis-benchmark, pgbench or mysqlslap),
//!   `bench::wrk` (wrk's script and output), `bench::rate` (fixed-rate client, HdrHistogram
//!   from the intended send). Sits beside `runner` (it starts the runner's child shop).
//! - [`selftest`]: `oversell selftest`: each known defect ([`inventory::Defect`], built into
//!   the reference shop's own code path by `--defect NAME`, a testing aid) fired with the
//!   bundled scenario meant for it, caught or missed, and the correct strategies on the same
//!   scenarios, which must pass (the flags in `cli/selftest.rs`).
//! - [`capacity`]: `oversell capacity`: each strategy's highest arrival rate at which the
//!   scenario's objective holds (`scale`: the shape kept at another rate; `search`: doubling then
//!   bisection; `slo`: each probe judged from its own report; `report`, `charts`).
//! - [`sweep`]: `oversell sweep --vary KNOB=v1,v2`: one run per value of a shop knob or the
//!   arrival rate (`knobs`: which knob, which strategies have it), metrics against the knob.
//! - [`diagnose`]: `oversell diagnose`: a battery of experiments planned within a budget (the
//!   rush, adversarial buyers, cancel after pay, restocks, a capacity search), each an ordinary
//!   run, read into one row per failure class (found with its proof, not found with what was
//!   tried, not testable with what to map) with the post-mortem's remedy; where the time goes.
//! - [`fit`]: `oversell fit`: a scenario fitted from a real sale's access log (combined or
//!   JSON lines, streamed in bounded memory): the arrivals per second as an `arrival =
//!   "trace"`, viewers, bots, think times, pay/cancel/abandon and the stock, each commented with
//!   its source; `--scale`, `--compress`; `fit.md` and a chart beside it.
//! - [`model`]: items, orders and the order state machine.
//! - [`services`]: the outside services and how to start one that is down (`cli` decides
//!   which errors mean "unreachable": exit 3); `--services auto|managed|external`
//!   ([`services::provide`], `cli/services.rs`); [`services::managed`], private PostgreSQL,
//!   MariaDB and Redis servers started from the installed binaries (`binaries`: where they
//!   are; `kinds`: what differs per kind; `process`: parent-death signal, unprivileged user,
//!   the watchdog and the stale sweep; `replica`: a PostgreSQL streaming replica of a managed
//!   primary, `pg_basebackup -R`); [`services::leftovers`], run prefixes and test databases
//!   named by owner and age (the Redis sweep of a killed run's prefixes is in
//!   `inventory::redis_lua::keys`, which holds the key layout).
//! - [`secret`]: what counts as a secret (by name, by value) and the one place that masks it:
//!   samples, URLs, the command line, the scenario a report or shard file stores
//!   (`traffic::scenario::masked`); docs/src/security.md.
//! - [`console`]: stdout and stderr, ended quietly when their reader goes away (`| head`);
//!   the `out!`/`outln!`/`eout!`/`eoutln!` macros every print goes through.
//! - [`exit`]: the exit codes, one enum (0 done, 1 judged and failed, 2 bad input or stopped,
//!   3 unreachable).
//! - [`duration`]: durations with a unit (`500ms`, `15m`), read and shown one way everywhere.
//! - [`suggest`]: "did you mean …" for a mistyped name (metric, threshold, scenario).
//! - `backoff`: capped exponential backoff with jitter, for every background loop's retries
//!   (the shop's consumers and the harness's `[watch]` samplers alike).
//! - [`watch`]: `[watch]`, the shop's own gauges (pool, queue backlog) read every second from
//!   a Prometheus endpoint, read-only SQL, a Redis read command or an HTTP JSON field during
//!   the sale (`spec`, `read`, `sampler`), and what the report keeps of each (`gauge`: peak,
//!   drain, series); the reference shop's own gauges from its probes (`shop`).
//! - [`telemetry`]: logging set-up (colour only on a terminal, never with `NO_COLOR`; clear of
//!   the progress bar) and the process's one Prometheus recorder; `telemetry::shop_metrics`
//!   declares each of the shop's metrics once (its name, kind and `# HELP`), for every module
//!   that emits or reads it.
//!
//! Data flows one way: scenario → plan → traffic (goose) → shop → databases; probes and
//! clients' records → oracle → report.

// Tests print through the harness's capture, which `print!` feeds and the console does not.
#![cfg_attr(test, allow(clippy::disallowed_macros))]
pub(crate) mod backoff;
pub(crate) mod bench;
pub(crate) mod capacity;
pub mod cli;
pub mod console;
pub(crate) mod diagnose;
pub(crate) mod diff;
pub(crate) mod duration;
pub mod exit;
pub(crate) mod fit;
pub(crate) mod gate;
pub(crate) mod gateway;
pub(crate) mod inventory;
pub(crate) mod live;
pub(crate) mod metric;
pub(crate) mod model;
pub(crate) mod nemesis;
pub(crate) mod oracle;
pub(crate) mod pipeline;
pub mod placement;
pub(crate) mod probe;
pub(crate) mod read_only;
pub(crate) mod rehearsal;
pub mod report;
pub(crate) mod runner;
pub(crate) mod scenarios;
pub(crate) mod secret;
pub(crate) mod selftest;
pub(crate) mod services;
pub(crate) mod shard;
pub(crate) mod shop;
pub(crate) mod store;
pub(crate) mod suggest;
pub(crate) mod sweep;
pub mod telemetry;
pub(crate) mod traffic;
pub(crate) mod under_test;
pub(crate) mod watch;

/// What the tests in `tests/` reach of the crate's private modules, by name (hidden from the
/// docs: it is not an interface for users, and may change in any release). The public surface
/// is what the `oversell` binary and a script that reads its reports need: [`cli`] (the
/// commands), [`exit`] (their exit codes), [`report`] (the report's types, to read
/// `report.json`), and [`placement`] and [`telemetry`] (the process's own set-up, for the
/// binary).
#[doc(hidden)]
pub mod testing {
    pub mod bench {
        pub use crate::bench::RedisBench;
        pub mod ceiling {
            pub use crate::bench::ceiling::{mysqlslap, pgbench, Length, Script};
        }
        pub mod redis {
            pub use crate::bench::redis::redis;
        }
    }
    pub mod diagnose {
        pub use crate::diagnose::class::Class;
    }
    pub mod diff {
        pub use crate::diff::METRICS;
    }
    pub mod gate {
        pub use crate::gate::{limits, Metric, Status, Verdict};
    }
    pub mod inventory {
        pub use crate::inventory::{
            Defect, Durability, Inventory, InventoryError, Outcome, RedisBuckets, RedisLua,
            RedisSettings, Strategy,
        };
        pub mod redis_buckets {
            pub use crate::inventory::redis_buckets::home_bucket;
        }
        pub mod redis_lua {
            pub use crate::inventory::redis_lua::{client_name, ItemKeys, RedisLua, GROUP};
            pub mod keys {
                pub use crate::inventory::redis_lua::keys::ItemKeys;
                pub use crate::inventory::redis_lua::keys::{delete_prefix, sweep_prefixes};
            }
            pub mod stream {
                pub use crate::inventory::redis_lua::stream::{read_dead_letters, DeadLetter};
            }
        }
    }
    pub mod live {
        pub use crate::live::{probe_gauges, ANSWERS, IN_FLIGHT, LATENCY, METRICS, SEND_LAG};
    }
    pub mod model {
        pub use crate::model::{now_ms, Item, Order, OrderStatus, Purchase, SaleSetup};
    }
    pub mod nemesis {
        pub use crate::nemesis::{Engine, FaultSpec, Owned, Persistence, PrivateRedis, RedisSale};
        pub mod cluster {
            pub use crate::nemesis::cluster::{master_and_replica, parse_nodes, Node};
        }
    }
    pub mod oracle {
        pub use crate::oracle::{
            audit, peak_held, Ask, Check, DeadLetterSeen, Evidence, OracleView, Reading, Rows,
            Truth,
        };
    }
    pub mod pipeline {
        pub use crate::pipeline::spawn;
        pub mod consumer {
            pub use crate::pipeline::consumer::Consumer;
        }
        pub mod reconcile {
            pub use crate::pipeline::reconcile::pass;
        }
    }
    pub mod probe {
        pub mod scrape {
            pub use crate::probe::scrape::{parse, sum, Page};
        }
    }
    pub mod rehearsal {
        pub use crate::rehearsal::{
            check_host, endpoint, Endpoint, OracleSource, OrdersQuery, Reader, Row, Tally,
            TargetError, Use,
        };
        pub mod scalar {
            pub use crate::rehearsal::scalar::read;
        }
    }
    pub mod runner {
        pub use crate::runner::{execute, Cell, RunPlan, GIT_COMMIT};
    }
    pub mod scenarios {
        pub use crate::scenarios::{resolve, Bundled, BUNDLED};
    }
    pub mod selftest {
        pub use crate::selftest::{run, Case, CaseResult, Setup};
    }
    pub mod services {
        pub mod leftovers {
            pub use crate::services::leftovers::{host_tag, owned_name, owner_of, Owner, SAFE_AGE};
        }
        pub mod managed {
            pub use crate::services::managed::{ManagedSet, ServerKind, ServerOptions};
            pub mod binaries {
                pub use crate::services::managed::binaries::find;
            }
            pub mod kinds {
                pub use crate::services::managed::kinds::answers;
            }
            pub mod process {
                pub use crate::services::managed::process::{alive, descendants, SERVICES_USER};
            }
        }
    }
    pub mod shop {
        pub use crate::shop::{Application, ServeConfig, ShopConfig, ShopKnobs, TrustedProxies};
        pub mod workers {
            pub use crate::shop::workers::cores;
        }
        pub mod listener {
            pub use crate::shop::listener::Limits;
        }
        pub mod ready {
            pub use crate::shop::ready::{Readiness, ReadyPipe};
        }
        pub mod telemetry {
            pub use crate::shop::telemetry::METRICS;
        }
    }
    pub mod store {
        pub use crate::store::{
            Backend, PersistEvent, PersistKind, PoolSettings, Store, Transition,
        };
        pub mod redis_conn {
            pub use crate::store::redis_conn::RedisConn;
        }
    }
    pub mod traffic {
        pub use crate::traffic::Scenario;
        pub mod attack {
            pub use crate::traffic::attack::{fire, GooseCrossCheck, Sending};
        }
        pub mod mapping {
            pub use crate::traffic::mapping::Mapping;
        }
        pub mod recorder {
            pub use crate::traffic::recorder::{
                new_histogram, Ack, Answer, AnswerClass, Attempt, Kind, Measurements, Recorder,
                Told,
            };
        }
        pub mod schedule {
            pub use crate::traffic::schedule::{build, AfterOrder, BuyerPlan};
        }
        pub mod target {
            pub use crate::traffic::target::{Sale, Target, Targets};
        }
    }
}
