// Package segment hands out IDs from database-reserved segments, as Leaf's
// SegmentIDGenImpl does.
//
// Per biz_tag a buffer (Leaf's SegmentBuffer) holds two segments, current and
// next. IDs come from the current one by a single atomic add, with no lock.
// Once more than 10% of it is used one background load reserves the next
// segment [max_id-step, max_id) in one transaction. When current runs dry the
// buffer switches to next; a caller that finds no next waits for the load in
// flight, bounded by [Config.WaitTimeout] and its context, then gets
// [ErrNoSegment].
//
// The step adapts as Leaf's: doubled when the previous load was less than 15
// minutes ago (up to 1,000,000), halved after 30 minutes, never below the
// step column, which is re-read on every load and never written.
//
// Error codes, as Leaf's: -1 ([ErrNotInitialized]) only for a tag not in the
// cache while the tag list was never read and the database does not answer;
// -2 ([ErrTagNotFound]) for a tag without a row; -3 ([ErrNoSegment]) when no
// segment is ready, including a first load of a known tag that failed (Leaf
// answers -3 there too).
//
// Deliberately unlike Leaf: a tag missing from the cache is looked up in the
// database at once, many names per query (miss.go; -5 when too many
// unknown names wait, retry later) instead of waiting up to a minute for
// the refresh; a failed load backs off
// exponentially instead of being retried on every request; a step below the
// step column (raised by an operator) is lifted to it; a segment with IDs
// below 1 is cut at 1 (refused if empty); and a segment starting below the
// tag's high-water mark is refused ([ErrRewound]).
//
// Restore safety (docs/contract.md §2.6): per tag the generator remembers the
// highest max_id of a segment it accepted, its high-water mark, and with
// [Config.Marks] persists it ([LogMarks]: a log in the data directory)
// before any ID of the segment is handed out, so a restarted server remembers
// it too. A segment that starts below the mark means the database went back
// in time (restored backup, failover to a lagging replica): it is refused,
// the tag answers [ErrNoSegment] (-3) wrapping [ErrRewound], Stats shows
// Refusing, and the refusal is logged at error level with tag, segment and
// mark. The tag keeps refusing until max_id is at or above the mark again,
// which is what an operator's fence does
// (`leafctl tag fence <tag> --min <mark>`); then the next retry serves by
// itself. Retries back off up to
// [Config.RefuseRetryMax] (30 s). Every allocation carries the tag's mark
// ([Store.Allocate]), and the store's UPDATE itself refuses a row below it
// ([store.ErrBelowMark]), so noticing burns nothing and cannot carry max_id
// past another server's lower mark, even when the table is rewound just
// before the allocation.
//
// Every tag refresh also reads the table's max_id into the marks (observe),
// so a server whose own last segment is old still knows what the other
// servers took up to its last refresh.
//
// Limits: the mark is this server's own. Segments another server took after
// this server's last refresh are unknown to it, so fence to the highest mark
// of all servers, not to the mark of one; and a server with an empty data
// directory has no mark and serves a rewound table at once. Fence promptly,
// or stop all servers, fence, then start them.
//
// A caller that asks for IDs of one tag over and over can resolve it once
// with [Generator.Tag]: the handle's Get is [Generator.Get] without the lookup
// of the tag in the cache (a string hash and map probe, most of Get's time;
// compare BenchmarkGet and BenchmarkTagGet).
//
// An ordered tag ([store.Row.Ordered], docs/contract.md §12) has no
// buffered segment: each request waits for the next allocation of exactly
// the IDs the requests waiting together asked for (a group commit, one
// database write per batch), so that its IDs increase in real time across
// every generator sharing the database. See ordered.go.
//
// The package is pure: it talks to the database only through the [Store]
// interface and exposes its state through [Generator.Stats].
package segment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaf-go/leaf/store"
)

