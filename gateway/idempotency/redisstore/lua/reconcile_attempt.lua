-- reconcile_attempt: append one attempt to the record's reconciliation, if
-- the record is still UNKNOWN under the fencing token and the reconciler
-- still holds its reconcile lease (see reconcile_claim.lua).
--
-- Returns the new state (JSON), or 0 if the lease is lost.
local rec = KEYS[1]        -- the record
local rq = KEYS[2]         -- its reconciliation
local owner = ARGV[1]      -- the reconciler
local fence = ARGV[2]      -- the record's fencing token (decimal)
local at_ms = ARGV[3]      -- when the answer came (ms)
local outcome = ARGV[4]    -- the answer's kind
local detail = ARGV[5]     -- a few words
local keep = ARGV[6]       -- how many attempts are kept
local HEAD = '>c1Bc0Bc0I8I8Bc0BHc0Hc0Hc0'

local v = redis.call('GET', rec)
if not v or string.byte(v, 1) ~= 85 then return 0 end -- 85: 'U'
local _, _, _, rfence = struct.unpack(HEAD, v)
if string.format('%d', rfence) ~= fence then return 0 end
local raw = redis.call('GET', rq)
if not raw then return 0 end
local st = cjson.decode(raw)
if st.f ~= fence or st.o ~= owner then return 0 end
st.n = st.n + 1
local a = st.a or {}
table.insert(a, {t = tonumber(at_ms), o = outcome, d = detail})
while #a > tonumber(keep) do table.remove(a, 1) end
st.a = a
local encoded = cjson.encode(st)
redis.call('SET', rq, encoded, 'PX', redis.call('PTTL', rec))
return encoded
