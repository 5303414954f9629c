-- layout: record this gateway's layout version, unless the store already
-- holds it or a newer one (the version only ever grows).
--
-- Returns the version found before (0: none).
local key = KEYS[1]              -- the version key, <prefix>layout
local version = tonumber(ARGV[1]) -- the layout this gateway writes

local found = tonumber(redis.call('GET', key) or '0')
if found < version then redis.call('SET', key, version) end
return found
