-- A quota lease of one limit: the call at hand is checked as any other, and when it fits, up
-- to wanted - 1 more admissions are reserved for this process to spend without a round
-- trip until the lease ends; atomically. counter.lua, which script.rs puts before this
-- script, holds a counter's arithmetic.
--
-- KEYS[1]  the limit's sorted set (a log), or its counter's hash.
-- ARGV[1]  period, integer microseconds (1,000 ..= 3,155,760,000,000,000).
-- ARGV[2]  threshold (1 ..= 4,294,967,295).
-- ARGV[3]  the lease's name, unique across processes and calls, its first character one of
--          E to H (an admission's is one of A to D: member.rs), by which a reset tells a
--          reserve from an admission. In a log, the call at hand is the member ARGV[3] .. '.0'
--          and the reserve the members ARGV[3] .. '.' .. j for j in 1..granted - 1, which the
--          process spends from the highest down, so that what it gives back when the lease
--          ends is 1..unused: refund.lua's members of an admission of that cost.
-- ARGV[4]  wanted: the call and the reserve (1 ..= 10,000).
-- ARGV[5]  how long the lease lasts, integer microseconds (1 ..= the period).
-- ARGV[6]  'c' for a sliding window counter; anything else for a log.
-- ARGV[7]  '1' when the client resends the lease (it found its connection closed, so the
--          first send may have run, and its reply reached nobody); empty otherwise.
--
-- Returns {granted (0: denied; else the call and granted - 1 reserved), now (µs, this server's
-- TIME), count (the window's admissions with the lease: a counter's estimate), retry_after (µs
-- until a call fits; 0 when granted), reset_after (µs until no admission is left in the
-- window), lasts (µs the lease lasts from now; 0 when nothing is reserved)}.
--
-- The bound the store keeps holds over the times the reserve is really spent:
-- - a log records the call at now and its reserve at now + lasts, the lease's end, which the
--   process spends it before; each reserved member then stays in the window at least a period
--   after any use it stands for, and counts as an admission later than now for every check
--   before it (the contract's rule for those), so every window of the log holds at most the
--   threshold of uses, whenever within the lease they came;
-- - a counter adds the whole lease to the current fixed window's count at once, and the lease
--   ends no later than that window does: every use is counted in the window it falls in, and
--   by every check made after the reservation. The lease is also recorded as its limiter's
--   current one (counter.lua's lease_field), whose reserve a reset keeps while it lasts.
-- - a reset (reset.lua) keeps a log's reserve members while they are scored after its now,
--   and the reserve of each limiter's current counter lease while it lasts: what a process
--   may still spend stays counted.
-- Leases use the server's clock only: there is no explicit time.
--
-- A lease resent after a lost connection (marked; its log's member .0 recorded already) was
-- never spent: its reserve is removed, and the call at hand counts once, answered as granted
-- alone; resent so late that .0 has left the window, its reserve is removed all the same and
-- the call checked afresh. A second run that is not marked may be the first send itself,
-- delayed past its resend (a proxy that held it), whose reserve the process is spending: it
-- removes nothing, and is answered as the call alone (a reserve it leaves unspent only
-- over-counts until it leaves the window).
-- A counter keeps no member: a resend counts again (over-counting is safe), so the client
-- never resends a counter's lease.

local CHUNK = 1000
local key = KEYS[1]
local period = tonumber(ARGV[1])
local threshold = tonumber(ARGV[2])
local base = ARGV[3]
local wanted = tonumber(ARGV[4])
local lasts = tonumber(ARGV[5])
local marked = ARGV[7] == '1'
local time = redis.call('TIME')
local micros = tostring(time[2])
local score = time[1] .. string.sub('00000', #micros) .. micros
local now = tonumber(time[1]) * 1000000 + tonumber(micros)

if ARGV[6] == 'c' then
  local index, prev, cur, elapsed, ahead, born, first, latest = counter_window(key, period, now)
  local left = counter_remaining(prev, cur, elapsed, threshold, period)
  local count = threshold - left
  if left < 1 then
    local retry_after = counter_retry(prev, cur, 1, elapsed, ahead, threshold, period)
    return {0, now, count, retry_after, counter_reset(prev, cur, elapsed, ahead, period), 0}
  end
  -- Never past the fixed window's end; and before the key's window (a server clock stepped
  -- back), the call alone.
  lasts = math.min(lasts, period - elapsed)
  local granted = math.min(wanted, left)
  if ahead > 0 or lasts < 1 then
    granted, lasts = 1, 0
  end
  prev, cur =
    counter_admit(key, period, now, granted, index, prev, cur, ahead, born, first, latest)
  if first then
    lease_sweep(key, period, index)
  end
  if granted == 1 then
    lasts = 0
  else
    -- What a reset keeps while the lease lasts.
    lease_record(key, period, threshold, base, index, granted - 1, now + lasts)
  end
  return {granted, now, count + granted, 0, counter_reset(prev, cur, elapsed, ahead, period), lasts}
end

local function newest_score()
  return tonumber(redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
end

-- Members j in first..last of the lease, as ZADD's or ZREM's arguments (at ends, when given).
local function members(first, last, ends)
  local args = {}
  for j = first, last do
    if ends then
      args[#args + 1] = ends
    end
    args[#args + 1] = base .. '.' .. j
  end
  return args
end

-- The lease's end, or the newest admission if later (explicit times, a server clock stepped
-- back), + period - now; and a TTL that outlives it (as sliding_window.lua sets it).
local function keep(newest)
  local reset_after = newest + period - now
  local ttl = math.max(math.ceil(reset_after / 1000) + 1, 1000)
  if redis.call('PTTL', key) < ttl then
    redis.call('PEXPIRE', key, ttl)
  end
  return reset_after
end

-- Removes the reserve an earlier run of this lease recorded (members 1..wanted - 1), which
-- nobody spent: its reply never reached the process.
local function take_back_reserve()
  local j = 1
  while j < wanted do
    local last = math.min(j + CHUNK - 1, wanted - 1)
    redis.call('ZREM', key, unpack(members(j, last)))
    j = last + 1
  end
end

redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)

if redis.call('ZSCORE', key, base .. '.0') then
  if marked then
    take_back_reserve()
  end
  local count = redis.call('ZCARD', key)
  return {1, now, count, 0, newest_score() + period - now, 0}
end

-- A resend so late that the first run's call (.0, at its now) has left the window while its
-- reserve (at its lease's end) has not: that reserve, never spent, is taken back, and the call
-- checked afresh; left in place, its members would keep their earlier end, before this
-- lease's. Not marked, the reserve may be being spent: left alone, and the call checked
-- afresh on its own (no reserve of this name can be recorded again).
if wanted > 1 and redis.call('ZSCORE', key, base .. '.1') then
  if marked then
    take_back_reserve()
  else
    wanted = 1
  end
end

local count = redis.call('ZCARD', key)
if count >= threshold then
  -- As sliding_window.lua: the count falls below the threshold when the admission at rank
  -- count - threshold leaves the window.
  local rank = string.format('%d', count - threshold)
  local freeing = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
  return {0, now, count, freeing + period - now, newest_score() + period - now, 0}
end

local granted = math.min(wanted, threshold - count)
redis.call('ZADD', key, 'NX', score, base .. '.0')
if granted == 1 then
  lasts = 0
else
  local ends = string.format('%d', now + lasts)
  local j = 1
  while j < granted do
    local last = math.min(j + CHUNK - 1, granted - 1)
    redis.call('ZADD', key, 'NX', unpack(members(j, last, ends)))
    j = last + 1
  end
end
return {granted, now, count + granted, 0, keep(newest_score()), lasts}
