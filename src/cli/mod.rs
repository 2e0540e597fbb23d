//! The command line of the `gce-backend` binary. It lives in the library, so its code is compiled
//! once, here; the binary only calls [`main`].
//!
//! Floors, bottom to top (no file imports one above it):
//! * `logs`: the JSON log line.
//! * [`client`]: the API's client (reads the API reference, calls any method by name);
//!   `render`: the human tables; [`convert`]: LUCI's `vms.cfg` to YAML and back (local).
//! * [`call`]: what those commands share: where the API is, one call and every page, a Config
//!   read from a file, a confirmation, a table or JSON.
//! * [`operator`]: the operator's commands over the API (`status`, `configs`, `vms`, `queues`,
//!   `api`); [`spend`]: showback over the API, and its table; [`recover`]: the few that read
//!   Redis directly, for when the API is down.
//! * [`command`]: the clap command line and `main`: `run`, `sim`, `token` and the above.

pub mod call;
pub mod client;
pub mod command;
pub mod convert;
mod logs;
pub mod operator;
pub mod recover;
mod render;
pub mod spend;

pub use command::main;
