// Package group serves grouped tags (business numbers, docs/contract.md
// §10): a biz_tag declared in leaf_group with a [bizno.Template] such as
// ORD{yyyyMMdd}{seq:6} draws its sequence from one ordinary leaf_alloc row
// per period (day, month or year), "<tag>:<key>", through a
// [segment.Generator]. It is built on segment's exported API only; segment
// does not import it. [Groups] is the server side; [Declare], [Update],
// [ListPeriods], [Prune], [RetentionBefore] and [CheckPlainTag] work on a
// store alone (leafctl).
package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// Errors of date-grouped tags ([Groups]); check with errors.Is.
var (
	// ErrNotGrouped is returned by [Groups.Next] and friends for a tag
	// that has no leaf_group declaration.
	ErrNotGrouped = errors.New("segment: biz tag is not grouped")
	// ErrPruned is returned by [Groups.Next] when the period to serve is
	// older than the tag's pruned_before (the server's clock is behind a
	// prune): its row was deleted and is never created again.
	ErrPruned = errors.New("segment: period was pruned")
	// ErrDecl is returned by [Groups.Declare] and [Groups.Update] for
	// a declaration that is not valid or not allowed (the message says
	// which rule).
	ErrDecl = errors.New("segment: invalid group declaration")
	// ErrPeriodRow is returned by [Groups.CheckPlainTag] for a plain tag
	// named like a period row of a grouped tag ("<tag>:<digits>").
	ErrPeriodRow = errors.New("segment: biz tag collides with a grouped tag's period rows")
	// ErrPruneLive is returned by [Groups.Prune] and [Prune] for a
	// prune that would delete a period a live server may still serve: the
	// last period deleted must have ended at least [Config.PruneMargin]
	// before both this host's clock and the database's.
	ErrPruneLive = errors.New("segment: period may still be served")
	// ErrNotNumeric is returned by [Groups.NextInt] for a template whose
	// IDs are not plain decimal numbers that fit int64: use the formatted
	// route.
	ErrNotNumeric = errors.New("segment: grouped tag's IDs are not numbers; use GET /api/v1/segment/{tag}/formatted")
)

// Store is what [Groups] needs from the database: leaf_group, and
// leaf_alloc rows for the periods. Every [store.Store] (postgres, mysql,
// sqlite) is one; see [store.Store] for the full contract of each method.
type Store interface {
	// Groups returns every declaration, ordered by biz_tag.
	Groups(ctx context.Context) ([]store.Group, error)
	// FindGroups returns the declarations of the names among tags that
	// have one (the miss lookup of grouped tags).
	FindGroups(ctx context.Context, tags []string) ([]store.Group, error)
	// Now reads the database's clock, the clock a prune is checked against.
	Now(ctx context.Context) (time.Time, error)
	// CreateGroup inserts a declaration. Errors: [store.ErrTagExists].
	CreateGroup(ctx context.Context, g store.Group) error
	// UpdateGroup sets time_zone, step, retention and description of a
	// declaration. Errors: [store.ErrTagNotFound].
	UpdateGroup(ctx context.Context, g store.Group) error
	// RaisePrunedBefore raises pruned_before to key, never lowering it, and
	// returns the value afterwards. Errors: [store.ErrTagNotFound].
	RaisePrunedBefore(ctx context.Context, tag, key string) (string, error)
	// DeleteGroup removes a declaration. Errors: [store.ErrTagNotFound].
	DeleteGroup(ctx context.Context, tag string) error
	// Create inserts a period row; [store.ErrTagExists] means another
	// server (or an earlier call) created it, which is fine.
	Create(ctx context.Context, r store.Row) error
	// Rows lists leaf_alloc, for the periods of a tag.
	Rows(ctx context.Context) ([]store.Row, error)
	// Delete removes a pruned period row.
	Delete(ctx context.Context, tag string) error
}

// Every [store.Store] (postgres, mysql, sqlite) is a Store.
var _ Store = store.Store(nil)

// Defaults of [Config].
const (
	// DefaultPrepareAhead is [Config.PrepareAhead]'s default: 5 min.
	DefaultPrepareAhead = 5 * time.Minute
	// DefaultTick is [Config.Tick]'s default: 10 s.
	DefaultTick = 10 * time.Second
	// DefaultPruneMargin is [Config.PruneMargin]'s default, and the
	// margin of [Prune]: 1 min.
	DefaultPruneMargin = time.Minute
)

