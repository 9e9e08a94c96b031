// Package api is leaf-go's HTTP surface: Leaf's compatible routes
// (/api/segment/get/{key}, /api/snowflake/get/{key}, /decodeSnowflakeId),
// the JSON API under /api/v1 (batches, decode and encode, state, admin),
// Leaf's /cache and /db pages, the dashboard, /metrics and the health
// probes. docs/contract.md §4 is the contract of every route.
//
// [NewHandler] builds one chi router; the table in routes_test.go
// (TestRouteTable) lists every route it serves. Errors are turned into HTTP
// answers in exactly one place (errors.go): the Leaf-compatible routes
// answer 500 with the body Leaf's Spring server produces, so existing
// clients cannot tell the difference; everything else uses honest statuses.
//
// One file per job: leaf.go (Leaf's ID routes), batch.go, snowflake.go
// (decode, encode, status), state.go (buffer state and its JSON), admin.go,
// pages.go (operator pages and the dashboard), health.go (probes and
// /api/v1/info), key.go (biz_tag
// checks), errors.go, lograte.go, group.go, group_admin.go and
// group_state.go (date-grouped tags, docs/contract.md §10),
// snowflake_text.go, and the metrics: metrics.go (shared
// buckets, registration), metrics_http.go, metrics_segment.go,
// metrics_snowflake.go.
package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/internal/buildinfo"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

// Deps are what the handler serves from. A nil generator means the mode is
// disabled: its routes answer 503 with a JSON error saying how to enable it.
type Deps struct {
	// Segment serves /api/segment/get/{key}, the segment batch route, the
	// buffer state and Leaf's /cache page; nil when segment mode is off.
	Segment *segment.Generator
	// Store is the leaf_alloc database behind Segment, pinged by /readyz.
	// Nil when segment mode is off.
	Store store.Store
	// Groups serves date-grouped tags (group.go): the formatted and parse
	// routes, Leaf's route on a grouped tag, /api/v1/admin/groups…; nil
	// when segment mode is off.
	Groups *group.Groups
	// Snowflake serves /api/snowflake/get/{key}, the snowflake batch route
	// and the status page; nil when snowflake mode is off (decode and encode
	// then use [snowflake.DefaultLayout]).
	Snowflake *snowflake.Generator
	// SnowflakeSource is the worker ID source behind Snowflake
	// ([snowflake.StaticSource], [github.com/leaf-go/leaf/snowflake/zkworker.Worker],
	// [github.com/leaf-go/leaf/snowflake/sqllease.Lease]).
	// /api/v1/snowflake/status shows its Name as "source" and its Details as
	// "sourceState"; /readyz asks its Ready (a lost SQL lease is not ready);
	// /metrics labels the worker ID with its Name and shows the age of its
	// LastHeartbeat. Nil means source "" on the status page, "unknown" on
	// /metrics, no sourceState, no heartbeat, and a source that is always
	// ready.
	SnowflakeSource snowflake.Source
	// SnowflakeSlot, when set, holds the generator and source in use instead of Snowflake
	// and SnowflakeSource (which are then ignored): leaf-server swaps them after a lost
	// worker ID lease is claimed again. Nil means a slot holding Snowflake and
	// SnowflakeSource for good (nil too when Snowflake is nil).
	SnowflakeSlot *SnowflakeSlot
	// WorkerRange reports what a lease source last saw of its worker ID
	// range (see [WorkerRange]); /metrics shows it as
	// leaf_snowflake_worker_ids_free, leaf_snowflake_worker_ids_range and
	// leaf_snowflake_peer_clock_offset_seconds. Nil, or ok false (no scan
	// yet), leaves those series out: a static source has no range.
	WorkerRange func() (r WorkerRange, ok bool)
	// Logger receives server-side failures only; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of error bodies' timestamps (Unix ms), of /readyz's
	// high-water check and of the rates and ages on /metrics and the state
	// pages; nil means time.Now.
	Now func() time.Time
	// AdminToken enables /api/v1/admin/… (tag create, update, delete, fence)
	// for requests with "Authorization: Bearer <AdminToken>" when Store is
	// set; empty (or a nil Store) leaves the routes out entirely.
	AdminToken string
	// MaxBatch is the largest ?count= of the batch routes, in IDs; zero or
	// less means [DefaultMaxBatch] (10,000).
	MaxBatch int
	// ReadyTimeout bounds the store ping of /readyz (within WaitTimeout);
	// zero or less means 2 s.
	ReadyTimeout time.Duration
	// WaitTimeout is --wait-timeout: the time a route has in all for its
	// calls on Store (the admin API, Leaf's /db, the ping of /readyz);
	// zero or less means 1 s.
	WaitTimeout time.Duration

	// Registerer receives leaf-go's collectors (HTTP requests, per-tag
	// segment state); nil means no metrics and no /metrics route. Use a
	// fresh [prometheus.NewRegistry], not the global one. NewHandler panics
	// if it refuses them (for example a second handler on one registry).
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves; nil means Registerer when that is
	// also a Gatherer (a *prometheus.Registry).
	Gatherer prometheus.Gatherer
	// LoadMetrics is the [LoadMetrics] whose Observe method [segment.New] got
	// as [segment.Config.OnLoad]; its load count and latency metrics are
	// registered with the others. Nil leaves those two metrics out.
	LoadMetrics *LoadMetrics
	// TagMetrics chooses the biz_tags with series of their own on /metrics
	// (leaf-server's --metrics-top-tags, --metrics-tags,
	// --metrics-all-tags-max); the zero value is the default.
	TagMetrics TagMetrics
	// Build is the running binary's build (version, commit, Go version),
	// served on GET /api/v1/info and shown on the dashboard; the zero value
	// shows empty fields.
	Build buildinfo.Info
	// Started is when the server started, for the uptime of GET
	// /api/v1/info; the zero time means when NewHandler ran.
	Started time.Time
	// RunwayWarn is the runway (buffered IDs ÷ rate) below which the
	// dashboard shows a tag in the warning colour; zero or less means 60 s.
	RunwayWarn time.Duration
}

