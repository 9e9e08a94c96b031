-- leaf_worker_lease: the `sql` worker ID source (docs/contract.md §3). One
-- row per worker ID, inserted lazily by the store's ClaimWorker for IDs
-- 0..maxWorker (the range comes from the snowflake layout at run time, not
-- from this file).
--   generation     bumped by every claim: the fencing token; a renewal or
--                  release with an older generation changes nothing
--   expires_at     UTC_TIMESTAMP(3) + TTL; the ID is free once it is before
--                  UTC_TIMESTAMP(3); a released row is set to the Unix epoch
--   high_water_ms  Unix ms that no ID of this worker ID has reached; raised,
--                  never lowered; a new holder issues nothing below it
-- Instants are DATETIME(3) in UTC, written and compared only with
-- UTC_TIMESTAMP(3): independent of the session time_zone, and without
-- TIMESTAMP's 2038 limit. All come from the database's clock, never a node's.

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_worker_lease` (
  `worker_id` int NOT NULL,
  `owner` varchar(255) DEFAULT NULL,
  `generation` bigint NOT NULL DEFAULT '0',
  `expires_at` datetime(3) NOT NULL DEFAULT '1970-01-01 00:00:00.000',
  `high_water_ms` bigint NOT NULL DEFAULT '0',
  `updated_at` datetime(3) NOT NULL DEFAULT '1970-01-01 00:00:00.000',
  PRIMARY KEY (`worker_id`)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op: the rows hold each worker ID's generation and time
-- high-water mark; dropping them would let a new holder repeat IDs.
SELECT 1;
