-- Reconciliation: what Redis stock should be, from the database (the source of truth).
-- The database snapshot carries its low-water mark (every stream entry at or below it is
-- applied) and the ids it applied above the mark (batches of several consumers commit out of
-- stream order). Every entry after the mark that is neither applied nor dead-lettered is still
-- in flight: an 'order' already took its units in Redis but not yet in the database, a
-- 'cancel'/'expire' already gave them back in Redis but not yet in the database. So
--   expected = db stock - in-flight orders + in-flight releases
-- computed atomically here against the live stream, so no concurrent purchase can slip between
-- the read and the correction. A replica's lag only lengthens the in-flight tail. The tail is
-- bounded by the unapplied backlog: applied entries below the mark are trimmed.
--
-- Consumers also apply an order's entries out of order: when its 'pay', 'cancel' or 'expire'
-- reaches the database first, it inserts the order row in its final state (a paid one took its
-- units, a released one never did), and the late 'order' entry inserts nothing. So an 'order'
-- entry whose follow-up the snapshot already applied is not in flight either: counting it
-- would 'correct' Redis by units the database will never take.
--
-- Dead letters: a dead-lettered 'order' already gave its units back (deadletter.lua), and the
-- database never took them: not in flight. A 'cancel'/'expire' of a dead-lettered order gave
-- back units the database never took either: not in flight.
--
-- The correction is deferred (the residual reported, not applied) when an entry at or below
-- the mark is still pending (the database counts it as applied although it is not), or when
-- the stream was trimmed past the mark (the snapshot is older than the trim: its tail is gone).
--
-- KEYS[1] stock  KEYS[2] events  KEYS[3] orders  KEYS[4] dead ids  KEYS[5] trimmed
-- ARGV[1] db stock  ARGV[2] low-water mark  ARGV[3] '1' = correct  ARGV[4] consumer group
-- ARGV[5..] ids applied above the mark
-- Returns {redis stock, expected, residual, deferred, in-flight entries} or {-1, 0, 0, 0, 0}
-- when not warmed.
local current = tonumber(redis.call('GET', KEYS[1]))
if not current then
  return {-1, 0, 0, 0, 0}
end
local function id(s)
  local ms, seq = string.match(s or '', '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end
local mark_ms, mark_seq = id(ARGV[2])
local applied = {}
for i = 5, #ARGV do applied[ARGV[i]] = true end
local dead = {}
for _, d in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], mark_ms, '+inf')) do dead[d] = true end
local expected = tonumber(ARGV[1])
local inflight = 0
local function fields(e)
  local f = event_fields(e[2])
  return f['type'], tonumber(f['qty']) or 0, f['order']
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+')
-- Orders whose row the database already holds through an applied follow-up.
local settled = {}
for _, e in ipairs(entries) do
  if applied[e[1]] then
    local t, _, o = fields(e)
    if o and (t == 'pay' or t == 'cancel' or t == 'expire') then settled[o] = true end
  end
end
for _, e in ipairs(entries) do
  if not applied[e[1]] and not dead[e[1]] then
    local t, q, o = fields(e)
    if t == 'order' then
      if not (o and settled[o]) then
        expected = expected - q
        inflight = inflight + 1
      end
    elseif t == 'cancel' or t == 'expire' then
      local raw = o and redis.call('HGET', KEYS[3], o)
      if not (raw and cjson.decode(raw).s == 'dead_lettered') then
        expected = expected + q
        inflight = inflight + 1
      end
    end
  end
end
local residual = current - expected
local deferred = 0
local pending = redis.pcall('XPENDING', KEYS[2], ARGV[4], '-', ARGV[2], 1)
if type(pending) == 'table' and #pending > 0 then
  deferred = 1
end
local trimmed = redis.call('GET', KEYS[5])
if trimmed then
  local tms, tseq = id(trimmed)
  if tms > mark_ms or (tms == mark_ms and tseq > mark_seq) then
    deferred = 1
  end
end
if ARGV[3] == '1' and residual ~= 0 and deferred == 0 then
  redis.call('INCRBY', KEYS[1], -residual)
end
return {current, expected, residual, deferred, inflight}
