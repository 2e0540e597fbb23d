//! The ports the reconcile logic calls: the datastore, Compute Engine, Swarming and the clock.
//! Adapters live in the root crate (Redis, the official GCE client, pRPC); in-memory ones here.

pub mod bots;
pub mod clock;
pub mod compute;
pub mod store;
