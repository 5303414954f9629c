-- effect_keep: make an effect's reservation live as long as its holder, in
-- the pipeline of the holder's Complete or MarkUnknown (see effects.go).
-- A reservation this build writes has no TTL already; one an earlier
-- build of this release wrote carries a TTL that may end before its
-- holder's record, so it is made persistent here. Persisting one that
-- names another record is harmless: a reservation counts only while its
-- holder lives, and the sweep removes it once that holder is gone.
-- Returns 1.
local effect = KEYS[1]            -- the effect's reservation

redis.call('PERSIST', effect)
return 1
