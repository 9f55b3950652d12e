-- Sliding window log over several limits of one call, each with its cost: evict and count in
-- every limit, then admit and record in every one, or deny and record in none; atomically
-- (one script, so all of a call's keys are on one server, or in one cluster slot).
--
-- KEYS[i]      limit i's sorted set: members are admissions, scores are integer microseconds
--              since the Unix epoch. The keys are distinct.
-- ARGV[1]      the call's admission: its members are ARGV[1] .. '.' .. j for j in 1..cost, in
--              every limit's set (unique across processes and calls; a refund names them). A
--              call sent twice (a client that resent it after a lost connection) is counted
--              once and answered as admitted.
-- ARGV[2]      now, integer microseconds since the Unix epoch; empty: use this server's TIME.
-- ARGV[3i]     limit i's period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[3i+1]   limit i's threshold (1 ..= 4,294,967,295).
-- ARGV[3i+2]   limit i's cost (0 ..= min(threshold, 10,000): larger ones are turned away
--              before they are sent).
--
-- Returns {admitted (1 or 0), then for each limit: count (its window's admissions, this
-- call's included when admitted), retry_after (µs until its cost fits; 0 when it fits),
-- reset_after (µs until no admission is left in its window; 0 for an empty one)}.
--
-- The window is (now - period, now]. A call is admitted iff every limit's count plus its cost
-- stays within its threshold; denied calls record nothing in any limit. A call of cost c is
-- recorded as c members at one score (ZADD in chunks of 1,000, below Lua's unpack limit), so
-- counts stay ZCARD. Numbers go to redis.call as in sliding_window.lua (the score as text,
-- ranks through string.format('%d')). The usual admission costs 5 calls per limit that holds
-- admissions (ZREMRANGEBYSCORE, ZCARD, ZRANGE of the newest, ZADD, PEXPIRE GT), 4 into an
-- empty set, plus TIME once. PEXPIRE's GT (Redis >= 7) never shortens a TTL; on an older
-- server it fails and PTTL decides instead, as in sliding_window.lua.

local CHUNK = 1000
local base = ARGV[1]
local score = ARGV[2]
local now = tonumber(score)
if now == nil then
  local time = redis.call('TIME')
  local micros = tostring(time[2])
  score = time[1] .. string.sub('00000', #micros) .. micros
  now = tonumber(time[1]) * 1000000 + tonumber(micros)
end

local n = #KEYS
local periods, thresholds, costs, counts, newests = {}, {}, {}, {}, {}
local fits = true
local first_costly = nil
for i = 1, n do
  local key = KEYS[i]
  local period = tonumber(ARGV[3 * i])
  local threshold = tonumber(ARGV[3 * i + 1])
  local cost = tonumber(ARGV[3 * i + 2])
  periods[i], thresholds[i], costs[i] = period, threshold, cost
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
  local count = redis.call('ZCARD', key)
  counts[i] = count
  if count > 0 then
    newests[i] = tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
  end
  if count + cost > threshold then
    fits = false
  end
  if cost > 0 and first_costly == nil then
    first_costly = i
  end
end

-- µs until no admission is left in limit i's window, given its newest admission (or nil).
local function reset_after(i, newest)
  if newest == nil then
    return 0
  end
  return newest + periods[i] - now
end

-- The reply of an admitted call, whose members are recorded already (`recorded`) or not.
local function admitted(recorded)
  local reply = {1}
  for i = 1, n do
    local count = counts[i]
    local newest = newests[i]
    if costs[i] > 0 and not recorded then
      -- Recorded at now, unless a later admission is the newest (explicit times out of
      -- order, a server clock stepped back).
      count = count + costs[i]
      if newest == nil or newest < now then
        newest = now
      end
    end
    local reset = reset_after(i, newest)
    if costs[i] > 0 and not recorded then
      -- As in sliding_window.lua: round up, plus 1 ms, at least 1 s; never shorten it.
      local ttl = math.max(math.ceil(reset / 1000) + 1, 1000)
      if counts[i] == 0 then
        redis.call('PEXPIRE', KEYS[i], ttl)
      else
        local extended = redis.pcall('PEXPIRE', KEYS[i], ttl, 'GT')
        if type(extended) == 'table' and extended.err then
          if redis.call('PTTL', KEYS[i]) < ttl then
            redis.call('PEXPIRE', KEYS[i], ttl)
          end
        end
      end
    end
    reply[#reply + 1] = count
    reply[#reply + 1] = 0
    reply[#reply + 1] = reset
  end
  return reply
end

if fits then
  for i = 1, n do
    local cost = costs[i]
    local added = 0
    local j = 1
    while j <= cost do
      local last = math.min(j + CHUNK - 1, cost)
      local args = {}
      for m = j, last do
        args[#args + 1] = score
        args[#args + 1] = base .. '.' .. m
      end
      added = added + redis.call('ZADD', KEYS[i], 'NX', unpack(args))
      j = last + 1
    end
    if i == first_costly and added == 0 then
      -- A resent call, already admitted and recorded in every limit (one script records in
      -- all or none): count it once.
      return admitted(true)
    end
  end
  return admitted(false)
end

-- A resent call that was admitted the first time (it filled a window) stays admitted.
if first_costly ~= nil and redis.call('ZSCORE', KEYS[first_costly], base .. '.1') then
  return admitted(true)
end

local reply = {0}
for i = 1, n do
  local count, threshold, cost = counts[i], thresholds[i], costs[i]
  local retry_after = 0
  if count + cost > threshold then
    if cost > threshold or count == 0 then
      retry_after = periods[i]
    else
      -- The cost fits when the admission at rank count + cost - threshold - 1 (the oldest
      -- for a cost of 1, unless the set holds more) leaves the window.
      local rank = string.format('%d', count + cost - threshold - 1)
      local freeing = tonumber(redis.call('ZRANGE', KEYS[i], rank, rank, 'WITHSCORES')[2])
      retry_after = freeing + periods[i] - now
    end
  end
  reply[#reply + 1] = count
  reply[#reply + 1] = retry_after
  reply[#reply + 1] = reset_after(i, newests[i])
end
return reply
