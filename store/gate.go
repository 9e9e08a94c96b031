package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrNotOpen is returned, with the error of the last failed start as text,
// by every call of a server dialect's store that was built but not yet
// started (postgres.New, mysql.New, store/dsn's New): its database has not
// answered since the start, and no statement reached it. leaf-server keeps
// calling the store's Start in the background meanwhile; once one succeeds
// the calls go to the database.
var ErrNotOpen = errors.New("store: database not reachable since start")

// Gate holds back the connections of a server dialect's store until its
// start (a ping and the migrations, over connections of the start's own)
// has succeeded. The dialect checks it where a connection is made
// (pgxpool's BeforeConnect, the MySQL connector's Connect), so that every
// method fails at once with [ErrNotOpen] and none can forget to: the pool
// holds no connection while the gate is closed. The zero Gate is closed;
// once open it stays open. Safe for concurrent use.
type Gate struct {
	open atomic.Bool

	mu      sync.Mutex // guards lastErr
	lastErr error
}

// Check returns nil once the gate is open. Before, it returns
// [ErrNotOpen] with the text of the last error passed to Fail: as text
// only, so that a call does not match that error's sentinels (a start that
// timed out must not make every call look like its caller's own
// context.DeadlineExceeded). It does no I/O.
func (g *Gate) Check() error {
	if g.open.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastErr == nil {
		return fmt.Errorf("%w: not started", ErrNotOpen)
	}
	return fmt.Errorf("%w: %v", ErrNotOpen, g.lastErr)
}

// Fail records err as the error of the last failed start, which Check
// reports.
func (g *Gate) Fail(err error) {
	g.mu.Lock()
	g.lastErr = err
	g.mu.Unlock()
}

// Open opens the gate for good: Check returns nil from now on.
func (g *Gate) Open() { g.open.Store(true) }

// Settle records the outcome of a start and returns err: nil opens the
// gate for good, an error is what Check reports until a later start
// succeeds. It is what each dialect's Start does with its ping and
// migrations.
func (g *Gate) Settle(err error) error {
	if err != nil {
		g.Fail(err)
		return err
	}
	g.Open()
	return nil
}
