-- Shared by every queue script (prepended at build time). All keys of one queue share one
-- Redis Cluster hash tag and are passed in KEYS, in this order.
local READY, DELAYED, LEASED, DEAD, FINISHED, REC, DATA, KEYMAP, STATS, SIGNAL, SEQ =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
-- The queue policy, in this order, on every call.
local MAX, DEADLINE, LEASE = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local KEEP_FIN, KEEP_FIN_MS, KEEP_DEAD = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local KEEP_RUNS, SIGNAL_CAP, TRIM_CHUNK = 10, 64, 200
-- One clock for every process: the Redis server's.
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

local function load(id)
  local raw = redis.call('HGET', REC, id)
  if not raw then return nil end
  return cjson.decode(raw)
end

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

local function new_task(key, payload, due)
  local id = tostring(redis.call('INCR', SEQ))
  local rec = { k = key, s = 'pending', a = 0, m = MAX, c = NOW, d = 0, due = due }
  if DEADLINE > 0 then rec.d = NOW + DEADLINE end
  redis.call('HSET', KEYMAP, key, id)
  redis.call('HSET', DATA, id, payload)
  save(id, rec)
  enqueue(id, rec)
  redis.call('HINCRBY', STATS, 'pushed', 1)
  return id
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
