//! The operator API's operations, typed: what an HTTP layer calls (it adds auth, owners and
//! JSON). Each re-reads, compares, acts and records with a compare-and-set, like a handler, and
//! hands the convergence to the pipeline by pushing its tasks.
//!
//! * [`configs`]: Configs made over the API (apply, delete), any Config's amount and pause, the
//!   global pause.
//! * [`plan`](mod@plan): what a change would do, changing nothing.
//! * [`vms`]: one VM, a page of a Config's VMs, recycling a VM.
//! * [`queues`]: retrying and purging tasks.
//! * [`budgets`]: tenants' budgets as the settings give them, each change in the audit trail.
//!
//! Every change an operation makes is recorded in the audit trail by that operation, with the
//! actor its caller names (the API's token, a Config file): one place per action.

pub mod budgets;
pub mod configs;
pub mod plan;
pub mod queues;
pub mod register;
mod shared;
pub mod vms;

pub use configs::{
    Must, apply, apply_expecting, delete, pause, pause_all, paused_all, resume, resume_all, set_amount,
};
pub use plan::plan;
pub use vms::{list_vms, recycle, vm};

pub use shared::{Actor, MAX_PAGE, OpError, managed_by_list};
