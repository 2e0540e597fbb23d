//! What the work is: the reconcile logic of gce-backend.
//!
//! Independent, idempotent cron jobs ([`cron`]) fan out per-entity tasks onto queues; each task's
//! handler ([`tasks`]) re-reads the records and moves one GCE instance or Swarming bot one step
//! closer to its Config. Failures leave no inconsistent state: the next run (a retry, a
//! follow-up, or the next cron tick) picks up where the last one stopped.
//!
//! * [`config`]: the Config model, its validation and amount schedules.
//! * [`naming`]: VM ids and hostnames.
//! * [`model`]: stored records (Config records, VMs, bot observations, status).
//! * [`ports`]: Store, Compute, Bots, Clock; [`store::memory`] is the in-memory Store.
//! * [`ctx`]: the context handlers get; [`error`]: their error and its classification.
//! * [`status`]: the read model operators see (counts, errors, state, file errors).
//! * [`breaker`]: a Config's circuit breaker (failed VMs in a row stop replacement; canaries).
//! * [`heal`]: rebuilding indexes and sums from the VM records when they are unusable or wrong.
//! * [`episodes`]: a condition holding work back (open circuit, backed-off zone, …), logged
//!   once per change of state with a periodic summary, not once per task.
//! * [`backoff`]: backoffs of a (project, zone) or a Config after failures to create.
//! * [`catalog`]: what Compute Engine offers a project (zones, disk types), to check Configs.
//! * [`providers`]: where machines come from (the contract, Compute Engine, static machines).
//! * [`rollout`]: rolling updates of VMs made from older instance attributes.
//! * [`zones`]: which zone a multi-zone Config's new VM goes to.
//! * [`operate`]: the operator API's operations (Configs over the API, amounts, pauses, plans,
//!   VMs), typed, for an HTTP layer to call.

pub mod backoff;
pub mod breaker;
pub mod catalog;
pub mod config;
pub mod counts;
pub mod cron;
pub mod ctx;
pub mod env;
pub mod episodes;
pub mod error;
pub mod heal;
pub mod identity;
pub mod lifecycle;
pub mod metrics;
pub mod model;
pub mod naming;
pub mod operate;
pub mod pause;
pub mod ports;
pub mod providers;
pub mod rollout;
pub mod status;
pub mod store;
pub mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod work;
pub mod writes;
pub mod zones;

pub use config::{Limits, Timing};
pub use ctx::Ctx;
pub use env::{Env, Queues};
pub use error::{Class, TaskError};
