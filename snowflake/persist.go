package snowflake

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leaf-go/leaf/internal/atomicfile"
)

// FinalHighWater is a HighWater that can also store an exact, possibly lower, mark at a
// graceful shutdown. The running generator stores marks a window ahead of the clock, so a
// restart waits until its clock has passed the last one (up to Settings.HighWaterWindow, 3 s
// by default). When the generator has stopped for good it knows the exact last issued
// millisecond, and a mark one past it is enough: a restart with a correct clock issues at
// once. After a crash the ahead-of-the-clock mark stays and the restart waits, as it must.
//
// Implemented by FileHighWater, StaticSource and zkworker.Worker. StoreFinal may lower the
// stored mark; it is called once, after the last ID was issued.
type FinalHighWater interface {
	StoreFinal(ctx context.Context, mark time.Time) error
}

// Seal stops the generator for good, at a graceful shutdown: Next issues nothing afterwards
// (ErrSealed) and Ready reports it. When the generator's HighWater is a FinalHighWater and an
// ID was issued, Seal then stores the exact mark (last issued millisecond + 1 ms), so that
// the next run issues from there without waiting out the window. It returns the store's error
// (the stored, higher mark then stays: the next run waits, which is safe). Safe to call more
// than once and concurrently with Next; the generator must not be used for IDs afterwards.
func (g *Generator) Seal(ctx context.Context) error {
	g.mu.Lock()
	g.sealed = true
	last, f := g.lastMillis, g.flight
	g.mu.Unlock()
	if f != nil {
		// A mark store still in flight must not land after the final mark: wait for it.
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("%w: store the final mark: a store in flight did not finish: %w", ErrHighWater, ctx.Err())
		}
	}
	if last == math.MinInt64 || g.hwWatch == nil {
		return nil
	}
	fh, ok := g.hwWatch.HighWater.(FinalHighWater)
	if !ok {
		return nil
	}
	if err := fh.StoreFinal(ctx, time.UnixMilli(last+1)); err != nil {
		return fmt.Errorf("%w: store the final mark %d: %w", ErrHighWater, last+1, err)
	}
	return nil
}

// StoreFinal writes mark (truncated to the millisecond) even when it is lower than the stored
// one: the exact mark of a graceful shutdown ([FinalHighWater]).
func (f *FileHighWater) StoreFinal(ctx context.Context, mark time.Time) error {
	ms := mark.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := atomicfile.Write(f.path, []byte(strconv.FormatInt(ms, 10)+"\n")); err != nil {
		return err
	}
	f.stored = ms
	return nil
}

// StoreFinal writes the exact mark to the file: [FileHighWater.StoreFinal].
func (s *StaticSource) StoreFinal(ctx context.Context, mark time.Time) error {
	return s.hw.StoreFinal(ctx, mark)
}

var (
	_ FinalHighWater = (*FileHighWater)(nil)
	_ FinalHighWater = (*StaticSource)(nil)
)
