-- compact: replace a full segment of a chain's stored lines by its
-- compact form (see segment.go, docs/receipts.md), only if the lines are
-- still the ones the compact form was made from, and a receipt after
-- them stays a line (the head's receipt, which append.lua reads).
--
-- The keys share the tenant's hash tag: one slot on Redis Cluster.
local log = KEYS[1]       -- sorted set: score = seq, member = the receipt's JSON line
local segments = KEYS[2]  -- sorted set: score = segment number, member = its compact form
local lo = ARGV[1]        -- the segment's first seq
local hi = ARGV[2]        -- its last seq
local digest = ARGV[3]    -- SHA-1 (hex) of its lines joined by "\n", as read
local number = ARGV[4]    -- the segment's number
local blob = ARGV[5]      -- its compact form
--
-- Returns 1 when compacted, 0 when the lines changed meanwhile (nothing
-- written).
local lines = redis.call('ZRANGEBYSCORE', log, lo, hi)
if #lines ~= tonumber(hi) - tonumber(lo) + 1 or redis.sha1hex(table.concat(lines, '\n')) ~= digest then
  return 0
end
if redis.call('ZCOUNT', log, '(' .. hi, '+inf') == 0 or redis.call('ZCOUNT', segments, number, number) > 0 then
  return 0
end
redis.call('ZADD', segments, number, blob)
redis.call('ZREMRANGEBYSCORE', log, lo, hi)
return 1
