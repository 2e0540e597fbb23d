-- finish: ARGV[8..] = id, token, kind (done|retry|fail|release|handback|again), delay_ms, error,
-- new id (repeated), where new id is a fresh random id for the follow-up the ack may turn into a
-- task.
-- Returns how many acks were stale (token no longer holds the lease).
local stale = 0
for i = 8, #ARGV, 6 do
  local id, tok, kind, delay, err = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 4]
  offer(ARGV[i + 5])
  local rec = load(id)
  if not rec or rec.s ~= 'running' or rec.tok ~= tok then
    stale = stale + 1
  else
    redis.call('ZREM', LEASED, id)
    rec.tok = nil
    if kind == 'release' or kind == 'handback' then
      -- Back to the head of the queue, its attempt not counted: a task taken but not started
      -- (its run dropped), or a run cut short by its worker's stop (kept as handed back).
      if kind == 'release' then table.remove(rec.runs) else close_run(rec, 'handed-back') end
      rec.a = rec.a - 1
      rec.s = 'pending'
      rec.due = NOW
      merge_follow_up(id, rec)
      save(id, rec)
      redis.call('LPUSH', READY, id)
      signal()
    elseif kind == 'again' then
      -- Progress, and a look again later: the same task, pending, with fresh attempts.
      close_run(rec, 'again')
      rec.s = 'pending'
      rec.a = 0
      rec.e = nil
      rec.due = NOW + delay
      if DEADLINE > 0 then rec.d = NOW + DEADLINE end
      bump('done')
      merge_follow_up(id, rec)
      save(id, rec)
      enqueue(id, rec)
    else
      close_run(rec, kind)
      if kind == 'done' then
        resolve(id, rec, 'completed', nil)
      elseif kind == 'fail' then
        rec.e = err
        resolve(id, rec, 'failed', 'permanent')
      else
        rec.e = err
        if rec.a >= rec.m then
          resolve(id, rec, 'failed', 'retries-exhausted')
        else
          rec.s = 'pending'
          rec.due = NOW + delay
          bump('retried')
          merge_follow_up(id, rec)
          save(id, rec)
          enqueue(id, rec)
        end
      end
    end
  end
end
trim()
return stale
