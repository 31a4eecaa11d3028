-- Atomic pre-deduct: purchase limits, stock check, decrement and the order event in ONE step.
-- Nothing can separate "deducted" from "enqueued": the XADD happens inside the same script.
-- All keys share the item's hash tag, so the script is valid on Redis Cluster.
--
-- KEYS[1] stock   KEYS[2] meta (hash: limit, initial)   KEYS[3] holders (user -> units)
-- KEYS[4] devices (device -> units)   KEYS[5] ips (ip -> units)   KEYS[6] orders (id -> json)
-- KEYS[7] expiry (zset id -> due ms)  KEYS[8] events (stream)
-- KEYS[9] idempotency (hash: Idempotency-Key -> order id)
-- ARGV[1] qty  ARGV[2] user  ARGV[3] device ('' = none)  ARGV[4] order id
-- ARGV[5] payment timeout ms  ARGV[6] client ip ('' = none)  ARGV[7] per-ip unit cap (0 = off)
-- ARGV[8] Idempotency-Key ('' or absent = none)
-- The clock is Redis's own (TIME, read inside the script), so event times follow the order in
-- which scripts really ran, whatever order the callers read their clocks in.
--
-- A key that bought an order before is answered with that order (code -5) before any check:
-- a retry never buys twice, and nothing moves. Only a reservation binds a key, in the same step.
--
-- Returns {code, n}: code >= 0 reserved (n = stock left); -1 sold out (n = stock);
-- -2 duplicate user/device (n = units held); -3 not warmed; -4 ip cap reached (n = units held);
-- -5 the key already bought an order (its id is in KEYS[9]).
local qty = tonumber(ARGV[1])
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit'))
local stock = tonumber(redis.call('GET', KEYS[1]))
if not limit or not stock then
  return {-3, 0}
end
local key = ARGV[8] or ''
if key ~= '' and redis.call('HEXISTS', KEYS[9], key) == 1 then
  return {-5, 0}
end
local held = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
if held + qty > limit then
  return {-2, held}
end
if ARGV[3] ~= '' then
  local dheld = tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0')
  if dheld + qty > limit then
    return {-2, dheld}
  end
end
local ipcap = tonumber(ARGV[7])
if ipcap > 0 and ARGV[6] ~= '' then
  local iheld = tonumber(redis.call('HGET', KEYS[5], ARGV[6]) or '0')
  if iheld + qty > ipcap then
    return {-4, iheld}
  end
end
if stock < qty then
  return {-1, stock}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[3], ARGV[2], qty)
if ARGV[3] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[3], qty) end
if ARGV[6] ~= '' then redis.call('HINCRBY', KEYS[5], ARGV[6], qty) end
redis.call('HSET', KEYS[6], ARGV[4], cjson.encode({s = 'pending_payment', q = qty,
  u = ARGV[2], d = ARGV[3], i = ARGV[6]}))
redis.call('ZADD', KEYS[7], now + tonumber(ARGV[5]), ARGV[4])
if key ~= '' then redis.call('HSET', KEYS[9], key, ARGV[4]) end
redis.call('XADD', KEYS[8], '*', 'event',
  event('order', ARGV[4], ARGV[2], ARGV[3], qty, now, key))
return {stock - qty, 0}
