//! Config: one pool of VMs, as operators write it (YAML or JSON, or LUCI's `vms.cfg`), with its
//! validation, durations and the amount schedule (LUCI `config.proto` fields, luci-gce.md §2.1–2.2
//! and §7.4).
//!
//! Floors, bottom to top: `units` (durations, amounts, the error), `names` and `attributes` and
//! `policy` and `settings`; `spec` (the Config); `placement` (its zone, zones or region) and `ranks` (its ranked machine types); `textproto` (the text format LUCI writes in);
//! `luci` (LUCI's `vms.cfg` read as Configs, and written back); `trust` and `providers` (what
//! the settings let a Config name); `validate` (every rule of a Config); `mistakes` (what a
//! parser says, every mistake at once, no value quoted); `yaml` (Config files as YAML text, read
//! and written); `file` (a Config file's text of either kind, read).

mod attributes;
pub mod file;
pub mod luci;
mod mistakes;
pub mod names;
mod placement;
mod policy;
pub mod providers;
mod settings;
mod spec;
pub mod textproto;
pub mod trust;
mod units;
mod validate;
mod yaml;

pub use attributes::*;
pub use names::{bounds, check_endpoint, prefixes_clash, valid_gce_name, valid_host, valid_project};
pub use placement::{region_of, valid_region};
pub use policy::*;
mod ranks;
pub use ranks::{MAX_RANKS, short_machine_type};
pub use settings::{Limits, Timing};
pub use spec::*;
pub use trust::{Origin, SwarmingServers, Tenant, Trust};
pub use units::{Amount, ConfigError, ConfigErrors, Day, Schedule, Secs, TimeOfDay, Usd};
pub use validate::{SWARMING_SERVER_KEY, check_prefixes, validate_all};
pub use yaml::check_nesting;

#[cfg(test)]
mod tests;