// Errors returned by [Generator.Get], and for the same cases by
// [Generator.Tag] and [Tag.Get]. Each maps to one of Leaf's result codes
// through Code. Causes are wrapped, so errors.Is also matches the underlying
// store or context error.
var (
	// ErrNotInitialized is returned by Get for a tag that is not in the
	// cache while the generator has never read the tag list and the
	// database does not answer the miss lookup (Leaf code -1,
	// EXCEPTION_ID_IDCACHE_INIT_FALSE).
	ErrNotInitialized = errors.New("segment: not initialised")
	// ErrTagNotFound is returned by Get when leaf_alloc has no row for the
	// tag (a lookup that found none is remembered for one second), or when
	// the tag was removed by a refresh (Leaf code -2,
	// EXCEPTION_ID_KEY_NOT_EXISTS). A name refused a lookup is
	// [ErrMissLimited]: nobody looked.
	ErrTagNotFound = errors.New("segment: biz tag not found")
	// ErrNoSegment is returned by Get when the current segment is spent and
	// no next segment arrived within [Config.WaitTimeout] (or the caller's
	// context ended first), when a load failed (the store error is wrapped),
	// while a failed tag is in backoff, or when the lookup of a tag not in
	// the cache failed or was not answered within [Config.WaitTimeout]
	// (Leaf code -3, EXCEPTION_ID_TWO_SEGMENTS_ARE_NULL).
	ErrNoSegment = errors.New("segment: no segment ready")
	// ErrRewound is returned (wrapped in [ErrNoSegment]) when the store
	// refuses an allocation because max_id is below the tag's high-water
	// mark ([store.ErrBelowMark], also wrapped), or hands out a segment that
	// starts below it; the mark is the highest max_id this generator (or,
	// with [Config.Marks], an earlier run on the same data directory)
	// accepted. The database went back in time (restored backup, failover
	// to a lagging replica). Every allocation is refused until max_id is
	// fenced forward to the mark.
	ErrRewound = errors.New("segment: store went back in time")
	// ErrClosed is returned by Get after Close (Code maps it to -3).
	ErrClosed = errors.New("segment: generator closed")
	// ErrMissLimited is returned by Get and Tag for a tag not in the cache
	// (and by segment/group's Groups.Next for a name not declared here) when 8,192
	// unknown names wait for the next lookup round already: nobody looked;
	// retry later. Code -5 (ours; Leaf has no such code).
	ErrMissLimited = errors.New("segment: too many unknown names wait for a lookup")
)

// Code maps an error from Get to Leaf's result code: 0 for nil, -1 for
// [ErrNotInitialized], -2 for [ErrTagNotFound], -5 for [ErrMissLimited] (ours),
// and -3 for [ErrNoSegment],
// [ErrClosed] and any other error (Leaf's EXCEPTION_ID_TWO_SEGMENTS_ARE_NULL
// is its catch-all for "no ID now").
func Code(err error) int64 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotInitialized):
		return -1
	case errors.Is(err, ErrTagNotFound):
		return -2
	case errors.Is(err, ErrMissLimited):
		return -5
	default:
		return -3
	}
}

// Store is the leaf_alloc database exactly as the generator uses it. Every
// [store.Store] (store/postgres, store/mysql, store/sqlite) is one; see
// [store.Store] for the full contract of each method. It must be safe for
// concurrent use.
type Store interface {
	// Allocate reserves the next segment of tag; step <= 0 means the row's
	// own step, step > 0 a custom step. mark is the tag's high-water mark
	// (<= 1: none): a row whose max_id is below it is refused by the
	// allocating statement itself, unchanged. Errors: [store.ErrTagNotFound]
	// for a missing row, [store.ErrBelowMark], [store.ErrOverflow],
	// [store.ErrBadStep], or a driver error.
	Allocate(ctx context.Context, tag string, step, mark int64) (store.Allocation, error)
	// Rows returns every leaf_alloc row: the tag list of a refresh, and the
	// max_id of every row for the high-water marks.
	Rows(ctx context.Context) ([]store.Row, error)
	// FindTags maps the names among tags that have a leaf_alloc row to
	// whether each is an ordered tag: the miss lookup of tags not in the
	// cache, one round for many names.
	FindTags(ctx context.Context, tags []string) (map[string]bool, error)
	// MaxID reads the max_id of one row without changing it: a load whose
	// allocation was refused below the mark reads it to match another
	// server's tail return. Errors: [store.ErrTagNotFound] for a missing
	// row.
	MaxID(ctx context.Context, tag string) (int64, error)
}

