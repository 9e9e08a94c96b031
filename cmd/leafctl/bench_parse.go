package main

import (
	"bytes"
	"math"
)

// parseID parses a positive or zero decimal int64 without allocating: only
// ASCII digits, at most 19 of them, no sign.
func parseID(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// idsKey is the member of a batch answer that holds the IDs.
var idsKey = []byte(`"ids"`)

// parseIDs appends the IDs of a batch answer, {"ids":["1","2",…]} (IDs as
// decimal strings, as leaf-go's batch API sends them), to dst without
// allocating beyond dst's growth. It reads the first "ids" member (a string
// "ids" followed by a colon) and ignores the rest of the object.
func parseIDs(body []byte, dst []int64) ([]int64, bool) {
	var b []byte
	for rest := body; ; {
		i := bytes.Index(rest, idsKey)
		if i < 0 {
			return dst, false
		}
		var ok bool
		if b, ok = expect(rest[i+len(idsKey):], ':'); ok {
			break
		}
		rest = rest[i+len(idsKey):]
	}
	b, ok := expect(b, '[')
	if !ok {
		return dst, false
	}
	if b, ok = expect(b, ']'); ok {
		return dst, true
	}
	for {
		if b, ok = expect(b, '"'); !ok {
			return dst, false
		}
		end := bytes.IndexByte(b, '"')
		if end < 0 {
			return dst, false
		}
		id, ok := parseID(b[:end])
		if !ok {
			return dst, false
		}
		dst = append(dst, id)
		b = b[end+1:]
		if rest, ok := expect(b, ','); ok {
			b = rest
			continue
		}
		_, ok = expect(b, ']')
		return dst, ok
	}
}

// expect skips JSON whitespace and then c, reporting whether c was there.
func expect(b []byte, c byte) ([]byte, bool) {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	if len(b) == 0 || b[0] != c {
		return b, false
	}
	return b[1:], true
}
