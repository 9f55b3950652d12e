-- The probe of an open circuit breaker (health.rs): whether this node takes a check now,
-- changing nothing. It writes as a check does, so that it fails as a check would: a replica
-- refuses it (READONLY, a demoted master), a server loading its data or running a long script
-- says so (LOADING, BUSY); script.rs sends WAIT behind it, as behind a check, when the limiter
-- waits for replicas. What it writes removes a member (a hash field, for a counter) that no
-- script ever writes, so the key is left as it was.
--
-- KEYS[1]  a key of the part probed: a log's sorted set, or a counter's hash.
-- ARGV[1]  the member (or field) removed: never an admission's, a lease's or a counter's.
--
-- Returns {1}. A key of any other type (another application's) is not written: its checks fail
-- on their own, and the server answered.

local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then
  redis.call('HDEL', KEYS[1], ARGV[1])
elseif kind == 'zset' or kind == 'none' then
  redis.call('ZREM', KEYS[1], ARGV[1])
end
return {1}
