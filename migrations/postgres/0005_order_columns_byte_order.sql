-- Byte order (COLLATE "C") for the text columns of `orders` that its btree indexes hold: every
-- persisted order is a key in the primary key (id), orders_item_user (user_id),
-- orders_item_status (status) and orders_item_idempotency (idempotency_key), and under a libc
-- collation such as C.UTF-8 each comparison of an insert's descent is a strcoll() call
-- (varstr_cmp, ~6 % of the database's CPU per persisted redis-lua order). Equality is the same
-- under every deterministic collation, which is all the shop asks of these columns; no query
-- orders by them. Only the indexes are rebuilt (the column types do not change).
ALTER TABLE orders
    ALTER COLUMN id TYPE VARCHAR(64) COLLATE "C",
    ALTER COLUMN user_id TYPE VARCHAR(128) COLLATE "C",
    ALTER COLUMN status TYPE VARCHAR(24) COLLATE "C",
    ALTER COLUMN idempotency_key TYPE VARCHAR(128) COLLATE "C";
