//! What the work is: the reconcile logic of gce-backend.
//!
//! Independent, idempotent cron jobs ([`cron`]) fan out per-entity tasks onto queues; each task's
//! handler ([`tasks`]) re-reads the records and moves one GCE instance or Swarming bot one step
//! closer to its Config. Failures leave no inconsistent state: the next run (a retry, a
//! follow-up, or the next cron tick) picks up where the last one stopped.
//!
//! # Layout
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
//!    * `config`: the Config as operators write it, its units, the settings it is checked
//!      against (trust, providers, limits, timings) and every rule of it.
//!    * `prices`: Compute Engine's public SKUs as prices per hour of what a VM uses (machine
//!      type, Spot, disks, a suspended VM's state); what has no SKU is unpriced, never free. The
//!      price book: the SKUs as read, where and when (the Catalog, or the dated snapshot).
//!    * `model`: the stored records (Config records, VMs, bots, pauses, errors, sums, ledgers of
//!      spend, samples, the breaker's and a rollout's state, a Config's per-pool resources, audit
//!      entries) and the rules on one record (wanted, kept, outdated, resources unused, what a VM
//!      is billed as).
//!    * `metrics`: what the reconcile logic measures.
//!    * `work`: each queue's payload (ids only), [`work::Next`], and which Config a task is about.
//! 2. Ports
//!    * `ports`: Store, Compute, Bots, Clock, Keys and PriceSource (the Billing Catalog); Compute
//!      and Bots guarded per server and project and rate-limited per project.
//!    * `store`: the in-memory Store (the embedded default, tests).
//! 3. The machinery handlers share
//!    * `error`: [`TaskError`] and its one classification.
//!    * `catalog`: what Compute Engine offers a project (zones, disk types), cached.
//!    * `env`: [`Env`], the ports and settings; push a task, record on a Config's status.
//!    * `meter`: the one way VM records are written: what each is billed as, and its Config's
//!      ledger changed with the write (exactly once).
//!    * `counts`: a Config's counts from the store's sums, O(1).
//!    * `writes`: compare-and-set writes of records; a VM record that does not decode quarantined.
//!    * `demand`: a Swarming server's work read for its demand-driven Configs (one count per
//!      dimension set, each task counted once) and each one's target.
//!    * `pause`: the one rule of pause and hold, and waking what a pause held back.
//!    * `backoff`: backoffs of a (project, zone), or a machine type in it, after failures to
//!      create.
//!    * `ranks`: which of a Config's ranked machine types a new VM gets, and when one not sent
//!      yet is made again on another rank or zone.
//!    * `zones`: which zone a multi-zone Config's new VM goes to.
//!    * `heal`: indexes and sums rebuilt from the VM records when unusable or wrong.
//!    * `breaker`: a Config's circuit breaker (failed VMs in a row stop replacement; canaries).
//!    * `spot`: a Spot pool's failover (preemptions and refusals counted; standard VMs for a
//!      cooldown).
//!    * `spend`: what each Config and tenant has spent and costs now (the ledgers read), the
//!      one budget rule: how many new VMs a tenant's limits let a Config make; and showback
//!      (`spend::report`): per tenant and Config, a month and the one before.
//!    * `status`: the read model operators see.
//!    * `lifecycle`: a VM's shared steps (made, faulted, replaced, drained, dropped).
//!    * `rollout`: rolling updates of VMs made from older instance attributes.
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

pub mod backoff;
pub mod breaker;
pub mod catalog;
pub mod config;
pub mod counts;
pub mod cron;
pub mod ctx;
pub mod demand;
pub mod env;
pub mod episodes;
pub mod error;
pub mod heal;
pub mod identity;
pub mod lifecycle;
pub mod making;
pub mod meter;
pub mod metrics;
pub mod model;
pub mod naming;
pub mod operate;
pub mod pause;
pub mod ports;
pub mod prices;
pub mod providers;
pub mod ranks;
pub mod rollout;
pub mod spend;
pub mod spot;
pub mod status;
pub mod store;
pub mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod unknown;
pub mod work;
pub mod writes;
pub mod zones;

pub use config::{Limits, Timing};
pub use ctx::Ctx;
pub use env::{Env, Queues};
pub use error::{Class, TaskError};
