//! Healing the Redis store's derived keys (the VM indexes, the deadline index, the hostname index,
//! what each VM counts and every Config's sums) from the VM records, which are the truth: finding
//! what needs it (the heal set the write scripts flag, shared keys of the wrong type, sizes that
//! disagree) and rebuilding it, fenced by each VM's version so a rebuild racing writes loses none.
//!
//! A rebuild of a scope goes in four steps, each one atomic script: drop the scope's keys of the
//! wrong type (from then on every write maintains them again); read the records (HSCAN, then each
//! chunk with its versions at once); write each chunk's entries for the VMs still at the version
//! read (a VM written since wrote perhaps only what it changed: its `vm:idx` entry is dropped, so
//! its next write writes them all, and it is read and written once more); then per Config drop
//! members naming no record and count its sums again from what each VM counts. A shared-scope
//! rebuild ends by dropping shared entries that name no record.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use gce_backend_jobs::model::{SUMS, Vm};
use gce_backend_jobs::naming::parse_id;
use gce_backend_jobs::ports::store::{Rebuilt, Scope, StoreError};
use redis::{AsyncCommands, Script};

use super::RedisStore;
use super::conn::err;

/// The shared derived keys and their types, in the order the scripts below take them.
const SHARED: [(&str, &str); 8] = [
    ("vm:uncreated", "set"),
    ("vm:created", "set"),
    ("vm:host", "hash"),
    ("vm:cfgs", "set"),
    ("vm:counted", "hash"),
    ("vm:deadline", "zset"),
    ("vm:zoned", "hash"),
    ("bots", "hash"),
];

/// How often at most shared indexes whose sizes disagree with the records are rebuilt.
const SIZES_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

/// Records read and written per script call.
const CHUNK: usize = 500;

/// Records as read, and their versions, in the order of their ids.
type Chunk = (Vec<Option<String>>, Vec<Option<String>>);

/// KEYS: the keys to check; ARGV: their types. Drops each that holds another type; returns
/// their names.
pub(super) static DROP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local dropped = {}
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= ARGV[i] then redis.call('DEL', KEYS[i]); dropped[#dropped + 1] = KEYS[i] end
end
return dropped",
    )
});

/// KEYS heal, then the shared keys (`SHARED`, less `bots`), then vm:ver; ARGV their types. The
/// heal set's members; `*` also when a shared key holds the wrong type, `#` when the shared
/// indexes disagree in size with the records (every VM is either created or not, has a hostname
/// entry and what it counts; no more deadlines than created VMs).
static CHECK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local out = {}
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'set' then out = redis.call('SMEMBERS', KEYS[1]) elseif t ~= 'none' then return {'*'} end
for i = 2, #KEYS - 1 do
  local have = redis.call('TYPE', KEYS[i]).ok
  if have ~= 'none' and have ~= ARGV[i - 1] then out[#out + 1] = '*'; return out end
end
local vms = redis.call('HLEN', KEYS[#KEYS])
local made = redis.call('SCARD', KEYS[3])
if made + redis.call('SCARD', KEYS[2]) ~= vms or redis.call('ZCARD', KEYS[7]) > made
  or redis.call('HLEN', KEYS[4]) < vms or redis.call('HLEN', KEYS[6]) < vms or redis.call('HLEN', KEYS[8]) < vms then
  out[#out + 1] = '#'
end
return out",
    )
});

/// KEYS vm:cfg:<prefix>, sums:<prefix>. 1 when both hold their type (or nothing) and the VM
/// index is as large as the sums' VM count (or the sums are not complete yet).
static SOUND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local a, b = redis.call('TYPE', KEYS[1]).ok, redis.call('TYPE', KEYS[2]).ok
if (a ~= 'set' and a ~= 'none') or (b ~= 'hash' and b ~= 'none') then return 0 end
if not redis.call('HGET', KEYS[2], 'complete') then return 1 end
if tonumber(redis.call('HGET', KEYS[2], '0') or '0') ~= redis.call('SCARD', KEYS[1]) then return 0 end
return 1",
    )
});

