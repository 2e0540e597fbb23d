//! Adapters that implement the `jobs` ports: Compute Engine through the official client,
//! Swarming through pRPC (both with Google access tokens from `google_auth`), the datastore on
//! Redis, identity token keys over HTTP, Compute Engine's prices from the Cloud Billing Catalog,
//! and the system clock; [`backends`] opens the store, queues and rate-limit buckets on Redis or
//! in memory.

pub mod backends;
pub mod billing;
pub mod gce;
pub mod gce_resource;
mod gce_retries;
pub mod google_auth;
pub mod keys;
pub mod redis_auth;
pub mod redis_store;
pub mod swarming;

/// The system clock (the jobs crate's, the one wall-clock read of the service).
pub use gce_backend_jobs::ports::clock::SystemClock;

/// Installs the process-wide TLS crypto provider (ring), which the HTTP clients need even for
/// plain `http://` endpoints. Safe to call more than once.
pub fn install_crypto() {
    gce_backend_queues::link::install_crypto();
}
