//! The Lua scripts of the Redis store: compare-and-set writes and deletes of records and VMs
//! with their indexes and their Configs' sums (totals and per zone), resolving a Config's errors,
//! and leases. (The rebuild of derived keys has its own: `heal.rs`.)

/// The compare-and-set of every write: KEYS[1] records, KEYS[2] versions; ARGV[1] field,
/// ARGV[2] expected version ('' = absent), ARGV[3] JSON. Leaves the new version in `v`.
macro_rules! cas_write {
    () => {
        r"
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if ARGV[2] == '' then if cur then return 0 end elseif (cur or '0') ~= ARGV[2] then return 0 end
local v = (tonumber(cur) or 0) + 1
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], v)
"
    };
}

/// `shift(key, op, ob, np, nb, n)`: moves the sums hash `key` from counting bits `ob` under
/// field prefix `op` to counting bits `nb` under `np` (bits of `Vm::counted`, `n` of them): one
/// HINCRBY per field that changes. A Config's totals are fields `i` (prefix ''), its zone sums
/// fields `<zone>/i`. `zoned(s)` reads a `vm:zoned` entry (`bits@zone`; none: nothing counted).
macro_rules! shift {
    () => {
        r"
local function shift(key, op, ob, np, nb, n)
  for i = 0, n - 1 do
    local a, b = math.floor(ob / 2 ^ i) % 2, math.floor(nb / 2 ^ i) % 2
    if op == np then
      if a ~= b then redis.call('HINCRBY', key, np .. i, b - a) end
    else
      if a == 1 then redis.call('HINCRBY', key, op .. i, -1) end
      if b == 1 then redis.call('HINCRBY', key, np .. i, 1) end
    end
  end
end
local function zoned(s)
  if not s then return 0, '/' end
  local b, z = string.match(s, '^(%d+)@(.*)$')
  return tonumber(b) or 0, (z or '') .. '/'
end
"
    };
}

