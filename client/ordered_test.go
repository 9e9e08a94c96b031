package client_test

import (
	"testing"

	"github.com/leaf-go/leaf/client"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestOrdered: Ordered takes every ID from the servers, never from a local
// buffer: with two servers on one database and an ordered tag
// (docs/contract.md §12), consecutive calls, whichever server answers, get
// 1, 2, 3, …, and max_id is exactly one past the last.
func TestOrdered(t *testing.T) {
	d := dbtest.Postgres(t)
	st, err := dsn.Open(t.Context(), d, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(t.Context(), store.Row{BizTag: "ev", Step: 1000, Ordered: true}); err != nil {
		t.Fatal(err)
	}
	a := startServer(t, t.TempDir(), "--segment-dsn", d, "--snowflake=false")
	b := startServer(t, t.TempDir(), "--segment-dsn", d, "--snowflake=false")
	c := newClient(t, a.base(), client.Options{Servers: []string{b.base()}})
	for want := int64(1); want <= 20; want++ {
		got, err := c.Ordered(t.Context(), "ev")
		if err != nil || got != want {
			t.Fatalf("Ordered(ev) = %d, %v, want %d", got, err, want)
		}
	}
	if got, err := st.MaxID(t.Context(), "ev"); err != nil || got != 21 {
		t.Errorf("max_id = %d, %v, want 21 (one ID per call, nothing buffered)", got, err)
	}
	if _, err := c.Ordered(t.Context(), ""); err == nil {
		t.Error("Ordered(\"\") = nil error, want ErrInvalidTag")
	}
}
