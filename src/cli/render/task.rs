//! One task of a queue, as `queues task` prints it: its state and why, its key and Config, its
//! attempts and times, its last error, and a line per run.

use serde_json::Value;

use super::cells::{s, table, when};

/// `queues task QUEUE TASK_ID` (the API's `task` answer).
pub(crate) fn task(v: &Value) -> String {
    let reason = v["reason"].as_str().filter(|r| !r.is_empty()).map_or(String::new(), |r| format!(" ({r})"));
    let mut out = format!(
        "{} of {}: {}{reason}\n  key {}  Config {}  attempts {}  retries {}\n  created {}  runs at {}  resolved {}\n",
        s(&v["task_id"]),
        s(&v["queue"]),
        s(&v["state"]),
        s(&v["key"]),
        s(&v["config"]),
        s(&v["attempts"]),
        s(&v["retries"]),
        when(&v["created"]),
        when(&v["run_at"]),
        when(&v["resolved"]),
    );
    if let Some(e) = v["last_error"].as_str().filter(|e| !e.is_empty()) {
        out.push_str(&format!("  last error: {e}\n"));
    }
    let runs: Vec<Vec<String>> = v["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                s(&r["run_id"]),
                s(&r["worker_id"]),
                when(&r["started"]),
                when(&r["resolved"]),
                s(&r["outcome"]),
            ]
        })
        .collect();
    if !runs.is_empty() {
        out.push_str(&table(&["RUN", "WORKER", "STARTED", "RESOLVED", "OUTCOME"], runs));
    }
    out
}
