package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors. Server answers come back as *Error, whose Is method
// matches the sentinel for its status and Leaf code, so callers write
// errors.Is(err, client.ErrTagNotFound) whatever the route or server kind.
var (
	// ErrTagNotFound is matched by the *Error of Segment for a biz_tag with no
	// leaf_alloc row: Leaf code -2 on /api/segment/get (HTTP 500), or 404 with
	// code "tag_not_found" on the batch route. It is never retried on another
	// server: all servers read the same table.
	ErrTagNotFound = errors.New("client: biz tag not found")
	// ErrNotReady is matched by the *Error of a server that could not hand
	// out an ID in time: segment Leaf code -3 (no segment ready), snowflake
	// codes -1 and -3 (clock behind) and -4 (leaf-go: its time high-water
	// mark could not be stored, e.g. a full disk), or any other 503 of the
	// batch route.
	// The call was retried on the other servers before this was returned.
	ErrNotReady = errors.New("client: server not ready")
	// ErrNotInitialized is matched by the *Error of Segment for Leaf code -1:
	// the server has not loaded its tag list yet (just started, or its
	// database is unreachable).
	ErrNotInitialized = errors.New("client: server not initialised")
	// ErrDisabled is matched by the *Error of a server whose mode is switched
	// off: leaf-go answers 503 saying how to enable it; Java Leaf answers 200
	// with the ID 0, which the client never hands out.
	ErrDisabled = errors.New("client: mode disabled on the server")
	// ErrBatchUnsupported is matched by the *Error of a server that has no
	// batch route (404 or 405 on /api/v1/…): Java Leaf, or an older leaf-go.
	// Use Options.LeafCompatible (or BatchSize 1) for such servers.
	ErrBatchUnsupported = errors.New("client: server has no batch route; use Options.LeafCompatible")
	// ErrInvalidTag is returned by Segment, without a request, for a tag the
	// server would refuse: empty, longer than 128 characters, not valid UTF-8
	// or containing a control character.
	ErrInvalidTag = errors.New("client: invalid biz tag")
	// ErrClosed is returned by Segment and Snowflake after Close, and to
	// callers that were waiting for a refill that Close stopped.
	ErrClosed = errors.New("client: closed")
)

// Error is an answer from a server that is not an ID. Transport failures
// (refused connections, timeouts) are not *Error: they are returned wrapped
// with the server's URL, and the underlying net or context error still
// matches errors.Is/As.
type Error struct {
	// Status is the HTTP status code (500 for every Leaf error, 200 for Java
	// Leaf's disabled-mode ID 0, 4xx/5xx on the batch route).
	Status int
	// LeafCode is Leaf's result code, 0 when the answer carried none.
	// Segment: -1 not initialised, -2 tag unknown, -3 no segment ready.
	// Snowflake: -1 clock still behind after waiting, -2 interrupted, -3
	// clock moved back by more than 5 ms.
	LeafCode int64
	// Code is the batch API's stable error code (for example
	// "tag_not_found"), empty for Leaf's routes.
	Code string
	// Message is the server's message, or the start of a body that was not
	// JSON (a proxy's HTML page, say).
	Message string
	// Server is the base URL of the server that answered.
	Server string

	kind error // the sentinel Is matches, nil for none
}

