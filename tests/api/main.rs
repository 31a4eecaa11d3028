//! One integration-test binary (links once): real PostgreSQL, MySQL/MariaDB and Redis.

mod bad_input;
mod concurrency;
mod helpers;
mod orders;
mod reports;
