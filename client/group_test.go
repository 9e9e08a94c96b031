package client_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/client"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

// TestFormatted: Formatted and ParseFormatted against a real leaf-server
// with a grouped tag declared in leaf_group.
func TestFormatted(t *testing.T) {
	dir := t.TempDir()
	d := "sqlite:" + filepath.Join(dir, "leaf.db")
	st, err := dsn.Open(t.Context(), d, true)
	if err != nil {
		t.Fatal(err)
	}
	err = st.CreateGroup(t.Context(), store.Group{BizTag: "order", Grp: "day", TimeZone: "UTC",
		Format: "ORD{yyyyMMdd}{seq:6}", Step: 100})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := startServer(t, dir, "--segment-dsn", d, "--demo-tag=false")
	c := newClient(t, p.base(), client.Options{})
	ids, err := c.Formatted(t.Context(), "order", 250)
	if err != nil || len(ids) != 250 {
		t.Fatalf("Formatted(order, 250) = %d IDs, %v", len(ids), err)
	}
	today := "ORD" + time.Now().UTC().Format("20060102")
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || !strings.HasPrefix(id, today[:9]) || len(id) != 17 {
			t.Fatalf("ID %q repeated or not ORD<date><6 digits>", id)
		}
		seen[id] = true
	}
	got, err := c.ParseFormatted(t.Context(), "order", ids[249])
	if err != nil || got.BizTag != "order" || got.Sequence < 250 || got.Row != "order:"+got.Period ||
		got.PeriodStart.Format("20060102") != got.Period || ids[249][3:11] != got.Period {
		t.Fatalf("ParseFormatted(%s) = %+v, %v", ids[249], got, err)
	}
	if _, err := c.Formatted(t.Context(), "plain", 1); !errors.Is(err, client.ErrNotGrouped) {
		t.Fatalf("Formatted(plain) = %v, want ErrNotGrouped", err)
	}
	var e *client.Error
	if _, err := c.ParseFormatted(t.Context(), "order", "ORD20261301000001"); !errors.As(err, &e) || e.Code != "bad_id" {
		t.Fatalf("ParseFormatted(month 13) = %v, want bad_id", err)
	}
}
