package api

import (
	"mime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Content negotiation as Leaf's Spring MVC 4.3 does it, for the two places
// where a Leaf client can see it: the Content-Type of an ID (Spring's
// AbstractMessageConverterMethodProcessor writing a String) and the choice
// between Spring Boot's JSON error body and its HTML "Whitelabel Error Page"
// (BasicErrorController's produces="text/html" mapping). The recorded answers
// are in testdata/leaf-wire/leaf-1.0.1.json; negotiate_test.go holds them
// and the rules below as a table.

// mediaRange is one element of an Accept header, as Spring's MediaType holds
// it: type and subtype lower-cased, the quality (q, 0..1, default 1) and the
// number of parameters, q included (Spring ranks more parameters as more
// specific).
type mediaRange struct {
	typ, sub string
	q        float64
	hasQ     bool // a q parameter was given (Spring copies it, see idContentType)
	params   int
}

func (m mediaRange) wildcardType() bool { return m.typ == "*" }

// wildcardSubtype is Spring's isWildcardSubtype: "*" or "*+suffix".
func (m mediaRange) wildcardSubtype() bool { return m.sub == "*" || strings.HasPrefix(m.sub, "*+") }

func (m mediaRange) concrete() bool { return !m.wildcardType() && !m.wildcardSubtype() }

// maxAcceptRanges bounds the ranges parsed from one Accept header; a longer
// header is treated as malformed (the default answer) rather than sorted.
const maxAcceptRanges = 64

// parseAccept parses an Accept header as Spring's MediaType.parseMediaTypes
// does; ok is false when any element is malformed (no "/", a wildcard type
// with a concrete subtype, a q outside 0..1, a type or subtype that is not
// an RFC 9110 token, a parameter mime.ParseMediaType refuses) or there are
// more than maxAcceptRanges elements. An empty header gives no ranges and ok.
func parseAccept(header string) (ranges []mediaRange, ok bool) {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if len(ranges) == maxAcceptRanges {
			return nil, false
		}
		full, params, err := mime.ParseMediaType(part)
		if err != nil {
			return nil, false
		}
		typ, sub, found := strings.Cut(full, "/")
		if !found || !isToken(typ) || !isToken(sub) || (typ == "*" && sub != "*") {
			return nil, false
		}
		m := mediaRange{typ: typ, sub: sub, q: 1, params: len(params)}
		if s, has := params["q"]; has {
			q, err := strconv.ParseFloat(s, 64)
			if err != nil || q < 0 || q > 1 {
				return nil, false
			}
			m.q, m.hasQ = q, true
		}
		ranges = append(ranges, m)
	}
	return ranges, true
}

// isToken reports whether s is an RFC 9110 token, as Spring's MimeType
// checks type and subtype (Go's mime package lets "{" and "}" through).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

// isTokenChar reports whether c is an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// compareSpecificity is Spring's MediaType.SPECIFICITY_COMPARATOR: negative
// when a is more specific than b. Types of different kinds compare equal,
// which makes the order partial (and the sort below matters).
func compareSpecificity(a, b mediaRange) int {
	switch {
	case a.wildcardType() && !b.wildcardType():
		return 1
	case b.wildcardType() && !a.wildcardType():
		return -1
	case a.typ != b.typ:
		return 0
	case a.wildcardSubtype() && !b.wildcardSubtype():
		return 1
	case b.wildcardSubtype() && !a.wildcardSubtype():
		return -1
	case a.sub != b.sub:
		return 0
	case a.q != b.q:
		return cmpDesc(a.q, b.q)
	}
	return cmpDesc(float64(a.params), float64(b.params))
}

// compareQuality is Spring's MediaType.QUALITY_VALUE_COMPARATOR.
func compareQuality(a, b mediaRange) int {
	if a.q != b.q {
		return cmpDesc(a.q, b.q)
	}
	switch {
	case a.wildcardType() && !b.wildcardType():
		return 1
	case b.wildcardType() && !a.wildcardType():
		return -1
	case a.typ != b.typ:
		return 0
	case a.wildcardSubtype() && !b.wildcardSubtype():
		return 1
	case b.wildcardSubtype() && !a.wildcardSubtype():
		return -1
	case a.sub != b.sub:
		return 0
	}
	return cmpDesc(float64(a.params), float64(b.params))
}

// cmpDesc orders larger values first.
func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// compareSpring is the comparator of Spring's
// MediaType.sortBySpecificityAndQuality: specificity, then quality.
func compareSpring(a, b mediaRange) int {
	if c := compareSpecificity(a, b); c != 0 {
		return c
	}
	return compareQuality(a, b)
}

// sortSpring sorts ranges in place as Spring's sortBySpecificityAndQuality
// does through Java's Collections.sort. The comparator is not a total order
// (text/plain equals application/json, both beat */*), so the result depends
// on the algorithm: below 32 elements java.util.TimSort finds the first run
// (reversing a strictly descending one) and binary-inserts the rest, which
// is what this does; longer lists (never sent by a real client) get a stable
// sort.
func sortSpring(a []mediaRange) {
	n := len(a)
	if n < 2 {
		return
	}
	if n >= 32 {
		sort.SliceStable(a, func(i, j int) bool { return compareSpring(a[i], a[j]) < 0 })
		return
	}
	run := 2 // java.util.TimSort.countRunAndMakeAscending
	if compareSpring(a[1], a[0]) < 0 {
		for run < n && compareSpring(a[run], a[run-1]) < 0 {
			run++
		}
		for i, j := 0, run-1; i < j; i, j = i+1, j-1 {
			a[i], a[j] = a[j], a[i]
		}
	} else {
		for run < n && compareSpring(a[run], a[run-1]) >= 0 {
			run++
		}
	}
	for start := run; start < n; start++ { // java.util.TimSort.binarySort
		pivot := a[start]
		left, right := 0, start
		for left < right {
			mid := int(uint(left+right) >> 1)
			if compareSpring(pivot, a[mid]) < 0 {
				right = mid
			} else {
				left = mid + 1
			}
		}
		copy(a[left+1:start+1], a[left:start])
		a[left] = pivot
	}
}

