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

// choose returns the indices, in order, of the views that get series of
// their own, and whether that is every view (all mode). prev is the
// selection of the last scrape (nil in all mode), for the hysteresis of
// Top. A tag refusing segments is always chosen: its leaf_segment_rewound
// is the alert.
func (s *tagSelection) choose(views []bufferView, prev map[string]struct{}) (idx []int, all bool) {
	cfg := s.cfg
	if cfg.AllMax > 0 && len(views) <= cfg.AllMax {
		idx = make([]int, len(views))
		for i := range idx {
			idx[i] = i
		}
		return idx, true
	}
	chosen := make(map[int]struct{})
	for i := range views {
		v := &views[i]
		if v.Refusing || (len(cfg.Patterns) > 0 && matchTag(cfg.Patterns, v.BizTag)) {
			chosen[i] = struct{}{}
		}
	}
	if n := cfg.Top; n > 0 {
		lowRunway := func(a, b int) bool {
			return cmp.Or(cmp.Compare(views[a].Runway, views[b].Runway), strings.Compare(views[a].BizTag, views[b].BizTag)) < 0
		}
		highRate := func(a, b int) bool {
			return cmp.Or(cmp.Compare(views[b].Rate, views[a].Rate), strings.Compare(views[a].BizTag, views[b].BizTag)) < 0
		}
		for _, before := range []func(a, b int) bool{lowRunway, highRate} {
			top := smallest(views, 2*n, before)
			for rank, i := range top {
				if _, was := prev[views[i].BizTag]; rank < n || was {
					chosen[i] = struct{}{}
				}
			}
		}
	}
	idx = make([]int, 0, len(chosen))
	for i := range chosen {
		idx = append(idx, i)
	}
	slices.Sort(idx) // views are sorted by tag: so are the series
	return idx, false
}

// smallest returns the indices of the k served views with a rate above 0
// that sort first by before, in that order. It keeps a heap of k items, so
// that it costs O(len(views) log k) rather than a sort of every view.
func smallest(views []bufferView, k int, before func(a, b int) bool) []int {
	// h is a max-heap by before: h[0] is the worst of the best k so far.
	h := make([]int, 0, k)
	worse := func(a, b int) bool { return before(b, a) }
	down := func(i int) {
		for {
			l, big := 2*i+1, i
			if l < len(h) && worse(h[l], h[big]) {
				big = l
			}
			if r := l + 1; r < len(h) && worse(h[r], h[big]) {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for i := range views {
		v := &views[i]
		if !v.InitOK || !(v.Rate > 0) || math.IsNaN(v.Runway) {
			continue
		}
		switch {
		case len(h) < k:
			h = append(h, i)
			for j := len(h) - 1; j > 0; {
				p := (j - 1) / 2
				if !worse(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
		case k > 0 && before(i, h[0]):
			h[0] = i
			down(0)
		}
	}
	slices.SortFunc(h, func(a, b int) int {
		if before(a, b) {
			return -1
		}
		if before(b, a) {
			return 1
		}
		return 0
	})
	return h
}
