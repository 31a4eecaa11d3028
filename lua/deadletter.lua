-- Dead-lettering: one stream entry the database refused N times is moved aside, atomically, so
-- the queue moves on. In ONE step:
--   * the entry (all its fields) is appended to the item's dead-letter stream with the
--     database's reason, the attempts, the order's state in Redis at that moment (`was`) and the
--     units this step released;
--   * for an `order` entry whose order has no row in the database (ARGV[6] = '1'), the order is
--     marked `dead_lettered` in the orders hash and, if it still holds units (pending or paid),
--     they go back to stock and to the buyer's, device's and IP's holdings. No order row can
--     exist for it, so the unit is free again; the client's 201 is a lost acknowledged order and
--     the oracle reports it as such. pay.lua and release.lua only move `pending_payment`
--     orders, so a dead-lettered order is never paid nor restocked a second time;
--   * its id is remembered (dead_ids) so reconciliation does not count it as in flight;
--   * the entry is acknowledged.
-- Nothing is done if the entry is no longer pending on this consumer (another one claimed it).
--
-- KEYS[1] stock  KEYS[2] holders  KEYS[3] devices  KEYS[4] ips  KEYS[5] orders  KEYS[6] expiry
-- KEYS[7] events  KEYS[8] dead letters (stream)  KEYS[9] dead ids (zset)
-- ARGV[1] entry id  ARGV[2] group  ARGV[3] consumer  ARGV[4] reason  ARGV[5] attempts
-- ARGV[6] '1' = the database has no row for this entry's order
-- Returns {code, released}: 1 dead-lettered (released units); 0 not pending on this consumer.
local p = redis.call('XPENDING', KEYS[7], ARGV[2], ARGV[1], ARGV[1], 1, ARGV[3])
if #p == 0 then
  return {0, 0}
end
local f = {}
local e = redis.call('XRANGE', KEYS[7], ARGV[1], ARGV[1])
if #e > 0 then f = event_fields(e[1][2]) end
local kind = f['type'] or ''
local order = f['order'] or ''
local released, was = 0, ''
local raw = false
if order ~= '' then raw = redis.call('HGET', KEYS[5], order) end
if raw then
  local o = cjson.decode(raw)
  was = o.s
  if kind == 'order' and ARGV[6] == '1' and o.s ~= 'dead_lettered' then
    if o.s == 'pending_payment' or o.s == 'paid' then
      redis.call('INCRBY', KEYS[1], o.q)
      redis.call('HINCRBY', KEYS[2], o.u, -o.q)
      if o.d ~= '' then redis.call('HINCRBY', KEYS[3], o.d, -o.q) end
      if o.i ~= '' then redis.call('HINCRBY', KEYS[4], o.i, -o.q) end
      released = o.q
    end
    o.s = 'dead_lettered'
    redis.call('HSET', KEYS[5], order, cjson.encode(o))
    redis.call('ZREM', KEYS[6], order)
  end
end
redis.call('XADD', KEYS[8], '*', 'stream_id', ARGV[1], 'type', kind, 'order', order,
  'user', f['user'] or '', 'device', f['device'] or '', 'qty', f['qty'] or '0',
  'at', f['at'] or '0', 'reason', ARGV[4], 'attempts', ARGV[5], 'was', was,
  'released', released)
local ms = string.match(ARGV[1], '^(%d+)-')
redis.call('ZADD', KEYS[9], tonumber(ms) or 0, ARGV[1])
redis.call('XACK', KEYS[7], ARGV[2], ARGV[1])
return {1, released}
