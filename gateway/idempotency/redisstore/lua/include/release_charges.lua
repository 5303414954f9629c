-- release_charges drops the budget reservations of the record rec created
-- at created (µs), listed in its charged hash: its call did not act, or an
-- operator deleted it (docs/budgets.md). On Redis Cluster (split set) the
-- buckets are in other slots: it only deletes the charged hash and
-- returns the buckets, whose entries the caller then drops
-- (budget_unreserve.lua); elsewhere it returns nothing.
local function release_charges(charged, created, split)
  local life = string.format('%d', created)
  local field = rec .. '|' .. life
  local all = redis.call('HGETALL', charged)
  local buckets = {}
  for j = 1, #all, 2 do
    local v = all[j + 1]
    if v == life or string.sub(v, 1, #life + 1) == life .. '\31' then
      if split then
        buckets[#buckets + 1] = all[j]
      else
        local e = redis.call('HGET', all[j], field)
        if e then
          redis.call('HDEL', all[j], field)
          redis.call('HINCRBY', all[j], '=', -tonumber(string.match(e, '^(%d+):')))
        end
      end
    end
  end
  redis.call('DEL', charged)
  return buckets
end
