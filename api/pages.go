package api

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leaf-go/leaf/store"
)

// enableSegment tells an operator how to turn segment mode on.
const enableSegment = "start leaf-server with --segment (LEAF_SEGMENT=true) and a --segment-dsn"

// dashboardFiles are the dashboard's static files, served at / and
// /dashboard/. They load nothing from elsewhere, so the page works offline.
//
//go:embed dashboard
var dashboardFiles embed.FS

// ops serves what operators look at: /metrics, the JSON state, Leaf's
// /cache and /db pages and the dashboard.
type ops struct {
	h          *handler
	tracker    *tracker // nil when segment mode is off
	gatherer   prometheus.Gatherer
	runwayWarn time.Duration
}

// newOps builds the operator routes' state. The collectors are registered
// apart, by registerMetrics (metrics.go).
func newOps(h *handler) *ops {
	o := &ops{h: h, runwayWarn: h.d.RunwayWarn}
	if o.runwayWarn <= 0 {
		o.runwayWarn = defaultRunway
	}
	if h.d.Segment != nil {
		o.tracker = newTracker(h.d.Segment, h.d.Now)
	}
	if reg := h.d.Registerer; reg != nil {
		o.gatherer = h.d.Gatherer
		if o.gatherer == nil {
			o.gatherer, _ = reg.(prometheus.Gatherer)
		}
	}
	return o
}

// routes mounts the operator routes on r.
func (o *ops) routes(r chi.Router) {
	if o.gatherer != nil {
		r.Get("/metrics", promhttp.HandlerFor(o.gatherer, promhttp.HandlerOpts{}).ServeHTTP)
	}
	r.Get("/api/v1/segment/buffers", o.segmentBuffers)
	r.Get("/cache", o.cachePage)
	r.Get("/db", o.dbPage)
	r.Get("/", o.dashboard)
	static, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	files := http.StripPrefix("/dashboard/", http.FileServerFS(static))
	r.Get("/dashboard/*", func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// securityHeaders forbids the pages anything but their own files.
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy",
		"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

func (o *ops) dashboard(w http.ResponseWriter, r *http.Request) {
	b, err := dashboardFiles.ReadFile("dashboard/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// pageTmpl renders Leaf's two bare tables. html/template escapes every
// value, so a biz_tag like <script> shows as text.
var pageTmpl = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="/dashboard/style.css"></head>
<body class="leaf-page"><h1>{{.Title}}</h1>
<table class="leaf-table"><thead><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{else}}<tr><td colspan="{{len .Columns}}">no rows</td></tr>{{end}}</tbody>
</table><p><a href="/">dashboard</a> · <a href="/cache">/cache</a> · <a href="/db">/db</a></p></body></html>
`))

type pageData struct {
	Title   string
	Columns []string
	Rows    [][]string
}

func (o *ops) render(w http.ResponseWriter, status int, d pageData) {
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pageTmpl.Execute(w, d); err != nil {
		o.h.d.Logger.Warn("render page", "title", d.Title, "err", err)
	}
}

// cachePage is Leaf's /cache: one row per buffer with Leaf's column names.
func (o *ops) cachePage(w http.ResponseWriter, r *http.Request) {
	if o.tracker == nil {
		o.h.disabled(w, r, "segment", enableSegment)
		return
	}
	d := pageData{Title: "Leaf segment cache", Columns: []string{
		"name", "init", "next", "pos", "value0", "max0", "step0", "value1", "max1", "step1"}}
	for _, b := range o.h.d.Segment.Stats() {
		s0, s1 := b.Segments[0], b.Segments[1]
		d.Rows = append(d.Rows, []string{b.BizTag, boolStr(b.InitOK), boolStr(b.NextReady), i64(int64(b.Pos)),
			i64(s0.Value), i64(s0.Max), i64(s0.Step), i64(s1.Value), i64(s1.Max), i64(s1.Step)})
	}
	o.render(w, http.StatusOK, d)
}

// dbPage is Leaf's /db: the leaf_alloc rows.
func (o *ops) dbPage(w http.ResponseWriter, r *http.Request) {
	if o.h.d.Store == nil {
		o.h.disabled(w, r, "segment", enableSegment)
		return
	}
	rows, err := o.h.d.Store.Rows(r.Context())
	if err != nil {
		o.dbPageError(w, err)
		return
	}
	d := pageData{Title: "Leaf database", Columns: []string{"tag", "max", "step", "update"}}
	for _, row := range rows {
		d.Rows = append(d.Rows, []string{row.BizTag, i64(row.MaxID), i64(row.Step), updateTime(row)})
	}
	o.render(w, http.StatusOK, d)
}

func updateTime(r store.Row) string {
	if r.UpdateTime.IsZero() {
		return ""
	}
	return r.UpdateTime.UTC().Format("2006-01-02 15:04:05")
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
