-- The stock ledger's restocks: one row each time units go back to an item for an order (a
-- cancel, an expiry), written in the same transaction as the restock. The oracle reads it for
-- what a correct shop never does: an order restocked twice, or restocked while it still holds
-- its units; the proof names the order and each restock.
CREATE TABLE IF NOT EXISTS restocks (
    id       BIGSERIAL PRIMARY KEY,
    item_id  BIGINT NOT NULL,
    order_id VARCHAR(64) NOT NULL,
    qty      BIGINT NOT NULL,
    at_ms    BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS restocks_item_order ON restocks (item_id, order_id);
