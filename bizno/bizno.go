// Package bizno formats business numbers: a per-tag template of literal
// text, date fields of a period and one fixed-width sequence field, such as
// ORD{yyyyMMdd}{seq:6} → ORD20261201000123. It parses a template once,
// formats (period start, sequence) into a string and parses such a string
// back. It is pure: no clock, no database.
//
// Template language (docs/contract.md §10):
//
//	literal text   letters, digits, '-', '_' and '.'
//	{yyyyMMdd}     date fields of the period, Java DateTimeFormatter letters:
//	               yyyy (4-digit year), yy (2-digit year), MM (month 01-12),
//	               dd (day 01-31); '-', '_' and '.' may separate them
//	{seq:N}        the sequence in decimal, zero-padded to N digits (1..18)
//	{seq36:N}      the sequence in radix 36 (0-9A-Z), zero-padded to N (1..12)
//
// Every field has a fixed width, so a formatted ID has a fixed length and
// parses back by position. A template has exactly one sequence field and
// the date fields its [Group] needs to tell periods apart (a day needs year,
// month and day). A sequence above the width's capacity is refused with
// [ErrWidth]: never widened, never wrapped (either would repeat or reorder
// IDs). yy repeats every 100 years; use yyyy where that matters.
package bizno

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors of the package; check with errors.Is.
var (
	// ErrTemplate is returned by Parse for a template that breaks the
	// language (see the package doc); the message names the place.
	ErrTemplate = errors.New("bizno: bad template")
	// ErrWidth is returned by Template.Format for a sequence below 1 or
	// above the width's capacity (10^N-1 for {seq:N}, 36^N-1 for
	// {seq36:N}).
	ErrWidth = errors.New("bizno: sequence does not fit the template's width")
	// ErrNoMatch is returned by Template.Parse for a string the template
	// cannot have produced.
	ErrNoMatch = errors.New("bizno: not an ID of this template")
	// ErrGroup is returned by ParseGroup for a name other than day, month
	// or year.
	ErrGroup = errors.New("bizno: group must be day, month or year")
)

// Group is the length of a period: the sequence restarts in every period.
type Group int

// The groups. The zero Group is invalid.
const (
	Day Group = iota + 1
	Month
	Year
)

// ParseGroup reads "day", "month" or "year". Errors: [ErrGroup].
func ParseGroup(s string) (Group, error) {
	switch s {
	case "day":
		return Day, nil
	case "month":
		return Month, nil
	case "year":
		return Year, nil
	}
	return 0, fmt.Errorf("%w, got %q", ErrGroup, s)
}

// String returns "day", "month" or "year" ("" for an invalid Group).
func (g Group) String() string {
	switch g {
	case Day:
		return "day"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return ""
}

// Start returns the start of the period holding t, in loc: local midnight
// of the day, of the first of the month, or of 1 January. Where a DST
// change skips midnight (America/Santiago in September) it is the first
// instant of the day, the transition.
func (g Group) Start(t time.Time, loc *time.Location) time.Time {
	y, m, d := t.In(loc).Date()
	switch g {
	case Month:
		d = 1
	case Year:
		m, d = time.January, 1
	}
	return midnight(y, m, d, loc)
}

// midnight returns the first instant of the local date y-m-d in loc.
// time.Date may normalise a midnight that a DST change skips to the hour
// before, on the previous day; the day then starts at the end of that
// zone period (the transition).
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		if _, end := t.ZoneBounds(); !end.IsZero() {
			return end
		}
	}
	return t
}

// Next returns the start of the period after the one starting at start.
func (g Group) Next(start time.Time) time.Time {
	y, m, d := start.Date()
	switch g {
	case Day:
		d++
	case Month:
		m++
	case Year:
		y++
	}
	n := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // normalise the date
	return midnight(n.Year(), n.Month(), n.Day(), start.Location())
}

// Key returns the period's name in leaf_alloc row names: yyyyMMdd for a
// day, yyyyMM for a month, yyyy for a year, of start's local date. Keys of
// one group sort as their periods do (years 1000..9999).
func (g Group) Key(start time.Time) string {
	switch g {
	case Day:
		return start.Format("20060102")
	case Month:
		return start.Format("200601")
	}
	return start.Format("2006")
}

