-- Refunds one call's admission: removes its members from each limit's sorted set.
--
-- KEYS[i]     limit i's sorted set (all of them on this node, in one slot in a cluster).
-- ARGV[1]     the admission: members ARGV[1] .. '.' .. j for j in 1..cost, as
--             sliding_window_limits.lua recorded them.
-- ARGV[i+1]   limit i's cost.
--
-- Returns {removed}: how many members were removed in all (fewer than the costs' sum when
-- some had left their window already, or the call was never recorded).
--
-- The TTLs stay: a key lives at most as long as it would have with the call.

local CHUNK = 1000
local base = ARGV[1]
local removed = 0
for i = 1, #KEYS do
  local cost = tonumber(ARGV[i + 1])
  local j = 1
  while j <= cost do
    local last = math.min(j + CHUNK - 1, cost)
    local members = {}
    for m = j, last do
      members[#members + 1] = base .. '.' .. m
    end
    removed = removed + redis.call('ZREM', KEYS[i], unpack(members))
    j = last + 1
  end
end
return {removed}
