package api

import (
	"context"
	"net/http"
)

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// readyz answers 200 when every enabled mode can serve: the store answers a
// ping, the segment generator has loaded its tag list and can store the
// high-water marks of new segments (segment.Generator.MarksErr: after a
// failed store, e.g. a full disk, it retries one and is 503 while that
// fails, since no new tag and no next segment can be served), and the snowflake
// generator can issue (its worker-ID source is ready and the clock has passed
// the persisted high-water mark; see snowflakeReady).
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{}
	ready := true
	if h.d.Segment != nil {
		ctx, cancel := context.WithTimeout(r.Context(), h.d.ReadyTimeout)
		defer cancel()
		if h.d.Store != nil {
			if err := h.d.Store.Ping(ctx); err != nil {
				checks["store"] = "unreachable: " + err.Error()
				ready = false
			} else {
				checks["store"] = "ok"
			}
		}
		switch err := h.d.Segment.MarksErr(ctx); {
		case !h.d.Segment.Ready():
			checks["segment"] = "tag list not loaded yet"
			ready = false
		case err != nil: // e.g. a full disk: no new segment can be served
			checks["segment"] = err.Error()
			ready = false
		default:
			checks["segment"] = "ok"
		}
	}
	if h.d.Snowflake != nil {
		checks["snowflake"] = "ok"
		if err := h.snowflakeReady(); err != nil {
			checks["snowflake"] = err.Error()
			ready = false
		}
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": ready, "checks": checks})
}

// snowflakeReady is the snowflake check of /readyz: nil when the generator
// can issue now (snowflake.Generator.Ready: the worker ID source backs IDs —
// no lost lease, no identity conflict —, the lease has not expired, the clock
// has passed the high-water mark loaded at start and is not behind the last
// issued ID beyond the wait, the last high-water store did not fail, and the
// generator is not sealed for shutdown), and the source (when given apart from
// the generator) is ready. No I/O: both read in-memory state.
func (h *handler) snowflakeReady() error {
	if src := h.d.SnowflakeSource; src != nil {
		if err := src.Ready(); err != nil {
			return err
		}
	}
	return h.d.Snowflake.Ready()
}
