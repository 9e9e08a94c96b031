package segment

import (
	"context"
	"fmt"
	"strings"

	"github.com/leaf-go/leaf/store"
)

// TailStore is what a tail return needs from the database, beyond [Store]:
// the compare-and-set that lowers max_id and the records of returns. Every
// [store.Store] is one; see it for the contract of each method.
type TailStore interface {
	// ReturnTail lowers max_id of tag from from to to if it is still from,
	// recording the return as number seq; reports whether it did.
	ReturnTail(ctx context.Context, tag string, from, to, seq int64) (bool, error)
	// TailReturns lists the last return of every tag that had one.
	TailReturns(ctx context.Context) ([]store.TailReturn, error)
	// TailReturnOf reads the last return of tag; Seq 0 when none.
	TailReturnOf(ctx context.Context, tag string) (store.TailReturn, error)
}

var _ TailStore = store.Store(nil)

// tail is the unused end [to, from) of a tag's buffered segments at Close:
// from is the max_id of the last segment loaded, to the first ID no caller
// got.
type tail struct {
	tag      string
	from, to int64
}

// unusedTail returns the tail of a buffer whose current segment cur had used
// takes when it was retired and whose next segment was next (nil if none).
// With a next segment the tail runs to its end; it starts inside cur only
// when next begins where cur ends, since another server's segment may lie
// between them. Period rows of grouped tags are left out (ok false): their
// rows are run by segment/group, which this return was not designed with.
func unusedTail(tag string, cur, next *segment, used int64) (t tail, ok bool) {
	if cur == nil {
		return tail{}, false
	}
	if _, _, grouped := SplitRowTag(tag); grouped {
		return tail{}, false
	}
	t = tail{tag: tag, from: cur.max, to: cur.start + min(used, cur.size)}
	if next != nil {
		t.from = next.max
		if next.start != cur.max {
			t.to = next.start
		}
	}
	return t, t.to < t.from
}

