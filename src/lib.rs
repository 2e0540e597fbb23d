//! gce-backend: the service's edges (binary subcommands, adapters, the queue demo).
//!
//! * [`demo`]: the queue demo that `gce-backend run` runs until the reconcile pipeline lands.
//! * [`sim`]: `gce-backend sim`, the Compute Engine + Swarming simulator.
//! * [`workers`]: runs apalis workers over a [`gce_backend_queues::Queue`].

pub mod demo;
pub mod sim;
pub mod workers;
