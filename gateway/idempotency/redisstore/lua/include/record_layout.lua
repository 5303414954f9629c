-- The record's layout (claim.lua describes every field): HEAD, the fields
-- every record starts with; PROGRESS, what an IN_PROGRESS record holds
-- after them (owner, lease end, replay ms).
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'
local PROGRESS = '>Bc0I8I8'
