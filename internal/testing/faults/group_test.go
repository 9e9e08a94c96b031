package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/internal/waittest"
	"github.com/leaf-go/leaf/store"
)

// TestGroupedMidnight is issue 14's acceptance run with real processes: two
// leaf-servers (-tags leaftest, clocks offset from a file) share one
// database and serve a day-grouped tag in America/Santiago (a zone with
// daylight saving) across the month-end midnight 31 October → 1 November
// 2026, their clocks 2 s apart. Server A is killed with SIGKILL as soon as
// it has answered an ID of the new period and restarted with its clock 5 s
// back, before midnight; server B's clock is stepped back 5 s across
// midnight while it runs. Every ID is distinct, and no server answers a
// period after it answered a later one.
func TestGroupedMidnight(t *testing.T) {
	for _, kind := range []string{"postgres", "mysql"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			servertest.SkipShort(t)
			loc, err := time.LoadLocation("America/Santiago")
			if err != nil {
				t.Skip("no tzdata:", err)
			}
			d := newDB(t, kind)
			if err := d.st.CreateGroup(context.Background(), store.Group{BizTag: "ord", Grp: "day",
				TimeZone: "America/Santiago", Format: "{yyyyMMdd}{seq:8}", Step: 20}); err != nil {
				t.Fatal(err)
			}
			const before, after = "20261031", "20261101"
			midnight := time.Date(2026, 11, 1, 0, 0, 0, 0, loc)
			// The servers start on the real clock and serve nothing until
			// both clocks are set: A 6 s before midnight, B 2 s behind A.
			clkA, clkB := newStepClock(t), newStepClock(t)
			dirA, dirB := t.TempDir(), t.TempDir()
			args := []string{"--segment-dsn", d.direct, "--demo-tag=false"}
			var pa atomic.Pointer[servertest.Proc]
			pa.Store(startClocked(t, dirA, clkA, args...))
			pb := startClocked(t, dirB, clkB, args...)
			offA := time.Until(midnight.Add(-6 * time.Second))
			clkA.set(t, offA)
			clkB.set(t, offA-2*time.Second)
			time.Sleep(20 * time.Millisecond) // a clock re-reads the file once its last read is 2 ms old: bound by construction

			var (
				mu      sync.Mutex
				seen    = map[string]string{} // ID → server
				count   = map[string]int{}    // server/period → IDs
				answers = map[string]int{}    // server → HTTP answers, errors included
				bad     []string
			)
			var hwA, hwB atomic.Value // latest period each server answered
			hwA.Store("")
			hwB.Store("")
			record := func(name string, hw *atomic.Value, startHW string, ids []string) {
				mu.Lock()
				defer mu.Unlock()
				for _, id := range ids {
					if by, dup := seen[id]; dup {
						bad = append(bad, fmt.Sprintf("ID %s from %s and %s", id, by, name))
					}
					seen[id] = name
					key := id[:8]
					if key < startHW {
						bad = append(bad, fmt.Sprintf("%s answered period %s after it had answered %s", name, key, startHW))
					}
					count[name+" "+key]++
					if cur := hw.Load().(string); key > cur {
						hw.Store(key)
					}
				}
			}
			hc := &http.Client{Timeout: 5 * time.Second}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			client := func(name string, srv func() *servertest.Proc, hw *atomic.Value) {
				defer wg.Done()
				for ctx.Err() == nil {
					startHW := hw.Load().(string)
					resp, err := hc.Get(srv().URL("/api/v1/segment/ord/formatted?count=5"))
					if err != nil {
						time.Sleep(10 * time.Millisecond) // A is down
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					mu.Lock()
					answers[name]++
					mu.Unlock()
					if resp.StatusCode != http.StatusOK {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					var ans struct{ IDs []string }
					if err := json.Unmarshal(body, &ans); err != nil {
						t.Errorf("%s answered %s", name, body)
						return
					}
					record(name, hw, startHW, ans.IDs)
				}
			}
			for range 3 {
				wg.Add(2)
				go client("A", func() *servertest.Proc { return pa.Load() }, &hwA)
				go client("B", func() *servertest.Proc { return pb }, &hwB)
			}
			waitPeriod := func(hw *atomic.Value, name string) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for hw.Load().(string) != after {
					if time.Now().After(deadline) {
						t.Fatalf("%s never answered period %s (latest %q)", name, after, hw.Load())
					}
					time.Sleep(time.Millisecond)
				}
			}
			waitPeriod(&hwA, "A")
			pa.Load().Kill9()
			// A's clock now reads just past midnight: set it 5 s back.
			clkA.set(t, time.Until(midnight.Add(-5*time.Second)))
			pa.Store(startClocked(t, dirA, clkA, args...))
			waitPeriod(&hwB, "B")
			clkB.set(t, time.Until(midnight.Add(-5*time.Second))) // B steps back across midnight
			// Not a fixed time: 100 more answers of each server (each one a
			// chance to answer the earlier period) while B's clock is back.
			mu.Lock()
			a0, b0 := answers["A"], answers["B"]
			mu.Unlock()
			waittest.For(t, 30*time.Second, "100 more answers of A and B", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return answers["A"] >= a0+100 && answers["B"] >= b0+100
			})
			cancel()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			for _, b := range bad {
				t.Error(b)
			}
			for _, k := range []string{"A " + before, "A " + after, "B " + before, "B " + after} {
				if count[k] == 0 {
					t.Errorf("no IDs for %s: %v", k, count)
				}
			}
			t.Logf("FAULTS grouped midnight %s: %d IDs, 0 duplicates wanted, %d problems; per server and period %v", kind, len(seen), len(bad), count)
		})
	}
}
