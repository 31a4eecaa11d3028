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
);