/// KEYS vm:ver, uncreated, created, host, cfgs, counted, deadlines, zoned, vm:cfg:<prefix>, idx;
/// ARGV prefix, then per VM: id, version, created (1/0; '' for a record that does not decode),
/// hostname, deadline (ms, '' none), what it counts (bits), what it counts in its zone. Writes
/// the entries of each VM still at that version; returns how many VMs had one missing or wrong,
/// and the ids of those written since (their `vm:idx` entry dropped: their next write writes
/// every entry, as a write since may have written only what it changed).
static APPLY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local fixed, records, moved = 0, 0, {}
local function sadd(k, m) fixed = fixed + redis.call('SADD', k, m) end
local function srem(k, m) fixed = fixed + redis.call('SREM', k, m) end
local function hset(k, f, v)
  if redis.call('HGET', k, f) ~= v then redis.call('HSET', k, f, v); fixed = fixed + 1 end
end
for i = 2, #ARGV, 7 do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[1], id) == ARGV[i + 1] then
    local before = fixed
    sadd(KEYS[9], id)
    if ARGV[i + 2] == '' then
      if redis.call('SISMEMBER', KEYS[3], id) == 0 then sadd(KEYS[2], id) end
      if redis.call('HEXISTS', KEYS[6], id) == 0 then hset(KEYS[6], id, '1') end
      if redis.call('HEXISTS', KEYS[8], id) == 0 then hset(KEYS[8], id, '1@') end
    else
      if ARGV[i + 2] == '1' then srem(KEYS[2], id); sadd(KEYS[3], id) else srem(KEYS[3], id); sadd(KEYS[2], id) end
      hset(KEYS[4], ARGV[i + 3], id)
      if ARGV[i + 4] == '' then
        fixed = fixed + redis.call('ZREM', KEYS[7], id)
      elseif tonumber(redis.call('ZSCORE', KEYS[7], id) or '-1') ~= tonumber(ARGV[i + 4]) then
        redis.call('ZADD', KEYS[7], ARGV[i + 4], id); fixed = fixed + 1
      end
      hset(KEYS[6], id, ARGV[i + 5])
      hset(KEYS[8], id, ARGV[i + 6])
    end
    if fixed > before then records = records + 1 end
  else
    redis.call('HDEL', KEYS[10], id)
    moved[#moved + 1] = id
  end
end
if redis.call('SCARD', KEYS[9]) > 0 then redis.call('SADD', KEYS[5], ARGV[1]) end
return {records, moved}",
    )
});

/// KEYS vm:ver, vm:cfg:<prefix>, uncreated, created, deadlines, counted, zoned, sums:<prefix>,
/// cfgs; ARGV prefix, how many sums. Drops the Config's members naming no record (and their
/// shared entries), then counts its sums again from what each member counts (none left: no sums,
/// as for a Config never counted). Returns {members dropped, 1 if the sums differed}.
static FINISH: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local stale, live = 0, {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('HEXISTS', KEYS[1], id) == 0 then
    redis.call('SREM', KEYS[2], id); redis.call('SREM', KEYS[3], id); redis.call('SREM', KEYS[4], id)
    redis.call('ZREM', KEYS[5], id); redis.call('HDEL', KEYS[6], id); redis.call('HDEL', KEYS[7], id)
    stale = stale + 1
  else
    live[#live + 1] = id
  end
end
local n, fresh = tonumber(ARGV[2]), {}
local function count(bits, pre)
  for i = 0, n - 1 do
    if math.floor(bits / 2 ^ i) % 2 == 1 then fresh[pre .. i] = (fresh[pre .. i] or 0) + 1 end
  end
end
for _, id in ipairs(live) do
  count(tonumber(redis.call('HGET', KEYS[6], id) or '0') or 0, '')
  local z = redis.call('HGET', KEYS[7], id)
  if z then
    local b, zone = string.match(z, '^(%d+)@(.*)$')
    if b then count(tonumber(b), zone .. '/') end
  end
end
local differ, seen, cur = 0, {}, redis.call('HGETALL', KEYS[8])
for i = 1, #cur, 2 do
  if cur[i] ~= 'complete' then
    seen[cur[i]] = true
    if (tonumber(cur[i + 1]) or 0) ~= (fresh[cur[i]] or 0) then differ = 1 end
  end
end
for f, v in pairs(fresh) do if not seen[f] then differ = 1 end end
redis.call('DEL', KEYS[8])
if #live == 0 then
  redis.call('SREM', KEYS[9], ARGV[1])
else
  for f, v in pairs(fresh) do redis.call('HSET', KEYS[8], f, v) end
  redis.call('HSET', KEYS[8], 'complete', 1)
  redis.call('SADD', KEYS[9], ARGV[1])
end
return {stale, differ}",
    )
});

