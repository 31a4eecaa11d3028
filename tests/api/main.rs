//! One integration-test binary (links once): real PostgreSQL, MySQL/MariaDB and Redis.

mod bad_input;
mod concurrency;
mod durability;
mod edge;
mod gate;
mod helpers;
mod orders;
mod redis_lua;
mod rehearsal;
mod reports;
mod rewarm;
mod runs;
mod store;
