-- Renews the slots a process holds: concurrency limits' admissions whose calls still run. A
-- concurrency limit is a sliding window log over its slot time (sliding_window_limits.lua
-- admits and records a call's slot as member <admission>.1, refund.lua releases it); a slot
-- counts until its score, the time it was last renewed, leaves the window. Its holder renews
-- it every third of the slot time, all of a process's slots on one node (one cluster slot)
-- in one call of this script.
--
-- KEYS[i]      slot i's sorted set (all on this node; in one slot in a cluster).
-- ARGV[1]      now, integer microseconds since the Unix epoch; empty: this server's TIME.
-- ARGV[2i]     slot i's member.
-- ARGV[2i+1]   slot i's slot time, integer microseconds (1,000,000 ..= 86,400,000,000).
--
-- Returns, for each slot, 1 when it is still held (and now renewed), 0 when it is not: its
-- member is gone (released, reset, lost in a failover) or has left the window (not renewed
-- for a slot time: another call may hold its place already). A renewal never adds a member,
-- and never revives one that left the window: it removes it, as a check would have. A score
-- never goes back (a renewal resent or at an earlier explicit time keeps the later score).
-- The key's TTL is made to last at least the slot time past now, plus 1 ms (PEXPIRE GT, as
-- in sliding_window_limits.lua; PTTL decides on a server older than Redis 7).
--
-- Each slot costs ZSCORE, then ZADD XX and PEXPIRE when held (ZREM when it left the window);
-- TIME once.

local score = ARGV[1]
local now = tonumber(score)
if score == '' then
  local time = redis.call('TIME')
  local micros = tostring(time[2])
  score = time[1] .. string.sub('00000', #micros) .. micros
  now = tonumber(time[1]) * 1000000 + tonumber(micros)
end

local reply = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local member = ARGV[2 * i]
  local slot_time = tonumber(ARGV[2 * i + 1])
  local held = redis.call('ZSCORE', key, member)
  reply[i] = 0
  if held then
    local last = tonumber(held)
    if last <= now - slot_time then
      redis.call('ZREM', key, member)
    else
      if last < now then
        redis.call('ZADD', key, 'XX', score, member)
      end
      local ttl = math.ceil((math.max(last, now) + slot_time - now) / 1000) + 1
      local extended = redis.pcall('PEXPIRE', key, ttl, 'GT')
      if type(extended) == 'table' then
        if redis.call('PTTL', key) < ttl then
          redis.call('PEXPIRE', key, ttl)
        end
      elseif extended == 0 and redis.call('PTTL', key) == -1 then
        redis.call('PEXPIRE', key, ttl)
      end
      reply[i] = 1
    end
  end
end
return reply
