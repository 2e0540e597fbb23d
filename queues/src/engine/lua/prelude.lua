-- Shared by every queue function: the library's opening (see `redis.rs`). It runs once, when
-- the library is loaded; each call starts with `begin`, which sets the call's state below.
local KEEP_RUNS, SIGNAL_CAP, TRIM_CHUNK, RAW_KEEP = 10, 64, 200, 1000
-- All keys of one queue share one Redis Cluster hash tag and are passed in KEYS, in this order.
local READY, DELAYED, LEASED, DEAD, FINISHED, REC, DATA, KEYMAP, STATS, SIGNAL
-- The queue policy, a fresh random seed for task ids (see `fresh_id`), and the time of the call.
local MAX, DEADLINE, LEASE, KEEP_FIN, KEEP_FIN_MS, KEEP_DEAD, SEED, NOW
-- Task ids offered and derived during the call (see `offer`, `derive`); the counters to add to
-- STATS and the workers to wake at its end (see `settle`).
local offered, derived, tally, wakes

-- The start of every call: KEYS as above; ARGV[1..6] the queue policy, in the order below, then
-- ARGV[7] a fresh random seed. Each function's own arguments start at ARGV[8].
local function begin(KEYS, ARGV)
  READY, DELAYED, LEASED, DEAD, FINISHED, REC, DATA, KEYMAP, STATS, SIGNAL =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
  MAX, DEADLINE, LEASE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  KEEP_FIN, KEEP_FIN_MS, KEEP_DEAD = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  SEED = ARGV[7] or ''
  if #SEED < 22 then error('queue function: ARGV[7] must be a random id seed') end
  -- One clock for every process: the Redis server's.
  local clock = redis.call('TIME')
  NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  offered, derived, tally, wakes = nil, 0, {}, 0
end

-- Adds one to counter `what` of STATS (written once, at the end of the call).
local function bump(what)
  tally[what] = (tally[what] or 0) + 1
end

-- The end of every call: the counters bumped, and one wake-up per task made due (the signal
-- list is capped, so idle queues do not grow it), each in one command.
local function settle()
  for what, n in pairs(tally) do redis.call('HINCRBY', STATS, what, n) end
  if wakes > 0 then
    local ones = {}
    for i = 1, math.min(wakes, SIGNAL_CAP) do ones[i] = '1' end
    if redis.call('RPUSH', SIGNAL, unpack(ones)) > SIGNAL_CAP then
      redis.call('LTRIM', SIGNAL, 0, SIGNAL_CAP - 1)
    end
  end
end

local function save(id, rec)
  redis.call('HSET', REC, id, cjson.encode(rec))
end

-- Wakes one blocked worker (at the end of the call).
local function signal()
  wakes = wakes + 1
end

local function enqueue(id, rec)
  if rec.due <= NOW then
    redis.call('RPUSH', READY, id)
    signal()
  else
    redis.call('ZADD', DELAYED, rec.due, id)
    -- The soonest delayed task: a waiting worker may sleep past it, so wake one to look.
    if redis.call('ZRANGE', DELAYED, 0, 0)[1] == id then signal() end
  end
end

