-- Forgets a key: deletes its sorted set, every admission of every rate that shares it, and
-- its sliding window counter's hash.
--
-- KEYS     the key's sorted set, and its counter's hash when both are on this node (one slot
--          in a cluster; else one call each).
--
-- Returns {deleted (how many of the keys existed)}. A script rather than a bare DEL so that
-- it takes the one path every call takes (EVALSHA, resent once on a closed connection: DEL is
-- idempotent).

return {redis.call('DEL', unpack(KEYS))}
