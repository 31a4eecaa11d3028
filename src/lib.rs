//! # oversell
//!
//! Reproduces, measures and gates oversell in flash sales: a reference shop with every
//! inventory strategy behind one switch, a goose traffic model, an oracle that audits the
//! databases against what every client was told, and reports.
//!
//! # Layout
//!
//! Each module's own doc says what it holds and who calls in; the house as a picture (rooms,
//! floors, who imports whom) is `farm-studio look`, and the tour for a reader is the book's
//! "How it works" (`docs/src/internals/how-it-works.md`). In one line: [`cli`] reads the command into a plan;
//! the runner fires the `traffic` model at the shop under test (`under_test`: the reference
//! [`shop`], or the user's at a URL) and the `oracle` audits the stores against the clients'
//! records; the [`report`] and the `gate` judge. Data flows one way: scenario → plan → traffic
//! → shop → stores; probes and the clients' records → oracle → report.

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
pub(crate) mod guard;
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
pub(crate) mod template;
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
    pub mod guard {
        pub use crate::guard::{check_host, endpoint, Endpoint, Reader, TargetError, Use};
        pub mod scalar {
            pub use crate::guard::scalar::read;
        }
    }
    pub mod rehearsal {
        pub use crate::rehearsal::{OracleSource, OrdersQuery, Row, Tally};
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
        pub use crate::store::autopipe::AutoPipe;
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