// Config tunes [Groups]. The zero value means the defaults.
type Config struct {
	// PeriodsPath is the file of the per-tag time high-water marks (the
	// latest period this server issued an ID of), in the data directory;
	// "" keeps them in memory only (a restart forgets them).
	PeriodsPath string
	// PrepareAhead: the next period's row is created this long before the
	// boundary, so that the first request of a period pays no insert.
	// Default 5 min.
	PrepareAhead time.Duration
	// Tick is the period of the background loop that prepares rows, and
	// every RefreshInterval (the generator's) re-reads leaf_group and
	// prunes by retention. Default 10 s.
	Tick time.Duration
	// PruneMargin is how long a period must have ended, on both this
	// host's clock and the database's ([store.Store.Now]), before a
	// prune may delete it ([ErrPruneLive]): a server whose clock is behind
	// by less still finds the period it serves. Reading the database's
	// clock too keeps a server whose own clock runs ahead from pruning
	// the period every other server serves. Default 1 min.
	PruneMargin time.Duration
	// Clock is the source of time of period boundaries: one reading per
	// request. Default the generator's Clock.
	Clock segment.Clock
	// Logger; default the generator's.
	Logger *slog.Logger
}

// Groups serves date-grouped tags on top of a [segment.Generator]
// (docs/contract.md §10): a tag declared in leaf_group draws its sequence
// from one ordinary leaf_alloc row per period, "<tag>:<key>" (key yyyyMMdd,
// yyyyMM or yyyy of the period's local date in the tag's time zone), and
// formats each ID with the tag's [bizno.Template].
//
// Each request reads the clock once; all its IDs come from one period. A
// server never issues an ID of period P after one of P+1: the latest period
// it issued is its time high-water mark per tag, persisted in
// [Config.PeriodsPath] before the first ID of a new period is handed
// out, and a clock that reads an earlier period (stepped back, or after a
// restart) keeps serving the mark's period. Servers whose clocks differ
// near a boundary each stay unique (a period's row is shared); ordering
// across servers near a boundary is not promised.
//
// All methods are safe for concurrent use. Close stops the background loop.
type Groups struct {
	gen *segment.Generator
	st  Store
	cfg Config
	log *slog.Logger

	// decls maps tag to its declaration; copy-on-write, written while
	// holding reloadTurn.
	decls atomic.Pointer[map[string]*grouped]
	// reloadTurn serialises Reload: a 1-slot semaphore (a token in the
	// channel while a Reload runs) that a caller gives up on with its
	// context, unlike a mutex; a re-read stalled on a database that does
	// not answer must not hold an admin request past its deadline.
	reloadTurn chan struct{}

	hw *periodMarks

	// lookups reads leaf_group for names not declared here (miss.go).
	lookups *segment.Lookups[store.Group]
	missMu  sync.Mutex // guards misses
	// misses holds the names a lookup found without a declaration.
	misses segment.MissCache

	cancel context.CancelFunc
	done   chan struct{}
}

// grouped is one declared tag with its parsed template and current period.
type grouped struct {
	decl  store.Group
	group bizno.Group
	loc   *time.Location
	tpl   *bizno.Template
	// cur is the period requests take from; nil until the first one.
	cur atomic.Pointer[period]
	// switching is held (a token in the channel) by the one request that
	// switches cur to a new period, and by Prepare; others wait for it or
	// for their context. Buffer 1: a lock that a context can give up on.
	switching chan struct{}
	mu        sync.Mutex // guards prepared
	// prepared maps a period key to when this server made sure its row
	// exists (ahead of time or on demand).
	prepared map[string]time.Time
}

// period is one period of a grouped tag, with the handle on its row.
type period struct {
	key        string
	start, end time.Time // [start, end) in the tag's zone
	h          *segment.Tag
	// last is the highest sequence this server handed out in the period
	// (for stats; approximate under concurrency).
	last atomic.Int64
}

