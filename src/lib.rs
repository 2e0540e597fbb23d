//! gce-backend: the service's edges: adapters for the `jobs` ports, the service that wires them
//! and runs workers, cron and the operator's API, and the command line.
//!
//! Layout, floors bottom to top (a module imports only from floors below it, never up, and no
//! two files import each other):
//!
//! 1. Records and plain helpers: [`error`] (a usage mistake, exit code 2), [`out`] (terminal
//!    output that survives a closed pipe), [`settings`] (the service settings file).
//! 2. Adapters on the `jobs` ports: [`adapters`] (Compute through the official client, Swarming
//!    pRPC, the Redis store, identity keys over HTTP, the system clock; `backends`: store,
//!    queues and rate-limit buckets on Redis or in memory).
//! 3. The `/metrics` collection: [`metrics`] (what the `/metrics` endpoint serves).
//! 4. The operator's HTTP API: [`api`] (methods, references, tokens, the dashboard's files).
//! 5. The service: [`server`] (options, the wiring into the context, lifecycle and signals,
//!    listeners, workers, cron scheduler, watches, progress lines; `start` is the composition
//!    root).
//! 6. The command line: [`cli`] (clap commands; the API's client and tables; `recover`, the
//!    one command that reads Redis directly).
//!
//! [`sim`] is the simulator (the `gce-backend-sim` crate), served by `gce-backend sim` and by
//! `run` when no endpoint is given.

pub mod error;
pub mod out;
pub mod settings;

pub mod adapters;

pub mod metrics;

pub mod api;

pub mod server;

pub mod cli;

pub use gce_backend_sim as sim;
