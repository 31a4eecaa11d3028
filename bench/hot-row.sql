-- pgbench: the FOR UPDATE ceiling on one hot row (no order insert, no HTTP).
--   pgbench -n -c 64 -j 2 -T 15 -M prepared -f bench/hot-row.sql postgres://.../oversell_bench
-- Needs an item with id 1 (set one up through the shop first).
BEGIN;
SELECT stock FROM items WHERE id = 1 FOR UPDATE;
UPDATE items SET stock = stock - 1 WHERE id = 1;
COMMIT;
