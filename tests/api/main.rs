//! One integration-test binary (links once): real PostgreSQL, MySQL/MariaDB and Redis.

mod bad_input;
mod concurrency;
mod deploy;
mod durability;
mod edge;
mod gate;
mod generator;
mod helpers;
mod idempotency;
mod judge;
mod live;
mod orders;
mod pipeline_faults;
mod redirects;
mod redis_lua;
mod rehearsal;
mod repeat;
mod report_contents;
mod reports;
mod rewarm;
mod runs;
mod stand_in;
mod store;
mod stream_bounds;
