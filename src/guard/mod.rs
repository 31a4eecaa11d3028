//! Reaching what the harness does not own, guarded: every address it sends to passes the
//! loopback guard, and every statement of the user's runs read-only, as a role that can only
//! read, one number at a time.
//!
//! - [`http`]: the harness's own client, which follows no redirect; [`body`]: an answer read
//!   with a cap on what is kept, and a source's refused past its cap.
//! - `loopback`: the loopback guard, checked when the command line is read and again right
//!   before the first request or connection.
//! - `reader`: who the user's SQL runs as ([`Reader`]: a role that can only read, created for
//!   the run when the credentials can do more).
//! - `read_only`: one statement inside a read-only transaction under a statement timeout.
//! - [`scalar`]: a scalar query (an oracle's, a `[watch]` gauge's), run as written, read-only,
//!   on a connection of its own; [`sqlstate`]: a database error as SQLSTATE and kind, never
//!   the server's message.
//!
//! The rehearsal's oracle, the order rows and `[watch]` call in; nothing here knows who asks.

pub mod body;
pub mod http;
mod loopback;
pub mod read_only;
mod reader;
pub mod scalar;
pub mod sqlstate;

pub use loopback::{
    check_again, check_host, check_target, check_url, endpoint, is_loopback_host, resolve_again,
    Endpoint, TargetError, Use,
};
pub use reader::Reader;
pub use scalar::ScalarError;
