package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaf-go/leaf/store"
)

// shortTTL is the lease that the expiry cases wait out.
const shortTTL = 500 * time.Millisecond

// longTTL is a lease that does not expire during a test.
const longTTL = time.Minute

// RunLease runs the worker ID lease suite (the `sql` worker ID source,
// docs/contract.md §3). open must return a store on a fresh, migrated,
// empty database (one per call) and close it in t.Cleanup; RunLease calls it
// once per subtest, and the subtests run in parallel.
func RunLease(t *testing.T, open func(t *testing.T) store.LeaseStore) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.LeaseStore)
	}{
		{"ClaimLowestFirst", testClaimLowest},
		{"ConcurrentClaimsDiffer", testClaimConcurrent},
		{"ExpiresAtIsDBNowPlusTTL", testClaimExpiry},
		{"ClaimAfterExpiry", testClaimAfterExpiry},
		{"RenewExtends", testRenewExtends},
		{"RenewStaleGeneration", testRenewStale},
		{"RenewAfterExpiryUnclaimed", testRenewExpiredUnclaimed},
		{"Release", testRelease},
		{"HighWaterNeverLowered", testHighWater},
		{"NoFreeWorker", testNoFreeWorker},
		{"WiderRange", testWiderRange},
		{"BadArguments", testLeaseBadArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t))
		})
	}
}

func claim(t *testing.T, s store.LeaseStore, owner string, maxWorker int64, ttl time.Duration) store.Lease {
	t.Helper()
	l, err := s.ClaimWorker(ctxT(t), owner, maxWorker, ttl)
	if err != nil {
		t.Fatalf("ClaimWorker(%q, %d, %v) = %v, want nil", owner, maxWorker, ttl, err)
	}
	return l
}

func renew(t *testing.T, s store.LeaseStore, l store.Lease, ttl time.Duration, hw int64) store.Lease {
	t.Helper()
	got, err := s.RenewWorker(ctxT(t), l.WorkerID, l.Generation, ttl, hw)
	if err != nil {
		t.Fatalf("RenewWorker(%d, %d, %v, %d) = %v, want nil", l.WorkerID, l.Generation, ttl, hw, err)
	}
	return got
}

// waitExpired sleeps until the database's clock has surely passed
// l.ExpiresAt: the lease's remaining time counted from returned, a local
// instant taken after the call that produced l came back.
func waitExpired(t *testing.T, l store.Lease, returned time.Time) {
	t.Helper()
	time.Sleep(time.Until(returned.Add(l.ExpiresAt.Sub(l.DBNow))) + 50*time.Millisecond)
}

func testClaimLowest(t *testing.T, s store.LeaseStore) {
	for i, owner := range []string{"a", "b", "c"} {
		l := claim(t, s, owner, 1023, longTTL)
		if l.WorkerID != int64(i) || l.Generation != 1 || l.Owner != owner || l.HighWaterMillis != 0 {
			t.Errorf("ClaimWorker(%q) #%d = %+v, want worker %d, generation 1, owner %q, high water 0", owner, i, l, i, owner)
		}
	}
}

func testClaimConcurrent(t *testing.T, s store.LeaseStore) {
	const claimers = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards ids and errs
		ids  []int64
		errs []error
	)
	for i := range claimers {
		wg.Go(func() {
			l, err := s.ClaimWorker(ctxT(t), fmt.Sprintf("node-%d", i), 1023, longTTL)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids = append(ids, l.WorkerID)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d concurrent claims failed, first: %v", len(errs), claimers, errs[0])
	}
	slices.Sort(ids)
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7}
	if !slices.Equal(ids, want) {
		t.Errorf("concurrent claims got worker IDs %v, want %v (different, lowest first)", ids, want)
	}
}

func testClaimExpiry(t *testing.T, s store.LeaseStore) {
	before := time.Now()
	l := claim(t, s, "x", 1023, 10*time.Second)
	if got := l.ExpiresAt.Sub(l.DBNow); got < 10*time.Second-2*time.Millisecond || got > 10*time.Second+2*time.Millisecond {
		t.Errorf("ClaimWorker: ExpiresAt - DBNow = %v, want 10s (database now + TTL)", got)
	}
	// The databases under test run on this host: their clock agrees with
	// ours to well within a second.
	if d := l.DBNow.Sub(before); d < -time.Second || d > time.Second {
		t.Errorf("ClaimWorker: DBNow = %v, local clock %v: time zone handling?", l.DBNow, before)
	}
	if l.ExpiresAt.Location() != time.UTC || l.DBNow.Location() != time.UTC {
		t.Errorf("ClaimWorker: times in %v and %v, want UTC", l.ExpiresAt.Location(), l.DBNow.Location())
	}
}

