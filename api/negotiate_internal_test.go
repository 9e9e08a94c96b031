package api

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// browserAccept is what Chrome and Firefox send for a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// TestIDContentType: the Content-Type of an ID for an Accept header, as Leaf's
// Spring 4.3 negotiates it (testdata/leaf-wire/leaf-1.0.1.json records the
// first four; the rest follow Spring's MediaType comparators).
func TestIDContentType(t *testing.T) {
	tests := []struct{ give, want string }{
		{"", "text/plain;charset=UTF-8"},
		{"*/*", "text/plain;charset=UTF-8"},
		{"application/json", "application/json;charset=UTF-8"},
		{"text/html", "text/html;charset=UTF-8"},
		// RestTemplate.getForObject(url, Long.class) and Feign with a JSON decoder.
		{"application/json, application/*+json", "application/json;charset=UTF-8"},
		{browserAccept, "text/html;charset=UTF-8"},
		{"text/*", "text/plain;charset=UTF-8"},
		{"application/*", "application/json;charset=UTF-8"},
		{"application/xml", "application/xml;charset=UTF-8"},
		{"TEXT/PLAIN", "text/plain;charset=UTF-8"},
		{"text/plain;charset=ISO-8859-1", "text/plain;charset=UTF-8"},
		// */* stands for text/plain at q=1, which outranks a JSON at q=0.1.
		{"application/json;q=0.1, */*", "text/plain;charset=UTF-8"},
		{"application/json;q=0.9, text/*;q=0.1", "application/json;charset=UTF-8"},
		// Quality between types of different kinds.
		{"text/plain;q=0.5, application/json", "application/json;charset=UTF-8"},
		{"application/json;q=0.5, text/plain", "text/plain;charset=UTF-8"},
		{"*/*;q=0.8", "text/plain;charset=UTF-8"},
		// Where Spring answers 406 (after taking the ID), text/plain.
		{"image/*", "text/plain;charset=UTF-8"},
		{"not a type", "text/plain;charset=UTF-8"},
		{"text/plain;q=2", "text/plain;charset=UTF-8"},
		{"*/json", "text/plain;charset=UTF-8"},
		{strings.Repeat("text/x,", 100), "text/plain;charset=UTF-8"},
	}
	for _, tt := range tests {
		if got := idContentType(tt.give); got != tt.want {
			t.Errorf("idContentType(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// TestWantsHTML: Spring Boot answers an error with its HTML page when the
// client prefers text/html (a browser), with JSON otherwise.
func TestWantsHTML(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"", false},
		{"*/*", false},
		{browserAccept, true},
		{"text/html", true},
		{"text/*", true},
		{"application/json", false},
		{"application/json, application/*+json", false},
		{"text/plain", false},
		{"text/plain, text/html", true},
		{"*/*, text/html", true}, // specificity puts text/html first
		{"application/json, */*", false},
		{"not a type", false},
	}
	for _, tt := range tests {
		if got := wantsHTML(tt.give); got != tt.want {
			t.Errorf("wantsHTML(%q) = %t, want %t", tt.give, got, tt.want)
		}
	}
}

// TestSortSpring: the order of Spring's sortBySpecificityAndQuality under
// Java's TimSort, including a descending first run that TimSort reverses.
func TestSortSpring(t *testing.T) {
	tests := []struct{ give, want string }{
		{"*/*, text/plain, application/json, application/*+json", "text/plain application/json application/*+json */*"},
		{"*/*;q=0.8, application/xml;q=0.9, text/html", "text/html application/xml */*"},
		{"text/plain;q=0.1, text/plain;q=0.5, text/plain", "text/plain text/plain text/plain"},
		{"text/*, text/plain, */*", "text/plain text/* */*"},
	}
	for _, tt := range tests {
		ranges, ok := parseAccept(tt.give)
		if !ok {
			t.Fatalf("parseAccept(%q) failed", tt.give)
		}
		sortSpring(ranges)
		var got []string
		for _, m := range ranges {
			got = append(got, m.typ+"/"+m.sub)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("sortSpring(%q) = %v, want %s", tt.give, got, tt.want)
		}
		if tt.give == "text/plain;q=0.1, text/plain;q=0.5, text/plain" &&
			(ranges[0].q != 1 || ranges[1].q != 0.5 || ranges[2].q != 0.1) {
			t.Errorf("sortSpring(%q) qualities = %v, %v, %v, want 1, 0.5, 0.1", tt.give, ranges[0].q, ranges[1].q, ranges[2].q)
		}
	}
}

// TestJavaMapOrder: /cache lists tags as Java's HashMap copy of Leaf's
// ConcurrentHashMap iterates them. Each want was printed by OpenJDK 17
// (ConcurrentHashMap filled in the given order, copied into a HashMap, keySet
// joined), across the resizes at 12 and 13 tags.
func TestJavaMapOrder(t *testing.T) {
	tags := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, "tag-"+string(rune('0'+i/10))+string(rune('0'+i%10)))
		}
		return out
	}
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"leaf-segment-test"}, "leaf-segment-test"},
		{[]string{"a.b.c", "leaf-segment-test", "order", "user"}, "leaf-segment-test,a.b.c,user,order"},
		{tags(11), "tag-05,tag-06,tag-07,tag-08,tag-09,tag-10,tag-00,tag-01,tag-02,tag-03,tag-04"},
		{tags(12), "tag-05,tag-06,tag-07,tag-08,tag-09,tag-10,tag-00,tag-11,tag-01,tag-02,tag-03,tag-04"},
		{tags(13), "tag-05,tag-06,tag-07,tag-08,tag-09,tag-10,tag-00,tag-11,tag-01,tag-12,tag-02,tag-03,tag-04"},
		{tags(30), "tag-16,tag-17,tag-18,tag-19,tag-10,tag-11,tag-12,tag-13,tag-14,tag-15,tag-05,tag-27,tag-06,tag-28,tag-07,tag-29,tag-08,tag-09,tag-20,tag-21,tag-00,tag-22,tag-01,tag-23,tag-02,tag-24,tag-03,tag-25,tag-04,tag-26"},
		{[]string{"coupon", "invoice", "order", "payment", "ta", "tb", "user", "订单"}, "订单,coupon,payment,invoice,ta,user,tb,order"},
	}
	for _, tt := range tests {
		if got := strings.Join(javaMapOrder(tt.give), ","); got != tt.want {
			t.Errorf("javaMapOrder(%q) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

func TestJavaNumber(t *testing.T) {
	tests := []struct {
		give int64
		want string
	}{
		{0, "0"}, {1, "1"}, {999, "999"}, {1000, "1,000"}, {2001, "2,001"}, {-1234567, "-1,234,567"},
		{9223372036854775807, "9,223,372,036,854,775,807"}, {-9223372036854775808, "-9,223,372,036,854,775,808"},
	}
	for _, tt := range tests {
		if got := javaNumber(tt.give); got != tt.want {
			t.Errorf("javaNumber(%d) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestJavaTimestamp(t *testing.T) {
	tests := []struct {
		give time.Time
		want string
	}{
		{time.Date(2026, 12, 1, 13, 18, 24, 0, time.UTC), "2026-12-01 13:18:24.0"},
		{time.Date(2026, 12, 1, 13, 18, 24, 120_000_000, time.UTC), "2026-12-01 13:18:24.12"},
		{time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC), "2026-01-02 03:04:05.000000001"},
		{time.Time{}, ""},
	}
	for _, tt := range tests {
		if got := javaTimestamp(tt.give); got != tt.want {
			t.Errorf("javaTimestamp(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// FuzzNegotiate: no Accept header makes negotiation panic, and the type it
// picks for an ID is always concrete in Spring's sense (no "*" type, no "*"
// or "*+suffix" subtype), lower-case, made of token characters (it goes
// into a response header) and labelled UTF-8.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{"", "*/*", browserAccept, "application/json, application/*+json", "text/*;q=0.5, */*;q=0.1",
		"a/b;c=\"d,e\"", "text/plain;q=", strings.Repeat("x/y,", 40)} {
		f.Add(s)
	}
	valid := regexp.MustCompile("^[a-z0-9!#$%&'*+.^_`|~-]+/[a-z0-9!#$%&'*+.^_`|~-]+;charset=UTF-8$") // RFC 9110 tchar
	f.Fuzz(func(t *testing.T, accept string) {
		ct := idContentType(accept)
		typ, sub, _ := strings.Cut(strings.TrimSuffix(ct, ";charset=UTF-8"), "/")
		if !valid.MatchString(ct) || typ == "*" || sub == "*" || strings.HasPrefix(sub, "*+") {
			t.Errorf("idContentType(%q) = %q, want a concrete type with charset UTF-8", accept, ct)
		}
		_ = wantsHTML(accept)
	})
}

// FuzzLeafPath: rewriting a path never panics, and what it gives to the
// router holds no path parameter and no doubled slash outside the JSON API.
func FuzzLeafPath(f *testing.F) {
	for _, s := range []string{"/api/segment/get/t;jsessionid=1", "/api//segment/get/t", "//", "/;", "/a;b/c;d//",
		"/api/segment/get/a%3Bb;x", "/api/v1/segment/t;x", "/api/segment/get/%zz;x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := http.NewRequest("GET", "http://h", nil)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse("http://h" + p)
		if err != nil || !strings.HasPrefix(u.EscapedPath(), "/") {
			return
		}
		r.URL = u
		got := leafPath(r)
		esc := got.URL.EscapedPath()
		if isV1(got) || got == r && !strings.Contains(esc, ";") && !strings.Contains(esc, "//") {
			return
		}
		if got == r {
			if _, err := url.PathUnescape(esc); err == nil {
				t.Errorf("leafPath(%q) left %q as it was", p, esc)
			}
			return
		}
		if strings.Contains(got.URL.RawPath, ";") || strings.Contains(got.URL.RawPath, "//") {
			t.Errorf("leafPath(%q) = %q, want no ';' and no '//'", p, got.URL.RawPath)
		}
	})
}

// TestAcceptCacheBounded: the cache answers as idContentType does, keeps at
// most maxCachedAccepts headers and none longer than maxCachedAcceptLen.
func TestAcceptCacheBounded(t *testing.T) {
	var c acceptCache
	for i := range 3 * maxCachedAccepts {
		accept := "application/x-" + strings.Repeat("a", i%7) + strconv.Itoa(i)
		if got, want := c.contentType(accept), idContentType(accept); got != want {
			t.Fatalf("contentType(%q) = %q, want %q", accept, got, want)
		}
	}
	long := "text/html;x=" + strings.Repeat("y", maxCachedAcceptLen)
	if got := c.contentType(long); got != "text/html;charset=UTF-8" {
		t.Errorf("contentType(long) = %q, want text/html", got)
	}
	n := 0
	c.m.Range(func(k, _ any) bool {
		n++
		if len(k.(string)) > maxCachedAcceptLen {
			t.Errorf("cached a header of %d bytes", len(k.(string)))
		}
		return true
	})
	if n != maxCachedAccepts || int(c.n.Load()) != n {
		t.Errorf("cache holds %d entries (count %d), want %d", n, c.n.Load(), maxCachedAccepts)
	}
	// A cached header answers the same again.
	if got := c.contentType("application/x-0"); got != "application/x-0;charset=UTF-8" {
		t.Errorf("contentType(application/x-0) again = %q", got)
	}
}
