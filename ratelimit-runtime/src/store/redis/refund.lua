-- Refunds one call's admission: removes its members from each limit's sorted set, and tells
-- each limit's state without the call.
--
-- KEYS[i]      limit i's sorted set (all of them on this node, in one slot in a cluster).
-- ARGV[1]      the admission: members ARGV[1] .. '.' .. j for j in 1..cost, as
--              sliding_window_limits.lua recorded them.
-- ARGV[2]      the check's time, integer microseconds since the Unix epoch (its reply's now).
-- ARGV[2i+1]   limit i's cost.
-- ARGV[2i+2]   limit i's period, integer microseconds.
--
-- Returns, for each limit: {count (its admissions once refunded: the window's, as of the
-- check), reset_after (µs from the check's time until none is left in its window; 0 for
-- none)}. The TTLs stay: a key lives at most as long as it would have with the call.

local CHUNK = 1000
local base = ARGV[1]
local now = tonumber(ARGV[2])
local reply = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local cost = tonumber(ARGV[2 * i + 1])
  local j = 1
  while j <= cost do
    local last = math.min(j + CHUNK - 1, cost)
    local members = {}
    for m = j, last do
      members[#members + 1] = base .. '.' .. m
    end
    redis.call('ZREM', key, unpack(members))
    j = last + 1
  end
  local count = redis.call('ZCARD', key)
  local reset = 0
  if count > 0 then
    local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
    reset = math.max(newest + tonumber(ARGV[2 * i + 2]) - now, 0)
  end
  reply[2 * i - 1] = count
  reply[2 * i] = reset
end
return reply
