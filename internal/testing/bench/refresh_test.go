package bench

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
)

// refreshSection: how long one tag-list refresh (segment.Generator.Refresh:
// read every row of leaf_alloc, rebuild the tag cache) takes with 100,000
// tags, on PostgreSQL and on MariaDB, median of 5 after a first one.
func refreshSection(t *testing.T, rep *report) {
	n := 100_000
	if *quick {
		n = 1000
	}
	var b strings.Builder
	fmt.Fprintf(&b, "One `segment.Generator.Refresh` (the refresh loop's work every `--refresh-interval`: read every row of leaf_alloc, rebuild the tag cache) "+
		"with %d tags in a fresh database, none of them warm; the first refresh is `segment.New`'s, then the median (min–max) of 5 more.\n\n", n)
	b.WriteString("| database | tags | first (in `segment.New`) | **refresh, median** | min–max |\n|---|---:|---:|---:|---|\n")
	type db struct {
		name, dsn string
		fill      func(t *testing.T, dsn string)
	}
	dbs := []db{{"PostgreSQL", dbtest.Postgres(t), func(t *testing.T, d string) {
		_, conn := pgSetup(t, d)
		if _, err := conn.Exec(t.Context(), `INSERT INTO leaf_alloc (biz_tag, max_id, step, update_time)
			SELECT 'ref-' || lpad(g::text, 6, '0'), 1, 1000, now() FROM generate_series(1, $1::int) g`, n); err != nil {
			t.Fatal(err)
		}
	}}}
	if myVersion(t) != "not reachable" {
		dbs = append(dbs, db{"MariaDB", dbtest.MySQL(t), func(t *testing.T, d string) {
			if _, err := openStore(t, d); err != nil { // migrates
				t.Fatal(err)
			}
			c, err := sql.Open("mysql", strings.TrimPrefix(d, "mysql://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// seq_1_to_N is MariaDB's Sequence engine.
			if _, err := c.ExecContext(t.Context(), fmt.Sprintf(`INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time)
				SELECT CONCAT('ref-', LPAD(seq, 6, '0')), 1, 1000, '', NOW() FROM seq_1_to_%d`, n)); err != nil {
				t.Fatal(err)
			}
		}})
	}
	for _, d := range dbs {
		d.fill(t, d.dsn)
		st, err := openStore(t, d.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		gen, err := segment.New(t.Context(), st, segment.Config{Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		first := time.Since(t0)
		var took []time.Duration
		for range 5 {
			t1 := time.Now()
			if err := gen.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(t1))
		}
		if got := len(gen.Stats()); got != n {
			t.Fatalf("%s: %d tags cached after refresh, want %d", d.name, got, n)
		}
		gen.Close()
		slices.Sort(took)
		fmt.Fprintf(&b, "| %s | %d | %v | **%v** | %v–%v |\n", d.name, n, first.Round(time.Millisecond),
			took[2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[4].Round(time.Millisecond))
	}
	rep.add("Tag-list refresh at 100,000 tags", b.String())
}
