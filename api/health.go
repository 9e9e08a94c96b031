package api

import (
	"context"
	"net/http"
	"time"
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
	ready, checks := h.readiness(r.Context())
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": ready, "checks": checks})
}

// info answers GET /api/v1/info: the build (version, commit, commitTime,
// modified, goVersion, platform), when the server started (RFC 3339, UTC)
// and its uptime in whole seconds, and the readiness /readyz reports (ready
// and checks, the reasons). Always 200: it describes, it does not probe for
// a load balancer.
func (h *handler) info(w http.ResponseWriter, r *http.Request) {
	ready, checks := h.readiness(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{
		"build":         h.d.Build,
		"started":       h.d.Started.UTC().Format(time.RFC3339),
		"uptimeSeconds": int64(h.d.Now().Sub(h.d.Started) / time.Second),
		"ready":         ready,
		"checks":        checks,
	})
}

// readiness is what /readyz and /api/v1/info report: whether every enabled
// mode can serve, and per check "ok" or the reason it cannot.
func (h *handler) readiness(ctx context.Context) (bool, map[string]string) {
	checks := map[string]string{}
	ready := true
	if h.d.Segment != nil {
		ctx, cancel := h.waitCtx(ctx)
		defer cancel()
		ctx, cancelReady := context.WithTimeout(ctx, h.d.ReadyTimeout)
		defer cancelReady()
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
	if gen, _ := h.snowflakeInUse(); gen != nil {
		checks["snowflake"] = "ok"
		if err := h.snowflakeReady(); err != nil {
			checks["snowflake"] = err.Error()
			ready = false
		}
	}
	return ready, checks
}

// snowflakeReady is the snowflake check of /readyz: nil when the generator
// can issue now (snowflake.Generator.Ready: the worker ID source backs IDs —
// no lost lease, no identity conflict —, the lease has not expired, the clock
// has passed the high-water mark loaded at start and is not behind the last
// issued ID beyond the wait, the last high-water store did not fail, and the
// generator is not sealed for shutdown), and the source (when given apart from
// the generator) is ready. No I/O: both read in-memory state.
func (h *handler) snowflakeReady() error {
	gen, src := h.snowflakeInUse()
	if src != nil {
		if err := src.Ready(); err != nil {
			return err
		}
	}
	return gen.Ready()
}
