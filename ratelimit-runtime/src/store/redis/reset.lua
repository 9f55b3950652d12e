-- Forgets keys' admissions up to this server's now, keeping what live quota leases reserved
-- (lease.lua), so that no process can spend more than the window then holds.
--
-- KEYS     the keys to forget, all on this node (one slot in a cluster): logs' sorted sets,
--          counters' hashes, or keys of any other type, which are deleted.
--
-- Returns {forgotten (how many of the keys existed)}.
--
-- A log loses every member scored up to now (the admissions, a lease's call at hand, the
-- reserves of leases that ended), and every later member but the reserves of live leases:
-- members after now are admissions at explicit times, or a lease's reserve (its name's first
-- character one of E to H, its index not 0: member.rs), recorded at the lease's end, spent or
-- not. A counter's hash keeps, of each period's counter, the reserve of each limiter's current
-- lease (counter.lua's lease_field) that lasts past now, marked as what the reset kept of it:
-- the counter starts afresh from their sum, in the window they were granted in, first written
-- after every time written into it before (so that a refund of a check made before the reset
-- takes nothing from it, whatever the clock did; the give-back of a kept lease takes what was
-- kept of it: refund.lua); a counter written at times later than now keeps an empty field
-- so marked; everything else goes. What is kept keeps its TTL; a key left with nothing is
-- deleted. Resent after a lost connection it forgets what came since, as a second
-- reset would.
--
-- counter.lua, which script.rs puts before this script, holds a counter's arithmetic.

local time = redis.call('TIME')
local micros = tostring(time[2])
local score = time[1] .. string.sub('00000', #micros) .. micros
local now = tonumber(time[1]) * 1000000 + tonumber(micros)
local CHUNK = 1000

-- Whether member is the reserve of a lease: lease.lua's <lease>.<j>, j from 1.
local function is_reserve(member)
  return string.find(member, '^[EFGH]') ~= nil and string.sub(member, -2) ~= '.0'
end

local function forget_log(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', score)
  local later = redis.call('ZRANGEBYSCORE', key, '(' .. score, '+inf')
  local gone = {}
  for _, member in ipairs(later) do
    if not is_reserve(member) then
      gone[#gone + 1] = member
      if #gone == CHUNK then
        redis.call('ZREM', key, unpack(gone))
        gone = {}
      end
    end
  end
  if #gone > 0 then
    redis.call('ZREM', key, unpack(gone))
  end
end

local function forget_counters(key)
  local all = redis.call('HGETALL', key)
  local values = {}
  local fields = {}
  for i = 1, #all, 2 do
    fields[#fields + 1] = all[i]
    values[all[i]] = all[i + 1]
  end
  -- Each period's live current leases: reserve kept, per counter field.
  local reserve = {}
  local kept = {}
  for _, field in ipairs(fields) do
    local period = string.match(field, '^(%d+):%d+:')
    if period then
      local w, name, reserved, ends = string.match(values[field], '^(%d+) (%S+) (%d+) (%d+) ')
      w, reserved, ends = tonumber(w), tonumber(reserved), tonumber(ends)
      local counter = values[period]
      local cw = counter and tonumber(string.match(counter, '^(%d+) '))
      -- Live, and of the counter's window (its current one, or a later one that a server
      -- clock stepped back sees ahead).
      if reserved > 0 and ends > now and cw == w and w >= window_index(now, tonumber(period)) then
        reserve[period] = (reserve[period] or 0) + reserved
        redis.call('HSET', key, field, string.format('%d ', w) .. name ..
          string.format(' %d %d %d', reserved, ends, reserved))
        kept[field] = true
      end
    end
  end
  for period, total in pairs(reserve) do
    local w, _, _, _, latest = counter_read(key, tonumber(period))
    local born = math.max(now, latest + 1)
    redis.call('HSET', key, period, string.format('%d 0 %d %d %d', w, total, born, born))
    kept[period] = true
  end
  -- A counter written later than now (explicit times) keeps an empty field marked after
  -- that: a refund of a check made before the reset must take nothing from what comes after.
  for _, field in ipairs(fields) do
    if not kept[field] and string.match(field, '^%d+$') then
      local w, _, _, _, latest = counter_read(key, tonumber(field))
      if latest > now then
        redis.call('HSET', key, field, string.format('%d 0 0 %d %d', w, latest + 1, latest + 1))
        kept[field] = true
      end
    end
  end
  local gone = {}
  for _, field in ipairs(fields) do
    if not kept[field] then
      gone[#gone + 1] = field
    end
  end
  if #gone == #fields then
    redis.call('DEL', key)
  elseif #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
  end
end

local forgotten = 0
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'none' then
    forgotten = forgotten + 1
  end
  if kind == 'zset' then
    forget_log(key)
  elseif kind == 'hash' then
    forget_counters(key)
  elseif kind ~= 'none' then
    redis.call('DEL', key)
  end
end
return {forgotten}
