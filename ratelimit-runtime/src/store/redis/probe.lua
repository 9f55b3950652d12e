-- The probe of an open circuit breaker (health.rs): whether this node takes a check now,
-- changing nothing. It writes as a check does, with a command every log check runs (so the
-- ACL users the guide describes may run it), so that it fails where a check would: a replica
-- refuses it (READONLY, a demoted master), a server loading its data or running a long script
-- says so (LOADING, BUSY); script.rs sends WAIT behind it, as behind a check, when the limiter
-- waits for replicas. The range it removes is empty (from 1 to 0), so the key is left as it
-- was, whatever it holds.
--
-- KEYS[1]  a key of the part probed: a log's sorted set, or a counter's hash.
--
-- Returns {1}; any error but the key's type (a counter's hash is no sorted set: the server
-- answered) as the error reply.

local reply = redis.pcall('ZREMRANGEBYSCORE', KEYS[1], 1, 0)
if type(reply) == 'table' and reply.err and string.sub(reply.err, 1, 9) ~= 'WRONGTYPE' then
  return reply
end
return {1}
