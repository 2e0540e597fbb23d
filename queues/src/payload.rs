//! One payload per queue of the reconcile pipeline: ids only, never records. Payloads outlive
//! deploys in Redis, so each is pinned by a golden test (`tests/wire.rs`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A payload and the queue it travels on.
pub trait Task: Serialize + DeserializeOwned + Send + Sync + Clone + std::fmt::Debug + 'static {
    /// Queue name.
    const QUEUE: &'static str;
    /// Dedupe key: at most one pending task per key.
    fn key(&self) -> String;
}

macro_rules! task {
    ($(#[$doc:meta])* $name:ident, $queue:literal, { $($(#[$fdoc:meta])* $field:ident),+ }, |$s:ident| $key:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: String,)+
        }
        impl Task for $name {
            const QUEUE: &'static str = $queue;
            fn key(&$s) -> String {
                $key
            }
        }
    };
}

task!(
    /// Create the missing VMs of a Config.
    ExpandConfig, "expand_config", { /// Config prefix.
    prefix }, |self| self.prefix.clone()
);
task!(
    /// Create one VM record.
    CreateVm, "create_vm", { /// VM id.
    id }, |self| self.id.clone()
);
task!(
    /// Create (or adopt) the instance of a VM.
    CreateInstance, "create_instance", { /// VM id.
    id }, |self| self.id.clone()
);
task!(
    /// Compare a VM's bot with its record and act on the difference.
    ManageBot, "manage_bot", { /// VM id.
    id }, |self| self.id.clone()
);
task!(
    /// Walk one Swarming server's bots.
    InspectSwarming, "inspect_swarming", { /// Swarming server URL.
    server }, |self| self.server.clone()
);
task!(
    /// Walk one project and zone's instances that are not running (stopped, preempted).
    InspectInstances, "inspect_instances", { /// Project.
    project, /// Zone.
    zone }, |self| format!("{}/{}", self.project, self.zone)
);
task!(
    /// Terminate a VM's bot gracefully (after its current task).
    TerminateBot, "terminate_bot", { /// VM id.
    id, /// The incarnation's hostname (guard).
    hostname }, |self| format!("{}@{}", self.id, self.hostname)
);
task!(
    /// Delete a VM's instance.
    DestroyInstance, "destroy_instance", { /// VM id.
    id, /// The instance URL (guard).
    url }, |self| format!("{}@{}", self.id, self.url)
);
task!(
    /// Delete a VM's bot from Swarming, then the VM record.
    DeleteBot, "delete_bot", { /// VM id.
    id, /// The incarnation's hostname (guard).
    hostname }, |self| format!("{}@{}", self.id, self.hostname)
);
task!(
    /// Drain a VM whose Config shrank or went away.
    DrainVm, "drain_vm", { /// VM id.
    id }, |self| self.id.clone()
);
task!(
    /// Find instances with our label that match no VM, in one project and zone.
    AuditInstances, "audit_instances", { /// Project.
    project, /// Zone.
    zone }, |self| format!("{}/{}", self.project, self.zone)
);
task!(
    /// Delete bots named like ours that have no VM, on one Swarming server.
    DeleteStaleBots, "delete_stale_bots", { /// Swarming server URL.
    server }, |self| self.server.clone()
);
task!(
    /// Count a Config's VMs.
    CountVms, "count_vms", { /// Config prefix.
    prefix }, |self| self.prefix.clone()
);
task!(
    /// Read a project's regional quotas.
    ReportQuota, "report_quota", { /// Project.
    project }, |self| self.project.clone()
);

/// Every queue of the pipeline, by name; part of the Redis key layout, so renaming one strands
/// the tasks queued under the old name.
pub const QUEUES: &[&str] = &[
    ExpandConfig::QUEUE,
    CreateVm::QUEUE,
    CreateInstance::QUEUE,
    ManageBot::QUEUE,
    InspectSwarming::QUEUE,
    InspectInstances::QUEUE,
    TerminateBot::QUEUE,
    DestroyInstance::QUEUE,
    DeleteBot::QUEUE,
    DrainVm::QUEUE,
    AuditInstances::QUEUE,
    DeleteStaleBots::QUEUE,
    CountVms::QUEUE,
    ReportQuota::QUEUE,
];
