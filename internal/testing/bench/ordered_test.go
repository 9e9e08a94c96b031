package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/internal/servertest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/dsn"
)

var orderedBench = flag.Bool("ordered", false, "run TestOrderedThroughput, the ordered-tag figures of BENCHMARKS.md (otherwise it skips)")

// TestOrderedThroughput measures an ordered tag (docs/contract.md §12)
// against a plain tag in the same run: IDs/s over Leaf's route of one real
// leaf-server on loopback, at 1, 16 and 256 concurrent clients, on
// PostgreSQL and on MariaDB (fresh databases on the local servers), and the
// database writes per ID of the ordered tag (max_id grows by one per ID;
// the writes are the server's allocations, read from its buffers API). It
// runs only with -ordered (`go test -run TestOrderedThroughput ./bench/
// -args -ordered` in internal/testing) and asserts no speed: the figures
// go to BENCHMARKS.md by hand.
func TestOrderedThroughput(t *testing.T) {
	if !*orderedBench {
		t.Skip("run with -args -ordered")
	}
	bin := serverBin
	if bin == "" {
		var err error
		if bin, err = servertest.Build(t.TempDir(), false); err != nil {
			t.Fatal(err)
		}
	}
	d := 3 * time.Second
	if *quick {
		d = 500 * time.Millisecond
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer hc.CloseIdleConnections()
	var out strings.Builder
	fmt.Fprintf(&out, "| database | clients | plain IDs/s | ordered IDs/s | ordered ÷ plain | ordered p99 | ordered IDs per DB write |\n|---|---|---|---|---|---|---|\n")
	for _, kind := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"PostgreSQL", dbtest.Postgres}, {"MariaDB", dbtest.MySQL}} {
		dsnStr := kind.dsn(t)
		st, err := dsn.Open(t.Context(), dsnStr, true)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for _, r := range []store.Row{{BizTag: "plain", Step: 2000}, {BizTag: "ord", Step: 2000, Ordered: true}} {
			if err := st.Create(t.Context(), r); err != nil {
				t.Fatal(err)
			}
		}
		dir := t.TempDir()
		p := servertest.Start(t, bin, servertest.Options{Dir: dir, Args: []string{
			"--segment-dsn", dsnStr, "--migrate=false", "--snowflake=false", "--demo-tag=false",
			"--data-dir", dir + "/data", "--wait-timeout", "5s",
		}})
		get := func(tag string) func(context.Context) (int64, error) {
			url := p.URL("/api/segment/get/" + tag)
			return func(ctx context.Context) (int64, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return 0, err
				}
				resp, err := hc.Do(req)
				if err != nil {
					return 0, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					return 0, err
				}
				if resp.StatusCode != http.StatusOK {
					return 0, fmt.Errorf("%d %s", resp.StatusCode, b)
				}
				return strconv.ParseInt(string(b), 10, 64)
			}
		}
		drive(t.Context(), 16, 500*time.Millisecond, get("plain")) // warm-up: connections, first segment
		drive(t.Context(), 16, 500*time.Millisecond, get("ord"))
		for _, c := range []int{1, 16, 256} {
			plain := drive(t.Context(), c, d, get("plain"))
			writes0 := batches(t, p, "ord")
			ord := drive(t.Context(), c, d, get("ord"))
			writes := batches(t, p, "ord") - writes0
			for _, r := range []driveResult{plain, ord} {
				if r.duplicates > 0 || r.errs > 0 {
					t.Errorf("%s, %d clients: %d duplicates, %d errors (first: %v)", kind.name, c, r.duplicates, r.errs, r.firstErr)
				}
			}
			perWrite := 0.0
			if writes > 0 {
				perWrite = float64(ord.ids) / float64(writes)
			}
			fmt.Fprintf(&out, "| %s | %d | %.0f | %.0f | %.2f× | %v | %.1f |\n", kind.name, c, plain.perS, ord.perS,
				ord.perS/plain.perS, ord.p99.Round(10*time.Microsecond), perWrite)
		}
	}
	t.Logf("ordered vs plain tag, %v per cell, %s:\n%s", d, time.Now().UTC().Format("2006-01-02 15:04 UTC"), out.String())
}

// batches reads the allocation count of tag from the server's buffers API.
func batches(t *testing.T, p *servertest.Proc, tag string) int64 {
	t.Helper()
	status, body, err := p.Get(t.Context(), "/api/v1/segment/buffers?prefix="+tag+"&sort=tag")
	if err != nil || status != http.StatusOK {
		t.Fatalf("buffers: %d %v %s", status, err, body)
	}
	var v struct {
		Buffers []struct {
			BizTag  string `json:"bizTag"`
			Ordered bool   `json:"ordered"`
			Batches string `json:"batches"`
		} `json:"buffers"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("buffers: %v: %s", err, body)
	}
	for _, b := range v.Buffers {
		if b.BizTag == tag {
			if !b.Ordered {
				t.Errorf("buffers shows %s as not ordered", tag)
			}
			n, err := strconv.ParseInt(b.Batches, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("buffers has no %s: %s", tag, body)
	return 0
}
