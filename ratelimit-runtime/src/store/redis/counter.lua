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

-- The counter of period at key as stored: its window's index, prev, cur and born; nil when
-- the hash holds none.
local function counter_read(key, period)
  local stored = redis.call('HGET', key, counter_field(period))
  if not stored then
    return nil
  end
  local w, prev, cur, born = string.match(stored, '^(%d+) (%d+) (%d+) (%d+)$')
  return tonumber(w), tonumber(prev), tonumber(cur), tonumber(born)
end

-- The counter of period at key seen at now: index, prev, cur, elapsed (µs into the window),
-- ahead (µs from now to the window's start: 0, unless now is before the key's window, which
-- is then seen from its start, both counts at full weight; an admission there goes to prev),
-- born (when the counter was first written; now for a new one) and first (true unless the
-- hash holds this window already: an admission then sets the TTL).
local function counter_window(key, period, now)
  local index = window_index(now, period)
  local kept, prev, cur, born = counter_read(key, period)
  if kept == nil then
    return index, 0, 0, now - index * period, 0, now, true
  elseif kept == index then
    return index, prev, cur, now - index * period, 0, born, false
  elseif kept + 1 == index then
    return index, cur, 0, now - index * period, 0, born, true
  elseif kept > index then
    return kept, prev, cur, 0, kept * period - now, born, false
  end
  return index, 0, 0, now - index * period, 0, born, true
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
-- index, its counts (as text through '%d', sparing Redis its '%.17g' of a Lua number) and
-- born. The hash expires when the window after this one ends (at most two periods on;
-- PEXPIRE counts milliseconds on the server's clock: rounded up, plus 1 ms, at least 1 s, as
-- the log's keys), never sooner than it would have: another period's counter may need it
-- longer. Within one window the TTL set by its first admission still holds.
local function counter_store(key, index, prev, cur, born, period, now, first)
  redis.call('HSET', key, counter_field(period),
    string.format('%d %d %d %d', index, prev, cur, born))
  if first then
    local ttl = math.max(math.ceil(((index + 2) * period - now) / 1000) + 1, 1000)
    if redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
end

-- The field that records what period's leases (lease.lua) reserved in one fixed window:
-- '<w> <reserved> <ends> <kept> <since>', the window's index, the admissions they reserved
-- beyond their calls (less what they gave back), when the last of them ends (µs), what the
-- last reset kept of that reserve, and the time of the first lease the record holds (the
-- leases before it, of a record a reset deleted, are not in it). A reset keeps the reserve in
-- the counter while a lease of the window lasts (reset.lua); the give-back of a lease granted
-- before it takes from what it kept only, that of a later lease its cost.
local function lease_field(period)
  return string.format('%d:lease', period)
end

-- The record of period's leases at key: its window's index, reserved, ends, kept and since;
-- nil when there is none.
local function leases_read(key, period)
  local stored = redis.call('HGET', key, lease_field(period))
  if not stored then
    return nil
  end
  local w, reserved, ends, kept, since =
    string.match(stored, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
  return tonumber(w), tonumber(reserved), tonumber(ends), tonumber(kept), tonumber(since)
end

local function leases_write(key, period, index, reserved, ends, kept, since)
  redis.call('HSET', key, lease_field(period),
    string.format('%d %d %d %d %d', index, reserved, ends, kept, since))
end

-- Records a lease of period's counter at key granted at now, in window index, reserving
-- `reserved` beyond its call until `ends`.
local function leases_add(key, period, now, index, reserved, ends)
  local w, held, last, kept, since = leases_read(key, period)
  if w ~= index then
    held, last, kept, since = 0, 0, 0, now
  end
  leases_write(key, period, index, held + reserved, math.max(last, ends), kept, since)
end

-- What the give-back of cost by a lease granted at `granted` in window index takes from
-- period's counter at key, taken off the record too: its cost; for a lease granted before the
-- counter's last reset (`before_reset`), what that reset kept, at most its cost, when the
-- record held the lease's reserve then (none otherwise: it went with a reset that kept
-- nothing of its window).
local function leases_give_back(key, period, index, cost, granted, before_reset)
  local w, held, last, kept, since = leases_read(key, period)
  if w ~= index or granted < since then
    if before_reset then
      return 0
    end
    return cost
  end
  local taken = cost
  if before_reset then
    taken = math.min(cost, kept)
    kept = kept - taken
  end
  leases_write(key, period, w, math.max(held - taken, 0), last, kept, since)
  return taken
end

-- Admits a call of cost (above 0) at now into the counter of period at key, seen as
-- counter_window saw it: into cur, or into prev for a time before the key's window; keeps
-- it, and returns the counts with the call.
local function counter_admit(key, period, now, cost, index, prev, cur, ahead, born, first)
  if ahead > 0 then
    prev = prev + cost
  else
    cur = cur + cost
  end
  counter_store(key, index, prev, cur, born, period, now, first)
  return prev, cur
end

