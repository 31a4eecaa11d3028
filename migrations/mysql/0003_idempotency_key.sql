-- Idempotency-Key: the key of the request that bought an order, stored with it. A retry with
-- the same key finds this order and gets it back (never a second one); the oracle sorts every
-- order by it (acknowledged, indeterminate-and-committed, phantom). Unique per item: two
-- requests with one key racing past the shop's look-up cannot both commit. NULL (no key) is
-- allowed any number of times. Keys are printable ASCII, compared byte for byte (a
-- case-insensitive collation would make `abc` a retry of `ABC`).
ALTER TABLE orders
    ADD COLUMN idempotency_key VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
    ADD UNIQUE INDEX orders_item_idempotency (item_id, idempotency_key);
