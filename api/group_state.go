package api

import (
	"net/http"
	"strconv"
	"time"
)

// groupStateJSON is one grouped tag on GET /api/v1/groups (the dashboard's
// grouped-tags card).
type groupStateJSON struct {
	BizTag   string `json:"bizTag"`
	Group    string `json:"group"`
	TimeZone string `json:"timeZone"`
	Format   string `json:"format"`
	// Period is the period this server serves ("" before its first
	// request), PeriodEnd when it ends (RFC 3339, "" before).
	Period    string `json:"period"`
	PeriodEnd string `json:"periodEnd"`
	// Last is the highest sequence this server handed out in Period, and
	// Capacity the template's sequences per period (strings: may pass
	// 2^53).
	Last     string `json:"last"`
	Capacity string `json:"capacity"`
	// NextPeriod is the period after the current one; NextPrepared when
	// this server made sure its row exists (RFC 3339, "" not yet).
	NextPeriod   string `json:"nextPeriod"`
	NextPrepared string `json:"nextPrepared"`
}

// groupState is GET /api/v1/groups: the grouped tags' state on this server,
// {"groups":[…]} (empty when segment mode is off or none are declared).
func (h *handler) groupState(w http.ResponseWriter, _ *http.Request) {
	out := []groupStateJSON{}
	if h.d.Groups != nil {
		for _, s := range h.d.Groups.Stats() {
			g := groupStateJSON{BizTag: s.Decl.BizTag, Group: s.Decl.Grp, TimeZone: s.Decl.TimeZone, Format: s.Decl.Format,
				Period: s.Period, Last: strconv.FormatInt(s.Last, 10), Capacity: strconv.FormatInt(s.Capacity, 10),
				NextPeriod: s.NextPeriod}
			if !s.PeriodEnd.IsZero() {
				g.PeriodEnd = s.PeriodEnd.Format(time.RFC3339)
			}
			if !s.NextPrepared.IsZero() {
				g.NextPrepared = s.NextPrepared.UTC().Format(time.RFC3339)
			}
			out = append(out, g)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out, "time": h.d.Now().UTC().Format(time.RFC3339Nano)})
}
