//! The rate-limit token buckets in Redis, one hash per (project, class) (`bucket:<project>/<class>`,
//! listed in the set `buckets` under `{<ns>:db}`), changed by one script that mirrors
//! `Bucket::step` (jobs/src/ports/rated.rs) with Redis's own clock, so every process shares one
//! bucket and one time. Places (what Compute limits by number at once) are a sorted set per key
//! (`places:<key>`), taken by another script. In key layout 1 they are under `{<ns>:db}`; in
//! layout 2 under their project's own tag, `{<ns>:b:<project>}`, so busy projects spread over a
//! cluster (the move starts them afresh: a bucket is state of the last hour only).

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use gce_backend_jobs::ports::buckets::{Bucket, Buckets, Level, Rate};
use gce_backend_jobs::ports::store::StoreError;
use redis::{AsyncCommands, Script};

use super::RedisStore;
use super::conn::err;
use super::layout::Layout;

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
  redis.call('HINCRBY', KEYS[1], 'slowed', 1)
  redis.call('HSET', KEYS[1], 'slowed_at', now)
elseif tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) * 1000 / rate))
  redis.call('HINCRBY', KEYS[1], 'waits', 1)
  redis.call('HSET', KEYS[1], 'waited_at', now)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now), 'rate', tostring(rate),
  'cfg', ARGV[1], 'burst', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 3600000)
return wait
"#,
    )
});

/// KEYS[1]: the places (a sorted set: holder → until, in ms); ARGV: the holder, the most
/// places, how long it holds one (ms). Returns 1 when the holder has a place.
static ENTER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end
return 0
"#,
    )
});

impl RedisStore {
    /// Key `part` (`bucket`, `places`) of rate-limit key `key` (`<project>/<class>`) in the
    /// store's layout.
    async fn limit_key(&self, part: &str, key: &str) -> Result<String, StoreError> {
        Ok(match self.layout().await? {
            Layout::Two => {
                let project = key.split('/').next().unwrap_or(key);
                format!("{{{}:b:{project}}}:{part}:{key}", self.ns)
            }
            Layout::One | Layout::Migrating => self.k(&format!("{part}:{key}")),
        })
    }

    async fn step(&self, key: &str, rate: Rate, op: &str) -> Result<Duration, StoreError> {
        let ms: u64 = STEP
            .key(self.limit_key("bucket", key).await?)
            .arg(rate.rate)
            .arg(rate.burst)
            .arg(op)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        // Listed apart from the script (the list is in another slot); listed after the step, so a
        // listed name whose bucket is missing only means it expired (`levels` drops it).
        let _: () = self.c().sadd(self.k("buckets"), key).await.map_err(err)?;
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

    async fn enter(&self, key: &str, who: &str, max: u32, ttl: Duration) -> Result<bool, StoreError> {
        let held: u8 = ENTER
            .key(self.limit_key("places", key).await?)
            .arg(who)
            .arg(max)
            .arg(ttl.as_millis().max(1) as u64)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(held == 1)
    }

    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError> {
        let _: () = self.c().zrem(self.limit_key("places", key).await?, who).await.map_err(err)?;
        Ok(())
    }

    /// Places whose time ran out are counted until the next `enter` removes them.
    async fn holders(&self, key: &str) -> Result<u32, StoreError> {
        self.c().zcard(self.limit_key("places", key).await?).await.map_err(err)
    }

    async fn levels(&self) -> Result<Vec<Level>, StoreError> {
        let names: Vec<String> = self.c().smembers(self.k("buckets")).await.map_err(err)?;
        if names.is_empty() {
            return Ok(Vec::new()); // (an empty pipeline is an error)
        }
        let mut cmds = Vec::with_capacity(names.len());
        for n in &names {
            cmds.push(redis::Cmd::hgetall(self.limit_key("bucket", n).await?));
        }
        let all: Vec<HashMap<String, String>> = self.each(&cmds).await.map_err(err)?;
        let mut out = Vec::new();
        for (name, h) in names.iter().zip(all) {
            if h.is_empty() {
                // Unused for an hour: its bucket expired. (A call that takes from it at this
                // moment adds its name back at its next take.)
                let _: () = self.c().srem(self.k("buckets"), name).await.map_err(err)?;
                continue;
            }
            let f = |k: &str| h.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            let b = Bucket {
                tokens: f("tokens"),
                at_ms: f("at") as u64,
                rate: f("rate"),
                waits: f("waits") as u64,
                waited_ms: f("waited_at") as u64,
                slowed: f("slowed") as u64,
                slowed_ms: f("slowed_at") as u64,
            };
            out.push(Level::of_key(name, b.level(Rate { rate: f("cfg"), burst: f("burst") as u32 })));
        }
        out.sort_by(|a, b| (&a.project, &a.class).cmp(&(&b.project, &b.class)));
        Ok(out)
    }
}
