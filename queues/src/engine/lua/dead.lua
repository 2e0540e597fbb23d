-- dead: ARGV[8] = retry|purge, ARGV[9] = task id ('' for a chunk of 500 from position ARGV[10]).
-- retry puts dead tasks back as pending with fresh attempts (a task whose key has a live task
-- is superseded instead; a corrupt record stays dead, where it keeps its place); purge drops them.
-- Returns { how many were handled, how many stayed dead }.
local ids
if ARGV[9] ~= '' then
  ids = { ARGV[9] }
else
  local from = tonumber(ARGV[10])
  ids = redis.call('ZRANGE', DEAD, from, from + 499)
end
local n, kept = 0, 0
for _, id in ipairs(ids) do
  if redis.call('ZSCORE', DEAD, id) then
    local rec, corrupt = nil, false
    if ARGV[8] ~= 'purge' then rec, corrupt = load(id) end
    if corrupt or (rec and rec.r == 'corrupt') then
      kept = kept + 1
    else
      n = n + 1
      redis.call('ZREM', DEAD, id)
      if not rec then
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
end
return { n, kept }
