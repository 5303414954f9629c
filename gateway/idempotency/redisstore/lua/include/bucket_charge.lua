-- bucket_sum is what counts in the bucket key against its limit: the
-- running total (field "=") of a calendar bucket (since < 0), else the
-- entries at or after since (µs) of a rolling one. An entry is the field
-- <record key>|<created µs> with the value "<cost>:<at µs>".
local function bucket_sum(key, since)
  if since < 0 then return tonumber(redis.call('HGET', key, '=') or '0') end
  local sum = 0
  local all = redis.call('HGETALL', key)
  for j = 1, #all, 2 do
    local ecost, eat = string.match(all[j + 1], '^(%d+):(%d+)$')
    if all[j] ~= '=' and tonumber(eat) >= since then sum = sum + tonumber(ecost) end
  end
  return sum
end

-- bucket_add writes the entry field of cost at µs into the bucket key,
-- keeping it (and its running total) retain ms at least; a rolling
-- bucket drops entries of windows long past as it is written (a calendar
-- bucket expires whole).
local function bucket_add(key, field, cost, at, since, retain)
  if since >= 0 then
    local all = redis.call('HGETALL', key)
    for j = 1, #all, 2 do
      local eat = tonumber(string.match(all[j + 1], ':(%d+)$'))
      if eat and eat < since - retain * 1000 then redis.call('HDEL', key, all[j]) end
    end
  end
  redis.call('HSET', key, field, string.format('%d:%d', cost, at))
  redis.call('HINCRBY', key, '=', cost)
  if redis.call('PTTL', key) < retain then redis.call('PEXPIRE', key, retain) end
end
