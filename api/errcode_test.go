package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/clocktest"
	"github.com/leaf-go/leaf/snowflake"
)

// fullDisk is a snowflake.HighWater whose every Store fails as a write on a
// full disk does (ENOSPC). The real full disk is TestFullDisk in
// internal/testing/faults (a tmpfs, needs root).
type fullDisk struct{}

func (fullDisk) Load(context.Context) (time.Time, error) { return time.Time{}, nil }
func (fullDisk) Store(context.Context, time.Time) error {
	return fmt.Errorf("write snowflake-0.highwater: %w", syscall.ENOSPC)
}

// fixedLease is a snowflake.Lease that expired at exp.
type fixedLease struct{ exp time.Time }

func (l fixedLease) Expiry() time.Time { return l.exp }

// TestSnowflakeFailuresNamed is issue 16 item 9 over HTTP: the JSON API
// answered not_initialized for a clock outside the layout, and Leaf's route
// answered -1 (Leaf's "clock still behind") for a high-water mark that could
// not be stored; a lost lease printed "expired at" a time that was never an
// expiry. Each failure now has its own code and a message saying what
// happened and what to do.
func TestSnowflakeFailuresNamed(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		give       snowflake.Settings
		after      func(c *clocktest.Clock) // moves the clock after New
		wantStatus int
		wantCode   string
		wantLeaf   string // Leaf's route: Result{id=<code>
		wantIn     []string
		wantNotIn  []string
	}{
		{
			name:       "clock past the layout's end",
			after:      func(c *clocktest.Clock) { c.Set(snowflake.DefaultLayout().End().Add(time.Hour)) },
			wantStatus: 500, wantCode: "time_outside_layout", wantLeaf: "Result{id=-1,",
			wantIn: []string{"outside the layout", "layout covers"},
		},
		{
			name:       "high-water mark not stored (disk full)",
			give:       snowflake.Settings{HighWater: fullDisk{}},
			wantStatus: 503, wantCode: "high_water_not_stored", wantLeaf: "Result{id=-4,",
			wantIn: []string{"not stored", "no space left on device", "free space"},
		},
		{
			name:       "lease lost",
			give:       snowflake.Settings{Lease: fixedLease{exp: time.Unix(0, 0)}},
			wantStatus: 503, wantCode: "lease_expired", wantLeaf: "Result{id=-1,",
			wantIn:    []string{"lost or released", "another node may hold the worker ID", "/readyz says which"},
			wantNotIn: []string{"1970", "0001-01-01", "expired at"},
		},
		{
			name:       "lease not renewed",
			give:       snowflake.Settings{Lease: fixedLease{exp: now.Add(-3 * time.Second)}},
			wantStatus: 503, wantCode: "lease_expired", wantLeaf: "Result{id=-1,",
			wantIn: []string{"expired at " + now.Add(-3*time.Second).UTC().Format("2006-01-02T15:04:05"), "3s ago", "renewals failed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(now)
			s := tt.give
			s.WorkerID, s.Clock = 5, clock
			gen, err := snowflake.New(t.Context(), s)
			if err != nil {
				t.Fatalf("snowflake.New: %v", err)
			}
			if tt.after != nil {
				tt.after(clock)
			}
			srv := httptest.NewServer(api.NewHandler(api.Deps{Snowflake: gen}))
			t.Cleanup(srv.Close)
			got := do(t, "GET", srv.URL+"/api/v1/snowflake?count=1")
			if got.status != tt.wantStatus || !strings.Contains(got.body, `"code":"`+tt.wantCode+`"`) {
				t.Errorf("GET /api/v1/snowflake = %d %s, want %d with code %s", got.status, got.body, tt.wantStatus, tt.wantCode)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(got.body, w) {
					t.Errorf("message %s does not say %q", got.body, w)
				}
			}
			for _, w := range tt.wantNotIn {
				if strings.Contains(got.body, w) {
					t.Errorf("message %s says %q", got.body, w)
				}
			}
			if got := do(t, "GET", srv.URL+"/api/snowflake/get/x"); got.status != 500 || !strings.Contains(got.body, tt.wantLeaf) {
				t.Errorf("GET /api/snowflake/get/x = %d %s, want 500 with %s", got.status, got.body, tt.wantLeaf)
			}
		})
	}
}