// Error describes the answer: server, status, codes and message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Server)
	b.WriteString(" answered ")
	b.WriteString(strconv.Itoa(e.Status))
	if e.Code != "" {
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	if e.LeafCode != 0 {
		b.WriteString(" (Leaf code ")
		b.WriteString(strconv.FormatInt(e.LeafCode, 10))
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Is reports whether target is the sentinel this answer stands for
// (ErrTagNotFound, ErrNotReady, ErrNotInitialized, ErrDisabled or
// ErrBatchUnsupported).
func (e *Error) Is(target error) bool {
	return e.kind != nil && target == e.kind
}

// retryable reports whether another server may answer differently: every
// failure except an unknown tag (all servers share one table) and the
// caller's own mistakes (other 4xx).
func (e *Error) retryable() bool {
	switch {
	case e.kind == ErrTagNotFound:
		return false
	case e.kind != nil:
		return true
	case e.Status == 200, e.Status >= 500, e.Status == 408, e.Status == 429:
		return true
	}
	return false
}

// leafResultRe matches the message of Leaf's LeafServerException,
// Result.toString() in Leaf: "Result{id=-2, status=EXCEPTION}".
var leafResultRe = regexp.MustCompile(`Result\{id=(-?\d+),\s*status=EXCEPTION\}`)

// parseLeafCode returns the code in a Leaf exception message, or 0.
func parseLeafCode(msg string) int64 {
	m := leafResultRe.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n >= 0 {
		return 0
	}
	return n
}

// errorBody is the union of the error bodies the client can meet: Spring's
// (Leaf and leaf-go's Leaf routes), leaf-go's JSON API and disabled answer.
type errorBody struct {
	Status   int    `json:"status"`
	Error    string `json:"error"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	LeafCode *int64 `json:"leafCode"`
}

// maxMessage bounds the part of a non-JSON body kept in Error.Message.
const maxMessage = 200

// newError turns a non-ID answer of route r into an *Error.
func newError(r route, server string, status int, body []byte) *Error {
	e := &Error{Status: status, Server: server}
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err == nil {
		e.Code, e.Message = eb.Code, eb.Message
		if eb.LeafCode != nil {
			e.LeafCode = *eb.LeafCode
		} else {
			e.LeafCode = parseLeafCode(eb.Message)
		}
		if e.Message == "" {
			e.Message = eb.Error
		}
		if status == 503 && (strings.Contains(eb.Code, "disabled") || strings.HasSuffix(eb.Error, "mode is disabled")) {
			e.kind = ErrDisabled
			return e
		}
	} else {
		msg := strings.TrimSpace(string(body))
		if len(msg) > maxMessage {
			msg = msg[:maxMessage] + "…"
		}
		e.Message = strings.ToValidUTF8(msg, "?")
		e.LeafCode = parseLeafCode(msg)
	}
	e.kind = kindOf(r, e)
	return e
}

// kindOf picks the sentinel for an answer of route r.
func kindOf(r route, e *Error) error {
	if r.batch && e.Code == "" && (e.Status == 404 || e.Status == 405) {
		// No route at all: Spring's or chi's not-found, not a missing tag.
		return ErrBatchUnsupported
	}
	if r.snowflake {
		switch {
		case e.LeafCode == -1 || e.LeafCode == -3 || e.LeafCode == -4 || e.Status == 503:
			return ErrNotReady
		}
		return nil
	}
	switch {
	case e.LeafCode == -2 || e.Code == "tag_not_found":
		return ErrTagNotFound
	case e.LeafCode == -1:
		return ErrNotInitialized
	case e.LeafCode == -3 || e.Status == 503:
		return ErrNotReady
	case e.LeafCode == -5 || e.Status == 429: // too many new names wait for a lookup: retry later
		return ErrNotReady
	}
	return nil
}

// zeroID is the error for an ID <= 0 in a 200 answer. Java Leaf answers 0
// when the mode is disabled (its ZeroIDGen); no real ID is ever <= 0.
func zeroID(server string, id int64) *Error {
	return &Error{
		Status:  200,
		Server:  server,
		Message: fmt.Sprintf("ID %d is not a real ID (Java Leaf answers 0 when the mode is disabled)", id),
		kind:    ErrDisabled,
	}
}

// checkTag applies the server's key rule (api.ParseKey) before any request:
// 1 to 128 characters of valid UTF-8 without control characters.
func checkTag(tag string) error {
	if tag == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTag)
	}
	if !utf8.ValidString(tag) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidTag)
	}
	n := 0
	for _, c := range tag {
		if unicode.IsControl(c) {
			return fmt.Errorf("%w: control character %U", ErrInvalidTag, c)
		}
		n++
	}
	if n > maxTagLen {
		return fmt.Errorf("%w: %d characters, at most %d", ErrInvalidTag, n, maxTagLen)
	}
	return nil
}

// maxTagLen is leaf_alloc's biz_tag width, varchar(128).
const maxTagLen = 128
