//! A queue's families read zero from the moment it is measured, before any run.

use std::sync::Arc;

use prometheus_client::registry::Registry;

use super::QueueMetrics;
use crate::{MemoryEngine, Queue, QueueSpec};

#[test]
fn a_measured_queue_has_a_zero_series_in_every_family_before_its_first_run() {
    let metrics = QueueMetrics::default();
    let spec = QueueSpec::new("create_vm", Default::default()).unwrap();
    let _queue = Queue::new(Arc::new(MemoryEngine::new()), spec).with_metrics(metrics.clone());
    let mut registry = Registry::with_prefix("gce_backend");
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"gce_backend_task_runs_total{queue="create_vm",result="done"} 0"#,
        r#"gce_backend_task_runs_total{queue="create_vm",result="retry"} 0"#,
        r#"gce_backend_task_runs_total{queue="create_vm",result="dead"} 0"#,
        r#"gce_backend_leases_lost_total{queue="create_vm"} 0"#,
        r#"gce_backend_task_wait_seconds_count{queue="create_vm"} 0"#,
        r#"gce_backend_task_run_seconds_count{queue="create_vm"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}
