//! The simulator through real clients: Compute Engine REST through the official
//! google-cloud-compute-v1 client (and the Python one), Swarming pRPC through reqwest.

/// Harness: an in-process simulator, the official clients pointed at it, a pRPC client.
mod support;

/// The admin API at scale: summary and paged state.
mod admin;
/// Google authentication: the metadata server, the token endpoint, refusals as Google and LUCI.
mod auth;
/// The Cloud Billing Catalog API from the price snapshot.
mod billing;
/// Request bodies checked against Compute's published schema.
mod bodies;
/// bulkInsert, zonal and regional, and instance templates.
mod bulk;
/// Compute Engine REST.
mod compute;
/// API rate quotas and the clock moved ahead.
mod quota;
/// Suspend/resume and stop/start, through the official Rust and Python clients.
mod suspend;
/// Swarming pRPC.
mod swarming;
/// Swarming pRPC as luci-go answers it: statuses, hidden messages, timestamps, cursors, gzip.
mod swarming_wire;
/// Task traces: the player and the generator.
mod trace;
/// Tasks on bots: dimensions, FIFO, counts, termination, interruptions.
mod work;
