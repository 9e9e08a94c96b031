// Package api is leaf-go's HTTP surface: Leaf's compatible routes
// (/api/segment/get/{key}, /api/snowflake/get/{key}) and the health probes.
//
// NewHandler builds one chi router. Errors are turned into HTTP answers in
// exactly one place (errors.go): the Leaf-compatible routes answer 500 with
// the body Leaf's Spring server produces, so existing clients cannot tell the
// difference; everything else uses honest statuses.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

// Deps are what the handler serves from. A nil generator means the mode is
// disabled: its routes answer 503 with a JSON error saying how to enable it.
type Deps struct {
	// Segment serves /api/segment/get/{key}; nil when segment mode is off.
	Segment *segment.Generator
	// Store is the leaf_alloc database behind Segment, pinged by /readyz.
	// Nil when segment mode is off.
	Store store.Store
	// Snowflake serves /api/snowflake/get/{key}; nil when snowflake mode is
	// off (decode and encode then use snowflake.DefaultLayout).
	Snowflake *snowflake.Generator
	// SnowflakeSource is the worker ID source behind Snowflake
	// (snowflake.StaticSource, zkworker.Worker, sqllease.Lease).
	// /api/v1/snowflake/status shows its Name as "source" and its Details as
	// "sourceState"; /readyz asks its Ready (a lost SQL lease is not ready);
	// /metrics labels the worker ID with its Name and shows the age of its
	// LastHeartbeat. Nil means source "" on the status page, "unknown" on
	// /metrics, no sourceState, no heartbeat, and a source that is always
	// ready.
	SnowflakeSource snowflake.Source
	// Logger receives server-side failures only; nil means slog.Default().
	Logger *slog.Logger
	// Now stamps Leaf error bodies (ms); nil means time.Now.
	Now func() time.Time
	// AdminToken enables /api/v1/admin/… (tag create, update, delete, fence)
	// for requests with "Authorization: Bearer <AdminToken>"; empty leaves the
	// routes out entirely.
	AdminToken string
	// MaxBatch is the largest ?count= of the batch routes, in IDs; zero
	// means DefaultMaxBatch (10,000).
	MaxBatch int
	// ReadyTimeout bounds the store ping of /readyz; zero means 2 s.
	ReadyTimeout time.Duration

	// Registerer receives leaf-go's collectors (HTTP requests, per-tag
	// segment state); nil means no metrics and no /metrics route. Use a
	// fresh prometheus.NewRegistry(), not the global one. NewHandler panics
	// if it refuses them (for example a second handler on one registry).
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves; nil means Registerer when that is
	// also a Gatherer (a *prometheus.Registry).
	Gatherer prometheus.Gatherer
	// LoadMetrics is the [LoadMetrics] whose Observe method segment.New got
	// as [segment.Config.OnLoad]; its load count and latency metrics are
	// registered with the others. Nil leaves those two metrics out.
	LoadMetrics *LoadMetrics
	// RunwayWarn is the runway (buffered IDs ÷ rate) below which the
	// dashboard shows a tag in the warning colour; zero means 60 s.
	RunwayWarn time.Duration
}

