-- Trimming: drops stream entries below the database's low-water mark (all applied), records
-- the trim point (never lowering it), and forgets dead-lettered ids below it. Never called with
-- a mark higher than one the database has committed. `MINID ~` removes whole nodes only, and at
-- most 100 of them a call (10 000 entries by default), so one call never blocks Redis for long;
-- the caller repeats while entries are removed.
--
-- KEYS[1] events  KEYS[2] trimmed (string)  KEYS[3] dead ids (zset)
-- ARGV[1] mark (ms-seq)
-- Returns the number of entries removed.
local function id(s)
  local ms, seq = string.match(s or '', '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end
local ms, seq = id(ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local n = redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[1])
local cur = redis.call('GET', KEYS[2])
local cms, cseq = id(cur)
if (not cur) or ms > cms or (ms == cms and seq > cseq) then
  redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms)
return n