// New returns the grouped tags of gen, read from st (leaf_group), and
// starts the loop that prepares next periods' rows. It reads the period
// high-water file first: an unreadable file is an error (a damaged file
// must stop the start rather than let a period be reopened). A failed first
// read of leaf_group is logged; the loop retries. Call Close when done,
// before closing gen.
func New(ctx context.Context, gen *segment.Generator, st Store, cfg Config) (*Groups, error) {
	if gen == nil || st == nil {
		return nil, errors.New("group: New needs a generator and a store")
	}
	if cfg.PrepareAhead < 0 || cfg.Tick < 0 || cfg.PruneMargin < 0 {
		return nil, fmt.Errorf("group: Config PrepareAhead %v, Tick %v and PruneMargin %v must be >= 0", cfg.PrepareAhead, cfg.Tick, cfg.PruneMargin)
	}
	if cfg.PruneMargin == 0 {
		cfg.PruneMargin = DefaultPruneMargin
	}
	if cfg.PrepareAhead == 0 {
		cfg.PrepareAhead = DefaultPrepareAhead
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Clock == nil {
		cfg.Clock = gen.Config().Clock
	}
	if cfg.Logger == nil {
		cfg.Logger = gen.Config().Logger
	}
	hw, err := loadPeriodMarks(cfg.PeriodsPath)
	if err != nil {
		return nil, err
	}
	gs := &Groups{gen: gen, st: st, cfg: cfg, log: cfg.Logger, hw: hw, done: make(chan struct{}),
		reloadTurn: make(chan struct{}, 1)}
	gs.lookups = segment.NewLookups(gen, gs.findGroups)
	empty := map[string]*grouped{}
	gs.decls.Store(&empty)
	if err := gs.Reload(ctx); err != nil {
		gs.log.Warn("segment: first read of leaf_group failed; retrying in the background", "err", err)
	}
	var loopCtx context.Context
	loopCtx, gs.cancel = context.WithCancel(context.Background())
	go gs.loop(loopCtx)
	return gs, nil
}

// Close stops the background loop and waits for it. Idempotent.
func (gs *Groups) Close() error {
	gs.cancel()
	<-gs.done
	return nil
}

// loop prepares rows every Tick and re-reads leaf_group (and prunes by
// retention) every RefreshInterval of the generator. Every database call
// of the loop is bounded by the generator's LoadTimeout, so that a database
// that does not answer neither stalls the loop nor holds the reload turn
// for longer.
func (gs *Groups) loop(ctx context.Context) {
	defer close(gs.done)
	t := time.NewTicker(gs.cfg.Tick)
	defer t.Stop()
	// tried is when the loop last read leaf_group, so that a failing read
	// (a database without migration 00003 and --migrate=false) is retried
	// and logged once per RefreshInterval, not every Tick.
	tried := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(tried) >= gs.gen.Config().RefreshInterval {
			tried = time.Now()
			rctx, cancel := context.WithTimeout(ctx, gs.gen.Config().LoadTimeout)
			err := gs.Reload(rctx)
			cancel()
			if err != nil {
				gs.log.Warn("segment: leaf_group refresh failed", "err", err)
			} else {
				gs.PruneRetention(ctx)
			}
		}
		gs.Prepare(ctx)
	}
}

// Reload re-reads leaf_group now. A declaration that did not change keeps
// its current period; a changed one (time zone, step) starts from the
// high-water mark again. Errors: the store's; the declarations are then
// left as they were. A declaration that no longer parses is logged and
// left out (its tag answers [ErrNotGrouped]). ctx bounds the wait for
// another Reload under way too: a caller whose ctx ends first gets an error
// wrapping ctx's cause.
func (gs *Groups) Reload(ctx context.Context) error {
	select {
	case gs.reloadTurn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("segment: read leaf_group: waiting for the re-read under way: %w", context.Cause(ctx))
	}
	defer func() { <-gs.reloadTurn }()
	list, err := gs.st.Groups(ctx)
	if err != nil {
		return fmt.Errorf("segment: read leaf_group: %w", err)
	}
	old := *gs.decls.Load()
	m := make(map[string]*grouped, len(list))
	for _, d := range list {
		if g := old[d.BizTag]; g != nil && g.decl == d {
			m[d.BizTag] = g
			continue
		}
		g, err := compile(d)
		if err != nil {
			gs.log.Error("segment: leaf_group row not served", "biz_tag", d.BizTag, "err", err)
			continue
		}
		m[d.BizTag] = g
	}
	gs.decls.Store(&m)
	return nil
}

