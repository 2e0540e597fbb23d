//! What handlers, cron jobs and the guarded ports measure (Prometheus, `prometheus-client`): VM
//! lifecycle latencies, instance operations by result, leaks and stale bots cleaned up, quota,
//! outbound calls and cron runs. Labels name Configs, zones, projects, methods and fixed words,
//! never a VM, hostname or task. The families alerts read have zero series from the start for
//! the label values known then (cron jobs, Configs, projects, cleanups, `ok` registrations), so a
//! rate is 0 rather
//! than nothing; quota readings and outcomes appear with their first measurement (a zero quota
//! would be a false reading).

use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use gce_backend_queues::QueueMetrics;
use gce_backend_queues::metrics::{Histograms, Labels};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::model::Vm;

/// A VM lifecycle step whose latency is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// From the VM's slot being made (by `expand_config`, after the Config change that asked for
    /// it, or to replace a drained VM) to its insert being sent.
    ChangeToInsert,
    /// From the insert being sent to the instance recorded: Compute's insert operation is DONE
    /// (the instance exists and is starting).
    InsertToCreated,
    /// From the instance's creation (its `creationTimestamp`) to its bot's first connection
    /// (Swarming's `first_seen`): boot and bot start.
    CreatedToConnected,
    /// From the instance's creation to its deletion: the VM's lifetime.
    Lifetime,
}

impl Stage {
    /// Its label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::ChangeToInsert => "change_to_insert",
            Stage::InsertToCreated => "insert_to_created",
            Stage::CreatedToConnected => "created_to_connected",
            Stage::Lifetime => "lifetime",
        }
    }
}

fn latency() -> Histogram {
    // 50 ms to about 1.8 hours.
    Histogram::new(exponential_buckets(0.05, 2.0, 18))
}

fn lifetime() -> Histogram {
    // 1 minute to about 11 days.
    Histogram::new(exponential_buckets(60.0, 2.0, 15))
}

fn call() -> Histogram {
    // 1 ms to about 2 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 18))
}

/// Every measurement of `jobs`, plus the queues' ([`QueueMetrics`]). Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The queues' measurements (given to each queue with `Queue::with_metrics`).
    pub queues: QueueMetrics,
    lifecycle: Histograms,
    lifetime: Histograms,
    instance_ops: Family<Labels, Counter>,
    cleanup: Family<Labels, Counter>,
    newer: Family<Labels, Counter>,
    quota_usage: Family<Labels, Gauge<f64, AtomicU64>>,
    quota_limit: Family<Labels, Gauge<f64, AtomicU64>>,
    calls: Family<Labels, Counter>,
    throttled: Family<Labels, Counter>,
    registrations: Family<Labels, Counter>,
    call_seconds: Histograms,
    cron_runs: Family<Labels, Counter>,
    cron_pushed: Family<Labels, Counter>,
    cron_seconds: Histograms,
    cron_last: Family<Labels, Gauge<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Self {
            queues: QueueMetrics::default(),
            lifecycle: Family::new_with_constructor(latency),
            lifetime: Family::new_with_constructor(lifetime),
            instance_ops: Family::default(),
            cleanup: Family::default(),
            newer: Family::default(),
            quota_usage: Family::default(),
            quota_limit: Family::default(),
            calls: Family::default(),
            throttled: Family::default(),
            registrations: Family::default(),
            call_seconds: Family::new_with_constructor(call),
            cron_runs: Family::default(),
            cron_pushed: Family::default(),
            cron_seconds: Family::new_with_constructor(call),
            cron_last: Family::default(),
        };
        let _ = m.registrations.get_or_create(&labels(&[("result", "ok")]));
        for what in ["leaked_instance", "stale_bot"] {
            for event in ["found", "deleted"] {
                let _ = m.cleanup.get_or_create(&labels(&[("what", what), ("event", event)]));
            }
        }
        let _ = m.cleanup.get_or_create(&labels(&[("what", "lost_vm_record"), ("event", "adopted")]));
        for kind in ["vm", "config"] {
            let _ = m.newer.get_or_create(&labels(&[("kind", kind)]));
        }
        m
    }
}

fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

/// Seconds from `from` to `to`, never negative.
fn between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    ((to - from).num_milliseconds().max(0) as f64) / 1000.0
}

impl Metrics {
    /// Adds every family to `registry` (names get the registry's prefix).
    pub fn register(&self, r: &mut Registry) {
        self.queues.register(r);
        r.register(
            "vm_lifecycle_seconds",
            "VM lifecycle latency by Config and stage: change_to_insert, insert_to_created, created_to_connected",
            self.lifecycle.clone(),
        );
        r.register(
            "vm_lifetime_seconds",
            "From an instance's creation to its deletion, by Config",
            self.lifetime.clone(),
        );
        r.register(
            "instance_operations",
            "Instance inserts, deletes and preemptions (op) by Config, zone, result (ok or the error class) and error code",
            self.instance_ops.clone(),
        );
        r.register(
            "cleanups",
            "Leaked instances and stale bots found and deleted, lost VM records adopted from their instances",
            self.cleanup.clone(),
        );
        r.register(
            "records_left_to_newer_build",
            "Stored records a task met in a format only a newer build acts on (left to that build), by kind",
            self.newer.clone(),
        );
        r.register(
            "quota_usage",
            "Compute quota in use, by project, region and metric",
            self.quota_usage.clone(),
        );
        r.register(
            "quota_limit",
            "Compute quota limit, by project, region and metric",
            self.quota_limit.clone(),
        );
        r.register(
            "outbound_calls",
            "Calls to Compute and Swarming by service, method and result code",
            self.calls.clone(),
        );
        r.register(
            "outbound_call_seconds",
            "Latency of calls to Compute and Swarming by service and method",
            self.call_seconds.clone(),
        );
        r.register(
            "compute_throttled",
            "Compute calls held back by their project's rate limit (settings [rate_limits]), by project and class",
            self.throttled.clone(),
        );
        r.register(
            "registrations",
            "VM registrations by result: ok, or why one was refused (the reason the caller is never told)",
            self.registrations.clone(),
        );
        r.register("cron_runs", "Cron job runs by job and result (ok, error)", self.cron_runs.clone());
        r.register("cron_pushed_tasks", "Tasks added by cron job runs, by job", self.cron_pushed.clone());
        r.register("cron_run_seconds", "How long a cron job run took, by job", self.cron_seconds.clone());
        r.register(
            "cron_last_run_timestamp_seconds",
            "When a cron job last ran in this process (Unix time), by job",
            self.cron_last.clone(),
        );
    }

    /// Gives cron job `job`'s families zero series (runs ok and failed, tasks added, an empty
    /// run-time histogram); its last-run time appears with its first run.
    pub fn declare_cron(&self, job: &str) {
        for result in ["ok", "error"] {
            let _ = self.cron_runs.get_or_create(&labels(&[("job", job), ("result", result)]));
        }
        let _ = self.cron_pushed.get_or_create(&labels(&[("job", job)]));
        let _ = self.cron_seconds.get_or_create(&labels(&[("job", job)]));
    }

    /// Gives Config `config`'s lifecycle and lifetime histograms empty series (each stage).
    pub fn declare_config(&self, config: &str) {
        for stage in [Stage::ChangeToInsert, Stage::InsertToCreated, Stage::CreatedToConnected] {
            let _ = self.lifecycle.get_or_create(&labels(&[("config", config), ("stage", stage.as_str())]));
        }
        let _ = self.lifetime.get_or_create(&labels(&[("config", config)]));
    }

