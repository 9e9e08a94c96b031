-- leaf_tail_return, leaf-go's own table (issue 22 item 2): per biz_tag the
-- last unused tail a leaf-server gave back on a graceful stop. The server
-- lowered leaf_alloc.max_id from returned_from to returned_to with a
-- compare-and-set in the same transaction; seq counts the returns of the
-- tag. Other servers read it to tell a returned tail from a database that
-- went back in time (their high-water marks may lie above returned_to). A
-- Java Leaf never reads it: it keeps no marks.

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_tail_return` (
  biz_tag     varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  returned_from bigint       NOT NULL,
  returned_to   bigint       NOT NULL,
  seq           bigint       NOT NULL,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op, as for leaf_alloc: without the record a server
-- whose high-water mark lies in a returned tail refuses the tag.
SELECT 1;