-- Task ids are random, made by the caller (Rust's `new_task_id`), never counted, so no one can
-- guess another's. A script offers the id it was passed for the item at hand (`offer`); the next
-- task created takes it. A task created with no id on offer (a follow-up or the task of a buried
-- record, in scripts that get no ids per item) takes one derived from the seed: SHA-1 of the seed
-- and a per-call counter, 132 bits as 22 characters of [A-Za-z0-9_-]. The seed itself is never an
-- id, so seeing ids tells nothing of the next. A derived id that already names a record is never
-- used; the caller's 128 random bits are not checked (a collision is not a risk worth a command).
local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

local function offer(id)
  offered = id
end

local function derive()
  derived = derived + 1
  local hex, out = redis.sha1hex(SEED .. ':' .. derived), {}
  for i = 1, 31, 3 do
    local v = tonumber(hex:sub(i, i + 2), 16)
    local hi, lo = math.floor(v / 64), v % 64
    out[#out + 1] = B64:sub(hi + 1, hi + 1) .. B64:sub(lo + 1, lo + 1)
  end
  return table.concat(out)
end

local function fresh_id()
  local id = offered
  offered = nil
  if id and id ~= '' then return id end
  id = derive()
  while redis.call('HEXISTS', REC, id) == 1 do id = derive() end
  return id
end

local function new_task(key, payload, due)
  local id = fresh_id()
  local rec = { k = key, s = 'pending', a = 0, m = MAX, c = NOW, d = 0, due = due }
  if DEADLINE > 0 then rec.d = NOW + DEADLINE end
  redis.call('HSET', KEYMAP, key, id)
  redis.call('HSET', DATA, id, payload)
  save(id, rec)
  enqueue(id, rec)
  bump('pushed')
  return id
end

-- Checks of a decoded record: anything the scripts cannot work with makes it corrupt. JSON nulls
-- in optional fields are read as absent.
-- (The library is loaded without `cjson` and `math`: they are looked up when called.)
local function count(v) return type(v) == 'number' and v >= 0 and v <= 9007199254740992 and v == math.floor(v) end
local function small(v) return count(v) and v <= 4294967295 end
-- An optional field of `t` (a JSON null is read as absent) holds a value of `kind` ('string' or
-- 'count') or nothing.
local function optional(t, field, kind)
  local v = t[field]
  if v == nil then return true end
  if v == cjson.null then
    t[field] = nil
    return true
  end
  if kind == 'count' then return count(v) end
  return type(v) == kind
end
local OPTIONAL = { { 'r', 'string' }, { 'tok', 'string' }, { 'e', 'string' }, { 'fu', 'count' }, { 'done', 'count' } }

local function valid(rec)
  if type(rec) ~= 'table' then return false end
  if type(rec.k) ~= 'string' or type(rec.s) ~= 'string' or not small(rec.a) or not small(rec.m)
      or not count(rec.c) or not count(rec.d) or not count(rec.due) then
    return false
  end
  for i = 1, #OPTIONAL do
    if not optional(rec, OPTIONAL[i][1], OPTIONAL[i][2]) then return false end
  end
  local runs = rec.runs
  if runs == cjson.null then
    rec.runs = nil
  elseif runs ~= nil then
    if type(runs) ~= 'table' then return false end
    -- cjson makes integer keys only of a JSON array: none (and some key) is an object.
    local n = #runs
    if n == 0 and next(runs) ~= nil then return false end
    for i = 1, n do
      local run = runs[i]
      if type(run) ~= 'table' or not small(run.n) or type(run.w) ~= 'string' or type(run.g) ~= 'string'
          or not count(run.s) or not optional(run, 'e', 'count') or not optional(run, 'o', 'string') then
        return false
      end
    end
  end
  return true
end

-- Cuts a text to at most n bytes without splitting a UTF-8 character.
local function clip(s, n)
  if #s <= n then return s end
  while n > 0 do
    local b = s:byte(n + 1)
    if b < 128 or b >= 192 then break end
    n = n - 1
  end
  return s:sub(1, n) .. '...'
end

-- A record the scripts cannot read goes to the dead set at once (keeping its place if already
-- there), replaced by a readable one with reason `corrupt` and the raw text in its error, and is
-- taken off every list, so the call carries on and no other task is lost. Its key is `key` (the
-- caller's, when known) or the one the raw text still names, else ''. A follow-up payload waiting
-- on it becomes a new task when the key is known and has no live task.
local function bury(id, raw, key)
  if not key then
    local ok, old = pcall(cjson.decode, raw)
    if ok and type(old) == 'table' and type(old.k) == 'string' then key = old.k end
  end
  key = key or ''
  redis.call('LREM', READY, 0, id)
  redis.call('ZREM', DELAYED, id)
  redis.call('ZREM', LEASED, id)
  if key ~= '' and redis.call('HGET', KEYMAP, key) == id then redis.call('HDEL', KEYMAP, key) end
  save(id, { k = key, s = 'failed', r = 'corrupt', a = 0, m = MAX, c = NOW, d = 0, due = NOW, done = NOW,
    e = 'corrupt record: ' .. clip(raw, RAW_KEEP) })
  if redis.call('ZADD', DEAD, 'NX', NOW, id) == 1 then bump('failed') end
  local fu = redis.call('HGET', DATA, id .. ':f')
  if fu then
    redis.call('HDEL', DATA, id .. ':f')
    if key ~= '' and not redis.call('HGET', KEYMAP, key) then new_task(key, fu, NOW) end
  end
end

-- A task's record, or nil when it has none. A corrupt record is buried and reads as nil, true.
local function load(id, key)
  local raw = redis.call('HGET', REC, id)
  if not raw then return nil end
  local ok, rec = pcall(cjson.decode, raw)
  if ok and valid(rec) then
    -- Optional on the wire, needed by every script that closes a run: never nil past here.
    if rec.runs == nil then rec.runs = {} end
    return rec
  end
  bury(id, raw, key)
  return nil, true
end

-- A pending task absorbs its follow-up: the newer payload, and the earlier due time.
local function merge_follow_up(id, rec)
  if rec.fu then
    local payload = redis.call('HGET', DATA, id .. ':f')
    if payload then
      redis.call('HSET', DATA, id, payload)
      redis.call('HDEL', DATA, id .. ':f')
    end
    if rec.fu < rec.due then rec.due = rec.fu end
    rec.fu = nil
  end
end

local function close_run(rec, outcome)
  local run = rec.runs[#rec.runs]
  if run then
    run.e = NOW
    run.o = outcome
  end
end

-- Ends a task as completed or failed; a follow-up that arrived during the run becomes a new task.
local function resolve(id, rec, state, reason)
  rec.s = state
  rec.r = reason
  rec.done = NOW
  rec.tok = nil
  if redis.call('HGET', KEYMAP, rec.k) == id then redis.call('HDEL', KEYMAP, rec.k) end
  local fu = rec.fu
  rec.fu = nil
  if state == 'failed' then
    redis.call('ZADD', DEAD, NOW, id)
    bump('failed')
  else
    redis.call('HDEL', DATA, id)
    redis.call('ZADD', FINISHED, NOW, id)
    bump('done')
  end
  save(id, rec)
  if fu then
    local payload = redis.call('HGET', DATA, id .. ':f')
    redis.call('HDEL', DATA, id .. ':f')
    if payload then new_task(rec.k, payload, fu) end
  end
end

local function drop(zset, ids, with_data)
  if #ids == 0 then return end
  redis.call('ZREM', zset, unpack(ids))
  redis.call('HDEL', REC, unpack(ids))
  if with_data then redis.call('HDEL', DATA, unpack(ids)) end
end

-- Bounded trimming of finished and dead records, a chunk per call.
local function trim()
  local over = redis.call('ZCARD', FINISHED) - KEEP_FIN
  if over > 0 then drop(FINISHED, redis.call('ZRANGE', FINISHED, 0, math.min(over, TRIM_CHUNK) - 1), false) end
  drop(FINISHED, redis.call('ZRANGEBYSCORE', FINISHED, '-inf', NOW - KEEP_FIN_MS, 'LIMIT', 0, TRIM_CHUNK), false)
  over = redis.call('ZCARD', DEAD) - KEEP_DEAD
  if over > 0 then drop(DEAD, redis.call('ZRANGE', DEAD, 0, math.min(over, TRIM_CHUNK) - 1), true) end
end