    /// Gives `project`'s rate-limit holds a zero series per class (`classes`).
    pub fn declare_project(&self, project: &str, classes: &[&'static str]) {
        for class in classes {
            let _ = self.throttled.get_or_create(&labels(&[("project", project), ("class", class)]));
        }
    }

    /// `vm` passed `stage`, which began at `from` and ended at `to`.
    pub fn lifecycle(&self, vm: &Vm, stage: Stage, from: DateTime<Utc>, to: DateTime<Utc>) {
        let family = if stage == Stage::Lifetime { &self.lifetime } else { &self.lifecycle };
        let l = if stage == Stage::Lifetime {
            labels(&[("config", &vm.config)])
        } else {
            labels(&[("config", &vm.config), ("stage", stage.as_str())])
        };
        family.get_or_create(&l).observe(between(from, to));
    }

    /// An instance operation (`insert`, `delete`) of `vm` ended: `result` is `ok` or the error
    /// class, `code` the error code (empty when ok).
    pub fn instance_op(&self, vm: &Vm, op: &'static str, result: &str, code: &str) {
        let l = labels(&[
            ("config", &vm.config),
            ("zone", vm.zone()),
            ("op", op),
            ("result", result),
            ("code", code),
        ]);
        self.instance_ops.get_or_create(&l).inc();
    }

    /// A cleanup step: `what` is `leaked_instance` or `stale_bot`, `event` `found` or `deleted`;
    /// or `lost_vm_record` `adopted` (a VM record made again from its live instance)
    /// (the four read zero from the start).
    pub fn cleanup(&self, what: &'static str, event: &'static str) {
        self.cleanup.get_or_create(&labels(&[("what", what), ("event", event)])).inc();
    }

    /// A task met a record of `kind` (`vm`, `config`) a newer build wrote in a format this one
    /// does not act on, and left it to that build.
    pub fn left_to_newer(&self, kind: &'static str) {
        self.newer.get_or_create(&labels(&[("kind", kind)])).inc();
    }

    /// A quota reading.
    pub fn quota(&self, project: &str, region: &str, metric: &str, usage: f64, limit: f64) {
        let l = labels(&[("project", project), ("region", region), ("metric", metric)]);
        self.quota_usage.get_or_create(&l).set(usage);
        self.quota_limit.get_or_create(&l).set(limit);
    }

    /// A call to `service` (`compute`, `swarming`) `method` ended with `code` (`ok`, the error
    /// code, or why the guard refused it) after `secs` (none when it did not run).
    pub fn call(&self, service: &'static str, method: &'static str, code: &str, secs: Option<f64>) {
        self.calls.get_or_create(&labels(&[("service", service), ("method", method), ("code", code)])).inc();
        if let Some(secs) = secs {
            self.call_seconds
                .get_or_create(&labels(&[("service", service), ("method", method)]))
                .observe(secs);
        }
    }

    /// A Compute call of `class` to `project` was held back by the project's rate limit.
    pub fn throttled(&self, project: &str, class: &'static str) {
        self.throttled.get_or_create(&labels(&[("project", project), ("class", class)])).inc();
    }

    /// A registration ended: `result` is `ok` or the reason it was refused.
    pub fn registration(&self, result: &'static str) {
        self.registrations.get_or_create(&labels(&[("result", result)])).inc();
    }

    /// A run of cron job `job` ended at `at` after `secs`, adding `pushed` tasks, or failed.
    pub fn cron(&self, job: &str, ok: bool, pushed: usize, secs: f64, at: DateTime<Utc>) {
        let j = labels(&[("job", job)]);
        let result = if ok { "ok" } else { "error" };
        self.cron_runs.get_or_create(&labels(&[("job", job), ("result", result)])).inc();
        self.cron_pushed.get_or_create(&j).inc_by(pushed as u64);
        self.cron_seconds.get_or_create(&j).observe(secs);
        self.cron_last.get_or_create(&j).set(at.timestamp_millis() as f64 / 1000.0);
    }

    /// Every family in the Prometheus text format, names prefixed `gce_backend_` (what a
    /// process serves when it has nothing else to add; tests read it).
    pub fn text(&self) -> String {
        let mut r = Registry::with_prefix("gce_backend");
        self.register(&mut r);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        out
    }
}
