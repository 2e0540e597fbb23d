//! This process's own resources, read from `/proc` at each scrape (Linux; elsewhere none are
//! reported), under the names every Prometheus client uses: `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`,
//! `process_max_fds`, `process_threads` and `process_start_time_seconds`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`: 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// What `/proc` says about this process.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Reading {
    /// User and system CPU time, in seconds.
    pub(super) cpu_seconds: Option<f64>,
    /// Resident memory, in bytes.
    pub(super) resident_bytes: Option<f64>,
    /// Virtual memory, in bytes.
    pub(super) virtual_bytes: Option<f64>,
    /// Threads.
    pub(super) threads: Option<f64>,
    /// Start time, in seconds since the Unix epoch.
    pub(super) start_time: Option<f64>,
    /// Open file descriptors.
    pub(super) open_fds: Option<f64>,
    /// The limit on open file descriptors.
    pub(super) max_fds: Option<f64>,
}

/// Reads the files of `/proc` given as text: `stat` (`/proc/self/stat`), `status`
/// (`/proc/self/status`), `system_stat` (`/proc/stat`, for the boot time), `limits`
/// (`/proc/self/limits`); what a file lacks or cannot be parsed is left out.
pub(super) fn parse(stat: &str, status: &str, system_stat: &str, limits: &str) -> Reading {
    // The command name (field 2) is in parentheses and may hold spaces: fields after its last ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    // Field 3 (state) is the first after the name; field n is at index n - 3.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<f64>().ok());
    let cpu_seconds = field(14).zip(field(15)).map(|(u, s)| (u + s) / USER_HZ);
    let boot =
        system_stat.lines().find_map(|l| l.strip_prefix("btime ")).and_then(|v| v.trim().parse::<f64>().ok());
    let start_time = field(22).zip(boot).map(|(ticks, boot)| boot + ticks / USER_HZ);
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let max_fds = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok());
    Reading {
        cpu_seconds,
        resident_bytes: kb("VmRSS:").map(|k| k * 1024.0),
        virtual_bytes: kb("VmSize:").map(|k| k * 1024.0),
        threads: kb("Threads:"),
        start_time,
        open_fds: None,
        max_fds,
    }
}

/// This process now, from `/proc` (nothing where there is no `/proc`).
fn read() -> Reading {
    let file = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut r = parse(
        &file("/proc/self/stat"),
        &file("/proc/self/status"),
        &file("/proc/stat"),
        &file("/proc/self/limits"),
    );
    r.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as f64);
    r
}

/// Encodes [`read`] at each scrape.
#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut d: DescriptorEncoder<'_>) -> std::fmt::Result {
        let r = read();
        if let Some(v) = r.cpu_seconds {
            let m = d.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                MetricType::Counter,
            )?;
            ConstCounter::new(v).encode(m)?;
        }
        for (name, help, v) in [
            ("process_resident_memory_bytes", "Resident memory size in bytes", r.resident_bytes),
            ("process_virtual_memory_bytes", "Virtual memory size in bytes", r.virtual_bytes),
            ("process_open_fds", "Number of open file descriptors", r.open_fds),
            ("process_max_fds", "Maximum number of open file descriptors", r.max_fds),
            ("process_threads", "Number of OS threads in the process", r.threads),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                r.start_time,
            ),
        ] {
            if let Some(v) = v {
                let m = d.encode_descriptor(name, help, None, MetricType::Gauge)?;
                ConstGauge::new(v).encode(m)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