// stringProducible are the types Spring can write a String controller result
// as, in the order of its converters: StringHttpMessageConverter (text/plain,
// */*), then MappingJackson2HttpMessageConverter (application/json,
// application/*+json).
var stringProducible = []mediaRange{
	{typ: "text", sub: "plain", q: 1},
	{typ: "*", sub: "*", q: 1},
	{typ: "application", sub: "json", q: 1},
	{typ: "application", sub: "*+json", q: 1},
}

// compatible is Spring's MimeType.isCompatibleWith.
func compatible(a, b mediaRange) bool {
	if a.wildcardType() || b.wildcardType() {
		return true
	}
	if a.typ != b.typ {
		return false
	}
	if a.sub == b.sub {
		return true
	}
	if !a.wildcardSubtype() && !b.wildcardSubtype() {
		return false
	}
	ai, bi := strings.IndexByte(a.sub, '+'), strings.IndexByte(b.sub, '+')
	if ai == -1 && bi == -1 {
		return true
	}
	if ai != -1 && bi != -1 {
		return a.sub[ai+1:] == b.sub[bi+1:] && (a.sub[:ai] == "*" || b.sub[:bi] == "*")
	}
	return false
}

// idContentType is the Content-Type Leaf's Spring server gives an ID for the
// Accept header accept: the first concrete type of the requested ranges
// crossed with stringProducible, sorted as Spring sorts them, with
// ";charset=UTF-8". So no header or "*/*" is text/plain, RestTemplate's
// "application/json, application/*+json" is application/json and a browser's
// "text/html,…" is text/html; the body is the same digits. Parameters of the
// chosen range (charset, level) are not echoed: the body is always UTF-8 and
// labelled so. Where Spring answers 406 (a malformed header, or only ranges
// like "image/*" that name no concrete type) after taking the ID, this gives
// text/plain.
func idContentType(accept string) string {
	if accept == "" || accept == "*/*" {
		return textPlainUTF8
	}
	requested, ok := parseAccept(accept)
	if !ok || len(requested) == 0 {
		return textPlainUTF8
	}
	sortSpring(requested)
	var compat []mediaRange
	for _, req := range requested {
		for _, prod := range stringProducible {
			if !compatible(req, prod) {
				continue
			}
			// getMostSpecificMediaType: the producible type takes the
			// requested quality; the more specific of the two wins.
			if req.hasQ {
				prod.q, prod.hasQ = req.q, true
				prod.params++
			}
			m := prod
			if compareSpecificity(req, prod) <= 0 {
				m = req
			}
			if !containsRange(compat, m) {
				compat = append(compat, m)
			}
		}
	}
	sortSpring(compat)
	for _, m := range compat {
		if m.concrete() {
			return m.typ + "/" + m.sub + ";charset=UTF-8"
		}
		if m.wildcardType() || (m.typ == "application" && m.sub == "*") {
			break // Spring picks application/octet-stream here; Leaf clients never ask for it
		}
	}
	return textPlainUTF8
}

func containsRange(list []mediaRange, m mediaRange) bool {
	for _, x := range list {
		if x == m {
			return true
		}
	}
	return false
}

// wantsHTML reports whether Spring Boot's error handling would answer accept
// with the HTML "Whitelabel Error Page" rather than the JSON error body: the
// first range of the sorted header that is text/html or text/* picks HTML,
// */* picks JSON (BasicErrorController's errorHtml has produces="text/html",
// error has none, and ProducesRequestCondition prefers an exact match, then
// an inclusion). A malformed header, or one naming neither, gets JSON.
func wantsHTML(accept string) bool {
	if accept == "" || accept == "*/*" {
		return false
	}
	ranges, ok := parseAccept(accept)
	if !ok {
		return false
	}
	sortSpring(ranges)
	for _, m := range ranges {
		switch {
		case m.typ == "*":
			return false
		case m.typ == "text" && (m.sub == "html" || m.sub == "*"):
			return true
		}
	}
	return false
}

// Bounds of an acceptCache: entries kept, and the longest header kept.
const (
	maxCachedAccepts   = 64
	maxCachedAcceptLen = 512
)

// acceptCache remembers idContentType's answer per Accept header: a client
// sends the same header on every request, and parsing it costs about as
// much as the rest of the ID route. The first maxCachedAccepts distinct
// headers of up to maxCachedAcceptLen bytes are kept for the handler's life;
// others are negotiated every time, so varied headers cannot grow it. Safe
// for concurrent use; the zero value is empty.
type acceptCache struct {
	m sync.Map     // Accept header → Content-Type
	n atomic.Int32 // entries in m
}

// contentType is idContentType(accept), from the cache when it can be.
func (c *acceptCache) contentType(accept string) string {
	if v, ok := c.m.Load(accept); ok {
		return v.(string)
	}
	ct := idContentType(accept)
	if len(accept) <= maxCachedAcceptLen && c.n.Load() < maxCachedAccepts {
		if _, loaded := c.m.LoadOrStore(accept, ct); !loaded {
			c.n.Add(1)
		}
	}
	return ct
}
