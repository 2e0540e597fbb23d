-- renew: ARGV[8..] = id, token (repeated). Returns the ids whose lease was lost.
local lost = {}
for i = 8, #ARGV, 2 do
  local id, tok = ARGV[i], ARGV[i + 1]
  local rec = load(id)
  if rec and rec.s == 'running' and rec.tok == tok then
    redis.call('ZADD', LEASED, NOW + LEASE, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
