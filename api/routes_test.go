package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/leaf-go/leaf/api"
	"github.com/leaf-go/leaf/internal/dbtest"
)

// anyMethod stands for every method chi routes: the Leaf routes are
// registered without one, as Leaf's Spring mappings are.
const anyMethod = "CONNECT DELETE GET HEAD OPTIONS PATCH POST PUT QUERY TRACE"

// routes is every route leaf-go serves, as chi.Walk reports it over the
// router NewHandler builds: the methods (space-separated, sorted), the chi
// pattern, the Deps a route needs to exist and what answers it. A route
// added or lost fails TestRouteTable until it is written here.
var routes = []struct {
	methods string
	pattern string
	// needs is "admin" for a route that exists only with Deps.AdminToken
	// and Deps.Store, "metrics" for one that needs Deps.Registerer, "" for
	// the others. A disabled mode keeps its routes: they answer 503.
	needs string
	what  string
}{
	// Leaf's compatible routes (leaf.go, snowflake.go): no request ID
	// middleware; OPTIONS and TRACE are answered without taking an ID.
	{anyMethod, "/api/segment/get/{key}", "", "Leaf's segment ID, text/plain; 500 with Leaf's body on failure"},
	{anyMethod, "/api/segment/get/{key}/", "", "the same: Spring's trailing-slash match"},
	{anyMethod, "/api/segment/get/", "", "404: empty key, Spring's body"},
	{anyMethod, "/api/snowflake/get/{key}", "", "Leaf's snowflake ID; the key is checked, then ignored"},
	{anyMethod, "/api/snowflake/get/{key}/", "", "the same: Spring's trailing-slash match"},
	{anyMethod, "/api/snowflake/get/", "", "404: empty key, Spring's body"},
	{anyMethod, "/decodeSnowflakeId", "", "Leaf's decode page, ?snowflakeId= (query or form); OPTIONS 200, TRACE 405"},

	// JSON API (batch.go, snowflake.go, state.go).
	{"GET", "/api/v1/segment/{tag}", "", "segment batch, ?count="},
	{"GET", "/api/v1/snowflake/text/{v}", "", "ID to fixed-width text form and back (snowflake_text.go)"},
	{"GET", "/api/v1/groups", "", "grouped tags' state for the dashboard (group_state.go)"},
	{"GET", "/api/v1/segment/{tag}/formatted", "", "formatted IDs of a grouped tag, ?count= (group.go)"},
	{"GET", "/api/v1/segment/{tag}/parse/{formatted}", "", "period and sequence of a formatted ID (group.go)"},
	{"GET", "/api/v1/segment/buffers", "", "every segment buffer with rate and runway"},
	{"GET", "/api/v1/snowflake", "", "snowflake batch, ?count="},
	{"GET", "/api/v1/snowflake/decode/{id}", "", "an ID's parts"},
	{"GET", "/api/v1/snowflake/encode", "", "an ID from its parts"},
	{"GET", "/api/v1/snowflake/status", "", "worker ID, source, high-water mark"},

	// Admin API (admin.go), behind the bearer token.
	{"GET POST", "/api/v1/admin/tags", "admin", "list, create"},
	{"DELETE PATCH PUT", "/api/v1/admin/tags/{tag}", "admin", "update (PUT and PATCH alike), delete"},
	{"POST", "/api/v1/admin/tags/{tag}/fence", "admin", "raise max_id to at least min"},

	// Operators (pages.go, health.go).
	{"GET", "/metrics", "metrics", "Prometheus exposition of Deps.Gatherer"},
	{"GET HEAD OPTIONS POST", "/cache", "", "Leaf's /cache page, byte for byte"},
	{"GET HEAD OPTIONS POST", "/db", "", "Leaf's /db page, byte for byte"},
	{"GET HEAD", "/", "", "the dashboard"},
	{"GET HEAD", "/css/bootstrap.min.css", "", "the stylesheet Leaf's pages link (Bootstrap 3.3.7, as Leaf ships it)"},
	{"GET HEAD", "/fonts/glyphicons-halflings-regular.woff2", "", "the font that stylesheet declares"},
	{"GET", "/dashboard/*", "", "the dashboard's static files"},
	{"GET HEAD", "/healthz", "", "liveness"},
	{"GET HEAD", "/readyz", "", "readiness of every enabled mode"},
	{"GET", "/api/v1/info", "", "build (version, commit, Go), start time, uptime, readiness reasons"},
}

// walk returns the methods of each pattern of the router h, as routes
// writes them.
func walk(t *testing.T, h http.Handler) map[string]string {
	t.Helper()
	r, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("NewHandler returned %T, want a chi.Routes", h)
	}
	methods := map[string][]string{}
	err := chi.Walk(r, func(method, pattern string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		methods[pattern] = append(methods[pattern], method)
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk: %v", err)
	}
	got := map[string]string{}
	for p, m := range methods {
		slices.Sort(m)
		got[p] = strings.Join(m, " ")
	}
	return got
}

func TestRouteTable(t *testing.T) {
	st := openStore(t, dbtest.SQLite(t))
	tests := []struct {
		name string
		give api.Deps
		// has reports whether a route with that needs is served.
		has func(needs string) bool
	}{
		{"everything", api.Deps{Store: st, AdminToken: "t", Registerer: prometheus.NewRegistry()},
			func(string) bool { return true }},
		{"no admin token, no registerer", api.Deps{Store: st},
			func(needs string) bool { return needs == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := walk(t, api.NewHandler(tt.give))
			want := map[string]string{}
			for _, r := range routes {
				if tt.has(r.needs) {
					want[r.pattern] = r.methods
				}
			}
			for p, m := range want {
				if got[p] != m {
					t.Errorf("route %s: methods %q, want %q", p, got[p], m)
				}
			}
			for p, m := range got {
				if _, ok := want[p]; !ok {
					t.Errorf("route %s (%s) served but not in the route table", p, m)
				}
			}
		})
	}
}