// Every [store.Store] (postgres, mysql, sqlite) is a Store.
var _ Store = store.Store(nil)

// Clock is the generator's source of time, injected so that tests can move
// time by hand. Now must be safe for concurrent use. The generator uses Now
// for the dynamic step, backoff and the negative cache of miss lookups; it never
// calls Sleep (the interface is shared with package snowflake).
type Clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

// SystemClock is the real Clock: time.Now and time.Sleep.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep calls time.Sleep(d).
func (SystemClock) Sleep(d time.Duration) { time.Sleep(d) }

// Defaults used for zero fields of Config. The step and window values are
// Leaf's (SegmentIDGenImpl.MAX_STEP and SEGMENT_DURATION).
const (
	// DefaultWaitTimeout is [Config.WaitTimeout]'s default: 1 s.
	DefaultWaitTimeout = time.Second
	// DefaultRefreshInterval is [Config.RefreshInterval]'s default: 60 s, as
	// Leaf's updateCacheFromDbAtEveryMinute.
	DefaultRefreshInterval = 60 * time.Second
	// DefaultLoadTimeout is [Config.LoadTimeout]'s default: 5 s.
	DefaultLoadTimeout = 5 * time.Second
	// DefaultRetryMin is [Config.RetryMin]'s default: 100 ms.
	DefaultRetryMin = 100 * time.Millisecond
	// DefaultRetryMax is [Config.RetryMax]'s default: 10 s.
	DefaultRetryMax = 10 * time.Second
	// DefaultMaxStep is [Config.MaxStep]'s default, in IDs (Leaf's MAX_STEP).
	DefaultMaxStep = 1_000_000
	// DefaultGrowWindow is [Config.GrowWindow]'s default: 15 min (Leaf's
	// SEGMENT_DURATION).
	DefaultGrowWindow = 15 * time.Minute
	// DefaultShrinkWindow is [Config.ShrinkWindow]'s default: 30 min (twice
	// Leaf's SEGMENT_DURATION).
	DefaultShrinkWindow = 30 * time.Minute
	// DefaultRefuseRetryMax is [Config.RefuseRetryMax]'s default: 30 s (or
	// RetryMax when that is longer).
	DefaultRefuseRetryMax = 30 * time.Second
)

