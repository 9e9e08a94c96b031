-- leaf_tombstone, leaf-go's own table of deleted biz_tags (issue 20 item 6):
-- a DELETE of a leaf_alloc row through leaf-go (admin API, leafctl, a prune
-- of a grouped tag's period) leaves the row's last max_id here, so that a
-- tag created again under the same name below it is refused (409
-- below_tombstone) by every server and leafctl, whatever their data
-- directories remember. A create at or above it removes the tombstone.
--   max_id      the highest max_id the tag had when it was deleted
--   deleted_at  when (UTC_TIMESTAMP(3), the database's clock)

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_tombstone` (
  `biz_tag` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `max_id` bigint NOT NULL,
  `deleted_at` datetime(3) NOT NULL DEFAULT '1970-01-01 00:00:00.000',
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op, as for leaf_alloc: the tombstones keep deleted
-- tags from repeating their IDs.
SELECT 1;
