package segment

import "sync"

// markGroup is the group commit that FileMarks and LogMarks share: marks raised by concurrent
// Stores are staged, and one of the waiting callers (the writer) makes the whole group durable
// in one write while the others wait for it. Every field is guarded by the owner's mutex, which
// cond uses; the owner writes, then sets durable or failed and broadcasts.
type markGroup struct {
	cond *sync.Cond // signalled when a write ends; uses the owner's mutex
	// marks is every mark known durable, by tag.
	marks map[string]int64
	// staged holds marks waiting for the next write.
	staged map[string]int64
	// seq numbers staged changes; durable is the highest seq a successful write carried,
	// failed the highest a failed write carried.
	seq, durable, failed uint64
	// failErr is the error of the last failed write.
	failErr error
	// writing is true while one caller writes for the group.
	writing bool
}

// stage adds to staged the marks above the durable ones and returns the sequence number the
// caller waits for; 0 when every mark was already durable (nothing to wait for).
func (g *markGroup) stage(marks map[string]int64) uint64 {
	changed := false
	for tag, maxID := range marks {
		if old, ok := g.marks[tag]; ok && old >= maxID {
			continue
		}
		g.staged[tag] = max(g.staged[tag], maxID)
		changed = true
	}
	if !changed {
		return 0
	}
	g.seq++
	return g.seq
}

// turn waits until the marks staged as mine are durable (done, nil), their write failed
// (done, that error), or no one writes: then the caller is the writer, with writing set, and
// turn returns done false.
func (g *markGroup) turn(mine uint64) (done bool, err error) {
	for {
		switch {
		case g.durable >= mine:
			return true, nil
		case g.failed >= mine:
			return true, g.failErr
		case g.writing:
			g.cond.Wait()
			continue
		}
		g.writing = true
		return false, nil
	}
}
