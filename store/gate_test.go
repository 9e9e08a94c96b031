package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/store"
)

func TestGate(t *testing.T) {
	var g store.Gate
	if err := g.Check(); !errors.Is(err, store.ErrNotOpen) {
		t.Errorf("Check() of the zero Gate = %v, want %v", err, store.ErrNotOpen)
	}
	g.Fail(context.DeadlineExceeded)
	err := g.Check()
	if !errors.Is(err, store.ErrNotOpen) || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Errorf("Check() after Fail = %v, want %v with the failure's text", err, store.ErrNotOpen)
	}
	// A caller must not take the start's timeout for its own.
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check() after Fail(%v) = %v, matches it", context.DeadlineExceeded, err)
	}
	g.Open()
	g.Fail(errors.New("late"))
	if err := g.Check(); err != nil {
		t.Errorf("Check() after Open = %v, want nil", err)
	}
}

// TestGateSettle: a failed start keeps the gate closed with its error; a
// successful one opens it.
func TestGateSettle(t *testing.T) {
	var g store.Gate
	refused := errors.New("connection refused")
	if err := g.Settle(refused); err != refused {
		t.Errorf("Settle(%v) = %v, want it back", refused, err)
	}
	if err := g.Check(); !errors.Is(err, store.ErrNotOpen) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Check() after a failed start = %v, want %v naming it", err, store.ErrNotOpen)
	}
	if err := g.Settle(nil); err != nil {
		t.Errorf("Settle(nil) = %v", err)
	}
	if err := g.Check(); err != nil {
		t.Errorf("Check() after a successful start = %v, want nil", err)
	}
}
