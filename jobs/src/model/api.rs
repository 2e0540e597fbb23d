//! What the operator API shows and is asked: a VM's derived state and view, and the input and
//! result of a plan (a dry run of a Config change).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::bots::Observed;
use super::records::{Pause, Vm};
use crate::config::Config;

/// The state of a VM as the API lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VmState {
    /// No instance yet (waiting to be sent, or being inserted).
    Creating,
    /// Its instance exists; its bot has not connected yet.
    Running,
    /// Its bot connected and nothing is wrong.
    Connected,
    /// Kept warm: suspended or stopped by its Config's warm pool, or being so (a VM made for the
    /// pool is running or connected until it is asked to park).
    Warm,
    /// Being retired on purpose: drained, its bot asked to terminate, or its instance being
    /// deleted.
    Draining,
    /// A fault was found (bot dead, instance down, bot never connected).
    Unhealthy,
}

impl VmState {
    /// Every state, in the order of a VM's life.
    pub const ALL: [VmState; 6] = [
        VmState::Creating,
        VmState::Running,
        VmState::Connected,
        VmState::Warm,
        VmState::Draining,
        VmState::Unhealthy,
    ];

    /// The state of `vm`. A fault wins (one is never recorded on a VM retired on purpose, and
    /// status counts it as dead or unhealthy), then retirement, then the warm pool, then how far
    /// creation got.
    pub fn of(vm: &Vm) -> VmState {
        if vm.fault.is_some() {
            VmState::Unhealthy
        } else if vm.drained || vm.terminate_sent.is_some() || vm.destroying.is_some() {
            VmState::Draining
        } else if vm.parked.as_ref().is_some_and(|p| p.waking.is_none()) {
            VmState::Warm
        } else if vm.instance.is_none() {
            VmState::Creating
        } else if vm.connected.is_some() {
            VmState::Connected
        } else {
            VmState::Running
        }
    }

    /// Its name (`creating`, …).
    pub fn name(self) -> &'static str {
        match self {
            VmState::Creating => "creating",
            VmState::Running => "running",
            VmState::Connected => "connected",
            VmState::Warm => "warm",
            VmState::Draining => "draining",
            VmState::Unhealthy => "unhealthy",
        }
    }
}

impl std::fmt::Display for VmState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A VM state name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown VM state {0:?}: one of creating, running, connected, warm, draining, unhealthy")]
pub struct UnknownState(pub String);

/// Its message, for callers that report errors as text.
impl From<UnknownState> for String {
    fn from(e: UnknownState) -> String {
        e.to_string()
    }
}

impl std::str::FromStr for VmState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VmState::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// What a VM's bot is, as its last observation (or the record) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BotState {
    /// Connected and well.
    Connected,
    /// Asked to terminate (after its current task).
    Terminating,
    /// Swarming counts it dead.
    Dead,
    /// Deleted from Swarming.
    Deleted,
}

impl BotState {
    /// The state of `vm`'s bot: its observation first (deleted, dead, terminating, else
    /// connected), else connected when the record says it connected; `None`: no bot seen yet.
    pub fn of(vm: &Vm, bot: Option<&Observed>) -> Option<BotState> {
        let Some(b) = bot.map(|o| &o.bot) else {
            return vm.connected.map(|_| BotState::Connected);
        };
        Some(if b.deleted {
            BotState::Deleted
        } else if b.is_dead {
            BotState::Dead
        } else if !b.termination_task_id.is_empty() {
            BotState::Terminating
        } else {
            BotState::Connected
        })
    }
}

/// A VM as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmView {
    /// The record.
    pub vm: Vm,
    /// Its state, derived from the record.
    pub state: VmState,
    /// When its incarnation is due for replacement (once it has an instance).
    pub deadline: Option<DateTime<Utc>>,
    /// The last observation of its bot.
    pub bot: Option<Observed>,
    /// Its bot's state ([`BotState::of`]); `None`: no bot seen yet.
    #[serde(default)]
    pub bot_state: Option<BotState>,
    /// Made from other instance attributes (or zones) than its Config has now
    /// ([`crate::model::outdated`]): a rolling update replaces it.
    #[serde(default)]
    pub outdated: bool,
    /// While it is `creating`: the task making it (its attempts, when it runs next, its last
    /// error); `None` otherwise, or when no task works on it now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<VmWork>,
}

impl VmView {
    /// The view of `vm`, its bot last observed as `bot` (neither outdated nor worked on: the
    /// operator API's view sets both).
    pub fn of(vm: Vm, bot: Option<Observed>) -> Self {
        let (state, deadline, bot_state) = (VmState::of(&vm), vm.deadline(), BotState::of(&vm, bot.as_ref()));
        VmView { vm, state, deadline, bot, bot_state, outdated: false, work: None }
    }
}

/// The task working on a VM now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VmWork {
    /// Its queue (`create_vm`, `create_instance`).
    pub queue: String,
    /// `pending` or `running`.
    pub state: String,
    /// Runs started so far.
    pub attempts: u32,
    /// While it waits: when it runs next (a retry after a failed run, or a look again later).
    pub next_run: Option<DateTime<Utc>>,
    /// The error of its last failed run.
    pub last_error: Option<String>,
}

/// What planConfig is asked: a Config to apply, an amount to set, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    /// The Config as it would be applied.
    #[serde(default)]
    pub config: Option<Config>,
    /// The amount as it would be set.
    #[serde(default)]
    pub amount: Option<u32>,
}

