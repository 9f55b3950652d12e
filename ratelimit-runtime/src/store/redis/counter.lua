-- The sliding window counter's arithmetic (store/counter.rs, which proves its bound), for the
-- scripts that check, look at or refund counters: script.rs puts this before them.
--
-- A key's counters are one hash, a field per period (its µs, in digits), each holding
-- '<w> <prev> <cur> <born>': the index of its current fixed window (now // period), the
-- admissions of the window before and of that one, and the time (µs) the field was first
-- written, which a refund of a check made before it (of a key reset since) leaves alone.
-- Two periods on one key are two counters that do not disturb each other. At e µs into
-- window w, a call of cost c fits iff
-- prev * (P - e) + (cur + c) * P <= T * P. Lua's numbers are doubles, exact below 2^53,
-- while T * P reaches 1.4e25: products are kept in two integer halves, hi * 2^32 + lo, and
-- compared exactly. Divisions in doubles only propose an answer, which exact comparisons
-- then correct (by a step or two: a double's error is below 2 µs here).

local TWO16 = 65536
local TWO32 = 4294967296

-- a * b as hi, lo (lo < 2^32), for integers a < 2^33 and b < 2^52: every partial product
-- stays below 2^53.
local function mul(a, b)
  local bh = math.floor(b / TWO32)
  local bl = b - bh * TWO32
  local ah = math.floor(a / TWO16)
  local al = a - ah * TWO16
  local middle = ah * bl
  local middle_hi = math.floor(middle / TWO16)
  local lo = (middle - middle_hi * TWO16) * TWO16 + al * bl
  local carry = math.floor(lo / TWO32)
  return a * bh + middle_hi + carry, lo - carry * TWO32
end

-- prev * weight + used * period <= threshold * period, exactly (counts below 2^32, weight
-- and period below 2^52).
local function counter_fits(prev, used, weight, threshold, period)
  if used > threshold then
    return false
  elseif prev == 0 or weight == 0 then
    return true
  end
  local h1, l1 = mul(prev, weight)
  local h2, l2 = mul(used, period)
  local hi, lo = h1 + h2, l1 + l2
  if lo >= TWO32 then
    hi, lo = hi + 1, lo - TWO32
  end
  local th, tl = mul(threshold, period)
  return hi < th or (hi == th and lo <= tl)
end

-- now // period, exactly.
local function window_index(now, period)
  local index = math.floor(now / period)
  if index * period > now then
    index = index - 1
  elseif (index + 1) * period <= now then
    index = index + 1
  end
  return index
end

-- The field of period's counter in its key's hash.
local function counter_field(period)
  return string.format('%d', period)
end

-- The counter of period at key as stored: its window's index, prev, cur, born and latest (the
-- latest time an admission was written into it: born for a value written without it); nil
-- when the hash holds none.
local function counter_read(key, period)
  local stored = redis.call('HGET', key, counter_field(period))
  if not stored then
    return nil
  end
  local w, prev, cur, born, latest = string.match(stored, '^(%d+) (%d+) (%d+) (%d+) ?(%d*)$')
  born = tonumber(born)
  return tonumber(w), tonumber(prev), tonumber(cur), born, tonumber(latest) or born
end

-- The counter of period at key seen at now: index, prev, cur, elapsed (µs into the window),
-- ahead (µs from now to the window's start: 0, unless now is before the key's window, which
-- is then seen from its start, both counts at full weight; an admission there goes to prev),
-- born (when the counter was first written; now for a new one), first (true unless the hash
-- holds this window already: an admission then sets the TTL) and latest (0 for a new one).
local function counter_window(key, period, now)
  local index = window_index(now, period)
  local kept, prev, cur, born, latest = counter_read(key, period)
  if kept == nil then
    return index, 0, 0, now - index * period, 0, now, true, 0
  elseif kept == index then
    return index, prev, cur, now - index * period, 0, born, false, latest
  elseif kept + 1 == index then
    return index, cur, 0, now - index * period, 0, born, true, latest
  elseif kept > index then
    return kept, prev, cur, 0, kept * period - now, born, false, latest
  end
  return index, 0, 0, now - index * period, 0, born, true, latest
end

-- The largest cost that fits (0 when none does).
local function counter_remaining(prev, cur, elapsed, threshold, period)
  if cur >= threshold then
    return 0
  elseif prev == 0 then
    return threshold - cur
  end
  local weight = period - elapsed
  local left = math.floor(threshold - cur - prev * weight / period)
  left = math.min(math.max(left, 0), threshold - cur)
  while left > 0 and not counter_fits(prev, cur + left, weight, threshold, period) do
    left = left - 1
  end
  while left < threshold - cur and counter_fits(prev, cur + left + 1, weight, threshold, period) do
    left = left + 1
  end
  return left
end

-- The first e in 0..period with prev * (period - e) <= room * period.
local function first_fit(prev, room, period)
  if prev == 0 then
    return 0
  end
  local e = math.ceil(period - room * period / prev)
  e = math.min(math.max(e, 0), period)
  while e > 0 and counter_fits(prev, 0, period - e + 1, room, period) do
    e = e - 1
  end
  while not counter_fits(prev, 0, period - e, room, period) do
    e = e + 1
  end
  return e
end

-- µs until a call of cost (at most the threshold) fits, no other call admitted before; for a
-- call that does not fit now.
local function counter_retry(prev, cur, cost, elapsed, ahead, threshold, period)
  if cur + cost <= threshold then
    return ahead + first_fit(prev, threshold - cur - cost, period) - elapsed
  end
  return ahead + (period - elapsed) + first_fit(cur, math.max(threshold - cost, 0), period)
end

-- µs until the estimate falls to zero.
local function counter_reset(prev, cur, elapsed, ahead, period)
  if cur > 0 then
    return ahead + 2 * period - elapsed
  elseif prev > 0 then
    return ahead + period - elapsed
  end
  return 0
end

-- Keeps the counter of period at key, in which a call was admitted at now: its window's
-- index, its counts (as text through '%d', sparing Redis its '%.17g' of a Lua number), born,
-- and the latest time written (a reset's mark of first writing comes after it, whatever the
-- clock did). The hash expires when the window after this one ends (at most two periods on;
-- PEXPIRE counts milliseconds on the server's clock: rounded up, plus 1 ms, at least 1 s, as
-- the log's keys), never sooner than it would have: another period's counter may need it
-- longer. Within one window the TTL set by its first admission still holds.
local function counter_store(key, index, prev, cur, born, period, now, first, latest)
  redis.call('HSET', key, counter_field(period),
    string.format('%d %d %d %d %d', index, prev, cur, born, math.max(latest, now)))
  if first then
    local ttl = math.max(math.ceil(((index + 2) * period - now) / 1000) + 1, 1000)
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- A limiter's current lease of period's counter of threshold (lease.lua), the field
-- '<period>:<threshold>:<owner>' beside the counter's, owner being the first 11 characters of
-- the lease's name (its limiter's: member.rs), its value '<w> <name> <reserved> <ends>
-- <kept>': the fixed window's index, the lease's name, what it reserved beyond its call, when
-- it ends (µs), and what a reset kept of it. A limiter renews a lease only once the last one
-- was spent, ended or given back, and gives back whole a renewal it no longer waits for
-- (check/lease.rs), so only its latest lease may still be spent: a reset keeps the reserve of
-- each live current lease (reset.lua), its give-back takes what was kept of it, and the
-- give-back of any other lease granted before the reset nothing.
local function lease_field(period, threshold, name)
  return string.format('%d:%d:', period, threshold) .. string.sub(name, 1, 11)
end

-- The lease recorded in field at key: its window's index, name, reserved, ends and kept; nil
-- when there is none.
local function lease_read(key, field)
  local stored = redis.call('HGET', key, field)
  if not stored then
    return nil
  end
  local w, name, reserved, ends, kept = string.match(stored, '^(%d+) (%S+) (%d+) (%d+) (%d+)$')
  return tonumber(w), name, tonumber(reserved), tonumber(ends), tonumber(kept)
end

local function lease_write(key, field, w, name, reserved, ends, kept)
  redis.call('HSET', key, field, string.format('%d ', w) .. name ..
    string.format(' %d %d %d', reserved, ends, kept))
end

local ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

-- Whether the lease named a was sent after the one named b, both of one limiter (their first
-- 11 characters alike): by the sequence the rest of a name writes, 6 bits a character
-- (member.rs).
local function lease_after(a, b)
  for i = 12, 22 do
    local x = string.find(ALPHABET, string.sub(a, i, i), 1, true) or 0
    local y = string.find(ALPHABET, string.sub(b, i, i), 1, true) or 0
    if x ~= y then
      return x > y
    end
  end
  return false
end

-- Records the lease named name of period's counter of threshold at key, in window index,
-- reserving `reserved` beyond its call until `ends`: its limiter's current one, unless the
-- record holds a lease its limiter sent after it (this one, delayed, is not its current
-- one: the limiter gives it back whole).
local function lease_record(key, period, threshold, name, index, reserved, ends)
  local field = lease_field(period, threshold, name)
  local _, current = lease_read(key, field)
  if current and #current == 22 and #name == 22 and lease_after(current, name) then
    return
  end
  lease_write(key, field, index, name, reserved, ends, 0)
end

-- Drops the records of period's leases at key of a window before index (their limiters gone:
-- a live limiter's next lease replaces its own).
local function lease_sweep(key, period, index)
  local fields = redis.call('HGETALL', key)
  local prefix = string.format('%d:', period)
  local gone = {}
  for i = 1, #fields, 2 do
    local field = fields[i]
    if string.sub(field, 1, #prefix) == prefix then
      local w = tonumber(string.match(fields[i + 1], '^(%d+) '))
      if w == nil or w < index then
        gone[#gone + 1] = field
      end
    end
  end
  if #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
  end
end

-- What the give-back of cost by the lease named name of period's counter of threshold at key
-- takes from the counter: its cost; for a lease granted before the counter's last reset
-- (`before_reset`), what that reset kept of it, at most its cost (none when it was not its
-- limiter's current lease then, or not live: its reserve went with the reset). The lease,
-- given back, is over: its record goes.
local function lease_give_back(key, period, threshold, name, cost, before_reset)
  local field = lease_field(period, threshold, name)
  local _, current, _, _, kept = lease_read(key, field)
  local own = current == name
  if own then
    redis.call('HDEL', key, field)
  end
  if not before_reset then
    return cost
  elseif own then
    return math.min(cost, kept)
  end
  return 0
end

-- Admits a call of cost (above 0) at now into the counter of period at key, seen as
-- counter_window saw it: into cur, or into prev for a time before the key's window; keeps
-- it, and returns the counts with the call.
local function counter_admit(key, period, now, cost, index, prev, cur, ahead, born, first, latest)
  if ahead > 0 then
    prev = prev + cost
  else
    cur = cur + cost
  end
  counter_store(key, index, prev, cur, born, period, now, first, latest)
  return prev, cur
end