/// KEYS vm:ver, uncreated, created, deadlines, counted, zoned, host, cfgs; ARGV the key prefix of
/// the Configs' VM indexes. Drops shared entries naming no record, and prefixes without VMs;
/// returns how many.
static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local stale = 0
local function gone(id) return redis.call('HEXISTS', KEYS[1], id) == 0 end
for _, i in ipairs({2, 3}) do
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[i])) do
    if gone(id) then redis.call('SREM', KEYS[i], id); stale = stale + 1 end
  end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
  if gone(id) then redis.call('ZREM', KEYS[4], id); stale = stale + 1 end
end
for _, i in ipairs({5, 6}) do
  for _, id in ipairs(redis.call('HKEYS', KEYS[i])) do
    if gone(id) then redis.call('HDEL', KEYS[i], id); stale = stale + 1 end
  end
end
local host = redis.call('HGETALL', KEYS[7])
for i = 1, #host, 2 do
  if gone(host[i + 1]) then redis.call('HDEL', KEYS[7], host[i]); stale = stale + 1 end
end
for _, p in ipairs(redis.call('SMEMBERS', KEYS[8])) do
  if redis.call('SCARD', ARGV[1] .. p) == 0 then redis.call('SREM', KEYS[8], p); stale = stale + 1 end
end
return stale",
    )
});

impl RedisStore {
    /// [`gce_backend_jobs::ports::store::Store::heal_requests`].
    pub(super) async fn heal_scopes(&self) -> Result<Vec<Scope>, StoreError> {
        let mut call = CHECK.key(self.k("heal"));
        for (part, typ) in &SHARED[..7] {
            call.key(self.k(part)).arg(*typ);
        }
        let flags: Vec<String> = call.key(self.k("vm:ver")).invoke_async(&mut self.c()).await.map_err(err)?;
        let mut scopes = Vec::new();
        for f in flags {
            scopes.push(match f.strip_prefix("cfg:") {
                Some(p) => Scope::Config(p.to_owned()),
                // Sizes that disagree: at most one rebuild of everything per SIZES_EVERY (a record
                // no rebuild can index, say one that does not decode, must not make it every tick).
                None if f == "#" => match self.claim_sizes().await? {
                    true => Scope::All,
                    false => continue,
                },
                None => Scope::All,
            });
        }
        scopes.sort();
        scopes.dedup();
        if scopes.contains(&Scope::All) {
            scopes = vec![Scope::All]; // covers every Config's
        }
        Ok(scopes)
    }

    async fn claim_sizes(&self) -> Result<bool, StoreError> {
        use gce_backend_jobs::ports::store::Store;
        self.claim("heal-sizes", SIZES_EVERY).await
    }

    /// [`gce_backend_jobs::ports::store::Store::derived_sound`].
    pub(super) async fn sound(&self, prefix: &str) -> Result<bool, StoreError> {
        let ok: i64 = SOUND
            .key(self.k(&format!("vm:cfg:{prefix}")))
            .key(self.k(&format!("sums:{prefix}")))
            .invoke_async(&mut self.c())
            .await
            .map_err(err)?;
        Ok(ok == 1)
    }

