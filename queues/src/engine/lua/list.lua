-- list: ARGV[8] = ready|delayed, ARGV[9] = offset, ARGV[10] = limit. Read only.
-- Returns id, raw record ('' when it has none) (repeated): due tasks in the order they will be
-- taken, or delayed tasks soonest first.
local from, limit = tonumber(ARGV[9]), tonumber(ARGV[10])
local ids
if ARGV[8] == 'ready' then
  ids = redis.call('LRANGE', READY, from, from + limit - 1)
else
  ids = redis.call('ZRANGE', DELAYED, from, from + limit - 1)
end
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', REC, id) or ''
end
return out
