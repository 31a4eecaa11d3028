-- redis-buckets, rebalancing step 2 of 2, on the RECEIVING bucket: adds a transfer's units to
-- its stock exactly once. The transfer id joins the bucket's received set in the same step, so
-- the buyer that lent and the repair (which completes transfers whose buyer died between the two
-- steps) may both deliver it: only the first adds the units. The donor's record is deleted
-- afterwards (HDEL); the received set keeps the id until the sale is warmed again, so a repair
-- that read the record before that deletion still finds it delivered.
--
-- KEYS[1] stock   KEYS[2] received (set of transfer ids)
-- ARGV[1] transfer id   ARGV[2] units
-- Returns 1 delivered now; 0 delivered before; -1 the bucket is not warmed (nothing moved).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
return 1
