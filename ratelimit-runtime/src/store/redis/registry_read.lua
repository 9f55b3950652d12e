-- The shared limits' changes since a reader's last (the registry in Redis: store/redis/registry.rs).
--
-- KEYS[1]  the entries: a hash, field -> value (the fields and values registry/redis.rs
--          writes and reads).
-- KEYS[2]  the change log: a stream whose entries each name one changed field
--          (`field <field>`), written after the field (registry_write.lua, or by hand).
-- ARGV[1]  the id of the last log entry the reader applied; '' for none yet.
-- ARGV[2]  at most how many log entries to read.
--
-- Replies {whole, last, more, field, value, field, value, ...}:
-- - whole 0: the fields changed after ARGV[1], each once, with its value now (false: it was
--   removed); `last` the id of the last log entry read (ARGV[1] when none);
-- - whole 1: every entry; `last` the log's last id ('0-0' for an empty log). Sent when the
--   reader has none yet, or when its last entry is no longer in the log (trimmed after the
--   reader fell behind, or lost in a failover, or the keys were deleted): it replaces what it
--   has by them, never missing a change;
-- - more 1: ARGV[2] log entries were read, and more may follow (read again from `last`).
--
-- A reader that is up to date costs two stream look-ups, O(log n).

local last = ARGV[1]

local function whole()
  local reply = {1, '0-0', 0}
  local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if tail[1] then
    reply[2] = tail[1][1]
  end
  for _, item in ipairs(redis.call('HGETALL', KEYS[1])) do
    reply[#reply + 1] = item
  end
  return reply
end

if last == '' then
  return whole()
end
if last == '0-0' then
  -- The log was empty: it still is, or everything in it is new.
  if redis.call('XLEN', KEYS[2]) == 0 then
    return {0, last, 0}
  end
  return whole()
end
if #redis.call('XRANGE', KEYS[2], last, last) == 0 then
  return whole()
end
-- The entries after `last` (an exclusive range, as Redis 5 writes it: the next sequence).
local ms, seq = string.match(last, '^(%d+)-(%d+)$')
local after = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
local entries = redis.call('XRANGE', KEYS[2], after, '+', 'COUNT', ARGV[2])
local reply = {0, last, 0}
if #entries >= tonumber(ARGV[2]) then
  reply[3] = 1
end
local seen = {}
for _, entry in ipairs(entries) do
  reply[2] = entry[1]
  local items = entry[2]
  for i = 1, #items - 1, 2 do
    local field = items[i + 1]
    if items[i] == 'field' and not seen[field] then
      seen[field] = true
      reply[#reply + 1] = field
      reply[#reply + 1] = redis.call('HGET', KEYS[1], field)
    end
  end
end
return reply
