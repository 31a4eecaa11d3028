-- Reconciliation: what Redis stock should be, from the database (the source of truth).
-- The database snapshot carries the last stream entry it has applied; every entry after it is
-- still in flight: an 'order' already took its units in Redis but not yet in the database, a
-- 'cancel'/'expire' already gave them back in Redis but not yet in the database. So
--   expected = db stock - in-flight orders + in-flight releases
-- computed atomically here against the live stream, so no concurrent purchase can slip between
-- the read and the correction. A replica's lag only lengthens the in-flight tail.
--
-- If an entry at or below the applied mark is still pending (delivered to a consumer that died
-- before persisting it), the database is missing it although the mark says otherwise: the
-- residual is reported but not corrected until that entry has been claimed and persisted.
--
-- KEYS[1] stock  KEYS[2] events   ARGV[1] db stock  ARGV[2] last applied id  ARGV[3] '1' = correct
-- ARGV[4] consumer group
-- Returns {redis stock, expected, residual, deferred} or {-1, 0, 0, 0} when not warmed.
local current = tonumber(redis.call('GET', KEYS[1]))
if not current then
  return {-1, 0, 0, 0}
end
local expected = tonumber(ARGV[1])
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[2], '+')
for _, e in ipairs(entries) do
  local f = e[2]
  local t, q = nil, 0
  for i = 1, #f, 2 do
    if f[i] == 'type' then t = f[i + 1] elseif f[i] == 'qty' then q = tonumber(f[i + 1]) end
  end
  if t == 'order' then
    expected = expected - q
  elseif t == 'cancel' or t == 'expire' then
    expected = expected + q
  end
end
local residual = current - expected
local deferred = 0
local pending = redis.pcall('XPENDING', KEYS[2], ARGV[4], '-', ARGV[2], 1)
if type(pending) == 'table' and #pending > 0 then
  deferred = 1
end
if ARGV[3] == '1' and residual ~= 0 and deferred == 0 then
  redis.call('INCRBY', KEYS[1], -residual)
end
return {current, expected, residual, deferred}
