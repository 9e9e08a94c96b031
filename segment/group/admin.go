package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
)

// Declare creates the leaf_group row of a grouped tag after checking it
// (group, IANA time zone, template for the group, step, retention, name) and
// re-reads the declarations. It refuses a tag that has a plain leaf_alloc
// row (its Leaf route would change meaning) or rows named like its periods
// ("<tag>:<digits>": their sequences were handed out as plain IDs). Errors:
// [ErrDecl] naming the rule, [store.ErrTagExists], the store's.
func (gs *Groups) Declare(ctx context.Context, d store.Group) error {
	if err := Declare(ctx, gs.st, d); err != nil {
		return err
	}
	return gs.Reload(ctx)
}

// Declare is [Groups.Declare] without a server (leafctl): the checks
// and the insert; running servers read it on their next leaf_group refresh.
func Declare(ctx context.Context, st Store, d store.Group) error {
	d.PrunedBefore = ""
	if _, err := compile(d); err != nil {
		return err
	}
	rows, err := st.Rows(ctx)
	if err != nil {
		return fmt.Errorf("segment: declare %q: %w", d.BizTag, err)
	}
	for _, r := range rows {
		if base, _, ok := segment.SplitRowTag(r.BizTag); r.BizTag == d.BizTag || ok && base == d.BizTag {
			return fmt.Errorf("%w: leaf_alloc already has a row %q; pick another name for the grouped tag", ErrDecl, r.BizTag)
		}
	}
	return st.CreateGroup(ctx, d)
}

// Update changes the time zone, step (for period rows created from now on),
// retention and description of a grouped tag and re-reads the
// declarations. The group and the format never change: IDs of the old and
// the new template could coincide (ORD{yyyyMMdd}{seq:6} seq 100123 and
// ORD{yyyyMMdd}1{seq:5} seq 123 are the same string); declare a new tag
// instead. Errors: [ErrDecl] (also for a changed group or format),
// [store.ErrTagNotFound], the store's.
func (gs *Groups) Update(ctx context.Context, d store.Group) error {
	if err := Update(ctx, gs.st, d); err != nil {
		return err
	}
	return gs.Reload(ctx)
}

// Update is [Groups.Update] without a server (leafctl): empty Grp
// and Format mean unchanged.
func Update(ctx context.Context, st Store, d store.Group) error {
	list, err := st.Groups(ctx)
	if err != nil {
		return fmt.Errorf("segment: update %q: %w", d.BizTag, err)
	}
	i := slices.IndexFunc(list, func(g store.Group) bool { return g.BizTag == d.BizTag })
	if i < 0 {
		return fmt.Errorf("segment: update group %q: %w", d.BizTag, store.ErrTagNotFound)
	}
	old := list[i]
	if d.Grp == "" {
		d.Grp = old.Grp
	}
	if d.Format == "" {
		d.Format = old.Format
	}
	if d.Grp != old.Grp || d.Format != old.Format {
		return fmt.Errorf("%w: group and format of %q cannot change (IDs of two templates could coincide); declare a new tag", ErrDecl, d.BizTag)
	}
	d.PrunedBefore = old.PrunedBefore
	if _, err := compile(d); err != nil {
		return err
	}
	return st.UpdateGroup(ctx, d)
}

// Declarations returns every served declaration, ordered by tag.
func (gs *Groups) Declarations() []store.Group {
	m := *gs.decls.Load()
	out := make([]store.Group, 0, len(m))
	for _, g := range m {
		out = append(out, g.decl)
	}
	slices.SortFunc(out, func(a, b store.Group) int { return strings.Compare(a.BizTag, b.BizTag) })
	return out
}

// PeriodInfo is one period row of a grouped tag, for `leafctl tag periods`.
type PeriodInfo struct {
	// Key is the period (yyyyMMdd, yyyyMM or yyyy); Row its leaf_alloc
	// biz_tag.
	Key, Row string
	// Reserved is the number of sequences handed to servers in segments
	// (max_id - 1): an upper bound of the IDs used.
	Reserved int64
	// Capacity is the template's capacity, in sequences.
	Capacity int64
	// Step is the row's step, in IDs.
	Step int64
}

// Periods lists the period rows of tag in leaf_alloc, oldest first.
// Errors: [ErrNotGrouped], the store's.
func (gs *Groups) Periods(ctx context.Context, tag string) ([]PeriodInfo, error) {
	g, err := gs.lookup(ctx, tag)
	if err != nil {
		return nil, err
	}
	return periods(ctx, gs.st, g)
}

// ListPeriods is [Groups.Periods] without a server (leafctl), for the
// declaration d. Errors: [ErrDecl] for a declaration that does not
// compile, the store's.
func ListPeriods(ctx context.Context, st Store, d store.Group) ([]PeriodInfo, error) {
	g, err := compile(d)
	if err != nil {
		return nil, err
	}
	return periods(ctx, st, g)
}

