-- Payment: pending_payment -> paid, removes the order from the expiry queue, enqueues the event.
-- KEYS[1] orders  KEYS[2] expiry  KEYS[3] events   ARGV[1] order id  (the clock is Redis's TIME)
-- Returns 1 paid now; 0 already paid; -1 cancelled/expired (refused); -2 unknown order.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return -2
end
local o = cjson.decode(raw)
if o.s == 'paid' then
  return 0
end
if o.s ~= 'pending_payment' then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
o.s = 'paid'
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(o))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], '*', 'event', event('pay', ARGV[1], o.u, o.d, o.q, now, ''))
return 1
