package api

import (
	"sort"
	"unicode/utf16"
)

// javaMapOrder returns tags in the order Leaf's /cache lists them: Leaf
// copies its ConcurrentHashMap cache (filled in tags' order, which is its
// database's order) into a java.util.HashMap, and FreeMarker walks that
// map's keys. Both maps iterate by bucket, the low bits of the spread
// String.hashCode, and keep insertion order within a bucket. Not modelled:
// the order ConcurrentHashMap's resize gives two tags in one of its bins
// (their low 5 or more hash bits equal), and HashMap's tree bins (8 tags in
// one bucket). tags is not changed.
func javaMapOrder(tags []string) []string {
	n := len(tags)
	out := append([]string(nil), tags...)
	chmCap, hashCap := 16, 16
	for n >= chmCap-chmCap/4 { // ConcurrentHashMap resizes when the count reaches 0.75 of its table
		chmCap *= 2
	}
	for n > hashCap-hashCap/4 { // HashMap when the count passes it
		hashCap *= 2
	}
	spread := make(map[string]uint32, n)
	for _, t := range out {
		spread[t] = javaSpread(t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return spread[out[i]]&uint32(chmCap-1) < spread[out[j]]&uint32(chmCap-1)
	})
	sort.SliceStable(out, func(i, j int) bool {
		return spread[out[i]]&uint32(hashCap-1) < spread[out[j]]&uint32(hashCap-1)
	})
	return out
}

// javaSpread is java.lang.String.hashCode (31·h + c over UTF-16 code units,
// in 32-bit arithmetic) with HashMap's spread h ^ (h >>> 16); the maps index
// their tables by its low bits.
func javaSpread(s string) uint32 {
	var h uint32
	for _, u := range utf16.Encode([]rune(s)) {
		h = 31*h + uint32(u)
	}
	return h ^ h>>16
}
