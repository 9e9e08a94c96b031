-- leaf_tombstone, leaf-go's own table of deleted biz_tags (issue 20 item 6):
-- a DELETE of a leaf_alloc row through leaf-go (admin API, leafctl, a prune
-- of a grouped tag's period) leaves the row's last max_id here, so that a
-- tag created again under the same name below it is refused (409
-- below_tombstone) by every server and leafctl, whatever their data
-- directories remember. A create at or above it removes the tombstone.
--   max_id      the highest max_id the tag had when it was deleted
--   deleted_at  when (the database's clock, UTC)

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_tombstone (
  biz_tag    varchar(128) NOT NULL,
  max_id     bigint       NOT NULL,
  deleted_at timestamp    NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'),
  PRIMARY KEY (biz_tag)
);

-- +goose Down
-- Deliberately a no-op, as for leaf_alloc: the tombstones keep deleted
-- tags from repeating their IDs.
SELECT 1;
