//! What the work is: the reconcile logic of gce-backend.
//!
//! Independent, idempotent cron jobs ([`cron`]) fan out per-entity tasks onto queues; each task's
//! handler ([`tasks`]) re-reads the records and moves one GCE instance or Swarming bot one step
//! closer to its Config. Failures leave no inconsistent state: the next run (a retry, a
//! follow-up, or the next cron tick) picks up where the last one stopped.
//!
//! # Layout
//!
//! The root holds the Config as written (`config`), the records (`model`), the ports, the
//! machinery's core (`error`, `env`, `ctx`, `providers`) and four wings named for what they
//! decide, each a folder whose `mod.rs` says what it holds: `placement` (where a new VM goes and
//! on what), `safety` (what holds work back), `fleet` (how VM records change) and `cost` (what
//! VMs cost and may cost); `demand` holds a Swarming server's work and what it asks for. A
//! concept's record and its rules live side by side in its wing (`safety::breaker` and its
//! state on the Config record, `safety::breaker::state`), at the floors each one needs.
//!
//! Floors, bottom to top, one module a line. A module imports only from the floors below it and
//! from the lines above it on its own floor, never up (`scripts/floors jobs/src` finds no cycle):
//!
//! 1. Records and pure rules
//!    * `placement`, `safety`, `fleet`, `cost`: the wings' `mod.rs`, which only name their parts.
//!    * `model::unknown`: fields another build wrote that this one does not know, kept and
//!      written back; what a person types read strictly.
//!    * `model::naming`: VM ids (`<prefix>-<index>`) and hostnames.
//!    * `identity`: Compute Engine instance identity tokens, checked against Google's keys.
//!    * `safety::episodes`: conditions holding work back, logged once per change of state.
//!    * `config`: the Config as operators write it (its ranked machine types too), its units, the
//!      settings it is checked against (trust, providers, limits, timings) and every rule of it.
//!    * `cost::prices`: Compute Engine's public SKUs as prices per hour of what a VM uses (machine
//!      type, Spot, disks, a suspended VM's state); what has no SKU is unpriced, never free. The
//!      price book: the SKUs as read, where and when (the Catalog, or the dated snapshot).
//!    * `placement::spot::state`: a Spot pool's failover state on its Config record.
//!    * `safety::breaker::state`: the circuit breaker's state on a Config record, and its hold.
//!    * `fleet::rollout::state`: the rolling-update mark on a Config record.
//!    * `cost::ledger`: what a VM is billed as over time, and its Config's ledger of it.
//!    * `demand::reading`: a demand-driven Config's last reading of its work and its target.
//!    * `model::format`: record formats: which build may act on a stored Config or VM record.
//!    * `model::listed`: a static pool's slots (which VM index each listed hostname holds).
//!    * `model::parked`: a VM kept warm (suspended or stopped beyond its Config's target).
//!    * `model::resources`: a Config's per-pool resources (an instance template).
//!    * `model::kept`: errors, backoffs, counts and mark spaces kept on records.
//!    * `model::records`: the Config, VM, pause and tenant records.
//!    * `fleet::status::view`: what operators see of a Config, and the errors of Config files.
//!    * `model`: the rest of the stored records (bots, audit entries, samples, a Config's
//!      per-pool resources) and the rules on one record (wanted, kept, outdated, unused).
//!    * `metrics`: what the reconcile logic measures.
//!    * `work`: each queue's payload (ids only), [`work::Next`], and which Config a task is about.
//! 2. Ports
//!    * `ports`: Store, Compute, Bots, Clock, Keys and PriceSource (the Billing Catalog); Compute
//!      and Bots guarded per server and project and rate-limited per project.
//!    * `store`: the in-memory Store (the embedded default, tests).
//! 3. The machinery handlers share
//!    * `error`: [`TaskError`] and its one classification.
//!    * `placement::catalog`: what Compute Engine offers a project (zones, disk types), cached.
//!    * `env`: [`Env`]: the ports (side effects), the settings and what the machinery shares;
//!      push a task, record on a Config's status.
//!    * `fleet::meter`: the one way VM records are written: what each is billed as, and its
//!      Config's ledger changed with the write (exactly once).
//!    * `fleet::counts`: a Config's counts from the store's sums, O(1).
//!    * `fleet::writes`: compare-and-set writes of records; a VM record that does not decode
//!      quarantined.
//!    * `demand`: a Swarming server's work read for its demand-driven Configs (one count per
//!      dimension set, each task counted once) and each one's target.
//!    * `safety::pause`: the one rule of pause and hold, and waking what a pause held back.
//!    * `placement::backoff`: backoffs of a (project, zone), or a machine type in it, after
//!      failures to create.
//!    * `placement::ranks`: which of a Config's ranked machine types a new VM gets, and when one
//!      not sent yet is made again on another rank or zone.
//!    * `placement::zones`: which zone a multi-zone Config's new VM goes to.
//!    * `safety::heal`: indexes and sums rebuilt from the VM records when unusable or wrong.
//!    * `safety::breaker`: a Config's circuit breaker (failed VMs in a row stop replacement;
//!      canaries).
//!    * `placement::spot`: a Spot pool's failover (preemptions and refusals counted; standard VMs
//!      for a cooldown).
//!    * `cost::spend`: what each Config and tenant has spent and costs now (the ledgers read),
//!      the one budget rule: how many new VMs a tenant's limits let a Config make; and showback
//!      (`cost::spend::report`): per tenant and Config, a month and the one before.
//!    * `fleet::status`: the read model operators see.
//!    * `fleet::lifecycle`: a VM's shared steps (made, faulted, replaced, drained, dropped).
//!    * `fleet::rollout`: rolling updates of VMs made from older instance attributes.
//!    * `providers`: where machines come from: the contract (one machine made, removed, checked;
//!      how a batch of new VMs is sent, whether a zone is scanned for stopped machines, lost
//!      records found, per-pool resources and their audit, each with a default), Compute Engine
//!      (inserts and bulks, the zone scan, instance templates and their audit), static machines,
//!      and the registry that hands each provider its work.
//!    * `ctx`: [`Ctx`], the [`Env`] and the providers: what the top floor gets.
//!    * `fleet::making`: a VM record made, the one way (`create_vm`'s one, `expand_config`'s
//!      batches), and handed on to what sends it, as its provider says.
//! 4. The top, imported by nothing but the binary
//!    * `tasks`: one handler per queue, and the registry of queues.
//!    * `cron`: one function per cron job, and their table.
//!    * `operate`: the operator API's operations (Configs, amounts, pauses, plans, VMs, queue
//!      retries and purges), each recorded in the audit trail.
//!
//! `testing` (feature `testing`) helps tests only.

pub mod config;
pub mod cost;
pub mod cron;
pub mod ctx;
pub mod demand;
pub mod env;
pub mod error;
pub mod fleet;
pub mod identity;
pub mod metrics;
pub mod model;
pub mod operate;
pub mod placement;
pub mod ports;
pub mod providers;
pub mod safety;
pub mod store;
pub mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod work;

pub use config::{Limits, Timing};
pub use ctx::Ctx;
pub use env::{Env, Queues};
pub use error::{Class, TaskError};
