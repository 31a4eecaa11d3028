-- redis-buckets, rebalancing step 1 of 2, on the DONOR bucket: moves units out of its stock and
-- records the transfer, atomically, so a unit is always either in a bucket's stock or in exactly
-- one transfer record (never lost, never in two places).
-- All keys share the donor bucket's hash tag (one slot).
--
-- KEYS[1] donor stock   KEYS[2] donor transfers (hash: transfer id -> "<to bucket>:<units>")
-- ARGV[1] transfer id   ARGV[2] receiving bucket   ARGV[3] units the buyer wants
--
-- Lends max(ceil(stock / 2), min(stock, wanted)): at least what the buyer needs when the donor
-- has it, and half of a large stock, so stock flows to where buyers are without ping-pong.
-- Returns the units lent (0: the donor has none), or -1 when the bucket is not warmed.
local stock = tonumber(redis.call('GET', KEYS[1]))
if not stock then
  return -1
end
if stock <= 0 then
  return 0
end
local want = tonumber(ARGV[3])
local n = math.max(math.ceil(stock / 2), math.min(stock, want))
redis.call('DECRBY', KEYS[1], n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. n)
return n
