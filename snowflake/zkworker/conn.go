package zkworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkLogger sends go-zookeeper's log lines to slog at debug level, and reads the session
// timeout that the server negotiated from its "authenticated" line into negotiatedMs
// (go-zookeeper has no accessor for it; ZooKeeper clamps the requested timeout into
// [2, 20] × its tickTime).
type zkLogger struct {
	l            *slog.Logger
	negotiatedMs *atomic.Int64
}

// Printf implements zk.Logger.
func (z zkLogger) Printf(format string, args ...any) {
	if format == "authenticated: id=%d, timeout=%d" && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			z.negotiatedMs.Store(int64(ms))
		}
	}
	z.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// connect opens a session, waiting at most ConnectTimeout and until ctx ends.
func (w *Worker) connect(ctx context.Context) (*zk.Conn, error) {
	conn, events, err := zk.Connect(w.opts.Servers, w.opts.SessionTimeout,
		zk.WithLogger(zkLogger{l: w.log, negotiatedMs: &w.negotiatedMs}), zk.WithLogInfo(true))
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(w.opts.ConnectTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil, zk.ErrClosing
			}
			if ev.State == zk.StateHasSession {
				go drain(events)
				if n := time.Duration(w.negotiatedMs.Load()) * time.Millisecond; n > 0 && n != w.opts.SessionTimeout {
					w.log.Warn("zkworker: ZooKeeper negotiated another session timeout than requested; the lease uses the shorter, a takeover waits the longer",
						"requested", w.opts.SessionTimeout, "negotiated", n)
				}
				return conn, nil
			}
		case <-timer.C:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session within %v: %w", w.opts.ConnectTimeout, zk.ErrNoServer)
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		}
	}
}

// drain empties the session's event channel until the connection closes it. go-zookeeper drops
// events when the channel is full, so this only keeps the log quiet; it ends with Conn.Close.
func drain(events <-chan zk.Event) {
	for range events {
	}
}

// unreachable reports whether err means the ZooKeeper ensemble cannot be reached (fall back to
// the cache) rather than a refusal (fatal).
func unreachable(err error) bool {
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrClosing)
}
