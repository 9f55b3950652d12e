-- A change of the shared limits (the registry in Redis: store/redis/registry.rs), atomic: each field
-- written or removed, and each one that changed named in the change log, which readers
-- follow (registry_read.lua).
--
-- KEYS[1]  the entries: a hash, field -> value.
-- KEYS[2]  the change log: a stream, `field <field>` per change, trimmed to about ARGV[1]
--          entries (a reader further behind reads every entry again).
-- ARGV[1]  the log's length to keep.
-- ARGV[2]  a glob of the fields to remove first (a scope's whole entry); '' for none. A field
--          it matches that ARGV gives again is written, not removed.
-- ARGV[3], ARGV[4], ...  field, value pairs; a value '' removes the field.
--
-- Replies {changed}: how many fields changed. A field given its value again changes nothing
-- and is not logged, so a resent change (a lost reply) logs nothing more.

local changed = 0
local function record(field)
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'field', field)
  changed = changed + 1
end

local given = {}
for i = 3, #ARGV - 1, 2 do
  given[ARGV[i]] = ARGV[i + 1]
end

if ARGV[2] ~= '' then
  local gone = {}
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', ARGV[2], 'COUNT', 1000)
    cursor = page[1]
    for i = 1, #page[2] - 1, 2 do
      local field = page[2][i]
      if given[field] == nil then
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

for i = 3, #ARGV - 1, 2 do
  local field, value = ARGV[i], ARGV[i + 1]
  if value == '' then
    if redis.call('HDEL', KEYS[1], field) == 1 then
      record(field)
    end
  elseif redis.call('HGET', KEYS[1], field) ~= value then
    redis.call('HSET', KEYS[1], field, value)
    record(field)
  end
end
return {changed}
