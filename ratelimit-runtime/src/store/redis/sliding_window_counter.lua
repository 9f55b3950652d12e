-- Sliding window counter of one limit: roll the key's two fixed windows to now, then admit
-- and count, or deny; atomically. counter.lua, which script.rs puts before this script, holds
-- the arithmetic and the hash's layout; several limits, and counters stacked with logs, go
-- through sliding_window_limits.lua instead.
--
-- KEYS[1]  the counter's hash.
-- ARGV[1]  period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[2]  threshold (1 ..= 4,294,967,295).
-- ARGV[3]  cost (0 ..= threshold: larger ones are turned away before they are sent).
-- ARGV[4]  now, integer microseconds since the Unix epoch; empty: use this server's TIME.
-- ARGV[5]  optional: the admission a refund of this call would name (refund.lua). Unused
--          here; sent so that what Redis ran ties a refund to its check (MONITOR).
--
-- Returns, as sliding_window_limits.lua for one limit: {admitted (1 or 0), now (µs), count
-- (T - remaining before this call: the estimate), retry_after (µs until the cost fits; 0
-- when it fits), reset_after (µs until the estimate is 0, with this call when admitted)}.
--
-- A call is admitted iff prev * (P - e) + (cur + cost) * P <= T * P (a cost of 0 always
-- fits); denied calls write nothing. An admission makes 3 calls (TIME, HGET, HSET of the
-- counter's field), the first of a window 5 (with PTTL and PEXPIRE); a denial 2 (TIME, HGET). A call resent
-- after a lost connection is not recognised (a counter keeps no member): it may count twice.

local key = KEYS[1]
local period = tonumber(ARGV[1])
local threshold = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if now == nil then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end

local index, prev, cur, elapsed, ahead, born, first, latest = counter_window(key, period, now)
local left = counter_remaining(prev, cur, elapsed, threshold, period)
local count = threshold - left
if cost <= left then
  if cost > 0 then
    prev, cur =
      counter_admit(key, period, now, cost, index, prev, cur, ahead, born, first, latest)
  end
  return {1, now, count, 0, counter_reset(prev, cur, elapsed, ahead, period)}
end
local retry_after = counter_retry(prev, cur, cost, elapsed, ahead, threshold, period)
return {0, now, count, retry_after, counter_reset(prev, cur, elapsed, ahead, period)}
