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
		{"Range", testRange},
		{"LiveHolders", testLiveHolders},
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
	l, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: owner, MaxWorker: maxWorker, TTL: ttl})
	if err != nil {
		t.Fatalf("ClaimWorker(%q, %d, %v) = %v, want nil", owner, maxWorker, ttl, err)
	}
	return l
}

func renew(t *testing.T, s store.LeaseStore, l store.Lease, ttl time.Duration, hw int64) store.Lease {
	t.Helper()
	got, err := s.RenewWorker(ctxT(t), l.WorkerID, l.Generation, ttl, hw, 0)
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
			l, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: fmt.Sprintf("node-%d", i), MaxWorker: 1023, TTL: longTTL})
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
	if l, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: "early", MaxWorker: 1, TTL: longTTL}); !errors.Is(err, store.ErrNoFreeWorker) {
		t.Fatalf("ClaimWorker before expiry = %+v, %v, want %v", l, err, store.ErrNoFreeWorker)
	}
	waitExpired(t, old, returned)
	taker := claim(t, s, "taker", 1023, longTTL)
	if taker.WorkerID != 0 || taker.Generation != old.Generation+1 || taker.HighWaterMillis != 1234 || taker.Owner != "taker" {
		t.Errorf("ClaimWorker after expiry = %+v, want worker 0, generation %d, high water 1234 kept, owner taker", taker, old.Generation+1)
	}
	if l, err := s.RenewWorker(ctxT(t), old.WorkerID, old.Generation, shortTTL, 9999, 0); !errors.Is(err, store.ErrLeaseLost) {
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
			got, err := s.RenewWorker(ctxT(t), tt.giveWorker, tt.giveGeneration, longTTL, 5, 0)
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
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation+1, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("ReleaseWorker(%d, stale generation) = %v, want %v", a.WorkerID, err, store.ErrLeaseLost)
	}
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation, 0); err != nil {
		t.Fatalf("ReleaseWorker(%d, %d) = %v, want nil", a.WorkerID, a.Generation, err)
	}
	c := claim(t, s, "c", 1023, longTTL)
	if c.WorkerID != a.WorkerID || c.Generation != a.Generation+1 {
		t.Errorf("ClaimWorker after release = %+v, want worker %d generation %d", c, a.WorkerID, a.Generation+1)
	}
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("second ReleaseWorker by the old holder = %v, want %v", err, store.ErrLeaseLost)
	}
	if _, err := s.RenewWorker(ctx, c.WorkerID, c.Generation, longTTL, 0, 0); err != nil {
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
	if err := s.ReleaseWorker(ctx, l.WorkerID, l.Generation, 0); err != nil {
		t.Fatal(err)
	}
	y := claim(t, s, "y", 1023, longTTL)
	if y.HighWaterMillis != 1700000000001 || !y.HighWater().Equal(time.UnixMilli(1700000000001)) {
		t.Errorf("ClaimWorker after release: high water %d, want 1700000000001 kept in the row", y.HighWaterMillis)
	}
	// A graceful stop releases with its exact final mark, which may lower the row's: a stale
	// generation changes nothing, the holder's own release sets it exactly.
	if err := s.ReleaseWorker(ctx, y.WorkerID, y.Generation+1, 1600000000000); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("ReleaseWorker(stale generation, final mark) = %v, want %v", err, store.ErrLeaseLost)
	}
	if err := s.ReleaseWorker(ctx, y.WorkerID, y.Generation, 1650000000000); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, s, "z", 1023, longTTL); got.WorkerID != y.WorkerID || got.HighWaterMillis != 1650000000000 {
		t.Errorf("ClaimWorker after a release with final mark 1650000000000: worker %d high water %d, want worker %d with the final mark",
			got.WorkerID, got.HighWaterMillis, y.WorkerID)
	}
}

func testNoFreeWorker(t *testing.T, s store.LeaseStore) {
	for i := range 3 {
		if l := claim(t, s, "x", 2, longTTL); l.WorkerID != int64(i) {
			t.Fatalf("claim %d got worker %d", i, l.WorkerID)
		}
	}
	l, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: "late", MaxWorker: 2, TTL: longTTL})
	if !errors.Is(err, store.ErrNoFreeWorker) || !strings.Contains(err.Error(), "0..2") {
		t.Errorf("ClaimWorker with IDs 0..2 taken = %+v, %v, want %v naming 0..2", l, err, store.ErrNoFreeWorker)
	}
}

