//! The traffic model: scenario files → a seeded plan of buyers → goose users that fire it.

pub mod attack;
pub mod buyers_csv;
pub mod mapping;
pub mod recorder;
pub mod scenario;
pub mod schedule;
pub mod target;

pub use scenario::Scenario;
