package api

import (
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// enableSegment tells an operator how to turn segment mode on.
const enableSegment = segmentHow

// dashboardFiles are the dashboard's static files, served at / and
// /dashboard/. They load nothing from elsewhere, so the page works offline.
//
//go:embed dashboard
var dashboardFiles embed.FS

// leafStatic is the stylesheet Leaf's pages link, Bootstrap 3.3.7's
// bootstrap.min.css (MIT, licence beside it), the very file Leaf 1.0.1
// ships in its static folder (121,200 bytes), and the one Glyphicons font
// file a browser loads for it (woff2; Leaf's jar has no fonts, so there the
// browser's font requests fail).
//
//go:embed static/css/bootstrap.min.css static/fonts/glyphicons-halflings-regular.woff2
var leafStatic embed.FS

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
	leafPage(r, "/cache", o.cachePage)
	leafPage(r, "/db", o.dbPage)
	for path, ctype := range map[string]string{
		"/css/bootstrap.min.css":                    "text/css",
		"/fonts/glyphicons-halflings-regular.woff2": "font/woff2",
	} {
		h := leafStaticFile("static"+path, ctype)
		r.Get(path, h)
		r.Head(path, h)
	}
	r.Get("/", o.dashboard)
	r.Head("/", o.dashboard)
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

// Leaf's /cache and /db pages, byte for byte as its FreeMarker templates
// (segment.ftl, db.ftl) render them under Spring Boot 1.5: Java's number
// format with digit grouping ("2,001"), update_time as MyBatis reads a
// TIMESTAMP into a String ("2026-12-01 13:18:24.0"), and every value
// HTML-escaped (so a biz_tag like <script> shows as text).

// cachePageHead is the part of /cache before its rows.
const cachePageHead = `<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
    <meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
    <title>Leaf</title>
    <link href="/css/bootstrap.min.css" rel="stylesheet">
</head>
<body>
<table class="table table-hover">
    <thead>
    <tr>
        <th>name</th>
        <th>init</th>
        <th>next</th>
        <th>pos</th>
        <th>value0</th>
        <th>max0</th>
        <th>step0</th>
        <th>value1</th>
        <th>max1</th>
        <th>step1</th>

    </tr>
    </thead>
    <tbody>
`

// cachePageTail follows the rows of /cache (Leaf's template has the second
// <tbody> where </tbody> belongs; browsers cope, and so do we).
const cachePageTail = `    <tbody>
</table>
</body>
</html>`

const dbPageHead = `<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">
<html>
<head>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<title>Leaf</title>
<link href="/css/bootstrap.min.css" rel="stylesheet">
</head>
<body>
<table class="table table-hover">
<thead>
<tr>
<th>tag</th>
<th>max</th>
<th>step</th>
<th>update</th>
</tr>
</thead>
<tbody>
`

const dbPageTail = `<tbody>
</table>
</body>
</html>`

// pageMethods are the methods /cache and /db answer; Leaf's method-less
// mappings serve PUT, PATCH, DELETE and unknown methods too, as GET: those
// get 405 here (docs/compatibility.md).
const pageMethods = "GET,HEAD,POST,OPTIONS"

// leafPage mounts one of Leaf's pages at pattern for GET, HEAD and POST, and
// OPTIONS with pageMethods.
func leafPage(r chi.Router, pattern string, h http.HandlerFunc) {
	r.Get(pattern, h)
	r.Head(pattern, h)
	r.Post(pattern, h)
	r.Options(pattern, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", pageMethods)
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	})
}

// leafStaticFile serves the embedded file name as Leaf's Spring static
// handler does: the given Content-Type (no charset), byte ranges.
func leafStaticFile(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := leafStatic.ReadFile(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ctype)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	}
}

// writePage answers a Leaf page with the headers Leaf's FreeMarker view
// sends (text/html;charset=UTF-8, Content-Language: en) and ours, and a
// Content-Length where Tomcat chunks.
func (o *ops) writePage(w http.ResponseWriter, status int, page string) {
	securityHeaders(w)
	// Bootstrap's stylesheet declares the Glyphicons font; leafStatic has it.
	w.Header().Set("Content-Security-Policy", w.Header().Get("Content-Security-Policy")+"; font-src 'self'")
	w.Header().Set("Content-Type", "text/html;charset=UTF-8")
	w.Header().Set("Content-Language", "en")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(page)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, page)
}

// cachePage is Leaf's /cache: one row per SegmentBuffer, in the order Java's
// HashMap gives Leaf's tags (javaMapOrder).
func (o *ops) cachePage(w http.ResponseWriter, r *http.Request) {
	if o.tracker == nil {
		o.h.disabled(w, r, "segment", enableSegment)
		return
	}
	stats := o.h.d.Segment.Stats()
	tags := make([]string, len(stats))
	byTag := make(map[string]int, len(stats))
	for i, b := range stats {
		tags[i] = b.BizTag
		byTag[b.BizTag] = i
	}
	var b strings.Builder
	b.WriteString(cachePageHead)
	for _, tag := range javaMapOrder(tags) {
		s := stats[byTag[tag]]
		s0, s1 := s.Segments[0], s.Segments[1]
		b.WriteString("        <tr>\n")
		for _, v := range []string{whitelabelEscaper.Replace(tag), boolStr(s.InitOK), boolStr(s.NextReady),
			javaNumber(int64(s.Pos)), javaNumber(s0.Value), javaNumber(s0.Max), javaNumber(s0.Step),
			javaNumber(s1.Value), javaNumber(s1.Max), javaNumber(s1.Step)} {
			b.WriteString("            <td>" + v + "</td>\n")
		}
		b.WriteString("        </tr>\n        <tr>\n        </tr>\n\n")
	}
	b.WriteString(cachePageTail)
	o.writePage(w, http.StatusOK, b.String())
}

// dbPage is Leaf's /db: the leaf_alloc rows in the store's order (by
// biz_tag; Leaf's MySQL gives its primary key order).
func (o *ops) dbPage(w http.ResponseWriter, r *http.Request) {
	if o.h.d.Store == nil {
		o.h.disabled(w, r, "segment", enableSegment)
		return
	}
	ctx, cancel := o.h.waitCtx(r.Context())
	defer cancel()
	rows, err := o.h.d.Store.Rows(ctx)
	if err != nil {
		o.dbPageError(w, err)
		return
	}
	var b strings.Builder
	b.WriteString(dbPageHead)
	for _, row := range rows {
		b.WriteString("<tr>\n<td>" + whitelabelEscaper.Replace(row.BizTag) + "</td>\n<td>" + javaNumber(row.MaxID) +
			"</td>\n<td>" + javaNumber(row.Step) + "</td>\n<td>" + javaTimestamp(row.UpdateTime) +
			"</td>\n</tr>\n<tr>\n</tr>\n\n")
	}
	b.WriteString(dbPageTail)
	o.writePage(w, http.StatusOK, b.String())
}

// javaNumber formats n as FreeMarker's default number format does in an
// English locale (Java's NumberFormat): groups of three digits separated by
// commas, "-" before a negative number.
func javaNumber(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// javaTimestamp formats t as java.sql.Timestamp.toString, which is what
// Leaf's MyBatis mapping puts in LeafAlloc's String updateTime: seconds, then
// the fraction without trailing zeros but at least one digit
// ("2026-12-01 13:18:24.0"). The zero time is "".
func javaTimestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	t = t.UTC()
	frac := strings.TrimRight(fmt.Sprintf("%09d", t.Nanosecond()), "0")
	if frac == "" {
		frac = "0"
	}
	return t.Format("2006-01-02 15:04:05") + "." + frac
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
