package snowflake

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var (
	// ErrInvalidLayout is returned by Layout.Validate and New for a layout whose widths, epoch
	// or end date cannot work.
	ErrInvalidLayout = errors.New("snowflake: invalid layout")
	// ErrTimeRange is returned by Compose for a timestamp outside the layout, and by
	// Generator.Next when the clock reads before the epoch or at or after Layout.End.
	ErrTimeRange = errors.New("snowflake: timestamp outside the layout")
	// ErrWorkerRange is returned by Compose, Layout.CheckWorker and New for a worker ID
	// outside 0..Layout.MaxWorker().
	ErrWorkerRange = errors.New("snowflake: worker ID out of range")
	// ErrSequenceRange is returned by Compose for a sequence outside 0..Layout.MaxSequence().
	ErrSequenceRange = errors.New("snowflake: sequence out of range")
	// ErrDatacenterRange is returned by ComposeTwitter for a datacenter outside its field.
	ErrDatacenterRange = errors.New("snowflake: datacenter out of range")
	// ErrMachineRange is returned by ComposeTwitter for a machine outside 0..31.
	ErrMachineRange = errors.New("snowflake: machine out of range")

	// ErrClockBehind is returned by Generator.Next (inside a *ClockBackwardsError) when the clock
	// was behind the last issued millisecond by at most Settings.MaxBackwardWait, and is still
	// behind after waiting twice that offset. Leaf's code -1 (SnowflakeIDGenImpl).
	ErrClockBehind = errors.New("snowflake: clock still behind the last issued millisecond after waiting")
	// ErrInterrupted is returned by Generator.Next when its context is done; the error also
	// wraps the context's error. Leaf's code -2 (an interrupted wait in SnowflakeIDGenImpl).
	ErrInterrupted = errors.New("snowflake: interrupted")
	// ErrClockBackwards is returned by Generator.Next (inside a *ClockBackwardsError) when the
	// clock is behind the last issued millisecond by more than Settings.MaxBackwardWait, or
	// stepped back again during a wait. Leaf's code -3 (SnowflakeIDGenImpl).
	ErrClockBackwards = errors.New("snowflake: clock moved backwards")
	// ErrClockBehindMark is returned by Generator.Next (inside a *ClockBackwardsError) while the
	// clock has not reached the high-water mark loaded at start: an earlier run may have issued
	// IDs up to just before that mark. Code -3. This closes Leaf's restart-after-rollback hole.
	ErrClockBehindMark = errors.New("snowflake: clock behind the persisted high-water mark")
	// ErrHighWater is returned by New when the high-water mark cannot be loaded, and by
	// Generator.Next when a new mark cannot be stored; no ID is issued past the stored mark.
	// Code -4. The error wraps the store's error.
	ErrHighWater = errors.New("snowflake: high-water mark")
	// ErrLeaseExpired is returned by Generator.Next once Settings.Lease reports that the worker
	// ID may belong to another node. Code -1.
	ErrLeaseExpired = errors.New("snowflake: worker ID lease may have expired")
	// ErrLayoutChange is returned by CheckLayoutChange when IDs of the new layout could repeat
	// IDs that the old layout issued.
	ErrLayoutChange = errors.New("snowflake: IDs of the new layout would repeat IDs already issued")
)

// ClockBackwardsError is returned by Generator.Next when the clock reads behind a time the
// generator must not go below. Err is ErrClockBehind, ErrClockBackwards or ErrClockBehindMark,
// and errors.Is matches it; Behind is how far behind the clock was at the last reading (a
// caller may use it as a Retry-After hint).
type ClockBackwardsError struct {
	// Behind is how far the clock read behind the limit, in the layout's resolution (ms).
	Behind time.Duration
	// Err is the sentinel: ErrClockBehind, ErrClockBackwards or ErrClockBehindMark.
	Err error
}

// Error implements error.
func (e *ClockBackwardsError) Error() string {
	return fmt.Sprintf("%v by %v", e.Err, e.Behind)
}

// Unwrap returns Err, so errors.Is(err, ErrClockBackwards) and the other sentinels match.
func (e *ClockBackwardsError) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel in Err (the same answer Unwrap gives errors.Is;
// spelled out so that the match does not depend on Err's own wrapping).
func (e *ClockBackwardsError) Is(target error) bool { return target == e.Err }

// Code maps an error from Generator.Next to Leaf's snowflake result code, as the
// Leaf-compatible HTTP API reports it in `Result{id=<code>, status=EXCEPTION}`: 0 for nil;
// -2 for ErrInterrupted (the caller's context ended); -3 for ErrClockBackwards and
// ErrClockBehindMark; -4 for ErrHighWater (leaf-go: a mark that could not be stored, e.g. on
// a full disk, is not Leaf's -1 "clock still behind"; Leaf has no such failure), also when
// the store's error wraps the store's own context error (a lease database that gave no
// answer before the store's deadline: the caller was not interrupted); -2 for any other
// error wrapping a context error; -1 for everything else (ErrClockBehind, ErrLeaseExpired,
// ErrTimeRange, …).
func Code(err error) int64 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInterrupted):
		return -2
	case errors.Is(err, ErrClockBackwards), errors.Is(err, ErrClockBehindMark):
		return -3
	case errors.Is(err, ErrHighWater):
		return -4
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return -2
	default:
		return -1
	}
}