// WaitLoads waits until no segment load is in flight, or ctx ends (its
// error). A graceful stop calls it after the last request was served and
// before Close, so that a load under way becomes the next segment, whose
// end the tail return compares with, instead of being cancelled after it
// may have committed (its IDs would then be skipped and the compare-and-set
// would miss). It starts no load; Gets still running may start more.
func (g *Generator) WaitLoads(ctx context.Context) error {
	for _, b := range *g.cache.Load() {
		b.mu.Lock()
		call := b.load
		b.mu.Unlock()
		if call == nil {
			continue
		}
		select {
		case <-call.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// TailStats is what [Generator.ReturnTails] did.
type TailStats struct {
	// Tags counts the tags whose tail was given back; Missed those whose
	// compare-and-set found another allocation after ours (or an error).
	Tags, Missed int
	// IDs is the number of IDs given back.
	IDs int64
}

// ReturnTails gives the unused tails that Close found back to the database
// (issue 22 item 2; docs/contract.md §2.6 rule 9): per tag, first the high-water mark
// is lowered to the first unused ID (durable, with the number of the return),
// then max_id is lowered by [store.Store.ReturnTail]'s compare-and-set, which
// does nothing when anyone allocated after this server. A tag whose mark lies
// above the tail's end (the table showed a later allocation) is left alone.
// between, when not nil, is called for each tag between the two steps (the
// fault tests pause there). Call it after Close; before Close, or without
// [Config.Tails], it does nothing. Errors: the first failure; the other tags
// are still tried. A failure leaves the tail skipped, never an ID twice.
func (g *Generator) ReturnTails(ctx context.Context, between func(tag string)) (TailStats, error) {
	var st TailStats
	g.goMu.Lock()
	tails := g.tails
	g.tails = nil
	g.goMu.Unlock()
	ts := g.cfg.Tails
	if ts == nil {
		return st, nil
	}
	var first error
	fail := func(err error) {
		st.Missed++
		if first == nil {
			first = err
		}
	}
	for _, t := range tails {
		g.marksMu.Lock()
		high := g.highs[t.tag]
		g.marksMu.Unlock()
		if high > t.from {
			st.Missed++ // the table showed a later allocation: CAS would miss
			continue
		}
		rec, err := ts.TailReturnOf(ctx, t.tag)
		if err != nil {
			fail(err)
			continue
		}
		seq := rec.Seq + 1
		if err := g.lower(ctx, t.tag, t.to, seq); err != nil {
			fail(err)
			continue
		}
		if between != nil {
			between(t.tag)
		}
		ok, err := ts.ReturnTail(ctx, t.tag, t.from, t.to, seq)
		switch {
		case err != nil:
			fail(err)
		case ok:
			st.Tags++
			st.IDs += t.from - t.to
			g.log.Info("segment: unused tail given back", "biz_tag", t.tag, "max_id", t.to, "was", t.from, "ids", t.from-t.to)
		default:
			st.Missed++
			g.log.Info("segment: unused tail kept: another allocation came after ours", "biz_tag", t.tag, "tail", fmt.Sprintf("[%d, %d)", t.to, t.from))
		}
	}
	return st, first
}

// lower makes maxID the mark of tag, durable first, and seq its last return.
func (g *Generator) lower(ctx context.Context, tag string, maxID, seq int64) error {
	if g.marks != nil {
		if err := g.marks.Lower(ctx, tag, maxID, seq); err != nil {
			return fmt.Errorf("segment: lower the mark of %q to %d: %w", tag, maxID, err)
		}
	}
	g.marksMu.Lock()
	g.highs[tag], g.rets[tag] = maxID, seq
	g.marksMu.Unlock()
	return nil
}

// applyReturn takes in another server's tail return r of b's tag, seen with
// the tag's max_id at cur, once per return (its seq). When the mark lies
// above cur only because of the returned tail (r.To <= cur < mark <=
// r.From) and no segment this generator allocated lies above cur, the mark
// is lowered to cur: the IDs between were never handed out. Otherwise the
// mark stays and only the return's seq is recorded, so that a later rewind
// into the same tail (a restored backup) is still refused; a max_id the
// return does not explain is left to the refusal. b.mu must be held and no
// load of b in flight, so that no mark of this tag is stored meanwhile.
// It reports whether the mark was lowered.
func (g *Generator) applyReturn(ctx context.Context, b *buffer, r store.TailReturn, cur int64) (bool, error) {
	g.marksMu.Lock()
	high, own, seen := g.highs[b.tag], g.own[b.tag], g.rets[b.tag]
	g.marksMu.Unlock()
	if r.Seq <= seen {
		return false, nil
	}
	switch {
	case high <= 1:
		// No mark yet (a server that never loaded the tag): nothing to
		// lower and nothing to keep. The return is recorded by the first
		// refresh after a load; until then this generator's own
		// allocations (own) keep any mark it gets from being lowered
		// below them.
		return false, nil
	case cur >= high:
		// Nothing to lower; record that the return is known.
		if err := g.lower(ctx, b.tag, high, r.Seq); err != nil {
			return false, err
		}
		return false, nil
	case r.To <= cur && high <= r.From && own <= cur:
		if err := g.lower(ctx, b.tag, cur, r.Seq); err != nil {
			return false, err
		}
		b.highMax = cur
		g.log.Info("segment: high-water mark lowered to a tail another server gave back",
			"biz_tag", b.tag, "mark", cur, "was", high, "returned", fmt.Sprintf("[%d, %d)", r.To, r.From))
		return true, nil
	}
	return false, nil
}

// applyReturns runs applyReturn for every return read by a refresh, with the
// max_id values it read, for tags with a buffer and no load in flight (a
// load in flight may store a mark meanwhile; that tag's next load or the
// next refresh looks again).
func (g *Generator) applyReturns(ctx context.Context, observed map[string]int64, bufs map[string]*buffer) {
	if g.cfg.Tails == nil {
		return
	}
	rets, err := g.cfg.Tails.TailReturns(ctx)
	if err != nil {
		g.log.Warn("segment: tail returns not read", "err", err)
		return
	}
	for _, r := range rets {
		b, v := bufs[r.BizTag], observed[r.BizTag]
		if b == nil || v == 0 {
			continue
		}
		b.mu.Lock()
		if b.load == nil {
			if _, err := g.applyReturn(ctx, b, r, v); err != nil {
				g.log.Warn("segment: tail return not applied", "biz_tag", r.BizTag, "err", err)
			}
		}
		b.mu.Unlock()
	}
}

// checkReturned is load's answer to a max_id below the mark (an allocation
// refused with [store.ErrBelowMark]): it reads the tag's last tail return
// and the tag's max_id, and applies the return (applyReturn). It returns
// the mark to allocate against afterwards and whether it was lowered.
// Called from the one load of b, without b.mu.
func (g *Generator) checkReturned(ctx context.Context, b *buffer) (int64, bool) {
	if g.cfg.Tails == nil {
		return 0, false
	}
	r, err := g.cfg.Tails.TailReturnOf(ctx, b.tag)
	if err != nil || r.Seq == 0 {
		return 0, false
	}
	cur, err := g.st.MaxID(ctx, b.tag)
	if err != nil {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	lowered, err := g.applyReturn(ctx, b, r, cur)
	if err != nil {
		g.log.Warn("segment: tail return not applied", "biz_tag", b.tag, "err", err)
	}
	return b.highMax, lowered
}

// SplitRowTag reports whether tag is named like a period row,
// "<base>:<key>" with key 4, 6 or 8 digits, and returns both parts. Such
// names are the leaf_alloc rows of the periods of grouped tags (package
// segment/group, which names them); the generator leaves them out of tail
// returns ([Generator.ReturnTails]), and the group package uses it to
// refuse plain tags and to list periods.
func SplitRowTag(tag string) (base, key string, ok bool) {
	i := strings.LastIndexByte(tag, ':')
	if i < 1 {
		return "", "", false
	}
	key = tag[i+1:]
	if n := len(key); n != 4 && n != 6 && n != 8 {
		return "", "", false
	}
	for j := 0; j < len(key); j++ {
		if key[j] < '0' || key[j] > '9' {
			return "", "", false
		}
	}
	return tag[:i], key, true
}
