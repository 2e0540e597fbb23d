//! The layout-2 scripts: a VM's compare-and-set write and delete with its Config's indexes and
//! sums, and the rebuild of a Config's derived keys from its VMs' states. Each touches only keys
//! of one Config (one Cluster slot).
//!
//! A Config's VM hash holds per VM two fields: `<id>` (the record's JSON) and `<id>#v`:
//! `<version>|<made>|<deadline>|<bits>@<place>|<hostname>`, the version and what the Config's
//! indexes and sums say of the VM (its *state*: with an instance or not, its instance's deadline
//! in ms or '', what it counts and where (`Vm::place`), its hostname). One HGET reads both the
//! version and the state, one HSET writes both with the record, and a write changes only the
//! index entries and sums its state says differ. An empty state (`<version>|`) is not known:
//! the next write writes every entry and the rebuild counts its sums again.
//!
//! KEYS of the VM scripts, in order: vm, uncreated, created, host, deadline, sums, bots, heal;
//! a VM's write and delete have its Config's ledger before heal.

/// Parses a state: `st(s)` → made, deadline, zoned, hostname (nil when `s` is not a state).
macro_rules! state {
    () => {
        r"
local function st(s)
  if not s then return nil end
  local m, d, z, h = string.match(s, '^([01])|(%d*)|([^|]*)|(.*)$')
  if not m then return nil end
  return {made = m, dl = d, zo = z, host = h}
end
local function split(cur)
  if not cur then return nil, nil end
  local v, rest = string.match(cur, '^(%d+)|(.*)$')
  if not v then return string.match(cur, '^(%d+)'), nil end
  return v, rest
end
"
    };
}

/// CAS write of a VM. ARGV id, expected version ('' = absent), JSON, made (1/0), how many sums,
/// deadline (ms or ''), `bits@place`, hostname, then the ledger's field/amount pairs. Returns the
/// new version (0: refused).
pub(crate) const PUT_VM: &str = concat!(
    guard!(),
    shift!(),
    state!(),
    spend!(),
    r"
local id = ARGV[1]
local vf = id .. '#v'
local cur = redis.call('HGET', KEYS[1], vf)
local cv, said = split(cur)
if ARGV[2] == '' then if cur then return 0 end elseif (cv or '0') ~= ARGV[2] then return 0 end
local v = (tonumber(cv) or 0) + 1
spend(KEYS[8], 9)
local n, made, dl, zo, host = tonumber(ARGV[5]), ARGV[4], ARGV[6], ARGV[7], ARGV[8]
local state = table.concat({made, dl, zo, host}, '|')
if said == state then
  redis.call('HSET', KEYS[1], id, ARGV[3], vf, v .. '|' .. state)
  return v
end
local was = st(said)
if was then
  if was.zo ~= zo then
    local ob, op = zoned(was.zo)
    local nb, np = zoned(zo)
    shift(KEYS[6], op, ob, np, nb, n, 'cfg')
  end
elseif not cur then
  local nb, np = zoned(zo)
  shift(KEYS[6], np, 0, np, nb, n, 'cfg')
else
  flag('cfg') -- what it counted is not known: the rebuild counts the sums again
end
if not was or was.made ~= made then
  if made == '1' then try('cfg', 'SREM', KEYS[2], id); try('cfg', 'SADD', KEYS[3], id)
  else try('cfg', 'SADD', KEYS[2], id); try('cfg', 'SREM', KEYS[3], id) end
end
if not was or was.host ~= host then try('cfg', 'HSET', KEYS[4], host, id) end
if not was or was.dl ~= dl then
  if dl == '' then try('cfg', 'ZREM', KEYS[5], id) else try('cfg', 'ZADD', KEYS[5], dl, id) end
end
redis.call('HSET', KEYS[1], id, ARGV[3], vf, v .. '|' .. (broken and '' or state))
return v"
);

/// CAS delete of a VM with its index entries, bot observation and part of its Config's sums.
/// ARGV id, version, hostname ('' for a record that does not decode), how many sums, then the
/// ledger's field/amount pairs.
pub(crate) const DELETE_VM: &str = concat!(
    guard!(),
    shift!(),
    state!(),
    spend!(),
    r"
local id = ARGV[1]
local vf = id .. '#v'
local cur = redis.call('HGET', KEYS[1], vf)
local cv, said = split(cur)
if (cv or '0') ~= ARGV[2] then return 0 end
spend(KEYS[8], 5)
local was = st(said)
if was then
  local ob, op = zoned(was.zo)
  shift(KEYS[6], op, ob, op, 0, tonumber(ARGV[4]), 'cfg')
else
  flag('cfg')
end
redis.call('HDEL', KEYS[1], id, vf)
try('cfg', 'SREM', KEYS[2], id)
try('cfg', 'SREM', KEYS[3], id)
try('cfg', 'ZREM', KEYS[5], id)
for _, h in ipairs({ARGV[3], was and was.host or ''}) do
  if h ~= '' then
    if try('cfg', 'HGET', KEYS[4], h) == id then try('cfg', 'HDEL', KEYS[4], h) end
    try('cfg', 'HDEL', KEYS[7], h)
  end
end
return 1"
);

