//! gce-backend: the service's edges (binary subcommands, adapters, the queue demo).
//!
//! * [`demo`]: the queue demo that `gce-backend run` runs until the reconcile pipeline lands.
//! * [`workers`]: runs apalis workers over a [`gce_backend_queues::Queue`].

pub mod demo;
pub mod workers;
