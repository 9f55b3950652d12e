-- A change of the shared limits (the registry in Redis: store/redis/registry.rs), atomic:
-- each field written or removed, and each one that changed named in the change log, which
-- readers follow (registry_read.lua).
--
-- KEYS[1]  the entries: a hash, field -> value.
-- KEYS[2]  the change log: a stream, `field <field> write <id>` per change, trimmed to about
--          ARGV[1] entries (a reader further behind reads every entry again).
-- KEYS[3]  this write's mark, `{registry}write:<id>`: set for ten minutes once it ran, so that
--          the same write sent again (a reply lost to a dropped connection) runs once (and
--          renews the mark: a write, so that a `WAIT` behind it covers the first run's).
-- ARGV[1]  the log's length to keep.
-- ARGV[2]  a glob of the fields to remove first (a scope's whole entry); '' for none. A field
--          it matches that a later `s` gives is written, not removed.
-- ARGV[3]  the write's id.
-- ARGV[4], ARGV[5], ARGV[6], ...  (op, field, value) triples: `s` sets the field to the value,
--          `d` removes it, `c` removes it only while its value's `until=<n><unit>` lies more
--          than a second before this server's clock (an override a reader saw expired, unless
--          written again since with a later expiry; whatever the reader's clock said).
--
-- Replies {changed}: how many fields changed (0 as well for a write that ran already). A field
-- given its value again changes nothing and is not logged.

if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('PEXPIRE', KEYS[3], 600000)
  return {0}
end

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local UNITS = {us = 1, ms = 1000, s = 1000000}

-- Whether an override's value expired more than a second ago, by this server's clock.
local function expired(value)
  if not value then
    return false
  end
  local count, unit = string.match(value, 'until=(%d+)(%a+)')
  local size = UNITS[unit or '']
  return count ~= nil and size ~= nil and tonumber(count) * size + 1000000 < now
end

local changed = 0
local function record(field)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'field', field, 'write', ARGV[3])
  changed = changed + 1
end

local given = {}
for i = 4, #ARGV - 2, 3 do
  if ARGV[i] == 's' then
    given[ARGV[i + 1]] = true
  end
end

if ARGV[2] ~= '' then
  local gone = {}
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', ARGV[2], 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2] - 1, 2 do
      local field = page[2][i]
      if not given[field] then
        gone[field] = true
      end
    end
  until cursor == '0'
  for field in pairs(gone) do
    if redis.call('HDEL', KEYS[1], field) == 1 then
      record(field)
    end
  end
end

for i = 4, #ARGV - 2, 3 do
  local op, field, value = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local held = redis.call('HGET', KEYS[1], field)
  if op == 's' then
    if held ~= value then
      redis.call('HSET', KEYS[1], field, value)
      record(field)
    end
  elseif op == 'd' or (op == 'c' and expired(held)) then
    if redis.call('HDEL', KEYS[1], field) == 1 then
      record(field)
    end
  end
end
redis.call('SET', KEYS[3], '1', 'PX', 600000)
return {changed}
