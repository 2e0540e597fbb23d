-- push: ARGV[8..] = key, payload, delay_ms, id, hurry (repeated), where id is a fresh random id
-- for the task the item may create (a push landing on a live task keeps that task's id) and
-- hurry ('1') brings the key's waiting task (not one in a retry's backoff) or a running task's
-- later follow-up forward to now.
-- Returns outcome, id (repeated).
local out = {}
for i = 8, #ARGV, 5 do
  local key, payload, delay = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local hurry = ARGV[i + 4] == '1'
  offer(ARGV[i + 3])
  local id = redis.call('HGET', KEYMAP, key)
  local rec = id and load(id, key)
  if id and not rec then
    -- No readable record: none at all, or a corrupt one just buried (whose follow-up may now be
    -- the key's task). Look again.
    id = redis.call('HGET', KEYMAP, key)
    rec = id and load(id, key)
  end
  if rec and rec.s == 'running' then
    if rec.fu then
      if hurry and rec.fu > NOW then
        rec.fu = NOW
        save(id, rec)
      end
      out[#out + 1] = 'follow_up_already_pending'
    else
      rec.fu = NOW + delay
      redis.call('HSET', DATA, id .. ':f', payload)
      save(id, rec)
      out[#out + 1] = 'follow_up'
    end
  elseif rec and rec.s == 'pending' then
    if hurry and rec.a == 0 and rec.due > NOW and redis.call('ZREM', DELAYED, id) == 1 then
      rec.due = NOW
      save(id, rec)
      enqueue(id, rec)
    end
    out[#out + 1] = 'already_pending'
  else
    id = new_task(key, payload, NOW + delay)
    out[#out + 1] = 'enqueued'
  end
  out[#out + 1] = id
end
return out
