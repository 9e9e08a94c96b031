package api

import (
	"errors"
	"fmt"
	"net/url"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLen is the longest biz_tag accepted, in characters: leaf_alloc's
// biz_tag column is varchar(128).
const MaxKeyLen = 128

// Errors returned by ParseKey.
var (
	// ErrKeyEmpty is returned for an empty key.
	ErrKeyEmpty = errors.New("api: key is empty")
	// ErrKeyTooLong is returned for a key over MaxKeyLen characters.
	ErrKeyTooLong = errors.New("api: key is longer than 128 characters")
	// ErrKeyInvalid is returned for a key that is not valid UTF-8, contains a
	// control character, or has a broken %-escape.
	ErrKeyInvalid = errors.New("api: key has invalid characters")
)

// ParseKey turns the raw {key} path segment into a biz_tag. The key is taken
// whole: unlike Leaf's Spring server, which drops everything after the last
// dot, "a.b" stays "a.b". Percent escapes are decoded. The result has 1 to
// MaxKeyLen characters of valid UTF-8 without control characters.
func ParseKey(raw string) (string, error) {
	key, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrKeyInvalid, err)
	}
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