func testClaimAfterExpiry(t *testing.T, s store.LeaseStore) {
	old := claim(t, s, "old", 1023, shortTTL)
	old = renew(t, s, old, shortTTL, 1234)
	returned := time.Now()
	other := claim(t, s, "other", 1023, longTTL)
	if old.WorkerID != 0 || other.WorkerID != 1 {
		t.Fatalf("claims got workers %d and %d, want 0 and 1", old.WorkerID, other.WorkerID)
	}
	if l, err := s.ClaimWorker(ctxT(t), "early", 1, longTTL); !errors.Is(err, store.ErrNoFreeWorker) {
		t.Fatalf("ClaimWorker before expiry = %+v, %v, want %v", l, err, store.ErrNoFreeWorker)
	}
	waitExpired(t, old, returned)
	taker := claim(t, s, "taker", 1023, longTTL)
	if taker.WorkerID != 0 || taker.Generation != old.Generation+1 || taker.HighWaterMillis != 1234 || taker.Owner != "taker" {
		t.Errorf("ClaimWorker after expiry = %+v, want worker 0, generation %d, high water 1234 kept, owner taker", taker, old.Generation+1)
	}
	if l, err := s.RenewWorker(ctxT(t), old.WorkerID, old.Generation, shortTTL, 9999); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RenewWorker by the old holder = %+v, %v, want %v", l, err, store.ErrLeaseLost)
	}
	if l := renew(t, s, taker, longTTL, 0); l.HighWaterMillis != 1234 {
		t.Errorf("the old holder's refused renewal changed high_water_ms to %d, want 1234", l.HighWaterMillis)
	}
}

func testRenewExtends(t *testing.T, s store.LeaseStore) {
	l := claim(t, s, "x", 1023, time.Second)
	time.Sleep(20 * time.Millisecond)
	r := renew(t, s, l, 5*time.Second, 0)
	if r.WorkerID != l.WorkerID || r.Generation != l.Generation || r.Owner != "x" {
		t.Errorf("RenewWorker = %+v, want worker %d generation %d owner x", r, l.WorkerID, l.Generation)
	}
	if !r.ExpiresAt.After(l.ExpiresAt.Add(3*time.Second)) || !r.DBNow.After(l.DBNow) {
		t.Errorf("RenewWorker: expires %v (now %v), want about 5 s after the renewal, later than the claim's %v", r.ExpiresAt, r.DBNow, l.ExpiresAt)
	}
	if got := r.ExpiresAt.Sub(r.DBNow); got < 5*time.Second-2*time.Millisecond || got > 5*time.Second+2*time.Millisecond {
		t.Errorf("RenewWorker: ExpiresAt - DBNow = %v, want 5s", got)
	}
}

func testRenewStale(t *testing.T, s store.LeaseStore) {
	l := claim(t, s, "x", 1023, longTTL)
	tests := []struct {
		name           string
		giveWorker     int64
		giveGeneration int64
	}{
		{"older generation", l.WorkerID, l.Generation - 1},
		{"newer generation", l.WorkerID, l.Generation + 1},
		{"no such row", 77, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.RenewWorker(ctxT(t), tt.giveWorker, tt.giveGeneration, longTTL, 5)
			if !errors.Is(err, store.ErrLeaseLost) {
				t.Errorf("RenewWorker(%d, %d) = %+v, %v, want %v", tt.giveWorker, tt.giveGeneration, got, err, store.ErrLeaseLost)
			}
		})
	}
	if r := renew(t, s, l, longTTL, 0); r.HighWaterMillis != 0 {
		t.Errorf("a refused renewal set high_water_ms to %d, want 0", r.HighWaterMillis)
	}
}

// testRenewExpiredUnclaimed: a lease that ran out in the database but that
// nobody claimed since can be renewed; the generation proves that no other
// node held the worker ID in between.
func testRenewExpiredUnclaimed(t *testing.T, s store.LeaseStore) {
	l := claim(t, s, "x", 1023, shortTTL)
	waitExpired(t, l, time.Now())
	if r := renew(t, s, l, longTTL, 0); r.Generation != l.Generation || r.WorkerID != l.WorkerID {
		t.Errorf("RenewWorker after expiry = %+v, want the same lease renewed", r)
	}
	if got := claim(t, s, "y", 1023, longTTL); got.WorkerID != 1 {
		t.Errorf("ClaimWorker after the renewal got worker %d, want 1", got.WorkerID)
	}
}

