//! The simulator through real clients: Compute Engine REST through the official
//! google-cloud-compute-v1 client, Swarming pRPC through reqwest.

/// Harness: an in-process simulator, the official clients pointed at it, a pRPC client.
mod support;

/// The admin API at scale: summary and paged state.
mod admin;
/// Compute Engine REST.
mod compute;
/// Swarming pRPC.
mod swarming;
