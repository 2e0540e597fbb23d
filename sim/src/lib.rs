//! `gce-backend sim`: one HTTP server that speaks Compute Engine v1 REST (`gce.rs`), Swarming v2
//! pRPC (`swarming.rs`), the Cloud Billing Catalog API (`billing.rs`) and an admin API under
//! `/sim/` (`admin.rs`), over a simulated world (`world/`, typed state only) with faults
//! (`config.rs`). Each route file encodes its answers.
//!
//! Its HTTP server is the hardened one every listener of the service runs too (the
//! `gce-backend-listener` crate).
//!
//! Every request first advances the world to the current time, then may be delayed or failed
//! by the faults in force (drawn from the seeded generator), then is answered and counted by
//! method and status.
//!
//! # Layout
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up (`scripts/floors sim/src` finds no cycle):
//!
//! 1. Facts
//!    * `names`: names and their rules (regions of zones, resource names, hostnames, Swarming
//!      server keys, the agent's metadata items).
//!    * `keys`: the simulator's signing key, RS256 signing, its public JSON Web Key.
//!    * `dims`: Swarming dimensions, how a task's match a bot's, tag and dimension filters.
//!    * `trace`: task traces (JSON lines), their parser and a seeded generator.
//!    * `quota`: API rate quotas as settings (groups, limits, the `--quota` file).
//!    * `schema`: Compute's published schema of the request bodies (generated from the official
//!      client's model), and the check that refuses a field it does not have.
//!    * `bulk`: a bulkInsert's body, read and checked.
//!    * `auth`: Google authentication's settings, the scopes each API takes, a call's standing.
//!    * `config`: settings, bot groups and faults ([`SimConfig`], [`Faults`]).
//!    * `prices`: the dated snapshot of Compute Engine's list prices (the Catalog API's SKUs).
//! 2. The world (typed state, no wire formats)
//!    * `world::records`: the records of bulk inserts, templates and rate quotas.
//!    * `world::accounts`: the service account's tokens and every call's standing.
//!    * `world::model`: its records (instances, operations, bots, usage, API errors).
//!    * `world::counts`: counts by state, kept at every transition.
//!    * `world::filter`: Compute Engine list filters over instances.
//!    * `world`: the [`world::World`] and its timeline (events applied in time order).
//!    * `world::make`: how an instance is made (refusals, the instance, its insert operation).
//!    * `world::compute`: the world's Compute Engine methods (and an instance's token claims).
//!    * `world::swarming`: its Swarming methods (bots, tasks, events).
//!    * `world::machines`: static machines and their bots.
//!    * `world::tasks`: Swarming tasks, their queue and the idle bots that take them.
//!    * `world::suspend`: suspend/resume, stop/start, and the instance seconds billed.
//!    * `world::rate`: API rate quotas counted and enforced per project.
//!    * `world::templates`: instance templates.
//!    * `world::bulk`: bulkInsert (placement, ranked machine types, rollback).
//! 3. Machinery
//!    * `handle`: [`Sim`], the world behind its lock, faults on entering a call, call counts.
//!    * `gce_call`: how a Compute call is taken (quotas, faults, a body's schema check, the
//!      count) and Compute's error body.
//! 4. Routes and the agent
//!    * `gce`: Compute Engine v1 REST: instances, their operations, zones, regions.
//!    * `gce_bulk`: bulkInsert (zonal, regional), region and global operations, templates.
//!    * `prpc`: pRPC's JSON encoding (statuses, answers, request parsing).
//!    * `cursor`: Swarming's ListBots cursors (the last bot id, sealed).
//!    * `swarm_count`: Swarming's counts (CountTasks, CountBots) and dimension filters.
//!    * `swarming`: Swarming v2 pRPC.
//!    * `identity`: the published keys and instance identity tokens.
//!    * `billing`: the Cloud Billing Catalog API (services, Compute Engine's SKUs, paged) and
//!      Google's error body of its newer APIs.
//!    * `google`: the metadata server, the OAuth token endpoint, `/sim/auth`, and the guard that
//!      checks every Compute and Swarming call's token.
//!    * `work`: the admin API's work routes: tasks, bot groups, traces.
//!    * `summary`: what `/sim/summary` answers (counts, usage overall and per Config).
//!    * `admin`: the rest of the `/sim/` admin API.
//!    * `agent`: the on-VM agent's registrations.
//!    * this file: [`router`], [`serve`], [`spawn`].

pub mod admin;
pub mod agent;
pub mod auth;
pub mod billing;
pub mod bulk;
pub mod config;
mod cursor;
pub mod dims;
pub mod gce;
mod gce_bulk;
mod gce_call;
mod google;
mod handle;
pub mod identity;
pub mod keys;
pub mod names;
pub mod prices;
mod prpc;
pub mod quota;
pub mod schema;
pub mod summary;
mod swarm_count;
pub mod swarming;
pub mod trace;
pub mod work;
pub mod world;

use std::net::SocketAddr;

use axum::Router;
use tokio::net::TcpListener;

pub use config::{Faults, SimConfig};
pub use handle::Sim;

/// The simulator's routes.
pub fn router(sim: Sim) -> Router {
    Router::new()
        .merge(gce::routes())
        .merge(gce_bulk::routes())
        .merge(swarming::routes())
        .merge(admin::routes())
        .merge(work::routes())
        .merge(identity::routes())
        .merge(google::routes())
        .merge(billing::routes())
        .layer(axum::middleware::from_fn_with_state(sim.clone(), google::guard))
        .with_state(sim)
}

/// Serves `sim` on `listener` within `limits` until the process ends.
pub async fn serve(listener: TcpListener, sim: Sim, limits: gce_backend_listener::Limits) {
    tokio::spawn(agent::registrar(sim.clone()));
    gce_backend_listener::serve(listener, router(sim), limits, std::future::pending()).await
}

/// Starts a simulator on a free loopback port (tests, the embedded default); returns its address.
pub async fn spawn(cfg: SimConfig) -> std::io::Result<(SocketAddr, Sim)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let sim = Sim::new(cfg);
    let served = sim.clone();
    tokio::spawn(serve(listener, served, gce_backend_listener::Limits::default()));
    Ok((addr, sim))
}

/// Refuses a listen address off this machine unless `allow_remote`.
pub fn check_listen(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || allow_remote {
        Ok(())
    } else {
        Err(format!(
            "--listen {addr}: not a loopback address; the simulator has no authentication, pass --allow-remote to serve it anyway"
        ))
    }
}
