package api

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// failureLogEvery is the least time between two log lines of failed ID
// requests of one kind (see logIDFailure): a refusal that lasts (a clock
// behind the persisted high-water mark, a lost lease, a database that does
// not answer) repeats on every request, up to thousands a second.
const failureLogEvery = time.Second

// logLimit lets one log line through per interval and counts the others.
// It is safe for concurrent use.
type logLimit struct {
	every time.Duration

	mu sync.Mutex // guards last, suppressed
	// last is when the last line went out; zero before the first.
	last time.Time
	// suppressed counts the lines held back since last.
	suppressed int64
}

// allow reports whether a line may be written at now, and how many were held
// back since the previous one.
func (l *logLimit) allow(now time.Time) (ok bool, suppressed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every && now.Sub(l.last) > -l.every {
		l.suppressed++
		return false, 0
	}
	l.last, suppressed, l.suppressed = now, l.suppressed, 0
	return true, suppressed
}

// failureLogs holds one logLimit per kind of failed ID request.
type failureLogs struct {
	mu    sync.Mutex // guards kinds
	kinds map[string]*logLimit
}

// limit returns the logLimit of kind, made on first use. The kinds are a
// small fixed set (see failureKind), so the map stays small.
func (f *failureLogs) limit(kind string) *logLimit {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kinds == nil {
		f.kinds = map[string]*logLimit{}
	}
	l := f.kinds[kind]
	if l == nil {
		l = &logLimit{every: failureLogEvery}
		f.kinds[kind] = l
	}
	return l
}

// failureKind names what a failed ID request ran into, for rate-limiting its
// log lines: refusals for a clock behind share one kind on every route;
// other failures are told apart by their Leaf code and the API's error code
// (failures), so that a flood of one failure does not hide the first
// line of another.
func failureKind(err error, leafCode int64) string {
	if cb := (*snowflake.ClockBackwardsError)(nil); errors.As(err, &cb) {
		return "clock_behind"
	}
	return strconv.FormatInt(leafCode, 10) + "/" + failureOf(err, idRoutes, failure{}).code
}

// logIDFailure writes the warn line of a failed ID request, at most one per
// failureLogEvery for each kind of failure (failureKind); the next line
// written carries the count held back since the previous one as suppressed.
// The metrics count every failure.
func (h *handler) logIDFailure(ctx context.Context, msg string, err error, leafCode int64, attrs ...slog.Attr) {
	attrs = append(attrs, slog.Any("err", err))
	ok, suppressed := h.failureLog.limit(failureKind(err, leafCode)).allow(h.d.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("suppressed", suppressed))
	}
	h.d.Logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}