// NewHandler returns the router with every route of leaf-go (listed in
// routes_test.go). It is safe for concurrent use and keeps no state of its
// own beyond d. It panics when d.Registerer refuses the collectors (see
// [Deps.Registerer]).
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
	if d.WaitTimeout <= 0 {
		d.WaitTimeout = time.Second
	}
	if d.MaxBatch <= 0 {
		d.MaxBatch = DefaultMaxBatch
	}
	if d.Started.IsZero() {
		d.Started = d.Now()
	}
	if d.SnowflakeSlot == nil && d.Snowflake != nil {
		d.SnowflakeSlot = NewSnowflakeSlot(d.Snowflake, d.SnowflakeSource)
	}
	h := &handler{d: d, failureLog: &failureLogs{}}

	r := chi.NewRouter()
	h.router = r
	// Path parameters and doubled slashes go before routing, as in Tomcat
	// (key.go, leafPath); chi routes on the request this passes on.
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, leafPath(req))
		})
	})
	r.Use(middleware.Recoverer)
	o := newOps(h) // state API, Leaf's pages, dashboard (pages.go)
	if m := registerMetrics(h.d, o.tracker); m != nil {
		r.Use(m.middleware)
	}

	// Leaf-compatible routes: any method, key taken whole (dots kept). They
	// carry no request ID: chi's RequestID formats one and copies the request
	// on every call, a large share of the router's own cost per ID (the
	// in-process cases of BenchmarkBareChiOverhead hold these routes against
	// a bare chi handler). The failures they log get one made then
	// (requestID).
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
		h.groupRoutes(r) // /api/v1/segment/{tag}/formatted, /parse/{formatted} (group.go)
		r.Get("/api/v1/snowflake", h.snowflakeBatch)

		r.HandleFunc("/decodeSnowflakeId", h.decodeSnowflakeID)
		r.Options("/decodeSnowflakeId", leafOptions)
		r.MethodFunc(http.MethodTrace, "/decodeSnowflakeId", h.methodNotAllowed)
		r.Get("/api/v1/snowflake/decode/{id}", h.decode)
		r.Get("/api/v1/snowflake/encode", h.encode)
		r.Get("/api/v1/snowflake/text/{v}", h.snowflakeText) // snowflake_text.go
		r.Get("/api/v1/snowflake/status", h.snowflakeStatus)

		// Load balancers probe with HEAD: the same status, no body
		// (net/http drops it).
		r.Get("/healthz", h.healthz)
		r.Head("/healthz", h.healthz)
		r.Get("/readyz", h.readyz)
		r.Head("/readyz", h.readyz)
		r.Get("/api/v1/info", h.info)
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
	// failureLog rate-limits the log lines of failed ID requests, per kind.
	failureLog *failureLogs
	// accepts caches the Content-Type of an ID per Accept header (negotiate.go).
	accepts acceptCache
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
