package snowflake

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrText is returned by [Layout.ParseText] for a string that is not a text
// form of the layout, and by [Layout.Text] for a negative ID or one whose
// time is past year 9999.
var ErrText = errors.New("snowflake: not a text-form ID")

// textTime is the time part of the text form: UTC to the millisecond.
const textTime = "20060102150405.000"

// Text returns the fixed-width text form of id: its UTC time to the
// millisecond, its worker ID and its sequence, in decimal, zero-padded to the
// widths of the layout's largest values, separated by '-':
//
//	20261201093000123-0042-0007   (DefaultLayout: worker 0..1023, sequence 0..4095)
//
// Every text form of one layout has the same length, and text forms sort as
// their IDs do (time, then worker, then sequence). [Layout.ParseText]
// decodes it back. Errors: [ErrText] for a negative id or a time past year
// 9999.
func (l Layout) Text(id int64) (string, error) {
	if id < 0 {
		return "", fmt.Errorf("%w: negative ID %d", ErrText, id)
	}
	p := l.Decompose(id)
	t := p.Time()
	if t.Year() > 9999 {
		return "", fmt.Errorf("%w: ID %d's time %d ms is past year 9999", ErrText, id, p.Millis)
	}
	ts := strings.Replace(t.Format(textTime), ".", "", 1)
	return ts + "-" + pad(p.Worker, l.MaxWorker()) + "-" + pad(p.Sequence, l.MaxSequence()), nil
}

// ParseText returns the ID whose text form is s ([Layout.Text]). It accepts
// exactly what Text makes. Errors: [ErrText]; the [Layout.Compose] errors
// for fields outside the layout.
func (l Layout) ParseText(s string) (int64, error) {
	ww, sw := len(strconv.FormatInt(l.MaxWorker(), 10)), len(strconv.FormatInt(l.MaxSequence(), 10))
	if len(s) != 17+1+ww+1+sw || s[17] != '-' || s[18+ww] != '-' {
		return 0, fmt.Errorf("%w: %q, want yyyyMMddHHmmssSSS-%s-%s", ErrText, s, strings.Repeat("W", ww), strings.Repeat("S", sw))
	}
	for i := 0; i < len(s); i++ {
		if i != 17 && i != 18+ww && (s[i] < '0' || s[i] > '9') {
			return 0, fmt.Errorf("%w: %q has a non-digit at %d", ErrText, s, i)
		}
	}
	t, err := time.ParseInLocation(textTime, s[:14]+"."+s[14:17], time.UTC)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: time: %v", ErrText, s, err)
	}
	worker, _ := strconv.ParseInt(s[18:18+ww], 10, 64)
	seq, _ := strconv.ParseInt(s[19+ww:], 10, 64)
	return l.Compose(t.UnixMilli(), worker, seq)
}

// pad formats v in decimal, zero-padded to the width of limit.
func pad(v, limit int64) string {
	s := strconv.FormatInt(v, 10)
	w := len(strconv.FormatInt(limit, 10))
	return strings.Repeat("0", w-len(s)) + s
}
