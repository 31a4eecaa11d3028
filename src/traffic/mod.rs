//! The traffic model: scenario files → a seeded plan of buyers → buyer tasks that fire it
//! through a pool of goose users; `adversary`: the `[adversarial]` scripts and `[client] retry`.

pub mod adversary;
pub mod attack;
pub mod buyers_csv;
pub mod goose_output;
pub mod login;
pub mod mapping;
pub mod recorder;
pub mod scenario;
pub mod schedule;
pub mod session;
pub mod target;

pub use scenario::Scenario;