// compile checks a declaration and parses its zone and template.
func compile(d store.Group) (*grouped, error) {
	grp, err := bizno.ParseGroup(d.Grp)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecl, err)
	}
	if d.TimeZone == "" || strings.EqualFold(d.TimeZone, "local") {
		return nil, fmt.Errorf("%w: time zone must be an IANA name such as UTC or Asia/Shanghai, got %q", ErrDecl, d.TimeZone)
	}
	loc, err := time.LoadLocation(d.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %w", ErrDecl, d.TimeZone, err)
	}
	tpl, err := bizno.Parse(d.Format, grp)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecl, err)
	}
	if n := utf8.RuneCountInString(d.BizTag); n < 1 || n > store.MaxTagLen-9 || !utf8.ValidString(d.BizTag) || strings.ContainsAny(d.BizTag, ":/") {
		return nil, fmt.Errorf("%w: a grouped biz_tag has 1 to %d characters and no ':' or '/', got %q", ErrDecl, store.MaxTagLen-9, d.BizTag)
	}
	if d.Step < 1 || d.Step > store.MaxStep {
		return nil, fmt.Errorf("%w: step %d, want 1..%d", ErrDecl, d.Step, store.MaxStep)
	}
	if d.Retention < 0 {
		return nil, fmt.Errorf("%w: retention %d, want >= 0 periods", ErrDecl, d.Retention)
	}
	return &grouped{decl: d, group: grp, loc: loc, tpl: tpl, prepared: map[string]time.Time{},
		switching: make(chan struct{}, 1)}, nil
}

// RowTag is the leaf_alloc biz_tag of tag's period with key key:
// "<tag>:<key>" ([segment.SplitRowTag] splits it).
func RowTag(tag, key string) string { return tag + ":" + key }

// declared returns the declaration of tag known to this server (read by
// the last re-read of leaf_group, or by a lookup since). Errors:
// [ErrNotGrouped].
func (gs *Groups) declared(tag string) (*grouped, error) {
	g := (*gs.decls.Load())[tag]
	if g == nil {
		return nil, fmt.Errorf("%w: %q is not declared on this server", ErrNotGrouped, tag)
	}
	return g, nil
}

// lookup returns the declaration of tag: the one known to this server, or
// for a name not known here, the one a lookup round reads from leaf_group
// (miss.go: batched, with a negative cache), so that a tag declared by
// leafctl or through another server is served on its first request, not
// after the next re-read of leaf_group. Errors: [ErrNotGrouped] (leaf_group
// has no valid declaration; remembered for missTTL), [segment.ErrMissLimited],
// [segment.ErrNoSegment] when the lookup failed or was not answered within the
// generator's WaitTimeout or ctx, [segment.ErrClosed].
func (gs *Groups) lookup(ctx context.Context, tag string) (*grouped, error) {
	if g := (*gs.decls.Load())[tag]; g != nil {
		return g, nil
	}
	gs.missMu.Lock()
	miss := gs.misses.Has(gs.cfg.Clock.Now(), tag)
	gs.missMu.Unlock()
	if miss {
		return nil, fmt.Errorf("%w: leaf_group has no declaration of %q", ErrNotGrouped, tag)
	}
	d, found, err := gs.lookups.Find(ctx, tag)
	if errors.Is(err, segment.ErrMissLimited) {
		return nil, fmt.Errorf("%q is not declared on this server: %w; retry later", tag, err)
	}
	if err != nil {
		return nil, err
	}
	if g := (*gs.decls.Load())[tag]; g != nil {
		return g, nil
	}
	var g *grouped
	if found {
		if g, err = compile(d); err != nil {
			gs.log.Error("segment: leaf_group row not served", "biz_tag", tag, "err", err)
		}
	}
	if g == nil {
		gs.missMu.Lock()
		gs.misses.Add(gs.cfg.Clock.Now(), tag)
		gs.missMu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("%w: the declaration of %q in leaf_group is not valid: %w", ErrNotGrouped, tag, err)
		}
		return nil, fmt.Errorf("%w: leaf_group has no declaration of %q", ErrNotGrouped, tag)
	}
	return gs.adopt(ctx, g)
}

// adopt adds g, found by a lookup, to the declarations (unless a re-read
// added it meanwhile) and returns the one served.
func (gs *Groups) adopt(ctx context.Context, g *grouped) (*grouped, error) {
	select {
	case gs.reloadTurn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %q: waiting for the re-read of leaf_group under way: %w", segment.ErrNoSegment, g.decl.BizTag, context.Cause(ctx))
	}
	defer func() { <-gs.reloadTurn }()
	old := *gs.decls.Load()
	if have := old[g.decl.BizTag]; have != nil {
		return have, nil
	}
	m := maps.Clone(old)
	m[g.decl.BizTag] = g
	gs.decls.Store(&m)
	return g, nil
}

