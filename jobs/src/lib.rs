//! What the work is: the reconcile logic of gce-backend.
//!
//! Independent, idempotent cron jobs ([`cron`]) fan out per-entity tasks onto queues; each task's
//! handler ([`tasks`]) re-reads the records and moves one GCE instance or Swarming bot one step
//! closer to its Config. Failures leave no inconsistent state: the next run (a retry, a
//! follow-up, or the next cron tick) picks up where the last one stopped.
//!
//! # Layout
//!
//! The root holds the Config as written (`config`), the records (`model`), the ports and the
//! machinery's core (`error`, `env`, `ctx`, `providers`); the policy sits in wings named for what
//! they decide, each a folder whose `mod.rs` says what it holds: `records` (how records are
//! written and counted), `safety` (what holds work back), `placement` (where a new VM goes and on
//! what), `fleet` (a VM's steps and what operators see) and `spend` (what VMs cost and may cost).
//! A folder stands on one floor: a concept's part that is a record (the breaker's state, a Spot
//! pool's failover, the rollout mark, a demand reading, the ledger, the status view) is `model`'s,
//! named for what it is (`model::breaker_state`), and its rules are the wing's.
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up (`scripts/floors jobs/src` finds no cycle):
//!
//! 1. Records and pure rules
//!    * `unknown`: fields another build wrote that this one does not know, kept and written
//!      back; what a person types read strictly.
//!    * `naming`: VM ids (`<prefix>-<index>`) and hostnames.
//!    * `identity`: Compute Engine instance identity tokens, checked against Google's keys.
//!    * `episodes`: conditions holding work back, logged once per change of state.
//!    * `config`: the Config as operators write it (its ranked machine types too), its units, the
//!      settings it is checked against (trust, providers, limits, timings) and every rule of it.
//!    * `prices`: Compute Engine's public SKUs as prices per hour of what a VM uses (machine
//!      type, Spot, disks, a suspended VM's state); what has no SKU is unpriced, never free. The
//!      price book: the SKUs as read, where and when (the Catalog, or the dated snapshot).
//!    * `model`: the stored records (Config records, VMs, bots, pauses, errors, sums, the ledger
//!      of spend, samples, the breaker's, a Spot pool's and a rollout's state, a demand reading,
//!      a Config's per-pool resources, audit entries, the status view) and the rules on one
//!      record (wanted, kept, outdated, resources unused, what a VM is billed as).
//!    * `metrics`: what the reconcile logic measures.
//!    * `work`: each queue's payload (ids only), [`work::Next`], and which Config a task is about.
//! 2. Ports
//!    * `ports`: Store, Compute, Bots, Clock, Keys and PriceSource (the Billing Catalog); Compute
//!      and Bots guarded per server and project and rate-limited per project.
//!    * `store`: the in-memory Store (the embedded default, tests).
//! 3. The machinery handlers share
//!    * `error`: [`TaskError`] and its one classification.
//!    * `catalog`: what Compute Engine offers a project (zones, disk types), cached.
//!    * `env`: [`Env`]: the ports (side effects), the settings and what the machinery shares;
//!      push a task, record on a Config's status.
//!    * `records`: the one way records are written (compare-and-set, quarantine; each VM write
//!      moving its meter on and its Config's ledger with it) and a Config's counts, O(1).
//!    * `demand`: a Swarming server's work read for its demand-driven Configs (one count per
//!      dimension set, each task counted once) and each one's target.
//!    * `safety`: pause and hold, a Config's circuit breaker, indexes and sums healed.
//!    * `placement`: backoffs after failures to create, which rank and which zone a new VM gets,
//!      a Spot pool's failover.
//!    * `spend`: what each Config and tenant has spent and costs now (the ledgers read), the one
//!      budget rule: how many new VMs a tenant's limits let a Config make; and showback
//!      (`spend::report`): per tenant and Config, a month and the one before.
//!    * `fleet`: a VM's shared steps (made, faulted, replaced, drained, dropped), rolling updates,
//!      and the status operators see.
//!    * `providers`: where machines come from: the contract (one machine made, removed, checked;
//!      how a batch of new VMs is sent, whether a zone is scanned for stopped machines, lost
//!      records found, per-pool resources and their audit, each with a default), Compute Engine
//!      (inserts and bulks, the zone scan, instance templates and their audit), static machines,
//!      and the registry that hands each provider its work.
//!    * `ctx`: [`Ctx`], the [`Env`] and the providers: what the top floor gets.
//!    * `making`: a VM record made, the one way (`create_vm`'s one, `expand_config`'s batches),
//!      and handed on to what sends it, as its provider says.
//! 4. The top, imported by nothing but the binary
//!    * `tasks`: one handler per queue, and the registry of queues.
//!    * `cron`: one function per cron job, and their table.
//!    * `operate`: the operator API's operations (Configs, amounts, pauses, plans, VMs, queue
//!      retries and purges), each recorded in the audit trail.
//!
//! `testing` (feature `testing`) helps tests only.

pub mod catalog;
pub mod config;
pub mod cron;
pub mod ctx;
pub mod demand;
pub mod env;
pub mod episodes;
pub mod error;
pub mod fleet;
pub mod identity;
pub mod making;
pub mod metrics;
pub mod model;
pub mod naming;
pub mod operate;
pub mod placement;
pub mod ports;
pub mod prices;
pub mod providers;
pub mod records;
pub mod safety;
pub mod spend;
pub mod store;
pub mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod unknown;
pub mod work;

pub use config::{Limits, Timing};
pub use ctx::Ctx;
pub use env::{Env, Queues};
pub use error::{Class, TaskError};
