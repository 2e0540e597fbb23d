//! The ports the reconcile logic calls: the datastore, Compute Engine, Swarming, the clock, the
//! keys identity tokens are signed with, and Compute Engine's prices (the Billing Catalog).
//! Adapters live in the root crate (Redis, the official GCE client, pRPC); in-memory ones here;
//! [`guarded`] puts the remote ones behind per-server and per-project [`guard::Guard`]s.

pub mod bots;
pub mod buckets;
pub mod clock;
pub mod compute;
pub mod guard;
pub mod guarded;
pub mod keys;
pub mod prices;
pub mod rated;
pub mod store;