    /// [`gce_backend_jobs::ports::store::Store::rebuild`].
    pub(super) async fn rebuild_scope(&self, scope: &Scope) -> Result<Rebuilt, StoreError> {
        let mut out = Rebuilt { replaced: self.drop_wrong(&SHARED).await?, ..Rebuilt::default() };
        if !out.replaced.is_empty() && *scope != Scope::All {
            // A shared key was of the wrong type: every Config's entries in it are to be written.
            let all = Box::pin(self.rebuild_scope(&Scope::All)).await?;
            out.replaced.extend(all.replaced);
            return Ok(Rebuilt { replaced: out.replaced, ..all });
        }
        let by_config = self.records(scope).await?;
        let mut prefixes: Vec<String> = by_config.keys().cloned().collect();
        match scope {
            Scope::Config(p) if !prefixes.contains(p) => prefixes.push(p.clone()),
            Scope::All => {
                // Prefixes listed with no record left: their indexes are emptied.
                let listed: Vec<String> = self.c().smembers(self.k("vm:cfgs")).await.map_err(err)?;
                prefixes.extend(listed.into_iter().filter(|p| !by_config.contains_key(p)));
            }
            Scope::Config(_) => {}
        }
        for prefix in prefixes {
            let own = [(format!("vm:cfg:{prefix}"), "set"), (format!("sums:{prefix}"), "hash")];
            out.replaced.extend(self.drop_wrong(&own.each_ref().map(|(k, t)| (k.as_str(), *t))).await?);
            for chunk in by_config.get(&prefix).map_or(&[][..], Vec::as_slice).chunks(CHUNK) {
                let read = self.read_chunk(chunk).await?;
                self.apply_chunk(&prefix, chunk, read, &mut out).await?;
            }
            let (stale, differ) = self.finish(&prefix).await?;
            out.stale += stale;
            if differ {
                out.recounted.push(prefix);
            }
        }
        if *scope == Scope::All {
            let mut call = SWEEP.key(self.k("vm:ver"));
            for part in
                ["vm:uncreated", "vm:created", "vm:deadline", "vm:counted", "vm:zoned", "vm:host", "vm:cfgs"]
            {
                call.key(self.k(part));
            }
            let stale: usize = call.arg(self.k("vm:cfg:")).invoke_async(&mut self.c()).await.map_err(err)?;
            out.stale += stale;
        }
        let flag = match scope {
            Scope::Config(p) => format!("cfg:{p}"),
            Scope::All => "*".to_owned(),
        };
        let cleared: Result<(), _> = self.c().srem(self.k("heal"), flag).await;
        if cleared.is_err() {
            let _: () = self.c().del(self.k("heal")).await.map_err(err)?; // (of the wrong type itself)
        }
        Ok(out)
    }

    /// Drops the keys (`part`, type) that hold another type; returns their names.
    async fn drop_wrong(&self, keys: &[(&str, &str)]) -> Result<Vec<String>, StoreError> {
        let mut call = DROP.prepare_invoke();
        for (part, typ) in keys {
            call.key(self.k(part)).arg(*typ);
        }
        let dropped: Vec<String> = call.invoke_async(&mut self.c()).await.map_err(err)?;
        let tag = self.k("");
        Ok(dropped.into_iter().map(|k| k.strip_prefix(&tag).map(str::to_owned).unwrap_or(k)).collect())
    }

