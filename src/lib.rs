//! gce-backend: the service's edges: adapters for the `jobs` ports, the composition root
//! (`app`), the cron scheduler, the workers, the simulator, and the queue demo.
//!
//! * [`app`]: `gce-backend run`; [`settings`]: the service settings file; [`scheduler`]: cron.
//! * [`adapters`]: Compute (official client), Swarming (pRPC), Redis store, system clock.
//! * [`demo`]: the queue demo (`gce-backend queue-demo`); [`metrics`]: `/metrics`.
//! * [`ops`]: operator commands (`status`, `queue`); [`out`]: output that survives a closed pipe.
//! * [`sim`]: the simulator (the `gce-backend-sim` crate), served by `gce-backend sim`.
//! * [`workers`]: apalis workers over the queues, one per pipeline queue; [`watch`]: the configs
//!   directory watched, so a file written is imported at once.

pub mod adapters;
pub mod api;
pub mod app;
pub mod backends;
pub mod cli;
pub mod command;
pub mod demo;
pub mod metrics;
pub mod ops;
pub mod out;
pub mod scheduler;
pub mod settings;
pub mod watch;
pub mod workers;

pub use gce_backend_sim as sim;
