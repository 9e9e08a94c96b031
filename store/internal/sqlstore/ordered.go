package sqlstore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leaf-go/leaf/store"
)

// OrderedRows is Rows with each row's ordered flag: query selects the
// RowColumns of leaf_alloc and, as a sixth column, whether leaf_ordered has
// the tag (migration 6), ordered by biz_tag. scan reads the first five.
func OrderedRows(ctx context.Context, db *sql.DB, query string, scan func(Scanner) (store.Row, error)) ([]store.Row, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	defer rows.Close()
	var out []store.Row
	for rows.Next() {
		var ordered bool
		r, err := scan(orderedScanner{rows, &ordered})
		if err != nil {
			return nil, fmt.Errorf("rows: %w", err)
		}
		r.Ordered = ordered
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rows: %w", err)
	}
	return out, nil
}

// orderedScanner scans the columns asked for, then the ordered flag.
type orderedScanner struct {
	rows    *sql.Rows
	ordered *bool
}

func (s orderedScanner) Scan(dest ...any) error { return s.rows.Scan(append(dest, s.ordered)...) }
