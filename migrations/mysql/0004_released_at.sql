-- When a release (cancel or expiry) last gave units back to the item, from the shop's clock.
-- for-update reads it under the row lock: an order inserted before a release committed is
-- re-stamped with the time its lock was granted, so the oracle replays the two in the order
-- they happened (see src/inventory/for_update.rs). 0: never.
ALTER TABLE items ADD COLUMN released_at_ms BIGINT NOT NULL DEFAULT 0;