    /// The ids of the VM records of `scope`, by Config (HSCAN: no read holds Redis for long).
    async fn records(&self, scope: &Scope) -> Result<BTreeMap<String, Vec<String>>, StoreError> {
        let pattern = match scope {
            Scope::Config(p) => format!("{p}-*"),
            Scope::All => "*".to_owned(),
        };
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, page): (u64, Vec<String>) = redis::cmd("HSCAN")
                .arg(self.k("vm:ver"))
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut self.c())
                .await
                .map_err(err)?;
            for id in page.into_iter().step_by(2) {
                let Some((prefix, _)) = parse_id(&id) else { continue };
                if matches!(scope, Scope::Config(p) if p != prefix) {
                    continue;
                }
                out.entry(prefix.to_owned()).or_default().push(id);
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        for ids in out.values_mut() {
            ids.sort();
            ids.dedup(); // (HSCAN may return a field twice)
        }
        Ok(out)
    }

    /// The records of `ids` and their versions, read together.
    async fn read_chunk(&self, ids: &[String]) -> Result<Chunk, StoreError> {
        redis::pipe()
            .atomic()
            .cmd("HMGET")
            .arg(self.k("vm"))
            .arg(ids)
            .cmd("HMGET")
            .arg(self.k("vm:ver"))
            .arg(ids)
            .query_async(&mut self.c())
            .await
            .map_err(err)
    }

    /// Writes the entries of `ids` (of Config `prefix`) from `read`, their records as read
    /// before; those written since are read and written once more, at their new version (a VM
    /// written again meanwhile wrote every entry: its `vm:idx` entry is gone).
    async fn apply_chunk(
        &self,
        prefix: &str,
        ids: &[String],
        read: Chunk,
        out: &mut Rebuilt,
    ) -> Result<(), StoreError> {
        let (vms, fixed, moved) = self.apply(prefix, ids, read, &mut out.corrupt).await?;
        out.vms += vms;
        out.fixed += fixed;
        if !moved.is_empty() {
            let again = self.read_chunk(&moved).await?;
            let (_, fixed, _) = self.apply(prefix, &moved, again, &mut Vec::new()).await?;
            out.fixed += fixed;
        }
        Ok(())
    }

    /// Writes the entries of `ids` (of Config `prefix`) still at the version read with their
    /// records; returns (records read, records whose entries were wrong, ids written since),
    /// adding to `corrupt` the ids whose record does not decode.
    async fn apply(
        &self,
        prefix: &str,
        ids: &[String],
        (raw, vers): Chunk,
        corrupt: &mut Vec<String>,
    ) -> Result<(usize, usize, Vec<String>), StoreError> {
        let mut call = APPLY.prepare_invoke();
        for part in [
            "vm:ver",
            "vm:uncreated",
            "vm:created",
            "vm:host",
            "vm:cfgs",
            "vm:counted",
            "vm:deadline",
            "vm:zoned",
        ] {
            call.key(self.k(part));
        }
        call.key(self.k(&format!("vm:cfg:{prefix}"))).key(self.k("vm:idx")).arg(prefix);
        let mut read = 0;
        for ((id, raw), ver) in ids.iter().zip(raw).zip(vers) {
            let (Some(raw), Some(ver)) = (raw, ver) else { continue };
            read += 1;
            match Vm::decode(&raw) {
                Ok(vm) if vm.config != prefix || vm.id != *id => continue, // not this Config's
                Ok(vm) => {
                    let deadline = vm.deadline().map_or(String::new(), |d| d.timestamp_millis().to_string());
                    call.arg(id).arg(ver).arg(if vm.instance.is_some() { "1" } else { "0" });
                    call.arg(&vm.hostname).arg(deadline).arg(vm.counted()).arg(super::sums::zoned(&vm));
                }
                // A newer build's record is left to it: that build indexes it.
                Err(gce_backend_jobs::model::Undecoded::Newer(_)) => continue,
                Err(gce_backend_jobs::model::Undecoded::Corrupt(_)) => {
                    corrupt.push(id.clone());
                    call.arg(id).arg(ver).arg("").arg("").arg("").arg("").arg("");
                }
            }
        }
        let (fixed, moved): (usize, Vec<String>) = call.invoke_async(&mut self.c()).await.map_err(err)?;
        Ok((read, fixed, moved))
    }

    /// Drops Config `prefix`'s members naming no record and counts its sums again; returns
    /// (members dropped, whether its sums differed).
    async fn finish(&self, prefix: &str) -> Result<(usize, bool), StoreError> {
        let mut call = FINISH.prepare_invoke();
        call.key(self.k("vm:ver")).key(self.k(&format!("vm:cfg:{prefix}")));
        for part in ["vm:uncreated", "vm:created", "vm:deadline", "vm:counted", "vm:zoned"] {
            call.key(self.k(part));
        }
        call.key(self.k(&format!("sums:{prefix}"))).key(self.k("vm:cfgs"));
        let (stale, differ): (usize, i64) =
            call.arg(prefix).arg(SUMS).invoke_async(&mut self.c()).await.map_err(err)?;
        Ok((stale, differ == 1))
    }
}

#[cfg(test)]
mod tests;
