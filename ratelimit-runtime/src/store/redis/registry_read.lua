-- The shared limits' changes since a reader's last (the registry in Redis:
-- store/redis/registry.rs).
--
-- KEYS[1]  the entries: a hash, field -> value (the fields and values registry/redis.rs
--          writes and reads).
-- KEYS[2]  the change log: a stream whose entries each name the changed fields
--          (`field <field>`, with the writer's `write <id>`), written after the fields
--          (registry_write.lua, or by hand).
-- ARGV[1]  the id of the last log entry the reader applied; '' for none yet; '0-0' when the
--          log was empty at its last read.
-- ARGV[2]  at most how many log entries to read.
-- ARGV[3]  the mark of what the reader read last (this script's reply's `mark`).
--
-- Replies {whole, last, more, mark, field, value, field, value, ...}:
-- - whole 0: the fields changed after ARGV[1], each once, with its value now (false: it was
--   removed); `last` the id of the last log entry read (ARGV[1] when none);
-- - whole 1: every entry; `last` the log's last id ('0-0' for an empty log). Sent when the
--   reader has none yet, when its last entry is no longer in the log (trimmed after the
--   reader fell behind, lost in a failover, the keys deleted), or is not the entry it read
--   (a lost entry's id given again to another after a failover: the mark tells them apart),
--   or, while the log is empty, when the entries' count changed (entries written by hand
--   without a log entry, or a restart that forgot them): it replaces what it has by them;
-- - more 1: ARGV[2] log entries were read, and more may follow (read again from `last`);
-- - mark: a digest of the last entry's fields (the writer's id among them), or
--   `len:<count>` of the entries while the log is empty.
--
-- A reader that is up to date costs one stream range read of one entry, O(log n).

local last = ARGV[1]

-- An entry's mark: a digest of its fields and values (text, whatever bytes they hold).
local function mark_of(items)
  return redis.sha1hex(table.concat(items, '\n'))
end

local function whole()
  local reply = {1, '0-0', 0, ''}
  local tail = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if tail[1] then
    reply[2] = tail[1][1]
    reply[4] = mark_of(tail[1][2])
  else
    reply[4] = 'len:' .. redis.call('HLEN', KEYS[1])
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
  -- The log was empty: nothing changed while it still is and the entries' count is the same.
  if redis.call('XLEN', KEYS[2]) == 0
      and 'len:' .. redis.call('HLEN', KEYS[1]) == ARGV[3] then
    return {0, last, 0, ARGV[3]}
  end
  return whole()
end
-- The reader's last entry and those after it (an inclusive range: no arithmetic on ids).
local count = tonumber(ARGV[2])
local entries = redis.call('XRANGE', KEYS[2], last, '+', 'COUNT', count + 1)
if not entries[1] or entries[1][1] ~= last or mark_of(entries[1][2]) ~= ARGV[3] then
  return whole()
end
local reply = {0, last, 0, ARGV[3]}
if #entries > count then
  reply[3] = 1
end
local seen = {}
for i = 2, #entries do
  local entry = entries[i]
  reply[2] = entry[1]
  local items = entry[2]
  reply[4] = mark_of(items)
  for j = 1, #items - 1, 2 do
    local field = items[j + 1]
    if items[j] == 'field' and not seen[field] then
      seen[field] = true
      reply[#reply + 1] = field
      reply[#reply + 1] = redis.call('HGET', KEYS[1], field)
    end
  end
end
return reply
