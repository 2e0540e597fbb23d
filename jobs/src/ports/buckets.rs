//! Token buckets: a rate, the one rule of a bucket's tokens ([`Bucket::step`], which the Redis
//! script mirrors), what operators see of one ([`Level`]), the port every process of a
//! deployment shares them through ([`Buckets`]: tokens, and places held at once), and the
//! in-process buckets of the embedded default and the tests. [`super::rated`] limits Compute
//! with them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::clock::{Clock, SystemClock};
use super::store::StoreError;

/// A rate: `rate` tokens per second, at most `burst` saved up (rate 0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Tokens per second.
    pub rate: f64,
    /// Most tokens saved up.
    pub burst: u32,
}

impl Rate {
    /// 0 (no limit), or a positive rate with a burst of at least 1.
    pub fn validate(&self) -> Result<(), &'static str> {
        if !(self.rate >= 0.0 && self.rate.is_finite()) || (self.rate > 0.0 && self.burst == 0) {
            return Err("rate must be 0 (no limit) or positive, with a burst of at least 1");
        }
        Ok(())
    }
}

/// Token buckets shared by the processes of a deployment.
#[async_trait]
pub trait Buckets: Send + Sync + std::fmt::Debug {
    /// Takes a token of bucket `key` (filled at up to `rate.rate` per second, at most
    /// `rate.burst` saved): zero when taken, else how long until one is there.
    async fn take(&self, key: &str, rate: Rate) -> Result<Duration, StoreError>;
    /// Compute said its rate limit was exceeded: halve the bucket's rate.
    async fn slow(&self, key: &str, rate: Rate) -> Result<(), StoreError>;
    /// Every bucket used within the last hour.
    async fn levels(&self) -> Result<Vec<Level>, StoreError>;
    /// Takes one of at most `max` places of `key` for `who`, held for `ttl` unless left sooner
    /// (taking it again renews it; a holder that died frees its place when `ttl` ends): true
    /// when `who` holds one. What Compute limits by number at once (bulk operations running).
    async fn enter(&self, key: &str, who: &str, max: u32, ttl: Duration) -> Result<bool, StoreError>;
    /// Gives `who`'s place of `key` back (none held: nothing to do).
    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError>;
    /// How many places of `key` are held (a look only: [`Buckets::enter`] decides).
    async fn holders(&self, key: &str) -> Result<u32, StoreError>;
}

/// A bucket as operators see it (what `status` and `/metrics` show of its saturation).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Level {
    /// The project.
    #[serde(default)]
    pub project: String,
    /// The class of calls (`mutate`, `read`, `operations`, `bulk`).
    #[serde(default)]
    pub class: String,
    /// Calls per second set (`[rate_limits]`).
    pub configured: f64,
    /// Most tokens saved up.
    pub burst: u32,
    /// Calls per second now: lower than `configured` after a `rateLimitExceeded`, growing back.
    pub rate: f64,
    /// Tokens left at its last call.
    pub tokens: f64,
    /// Takes that found no token: a call that waited counts once per wait, a call sent back
    /// for later once more each time it comes back and finds none.
    pub waits: u64,
    /// When a call last found no token.
    pub last_wait: Option<chrono::DateTime<chrono::Utc>>,
    /// `rateLimitExceeded` answers that halved its rate.
    pub slowed: u64,
    /// When the last one came.
    pub last_slowed: Option<chrono::DateTime<chrono::Utc>>,
    /// True while calls found no token within the last minute (set by `status`).
    #[serde(default)]
    pub saturated: bool,
}

impl Level {
    /// A level read from `key` (`project/class`).
    pub fn of_key(key: &str, mut level: Level) -> Level {
        let (project, class) = key.rsplit_once('/').unwrap_or((key, ""));
        (level.project, level.class) = (project.to_owned(), class.to_owned());
        level
    }
}

/// A time in ms since the epoch (0: never).
fn at(ms: u64) -> Option<chrono::DateTime<chrono::Utc>> {
    (ms > 0).then(|| chrono::DateTime::from_timestamp_millis(ms as i64)).flatten()
}

/// A bucket's state: tokens, when it was last filled (ms), its rate now, and how often (and
/// when last, in ms) a call found it empty or Compute slowed it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    /// Tokens saved.
    pub tokens: f64,
    /// When last filled, in ms.
    pub at_ms: u64,
    /// The rate now (at most the configured one).
    pub rate: f64,
    /// Calls that found no token.
    pub waits: u64,
    /// When the last one did, in ms.
    pub waited_ms: u64,
    /// Times it was slowed.
    pub slowed: u64,
    /// When last, in ms.
    pub slowed_ms: u64,
}