// testWiderRange: a claim with a larger maxWorker adds the missing rows; a
// smaller one never hands out IDs beyond it.
func testWiderRange(t *testing.T, s store.LeaseStore) {
	claim(t, s, "a", 0, longTTL)
	if _, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: "b", MaxWorker: 0, TTL: longTTL}); !errors.Is(err, store.ErrNoFreeWorker) {
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
		{"claim maxWorker -1", func() error {
			_, err := s.ClaimWorker(ctx, store.Claim{Owner: "x", MaxWorker: -1, TTL: time.Second})
			return err
		}},
		{"claim maxWorker too big", func() error {
			_, err := s.ClaimWorker(ctx, store.Claim{Owner: "x", MaxWorker: store.MaxLeaseWorker + 1, TTL: time.Second})
			return err
		}},
		{"claim zero TTL", func() error { _, err := s.ClaimWorker(ctx, store.Claim{Owner: "x", MaxWorker: 10, TTL: 0}); return err }},
		{"claim TTL too long", func() error {
			_, err := s.ClaimWorker(ctx, store.Claim{Owner: "x", MaxWorker: 10, TTL: 25 * time.Hour})
			return err
		}},
		{"renew negative worker", func() error { _, err := s.RenewWorker(ctx, -1, 1, time.Second, 0, 0); return err }},
		{"renew negative high water", func() error { _, err := s.RenewWorker(ctx, 0, 1, time.Second, -1, 0); return err }},
		{"renew tiny TTL", func() error { _, err := s.RenewWorker(ctx, 0, 1, time.Millisecond, 0, 0); return err }},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, store.ErrBadLease) {
			t.Errorf("%s: error %v, want %v", tt.name, err, store.ErrBadLease)
		}
	}
}

// testRange: claims stay inside MinWorker..MaxWorker, lowest first, and a
// full range says which one it searched.
func testRange(t *testing.T, s store.LeaseStore) {
	in := func(owner string) store.Claim {
		return store.Claim{Owner: owner, MinWorker: 512, MaxWorker: 514, TTL: longTTL}
	}
	for i := range 3 {
		l, err := s.ClaimWorker(ctxT(t), in(fmt.Sprint("r", i)))
		if err != nil || l.WorkerID != 512+int64(i) {
			t.Fatalf("ClaimWorker(512..514) #%d = %+v, %v, want worker %d", i, l, err, 512+i)
		}
	}
	l, err := s.ClaimWorker(ctxT(t), in("late"))
	if !errors.Is(err, store.ErrNoFreeWorker) || !strings.Contains(err.Error(), "512..514") {
		t.Errorf("ClaimWorker(512..514) with all taken = %+v, %v, want %v naming 512..514", l, err, store.ErrNoFreeWorker)
	}
	// The full range 0..1023 still starts at 0: the range's rows did not
	// take the lower IDs.
	if got := claim(t, s, "low", 1023, longTTL); got.WorkerID != 0 {
		t.Errorf("ClaimWorker(0..1023) after 512..514 = worker %d, want 0", got.WorkerID)
	}
	bad := store.Claim{Owner: "x", MinWorker: 5, MaxWorker: 4, TTL: longTTL}
	if _, err := s.ClaimWorker(ctxT(t), bad); !errors.Is(err, store.ErrBadLease) {
		t.Errorf("ClaimWorker(5..4) = %v, want %v", err, store.ErrBadLease)
	}
}

