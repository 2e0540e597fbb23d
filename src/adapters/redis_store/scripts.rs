//! The Lua scripts of the Redis store: compare-and-set writes and deletes of records and VMs
//! with their indexes and their Configs' sums (totals and per zone), resolving a Config's errors,
//! and leases. (The rebuild of derived keys has its own: `safety/heal.rs`.)

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

/// `shift(key, op, ob, np, nb, n, scope)`: moves the sums hash `key` from counting bits `ob`
/// under field prefix `op` to counting bits `nb` under `np` (bits of `Vm::counted`, `n` of them):
/// one HINCRBY per field that changes (through `try`, flagging `scope`). A Config's totals are
/// fields `i` (prefix ''), its zone sums fields `<zone>/i`. `zoned(s)` reads a `vm:zoned` entry
/// (`bits@zone`; none: nothing counted). Comes after `guard`.
macro_rules! shift {
    () => {
        r"
local function shift(key, op, ob, np, nb, n, scope)
  for i = 0, n - 1 do
    local a, b = math.floor(ob / 2 ^ i) % 2, math.floor(nb / 2 ^ i) % 2
    if op == np then
      if a ~= b then try(scope, 'HINCRBY', key, np .. i, b - a) end
    else
      if a == 1 then try(scope, 'HINCRBY', key, op .. i, -1) end
      if b == 1 then try(scope, 'HINCRBY', key, np .. i, 1) end
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

/// `try(scope, cmd, ...)`: runs a command on a derived key; a key of the wrong type answers an
/// error, which is caught (no TYPE check costs a command on the way) and flags `scope`
/// (`cfg:<prefix>`, or `*` for a shared index) in the heal set, the last of KEYS, for a rebuild
/// (`safety/heal.rs`). Returns nil then, so the caller skips what depends on it and does the rest;
/// `broken` says one did.
/// `usable(k, t, scope)` asks first (a TYPE): for the rare scripts that act only when every key
/// holds its type.
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
local broken = false
local function try(scope, ...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then broken = true; flag(scope); return nil end
  return r
end
"
    };
}

/// `spend(key, from)`: adds to the Config's ledger `key` (a HASH; of another type: left alone)
/// the amounts of the field/amount pairs `ARGV[from..]` (`model::spend`): with the write that
/// made them, once.
macro_rules! spend {
    () => {
        r"
local function spend(key, from)
  if from > #ARGV then return end
  local t = redis.call('TYPE', key).ok
  if t ~= 'hash' and t ~= 'none' then return end
  for i = from, #ARGV - 1, 2 do redis.call('HINCRBY', key, ARGV[i], ARGV[i + 1]) end
end
"
    };
}

/// Refuses a layout-1 write once the store is (being) moved to layout 2: KEYS[#KEYS - 1] is the
/// layout key.
macro_rules! layout_one {
    () => {
        r"
local lay = redis.call('GET', KEYS[#KEYS - 1])
if lay and lay ~= '1' then return redis.error_reply('LAYOUT the store moved to key layout ' .. lay) end
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

/// CAS write of a VM with its indexes, its Config's sums and its ledger. KEYS vm, ver, uncreated,
/// created, host, cfgs, cfg set, counted, sums, deadlines, zoned, idx, ledger, layout, heal; ARGV
/// id, expected version, JSON, hostname, created (1/0), prefix, what it counts (bits), how many
/// sums, deadline (ms, '' without one), what it counts in its zone (`bits@zone`), then the
/// ledger's field/amount pairs. `vm:counted` holds bits only, as builds
/// before zone sums wrote it, so such a build still runs against the same Redis (the zone sums it
/// leaves behind are counted again: `RECOUNT_ZONES`).
///
/// `vm:idx` holds, per VM, the version this script wrote and what its indexes say of it then
/// (`version|created|deadline|bits|bits@zone|hostname`). While that version is the one replaced
/// (no other build or rebuild wrote since: those do not keep it, or drop it), only what changed
/// is written; otherwise every entry is written again (and where one could not be, the entry is
/// dropped, so the next write tries them all again). A derived key of the wrong type is skipped
/// and flagged (`try`): the record is written all the same.
pub(super) const PUT_VM: &str = concat!(
    layout_one!(),
    guard!(),
    shift!(),
    spend!(),
    cas_write!(),
    r"
spend(KEYS[13], 11)
local id, cs = ARGV[1], 'cfg:' .. ARGV[6]
local n, made, dl, bits, zo, host = tonumber(ARGV[8]), ARGV[5], ARGV[9], ARGV[7], ARGV[10], ARGV[4]
local state = table.concat({made, dl, bits, zo, host}, '|')
local prior = try('*', 'HGET', KEYS[12], id)
local pv, said = string.match(prior or '', '^(%d+)|(.*)$')
local was = nil
if pv == (cur or '0') then
  if said == state then
    try('*', 'HSET', KEYS[12], id, v .. '|' .. state)
    return v
  end
  local pm, pd, pb, pz, ph = string.match(said, '^([01])|(%d*)|(%d+)|([^|]*)|(.*)$')
  if pm then was = {made = pm, dl = pd, bits = pb, zo = pz, host = ph} end
end
local old = was and was.bits or try('*', 'HGET', KEYS[8], id)
if old ~= nil then
  old = tonumber(old or '0') or 0
  if old ~= tonumber(bits) then
    shift(KEYS[9], '', old, '', tonumber(bits), n, cs)
    try('*', 'HSET', KEYS[8], id, bits)
  end
end
local zold = was and was.zo or try('*', 'HGET', KEYS[11], id)
if zold ~= nil and zold ~= zo then
  local ob, op = zoned(zold)
  local nb, np = zoned(zo)
  shift(KEYS[9], op, ob, np, nb, n, cs)
  try('*', 'HSET', KEYS[11], id, zo)
end
if not was or was.made ~= made then
  if made == '1' then try('*', 'SREM', KEYS[3], id); try('*', 'SADD', KEYS[4], id)
  else try('*', 'SADD', KEYS[3], id); try('*', 'SREM', KEYS[4], id) end
end
if not was or was.host ~= host then try('*', 'HSET', KEYS[5], host, id) end
if not was then
  try(cs, 'SADD', KEYS[7], id)
  try('*', 'SADD', KEYS[6], ARGV[6])
end
if not was or was.dl ~= dl then
  if dl == '' then try('*', 'ZREM', KEYS[10], id) else try('*', 'ZADD', KEYS[10], dl, id) end
end
if broken then try('*', 'HDEL', KEYS[12], id) else try('*', 'HSET', KEYS[12], id, v .. '|' .. state) end
return v"
);

/// CAS delete of a VM with its indexes, bot observation and its part of its Config's sums, and
/// its ledger's changes. KEYS vm, ver, uncreated, created, host, cfgs, cfg set, bots, counted,
/// sums, deadlines, zoned, idx, ledger, layout, heal; ARGV id, version, hostname, prefix, how many
/// sums, then the ledger's field/amount pairs. A derived key of the wrong type is
/// skipped and flagged (`try`).
pub(super) const DELETE_VM: &str = concat!(
    layout_one!(),
    guard!(),
    shift!(),
    spend!(),
    r"
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[2] then return 0 end
spend(KEYS[14], 6)
local id, cs = ARGV[1], 'cfg:' .. ARGV[4]
local n = tonumber(ARGV[5])
local old = try('*', 'HGET', KEYS[9], id)
if old ~= nil then
  shift(KEYS[10], '', tonumber(old or '0') or 0, '', 0, n, cs)
  try('*', 'HDEL', KEYS[9], id)
end
local zo = try('*', 'HGET', KEYS[12], id)
if zo then
  local ob, op = zoned(zo)
  shift(KEYS[10], op, ob, op, 0, n, cs)
  try('*', 'HDEL', KEYS[12], id)
end
redis.call('HDEL', KEYS[1], id); redis.call('HDEL', KEYS[2], id)
try('*', 'HDEL', KEYS[13], id)
try('*', 'SREM', KEYS[3], id)
try('*', 'SREM', KEYS[4], id)
try('*', 'ZREM', KEYS[11], id)
if try(cs, 'SREM', KEYS[7], id) ~= nil and try(cs, 'SCARD', KEYS[7]) == 0 then try('*', 'SREM', KEYS[6], ARGV[4]) end
if ARGV[3] == '' then
  -- A corrupt record: its hostname is unknown, so find its entries (rare: one scan).
  local all = try('*', 'HGETALL', KEYS[5]) or {}
  for i = 1, #all, 2 do
    if all[i + 1] == id then
      redis.call('HDEL', KEYS[5], all[i])
      try('*', 'HDEL', KEYS[8], all[i])
    end
  end
else
  if try('*', 'HGET', KEYS[5], ARGV[3]) == id then redis.call('HDEL', KEYS[5], ARGV[3]) end
  try('*', 'HDEL', KEYS[8], ARGV[3])
end
return 1"
);

/// Counts in a VM written before sums (or zone sums) were kept, unless counted already or written
/// since. KEYS ver, counted, sums, zoned, heal; ARGV id, version, what it counts (bits), how many
/// sums, what it counts in its zone (`bits@zone`), the Config's heal scope (`cfg:<prefix>`).
/// Nothing is counted while a key holds the wrong type (flagged: the rebuild counts it).
pub(super) const COUNT_IN: &str = concat!(
    guard!(),
    shift!(),
    r"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
local sums, counted, zoned_ok = usable(KEYS[3], 'hash', ARGV[6]), usable(KEYS[2], 'hash', '*'), usable(KEYS[4], 'hash', '*')
if not (sums and counted and zoned_ok) then return 0 end
local n = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  shift(KEYS[3], '', 0, '', tonumber(ARGV[3]), n, ARGV[6])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
if redis.call('HEXISTS', KEYS[4], ARGV[1]) == 0 then
  local nb, np = zoned(ARGV[5])
  shift(KEYS[3], np, 0, np, nb, n, ARGV[6])
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[5])
end
return 1"
);

/// Counts a Config's zone sums again from its VMs, when they disagree with its totals (VMs counted
/// before zone sums were kept, or written by a build that keeps none): every `<zone>/i` field
/// dropped, then each VM of the Config counted in its zone (read from its record; a record that
/// does not decode, in zone '') with the bits its totals count; their `vm:idx` entries dropped
/// (their next write writes every entry). KEYS vm, cfg set, counted, zoned, sums, idx, heal; ARGV
/// how many sums, the Config's heal scope. O(VMs of the Config), atomic; nothing while a key
/// holds the wrong type (flagged: the rebuild counts them all).
pub(super) const RECOUNT_ZONES: &str = concat!(
    guard!(),
    shift!(),
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
  shift(KEYS[5], zone .. '/', 0, zone .. '/', bits, n, ARGV[2])
  redis.call('HSET', KEYS[4], id, bits .. '@' .. zone)
  try('*', 'HDEL', KEYS[6], id)
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
