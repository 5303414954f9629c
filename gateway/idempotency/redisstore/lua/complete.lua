-- complete: store the tool's response as COMPLETED, if the caller still
-- owns the record.
--
-- KEYS[1] record
-- ARGV    owner (packed), fencing token, replay ms, status, content type, body
--
-- Returns 1, or 0 if the lease is lost. One GET, one SET (the record is
-- rewritten whole: header kept, IN_PROGRESS tail replaced by the
-- response), one PEXPIRE of the step it holds; no clock needed. Layout:
-- see claim.lua.
local rec = KEYS[1]
local owner, fence, replay_ms = ARGV[1], ARGV[2], ARGV[3]
local status, ctype, body = tonumber(ARGV[4]), ARGV[5], ARGV[6]

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, _, rstep, rheld, _, p = struct.unpack('>c1Bc0Bc0I8I8Bc0BHc0', v)
local rowner = struct.unpack('>Bc0', v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
redis.call('SET', rec, 'C' .. string.sub(v, 2, p - 1) .. struct.pack('>HHc0', status, #ctype, ctype) .. body, 'PX', replay_ms)
if rheld == 1 then redis.call('PEXPIRE', rstep, replay_ms) end
return 1
