-- leaf_alloc, the SQLite equivalent of Meituan Leaf's MySQL table.
-- SQLite has no ON UPDATE CURRENT_TIMESTAMP: the store sets update_time in
-- every UPDATE, as UTC text 'YYYY-MM-DD HH:MM:SS.SSS'. IF NOT EXISTS leaves an
-- existing table alone.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      INTEGER      NOT NULL DEFAULT 1,
  step        INTEGER      NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
  PRIMARY KEY (biz_tag)
);

-- +goose Down
-- Deliberately a no-op: leaf_alloc holds the high-water marks of every ID
-- sequence, and dropping it would let the service hand out IDs again. Drop the
-- table by hand if you really mean it.
SELECT 1;