// ParseKey reads a key of g back into the start of its period in loc.
// Errors: [ErrNoMatch].
func (g Group) ParseKey(key string, loc *time.Location) (time.Time, error) {
	layout := map[Group]string{Day: "20060102", Month: "200601", Year: "2006"}[g]
	if layout == "" || len(key) != len(layout) {
		return time.Time{}, fmt.Errorf("%w: period key %q for group %s", ErrNoMatch, key, g)
	}
	t, err := time.Parse(layout, key)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: period key %q for group %s", ErrNoMatch, key, g)
	}
	return midnight(t.Year(), t.Month(), t.Day(), loc), nil
}

// kind is the kind of a template part.
type kind uint8

const (
	lit kind = iota
	year4
	year2
	month2
	day2
	seq10
	seq36
)

// part is one fixed-width piece of a template.
type part struct {
	kind  kind
	text  string // lit only
	width int    // characters
}

// Template is a parsed template. The zero value is not usable; get one from
// Parse. A Template is immutable and safe for concurrent use.
type Template struct {
	src   string
	parts []part
	width int   // length of every formatted ID, in bytes
	seq   int   // index of the sequence part
	max   int64 // largest sequence that fits
}

// MaxSeq10 and MaxSeq36 bound the widths of {seq:N} and {seq36:N}: the
// largest N whose capacity fits int64.
const (
	MaxSeq10 = 18
	MaxSeq36 = 12
)

// Parse parses a template for group g. Errors: [ErrTemplate] naming the
// problem: an unknown or unclosed field, a literal character outside
// letters, digits, '-', '_' and '.', not exactly one sequence field, a width
// out of range, or date fields that do not tell the periods of g apart
// (day needs year, month and day; month needs year and month; year needs
// year) or that are finer than g (dd in a month group).
func Parse(src string, g Group) (*Template, error) {
	if g.String() == "" {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, ErrGroup)
	}
	if src == "" {
		return nil, fmt.Errorf("%w: empty", ErrTemplate)
	}
	t := &Template{src: src, seq: -1}
	var have [seq36 + 1]bool
	for i := 0; i < len(src); {
		c := src[i]
		if c != '{' {
			if !litChar(c) {
				return nil, fmt.Errorf("%w: character %q at %d: literals may use letters, digits, '-', '_' and '.'", ErrTemplate, c, i)
			}
			j := i
			for j < len(src) && src[j] != '{' && litChar(src[j]) {
				j++
			}
			t.parts = append(t.parts, part{kind: lit, text: src[i:j], width: j - i})
			i = j
			continue
		}
		end := strings.IndexByte(src[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("%w: field at %d is not closed with '}'", ErrTemplate, i)
		}
		field := src[i+1 : i+end]
		if err := t.field(field, &have); err != nil {
			return nil, fmt.Errorf("%w: field {%s} at %d: %s", ErrTemplate, field, i, err.Error())
		}
		i += end + 1
	}
	if t.seq < 0 {
		return nil, fmt.Errorf("%w: no sequence field ({seq:N} or {seq36:N})", ErrTemplate)
	}
	yearOK := have[year4] || have[year2]
	switch {
	case !yearOK:
		return nil, fmt.Errorf("%w: group %s needs a year field ({yyyy} or {yy})", ErrTemplate, g)
	case g <= Month && !have[month2]:
		return nil, fmt.Errorf("%w: group %s needs a month field (MM)", ErrTemplate, g)
	case g == Day && !have[day2]:
		return nil, fmt.Errorf("%w: group day needs a day field (dd)", ErrTemplate)
	case g >= Month && have[day2]:
		return nil, fmt.Errorf("%w: group %s has no day: dd would be constant", ErrTemplate, g)
	case g == Year && have[month2]:
		return nil, fmt.Errorf("%w: group year has no month: MM would be constant", ErrTemplate)
	}
	for _, p := range t.parts {
		t.width += p.width
	}
	return t, nil
}

