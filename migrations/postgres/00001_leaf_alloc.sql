-- leaf_alloc, the PostgreSQL equivalent of Meituan Leaf's MySQL table.
-- PostgreSQL has no ON UPDATE CURRENT_TIMESTAMP: the stores set update_time
-- = now() in every UPDATE. IF NOT EXISTS leaves an existing table alone.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     varchar(128) NOT NULL DEFAULT '',
  max_id      bigint       NOT NULL DEFAULT 1,
  step        integer      NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamptz  NOT NULL DEFAULT now(),
  PRIMARY KEY (biz_tag)
);

-- +goose Down
-- Deliberately a no-op: leaf_alloc holds the high-water marks of every ID
-- sequence, and dropping it would let the service hand out IDs again. Drop the
-- table by hand if you really mean it.
SELECT 1;
