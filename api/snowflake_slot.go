package api

import (
	"sync/atomic"

	"github.com/leaf-go/leaf/snowflake"
)

// SnowflakeSlot holds the snowflake generator in use and its worker ID source, swapped as a
// pair when leaf-server claims a worker ID again after a lost lease (a new claim, a new
// generator; the old generator refuses from its loss on, so no request is served by it
// afterwards). Every snowflake route, /readyz, the status page and /metrics read the pair at
// the time of the request. Safe for concurrent use.
type SnowflakeSlot struct {
	p atomic.Pointer[snowflakeInUse]
}

type snowflakeInUse struct {
	gen *snowflake.Generator
	src snowflake.Source
}

// NewSnowflakeSlot returns a slot holding gen (not nil) and src (may be nil: see
// Deps.SnowflakeSource).
func NewSnowflakeSlot(gen *snowflake.Generator, src snowflake.Source) *SnowflakeSlot {
	s := &SnowflakeSlot{}
	s.Store(gen, src)
	return s
}

// Store puts gen and src in use, atomically as a pair.
func (s *SnowflakeSlot) Store(gen *snowflake.Generator, src snowflake.Source) {
	s.p.Store(&snowflakeInUse{gen: gen, src: src})
}

// Load returns the generator and source in use.
func (s *SnowflakeSlot) Load() (*snowflake.Generator, snowflake.Source) {
	in := s.p.Load()
	if in == nil {
		return nil, nil
	}
	return in.gen, in.src
}

// snowflakeInUse returns the generator and source in use; a nil generator when snowflake mode
// is off.
func (h *handler) snowflakeInUse() (*snowflake.Generator, snowflake.Source) {
	if h.d.SnowflakeSlot == nil {
		return nil, nil
	}
	return h.d.SnowflakeSlot.Load()
}
