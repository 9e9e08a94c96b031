package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
)

// MaxKeyLen is the longest biz_tag accepted, in characters: leaf_alloc's
// biz_tag column is varchar(128).
const MaxKeyLen = 128

// Errors returned by [ParseKey] and [PathKey].
var (
	// ErrKeyEmpty is returned for an empty key.
	ErrKeyEmpty = errors.New("api: key is empty")
	// ErrKeyTooLong is returned for a key over [MaxKeyLen] characters.
	ErrKeyTooLong = errors.New("api: key is longer than 128 characters")
	// ErrKeyInvalid is returned for a key that is not valid UTF-8, contains a
	// control character, or has a broken %-escape.
	ErrKeyInvalid = errors.New("api: key has invalid characters")
)

// PathKey returns the biz_tag in the URL parameter name of r, decoded exactly
// once and checked by [ParseKey]. chi hands over the escaped segment when the
// request's path needed r.URL.RawPath (e.g. it holds %2F) and the decoded one
// otherwise; decoding the latter again would let "/get/%2541" (tag "%41")
// reach tag "A". Errors: those of [ParseKey]; [ErrKeyInvalid] for a broken
// %-escape.
func PathKey(r *http.Request, name string) (string, error) {
	raw := chi.URLParam(r, name)
	if r.URL.RawPath != "" {
		var err error
		if raw, err = url.PathUnescape(raw); err != nil {
			return "", fmt.Errorf("%w: %v", ErrKeyInvalid, err)
		}
	}
	return ParseKey(raw)
}

// ParseKey checks a decoded biz_tag. The key is taken whole: unlike Leaf's
// Spring server, which drops everything after the last dot, "a.b" stays
// "a.b", and "%41" stays "%41". A valid key has 1 to [MaxKeyLen] characters
// of valid UTF-8 without control characters. Errors: [ErrKeyEmpty],
// [ErrKeyTooLong], [ErrKeyInvalid].
func ParseKey(key string) (string, error) {
	if key == "" {
		return "", ErrKeyEmpty
	}
	if !utf8.ValidString(key) {
		return "", ErrKeyInvalid
	}
	n := 0
	for _, c := range key {
		if unicode.IsControl(c) {
			return "", fmt.Errorf("%w: control character %U", ErrKeyInvalid, c)
		}
		n++
	}
	if n > MaxKeyLen {
		return "", fmt.Errorf("%w: %d characters", ErrKeyTooLong, n)
	}
	return key, nil
}

// leafPath returns r with its path as Tomcat and Spring MVC match it: every
// ";name=value" path parameter dropped ("/get/t;jsessionid=1" is "/get/t")
// and runs of slashes collapsed ("/api//segment/get/t" is
// "/api/segment/get/t"). Both work on the escaped path, so "%3B" and "%2F"
// stay part of a key, as in Leaf. The JSON API (/api/v1/…) is left as sent,
// and so is any path with neither, which is returned as r itself. The copy
// keeps r.RequestURI, so error bodies still show the raw path (rawPath).
func leafPath(r *http.Request) *http.Request {
	if !pathToClean(r.URL.Path) && !pathToClean(r.URL.RawPath) || isV1(r) {
		return r
	}
	esc := r.URL.EscapedPath()
	var b strings.Builder
	segs := strings.Split(esc, "/")
	for i, seg := range segs {
		seg, _, _ = strings.Cut(seg, ";")
		switch {
		case i == 0:
		case seg == "" && i < len(segs)-1:
			continue // an empty segment inside: "//" is "/"
		default:
			b.WriteByte('/')
		}
		b.WriteString(seg)
	}
	clean := b.String()
	path, err := url.PathUnescape(clean)
	if err != nil {
		return r // a broken escape: left for the route to refuse
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = path, clean
	r2.URL = &u
	return r2
}

// pathToClean reports whether p has a ';' or a "//" for leafPath to remove.
func pathToClean(p string) bool {
	return strings.Contains(p, ";") || strings.Contains(p, "//")
}
