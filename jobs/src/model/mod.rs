//! Records the reconcile logic keeps: Config records, VMs, bot observations, pauses and
//! per-config status (counts, recent errors, backoff), the dashboard's time series, the audit
//! trail of operator actions (`model/audit.rs`), and the operator API's views (a VM's state and
//! view, a plan; kept in `model/api.rs`).

mod api;
mod audit;
mod bots;
pub mod breaker_state;
pub mod demand_reading;
pub mod format;
mod kept;
pub mod ledger;
mod listed;
pub mod parked;
mod records;
pub mod release;
mod resources;
pub mod rollout_mark;
mod series;
pub mod spot_state;
mod status_view;
mod wanted;

pub use api::{
    BotState, Change, Plan, PlanBudget, PlanCost, PlanInput, Recycle, ReplacedBy, Replacement, UnknownState,
    VmState, VmView, VmWork,
};
pub use audit::{AuditAction, AuditEntry, GLOBAL_AUDIT};
pub use bots::*;
pub use format::{FORMAT, Format, Formatted, Undecoded};
pub use kept::*;
pub use listed::Listed;
pub use records::*;
pub use resources::PoolResource;
pub use series::{KEEP_SAMPLES, Sample, Series};
pub use status_view::{ConfigState, ConfigStatus, FileError, FileProblem, RankStatus, ZoneStatus};
pub use wanted::outdated;
