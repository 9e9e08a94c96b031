package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// fullMarks is a segment.Marks whose Store fails with ENOSPC's text while
// full is set: the seam of a full disk under the marks log (the real full
// filesystem is TestReadyzFullDisk in internal/testing/faults).
type fullMarks struct {
	full  atomic.Bool
	marks map[string]int64 // written by Store while not full; one caller at a time here
}

func (m *fullMarks) Load(context.Context) (map[string]int64, error) { return map[string]int64{}, nil }
func (m *fullMarks) Store(_ context.Context, tag string, v int64) error {
	if m.full.Load() {
		return errors.New("write high-water marks: no space left on device")
	}
	m.marks[tag] = max(m.marks[tag], v)
	return nil
}
func (m *fullMarks) Lower(_ context.Context, tag string, v, _ int64) error {
	if m.full.Load() {
		return errors.New("write high-water marks: no space left on device")
	}
	m.marks[tag] = v
	return nil
}
func (m *fullMarks) Returns(context.Context) (map[string]int64, error) {
	return map[string]int64{}, nil
}
func (m *fullMarks) StoreAll(ctx context.Context, marks map[string]int64) error {
	for t, v := range marks {
		if err := m.Store(ctx, t, v); err != nil {
			return err
		}
	}
	return nil
}

// TestReadyzWhenMarksCannotGrow is issue 20 item 7: with the marks log on
// a full disk, /readyz said "segment":"ok" while most new tags failed. Now
// a failed mark store makes it 503 naming the cause; once space is back,
// the next probe stores the mark again and answers 200, and the tag serves.
func TestReadyzWhenMarksCannotGrow(t *testing.T) {
	ctx := context.Background()
	st, err := dsn.Open(ctx, dbtest.SQLite(t), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, tag := range []string{"old", "new"} {
		if err := st.Create(ctx, store.Row{BizTag: tag, Step: 10}); err != nil {
			t.Fatal(err)
		}
	}
	m := &fullMarks{marks: map[string]int64{}}
	gen, err := segment.New(ctx, st, segment.Config{Marks: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gen.Close() })
	srv := httptest.NewServer(api.NewHandler(api.Deps{Segment: gen, Store: st}))
	t.Cleanup(srv.Close)

	if got := do(t, "GET", srv.URL+"/api/segment/get/old"); got.status != 200 {
		t.Fatalf("GET old = %d %s", got.status, got.body)
	}
	if got := do(t, "GET", srv.URL+"/readyz"); got.status != 200 || !strings.Contains(got.body, `"segment":"ok"`) {
		t.Fatalf("GET /readyz before the disk filled = %d %s, want 200", got.status, got.body)
	}
	m.full.Store(true)
	if got := do(t, "GET", srv.URL+"/api/segment/get/new"); got.status != 500 {
		t.Fatalf("GET new on a full disk = %d %s, want 500 (-3)", got.status, got.body)
	}
	got := do(t, "GET", srv.URL+"/readyz")
	if got.status != 503 || !strings.Contains(got.body, "high-water marks cannot be stored") || !strings.Contains(got.body, "no space left on device") {
		t.Errorf("GET /readyz with the marks log full = %d %s, want 503 naming the marks and the cause", got.status, got.body)
	}
	m.full.Store(false)
	if got := do(t, "GET", srv.URL+"/readyz"); got.status != 200 {
		t.Errorf("GET /readyz once space is back = %d %s, want 200", got.status, got.body)
	}
	// The failed first load is retried after a backoff: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for got := do(t, "GET", srv.URL+"/api/segment/get/new"); got.status != 200; got = do(t, "GET", srv.URL+"/api/segment/get/new") {
		if time.Now().After(deadline) {
			t.Fatalf("GET new once space is back = %d %s, want 200 within 10 s", got.status, got.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
