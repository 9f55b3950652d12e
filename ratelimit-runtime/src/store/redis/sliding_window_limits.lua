-- Sliding window log over several limits of one call, each with its cost: evict and count in
-- every limit, then admit and record in every one, or deny and record in none; atomically
-- (one script, so all of a call's keys are on one server, or in one cluster slot).
--
-- KEYS[i]      limit i's sorted set: members are admissions, scores are integer microseconds
--              since the Unix epoch. The keys are distinct.
-- ARGV[1]      the call's admission: its members are ARGV[1] .. '.' .. j for j in 1..cost, in
--              every limit's set (unique across processes and calls; a refund names them). A
--              call sent twice (a client that resent it after a lost connection, marked or
--              not) is counted once and answered as admitted.
-- ARGV[2]      now, integer microseconds since the Unix epoch; empty: use this server's TIME.
-- ARGV[3]      "1" when the client resends the call (it found its connection closed, so the
--              first send may have run): its logs are asked for its members before anything
--              else; empty otherwise, and then only a call that does not fit is asked (a
--              resend nobody marked, as redis-rs's cluster client makes, fills the logs with
--              its own first send).
-- ARGV[3i+1]   limit i's period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[3i+2]   limit i's threshold (1 ..= 4,294,967,295).
-- ARGV[3i+3]   limit i's cost (0 ..= min(threshold, 10,000) for a log, 0 ..= threshold for a
--              counter: larger ones are turned away before they are sent).
-- ARGV[3n+4]   which limits are sliding window counters: a 'c' at position i for limit i, an
--              'l' for a log (absent: all logs). A counter's key is its hash, its period's
--              field holding it (counter.lua, which script.rs puts before this script), and
--              its count below is the estimate T - remaining.
--
-- Returns {admitted (1 or 0), now (µs), then for each limit: count (its window's admissions
-- before this call), retry_after (µs until its cost fits; 0 when it fits), reset_after (µs
-- until no admission is left in its window, with this call when admitted; 0 for an empty
-- window)}.
--
-- The window is (now - period, now]. A call is admitted iff every limit's count plus its cost
-- stays within its threshold (a cost of 0 always fits); denied calls record nothing in any
-- limit. A call of cost c is recorded as c members at one score (ZADD in chunks of 1,000,
-- below Lua's unpack limit), so counts stay ZCARD. Numbers go to redis.call as in
-- sliding_window.lua (the score as text; ranks through string.format('%d')).
--
-- An admission costs 4 calls per limit (ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE GT), plus TIME
-- once; at an explicit time, one more per limit that holds admissions (ZRANGE of the newest:
-- explicit times may come out of order, and an admission later than now is then the newest,
-- which reset_after counts from). On the server's clock that read is skipped: its TIME only
-- goes back when the clock is stepped back, and then reset_after is short by the step, while
-- the TTL, never shortened, still outlives the newest admission. PEXPIRE's GT (Redis >= 7)
-- never shortens a TTL; when it sets nothing, PTTL tells a key without one (which GT takes for
-- an infinite TTL) to get it; on an older server GT fails and PTTL decides, as in
-- sliding_window.lua. A denial reads each limit's newest admission, and its rank
-- count + cost - threshold - 1 in each limit that denies. A counter costs HGET, then when
-- admitted HSET of its field (and PTTL, PEXPIRE at a window's first admission). A resend is recognised by the logs' members only: a call whose
-- limits are all counters may be counted twice when its connection closed mid-call.

local CHUNK = 1000
local base = ARGV[1]
local score = ARGV[2]
local explicit = score ~= ''
local now = tonumber(score)
if not explicit then
  local time = redis.call('TIME')
  local micros = tostring(time[2])
  score = time[1] .. string.sub('00000', #micros) .. micros
  now = tonumber(time[1]) * 1000000 + tonumber(micros)
end

local n = #KEYS
local kinds = ARGV[3 * n + 4] or ''
local function is_counter(i)
  return string.sub(kinds, i, i) == 'c'
end
-- Each counter's window: {index, prev, cur, elapsed, ahead, born, first, latest}.
local windows = {}

-- A resend whose first send ran recorded the call in every limit (one script records in all
-- or none), but a limit of a short period may have evicted its members since: the call is a
-- resend if any limit still holds its first member. Returns the resend's answer (admitted,
-- counted once), or nil for a call that did not run before.
local function resend_reply()
  local ran = false
  local held = {}
  for i = 1, n do
    if tonumber(ARGV[3 * i + 3]) > 0 and not is_counter(i) then
      held[i] = redis.call('ZSCORE', KEYS[i], base .. '.1') ~= false
      ran = ran or held[i]
    end
  end
  if not ran then
    return nil
  end
  local reply = {1, now}
  for i = 1, n do
    local key = KEYS[i]
    local period = tonumber(ARGV[3 * i + 1])
    if is_counter(i) then
      -- Recorded by the first send: seen with the call, answered without it.
      local threshold = tonumber(ARGV[3 * i + 2])
      local _, prev, cur, elapsed, ahead = counter_window(key, period, now)
      local left = counter_remaining(prev, cur, elapsed, threshold, period)
      reply[3 * i] = math.max(threshold - left - tonumber(ARGV[3 * i + 3]), 0)
      reply[3 * i + 1] = 0
      reply[3 * i + 2] = counter_reset(prev, cur, elapsed, ahead, period)
    else
      redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
      local count = redis.call('ZCARD', key)
      local reset = 0
      if count > 0 then
        reset = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2]) + period - now
      end
      if held[i] and redis.call('ZSCORE', key, base .. '.1') then
        count = count - tonumber(ARGV[3 * i + 3])
      end
      reply[3 * i] = math.max(count, 0)
      reply[3 * i + 1] = 0
      reply[3 * i + 2] = reset
    end
  end
  return reply