impl Bucket {
    /// The one rule (the Redis script mirrors it): fill since `at_ms` at the current rate, the
    /// rate growing back by a twentieth of `cfg.rate` per second; then `slow` halves the rate
    /// (no lower than a twentieth) and empties the bucket, or a take takes a token if there is
    /// one. Returns the new state and the wait (zero: taken).
    pub fn step(prev: Option<Bucket>, now_ms: u64, cfg: Rate, slow: bool) -> (Bucket, Duration) {
        let burst = f64::from(cfg.burst);
        let b = prev.unwrap_or(Bucket { tokens: burst, at_ms: now_ms, rate: cfg.rate, ..Bucket::default() });
        let dt = now_ms.saturating_sub(b.at_ms) as f64 / 1000.0;
        let rate = (b.rate + cfg.rate / 20.0 * dt).min(cfg.rate);
        let mut next = Bucket { tokens: (b.tokens + rate * dt).min(burst), at_ms: now_ms, rate, ..b };
        if slow {
            next.rate = (rate / 2.0).max(cfg.rate / 20.0);
            next.tokens = next.tokens.min(0.0);
            (next.slowed, next.slowed_ms) = (next.slowed + 1, now_ms);
            return (next, Duration::ZERO);
        }
        if next.tokens >= 1.0 {
            next.tokens -= 1.0;
            return (next, Duration::ZERO);
        }
        (next.waits, next.waited_ms) = (next.waits + 1, now_ms);
        let wait_ms = ((1.0 - next.tokens) * 1000.0 / next.rate).ceil().max(1.0);
        (next, Duration::from_millis(wait_ms as u64))
    }

    /// What operators see of it, set to `cfg`.
    pub fn level(&self, cfg: Rate) -> Level {
        Level {
            configured: cfg.rate,
            burst: cfg.burst,
            rate: self.rate,
            tokens: self.tokens,
            waits: self.waits,
            last_wait: at(self.waited_ms),
            slowed: self.slowed,
            last_slowed: at(self.slowed_ms),
            ..Level::default()
        }
    }
}

/// Milliseconds since the epoch, by `clock`.
fn now_ms(clock: &dyn Clock) -> u64 {
    u64::try_from(clock.now().timestamp_millis()).unwrap_or(0)
}

/// In-process buckets (the embedded default, tests).
#[derive(Debug)]
pub struct MemoryBuckets {
    buckets: std::sync::Mutex<BTreeMap<String, (Bucket, Rate)>>,
    /// Places: key → holder → until (ms).
    places: std::sync::Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
    clock: Arc<dyn Clock>,
}

impl Default for MemoryBuckets {
    /// Buckets on the system clock.
    fn default() -> Self {
        Self::new(Arc::new(SystemClock))
    }
}

impl MemoryBuckets {
    /// Empty buckets whose tokens come back as `clock` moves.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self { buckets: std::sync::Mutex::default(), places: std::sync::Mutex::default(), clock }
    }

    fn step(&self, key: &str, cfg: Rate, slow: bool) -> Duration {
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (b, wait) = Bucket::step(m.get(key).map(|(b, _)| *b), now_ms(&*self.clock), cfg, slow);
        m.insert(key.to_owned(), (b, cfg));
        wait
    }
}

#[async_trait]
impl Buckets for MemoryBuckets {
    async fn take(&self, key: &str, rate: Rate) -> Result<Duration, StoreError> {
        Ok(self.step(key, rate, false))
    }
    async fn slow(&self, key: &str, rate: Rate) -> Result<(), StoreError> {
        self.step(key, rate, true);
        Ok(())
    }
    async fn levels(&self) -> Result<Vec<Level>, StoreError> {
        // As in Redis, a bucket unused for an hour is gone.
        let hour_ago = now_ms(&*self.clock).saturating_sub(3_600_000);
        let mut m = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, (b, _)| b.at_ms >= hour_ago);
        Ok(m.iter().map(|(k, (b, cfg))| Level::of_key(k, b.level(*cfg))).collect())
    }
    async fn enter(&self, key: &str, who: &str, max: u32, ttl: Duration) -> Result<bool, StoreError> {
        let now = now_ms(&*self.clock);
        let mut m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        let held = m.entry(key.to_owned()).or_default();
        held.retain(|_, until| *until > now);
        if !held.contains_key(who) && held.len() >= max as usize {
            return Ok(false);
        }
        held.insert(who.to_owned(), now.saturating_add(ttl.as_millis() as u64));
        Ok(true)
    }
    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError> {
        let mut m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = m.get_mut(key) {
            held.remove(who);
        }
        Ok(())
    }
    async fn holders(&self, key: &str) -> Result<u32, StoreError> {
        let now = now_ms(&*self.clock);
        let m = self.places.lock().unwrap_or_else(|e| e.into_inner());
        Ok(m.get(key).map_or(0, |held| held.values().filter(|until| **until > now).count() as u32))
    }
}

#[cfg(test)]
mod tests;