// Config tunes a Generator. The zero value means the defaults; New returns an
// error for a negative duration or MaxStep, for RetryMax <
// RetryMin, for RefuseRetryMax < RetryMax and for ShrinkWindow < GrowWindow.
type Config struct {
	// WaitTimeout bounds how long Get waits for the load in flight when the
	// current segment is spent, measured on the real clock. Default 1 s.
	WaitTimeout time.Duration
	// RefreshInterval is the period of the tag-list re-read (Leaf's
	// updateCacheFromDbAtEveryMinute). Default 60 s.
	RefreshInterval time.Duration
	// LoadTimeout bounds one allocation transaction and one tag-list read.
	// No caller waits that long: Get waits at most WaitTimeout, for a first
	// segment too, while the load goes on. Default 5 s.
	LoadTimeout time.Duration
	// RetryMin and RetryMax bound the exponential backoff after a failed
	// load; the current segment keeps serving meanwhile. Defaults 100 ms
	// and 10 s.
	RetryMin, RetryMax time.Duration
	// MaxStep caps the dynamic step, in IDs: the step doubles only while
	// twice it stays <= MaxStep (Leaf's MAX_STEP). Default 1,000,000.
	MaxStep int64
	// GrowWindow: a load less than this after the previous one doubles the
	// step (Leaf's SEGMENT_DURATION). Default 15 min.
	GrowWindow time.Duration
	// ShrinkWindow: a load at least this long after the previous one halves
	// the step, never below the DB step (Leaf's 2*SEGMENT_DURATION).
	// Default 30 min.
	ShrinkWindow time.Duration
	// Marks persists the per-tag high-water marks (restore safety, see the
	// package doc); New loads them and fails if they cannot be read. Default
	// nil: marks live in memory only and a restart forgets them. leaf-server
	// passes a [LogMarks] in its data directory.
	Marks Marks
	// RefuseRetryMax caps the backoff between retries of a refusing tag
	// (RetryMin doubling up to it). Default 30 s, or RetryMax when longer.
	RefuseRetryMax time.Duration
	// Clock is the source of time. Default [SystemClock].
	Clock Clock
	// Logger receives load failures and refresh errors. Default
	// slog.Default().
	Logger *slog.Logger
	// Tails, when set, lets the generator give the unused tails back on a
	// graceful stop ([Generator.ReturnTails]) and take in the tails other
	// servers gave back (a max_id below this server's mark that a return
	// explains is not a rewind). Needs Marks that can lower a mark
	// ([LogMarks]) to give tails back. Default nil: neither (every restart
	// skips the buffered IDs, and a returned tail below this server's mark
	// is refused as a rewind). leaf-server passes its store unless
	// --return-tail=false.
	Tails TailStore
	// OnLoad, when set, is called once per segment load, failed ones
	// included, with what metrics need (see [LoadEvent]); a load that found no
	// row ([store.ErrTagNotFound]) is a lookup, not a load, and is not
	// reported. It is called from the loading goroutine, without any lock of
	// the generator held, before the callers waiting for the load are woken.
	// It must be safe for concurrent use (loads of different tags run
	// concurrently), return quickly, and not call the Generator. The fast
	// path never calls it. Default nil.
	OnLoad func(LoadEvent)
}

// withDefaults returns c with zero fields filled in, or an error naming the
// first invalid field.
func (c Config) withDefaults() (Config, error) {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"WaitTimeout", &c.WaitTimeout, DefaultWaitTimeout},
		{"RefreshInterval", &c.RefreshInterval, DefaultRefreshInterval},
		{"LoadTimeout", &c.LoadTimeout, DefaultLoadTimeout},
		{"RetryMin", &c.RetryMin, DefaultRetryMin},
		{"RetryMax", &c.RetryMax, DefaultRetryMax},
		{"GrowWindow", &c.GrowWindow, DefaultGrowWindow},
		{"ShrinkWindow", &c.ShrinkWindow, DefaultShrinkWindow},
		{"RefuseRetryMax", &c.RefuseRetryMax, max(DefaultRefuseRetryMax, c.RetryMax)},
	} {
		switch {
		case *d.v < 0:
			return c, fmt.Errorf("segment: config %s = %v, want >= 0", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if c.MaxStep < 0 {
		return c, fmt.Errorf("segment: config MaxStep = %d, want >= 0", c.MaxStep)
	}
	if c.MaxStep == 0 {
		c.MaxStep = DefaultMaxStep
	}
	if c.RetryMax < c.RetryMin {
		return c, fmt.Errorf("segment: config RetryMax %v < RetryMin %v", c.RetryMax, c.RetryMin)
	}
	if c.RefuseRetryMax < c.RetryMax {
		return c, fmt.Errorf("segment: config RefuseRetryMax %v < RetryMax %v", c.RefuseRetryMax, c.RetryMax)
	}
	if c.ShrinkWindow < c.GrowWindow {
		return c, fmt.Errorf("segment: config ShrinkWindow %v < GrowWindow %v", c.ShrinkWindow, c.GrowWindow)
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
