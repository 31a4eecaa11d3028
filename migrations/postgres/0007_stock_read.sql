-- The stock a purchase read before it decided, for the strategies that read one outside a single
-- atomic step (naive, and the defects that read then write): a proof of oversell shows it ("both
-- read 1"). NULL where the decision reads none of its own.
ALTER TABLE orders ADD COLUMN IF NOT EXISTS stock_read BIGINT NULL;