// field adds the parts of one {…} field to t.
func (t *Template) field(f string, have *[seq36 + 1]bool) error {
	if name, n, ok := strings.Cut(f, ":"); ok {
		var k kind
		var limit int
		switch name {
		case "seq":
			k, limit = seq10, MaxSeq10
		case "seq36":
			k, limit = seq36, MaxSeq36
		default:
			return fmt.Errorf("unknown field %q (want seq or seq36)", name)
		}
		w, err := strconv.Atoi(n)
		if err != nil || w < 1 || w > limit || strconv.Itoa(w) != n {
			return fmt.Errorf("width must be an integer from 1 to %d", limit)
		}
		if t.seq >= 0 {
			return errors.New("a template has exactly one sequence field")
		}
		t.seq = len(t.parts)
		t.parts = append(t.parts, part{kind: k, width: w})
		t.max = capacity(k, w)
		return nil
	}
	if f == "" {
		return errors.New("empty field")
	}
	for i := 0; i < len(f); {
		c := f[i]
		j := i
		for j < len(f) && f[j] == c {
			j++
		}
		run := f[i:j]
		var k kind
		switch {
		case run == "yyyy" || run == "uuuu":
			k = year4
		case run == "yy" || run == "uu":
			k = year2
		case run == "MM":
			k = month2
		case run == "dd":
			k = day2
		case c == '-' || c == '_' || c == '.':
			t.parts = append(t.parts, part{kind: lit, text: run, width: len(run)})
			i = j
			continue
		default:
			return fmt.Errorf("%q is not a date field (use yyyy, yy, MM, dd)", run)
		}
		if have[k] || (k == year4 && have[year2]) || (k == year2 && have[year4]) {
			return fmt.Errorf("%q repeats a date field", run)
		}
		have[k] = true
		t.parts = append(t.parts, part{kind: k, width: len(run)})
		i = j
	}
	return nil
}

func litChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func capacity(k kind, w int) int64 {
	base := int64(10)
	if k == seq36 {
		base = 36
	}
	n := int64(1)
	for range w {
		n *= base
	}
	return n - 1
}

// String returns the template's source text.
func (t *Template) String() string { return t.src }

// Len returns the length of every ID the template formats, in bytes.
func (t *Template) Len() int { return t.width }

// Capacity returns the largest sequence that fits the width (10^N-1 or
// 36^N-1): the number of IDs a period can hand out, as sequences start at 1.
func (t *Template) Capacity() int64 { return t.max }

// Numeric reports whether every ID of the template is decimal digits that
// fit an int64 with no leading zero dropped: no letters, no separators, no
// radix-36 sequence, at most 18 characters, and a first field that cannot
// start with '0' (a year). Only such templates may answer Leaf's numeric
// route.
func (t *Template) Numeric() bool {
	if t.width > 18 {
		return false
	}
	for i, p := range t.parts {
		switch {
		case p.kind == lit:
			for j := 0; j < len(p.text); j++ {
				if p.text[j] < '0' || p.text[j] > '9' {
					return false
				}
			}
			if i == 0 && p.text[0] == '0' {
				return false
			}
		case p.kind == seq36:
			return false
		case i == 0 && p.kind != year4:
			return false // yy, MM, dd and seq may start with 0
		}
	}
	return true
}

// Format appends the ID of sequence seq in the period starting at start
// (its date fields are read in start's location) to dst. Errors:
// [ErrWidth] when seq is below 1 or above Capacity; dst is then returned
// unchanged.
func (t *Template) Format(dst []byte, start time.Time, seq int64) ([]byte, error) {
	if seq < 1 || seq > t.max {
		return dst, fmt.Errorf("%w: sequence %d, template %s holds 1..%d", ErrWidth, seq, t.src, t.max)
	}
	y, m, d := start.Date()
	for _, p := range t.parts {
		switch p.kind {
		case lit:
			dst = append(dst, p.text...)
		case year4:
			dst = appendNum(dst, int64(y%10000), 10, 4)
		case year2:
			dst = appendNum(dst, int64(y%100), 10, 2)
		case month2:
			dst = appendNum(dst, int64(m), 10, 2)
		case day2:
			dst = appendNum(dst, int64(d), 10, 2)
		case seq10:
			dst = appendNum(dst, seq, 10, p.width)
		case seq36:
			dst = appendNum(dst, seq, 36, p.width)
		}
	}
	return dst, nil
}