/// What applying a [`PlanInput`] would do. Every VM of the Config is named once: in `create`,
/// `drain`, `replace`, `recycle`, `keep` or `warm` (a rolling update's surge, made for its length
/// only, in `replacement`; a VM made for the warm pool in `create` and in `warm`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// The Config.
    pub prefix: String,
    /// The amount it would target, clamped by the Config's amount rules now.
    pub amount: u32,
    /// VM ids it would create (by index).
    pub create: Vec<String>,
    /// VM ids it would drain for good (no longer wanted: idle ones first, or off a static pool's
    /// list).
    pub drain: Vec<String>,
    /// VM ids it would keep warm (suspended or stopped by its warm pool): VMs it has, rather than
    /// drain them, and VMs it makes for the pool (those are in `create` too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warm: Vec<String>,
    /// VM ids it would replace now (each drained after its task, then made again under its id
    /// with the new settings), in the order the replacement takes them; how: `replacement` (none
    /// for a VM already drained, which is made again once it is gone).
    #[serde(default)]
    pub replace: Vec<String>,
    /// VMs made again with the Config's settings at the end of their lifetime: those made from
    /// older instance attributes under update mode `on_lifetime`, and those past it already
    /// (unless a pause or an open breaker holds them).
    #[serde(default)]
    pub recycle: Vec<Recycle>,
    /// VM ids it would keep as they are.
    pub keep: Vec<String>,
    /// How `replace` proceeds (absent when nothing is replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement: Option<Replacement>,
    /// Changed fields of the Config and whom each affects.
    pub changes: Vec<Change>,
    /// Why it could not be applied (validation and ownership errors); empty when it could.
    pub problems: Vec<String>,
    /// The pause in force (the Config's, else the global one): nothing is created until it
    /// is lifted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Pause>,
    /// What it would cost per hour, and whether its tenant's budget holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<PlanCost>,
}

/// What a plan would cost per hour, at the price book in force.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanCost {
    /// What the Config's VMs cost per hour now, as billed.
    pub now_per_hour: crate::config::Usd,
    /// What one running VM of it would cost per hour (the dearest of its machine types, its
    /// disks); absent when `unpriced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_vm: Option<crate::config::Usd>,
    /// Its amount running, per hour; absent when `unpriced`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_per_hour: Option<crate::config::Usd>,
    /// Why it cannot be priced (never shown as free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpriced: Option<String>,
    /// Its tenant's budget, if it sets one: whether it holds the VMs to create (`holds`) and the
    /// numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<PlanBudget>,
}

/// Whether a tenant's budget lets a plan's new VMs be made now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanBudget {
    /// True when every VM the plan creates may be made now.
    pub holds: bool,
    /// How many of them may (the rest wait, held, until the tenant's cost leaves room).
    pub room: u64,
    /// The tenant's cost and limit, in words.
    pub said: String,
}

/// A VM replaced at the end of its lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Recycle {
    /// The VM id.
    pub id: String,
    /// When its lifetime ends (absent while it has no instance yet: it counts from its making).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<DateTime<Utc>>,
}

/// Why VMs are replaced now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplacedBy {
    /// Their instance attributes (or zone) changed and the update mode is `rolling`.
    RollingUpdate,
    /// The Config's provider changed: the new one makes each again.
    ProviderChange,
}

/// How a plan's replacement proceeds: in waves of at most `at_once` VMs, in the order of
/// `replace`, each wave once the last one's VMs are back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Replacement {
    /// Why.
    pub by: ReplacedBy,
    /// Most VMs being replaced at a time (a rolling update: its surge plus its unavailability;
    /// a provider change: a tenth of the amount, at least one).
    pub at_once: u32,
    /// A rolling update: the VM ids made first from the new attributes, beyond the amount, and
    /// drained once every VM is replaced.
    #[serde(default)]
    pub surge: Vec<String>,
    /// A rolling update: the connected bots it keeps (a VM is retired only while more are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_connected: Option<u32>,
}

/// One changed field of the Config and whom it affects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    /// The field (`amount`, `attributes.machine_type`, `current_amount`, …).
    pub field: String,
    /// Its value now (null when unset or the Config is new).
    pub from: serde_json::Value,
    /// Its value after.
    pub to: serde_json::Value,
    /// Whom: [`Change::NEW_INSTANCES`], [`Change::THE_POOL`], [`Change::REPLACED_NOW`] or
    /// [`Change::AT_LIFETIME`].
    pub applies_to: String,
}

impl Change {
    /// A field copied onto each VM when it is made (lifetime, timeout, Swarming server; instance
    /// attributes no VM is made from yet): existing VMs keep theirs until they are replaced.
    pub const NEW_INSTANCES: &str = "new instances";
    /// A field the pool follows at once (amount, owners, update policy).
    pub const THE_POOL: &str = "the pool";
    /// Instance attributes (or zones, or the provider) that existing VMs lose: they are replaced
    /// now (the plan's `replace`).
    pub const REPLACED_NOW: &str = "existing VMs, replaced now";
    /// Instance attributes that existing VMs keep until the end of their lifetime (update mode
    /// `on_lifetime`; the plan's `recycle`).
    pub const AT_LIFETIME: &str = "existing VMs, at the end of their lifetime";
}

#[cfg(test)]
mod tests;
