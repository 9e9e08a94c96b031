-- leaf_worker_lease.reported_ms: the holder's own wall clock, Unix ms, as it
-- sent the claim or renewal that last wrote the row (every 3 s); 0 when none.
-- A starting server compares its clock with the live holders' reports
-- (updated_at is the database's clock at that write) and refuses to start
-- when it is off their mean by more than --max-peer-clock-skew (issue 15).

-- +goose Up
ALTER TABLE leaf_worker_lease ADD COLUMN reported_ms bigint NOT NULL DEFAULT 0;

-- +goose Down
-- The column only feeds the start-up clock check; dropping it loses no
-- worker ID state.
ALTER TABLE leaf_worker_lease DROP COLUMN reported_ms;
