package api

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/leaf-go/leaf/snowflake"
)

// clockLogEvery is the least time between two log lines of refusals for a
// clock behind (a restart before the persisted high-water mark refuses every
// snowflake request for up to seconds).
const clockLogEvery = time.Second

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

// logIDFailure writes the warn line of a failed ID request. Refusals for a
// clock behind (*snowflake.ClockBackwardsError) come in floods, one per
// request, so at most one of them is logged per clockLogEvery, with the count
// of those held back since the previous line.
func (h *handler) logIDFailure(ctx context.Context, msg string, err error, attrs ...slog.Attr) {
	attrs = append(attrs, slog.Any("err", err))
	if cb := (*snowflake.ClockBackwardsError)(nil); errors.As(err, &cb) {
		ok, suppressed := h.clockLog.allow(h.d.Now())
		if !ok {
			return
		}
		if suppressed > 0 {
			attrs = append(attrs, slog.Int64("suppressed", suppressed))
		}
	}
	h.d.Logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}