/// `usable(k, t, scope)`: whether key `k` holds type `t` (or nothing); a derived key of another
/// type is left alone and `scope` (`cfg:<prefix>`, or `*` for a shared index) flagged in the
/// heal set, the last of KEYS, for a rebuild (`heal.rs`), so a write still does the rest.
macro_rules! guard {
    () => {
        r"
local function flag(scope)
  local heal = KEYS[#KEYS]
  if redis.call('TYPE', heal).ok ~= 'set' then redis.call('DEL', heal) end
  redis.call('SADD', heal, scope)
end
local function usable(k, t, scope)
  local have = redis.call('TYPE', k).ok
  if have == t or have == 'none' then return true end
  flag(scope)
  return false
end
"
    };
}

/// CAS write of a record.
pub(super) const PUT: &str = concat!(cas_write!(), "return v");

/// CAS delete of a record: KEYS records, versions; ARGV field, version.
pub(super) const DELETE: &str = r"
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1";

/// CAS write of a VM with its indexes and its Config's sums. KEYS vm, ver, uncreated, created,
/// host, cfgs, cfg set, counted, sums, deadlines, zoned, heal; ARGV id, expected version, JSON,
/// hostname, created (1/0), prefix, what it counts (bits), how many sums, deadline (ms, '' without
/// one), what it counts in its zone (`bits@zone`). `vm:counted` holds bits only, as builds before
/// zone sums wrote it, so such a build still runs against the same Redis (the zone sums it leaves
/// behind are counted again: `RECOUNT_ZONES`). A derived key of the wrong type is skipped and
/// flagged (`guard`): the record is written all the same.
pub(super) const PUT_VM: &str = concat!(
    shift!(),
    guard!(),
    cas_write!(),
    r"
local cs = 'cfg:' .. ARGV[6]
local n = tonumber(ARGV[8])
local sums = usable(KEYS[9], 'hash', cs)
if usable(KEYS[8], 'hash', '*') then
  local old, new = tonumber(redis.call('HGET', KEYS[8], ARGV[1]) or '0'), tonumber(ARGV[7])
  if old ~= new then
    if sums then shift(KEYS[9], '', old, '', new, n) end
    redis.call('HSET', KEYS[8], ARGV[1], new)
  end
end
if usable(KEYS[11], 'hash', '*') then
  local zo = redis.call('HGET', KEYS[11], ARGV[1])
  if zo ~= ARGV[10] then
    local ob, op = zoned(zo)
    local nb, np = zoned(ARGV[10])
    if sums then shift(KEYS[9], op, ob, np, nb, n) end
    redis.call('HSET', KEYS[11], ARGV[1], ARGV[10])
  end
end
local made = ARGV[5] == '1'
if usable(KEYS[3], 'set', '*') then
  if made then redis.call('SREM', KEYS[3], ARGV[1]) else redis.call('SADD', KEYS[3], ARGV[1]) end
end
if usable(KEYS[4], 'set', '*') then
  if made then redis.call('SADD', KEYS[4], ARGV[1]) else redis.call('SREM', KEYS[4], ARGV[1]) end
end
if usable(KEYS[5], 'hash', '*') then redis.call('HSET', KEYS[5], ARGV[4], ARGV[1]) end
if usable(KEYS[7], 'set', cs) then redis.call('SADD', KEYS[7], ARGV[1]) end
if usable(KEYS[6], 'set', '*') then redis.call('SADD', KEYS[6], ARGV[6]) end
if usable(KEYS[10], 'zset', '*') then
  if ARGV[9] == '' then redis.call('ZREM', KEYS[10], ARGV[1]) else redis.call('ZADD', KEYS[10], ARGV[9], ARGV[1]) end
end
return v"
);

/// CAS delete of a VM with its indexes, bot observation and its part of its Config's sums. KEYS
/// vm, ver, uncreated, created, host, cfgs, cfg set, bots, counted, sums, deadlines, zoned, heal;
/// ARGV id, version, hostname, prefix, how many sums. A derived key of the wrong type is skipped
/// and flagged (`guard`).
pub(super) const DELETE_VM: &str = concat!(
    shift!(),
    guard!(),
    r"
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[2] then return 0 end
local cs = 'cfg:' .. ARGV[4]
local n = tonumber(ARGV[5])
local sums = usable(KEYS[10], 'hash', cs)
if usable(KEYS[9], 'hash', '*') then
  if sums then shift(KEYS[10], '', tonumber(redis.call('HGET', KEYS[9], ARGV[1]) or '0'), '', 0, n) end
  redis.call('HDEL', KEYS[9], ARGV[1])
end
if usable(KEYS[12], 'hash', '*') then
  local zo = redis.call('HGET', KEYS[12], ARGV[1])
  if zo then
    local ob, op = zoned(zo)
    if sums then shift(KEYS[10], op, ob, op, 0, n) end
    redis.call('HDEL', KEYS[12], ARGV[1])
  end
end
redis.call('HDEL', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], ARGV[1])
if usable(KEYS[3], 'set', '*') then redis.call('SREM', KEYS[3], ARGV[1]) end
if usable(KEYS[4], 'set', '*') then redis.call('SREM', KEYS[4], ARGV[1]) end
if usable(KEYS[11], 'zset', '*') then redis.call('ZREM', KEYS[11], ARGV[1]) end
if usable(KEYS[7], 'set', cs) then
  redis.call('SREM', KEYS[7], ARGV[1])
  if redis.call('SCARD', KEYS[7]) == 0 and usable(KEYS[6], 'set', '*') then redis.call('SREM', KEYS[6], ARGV[4]) end
end
local host, bots = usable(KEYS[5], 'hash', '*'), usable(KEYS[8], 'hash', '*')
if ARGV[3] == '' then
  -- A corrupt record: its hostname is unknown, so find its entries (rare: one scan).
  if host then
    local all = redis.call('HGETALL', KEYS[5])
    for i = 1, #all, 2 do
      if all[i + 1] == ARGV[1] then
        redis.call('HDEL', KEYS[5], all[i])
        if bots then redis.call('HDEL', KEYS[8], all[i]) end
      end
    end
  end
else
  if host and redis.call('HGET', KEYS[5], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[5], ARGV[3]) end
  if bots then redis.call('HDEL', KEYS[8], ARGV[3]) end
end
return 1"
);

