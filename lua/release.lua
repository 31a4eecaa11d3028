-- Restock: cancel or expiry of a pending order puts its units back exactly once.
-- Two guards: the order state machine (only pending_payment moves), and an idempotency key per
-- order (SADD on the restocked set) so a replayed or duplicated message never restocks twice.
--
-- KEYS[1] stock  KEYS[2] holders  KEYS[3] devices  KEYS[4] ips  KEYS[5] orders  KEYS[6] expiry
-- KEYS[7] restocked (set of order ids)  KEYS[8] events (stream)
-- ARGV[1] order id  ARGV[2] 'cancelled' | 'expired'   (the clock is Redis's TIME)
--
-- Returns {code, qty}: 1 released now; 0 already cancelled/expired; -1 paid (refused);
-- -2 unknown order; -3 not due yet (expiry only).
local raw = redis.call('HGET', KEYS[5], ARGV[1])
if not raw then
  return {-2, 0}
end
local o = cjson.decode(raw)
if o.s == 'paid' then
  return {-1, 0}
end
if o.s ~= 'pending_payment' then
  return {0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[2] == 'expired' then
  local due = redis.call('ZSCORE', KEYS[6], ARGV[1])
  if (not due) or tonumber(due) > now then
    return {-3, 0}
  end
end
-- The idempotency key: an order restocked before is never restocked, nor re-announced, again.
if redis.call('SADD', KEYS[7], ARGV[1]) == 0 then
  return {0, 0}
end
o.s = ARGV[2]
redis.call('HSET', KEYS[5], ARGV[1], cjson.encode(o))
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('INCRBY', KEYS[1], o.q)
redis.call('HINCRBY', KEYS[2], o.u, -o.q)
if o.d ~= '' then redis.call('HINCRBY', KEYS[3], o.d, -o.q) end
if o.i ~= '' then redis.call('HINCRBY', KEYS[4], o.i, -o.q) end
local kind = 'cancel'
if ARGV[2] == 'expired' then kind = 'expire' end
redis.call('XADD', KEYS[8], '*', 'event', event(kind, ARGV[1], o.u, o.d, o.q, now, ''))
return {1, o.q}
