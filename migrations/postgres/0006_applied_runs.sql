-- redis-lua: the ids applied above the low-water mark, kept as runs instead of one row each.
-- A run is `ms` with every sequence number from `seq_from` to `seq_to` (ids `ms-seq_from` ..
-- `ms-seq_to`, each one an id the batch applied): at a sale's rate the stream gives one
-- millisecond many entries, and one row per run costs the database a fraction of one row per
-- id (docs/src/performance/lab-log.md, 7 Dec 2026). Keyed by the run's last id: a run recorded
-- again with the same end (a replayed batch) keeps the lower start, the union of the two.
CREATE TABLE IF NOT EXISTS applied_runs (
    item_id  BIGINT NOT NULL,
    ms       BIGINT NOT NULL,
    seq_from BIGINT NOT NULL,
    seq_to   BIGINT NOT NULL,
    PRIMARY KEY (item_id, ms, seq_to)
);
INSERT INTO applied_runs (item_id, ms, seq_from, seq_to)
    SELECT item_id, ms, seq, seq FROM applied_events;
DROP TABLE applied_events;
