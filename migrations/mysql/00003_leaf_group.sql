-- leaf_group, leaf-go's own table of date-grouped tags (issue 14): one row per
-- grouped biz_tag with its period length, time zone and ID template. The
-- sequences themselves live in ordinary leaf_alloc rows "<biz_tag>:<period>".

-- +goose Up
CREATE TABLE IF NOT EXISTS `leaf_group` (
  biz_tag       varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  grp           varchar(8)   NOT NULL,
  time_zone     varchar(64)  NOT NULL,
  format        varchar(256) NOT NULL,
  step          integer      NOT NULL,
  retention     integer      NOT NULL DEFAULT 0,
  pruned_before varchar(8)   NOT NULL DEFAULT '',
  description   varchar(256) DEFAULT NULL,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately a no-op, as for leaf_alloc: pruned_before keeps pruned
-- periods from being served again.
SELECT 1;
