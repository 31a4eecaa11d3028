//! One integration-test binary (links once): real PostgreSQL, MySQL/MariaDB and Redis.

mod bad_input;
mod concurrency;
mod deploy;
mod durability;
mod edge;
mod faults;
mod gate;
mod helpers;
mod hot_row;
mod idempotency;
mod judge;
mod k8s;
mod live;
mod orders;
mod pipeline_faults;
mod redirects;
mod redis_lua;
mod rehearsal;
mod report_contents;
mod reports;
mod rewarm;
mod runs;
mod shard;
mod stand_in;
mod store;
mod stream_bounds;