// findGroups is the find of the lookup rounds of grouped tags.
func (gs *Groups) findGroups(ctx context.Context, names []string) (map[string]store.Group, error) {
	list, err := gs.st.FindGroups(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("segment: look up leaf_group: %w", err)
	}
	found := make(map[string]store.Group, len(list))
	for _, d := range list {
		found[d.BizTag] = d
	}
	return found, nil
}

// Find returns the declaration of tag, looked up in leaf_group when this
// server does not know it yet (see [Groups.Next]). Errors: [ErrNotGrouped],
// [segment.ErrMissLimited], [segment.ErrNoSegment], [segment.ErrClosed].
func (gs *Groups) Find(ctx context.Context, tag string) (store.Group, error) {
	g, err := gs.lookup(ctx, tag)
	if err != nil {
		return store.Group{}, err
	}
	return g.decl, nil
}

// Has reports whether tag is a declared grouped tag.
func (gs *Groups) Has(tag string) bool { return (*gs.decls.Load())[tag] != nil }

// IsPeriodRow reports whether tag is the row of a period of a declared
// grouped tag ("order:20261201" while "order" is grouped): such rows are
// served only through the grouped tag, never as a plain tag (their bare
// sequence repeats in every period).
func (gs *Groups) IsPeriodRow(tag string) bool {
	base, _, ok := segment.SplitRowTag(tag)
	return ok && gs.Has(base)
}

// Template returns the parsed template of tag. Errors: [ErrNotGrouped].
func (gs *Groups) Template(tag string) (*bizno.Template, error) {
	g, err := gs.declared(tag)
	if err != nil {
		return nil, err
	}
	return g.tpl, nil
}

// Next appends n formatted IDs of tag to dst, all of the period of one
// clock reading (or of the tag's time high-water mark, when the clock reads
// an earlier period). Errors: [ErrNotGrouped]; [ErrPruned]; a failure to
// store the high-water mark or create the period's row (no ID handed out);
// [segment.Generator.Get]'s errors; [bizno.ErrWidth] when a sequence passes the
// template's width (the period is full: refused, never widened or
// wrapped); for a tag not known here, the errors of its lookup in
// leaf_group ([segment.ErrMissLimited], [segment.ErrNoSegment]; see [Groups.Find]). On
// error the IDs taken so far are skipped and dst is returned as given.
func (gs *Groups) Next(ctx context.Context, tag string, n int, dst []string) ([]string, error) {
	g, err := gs.lookup(ctx, tag)
	if err != nil {
		return dst, err
	}
	p, err := gs.period(ctx, g, gs.cfg.Clock.Now())
	if err != nil {
		return dst, err
	}
	base := len(dst)
	var buf [64]byte
	var last int64
	for range n {
		seq, err := p.h.Get(ctx)
		if err == nil {
			var b []byte
			if b, err = g.tpl.Format(buf[:0], p.start, seq); err == nil {
				dst = append(dst, string(b))
				last = seq
				continue
			}
		}
		return dst[:base], fmt.Errorf("%q period %s: %w", tag, p.key, err)
	}
	if last > p.last.Load() {
		p.last.Store(last)
	}
	return dst, nil
}

// NextInt returns one ID of tag as a number, for Leaf's numeric route: the
// formatted ID when the template is [bizno.Template.Numeric]. Errors:
// [Next]'s, and [ErrNotNumeric] for any other template.
func (gs *Groups) NextInt(ctx context.Context, tag string) (int64, error) {
	g, err := gs.lookup(ctx, tag)
	if err != nil {
		return 0, err
	}
	if !g.tpl.Numeric() {
		return 0, fmt.Errorf("%w: %q formats as %s", ErrNotNumeric, tag, g.tpl)
	}
	ids, err := gs.Next(ctx, tag, 1, nil)
	if err != nil {
		return 0, err
	}
	var v int64
	for i := 0; i < len(ids[0]); i++ {
		v = v*10 + int64(ids[0][i]-'0') // Numeric: at most 18 digits
	}
	return v, nil
}

