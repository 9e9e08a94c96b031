-- leaf_ordered, leaf-go's own table of ordered tags (issue 22): one row per
-- biz_tag whose IDs increase in real time across every server. Such a tag
-- has no local buffer; each server allocates max_id = max_id + n for the n
-- requests waiting on it. leaf_alloc stays Leaf's: a Java Leaf on the same
-- table sees a plain row.

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_ordered` (
  biz_tag varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op, as for leaf_alloc: dropping the table would turn
-- ordered tags into plain ones while other servers still order them.
SELECT 1;
