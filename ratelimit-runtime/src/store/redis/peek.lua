-- A look at a sliding window log that writes nothing: what a check of cost 1 at now would
-- answer, without evicting, recording or touching the TTL.
--
-- KEYS[1]  the key's sorted set: members are admissions, scores are integer microseconds
--          since the Unix epoch.
-- ARGV[1]  period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[2]  threshold (1 ..= 4,294,967,295).
-- ARGV[3]  now, integer microseconds since the Unix epoch; empty: use this server's TIME.
-- ARGV[4]  'c' when KEYS[1] is a sliding window counter's hash (counter.lua, which script.rs
--          puts before this script), whose count is then its estimate, T - remaining;
--          absent: a log.
--
-- Returns {count (admissions in the window (now - period, now], later ones included, as a
--          check counts them), retry_after (µs until a call fits; 0 when one fits now),
--          reset_after (µs until no admission is left in the window; 0 for an empty one)}.
--
-- Entries older than the window are still in the set (only a check evicts): the window's
-- first admission is at rank ZCARD - count, so the one whose leaving lets a call in is at
-- rank ZCARD - threshold. Numbers go to redis.call as text, as in sliding_window.lua. Sent
-- with the line `#!lua flags=no-writes` before it, by EVALSHA_RO (script.rs), to Redis 7 and
-- later, so that a user allowed to read only (and EVALSHA_RO, EVAL_RO) can look; Redis 5 and
-- 6, which know neither, get it without, by EVALSHA. It runs where checks run, on the key's
-- master.

local key = KEYS[1]
local period = tonumber(ARGV[1])
local threshold = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now == nil then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end

if ARGV[4] == 'c' then
  local _, prev, cur, elapsed, ahead = counter_window(key, period, now)
  local left = counter_remaining(prev, cur, elapsed, threshold, period)
  local retry_after = 0
  if left == 0 then
    retry_after = counter_retry(prev, cur, 1, elapsed, ahead, threshold, period)
  end
  return {threshold - left, retry_after, counter_reset(prev, cur, elapsed, ahead, period)}
end

local count = redis.call('ZCOUNT', key, '(' .. string.format('%d', now - period), '+inf')
if count == 0 then
  return {0, 0, 0}
end
local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
local retry_after = 0
if count >= threshold then
  local rank = string.format('%d', redis.call('ZCARD', key) - threshold)
  local freeing = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
  retry_after = freeing + period - now
end
return {count, retry_after, newest + period - now}
