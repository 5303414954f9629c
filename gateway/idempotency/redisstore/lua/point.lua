-- point: add a record's name to its scope's pointer set (Redis Cluster:
-- how Get and Delete, which know only the scope, find a record that lives
-- under its session's hash tag).
--
-- The set lives at least ttl ms, never shorter than it already does: it may
-- name a longer-lived record. Returns 1.
local set = KEYS[1]               -- the scope's pointer set
local record = ARGV[1]            -- the record's key name
local ttl_ms = tonumber(ARGV[2])  -- how long the record lives

redis.call('SADD', set, record)
if redis.call('PTTL', set) < ttl_ms then redis.call('PEXPIRE', set, ttl_ms) end
return 1
