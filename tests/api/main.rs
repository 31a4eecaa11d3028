//! One integration-test binary (links once): real PostgreSQL, MySQL/MariaDB and Redis.

mod bad_input;
mod concurrency;
mod gate;
mod helpers;
mod orders;
mod pipeline_faults;
mod redis_lua;
mod rehearsal;
mod reports;
mod runs;
mod store;
mod stream_bounds;
