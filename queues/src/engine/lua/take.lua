-- take: ARGV[8] = max, ARGV[9] = worker id, ARGV[10] = worker group, ARGV[11] = chunk.
-- Returns next_due_ms (-1: none), then id, key, token, attempt, payload, waited_ms (repeated).
local max, worker, group, chunk = tonumber(ARGV[8]), ARGV[9], ARGV[10], tonumber(ARGV[11])

-- Due delayed tasks join the queue, a bounded chunk per call.
local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', NOW, 'LIMIT', 0, chunk)
if #due > 0 then
  redis.call('ZREM', DELAYED, unpack(due))
  redis.call('RPUSH', READY, unpack(due))
end

-- Expired leases: the holder died or hung. Deliver again at the head, or fail if out of attempts
-- (a corrupt record is buried).
for _, id in ipairs(redis.call('ZRANGEBYSCORE', LEASED, '-inf', NOW, 'LIMIT', 0, chunk)) do
  redis.call('ZREM', LEASED, id)
  local rec = load(id)
  if rec and rec.s == 'running' then
    close_run(rec, 'lease-expired')
    rec.tok = nil
    rec.e = 'lease expired'
    bump('expired')
    if rec.a >= rec.m then
      resolve(id, rec, 'failed', 'lease-expired')
    else
      rec.s = 'pending'
      rec.due = NOW
      merge_follow_up(id, rec)
      save(id, rec)
      redis.call('LPUSH', READY, id)
    end
  end
end

-- One id at a time, each record checked before the next pop (a corrupt one is buried), until
-- `max` tasks are taken or the list is empty; at most `max + chunk` pops per call.
local out = { -1 }
local taken, popped = 0, 0
while taken < max and popped < max + chunk do
  local id = redis.call('LPOP', READY)
  if not id then break end
  popped = popped + 1
  local rec = load(id)
  if rec and rec.s == 'pending' then
    if rec.d > 0 and rec.d <= NOW then
      rec.e = 'deadline exceeded'
      resolve(id, rec, 'failed', 'deadline-exceeded')
    else
      rec.s = 'running'
      rec.a = rec.a + 1
      rec.tok = worker .. ':' .. id .. ':' .. rec.a
      if type(rec.runs) ~= 'table' or rec.runs[1] == nil then rec.runs = {} end
      -- Run numbers go on across looks again (attempts start again there).
      local last = rec.runs[#rec.runs]
      rec.runs[#rec.runs + 1] = { n = math.max(rec.a, last and last.n + 1 or 0), w = worker, g = group, s = NOW }
      if #rec.runs > KEEP_RUNS then table.remove(rec.runs, 1) end
      save(id, rec)
      redis.call('ZADD', LEASED, NOW + LEASE, id)
      taken = taken + 1
      out[#out + 1] = id
      out[#out + 1] = rec.k
      out[#out + 1] = rec.tok
      out[#out + 1] = rec.a
      out[#out + 1] = redis.call('HGET', DATA, id) or ''
      out[#out + 1] = math.max(0, NOW - (tonumber(rec.due) or NOW))
    end
  end
end

local next_due = -1
local d = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
if d[2] then next_due = tonumber(d[2]) - NOW end
local l = redis.call('ZRANGE', LEASED, 0, 0, 'WITHSCORES')
if l[2] and (next_due < 0 or tonumber(l[2]) - NOW < next_due) then next_due = tonumber(l[2]) - NOW end
if next_due ~= -1 and next_due < 0 then next_due = 0 end
out[1] = next_due
return out
