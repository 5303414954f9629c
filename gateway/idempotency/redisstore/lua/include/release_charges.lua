-- release_charges drops the budget reservations of the record rec created
-- at created (µs), listed in its charged hash: its call did not act, or an
-- operator deleted it (docs/budgets.md).
local function release_charges(charged, created)
  local life = string.format('%d', created)
  local field = rec .. '|' .. life
  local all = redis.call('HGETALL', charged)
  for j = 1, #all, 2 do
    local e = all[j + 1] == life and redis.call('HGET', all[j], field)
    if e then
      redis.call('HDEL', all[j], field)
      redis.call('HINCRBY', all[j], '=', -tonumber(string.match(e, '^(%d+):')))
    end
  end
  redis.call('DEL', charged)
end
