-- dead: ARGV[7] = retry|purge, ARGV[8] = task id ('' for the oldest chunk of 500).
-- retry puts dead tasks back as pending with fresh attempts (a task whose key has a live task
-- is superseded instead); purge drops them. Returns how many were handled.
local ids
if ARGV[8] ~= '' then ids = { ARGV[8] } else ids = redis.call('ZRANGE', DEAD, 0, 499) end
local n = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', DEAD, id) == 1 then
    n = n + 1
    local rec = load(id)
    if ARGV[7] == 'purge' or not rec then
      redis.call('HDEL', REC, id)
      redis.call('HDEL', DATA, id)
    elseif redis.call('HGET', KEYMAP, rec.k) then
      rec.r = 'superseded'
      save(id, rec)
      redis.call('HDEL', DATA, id)
      redis.call('ZADD', FINISHED, NOW, id)
    else
      rec.s, rec.r, rec.a, rec.done, rec.e, rec.due = 'pending', nil, 0, nil, nil, NOW
      if DEADLINE > 0 then rec.d = NOW + DEADLINE end
      redis.call('HSET', KEYMAP, rec.k, id)
      save(id, rec)
      enqueue(id, rec)
    end
  end
end
return n
