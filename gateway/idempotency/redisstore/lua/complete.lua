-- complete: store the tool's response as COMPLETED, if the caller still
-- owns the record (an expired lease nobody took over included).
--
-- Returns 1, or 0 if the lease is lost. With receipts on, the same step
-- records the execution's receipt as pending in the outbox. One GET, one SET (the record is
-- rewritten whole: header kept, IN_PROGRESS tail replaced by the
-- response), one PEXPIRE of the step it holds; no clock needed. With
-- keep_args, the same step copies the record's canonical arguments (the
-- IN_PROGRESS tail) to their own key beside it, which lives exactly as
-- long as the COMPLETED record: the record's layout stays as it is.
-- Layout: see claim.lua.
local rec = KEYS[1]               -- the record
local outbox = KEYS[2]            -- receipts on: the receipt outbox (hash: execution id -> entry), see outbox.go
local kept = KEYS[3]              -- keep_args: the record's kept arguments (record created I8, then the arguments), see keptargs.go
local owner = ARGV[1]             -- owner token (packed)
local fence = ARGV[2]             -- fencing token (decimal)
local replay_ms = ARGV[3]         -- how long the response is kept
local status = tonumber(ARGV[4])  -- the response's status
local ctype = ARGV[5]             -- its content type (packed)
local body = ARGV[6]              -- its body
local step_head = ARGV[7]         -- what every step key name starts with: <prefix>S{
local tenant = ARGV[8]            -- the record's tenant (its step key's tag hashes it)
local outbox_exec = ARGV[9]       -- receipts on: the execution id of the outbox entry; "" otherwise
local outbox_entry = ARGV[10]     -- its outbox entry (JSON)
local keep_args = ARGV[11] == '1' -- keep the canonical arguments for the record's life (Lease.KeepArguments)
--#include record_layout
local DONE = '>HHc0'
local KEPT = '>I8'
--#include held_step

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 80 then return 0 end -- 80: 'P'
local _, _, _, rfence, rcreated, rindex, rheld, rsession, _, _, p = struct.unpack(HEAD, v)
local rowner, _, _, a = struct.unpack(PROGRESS, v, p)
if rowner ~= owner or string.format('%d', rfence) ~= fence then return 0 end
if keep_args and a <= #v then redis.call('SET', kept, struct.pack(KEPT, rcreated) .. string.sub(v, a), 'PX', replay_ms) end
redis.call('SET', rec, 'C' .. string.sub(v, 2, p - 1) .. struct.pack(DONE, status, #ctype, ctype) .. body, 'PX', replay_ms)
if rheld == 1 then redis.call('PEXPIRE', held_step(rsession, rindex), replay_ms) end
if outbox_exec ~= '' then redis.call('HSET', outbox, outbox_exec, outbox_entry) end
return 1
