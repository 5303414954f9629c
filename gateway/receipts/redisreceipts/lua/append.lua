-- append: compare-and-append one sealed receipt to a tenant's chain
-- (see docs/receipts.md). Sealing (SHA-256 of the JCS) is done in Go:
-- Redis scripting has no SHA-256. The script only appends if the chain's
-- head is still the one the receipt was sealed after.
--
-- Both keys share the tenant's hash tag, so they live in one Redis
-- Cluster slot and the script is atomic there too.
local head = KEYS[1]          -- hash {seq, hash}: the chain's head; never expires
local log = KEYS[2]           -- sorted set: score = seq, member = the receipt's JSON line
local expected_seq = ARGV[1]  -- head seq the receipt was sealed after ("0": empty chain)
local expected_hash = ARGV[2] -- head hash the receipt was sealed after ("" for seq 0)
local seq = ARGV[3]           -- the receipt's seq (expected_seq + 1, decimal)
local line = ARGV[4]          -- the receipt's JSON line
local hash = ARGV[5]          -- the receipt's hash
--
-- Returns {1} when appended, {0, current seq, current hash} when the head
-- moved (nothing written).
local cur = redis.call('HMGET', head, 'seq', 'hash')
local cur_seq = cur[1] or '0'
local cur_hash = cur[2] or ''
if cur_seq ~= expected_seq or cur_hash ~= expected_hash then
  return {0, cur_seq, cur_hash}
end
redis.call('ZADD', log, seq, line)
redis.call('HSET', head, 'seq', seq, 'hash', hash)
return {1}