// digits36 are the digits of radix 36, upper case.
const digits36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// appendNum appends v >= 0 in base, zero-padded to w digits (v fits).
func appendNum(dst []byte, v int64, base int64, w int) []byte {
	n := len(dst)
	for range w {
		dst = append(dst, '0')
	}
	for i := len(dst) - 1; i >= n && v > 0; i-- {
		dst[i] = digits36[v%base]
		v /= base
	}
	return dst
}

// Parsed is what [Template.Parse] reads from an ID.
type Parsed struct {
	// Year, Month and Day are the period's date fields as read (Month and
	// Day are 1 when the template has none; Year is in 1900..2099 when the
	// template has only yy, taken as 2000+yy).
	Year  int
	Month time.Month
	Day   int
	// Seq is the sequence, 1..Capacity.
	Seq int64
}

// Start returns the start of the parsed period in loc.
func (p Parsed) Start(loc *time.Location) time.Time {
	return midnight(p.Year, p.Month, p.Day, loc)
}

// Parse reads an ID the template formatted back into its period fields and
// sequence. It accepts exactly what Format produces: the same length,
// literals, zero-padded digits, upper-case radix 36, a valid date, a
// sequence from 1. A yy year is read as 20yy. Errors: [ErrNoMatch] naming
// the first mismatch.
func (t *Template) Parse(s string) (Parsed, error) {
	out := Parsed{Month: 1, Day: 1}
	if len(s) != t.width {
		return out, fmt.Errorf("%w: %d characters, template %s makes %d", ErrNoMatch, len(s), t.src, t.width)
	}
	pos := 0
	for _, p := range t.parts {
		f := s[pos : pos+p.width]
		switch p.kind {
		case lit:
			if f != p.text {
				return out, fmt.Errorf("%w: %q at %d, want %q", ErrNoMatch, f, pos, p.text)
			}
		case seq36:
			v, ok := radix36(f)
			if !ok {
				return out, fmt.Errorf("%w: %q at %d is not %d radix-36 digits (0-9A-Z)", ErrNoMatch, f, pos, p.width)
			}
			out.Seq = v
		default:
			v, ok := decimal(f)
			if !ok {
				return out, fmt.Errorf("%w: %q at %d is not %d digits", ErrNoMatch, f, pos, p.width)
			}
			switch p.kind {
			case year4:
				out.Year = int(v)
			case year2:
				out.Year = 2000 + int(v)
			case month2:
				out.Month = time.Month(v)
			case day2:
				out.Day = int(v)
			case seq10:
				out.Seq = v
			}
		}
		pos += p.width
	}
	if out.Seq < 1 {
		return out, fmt.Errorf("%w: sequence 0 is never handed out", ErrNoMatch)
	}
	if out.Month < 1 || out.Month > 12 || out.Day < 1 ||
		time.Date(out.Year, out.Month, out.Day, 0, 0, 0, 0, time.UTC).Day() != out.Day {
		return out, fmt.Errorf("%w: %04d-%02d-%02d is not a date", ErrNoMatch, out.Year, out.Month, out.Day)
	}
	return out, nil
}

func decimal(f string) (int64, bool) {
	var v int64
	for i := 0; i < len(f); i++ {
		if f[i] < '0' || f[i] > '9' {
			return 0, false
		}
		v = v*10 + int64(f[i]-'0')
	}
	return v, true
}

func radix36(f string) (int64, bool) {
	var v int64
	for i := 0; i < len(f); i++ {
		c := f[i]
		var d int64
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case c >= 'A' && c <= 'Z':
			d = int64(c-'A') + 10
		default:
			return 0, false
		}
		v = v*36 + d
	}
	return v, true
}
