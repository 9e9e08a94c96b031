package api

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/bizno"
	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/segment/group"
	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/store"
)

// answer is a status and code of the JSON API.
type answer struct {
	status int
	code   string
}

// sentinelAnswers is every sentinel error of the packages whose errors
// reach the JSON API (segment, segment/group, snowflake, store, bizno), with the answer of
// an ID request (idError, given the package's Leaf code) and of an admin
// call (storeError) that fails with it. Those not in failures get the
// fallbacks: 503 not_ready (not_initialized for Leaf's -1) and 503
// store_unavailable.
var sentinelAnswers = map[string]struct {
	err        error
	id, admin  answer
	leafCodeOf func(error) int64
}{
	"segment.ErrClosed":            {segment.ErrClosed, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"group.ErrDecl":                {group.ErrDecl, answer{503, "not_ready"}, answer{400, "bad_group"}, segment.Code},
	"group.ErrPeriodRow":           {group.ErrPeriodRow, answer{503, "not_ready"}, answer{409, "grouped_tag_row"}, segment.Code},
	"segment.ErrMissLimited":       {segment.ErrMissLimited, answer{429, "miss_lookup_limited"}, answer{503, "store_unavailable"}, segment.Code},
	"segment.ErrNoSegment":         {segment.ErrNoSegment, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"group.ErrNotGrouped":          {group.ErrNotGrouped, answer{404, "not_grouped"}, answer{404, "not_grouped"}, segment.Code},
	"segment.ErrNotInitialized":    {segment.ErrNotInitialized, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, segment.Code},
	"group.ErrNotNumeric":          {group.ErrNotNumeric, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"group.ErrPruneLive":           {group.ErrPruneLive, answer{503, "not_ready"}, answer{409, "period_live"}, segment.Code},
	"group.ErrPruned":              {group.ErrPruned, answer{409, "period_pruned"}, answer{503, "store_unavailable"}, segment.Code},
	"segment.ErrRewound":           {segment.ErrRewound, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"segment.ErrTagNotFound":       {segment.ErrTagNotFound, answer{404, "tag_not_found"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrBadLease":            {store.ErrBadLease, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrBadRow":              {store.ErrBadRow, answer{503, "not_ready"}, answer{400, "bad_row"}, segment.Code},
	"store.ErrBadStep":             {store.ErrBadStep, answer{503, "not_ready"}, answer{400, "bad_row"}, segment.Code},
	"store.ErrBelowTombstone":      {store.ErrBelowTombstone, answer{503, "not_ready"}, answer{409, "below_tombstone"}, segment.Code},
	"store.ErrBelowMark":           {store.ErrBelowMark, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrLeaseLost":           {store.ErrLeaseLost, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrNoFreeWorker":        {store.ErrNoFreeWorker, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrNotOpen":             {store.ErrNotOpen, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrOverflow":            {store.ErrOverflow, answer{503, "not_ready"}, answer{400, "bad_row"}, segment.Code},
	"store.ErrPermanent":           {store.ErrPermanent, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"store.ErrTagExists":           {store.ErrTagExists, answer{503, "not_ready"}, answer{409, "tag_exists"}, segment.Code},
	"store.ErrTagNotFound":         {store.ErrTagNotFound, answer{503, "not_ready"}, answer{404, "tag_not_found"}, segment.Code},
	"snowflake.ErrClockBackwards":  {snowflake.ErrClockBackwards, answer{503, "clock_behind"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrClockBehind":     {snowflake.ErrClockBehind, answer{503, "clock_behind"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrClockBehindMark": {snowflake.ErrClockBehindMark, answer{503, "clock_behind"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrDatacenterRange": {snowflake.ErrDatacenterRange, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrHighWater":       {snowflake.ErrHighWater, answer{503, "high_water_not_stored"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrInterrupted":     {snowflake.ErrInterrupted, answer{503, "not_ready"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrInvalidLayout":   {snowflake.ErrInvalidLayout, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrLayoutChange":    {snowflake.ErrLayoutChange, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrLeaseExpired":    {snowflake.ErrLeaseExpired, answer{503, "lease_expired"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrMachineRange":    {snowflake.ErrMachineRange, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrSequenceRange":   {snowflake.ErrSequenceRange, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrTimeRange":       {snowflake.ErrTimeRange, answer{500, "time_outside_layout"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrWorkerRange":     {snowflake.ErrWorkerRange, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"segment.ErrMarksDamaged":      {segment.ErrMarksDamaged, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"snowflake.ErrPeerClockSkew":   {snowflake.ErrPeerClockSkew, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrSealed":          {snowflake.ErrSealed, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"snowflake.ErrText":            {snowflake.ErrText, answer{503, "not_initialized"}, answer{503, "store_unavailable"}, snowflake.Code},
	"store.ErrClaimContended":      {store.ErrClaimContended, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"bizno.ErrGroup":               {bizno.ErrGroup, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"bizno.ErrNoMatch":             {bizno.ErrNoMatch, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"bizno.ErrTemplate":            {bizno.ErrTemplate, answer{503, "not_ready"}, answer{503, "store_unavailable"}, segment.Code},
	"bizno.ErrWidth":               {bizno.ErrWidth, answer{409, "width_exhausted"}, answer{503, "store_unavailable"}, segment.Code},
}

// TestFailuresCoverEverySentinel is the one error-to-HTTP map (failures)
// against every sentinel error the cores and the store declare: each,
// wrapped, gets the answer sentinelAnswers lists, through idError and
// storeError; a sentinel added to one of those packages fails here until
// it is listed, and so does an entry of failures no sentinel reaches.
func TestFailuresCoverEverySentinel(t *testing.T) {
	declared := declaredSentinels(t, "segment", "segment/group", "store", "snowflake", "bizno")
	var listed []string
	for name := range sentinelAnswers {
		listed = append(listed, name)
	}
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("sentinels declared = %v,\nlisted in sentinelAnswers = %v", declared, listed)
	}
	h := &handler{d: Deps{Logger: slog.New(slog.DiscardHandler), Now: time.Now}, failureLog: &failureLogs{}}
	for name, tt := range sentinelAnswers {
		err := fmt.Errorf("context: %w", tt.err)
		if got := serve(t, func(w http.ResponseWriter, r *http.Request) { h.idError(w, r, tt.leafCodeOf(err), err) }); got != tt.id {
			t.Errorf("idError(%s) = %v, want %v", name, got, tt.id)
		}
		if got := serve(t, func(w http.ResponseWriter, r *http.Request) { h.storeError(w, r, err) }); got != tt.admin {
			t.Errorf("storeError(%s) = %v, want %v", name, got, tt.admin)
		}
	}
	for _, f := range failures {
		if !slices.ContainsFunc(listed, func(n string) bool { return sentinelAnswers[n].err == f.err }) {
			t.Errorf("failures has %v (%s), which no listed sentinel is", f.err, f.code)
		}
	}
}

// serve runs f on a recorded request and returns its status and the code
// of its JSON body.
func serve(t *testing.T, f http.HandlerFunc) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	f(rec, httptest.NewRequest("GET", "/api/v1/x", nil))
	var body apiErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if body.Status != rec.Code {
		t.Errorf("body status %d, HTTP status %d", body.Status, rec.Code)
	}
	return answer{rec.Code, body.Code}
}

// declaredSentinels returns "pkg.ErrX" for every package-level variable
// named Err… in the non-test Go files of the given packages (directories
// beside api), sorted.
func declaredSentinels(t *testing.T, pkgs ...string) []string {
	t.Helper()
	var out []string
	for _, pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in ../%s: %v", pkg, err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, spec := range g.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
							out = append(out, filepath.Base(pkg)+"."+n.Name)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
