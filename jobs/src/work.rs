//! The work that travels on the queues: one payload type per queue (ids only), what a handler
//! asks for after a run ([`Next`]), which Config a task is about ([`config_of`]), and which queues
//! are spread over partitions ([`PARTITIONED`]).
//!
//! Payloads outlive deploys in Redis: each is pinned by a golden test (`jobs/tests/wire.rs`), and
//! a change here is a wire change. The handler of queue `x` is `tasks::x`, its payload the type
//! named after it here.

use gce_backend_queues::Task;
use serde::{Deserialize, Serialize};

/// What a handler asks for after a run: nothing more, or to look again after a while (the
/// worker pushes the same task again, delayed; a pending operation, a bot not yet connected, a
/// backoff, the next batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Done for now.
    Done,
    /// Run again after this delay (attempts are not spent on waiting).
    After(std::time::Duration),
}

impl Next {
    /// The sooner of two next steps (done is never sooner than a look again).
    pub fn sooner(self, other: Next) -> Next {
        match (self, other) {
            (Next::Done, n) | (n, Next::Done) => n,
            (Next::After(x), Next::After(y)) => Next::After(x.min(y)),
        }
    }
}

/// Queues spread over partitions, and how many (every other has one): those with a task per VM
/// in a cold start, so on a Redis Cluster their work spreads over the primaries. Part of the
/// queues' key layout (see `QueueSpec::partitions`), pinned by `jobs/tests/wire.rs`.
pub const PARTITIONED: &[(&str, u16)] = &[(<ManageBot as Task>::QUEUE, 16)];

/// The partitions of queue `name`.
pub fn partitions(name: &str) -> u16 {
    PARTITIONED.iter().find(|(q, _)| *q == name).map_or(1, |(_, n)| *n)
}

/// Names a payload's queue and its dedupe key (one pending task per key).
macro_rules! queue {
    ($payload:ident, $queue:literal, |$t:ident| $key:expr) => {
        impl Task for $payload {
            const QUEUE: &'static str = $queue;
            fn key(&self) -> String {
                let $t = self;
                $key
            }
        }
    };
}

/// `expand_config`: create the missing VMs of a Config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpandConfig {
    /// Config prefix.
    pub prefix: String,
}
queue!(ExpandConfig, "expand_config", |t| t.prefix.clone());

/// `create_vm`: create one VM record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateVm {
    /// VM id.
    pub id: String,
}
queue!(CreateVm, "create_vm", |t| t.id.clone());

/// `create_instance`: create (or adopt) the instance of a VM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateInstance {
    /// VM id.
    pub id: String,
}
queue!(CreateInstance, "create_instance", |t| t.id.clone());

/// `manage_bot`: compare a VM's bot with its record and act on the difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManageBot {
    /// VM id.
    pub id: String,
}
queue!(ManageBot, "manage_bot", |t| t.id.clone());

/// `inspect_swarming`: walk one Swarming server's bots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InspectSwarming {
    /// Swarming server URL.
    pub server: String,
}
queue!(InspectSwarming, "inspect_swarming", |t| t.server.clone());

/// `inspect_instances`: walk one project and zone's instances that are not running (stopped,
/// preempted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InspectInstances {
    /// Project.
    pub project: String,
    /// Zone.
    pub zone: String,
}
queue!(InspectInstances, "inspect_instances", |t| format!("{}/{}", t.project, t.zone));

/// `terminate_bot`: terminate a VM's bot gracefully (after its current task).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminateBot {
    /// VM id.
    pub id: String,
    /// The incarnation's hostname (guard).
    pub hostname: String,
}
queue!(TerminateBot, "terminate_bot", |t| format!("{}@{}", t.id, t.hostname));

/// `destroy_instance`: delete a VM's instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DestroyInstance {
    /// VM id.
    pub id: String,
    /// The instance URL (guard).
    pub url: String,
}
queue!(DestroyInstance, "destroy_instance", |t| format!("{}@{}", t.id, t.url));

