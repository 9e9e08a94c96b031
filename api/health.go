package api

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// readyz answers 200 when every enabled mode can serve: the store answers a
// ping, the segment generator has loaded its tag list, and the snowflake
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
		if h.d.Segment.Ready() {
			checks["segment"] = "ok"
		} else {
			checks["segment"] = "tag list not loaded yet"
			ready = false
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

// snowflakeReady is the snowflake check of /readyz: nil when the worker ID
// source still backs IDs (Source.Ready) and the clock has passed the
// high-water mark the generator loaded at start. After a restart that mark
// may lie ahead of the clock (it is stored ahead of the IDs issued): until
// the clock passes it every snowflake request is refused, so the server is
// not ready.
func (h *handler) snowflakeReady() error {
	if src := h.d.SnowflakeSource; src != nil {
		if err := src.Ready(); err != nil {
			return err
		}
	}
	if behind := h.d.Snowflake.Stats().Floor.Sub(h.d.Now()); behind > 0 {
		return fmt.Errorf("clock behind the persisted high-water mark by %v: no snowflake IDs until it passes", behind.Round(time.Millisecond))
	}
	return nil
}
