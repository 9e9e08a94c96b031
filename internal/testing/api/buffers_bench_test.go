package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store/dsn"
)

// BenchmarkBuffersPage100k: one page (limit 100) of the buffers route with
// 100,000 tags cached, 3 of them in use, in process, by runway, by tag, and
// with a prefix nothing matches (the snapshot alone).
//
//	cd internal/testing && go test -run '^$' -bench BenchmarkBuffersPage100k ./api/
func BenchmarkBuffersPage100k(b *testing.B) {
	storeDSN := dbtest.Postgres(b)
	ctx := context.Background()
	st, err := dsn.Open(ctx, storeDSN, true)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	conn, err := pgx.Connect(ctx, storeDSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO leaf_alloc (biz_tag, max_id, step, description)
		SELECT 'tag-' || lpad(g::text, 6, '0'), 1, 1000, '' FROM generate_series(0, 99999) g`); err != nil {
		b.Fatal(err)
	}
	gen, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer gen.Close()
	h := api.NewHandler(api.Deps{Segment: gen, Store: st})
	for _, tag := range []string{"tag-054321", "tag-000007", "tag-099999"} {
		if _, err := gen.Get(ctx, tag); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{"limit=100", "limit=100&sort=tag", "limit=100&prefix=none"} {
		b.Run(q, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/segment/buffers?"+q, nil))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
