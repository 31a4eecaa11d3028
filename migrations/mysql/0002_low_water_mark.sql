-- redis-lua: the stream entries a batch applied ABOVE the low-water mark (`items.stream_applied`:
-- the highest stream id below which every entry is applied). With several consumers, batches
-- commit out of stream order; reconciliation reads the mark, these ids and the stock in one
-- snapshot, and counts as in flight only the entries after the mark that are not listed here.
-- Rows at or below the mark are deleted when the mark advances, so the table stays small.
CREATE TABLE IF NOT EXISTS applied_events (
    item_id BIGINT NOT NULL,
    ms      BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    PRIMARY KEY (item_id, ms, seq)
) ENGINE = InnoDB;

-- Every id the shop accepts (any UTF-8 without control characters, up to the column's length)
-- must be storable, whatever the server's default character set: a database that refused an
-- acknowledged order's id would dead-letter it.
ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4;
