-- Shared by every queue script (prepended at build time). All keys of one queue share one
-- Redis Cluster hash tag and are passed in KEYS, in this order.
local READY, DELAYED, LEASED, DEAD, FINISHED, REC, DATA, KEYMAP, STATS, SIGNAL =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
-- The queue policy, in this order, on every call, then ARGV[7]: a fresh random seed for task ids
-- (see `fresh_id`). Each script's own arguments start at ARGV[8].
local MAX, DEADLINE, LEASE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local KEEP_FIN, KEEP_FIN_MS, KEEP_DEAD = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local SEED = ARGV[7] or ''
if #SEED < 22 then error('queue script: ARGV[7] must be a random id seed') end
local KEEP_RUNS, SIGNAL_CAP, TRIM_CHUNK, RAW_KEEP = 10, 64, 200, 1000
-- One clock for every process: the Redis server's.
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function save(id, rec)
  redis.call('HSET', REC, id, cjson.encode(rec))
end

-- Wakes one blocked worker; the list is capped so idle queues do not grow it.
local function signal()
  if redis.call('RPUSH', SIGNAL, '1') > SIGNAL_CAP then
    redis.call('LTRIM', SIGNAL, 0, SIGNAL_CAP - 1)
  end
end

local function enqueue(id, rec)
  if rec.due <= NOW then
    redis.call('RPUSH', READY, id)
    signal()
  else
    redis.call('ZADD', DELAYED, rec.due, id)
  end
end

-- Task ids are random, made by the caller (Rust's `new_task_id`), never counted, so no one can
-- guess another's. A script offers the id it was passed for the item at hand (`offer`); the next
-- task created takes it. A task created with no id on offer (a follow-up or the task of a buried
-- record, in scripts that get no ids per item) takes one derived from the seed: SHA-1 of the seed
-- and a per-call counter, 132 bits as 22 characters of [A-Za-z0-9_-]. The seed itself is never an
-- id, so seeing ids tells nothing of the next. An id that already names a record is never reused.
local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
local offered, derived = nil, 0

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
  if not id or id == '' then id = derive() end
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
  redis.call('HINCRBY', STATS, 'pushed', 1)
  return id
end

-- Checks of a decoded record: anything the scripts cannot work with makes it corrupt. JSON nulls
-- in optional fields are read as absent.
local function str(v) return type(v) == 'string' end
local function count(v) return type(v) == 'number' and v >= 0 and v <= 2 ^ 53 and v == math.floor(v) end
local function small(v) return count(v) and v <= 4294967295 end
local function optional(t, field, check)
  if t[field] == cjson.null then t[field] = nil end
  return t[field] == nil or check(t[field])
end

local function valid(rec)
  if type(rec) ~= 'table' then return false end
  if not (str(rec.k) and str(rec.s) and small(rec.a) and small(rec.m) and count(rec.c) and count(rec.d)
      and count(rec.due)) then
    return false
  end
  for _, f in ipairs({ 'r', 'tok', 'e' }) do
    if not optional(rec, f, str) then return false end
  end
  if not (optional(rec, 'fu', count) and optional(rec, 'done', count)) then return false end
  if not optional(rec, 'runs', function(v) return type(v) == 'table' end) then return false end
  if rec.runs then
    local n = 0
    for _ in pairs(rec.runs) do n = n + 1 end
    if n ~= #rec.runs then return false end
    for _, run in ipairs(rec.runs) do
      if type(run) ~= 'table' or not (small(run.n) and str(run.w) and str(run.g) and count(run.s))
          or not optional(run, 'e', count) or not optional(run, 'o', str) then
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
  if redis.call('ZADD', DEAD, 'NX', NOW, id) == 1 then redis.call('HINCRBY', STATS, 'failed', 1) end
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
    redis.call('HINCRBY', STATS, 'failed', 1)
  else
    redis.call('HDEL', DATA, id)
    redis.call('ZADD', FINISHED, NOW, id)
    redis.call('HINCRBY', STATS, 'done', 1)
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
