//! What the work is: the reconcile logic of gce-backend (cron fan-outs, one handler per queue,
//! the domain model and the ports it calls). It grows with the reconcile pipeline; for now it
//! holds the catalogue of queue names the pipeline will use.

/// Every queue of the pipeline, by name. Names are explicit and stable: they are part of the
/// Redis key layout, so renaming one strands the tasks queued under the old name.
pub const QUEUES: &[&str] = &[
    "expand_config",
    "create_vm",
    "create_instance",
    "manage_bot",
    "inspect_swarming",
    "terminate_bot",
    "destroy_instance",
    "delete_bot",
    "drain_vm",
    "audit_instances",
    "count_vms",
    "report_quota",
];

#[cfg(test)]
mod tests {
    use gce_backend_queues::{Policy, QueueSpec};

    #[test]
    fn every_queue_name_is_valid_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for name in super::QUEUES {
            QueueSpec::new(name, Policy::default()).unwrap();
            assert!(seen.insert(name), "{name} twice");
        }
    }
}