// NewHandler returns the router with every route of leaf-go. It is safe for
// concurrent use and keeps no state of its own beyond deps.
func NewHandler(d Deps) http.Handler {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.ReadyTimeout <= 0 {
		d.ReadyTimeout = 2 * time.Second
	}
	if d.MaxBatch <= 0 {
		d.MaxBatch = DefaultMaxBatch
	}
	h := &handler{d: d, clockLog: &logLimit{every: clockLogEvery}}

	r := chi.NewRouter()
	h.router = r
	r.Use(middleware.Recoverer)
	o := newOps(h) // state API, Leaf's pages, dashboard (pages.go)
	if m := registerMetrics(h.d, o.tracker); m != nil {
		r.Use(m.middleware)
	}

	// Leaf-compatible routes: any method, key taken whole (dots kept). They
	// carry no request ID: chi's RequestID formats one and copies the request
	// on every call, a third of the router's own cost per ID (BENCHMARKS.md,
	// Findings 2). The failures they log get one made then (requestID).
	//
	// Leaf runs on Spring 4.3 (Spring Boot 1.5), whose trailing-slash match
	// serves /get/{key}/ as /get/{key}; so do we. Spring answers OPTIONS on
	// these method-less mappings itself (200 and Allow, no handler call), and
	// Leaf's Tomcat refuses TRACE: neither takes an ID here either. HEAD runs
	// the handler and takes an ID, as in Leaf.
	for _, route := range []struct {
		pattern string
		get     http.HandlerFunc
	}{
		{"/api/segment/get/{key}", h.segmentGet},
		{"/api/snowflake/get/{key}", h.snowflakeGet},
	} {
		r.HandleFunc(route.pattern, route.get)
		r.HandleFunc(route.pattern+"/", route.get)
		for _, p := range []string{route.pattern, route.pattern + "/"} {
			r.Options(p, leafOptions)
			r.MethodFunc(http.MethodTrace, p, h.methodNotAllowed)
		}
	}
	r.HandleFunc("/api/segment/get/", h.emptyKey)
	r.HandleFunc("/api/snowflake/get/", h.emptyKey)

	// Everything else: requests that are rarer and may log more than one
	// line (admin audit) carry chi's request ID from the start.
	r.Group(func(r chi.Router) {
		r.Use(middleware.RequestID)
		o.routes(r)
		h.adminRoutes(r)

		r.Get("/api/v1/segment/{tag}", h.segmentBatch)
		r.Get("/api/v1/snowflake", h.snowflakeBatch)

		r.HandleFunc("/decodeSnowflakeId", h.decodeSnowflakeID)
		r.Get("/api/v1/snowflake/decode/{id}", h.decode)
		r.Get("/api/v1/snowflake/encode", h.encode)
		r.Get("/api/v1/snowflake/status", h.snowflakeStatus)

		// Load balancers probe with HEAD: the same status, no body
		// (net/http drops it).
		r.Get("/healthz", h.healthz)
		r.Head("/healthz", h.healthz)
		r.Get("/readyz", h.readyz)
		r.Head("/readyz", h.readyz)
	})
	r.NotFound(h.notFound)
	r.MethodNotAllowed(h.methodNotAllowed)
	return r
}

type handler struct {
	d Deps
	// router is the router NewHandler built, asked for the methods a path
	// serves when a 405 needs its Allow header.
	router chi.Routes
	// clockLog rate-limits the log lines of clock-behind refusals.
	clockLog *logLimit
}

// leafMethods are the methods Leaf's method-less mappings serve, in the
// order of the Allow header Spring 4.3 answers OPTIONS with (every
// HttpMethod but TRACE).
const leafMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

// leafOptions answers OPTIONS on Leaf's ID routes as Spring does: 200, an
// Allow header and no body; no ID is taken.
func leafOptions(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", leafMethods)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// segmentGet is Leaf's SegmentService endpoint: 200 text/plain decimal ID
// with no newline, or 500 with Leaf's error body and code.
func (h *handler) segmentGet(w http.ResponseWriter, r *http.Request) {
	key, ok := h.key(w, r)
	if !ok {
		return
	}
	if h.d.Segment == nil {
		h.disabled(w, r, "segment", "start leaf-server with --segment (LEAF_SEGMENT=true) and a --segment-dsn")
		return
	}
	id, err := h.d.Segment.Get(r.Context(), key)
	if err != nil {
		h.leafError(w, r, segment.Code(err), err)
		return
	}
	writeID(w, id)
}

func (h *handler) emptyKey(w http.ResponseWriter, r *http.Request) {
	h.badRequest(w, r, "biz_tag key is empty: use /api/…/get/{key} with 1 to 128 characters")
}

// key reads and validates {key}; on failure it has answered 400.
func (h *handler) key(w http.ResponseWriter, r *http.Request) (string, bool) {
	key, err := PathKey(r, "key")
	if err != nil {
		h.badRequest(w, r, err.Error())
		return "", false
	}
	return key, true
}

func (h *handler) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// readyz answers 200 when every enabled mode can serve: the store answers a
// ping and the segment generator has loaded its tag list.
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

// textPlain is the Content-Type of an ID, as Leaf's Spring server sends it.
// writeID assigns the slice itself instead of calling Header.Set, which
// would allocate a new one per response; nothing appends to or changes it.
var textPlain = []string{"text/plain;charset=UTF-8"}

func writeID(w http.ResponseWriter, id int64) {
	w.Header()["Content-Type"] = textPlain
	var buf [20]byte
	_, _ = w.Write(strconv.AppendInt(buf[:0], id, 10))
}

// requestID returns the ID under which r's log lines appear: the one chi's
// RequestID middleware put in r's context, or else (on the Leaf routes,
// which skip the middleware) one made now by that middleware, so that it is
// the caller's X-Request-Id when sent, or chi's "host/random-counter" from
// the same counter.
func requestID(r *http.Request) string {
	if id := middleware.GetReqID(r.Context()); id != "" {
		return id
	}
	var id string
	middleware.RequestID(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		id = middleware.GetReqID(r.Context())
	})).ServeHTTP(nil, r)
	return id
}
