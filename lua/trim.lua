-- Trimming: drops stream entries below the database's low-water mark (all applied), records
-- the trim point, and forgets dead-lettered ids below it. Never called with a mark higher than
-- one the database has committed. `MINID ~` trims whole nodes only, at most 100 nodes a call,
-- so one call never blocks Redis for long; it may leave a few applied entries behind.
--
-- KEYS[1] events  KEYS[2] trimmed (string)  KEYS[3] dead ids (zset)
-- ARGV[1] mark (ms-seq)
-- Returns the number of entries removed (0 if the stream was trimmed this far before).
local function id(s)
  local ms, seq = string.match(s or '', '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end
local ms, seq = id(ARGV[1])
local cur = redis.call('GET', KEYS[2])
if cur then
  local cms, cseq = id(cur)
  if cms > ms or (cms == ms and cseq >= seq) then
    return 0
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local n = redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. ms)
return n