impl DestroyInstance {
    /// The task that deletes `vm`'s instance (none while it has none).
    pub fn of(vm: &crate::model::Vm) -> Option<Self> {
        vm.url().map(|url| DestroyInstance { id: vm.id.clone(), url: url.to_owned() })
    }
}

/// `delete_bot`: delete a VM's bot from Swarming, then the VM record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteBot {
    /// VM id.
    pub id: String,
    /// The incarnation's hostname (guard).
    pub hostname: String,
}
queue!(DeleteBot, "delete_bot", |t| format!("{}@{}", t.id, t.hostname));

/// `drain_vm`: drain a VM whose Config shrank or went away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainVm {
    /// VM id.
    pub id: String,
}
queue!(DrainVm, "drain_vm", |t| t.id.clone());

/// `audit_instances`: find instances with our label that match no VM, in one project and zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditInstances {
    /// Project.
    pub project: String,
    /// Zone.
    pub zone: String,
}
queue!(AuditInstances, "audit_instances", |t| format!("{}/{}", t.project, t.zone));

/// `delete_stale_bots`: delete bots named like ours that have no VM, on one Swarming server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteStaleBots {
    /// Swarming server URL.
    pub server: String,
}
queue!(DeleteStaleBots, "delete_stale_bots", |t| t.server.clone());

/// `count_vms`: count a Config's VMs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountVms {
    /// Config prefix.
    pub prefix: String,
}
queue!(CountVms, "count_vms", |t| t.prefix.clone());

/// `report_quota`: read a project's regional quotas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportQuota {
    /// Project.
    pub project: String,
}
queue!(ReportQuota, "report_quota", |t| t.project.clone());

/// `read_demand`: read the work of one Swarming server's demand-driven Configs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadDemand {
    /// Swarming server URL.
    pub server: String,
}
queue!(ReadDemand, "read_demand", |t| t.server.clone());

/// `park_vm`: keep a VM warm (suspend or stop it) or wake it, as its Config wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkVm {
    /// VM id.
    pub id: String,
}
queue!(ParkVm, "park_vm", |t| t.id.clone());

/// `bulk_insert`: send a Config's VMs waiting for an instance to Compute in bulk, and follow
/// the bulk inserts it sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkInsert {
    /// Config prefix.
    pub prefix: String,
}
queue!(BulkInsert, "bulk_insert", |t| t.prefix.clone());

/// `pool_resources`: bring a Config's per-pool resources in line (its provider's: Compute
/// Engine's instance template of its revision made, those of revisions no VM uses removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolResources {
    /// Config prefix.
    pub prefix: String,
}
queue!(PoolResources, "pool_resources", |t| t.prefix.clone());

/// `audit_templates`: find instance templates with our label that no Config names and no VM's
/// revision uses, in one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditTemplates {
    /// Project.
    pub project: String,
}
queue!(AuditTemplates, "audit_templates", |t| t.project.clone());

/// The Config a task of `queue` with `key` is about, if any (keys are prefixes, VM ids, or
/// `<VM id>@<guard>`): the one rule, which the API hands to the dashboard too.
pub fn config_of(queue: &str, key: &str) -> Option<String> {
    if [ExpandConfig::QUEUE, CountVms::QUEUE, BulkInsert::QUEUE, PoolResources::QUEUE].contains(&queue) {
        return Some(key.to_owned());
    }
    vm_of(queue, key).and_then(|id| crate::naming::parse_id(id).map(|(p, _)| p.to_owned()))
}

/// The VM a task works on, by its queue and key: a VM id or `<VM id>@<guard>` on the queues
/// keyed by VM; `None` on the others.
pub fn vm_of<'k>(queue: &str, key: &'k str) -> Option<&'k str> {
    let by_vm = [
        CreateVm::QUEUE,
        CreateInstance::QUEUE,
        ManageBot::QUEUE,
        DrainVm::QUEUE,
        TerminateBot::QUEUE,
        DestroyInstance::QUEUE,
        DeleteBot::QUEUE,
    ];
    let id = key.split_once('@').map_or(key, |(id, _)| id);
    (by_vm.contains(&queue) && crate::naming::parse_id(id).is_some()).then_some(id)
}

#[cfg(test)]
mod tests;
