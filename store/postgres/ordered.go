package postgres

import "github.com/jackc/pgx/v5"

// rowsQuery reads every leaf_alloc row with its ordered flag (a row in
// leaf_ordered, migration 6) in one query; scanRow reads the first five
// columns, orderedRow the sixth.
const rowsQuery = `SELECT a.biz_tag, a.max_id, a.step, a.description, a.update_time, o.biz_tag IS NOT NULL
	FROM leaf_alloc a LEFT JOIN leaf_ordered o ON o.biz_tag = a.biz_tag
	ORDER BY a.biz_tag`

// orderedRow scans a row of rowsQuery: the columns scanRow asks for, then
// the ordered flag into ordered.
type orderedRow struct {
	pgx.Row
	ordered *bool
}

// Scan reads dest and then the ordered flag.
func (r orderedRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.ordered)...) }
