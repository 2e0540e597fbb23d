//! Time series the dashboard draws: one sample a minute per Config (its counts and amount) and
//! per queue (its counters), the last [`KEEP_SAMPLES`] kept in the Store (`sample_series`
//! writes them, once per minute across every process).

use std::collections::BTreeMap;

use chrono::{DateTime, DurationRound, Utc};
use serde::{Deserialize, Serialize};

/// Samples kept per series: an hour of one a minute.
pub const KEEP_SAMPLES: usize = 60;

/// Which series.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Series {
    /// A Config's: `created`, `connected`, `amount`.
    Config(String),
    /// A queue's: its counters `retried`, `failed`, and `waiting` (pending and delayed) now.
    Queue(String),
}

impl Series {
    /// Its name in the Store (`cfg:<prefix>`, `queue:<name>`).
    pub fn key(&self) -> String {
        match self {
            Series::Config(p) => format!("cfg:{p}"),
            Series::Queue(q) => format!("queue:{q}"),
        }
    }
}

/// One sample: its minute and its values by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// The minute it stands for (seconds zero).
    pub at: DateTime<Utc>,
    /// The values, by name.
    pub values: BTreeMap<String, u64>,
    /// Fields a newer build wrote that this one does not know: kept, and written back with it.
    #[serde(flatten)]
    pub unknown: crate::unknown::Unknown,
}

impl Sample {
    /// A sample of the minute `now` falls in.
    pub fn of(now: DateTime<Utc>, values: &[(&str, u64)]) -> Self {
        let at = now.duration_trunc(chrono::Duration::minutes(1)).unwrap_or(now);
        Sample {
            unknown: Default::default(),
            at,
            values: values.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    /// Its value `name` (0 when it has none).
    pub fn get(&self, name: &str) -> u64 {
        self.values.get(name).copied().unwrap_or(0)
    }
}
