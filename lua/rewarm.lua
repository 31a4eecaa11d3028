-- Rewarm: rebuilds a sale in Redis from the database after Redis lost it (a restart without
-- persistence, a failover to an empty replica, a FLUSHALL, an eviction), in ONE atomic step, so
-- a purchase sees either no sale (and is answered 503 not_warmed) or the whole rebuilt one.
-- The database is only read (by the caller): its orders are the truth this script loads.
--
-- What is rebuilt: stock (= the database's), the meta hash, units held per user and per device,
-- every order (state machine JSON, as deduct.lua writes it), the delayed queue of pending orders
-- (due = created + payment timeout), the restock idempotency set (cancelled and expired
-- orders), and the Idempotency-Keys that bought orders (a retry still gets its order). The database does not record a buyer's IP, so units held per IP start again at 0.
--
-- The stream: if it is gone, it is recreated with the persistence group, and its last id is set
-- (XSETID) to the later of the database's applied mark and Redis's clock, so every new entry
-- sorts after the mark and reconciliation's "entries after the mark are in flight" stays true
-- without touching the database. If it survived, entries after the mark have not reached the
-- database yet: nothing is rebuilt (code -1) until the consumer has persisted them.
--
-- KEYS[1] stock  KEYS[2] meta  KEYS[3] holders  KEYS[4] devices  KEYS[5] ips  KEYS[6] orders
-- KEYS[7] expiry  KEYS[8] events (stream)  KEYS[9] restocked  KEYS[10..12] (unused here: dead
-- letters, dead ids, trim point)  KEYS[13] idempotency (key -> order id)
-- ARGV[1] db stock  ARGV[2] purchase limit  ARGV[3] initial stock  ARGV[4] name
-- ARGV[5] price cents  ARGV[6] the database's applied mark  ARGV[7] payment timeout ms
-- ARGV[8] consumer group
-- ARGV[9..] the orders, seven values each: id, status, qty, user, device ('' = none),
-- created ms, Idempotency-Key ('' = none)
--
-- Returns {code, n}: 1 rebuilt (n = orders loaded); 0 nothing was missing; 2 only the stream
-- was missing (recreated, the rest kept); -1 the stream holds entries the database has not
-- applied yet (nothing changed).
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end

local function later(a, b)
  local ams, aseq = id_parts(a)
  local bms, bseq = id_parts(b)
  if ams > bms or (ams == bms and aseq >= bseq) then return a end
  return b
end

local warm = redis.call('EXISTS', KEYS[1], KEYS[2]) == 2
local stream = redis.call('EXISTS', KEYS[8]) == 1
if warm and stream then
  return {0, 0}
end
if stream then
  local tail = redis.call('XRANGE', KEYS[8], '(' .. ARGV[6], '+', 'COUNT', 1)
  if #tail > 0 then
    return {-1, 0}
  end
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('XGROUP', 'CREATE', KEYS[8], ARGV[8], '$', 'MKSTREAM')
  redis.call('XSETID', KEYS[8], later(ARGV[6], string.format('%d-0', now)))
end
if warm then
  return {2, 0}
end

redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[9],
  KEYS[13])
redis.call('HSET', KEYS[2], 'limit', ARGV[2], 'initial', ARGV[3], 'name', ARGV[4],
  'price_cents', ARGV[5])
local timeout = tonumber(ARGV[7])
local n = 0
for i = 9, #ARGV, 7 do
  local id, s, q, u, d = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3], ARGV[i + 4]
  redis.call('HSET', KEYS[6], id, cjson.encode({s = s, q = q, u = u, d = d, i = ''}))
  if ARGV[i + 6] ~= '' then redis.call('HSET', KEYS[13], ARGV[i + 6], id) end
  if s == 'pending_payment' or s == 'paid' then
    redis.call('HINCRBY', KEYS[3], u, q)
    if d ~= '' then redis.call('HINCRBY', KEYS[4], d, q) end
  end
  if s == 'pending_payment' then
    redis.call('ZADD', KEYS[7], tonumber(ARGV[i + 5]) + timeout, id)
  elseif s == 'cancelled' or s == 'expired' then
    redis.call('SADD', KEYS[9], id)
  end
  n = n + 1
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, n}
