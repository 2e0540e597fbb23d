//! The rate-limit token buckets in Redis, one hash per (project, class) under the deployment's
//! hash tag, changed by one script that mirrors `Bucket::step` (jobs/src/ports/rated.rs) with
//! Redis's own clock, so every process shares one bucket and one time.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use gce_backend_jobs::ports::rated::{Buckets, Rate};
use gce_backend_jobs::ports::store::StoreError;
use redis::Script;

use super::RedisStore;
use super::conn::err;

/// KEYS[1]: the bucket; ARGV: rate, burst, "take" or "slow". Returns the wait in ms (0: taken).
static STEP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cfg, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'rate')
local tokens, at, rate = tonumber(s[1]) or burst, tonumber(s[2]) or now, tonumber(s[3]) or cfg
local dt = math.max(0, now - at) / 1000
rate = math.min(cfg, rate + cfg / 20 * dt)
tokens = math.min(burst, tokens + rate * dt)
local wait = 0
if ARGV[3] == 'slow' then
  rate = math.max(cfg / 20, rate / 2)
  tokens = math.min(tokens, 0)
elseif tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) * 1000 / rate))
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now), 'rate', tostring(rate))
redis.call('PEXPIRE', KEYS[1], 3600000)
return wait
"#,
    )
});

impl RedisStore {
    async fn step(&self, key: &str, rate: Rate, op: &str) -> Result<Duration, StoreError> {
        let ms: u64 = STEP
            .key(self.k(&format!("bucket:{key}")))
            .arg(rate.rate)
            .arg(rate.burst)
            .arg(op)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(Duration::from_millis(ms))
    }
}

#[async_trait]
impl Buckets for RedisStore {
    async fn take(&self, key: &str, rate: Rate) -> Result<Duration, StoreError> {
        self.step(key, rate, "take").await
    }

    async fn slow(&self, key: &str, rate: Rate) -> Result<(), StoreError> {
        self.step(key, rate, "slow").await.map(drop)
    }
}