func testRelease(t *testing.T, s store.LeaseStore) {
	ctx := ctxT(t)
	a := claim(t, s, "a", 1023, longTTL)
	claim(t, s, "b", 1023, longTTL)
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation+1); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("ReleaseWorker(%d, stale generation) = %v, want %v", a.WorkerID, err, store.ErrLeaseLost)
	}
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation); err != nil {
		t.Fatalf("ReleaseWorker(%d, %d) = %v, want nil", a.WorkerID, a.Generation, err)
	}
	c := claim(t, s, "c", 1023, longTTL)
	if c.WorkerID != a.WorkerID || c.Generation != a.Generation+1 {
		t.Errorf("ClaimWorker after release = %+v, want worker %d generation %d", c, a.WorkerID, a.Generation+1)
	}
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("second ReleaseWorker by the old holder = %v, want %v", err, store.ErrLeaseLost)
	}
	if _, err := s.RenewWorker(ctx, c.WorkerID, c.Generation, longTTL, 0); err != nil {
		t.Errorf("the new holder's lease was disturbed: RenewWorker = %v", err)
	}
}

func testHighWater(t *testing.T, s store.LeaseStore) {
	ctx := ctxT(t)
	l := claim(t, s, "x", 1023, longTTL)
	tests := []struct {
		give int64
		want int64
	}{
		{give: 1700000000000, want: 1700000000000},
		{give: 1600000000000, want: 1700000000000},
		{give: 0, want: 1700000000000},
		{give: 1700000000001, want: 1700000000001},
	}
	for _, tt := range tests {
		if got := renew(t, s, l, longTTL, tt.give); got.HighWaterMillis != tt.want {
			t.Errorf("RenewWorker(high water %d).HighWaterMillis = %d, want %d", tt.give, got.HighWaterMillis, tt.want)
		}
	}
	if err := s.ReleaseWorker(ctx, l.WorkerID, l.Generation); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "y", 1023, longTTL); got.HighWaterMillis != 1700000000001 || !got.HighWater().Equal(time.UnixMilli(1700000000001)) {
		t.Errorf("ClaimWorker after release: high water %d, want 1700000000001 kept in the row", got.HighWaterMillis)
	}
}

func testNoFreeWorker(t *testing.T, s store.LeaseStore) {
	for i := range 3 {
		if l := claim(t, s, "x", 2, longTTL); l.WorkerID != int64(i) {
			t.Fatalf("claim %d got worker %d", i, l.WorkerID)
		}
	}
	l, err := s.ClaimWorker(ctxT(t), "late", 2, longTTL)
	if !errors.Is(err, store.ErrNoFreeWorker) || !strings.Contains(err.Error(), "0..2") {
		t.Errorf("ClaimWorker with IDs 0..2 taken = %+v, %v, want %v naming 0..2", l, err, store.ErrNoFreeWorker)
	}
}

// testWiderRange: a claim with a larger maxWorker adds the missing rows; a
// smaller one never hands out IDs beyond it.
func testWiderRange(t *testing.T, s store.LeaseStore) {
	claim(t, s, "a", 0, longTTL)
	if _, err := s.ClaimWorker(ctxT(t), "b", 0, longTTL); !errors.Is(err, store.ErrNoFreeWorker) {
		t.Errorf("ClaimWorker(maxWorker 0) with 0 taken = %v, want %v", err, store.ErrNoFreeWorker)
	}
	if l := claim(t, s, "c", 4095, longTTL); l.WorkerID != 1 {
		t.Errorf("ClaimWorker(maxWorker 4095) got worker %d, want 1", l.WorkerID)
	}
}

func testLeaseBadArgs(t *testing.T, s store.LeaseStore) {
	ctx := ctxT(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"claim maxWorker -1", func() error { _, err := s.ClaimWorker(ctx, "x", -1, time.Second); return err }},
		{"claim maxWorker too big", func() error { _, err := s.ClaimWorker(ctx, "x", store.MaxLeaseWorker+1, time.Second); return err }},
		{"claim zero TTL", func() error { _, err := s.ClaimWorker(ctx, "x", 10, 0); return err }},
		{"claim TTL too long", func() error { _, err := s.ClaimWorker(ctx, "x", 10, 25*time.Hour); return err }},
		{"renew negative worker", func() error { _, err := s.RenewWorker(ctx, -1, 1, time.Second, 0); return err }},
		{"renew negative high water", func() error { _, err := s.RenewWorker(ctx, 0, 1, time.Second, -1); return err }},
		{"renew tiny TTL", func() error { _, err := s.RenewWorker(ctx, 0, 1, time.Millisecond, 0); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, store.ErrBadLease) {
			t.Errorf("%s: error %v, want %v", tt.name, err, store.ErrBadLease)
		}
	}
}
