-- append: compare-and-append a run of sealed receipts (one or more, in
-- seq order) to a tenant's chain (see docs/receipts.md). Sealing (SHA-256
-- of the JCS) is done in Go: Redis scripting has no SHA-256. The script
-- only appends if the chain's head is still the one the run was sealed
-- after, and if none of the run's executions already has its `executed`
-- receipt; then all of the run is written, its last receipt the new head,
-- and its executions are added to the index.
--
-- The three keys share the tenant's hash tag, so they live in one Redis
-- Cluster slot and the script is atomic there too.
local head = KEYS[1]          -- hash {seq, hash}: the chain's head; never expires
local log = KEYS[2]           -- sorted set: score = seq, member = the receipt's JSON line
local executed = KEYS[3]      -- sorted set: score = when appended (ms), kept for an hour (dedupe.go), member = execution id of an executed receipt
local expected_seq = ARGV[1]  -- head seq the run was sealed after ("0": empty chain)
local expected_hash = ARGV[2] -- head hash the run was sealed after ("" for seq 0)
local last_hash = ARGV[3]     -- the run's last receipt's hash: the new head's
local ids = tonumber(ARGV[4]) -- how many execution ids follow
-- ARGV[5] .. ARGV[4 + 2*ids]: pairs: the append's time (ms), execution id
-- then the run, as pairs: a receipt's seq (decimal), its JSON line
--
-- Returns {1} when appended, {0, current seq, current hash, the head
-- receipt's JSON line or ""} when the head moved, {2, id, ...} when executions already have their receipt (nothing
-- written either way).
local cur = redis.call('HMGET', head, 'seq', 'hash')
local cur_seq = cur[1] or '0'
local cur_hash = cur[2] or ''
if not cur[1] then
  -- No head: a new chain, or a head deleted by hand while receipts
  -- remain; then the last receipt is the head, so the chain continues
  -- instead of being written again from seq 1.
  local last = redis.call('ZREVRANGE', log, 0, 0)
  if last[1] then
    local r = cjson.decode(last[1])
    cur_seq = string.format('%d', r.seq)
    cur_hash = r.hash
  end
end
if cur_seq ~= expected_seq or cur_hash ~= expected_hash then
  -- The head's receipt too: the writer dates the next one no earlier.
  local at = redis.call('ZRANGEBYSCORE', log, cur_seq, cur_seq, 'LIMIT', 0, 1)
  return {0, cur_seq, cur_hash, at[1] or ''}
end
local first = 5 + 2 * ids
if ids > 0 then
  local dup = {2}
  for i = 6, first - 1, 2 do
    if redis.call('ZSCORE', executed, ARGV[i]) then dup[#dup + 1] = ARGV[i] end
  end
  if #dup > 1 then return dup end
  redis.call('ZADD', executed, unpack(ARGV, 5, first - 1))
end
redis.call('ZADD', log, unpack(ARGV, first))
redis.call('HSET', head, 'seq', ARGV[#ARGV - 1], 'hash', last_hash)
return {1}
