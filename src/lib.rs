//! gce-backend: the service's edges: adapters for the `jobs` ports, the service that wires them
//! and runs workers, cron and the operator's API, and the command line.
//!
//! # Layout
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up, and no two files import each other
//! (`scripts/floors src --layout` checks both):
//!
//! 1. Records and plain helpers
//!    * `error`: a usage mistake (exit code 2).
//!    * `out`: terminal output that survives a closed pipe.
//!    * `settings`: the service settings file.
//! 2. Adapters on the `jobs` ports
//!    * `adapters`: Compute through the official client, Swarming pRPC, Google access tokens
//!      (`google_auth`), the Redis store, identity keys over HTTP, the Cloud Billing Catalog
//!      (`billing`), the system clock; `backends`: store, queues and rate-limit buckets on Redis
//!      or in memory.
//! 3. The `/metrics` collection
//!    * `metrics::process`: this process's CPU, memory, threads and files, read from `/proc`.
//!    * `metrics::shared`: the state every process shares, read from the store when scraped.
//!    * `metrics`: what the `/metrics` endpoint serves.
//! 4. The operator's HTTP API ([`api`]), its own floors
//!    * `api::error`: the API's error shape and the layers that give every answer one.
//!    * `api::summary`: log lines summarised once a minute.
//!    * `api::urls`: the service's name and version in URLs, the URLs under a root.
//!    * `api::auth`: tokens, roles, owners and the role check.
//!    * `api::types`: the methods' inputs and outputs.
//!    * `api::listen`: the listener's request rates.
//!    * `api::io`: what a handler reads (JSON body, query) and answers.
//!    * `api::state`: [`api::Api`], what every handler shares.
//!    * `api::health`: `/healthz` and `/readyz`.
//!    * `api::configs`: the Config methods (and who may read a Config).
//!    * `api::queues`: the queue methods.
//!    * `api::vms`: the VM methods.
//!    * `api::register`: a VM's registration.
//!    * `api::series`: the dashboard's charts (a Config's and the queues' last hour).
//!    * `api::status`: `status`.
//!    * `api::spend`: `spend`, the showback report cut to what the caller may read.
//!    * `api::ui`: the dashboard's files and `whoami`.
//!    * `api::methods`: the one method table, and the routes made from it.
//!    * `api::reference`: the manifest, reference, schemas and OpenAPI made from the table.
//!    * `api`: the router, and the servers of the API and of `--metrics-listen`.
//! 5. The service
//!    * `server`: options, the wiring into the context, lifecycle and signals, listeners,
//!      workers, cron scheduler, watches, progress lines; `start` is the composition root.
//! 6. The command line
//!    * `cli`: clap commands; the API's client and tables; `recover`, the one command that
//!      reads Redis directly.
//!
//! [`sim`] is the simulator (the `gce-backend-sim` crate), served by `gce-backend sim` and by
//! `run` when no endpoint is given. Every listener, the simulator's too, runs the hardened HTTP
//! server of the `gce-backend-listener` crate.

pub mod error;
pub mod out;
pub mod settings;

pub mod adapters;

pub mod metrics;

pub mod api;

pub mod server;

pub mod cli;

pub use gce_backend_sim as sim;
