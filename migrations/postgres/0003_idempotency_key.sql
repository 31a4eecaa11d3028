-- Idempotency-Key: the key of the request that bought an order, stored with it. A retry with
-- the same key finds this order and gets it back (never a second one); the oracle sorts every
-- order by it (acknowledged, indeterminate-and-committed, phantom). Unique per item: two
-- requests with one key racing past the shop's look-up cannot both commit. NULL (no key) is
-- allowed any number of times.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS idempotency_key VARCHAR(128);
CREATE UNIQUE INDEX IF NOT EXISTS orders_item_idempotency ON orders (item_id, idempotency_key);
