-- budget_unreserve: on Redis Cluster, drop a record's entry from a bucket,
-- in the bucket's own slot: the second step of a release after the
-- record's script deleted the record and its charged hash, or the sweep's
-- release of an entry whose record is gone unsettled (docs/budgets.md).
--
-- Returns 1, or 0 when there was no such entry.
local key = KEYS[1]   -- the bucket
local field = ARGV[1] -- the entry: <record key>|<created µs>

local e = redis.call('HGET', key, field)
if not e then return 0 end
redis.call('HDEL', key, field)
redis.call('HINCRBY', key, '=', -tonumber(string.match(e, '^(%d+):')))
return 1
