package api

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/leaf-go/leaf/segment"
)

// Defaults of [TagMetrics].
const (
	// DefaultMetricsTopTags is the default of [TagMetrics.Top]: the 50 tags
	// with the lowest runway and the 50 with the highest consumption rate
	// get series of their own.
	DefaultMetricsTopTags = 50
	// DefaultMetricsAllTagsMax is the default of [TagMetrics.AllMax]: while
	// the generator knows at most 200 tags, every tag gets series of its
	// own, as before per-tag series were selected.
	DefaultMetricsAllTagsMax = 200
)

// TagMetrics chooses the biz_tags that get series of their own (a biz_tag
// label) on /metrics. Every other tag is only in the totals. The zero value
// is the default: every tag while there are at most 200, else the 50 lowest
// by runway, the 50 highest by rate and the tags refusing segments.
type TagMetrics struct {
	// Top is the number of tags with the lowest runway, and again of tags
	// with the highest consumption rate, that get series (only tags that
	// consume IDs, rate > 0, compete). A tag once chosen keeps its series
	// while it ranks within 2×Top, so that series do not come and go at every
	// scrape. 0 means [DefaultMetricsTopTags]; negative means none.
	Top int
	// Patterns are biz_tag patterns whose tags always get series: a pattern
	// ending in "*" with no other wildcard is a prefix ("order-*" matches
	// "order-eu/1"); any other is a [path.Match] glob ("*", "?", "[a-z]",
	// where "*" and "?" do not match "/"). Check them with
	// [ParseTagPatterns].
	Patterns []string
	// AllMax is the largest number of tags (rows the generator knows, the
	// value of leaf_segment_tags) for which every tag gets series, as before
	// selection existed; past it Top and Patterns choose. 0 means
	// [DefaultMetricsAllTagsMax]; negative means never.
	AllMax int
}

func (m TagMetrics) withDefaults() TagMetrics {
	if m.Top == 0 {
		m.Top = DefaultMetricsTopTags
	}
	if m.AllMax == 0 {
		m.AllMax = DefaultMetricsAllTagsMax
	}
	return m
}

// errBadTagPattern is wrapped by ParseTagPatterns' errors.
var errBadTagPattern = errors.New("bad biz_tag pattern")

