-- leaf_alloc exactly as Meituan Leaf 1.0.1 creates it (scripts/leaf_alloc.sql),
-- so an existing Leaf database is adopted unchanged: IF NOT EXISTS leaves a
-- table that is already there, with its rows, alone.

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_alloc` (
  `biz_tag` varchar(128)  NOT NULL DEFAULT '',
  `max_id` bigint(20) NOT NULL DEFAULT '1',
  `step` int(11) NOT NULL,
  `description` varchar(256)  DEFAULT NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op: leaf_alloc holds the high-water marks of every ID
-- sequence, and dropping it would let the service hand out IDs again. Drop the
-- table by hand if you really mean it.
SELECT 1;
