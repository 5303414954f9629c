-- The previous layout's delete script (records written before the upgrade
-- are hashes under r:{tag}:tool:key). Remove with the compat path.
--
-- delete: remove a record (admin) if it holds the given scope, and free
-- its step.
--
-- KEYS[1] record
-- ARGV    tenant, tool, key
--
-- Returns 1, or 0 if there is no such record. Fields: see claim.lua.
local rec = KEYS[1]
local tenant, tool, key = ARGV[1], ARGV[2], ARGV[3]

local f = redis.call('HMGET', rec, 'tenant', 'tool', 'key', 'step')
local rec_tenant, rec_tool, rec_key, rec_step = f[1], f[2], f[3], f[4]
if rec_tenant ~= tenant or rec_tool ~= tool or rec_key ~= key then return 0 end
redis.call('DEL', rec)
if rec_step and rec_step ~= '' and redis.call('GET', rec_step) == rec then redis.call('DEL', rec_step) end
return 1
