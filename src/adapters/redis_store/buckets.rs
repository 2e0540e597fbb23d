//! The rate-limit token buckets in Redis, one hash per (project, class) (`bucket:<project>/<class>`,
//! listed in the set `buckets` under `{<ns>:db}`), changed by one script that mirrors
//! `Bucket::step` (jobs/src/ports/rated.rs) with Redis's own clock, so every process shares one
//! bucket and one time. Places (what Compute limits by number at once) are a sorted set per key
//! (`places:<key>`), taken by another script. In key layout 1 they are under `{<ns>:db}`; in
//! layout 2 under their project's own tag, `{<ns>:b:<project>}`, so busy projects spread over a
//! cluster (the move starts them afresh: a bucket is state of the last hour only).
//!
//! In layout 1 the script lists its bucket in `buckets` itself (one slot); in layout 2 the list is
//! in another slot, so a process lists a bucket with a command of its own: when its take found the
//! bucket new, and otherwise at most once every [`RELIST`] (so a name dropped by a lost write comes
//! back), never on every take.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use gce_backend_jobs::ports::buckets::{Bucket, Buckets, Level, Rate};
use gce_backend_jobs::ports::store::StoreError;
use redis::{AsyncCommands, Script};
use tokio::time::Instant;

use super::RedisStore;
use super::conn::err;
use super::layout::Layout;

/// KEYS[1]: the bucket; KEYS[2] (layout 1 only): the list of buckets, which the bucket's name
/// joins. ARGV: rate, burst, "take" or "slow", the bucket's name. Returns the wait in ms (0:
/// taken), and 1 when the bucket was new (0 when it was there).
static STEP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cfg, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'rate')
local fresh = s[2] and 0 or 1
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
if KEYS[2] then
  redis.call('SADD', KEYS[2], ARGV[4])
end
return {wait, fresh}
"#,
    )
});

/// How long a process that listed a bucket in layout 2 goes without listing it again (unless a
/// take finds the bucket new).
const RELIST: Duration = Duration::from_secs(300);

/// The buckets this process listed in layout 2 (`<list key> <name>`, so stores of other
/// deployments keep theirs apart), and when. Process-wide: a store's clones share it, and a store
/// of the same deployment on another Redis lists its new buckets all the same (found new).
static LISTED: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Mutex::default);

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
    async fn step(&self, key: &str, rate: Rate, op: &str) -> Result<Duration, StoreError> {
        let l = self.layout().await?;
        let list = self.k("buckets");
        let mut inv = STEP.prepare_invoke();
        inv.key(self.limit_key(l, "bucket", key));
        if l != Layout::Two {
            inv.key(&list); // (the same slot: listed by the script)
        }
        inv.arg(rate.rate).arg(rate.burst).arg(op).arg(key);
        let (ms, fresh): (u64, u8) = inv.invoke_async(&mut self.c()).await.map_err(err)?;
        if l == Layout::Two {
            self.list_bucket(&list, key, fresh == 1).await?;
        }
        Ok(Duration::from_millis(ms))
    }

    /// Layout 2: lists bucket `key` in `list` (another slot) when the take found it `fresh` or
    /// this process has not listed it within [`RELIST`]. Listed after the step, so a listed name
    /// whose bucket is missing only means it expired (`levels` drops it).
    async fn list_bucket(&self, list: &str, key: &str, fresh: bool) -> Result<(), StoreError> {
        let id = format!("{list} {key}");
        let now = Instant::now();
        let listed =
            |m: &HashMap<String, Instant>| m.get(&id).is_some_and(|at| now.duration_since(*at) < RELIST);
        if !fresh && listed(&LISTED.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(());
        }
        let _: () = self.c().sadd(list, key).await.map_err(err)?;
        let mut m = LISTED.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, at| now.duration_since(*at) < RELIST);
        m.insert(id, now);
        Ok(())
    }

    /// Drops the `names` whose buckets expired from `list`, then lists again any that a take made
    /// anew meanwhile (its process may not list it again for a while: [`RELIST`]).
    pub(super) async fn unlist(&self, l: Layout, list: &str, names: &[&String]) -> Result<(), StoreError> {
        let _: () = self.c().srem(list, names).await.map_err(err)?;
        let cmds: Vec<redis::Cmd> =
            names.iter().map(|n| redis::Cmd::exists(self.limit_key(l, "bucket", n))).collect();
        let there: Vec<bool> = self.each(&cmds).await.map_err(err)?;
        let back: Vec<&&String> = names.iter().zip(there).filter(|(_, t)| *t).map(|(n, _)| n).collect();
        if !back.is_empty() {
            let _: () = self.c().sadd(list, back).await.map_err(err)?;
        }
        Ok(())
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
            .key(self.limit_key(self.layout().await?, "places", key))
            .arg(who)
            .arg(max)
            .arg(ttl.as_millis().max(1) as u64)
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(held == 1)
    }

    async fn leave(&self, key: &str, who: &str) -> Result<(), StoreError> {
        let _: () =
            self.c().zrem(self.limit_key(self.layout().await?, "places", key), who).await.map_err(err)?;
        Ok(())
    }

    /// Places whose time ran out are counted until the next `enter` removes them.
    async fn holders(&self, key: &str) -> Result<u32, StoreError> {
        self.c().zcard(self.limit_key(self.layout().await?, "places", key)).await.map_err(err)
    }

    async fn levels(&self) -> Result<Vec<Level>, StoreError> {
        let l = self.layout().await?;
        let list = self.k("buckets");
        let names: Vec<String> = self.c().smembers(&list).await.map_err(err)?;
        if names.is_empty() {
            return Ok(Vec::new()); // (an empty pipeline is an error)
        }
        let cmds: Vec<redis::Cmd> =
            names.iter().map(|n| redis::Cmd::hgetall(self.limit_key(l, "bucket", n))).collect();
        let all: Vec<HashMap<String, String>> = self.each(&cmds).await.map_err(err)?;
        let mut out = Vec::new();
        let mut expired = Vec::new();
        for (name, h) in names.iter().zip(all) {
            if h.is_empty() {
                expired.push(name); // (unused for an hour: its bucket expired)
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
        if !expired.is_empty() {
            self.unlist(l, &list, &expired).await?;
        }
        out.sort_by(|a, b| (&a.project, &a.class).cmp(&(&b.project, &b.class)));
        Ok(out)
    }
}
