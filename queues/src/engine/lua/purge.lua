-- purge: ARGV[8] = chunk. Takes up to `chunk` ids off the pending lists, due first, then
-- delayed, and drops those that are pending tasks: record, payload, follow-up payload and key
-- entry (a corrupt record is buried instead). Running tasks, and the follow-ups waiting on them,
-- are never on these lists, so they stay.
-- Returns { how many tasks were dropped, how many ids were taken off the lists }.
local chunk = tonumber(ARGV[8])
local ids = redis.call('LPOP', READY, chunk) or {}
if #ids < chunk then
  local more = redis.call('ZRANGE', DELAYED, 0, chunk - #ids - 1)
  if #more > 0 then
    redis.call('ZREM', DELAYED, unpack(more))
    for _, id in ipairs(more) do ids[#ids + 1] = id end
  end
end
local dropped = 0
for _, id in ipairs(ids) do
  local rec = load(id)
  if rec and rec.s == 'pending' then
    if redis.call('HGET', KEYMAP, rec.k) == id then redis.call('HDEL', KEYMAP, rec.k) end
    redis.call('HDEL', REC, id)
    redis.call('HDEL', DATA, id, id .. ':f')
    dropped = dropped + 1
  end
end
return { dropped, #ids }