func periods(ctx context.Context, st Store, g *grouped) ([]PeriodInfo, error) {
	tag := g.decl.BizTag
	rows, err := st.Rows(ctx)
	if err != nil {
		return nil, fmt.Errorf("segment: periods of %q: %w", tag, err)
	}
	var out []PeriodInfo
	for _, r := range rows {
		base, key, ok := segment.SplitRowTag(r.BizTag)
		if !ok || base != tag || len(key) != len(g.group.Key(time.Time{})) {
			continue
		}
		out = append(out, PeriodInfo{Key: key, Row: r.BizTag, Reserved: r.MaxID - 1, Capacity: g.tpl.Capacity(), Step: r.Step})
	}
	slices.SortFunc(out, func(a, b PeriodInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Prune deletes the period rows of tag older than before (a period key of
// the tag's group, e.g. 20261101), after raising the tag's pruned_before to
// it, so that no server creates or serves those periods again (a server
// whose clock reads one answers [ErrPruned]). before may not pass the
// period of this server's clock or high-water mark: the current period is
// never pruned. It returns the deleted rows. Errors: [ErrNotGrouped],
// [ErrDecl] for a bad or too late key, the store's.
func (gs *Groups) Prune(ctx context.Context, tag, before string) ([]string, error) {
	g, err := gs.lookup(ctx, tag)
	if err != nil {
		return nil, err
	}
	cur := g.group.Key(g.group.Start(gs.cfg.Clock.Now(), g.loc))
	if mark := gs.hw.get(tag); mark > cur {
		cur = mark
	}
	deleted, err := prune(ctx, gs.st, g, before, cur, gs.cfg.Clock.Now(), gs.cfg.PruneMargin)
	if rerr := gs.Reload(ctx); err == nil && rerr != nil {
		err = rerr
	}
	return deleted, err
}

// Prune is [Groups.Prune] without a server (leafctl): the current
// period is the one of now in the tag's zone, and the margin against live
// servers is [DefaultPruneMargin]. Running servers read the new
// pruned_before on their next leaf_group refresh.
func Prune(ctx context.Context, st Store, d store.Group, before string, now time.Time) ([]string, error) {
	g, err := compile(d)
	if err != nil {
		return nil, err
	}
	return prune(ctx, st, g, before, g.group.Key(g.group.Start(now, g.loc)), now, DefaultPruneMargin)
}

// prune raises pruned_before to before, then deletes the older period rows;
// before may not pass cur, the current period, and the period before it
// must have ended margin before now (this host's clock) and before the
// database's clock: a server whose clock runs a day ahead would otherwise
// prune the period every correctly set server is serving.
func prune(ctx context.Context, st Store, g *grouped, before, cur string, now time.Time, margin time.Duration) ([]string, error) {
	tag := g.decl.BizTag
	end, err := g.group.ParseKey(before, g.loc)
	if err != nil {
		return nil, fmt.Errorf("%w: prune before %q: want a %s key like %s", ErrDecl, before, g.group, cur)
	}
	if before > cur {
		return nil, fmt.Errorf("%w: prune before %s would delete the current period %s", ErrDecl, before, cur)
	}
	dbNow, err := st.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("segment: prune %q: %w", tag, err)
	}
	if ready := end.Add(margin); now.Before(ready) || dbNow.Before(ready) {
		return nil, fmt.Errorf("%w: prune of %q before %s deletes the period that ends at %s, which a server whose clock is up to %v behind still serves; "+
			"the database's clock reads %s and this host's %s: prune after %s on both",
			ErrPruneLive, tag, before, end.Format(time.RFC3339), margin,
			dbNow.In(g.loc).Format(time.RFC3339), now.In(g.loc).Format(time.RFC3339), ready.Format(time.RFC3339))
	}
	if _, err := st.RaisePrunedBefore(ctx, tag, before); err != nil {
		return nil, err
	}
	ps, err := periods(ctx, st, g)
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, p := range ps {
		if p.Key >= before {
			break
		}
		if err := st.Delete(ctx, p.Row); err != nil && !errors.Is(err, store.ErrTagNotFound) {
			return deleted, fmt.Errorf("segment: prune %q: %w", p.Row, err)
		}
		deleted = append(deleted, p.Row)
	}
	return deleted, nil
}

// RetentionKey returns the oldest period key tag keeps by its retention at
// now ("" when the retention is 0: keep all). Errors: [ErrNotGrouped].
// [RetentionBefore] is the same for a declaration (leafctl).
func (gs *Groups) RetentionKey(tag string, now time.Time) (string, error) {
	g, err := gs.declared(tag)
	if err != nil {
		return "", err
	}
	return g.retentionKey(now), nil
}

// RetentionBefore returns the oldest period key d keeps by its retention at
// now ("" for retention 0). Errors: [ErrDecl].
func RetentionBefore(d store.Group, now time.Time) (string, error) {
	g, err := compile(d)
	if err != nil {
		return "", err
	}
	return g.retentionKey(now), nil
}

func (g *grouped) retentionKey(now time.Time) string {
	r := int(g.decl.Retention)
	if r <= 0 {
		return ""
	}
	start := g.group.Start(now, g.loc)
	var t time.Time
	switch g.group {
	case bizno.Day:
		t = start.AddDate(0, 0, -(r - 1))
	case bizno.Month:
		t = start.AddDate(0, -(r - 1), 0)
	default:
		t = start.AddDate(-(r - 1), 0, 0)
	}
	return g.group.Key(g.group.Start(t, g.loc))
}

// PruneRetention prunes every grouped tag with a retention to its last
// Retention periods (the background loop calls it after each re-read of
// leaf_group). Each tag's prune is bounded by the generator's LoadTimeout.
// Failures are logged.
func (gs *Groups) PruneRetention(ctx context.Context) {
	now := gs.cfg.Clock.Now()
	for _, d := range gs.Declarations() {
		g, err := gs.declared(d.BizTag)
		if err != nil {
			continue
		}
		key := g.retentionKey(now)
		if key == "" {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, gs.gen.Config().LoadTimeout) // a hung database must not stall the loop
		deleted, err := gs.Prune(pctx, d.BizTag, key)
		cancel()
		if err != nil {
			gs.log.Warn("segment: retention prune failed", "biz_tag", d.BizTag, "before", key, "err", err)
		} else if len(deleted) > 0 {
			gs.log.Info("segment: retention pruned periods", "biz_tag", d.BizTag, "before", key, "rows", deleted)
		}
	}
}

// CheckPlainTag refuses a plain tag named like a period row of a grouped
// tag ("order:20261201" while "order" is grouped), and a plain tag with the
// name of a grouped tag. It reads leaf_group, so it sees declarations made
// by other servers. Errors: [ErrPeriodRow], the store's.
func CheckPlainTag(ctx context.Context, st Store, tag string) error {
	base, _, isRow := segment.SplitRowTag(tag)
	list, err := st.Groups(ctx)
	if err != nil {
		return fmt.Errorf("segment: check %q against grouped tags: %w", tag, err)
	}
	for _, g := range list {
		if g.BizTag == tag || isRow && g.BizTag == base {
			return fmt.Errorf("%w: %q is grouped; its periods are rows %q", ErrPeriodRow, g.BizTag, g.BizTag+":<period>")
		}
	}
	return nil
}

// Stats is the state of one grouped tag on this server, for the
// dashboard.
type Stats struct {
	// Decl is the declaration.
	Decl store.Group
	// Period is the key of the period being served ("" before the first
	// request).
	Period string
	// PeriodEnd is when that period ends (zero before the first request).
	PeriodEnd time.Time
	// Last is the highest sequence this server handed out in Period.
	Last int64
	// Capacity is the template's capacity, in sequences per period.
	Capacity int64
	// NextPeriod is the key of the period after the current one by the
	// clock, and NextPrepared when this server made sure its row exists
	// (zero: not yet).
	NextPeriod   string
	NextPrepared time.Time
}

// Stats returns the state of every grouped tag, ordered by tag.
func (gs *Groups) Stats() []Stats {
	now := gs.cfg.Clock.Now()
	var out []Stats
	for _, d := range gs.Declarations() {
		g, err := gs.declared(d.BizTag)
		if err != nil {
			continue
		}
		s := Stats{Decl: d, Capacity: g.tpl.Capacity()}
		start := g.group.Start(now, g.loc)
		if p := g.cur.Load(); p != nil {
			s.Period, s.PeriodEnd, s.Last = p.key, p.end, p.last.Load()
			if p.start.After(start) {
				start = p.start
			}
		}
		s.NextPeriod = g.group.Key(g.group.Next(start))
		g.mu.Lock()
		s.NextPrepared = g.prepared[s.NextPeriod]
		g.mu.Unlock()
		out = append(out, s)
	}
	return out
}

// Declaration returns the declaration of tag. Errors: [ErrNotGrouped].
func (gs *Groups) Declaration(tag string) (store.Group, error) {
	g, err := gs.declared(tag)
	if err != nil {
		return store.Group{}, err
	}
	return g.decl, nil
}

// Location returns the time zone of tag. Errors: [ErrNotGrouped].
func (gs *Groups) Location(tag string) (*time.Location, error) {
	g, err := gs.declared(tag)
	if err != nil {
		return nil, err
	}
	return g.loc, nil
}