/// Writes states the rebuild computed: ARGV triples of id, the `#v` field as read, the state.
/// Each is written only while the field is as read (no write since); returns how many differed.
pub(crate) const STATES: &str = r"
local fixed = 0
for i = 1, #ARGV, 3 do
  local vf = ARGV[i] .. '#v'
  local cur = redis.call('HGET', KEYS[1], vf)
  if (cur or '') == ARGV[i + 1] and redis.call('HEXISTS', KEYS[1], ARGV[i]) == 1 then
    local v = string.match(ARGV[i + 1], '^(%d+)') or '0'
    local now = v .. '|' .. ARGV[i + 2]
    if now ~= cur then redis.call('HSET', KEYS[1], vf, now); fixed = fixed + 1 end
  end
end
return fixed";

/// Rebuilds a Config's indexes and sums from its VMs' states, at once: KEYS vm, uncreated,
/// created, host, deadline, sums, heal; ARGV how many sums. Drops `#v` fields without a record
/// and entries naming no VM; leaves the heal flag set while some state is not known. Returns
/// {VMs, entries added or corrected, entries dropped, 1 if the sums differed, states not known}.
pub(crate) const REINDEX: &str = concat!(
    state!(),
    r"
redis.call('DEL', KEYS[7])
local fields = redis.call('HKEYS', KEYS[1])
local has, vms, fixed, stale, unknown = {}, {}, 0, 0, 0
for _, f in ipairs(fields) do has[f] = true end
for _, f in ipairs(fields) do
  local id = string.match(f, '^(.*)#v$')
  if id then
    if has[id] then vms[id] = redis.call('HGET', KEYS[1], f) else redis.call('HDEL', KEYS[1], f); stale = stale + 1 end
  end
end
local n, fresh, count = tonumber(ARGV[1]), {}, 0
for id, cur in pairs(vms) do
  count = count + 1
  local _, said = split(cur)
  local s = st(said)
  if s then
    local yes, no = KEYS[2], KEYS[3]
    if s.made == '1' then yes, no = KEYS[3], KEYS[2] end
    fixed = fixed + redis.call('SADD', yes, id) + redis.call('SREM', no, id)
    if s.dl == '' then
      fixed = fixed + redis.call('ZREM', KEYS[5], id)
    elseif tonumber(redis.call('ZSCORE', KEYS[5], id) or '-1') ~= tonumber(s.dl) then
      redis.call('ZADD', KEYS[5], s.dl, id); fixed = fixed + 1
    end
    if s.host ~= '' and redis.call('HGET', KEYS[4], s.host) ~= id then
      redis.call('HSET', KEYS[4], s.host, id); fixed = fixed + 1
    end
    local b, zone = string.match(s.zo, '^(%d+)@(.*)$')
    if b then
      b = tonumber(b)
      for i = 0, n - 1 do
        if math.floor(b / 2 ^ i) % 2 == 1 then
          local f = zone .. '/' .. i
          fresh[f] = (fresh[f] or 0) + 1
        end
      end
    end
  else
    unknown = unknown + 1
  end
end
for _, k in ipairs({KEYS[2], KEYS[3]}) do
  for _, id in ipairs(redis.call('SMEMBERS', k)) do
    if not vms[id] then redis.call('SREM', k, id); stale = stale + 1 end
  end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do
  if not vms[id] then redis.call('ZREM', KEYS[5], id); stale = stale + 1 end
end
local host = redis.call('HGETALL', KEYS[4])
for i = 1, #host, 2 do
  if not vms[host[i + 1]] then redis.call('HDEL', KEYS[4], host[i]); stale = stale + 1 end
end
local differ, seen, cur = 0, {}, redis.call('HGETALL', KEYS[6])
for i = 1, #cur, 2 do
  seen[cur[i]] = true
  if (tonumber(cur[i + 1]) or 0) ~= (fresh[cur[i]] or 0) then differ = 1 end
end
for f, _ in pairs(fresh) do if not seen[f] then differ = 1 end end
if differ == 1 then
  redis.call('DEL', KEYS[6])
  for f, v in pairs(fresh) do redis.call('HSET', KEYS[6], f, v) end
end
if unknown > 0 then redis.call('SADD', KEYS[7], 'cfg') end
return {count, fixed, stale, differ, unknown}"
);

/// Whether a Config's derived keys look sound: KEYS vm, uncreated, created, host, deadline,
/// sums, heal; ARGV their types (heal's last). 1 when each holds its type or nothing, no flag is
/// set, every VM is either with an instance or not, no more deadlines than instances, and the
/// sums count every VM (bit 0).
pub(crate) const SOUND: &str = r"
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= ARGV[i] then return 0 end
end
if redis.call('EXISTS', KEYS[7]) == 1 then return 0 end
local made = redis.call('SCARD', KEYS[3])
if 2 * (made + redis.call('SCARD', KEYS[2])) ~= redis.call('HLEN', KEYS[1]) then return 0 end
if redis.call('ZCARD', KEYS[5]) > made then return 0 end
local all, sums = 0, redis.call('HGETALL', KEYS[6])
for i = 1, #sums, 2 do
  if string.sub(sums[i], -2) == '/0' then all = all + (tonumber(sums[i + 1]) or 0) end
end
if all ~= made + redis.call('SCARD', KEYS[2]) then return 0 end
return 1";
