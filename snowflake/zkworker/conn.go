package zkworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkLogger sends go-zookeeper's log lines to slog at debug level.
type zkLogger struct{ l *slog.Logger }

// Printf implements zk.Logger.
func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// connect opens a session, waiting at most ConnectTimeout and until ctx ends.
func (w *Worker) connect(ctx context.Context) (*zk.Conn, error) {
	conn, events, err := zk.Connect(w.opts.Servers, w.opts.SessionTimeout,
		zk.WithLogger(zkLogger{w.log}), zk.WithLogInfo(false))
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

// reconnect replaces a connection that has had no session for long. go-zookeeper retries
// forever with the last zxid it has seen, and a ZooKeeper that lost its data (a new ensemble)
// refuses such a client for good ("client must try another server"); a new connection starts
// from zxid 0. The node is created again by the next upload.
func (w *Worker) reconnect(since time.Duration) {
	conn, events, err := zk.Connect(w.opts.Servers, w.opts.SessionTimeout,
		zk.WithLogger(zkLogger{w.log}), zk.WithLogInfo(false))
	if err != nil {
		w.log.Warn("zkworker: new ZooKeeper connection failed", "err", err)
		return
	}
	go drain(events)
	w.log.Warn("zkworker: no ZooKeeper session for a while; opening a new connection", "without_session", since.Round(time.Millisecond))
	w.conn.Swap(conn).Close()
}
