-- Refunds one call's admission: removes its members from each log's sorted set, or its cost
-- from each counter's window, and tells each limit's state without the call.
--
-- KEYS[i]      limit i's sorted set, or its counter's hash (all of them on this node, in one
--              slot in a cluster).
-- ARGV[1]      the admission: members ARGV[1] .. '.' .. j for j in 1..cost, as
--              sliding_window_limits.lua recorded them in a log.
-- ARGV[2]      the check's time, integer microseconds since the Unix epoch (its reply's now).
-- ARGV[3i]     limit i's cost.
-- ARGV[3i+1]   limit i's period, integer microseconds.
-- ARGV[3i+2]   limit i's threshold.
-- ARGV[3n+3]   which limits are sliding window counters, as in sliding_window_limits.lua
--              (absent: all logs); 'g' for a counter whose refund is a lease's give-back. A
--              counter takes the cost from the fixed window the check's time falls in while
--              that window is its current or previous one; an older one no longer counts, and
--              nothing is taken; nor from a counter first written after the check's time (the
--              key was reset since: the call is not in it), but for a give-back, which takes
--              what that reset kept of its lease (counter.lua's lease_field), at most its
--              cost.
--
-- Returns, for each limit: {count (its admissions once refunded: the window's, as of the
-- check; a counter's estimate, T - remaining), reset_after (µs from the check's time until
-- none is left in its window; 0 for none)}. The TTLs stay: a key lives at most as long as it
-- would have with the call.

local CHUNK = 1000
local base = ARGV[1]
local now = tonumber(ARGV[2])
local n = #KEYS
local kinds = ARGV[3 * n + 3] or ''
local reply = {}
for i = 1, n do
  local key = KEYS[i]
  local cost = tonumber(ARGV[3 * i])
  local period = tonumber(ARGV[3 * i + 1])
  local count = 0
  local reset = 0
  local kind = string.sub(kinds, i, i)
  if kind == 'c' or kind == 'g' then
    local threshold = tonumber(ARGV[3 * i + 2])
    local kept, prev, cur, born, latest = counter_read(key, period)
    local index = window_index(now, period)
    -- A counter first written after the check (its key reset since) never held the call; a
    -- reset kept what live leases reserved, which their give-backs take.
    local taken = 0
    if kept ~= nil and kind == 'g' then
      taken = lease_give_back(key, period, threshold, base, cost, born > now)
    elseif kept ~= nil and born <= now then
      taken = cost
    end
    if taken > 0 then
      local text = string.format
      if index == kept then
        redis.call('HSET', key, counter_field(period),
          text('%d %d %d %d %d', kept, prev, math.max(cur - taken, 0), born, latest))
      elseif index + 1 == kept then
        redis.call('HSET', key, counter_field(period),
          text('%d %d %d %d %d', kept, math.max(prev - taken, 0), cur, born, latest))
      end
    end
    local _, prev, cur, elapsed, ahead = counter_window(key, period, now)
    count = threshold - counter_remaining(prev, cur, elapsed, threshold, period)
    reset = counter_reset(prev, cur, elapsed, ahead, period)
  else
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
    count = redis.call('ZCARD', key)
    if count > 0 then
      local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
      reset = math.max(newest + period - now, 0)
    end
  end
  reply[2 * i - 1] = count
  reply[2 * i] = reset
end
return reply