// testLiveHolders: the live rows carry the clock their holders reported with
// the last claim or renewal; expired and released rows are not listed.
func testLiveHolders(t *testing.T, s store.LeaseStore) {
	ctx := ctxT(t)
	a, err := s.ClaimWorker(ctx, store.Claim{Owner: "a", MaxWorker: 1023, TTL: longTTL, ClockMillis: 1_700_000_000_000})
	if err != nil || a.ClockMillis != 1_700_000_000_000 {
		t.Fatalf("ClaimWorker with a clock = %+v, %v, want ClockMillis kept", a, err)
	}
	b := claim(t, s, "b", 1023, longTTL)
	c := claim(t, s, "c", 1023, shortTTL)
	rb, err := s.RenewWorker(ctx, b.WorkerID, b.Generation, longTTL, 0, 1_800_000_000_000)
	if err != nil || rb.ClockMillis != 1_800_000_000_000 {
		t.Fatalf("RenewWorker with a clock = %+v, %v", rb, err)
	}
	if err := s.ReleaseWorker(ctx, a.WorkerID, a.Generation, 0); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, c, time.Now())
	a2, err := s.ClaimWorker(ctx, store.Claim{Owner: "a2", MaxWorker: 1023, TTL: longTTL, ClockMillis: 1_750_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	hs, now, err := s.LiveHolders(ctx)
	if err != nil {
		t.Fatalf("LiveHolders() = %v", err)
	}
	if d := now.Sub(before); d < -time.Second || d > time.Second {
		t.Errorf("LiveHolders: database now %v, local %v", now, before)
	}
	want := []store.Holder{{WorkerID: a2.WorkerID, Owner: "a2", ClockMillis: 1_750_000_000_000}, {WorkerID: b.WorkerID, Owner: "b", ClockMillis: 1_800_000_000_000}}
	if len(hs) != len(want) {
		t.Fatalf("LiveHolders() = %+v, want %+v (the released and the expired row left out)", hs, want)
	}
	for i, h := range hs {
		w := want[i]
		if h.WorkerID != w.WorkerID || h.Owner != w.Owner || h.ClockMillis != w.ClockMillis {
			t.Errorf("LiveHolders()[%d] = %+v, want %+v", i, h, w)
		}
		if h.WrittenAt.After(now) || now.Sub(h.WrittenAt) > 30*time.Second {
			t.Errorf("LiveHolders()[%d].WrittenAt = %v, database now %v", i, h.WrittenAt, now)
		}
		// expires_at as the claim or renewal that last wrote the row left it.
		if exp := []time.Time{a2.ExpiresAt, rb.ExpiresAt}[i]; !h.ExpiresAt.Truncate(time.Millisecond).Equal(exp.Truncate(time.Millisecond)) {
			t.Errorf("LiveHolders()[%d].ExpiresAt = %v, want %v (the row's expires_at)", i, h.ExpiresAt, exp)
		}
	}
}

// ClaimRounds and Claimers size RunClaimRace.
const (
	ClaimRounds = 5
	Claimers    = 16
)

// RunClaimRace runs Claimers concurrent claims on the handles (one or more
// stores on the same fresh, migrated database; handles[i%len(handles)] for
// claimer i), ClaimRounds times, and fails unless every round hands out
// Claimers distinct worker IDs, each to one claimer. Between rounds every
// lease is released, so each round races for the same lowest rows. Run it
// also on a store whose claim reads without its lock (TiDB's SKIP LOCKED
// neither locks nor skips): only the claim's guarded UPDATE then keeps the
// claimers apart, and without the guard several claimers get one ID.
func RunClaimRace(t *testing.T, handles []store.LeaseStore) {
	for round := range ClaimRounds {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex // guards got and errs
			got   []store.Lease
			errs  []error
			start = make(chan struct{})
		)
		for i := range Claimers {
			s := handles[i%len(handles)]
			wg.Go(func() {
				<-start
				l, err := s.ClaimWorker(ctxT(t), store.Claim{Owner: fmt.Sprintf("r%d-c%d", round, i), MaxWorker: 1023, TTL: longTTL})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				got = append(got, l)
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: %d of %d claims failed, first: %v", round, len(errs), Claimers, errs[0])
		}
		holders := map[int64][]string{}
		for _, l := range got {
			holders[l.WorkerID] = append(holders[l.WorkerID], l.Owner)
		}
		if len(holders) != Claimers {
			var shared []string
			for id, owners := range holders {
				if len(owners) > 1 {
					shared = append(shared, fmt.Sprintf("worker %d held by %v", id, owners))
				}
			}
			slices.Sort(shared)
			t.Fatalf("round %d: %d claimers got %d distinct worker IDs: %s", round, Claimers, len(holders), strings.Join(shared, "; "))
		}
		for _, l := range got {
			if err := handles[0].ReleaseWorker(ctxT(t), l.WorkerID, l.Generation, 0); err != nil {
				t.Fatalf("round %d: ReleaseWorker(%d, %d) = %v: the claim's generation is not the row's", round, l.WorkerID, l.Generation, err)
			}
		}
	}
}