/// Counts in a VM written before sums (or zone sums) were kept, unless counted already or written
/// since. KEYS ver, counted, sums, zoned, heal; ARGV id, version, what it counts (bits), how many
/// sums, what it counts in its zone (`bits@zone`), the Config's heal scope (`cfg:<prefix>`).
/// Nothing is counted while a key holds the wrong type (flagged: the rebuild counts it).
pub(super) const COUNT_IN: &str = concat!(
    shift!(),
    guard!(),
    r"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
local sums, counted, zoned_ok = usable(KEYS[3], 'hash', ARGV[6]), usable(KEYS[2], 'hash', '*'), usable(KEYS[4], 'hash', '*')
if not (sums and counted and zoned_ok) then return 0 end
local n = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  shift(KEYS[3], '', 0, '', tonumber(ARGV[3]), n)
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  local nb, np = zoned(ARGV[5])
  shift(KEYS[3], np, 0, np, nb, n)
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
end
return 1"
);

/// Counts a Config's zone sums again from its VMs, when they disagree with its totals (VMs counted
/// before zone sums were kept, or written by a build that keeps none): every `<zone>/i` field
/// dropped, then each VM of the Config counted in its zone (read from its record; a record that
/// does not decode, in zone '') with the bits its totals count. KEYS vm, cfg set, counted,
/// zoned, sums, heal; ARGV how many sums, the Config's heal scope. O(VMs of the Config), atomic;
/// nothing while a key holds the wrong type (flagged: the rebuild counts them all).
pub(super) const RECOUNT_ZONES: &str = concat!(
    shift!(),
    guard!(),
    r"
local a, b = usable(KEYS[2], 'set', ARGV[2]), usable(KEYS[5], 'hash', ARGV[2])
local c, d = usable(KEYS[3], 'hash', '*'), usable(KEYS[4], 'hash', '*')
if not (a and b and c and d) then return 0 end
local n = tonumber(ARGV[1])
for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
  if string.find(f, '/', 1, true) then redis.call('HDEL', KEYS[5], f) end
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local bits = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  local zone = ''
  local ok, v = pcall(cjson.decode, redis.call('HGET', KEYS[1], id) or '')
  if ok and type(v) == 'table' and type(v.attributes) == 'table' and type(v.attributes.zone) == 'string' then
    zone = v.attributes.zone
  end
  shift(KEYS[5], zone .. '/', 0, zone .. '/', bits, n)
  redis.call('HSET', KEYS[4], id, bits .. '@' .. zone)
end
return 1"
);

/// Marks a Config's unresolved errors of some stages resolved: KEYS[1] the error list; ARGV time
/// (RFC 3339), the stages. Entries are rewritten in place, so concurrent pushes are not lost.
pub(super) const RESOLVE: &str = r"
local stages = {}
for i = 2, #ARGV do stages[ARGV[i]] = true end
local list = redis.call('LRANGE', KEYS[1], 0, -1)
for i, raw in ipairs(list) do
  local ok, e = pcall(cjson.decode, raw)
  if ok and type(e) == 'table' and stages[e.stage] and e.resolved == nil then
    e.resolved = ARGV[1]
    redis.call('LSET', KEYS[1], i - 1, cjson.encode(e))
  end
end
return 0";

/// KEYS[1]: a lease; ARGV: the holder, the time to live in ms. Takes it when free, renews it
/// when the holder has it; 1 when held by the holder now.
pub(super) static LEASE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0",
    )
});

/// [`PUT`] of a Config only while a lease is held: KEYS[3] the lease, ARGV[4] its holder.
pub(super) static PUT_FENCED: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(concat!(
        "if redis.call('GET', KEYS[3]) ~= ARGV[4] then return 0 end\n",
        cas_write!(),
        "return v"
    ))
});

/// KEYS[1]: a lease; ARGV: the holder, the time to live in ms. Extends it only while the holder
/// has it (never takes a lapsed one back); 1 when extended.
pub(super) static RENEW: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0",
    )
});

/// KEYS[1]: a lease; ARGV[1]: the holder. Deletes it only while the holder has it.
pub(super) static RELEASE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0",
    )
});
