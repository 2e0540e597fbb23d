//! What the workers of this process measure per queue (Prometheus, `prometheus-client`): runs by
//! how they ended, run time and time in queue (from when a task was due to its handler's
//! start). Every family has a zero series per queue from the start ([`QueueMetrics::declare`]),
//! so rates and alerts read 0 rather than nothing. The queue's shared state (pending, delayed,
//! running, dead and the engine's counters) is read from the engine when scraped, not here.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label pairs: bounded sets only (queue names, fixed words), never a task id or key.
pub type Labels = Vec<(&'static str, String)>;

/// A family of histograms built by a plain function.
pub type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

fn seconds() -> Histogram {
    // 1 ms to about 9 minutes.
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// How a run ends (the `result` of `task_runs`).
pub const RESULTS: &[&str] = &["done", "retry", "dead"];

/// Per-queue measurements of this process's workers. Cheap to clone (shared counters).
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    runs: Family<Labels, Counter>,
    lost: Family<Labels, Counter>,
    run_seconds: Histograms,
    wait_seconds: Histograms,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        Self {
            runs: Family::default(),
            lost: Family::default(),
            run_seconds: Family::new_with_constructor(seconds),
            wait_seconds: Family::new_with_constructor(seconds),
        }
    }
}

impl QueueMetrics {
    /// Adds the families to `registry` (names get the registry's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "task_runs",
            "Task runs by this process's workers, by queue and how they ended (done, retry, dead)",
            self.runs.clone(),
        );
        registry.register(
            "leases_lost",
            "Leases of tasks still running that a renewal found taken back (the task may run twice), by queue",
            self.lost.clone(),
        );
        registry.register(
            "task_run_seconds",
            "How long a task's handler ran, by queue",
            self.run_seconds.clone(),
        );
        registry.register(
            "task_wait_seconds",
            "Time in queue: from when a task was due (pushed, its delay ended, or its retry was scheduled) to its handler's start, by queue",
            self.wait_seconds.clone(),
        );
    }

    /// Gives every family a zero series for `queue` (each way a run ends, leases lost, empty
    /// histograms), so it is scraped before its first task.
    pub fn declare(&self, queue: &str) {
        for result in RESULTS {
            let _ =
                self.runs.get_or_create(&vec![("queue", queue.to_owned()), ("result", (*result).to_owned())]);
        }
        let q = vec![("queue", queue.to_owned())];
        let _ = self.lost.get_or_create(&q);
        let _ = self.run_seconds.get_or_create(&q);
        let _ = self.wait_seconds.get_or_create(&q);
    }

    /// A run of a task of `queue` ended as `result` after `secs`.
    pub fn ran(&self, queue: &str, result: &'static str, secs: f64) {
        self.ended(queue, result);
        self.run_seconds.get_or_create(&vec![("queue", queue.to_owned())]).observe(secs);
    }

    /// A task of `queue` ended as `result` without its handler running (a payload this build
    /// cannot decode).
    pub fn ended(&self, queue: &str, result: &'static str) {
        self.runs.get_or_create(&vec![("queue", queue.to_owned()), ("result", result.to_owned())]).inc();
    }

    /// A task of `queue` started `secs` after it was due.
    pub fn waited(&self, queue: &str, secs: f64) {
        self.wait_seconds.get_or_create(&vec![("queue", queue.to_owned())]).observe(secs);
    }

    /// A renewal found `n` leases of running tasks of `queue` lost.
    pub fn lost(&self, queue: &str, n: usize) {
        self.lost.get_or_create(&vec![("queue", queue.to_owned())]).inc_by(n as u64);
    }

    /// Leases of `queue` reported lost so far (for tests).
    pub fn leases_lost(&self, queue: &str) -> u64 {
        self.lost.get(&vec![("queue", queue.to_owned())]).map_or(0, |c| c.get())
    }

    /// Runs of `queue` that ended as `result` so far (for tests).
    pub fn runs(&self, queue: &str, result: &'static str) -> u64 {
        self.runs
            .get(&vec![("queue", queue.to_owned()), ("result", result.to_owned())])
            .map_or(0, |c| c.get())
    }
}

#[cfg(test)]
mod tests;
