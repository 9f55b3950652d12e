-- Forgets a key: deletes its sorted set, every admission of every rate that shares it.
--
-- KEYS[1]  the key's sorted set.
--
-- Returns {deleted (1 when the key existed, else 0)}. A script rather than a bare DEL so that
-- it takes the one path every call takes (EVALSHA, resent once on a closed connection: DEL is
-- idempotent).

return {redis.call('DEL', KEYS[1])}
