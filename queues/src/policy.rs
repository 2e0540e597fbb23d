//! Per-queue delivery policy: attempts, backoff with jitter, lease, deadline and retention.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// How one queue delivers, retries and keeps its tasks.
///
/// Every field has a default, so a policy file only names what it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Runs a task gets before it goes to the dead set (1 means no retry).
    pub max_attempts: u32,
    /// First retry delay; each further retry doubles it, up to `backoff_cap`.
    #[serde(with = "millis")]
    pub backoff_base: Duration,
    /// Upper bound of the retry delay.
    #[serde(with = "millis")]
    pub backoff_cap: Duration,
    /// Visibility deadline of a taken task; a live worker renews it every third of it.
    #[serde(with = "millis")]
    pub lease: Duration,
    /// A task not resolved this long after it was pushed fails with reason `deadline-exceeded`
    /// (zero: no deadline).
    #[serde(with = "millis")]
    pub deadline: Duration,
    /// Most finished (completed) task records kept for status queries.
    pub keep_finished: u64,
    /// Longest time a finished task record is kept.
    #[serde(with = "millis")]
    pub keep_finished_for: Duration,
    /// Most dead tasks kept; the oldest are dropped beyond it.
    pub keep_dead: u64,
    /// Tasks one worker takes in one round trip.
    pub batch: usize,
    /// Longest a handler may run; past it the run fails (and is retried) and its lease is no
    /// longer renewed, so even a handler stuck in a live process gives its task back.
    #[serde(with = "millis")]
    pub timeout: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(300),
            lease: Duration::from_secs(30),
            deadline: Duration::ZERO,
            keep_finished: 10_000,
            keep_finished_for: Duration::from_secs(3600),
            keep_dead: 10_000,
            batch: 32,
            timeout: Duration::from_secs(600),
        }
    }
}

impl Policy {
    /// Delay before retry number `attempt` (1 for the first retry): `base·2^(attempt-1)` capped at
    /// `backoff_cap`, then "equal jitter" (a uniform draw from the upper half), so retries of many
    /// tasks that failed together spread out instead of arriving as one wave.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(32);
        let full = self.backoff_base.saturating_mul(1u32 << exp.min(31)).min(self.backoff_cap);
        let half = full / 2;
        let jitter = rand::rng().random_range(0..=half.as_millis() as u64);
        half + Duration::from_millis(jitter)
    }

    /// Checks the values that would make a queue misbehave.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_attempts == 0 {
            return Err("max_attempts must be at least 1".into());
        }
        if self.lease < Duration::from_millis(300) {
            return Err("lease must be at least 300ms".into());
        }
        if self.backoff_cap < self.backoff_base {
            return Err("backoff_cap must not be below backoff_base".into());
        }
        if self.timeout.is_zero() {
            return Err("timeout must be positive".into());
        }
        if self.batch == 0 || self.batch > 1000 {
            return Err("batch must be between 1 and 1000".into());
        }
        Ok(())
    }
}

/// Serde helper: a `Duration` written like every other duration of the settings (`500ms`,
/// `30s`, `5m`, `1h`, `1d`), or as a number of milliseconds (the older form); written back as
/// milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ms(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Ms(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(t) => parse(&t).map_err(serde::de::Error::custom),
        }
    }

    /// Parses `<n>(ms|s|m|h|d)`.
    pub(super) fn parse(t: &str) -> Result<Duration, String> {
        let t = t.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (n, unit) = t.split_at(split);
        let n: u64 = n.parse().map_err(|_| format!("{t:?} is not a duration like 500ms, 30s, 5m or 1h"))?;
        let ms = match unit {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(format!("{t:?}: unit must be ms, s, m, h or d")),
        };
        Ok(Duration::from_millis(n.saturating_mul(ms)))
    }
}

#[cfg(test)]
mod tests;
