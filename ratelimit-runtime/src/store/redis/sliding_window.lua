-- Sliding window log rate limit: evict, count, then admit and record, or deny; atomically.
--
-- KEYS[1]  the key's sorted set: members are admissions, scores are integer microseconds
--          since the Unix epoch.
-- ARGV[1]  period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[2]  threshold, admissions per period (1 ..= 4,294,967,295).
-- ARGV[3]  member naming this admission, unique across processes and calls (recorded only
--          when admitted). A call sent twice with one member (a client that resent it after a
--          lost connection) is counted once and answered as the first time it was admitted.
-- ARGV[4]  now, integer microseconds since the Unix epoch; empty: use this server's TIME,
--          the one clock shared by every application server.
--
-- Returns {admitted (1 or 0), count (admissions in the window, this one included),
--          retry_after (µs until the count falls below the threshold; 0 when admitted),
--          reset_after (µs until no admission is left in the window)}.
--
-- The window is (now - period, now]: an admission at t stops counting at exactly t + period.
-- Denied calls are not recorded. Numbers go to redis.call as Lua numbers, which Redis writes
-- with '%.17g' (exact), never through tostring (14 significant digits; scores need 16). Where
-- text is at hand it goes instead, sparing that '%.17g': the score as ARGV[4] or TIME's two
-- fields joined, ranks as constants or through string.format('%d') (exact wherever a C long
-- has 64 bits, as on every platform Redis supports; ranks stay below 2^32). Each redis.call
-- costs about as much as a cheap command, so the usual paths make few: an admission 7 (TIME,
-- ZREMRANGEBYSCORE, ZCARD, ZADD, ZRANGE of the last member, PTTL, PEXPIRE; 5 into an empty
-- set), a denial 6 (TIME, ZREMRANGEBYSCORE, ZCARD, ZSCORE, two ZRANGEs; one at threshold 1).
-- Requires Redis >= 5 (TIME before a write needs effects replication, the default since 5).

local key = KEYS[1]
local period = tonumber(ARGV[1])
local threshold = tonumber(ARGV[2])
local score = ARGV[4]
local now = tonumber(score)
if now == nil then
  local time = redis.call('TIME')
  local micros = tostring(time[2])
  score = time[1] .. string.sub('00000', #micros) .. micros
  now = tonumber(time[1]) * 1000000 + tonumber(micros)
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
local count = redis.call('ZCARD', key)

if count < threshold then
  local newest = now
  if redis.call('ZADD', key, 'NX', score, ARGV[3]) == 0 then
    -- A resent call, already admitted and recorded: count it once, at the time it was.
    count = count - 1
    newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  elseif count > 0 and redis.call('ZRANGE', key, '-1', '-1')[1] ~= ARGV[3] then
    -- The newest admission is this one (the usual case: its member is last, read without its
    -- score), or one recorded at a later time (explicit times out of order, a server clock
    -- stepped back; or one at this very time whose member sorts after this one).
    newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  end
  local reset_after = newest + period - now
  -- PEXPIRE counts milliseconds on the server's own clock: round up, plus 1 ms, so the key
  -- never expires before its newest admission leaves the window, and at least 1 s, so that
  -- checks at explicit times near the server's (or a short period under a loaded server) do
  -- not see a key vanish between two checks of one window. Never shorten it (hence PTTL,
  -- although one rate per key only ever lengthens it): another rate with a longer period may
  -- share the key (the count > 0 case; a new set has no TTL).
  local ttl = math.max(math.ceil(reset_after / 1000) + 1, 1000)
  if count == 0 or redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
  return {1, count + 1, 0, reset_after}
end

-- A resent call that was admitted the first time (it filled the window) stays admitted.
if redis.call('ZSCORE', key, ARGV[3]) then
  local newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  return {1, count, 0, newest + period - now}
end

-- The count falls below the threshold when the admission at rank count - threshold (the
-- oldest, unless the set holds more) leaves the window. At threshold 1 that is the last one,
-- the newest.
local rank = string.format('%d', count - threshold)
local freeing = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
local newest = freeing
if threshold > 1 then
  newest = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
end
return {0, count, freeing + period - now, newest + period - now}
