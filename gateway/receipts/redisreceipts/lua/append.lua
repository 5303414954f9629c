-- append: compare-and-append a run of sealed receipts (one or more, in
-- seq order) to a tenant's chain (see docs/receipts.md). Sealing (SHA-256
-- of the JCS) is done in Go: Redis scripting has no SHA-256. The script
-- only appends if the chain's head is still the one the run was sealed
-- after; then all of the run is written, its last receipt the new head.
--
-- Both keys share the tenant's hash tag, so they live in one Redis
-- Cluster slot and the script is atomic there too.
local head = KEYS[1]          -- hash {seq, hash}: the chain's head; never expires
local log = KEYS[2]           -- sorted set: score = seq, member = the receipt's JSON line
local expected_seq = ARGV[1]  -- head seq the run was sealed after ("0": empty chain)
local expected_hash = ARGV[2] -- head hash the run was sealed after ("" for seq 0)
local last_hash = ARGV[3]     -- the run's last receipt's hash: the new head's
-- ARGV[4], ARGV[5], ...: the run, as pairs: a receipt's seq (decimal), its JSON line
--
-- Returns {1} when appended, {0, current seq, current hash} when the head
-- moved (nothing written).
local cur = redis.call('HMGET', head, 'seq', 'hash')
local cur_seq = cur[1] or '0'
local cur_hash = cur[2] or ''
if cur_seq ~= expected_seq or cur_hash ~= expected_hash then
  return {0, cur_seq, cur_hash}
end
redis.call('ZADD', log, unpack(ARGV, 4))
redis.call('HSET', head, 'seq', ARGV[#ARGV - 1], 'hash', last_hash)
return {1}