end

-- Asked first of a call the client marked as a resend. A resend it did not mark (redis-rs's
-- cluster client resends a call whose connection dropped, as it came) is told apart where it
-- matters: its members make the logs look full, so it is asked again before a denial.
local marked = ARGV[3] ~= ''
if marked then
  local reply = resend_reply()
  if reply then
    return reply
  end
end

local counts = {}
local fits = true
local first_costly = nil
for i = 1, n do
  local key = KEYS[i]
  local cost = tonumber(ARGV[3 * i + 3])
  local threshold = tonumber(ARGV[3 * i + 2])
  if is_counter(i) then
    local period = tonumber(ARGV[3 * i + 1])
    local index, prev, cur, elapsed, ahead, born, first, latest = counter_window(key, period, now)
    windows[i] = {index, prev, cur, elapsed, ahead, born, first, latest}
    local left = counter_remaining(prev, cur, elapsed, threshold, period)
    counts[i] = threshold - left
    if cost > left then
      fits = false
    end
  else
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - tonumber(ARGV[3 * i + 1]))
    local count = redis.call('ZCARD', key)
    counts[i] = count
    if cost > 0 then
      if count + cost > threshold then
        fits = false
      end
      if first_costly == nil then
        first_costly = i
      end
    end
  end
end

-- The newest admission's score in `key` (which holds some).
local function newest_of(key)
  return tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
end

local reply = {1, now}

if fits then
  local resent = false
  for i = 1, n do
    local key = KEYS[i]
    local count = counts[i]
    local cost = tonumber(ARGV[3 * i + 3])
    local period = tonumber(ARGV[3 * i + 1])
    local reset = 0
    if is_counter(i) then
      -- Below, once the logs have told whether this is a resend.
    elseif cost > 0 and not resent then
      local added
      if cost == 1 then
        added = redis.call('ZADD', key, 'NX', score, base .. '.1')
      else
        added = 0
        local j = 1
        while j <= cost do
          local last = math.min(j + CHUNK - 1, cost)
          local args = {}
          for m = j, last do
            args[#args + 1] = score
            args[#args + 1] = base .. '.' .. m
          end
          added = added + redis.call('ZADD', key, 'NX', unpack(args))
          j = last + 1
        end
      end
      -- A resent call, already admitted and recorded in every limit (one script records in
      -- all or none): counted once, answered as admitted.
      resent = i == first_costly and added == 0
    end
    if is_counter(i) then
      -- Below.
    elseif resent then
      if cost > 0 then
        count = count - cost
      end
      if counts[i] > 0 then
        reset = newest_of(key) + period - now
      end
    elseif cost > 0 then
      reset = period
      if explicit and count > 0 then
        local newest = newest_of(key)
        if newest > now then
          reset = newest + period - now
        end
      end
      -- As in sliding_window.lua: round up, plus 1 ms, at least 1 s; never shorten it.
      local ttl = math.max(math.ceil(reset / 1000) + 1, 1000)
      if count == 0 then
        redis.call('PEXPIRE', key, ttl)
      else
        local extended = redis.pcall('PEXPIRE', key, ttl, 'GT')
        if type(extended) == 'table' then
          if redis.call('PTTL', key) < ttl then
            redis.call('PEXPIRE', key, ttl)
          end
        elseif extended == 0 and redis.call('PTTL', key) == -1 then
          redis.call('PEXPIRE', key, ttl)
        end
      end
    elseif count > 0 then
      reset = newest_of(key) + period - now
    end
    reply[3 * i] = count
    reply[3 * i + 1] = 0
    reply[3 * i + 2] = reset
  end
  for i = 1, n do
    if is_counter(i) then
      local cost = tonumber(ARGV[3 * i + 3])
      local period = tonumber(ARGV[3 * i + 1])
      local index, prev, cur, elapsed, ahead, born, first, latest = unpack(windows[i])
      if resent then
        -- Counted by the first send.
        reply[3 * i] = math.max(counts[i] - cost, 0)
      else
        if cost > 0 then
          prev, cur =
            counter_admit(KEYS[i], period, now, cost, index, prev, cur, ahead, born, first, latest)
        end
        reply[3 * i] = counts[i]
      end
      reply[3 * i + 1] = 0
      reply[3 * i + 2] = counter_reset(prev, cur, elapsed, ahead, period)
    end
  end
  return reply
end

-- A resend of an admitted call finds it in the logs and stays admitted (not denied, and
-- charged, by its own first send).
if not marked and first_costly ~= nil then
  local resent = resend_reply()
  if resent then
    return resent
  end
end

reply[1] = 0
for i = 1, n do
  local key = KEYS[i]
  local count = counts[i]
  local period = tonumber(ARGV[3 * i + 1])
  local threshold = tonumber(ARGV[3 * i + 2])
  local cost = tonumber(ARGV[3 * i + 3])
  local retry_after = 0
  local reset = 0
  if is_counter(i) then
    local _, prev, cur, elapsed, ahead = unpack(windows[i])
    if cost > threshold - count then
      retry_after = counter_retry(prev, cur, cost, elapsed, ahead, threshold, period)
    end
    reset = counter_reset(prev, cur, elapsed, ahead, period)
  elseif count > 0 then
    reset = newest_of(key) + period - now
    if cost > 0 and count + cost > threshold then
      -- The cost fits when the admission at rank count + cost - threshold - 1 (the oldest
      -- for a cost of 1, unless the set holds more) leaves the window.
      local rank = string.format('%d', count + cost - threshold - 1)
      local freeing = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
      retry_after = freeing + period - now
    end
  end
  reply[3 * i] = count
  reply[3 * i + 1] = retry_after
  reply[3 * i + 2] = reset
end
return reply
