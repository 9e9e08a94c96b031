package api

import (
	"errors"
	"net/http"

	"github.com/leaf-go/leaf/snowflake"
)

// snowflakeFailure names, for the JSON API, the snowflake failures that
// Leaf's codes lump together (issue 16 item 9): Leaf's -1 means "clock still
// behind" there, and a time outside the layout or a lost lease read as
// not_initialized. It returns the status and code of err, or 0 and "" when
// err is none of them (idError's defaults apply):
//
//   - [snowflake.ErrTimeRange]: 500 time_outside_layout. The clock reads
//     before the epoch or past the layout's end: retrying does not help; fix
//     the clock or the layout (--epoch-ms, --time-bits).
//   - [snowflake.ErrHighWater]: 503 high_water_not_stored. The time
//     high-water mark could not be stored (a full disk): no ID until a store
//     succeeds; free space where the mark is kept. Leaf code -4.
//   - [snowflake.ErrLeaseExpired]: 503 lease_expired. The worker ID's lease
//     is not renewed, was lost (leaf-server then claims again by itself), or
//     is a new claim without history still waiting out any previous holder.
//   - [snowflake.ErrClockBehind]: 503 clock_behind (Leaf's own -1).
func snowflakeFailure(err error) (int, string) {
	switch {
	case errors.Is(err, snowflake.ErrTimeRange):
		return http.StatusInternalServerError, "time_outside_layout"
	case errors.Is(err, snowflake.ErrHighWater):
		return http.StatusServiceUnavailable, "high_water_not_stored"
	case errors.Is(err, snowflake.ErrLeaseExpired):
		return http.StatusServiceUnavailable, "lease_expired"
	case errors.Is(err, snowflake.ErrClockBehind):
		return http.StatusServiceUnavailable, "clock_behind"
	}
	return 0, ""
}