// ParseTagPatterns splits a comma-separated list of biz_tag patterns (the
// --metrics-tags flag; see [TagMetrics.Patterns]), dropping empty items and
// the spaces around items. It returns an error for a malformed glob, such
// as an unclosed "[".
func ParseTagPatterns(s string) ([]string, error) {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("%w %q: %v", errBadTagPattern, p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// matchTag reports whether tag matches one of patterns ([TagMetrics.Patterns]).
func matchTag(patterns []string, tag string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && !strings.ContainsAny(prefix, `*?[\`) {
			if strings.HasPrefix(tag, prefix) {
				return true
			}
			continue
		}
		if ok, _ := path.Match(p, tag); ok {
			return true
		}
	}
	return false
}

// tagSelection is the set of tags with series of their own, shared by the
// collector (which chooses it at every scrape) and the counters written
// between scrapes (errors, loads). Counting a tag's event and deleting the
// series of tags that left the set exclude each other (mu), so that every
// event is counted once, in a series that is exposed: under its tag while
// the tag is selected, else under biz_tag="".
type tagSelection struct {
	cfg TagMetrics

	mu sync.RWMutex // writers: the collector's update; readers: counting
	// all is true while every tag gets series (at most cfg.AllMax tags):
	// the counters then label a tag as before selection existed (a served
	// tag's errors, a known tag's loads).
	all bool
	// tags are the selected tags while all is false.
	tags map[string]struct{}
}

func newTagSelection(cfg TagMetrics) *tagSelection {
	return &tagSelection{cfg: cfg.withDefaults(), all: true}
}

// has reports whether the counters label tag's events; known is whether
// the tag is a served (errors) or known (loads) tag. Call it under mu.RLock.
func (s *tagSelection) has(tag string, known func() bool) bool {
	if tag == "" {
		return false
	}
	if s.all {
		return known()
	}
	_, ok := s.tags[tag]
	return ok && known()
}

// tagRec is one tag as the collector keeps it: its own copy of the stats
// and the tracker's rate and runway.
type tagRec struct {
	st           segment.BufferStats
	rate, runway float64
}

// chooser picks the tags with series of their own from a stream of tags,
// in one pass with memory for the chosen tags only: every tag while at
// most cfg.AllMax are seen (all mode), else the tags refusing segments,
// those matching cfg.Patterns and the cfg.Top lowest by runway and highest
// by rate. prev is the selection of the last scrape (nil in all mode), for
// the hysteresis of Top: a tag in prev keeps its series while it ranks
// within 2×Top. A tag refusing segments is always chosen: its
// leaf_segment_rewound is the alert.
type chooser struct {
	cfg  TagMetrics
	prev map[string]struct{}
	seen int
	// first holds the first cfg.AllMax tags seen, for all mode.
	first  []tagRec
	always []tagRec
	tops   []*topK[tagRec] // lowest runway, highest rate; none when Top <= 0
}

func newChooser(cfg TagMetrics, prev map[string]struct{}) *chooser {
	c := &chooser{cfg: cfg, prev: prev}
	if n := cfg.Top; n > 0 {
		lowRunway := func(a, b *tagRec) bool {
			return cmp.Or(cmp.Compare(a.runway, b.runway), strings.Compare(a.st.BizTag, b.st.BizTag)) < 0
		}
		highRate := func(a, b *tagRec) bool {
			return cmp.Or(cmp.Compare(b.rate, a.rate), strings.Compare(a.st.BizTag, b.st.BizTag)) < 0
		}
		c.tops = []*topK[tagRec]{newTopK(2*n, lowRunway), newTopK(2*n, highRate)}
	}
	return c
}

// add offers one tag; st is copied when kept.
func (c *chooser) add(st *segment.BufferStats, rate, runway float64) {
	c.seen++
	var rec *tagRec // made at the first need: most tags are not kept
	get := func() *tagRec {
		if rec == nil {
			rec = &tagRec{st: *st, rate: rate, runway: runway}
		}
		return rec
	}
	if c.cfg.AllMax > 0 && c.seen <= c.cfg.AllMax {
		c.first = append(c.first, *get())
	}
	if st.Refusing || (len(c.cfg.Patterns) > 0 && matchTag(c.cfg.Patterns, st.BizTag)) {
		c.always = append(c.always, *get())
	}
	if competes(st.InitOK, rate, runway) {
		for _, top := range c.tops {
			top.push(get())
		}
	}
}

// chosen returns the chosen tags sorted by tag, and whether that is every
// tag seen (all mode).
func (c *chooser) chosen() (recs []tagRec, all bool) {
	byTag := func(a, b tagRec) int { return strings.Compare(a.st.BizTag, b.st.BizTag) }
	if c.cfg.AllMax > 0 && c.seen <= c.cfg.AllMax {
		slices.SortFunc(c.first, byTag)
		return c.first, true
	}
	chosen := make(map[string]*tagRec, len(c.always))
	for i := range c.always {
		chosen[c.always[i].st.BizTag] = &c.always[i]
	}
	for _, top := range c.tops {
		for rank, r := range top.sorted() {
			if _, was := c.prev[r.st.BizTag]; rank < c.cfg.Top || was {
				chosen[r.st.BizTag] = &r
			}
		}
	}
	recs = make([]tagRec, 0, len(chosen))
	for _, r := range chosen {
		recs = append(recs, *r)
	}
	slices.SortFunc(recs, byTag)
	return recs, false
}

// competes reports whether a tag competes for the Top series: it is served
// and consumes IDs.
func competes(initOK bool, rate, runway float64) bool {
	return initOK && rate > 0 && !math.IsNaN(runway)
}

// topK keeps the k items that sort first by before among those pushed, in
// a heap of k items: O(log k) a push, no memory per item seen.
type topK[T any] struct {
	k      int
	before func(a, b *T) bool
	h      []T // a max-heap by before: h[0] is the worst of the best k so far
}

func newTopK[T any](k int, before func(a, b *T) bool) *topK[T] {
	return &topK[T]{k: k, before: before, h: make([]T, 0, max(k, 0))}
}

// worse reports whether h[i] sorts after h[j].
func (t *topK[T]) worse(i, j int) bool { return t.before(&t.h[j], &t.h[i]) }

// push offers x; it is copied when kept.
func (t *topK[T]) push(x *T) {
	switch {
	case len(t.h) < t.k:
		t.h = append(t.h, *x)
		for j := len(t.h) - 1; j > 0; {
			p := (j - 1) / 2
			if !t.worse(j, p) {
				break
			}
			t.h[j], t.h[p] = t.h[p], t.h[j]
			j = p
		}
	case t.k > 0 && t.before(x, &t.h[0]):
		t.h[0] = *x
		for i := 0; ; {
			l, big := 2*i+1, i
			if l < len(t.h) && t.worse(l, big) {
				big = l
			}
			if r := l + 1; r < len(t.h) && t.worse(r, big) {
				big = r
			}
			if big == i {
				break
			}
			t.h[i], t.h[big] = t.h[big], t.h[i]
			i = big
		}
	}
}

// sorted returns the kept items, best first. The heap is spent.
func (t *topK[T]) sorted() []T {
	slices.SortFunc(t.h, func(a, b T) int {
		if t.before(&a, &b) {
			return -1
		}
		if t.before(&b, &a) {
			return 1
		}
		return 0
	})
	return t.h
}
