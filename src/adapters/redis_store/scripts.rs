//! The Lua scripts of the Redis store: compare-and-set writes and deletes of records and VMs
//! with their indexes and their Configs' sums, and resolving a Config's errors.

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

/// `move(key, old, new, n)`: moves the sums hash `key` from counting `old` to counting `new`
/// (what a VM adds to its Config's sums, `bits[@zone]`: bits of `Vm::counted`, `n` of them, and
/// its zone): one HINCRBY per bit that differs on field `i`, and on field `<zone>/i` per zone.
macro_rules! move_bits {
    () => {
        r"
local function parse(s)
  local b, z = string.match(s, '^(%d+)@?(.*)$')
  return tonumber(b) or 0, z or ''
end
local function move(key, old, new, n)
  local ob, oz = parse(old)
  local nb, nz = parse(new)
  for i = 0, n - 1 do
    local a, b = math.floor(ob / 2 ^ i) % 2, math.floor(nb / 2 ^ i) % 2
    if a ~= b then redis.call('HINCRBY', key, i, b - a) end
    if oz == nz then
      if a ~= b and oz ~= '' then redis.call('HINCRBY', key, oz .. '/' .. i, b - a) end
    else
      if a == 1 and oz ~= '' then redis.call('HINCRBY', key, oz .. '/' .. i, -1) end
      if b == 1 and nz ~= '' then redis.call('HINCRBY', key, nz .. '/' .. i, 1) end
    end
  end
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
/// host, cfgs, cfg set, counted, sums, deadlines; ARGV id, expected version, JSON, hostname,
/// created (1/0), prefix, what it counts (`bits[@zone]`), how many sums, deadline (ms, '' without
/// one).
pub(super) const PUT_VM: &str = concat!(
    move_bits!(),
    cas_write!(),
    r"
local old, new, n = redis.call('HGET', KEYS[8], ARGV[1]) or '0', ARGV[7], tonumber(ARGV[8])
if old ~= new then
  move(KEYS[9], old, new, n)
  redis.call('HSET', KEYS[8], ARGV[1], new)
end
if ARGV[5] == '1' then
  redis.call('SREM', KEYS[3], ARGV[1]); redis.call('SADD', KEYS[4], ARGV[1])
else
  redis.call('SREM', KEYS[4], ARGV[1]); redis.call('SADD', KEYS[3], ARGV[1])
end
redis.call('HSET', KEYS[5], ARGV[4], ARGV[1])
redis.call('SADD', KEYS[7], ARGV[1])
redis.call('SADD', KEYS[6], ARGV[6])
if ARGV[9] == '' then redis.call('ZREM', KEYS[10], ARGV[1]) else redis.call('ZADD', KEYS[10], ARGV[9], ARGV[1]) end
return v"
);

/// CAS delete of a VM with its indexes, bot observation and its part of its Config's sums. KEYS
/// vm, ver, uncreated, created, host, cfgs, cfg set, bots, counted, sums, deadlines; ARGV id,
/// version, hostname, prefix, how many sums.
pub(super) const DELETE_VM: &str = concat!(
    move_bits!(),
    r"
if (redis.call('HGET', KEYS[2], ARGV[1]) or '0') ~= ARGV[2] then return 0 end
move(KEYS[10], redis.call('HGET', KEYS[9], ARGV[1]) or '0', '0', tonumber(ARGV[5]))
redis.call('HDEL', KEYS[9], ARGV[1])
redis.call('HDEL', KEYS[1], ARGV[1]); redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1]); redis.call('SREM', KEYS[4], ARGV[1])
redis.call('SREM', KEYS[7], ARGV[1])
redis.call('ZREM', KEYS[11], ARGV[1])
if redis.call('SCARD', KEYS[7]) == 0 then redis.call('SREM', KEYS[6], ARGV[4]) end
if ARGV[3] == '' then
  -- A corrupt record: its hostname is unknown, so find its entries (rare: one scan).
  local all = redis.call('HGETALL', KEYS[5])
  for i = 1, #all, 2 do
    if all[i + 1] == ARGV[1] then redis.call('HDEL', KEYS[5], all[i]); redis.call('HDEL', KEYS[8], all[i]) end
  end
elseif redis.call('HGET', KEYS[5], ARGV[3]) == ARGV[1] then
  redis.call('HDEL', KEYS[5], ARGV[3])
end
redis.call('HDEL', KEYS[8], ARGV[3])
return 1"
);

/// Counts in a VM written before sums were kept, unless counted already or written since.
/// KEYS ver, counted, sums; ARGV id, version, what it counts (`bits[@zone]`), how many sums.
pub(super) const COUNT_IN: &str = concat!(
    move_bits!(),
    r"
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
move(KEYS[3], '0', ARGV[3], tonumber(ARGV[4]))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
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
