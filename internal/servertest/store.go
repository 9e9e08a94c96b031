package servertest

import (
	"context"
	"testing"

	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// OpenStore opens (and migrates) the store at dsnStr beside the server under test, closed
// when the test ends; it fails the test on an error.
func OpenStore(t *testing.T, dsnStr string) store.Store {
	t.Helper()
	st, err := dsn.Open(context.Background(), dsnStr, true)
	if err != nil {
		t.Fatalf("open %s: %v", dsn.Redact(dsnStr), err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// MaxID returns tag's max_id as the store lists it; it fails the test when the tag has no
// leaf_alloc row.
func MaxID(t *testing.T, st store.Store, tag string) int64 {
	t.Helper()
	rows, err := st.Rows(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.BizTag == tag {
			return r.MaxID
		}
	}
	t.Fatalf("tag %q not in leaf_alloc", tag)
	return 0
}