// period returns the period to serve at now: the current one while now is
// inside it or before it (a clock stepped back never reopens an earlier
// period), else the period of now, switched to after its high-water mark
// is durable and its row exists.
func (gs *Groups) period(ctx context.Context, g *grouped, now time.Time) (*period, error) {
	if p := g.cur.Load(); p != nil && now.Before(p.end) {
		return p, nil
	}
	// The wait for the switch and the switch's database calls (the period
	// row's insert and the tag-list re-read) end with the request's
	// WaitTimeout, not the LoadTimeout of ensure (issue 16 item 7): a
	// request answers -3 in time and a later one tries again. The
	// background Prepare makes the row ahead of time, so a switch rarely
	// has database work to do.
	ctx, cancel := context.WithTimeout(ctx, gs.gen.Config().WaitTimeout)
	defer cancel()
	select {
	case g.switching <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %q: waiting for the period switch: %w", segment.ErrNoSegment, g.decl.BizTag, context.Cause(ctx))
	}
	defer func() { <-g.switching }()
	cur := g.cur.Load()
	if cur != nil && now.Before(cur.end) {
		return cur, nil
	}
	start := g.group.Start(now, g.loc)
	key := g.group.Key(start)
	tag := g.decl.BizTag
	if mark := gs.hw.get(tag); mark > key {
		// The clock reads a period before the latest one issued (stepped
		// back, or a restart with a slow clock): keep serving the latest.
		s, err := g.group.ParseKey(mark, g.loc)
		if err != nil {
			return nil, fmt.Errorf("segment: period high-water mark of %q: %w", tag, err)
		}
		start, key = s, mark
	}
	if key < g.decl.PrunedBefore {
		return nil, fmt.Errorf("%w: %q period %s is before pruned_before %s (is this server's clock behind?)",
			ErrPruned, tag, key, g.decl.PrunedBefore)
	}
	if err := gs.hw.raise(tag, key); err != nil {
		return nil, fmt.Errorf("segment: store period high-water mark of %q: %w", tag, err)
	}
	h, err := gs.ensure(ctx, g, key)
	if err != nil {
		return nil, err
	}
	p := &period{key: key, start: start, end: g.group.Next(start), h: h}
	g.cur.Store(p)
	g.mu.Lock()
	for k := range g.prepared {
		if k < key {
			delete(g.prepared, k) // keeps the map at the current and next period
		}
	}
	g.mu.Unlock()
	return p, nil
}

// ensure makes sure the row of tag's period key exists and is known to the
// generator, and returns a handle on it, each database call bounded by
// the generator's LoadTimeout. g.switching must be held.
func (gs *Groups) ensure(ctx context.Context, g *grouped, key string) (*segment.Tag, error) {
	ctx, cancel := context.WithTimeout(ctx, gs.gen.Config().LoadTimeout)
	defer cancel()
	row := RowTag(g.decl.BizTag, key)
	g.mu.Lock()
	_, done := g.prepared[key]
	g.mu.Unlock()
	if !done {
		err := gs.st.Create(ctx, store.Row{BizTag: row, MaxID: 1, Step: g.decl.Step,
			Description: "period " + key + " of grouped tag " + g.decl.BizTag})
		if err != nil && !errors.Is(err, store.ErrTagExists) {
			return nil, fmt.Errorf("segment: create period row %q: %w", row, err)
		}
		g.mu.Lock()
		g.prepared[key] = gs.cfg.Clock.Now()
		g.mu.Unlock()
	}
	if !gs.gen.Cached(row) {
		// Make the row known without a miss lookup, which a miss of its
		// name remembered just before would answer "not found".
		if err := gs.gen.Refresh(ctx); err != nil {
			return nil, err
		}
	}
	return gs.gen.Tag(ctx, row)
}

// Prepare creates, for every grouped tag whose next period starts within
// PrepareAhead of now, that period's row (the background loop calls it
// every Tick). Failures are logged; the first request of the period then
// creates the row itself.
func (gs *Groups) Prepare(ctx context.Context) {
	now := gs.cfg.Clock.Now()
	for _, g := range *gs.decls.Load() {
		next := g.group.Next(g.group.Start(now, g.loc))
		if next.Sub(now) > gs.cfg.PrepareAhead {
			continue
		}
		key := g.group.Key(next)
		g.mu.Lock()
		_, done := g.prepared[key]
		g.mu.Unlock()
		var err error
		if !done {
			select {
			case g.switching <- struct{}{}:
				_, err = gs.ensure(ctx, g, key)
				<-g.switching
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			gs.log.Warn("segment: next period's row not prepared", "biz_tag", g.decl.BizTag, "period", key, "err", err)
		}
	}
}
