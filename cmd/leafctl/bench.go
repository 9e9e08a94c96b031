package main

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaf-go/leaf/store"
)

// Bench modes, the values of --mode.
const (
	modeSegment   = "segment"
	modeSnowflake = "snowflake"
)

// benchConfig is one bench run.
type benchConfig struct {
	server      string        // base URL, no trailing slash
	mode        string        // modeSegment or modeSnowflake
	tag         string        // biz tag (segment) or key (snowflake single-ID route)
	concurrency int           // workers, each with one request in flight, >= 1
	duration    time.Duration // stop after this long; 0 means no time limit (requests > 0)
	requests    int64         // stop after this many requests; 0 means no count limit (duration > 0)
	batch       int           // IDs per request; 0 or 1 uses Leaf's single-ID route
	timeout     time.Duration // limit of one request
}

// url returns the URL every request of the run fetches.
func (c benchConfig) url() string {
	switch {
	case c.batch > 1 && c.mode == modeSegment:
		return c.server + "/api/v1/segment/" + url.PathEscape(c.tag) + "?count=" + strconv.Itoa(c.batch)
	case c.batch > 1:
		return c.server + "/api/v1/snowflake?count=" + strconv.Itoa(c.batch)
	default:
		return c.server + "/api/" + c.mode + "/get/" + url.PathEscape(c.tag)
	}
}

// perRequest is the number of IDs one successful request returns.
func (c benchConfig) perRequest() int { return max(c.batch, 1) }

func newBenchCmd(e env, g *globals) *cobra.Command {
	c := benchConfig{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench [--mode segment|snowflake] [--tag T] [--concurrency N] [--duration D | --requests N] [--batch N]",
		Short: "Load a running server over HTTP; print rates, latency percentiles, and check every ID is unique",
		Long: `Load a running server at --server with --concurrency workers, each with one
request in flight, until --duration has passed or --requests requests were
made (or Ctrl-C). It prints requests/s, IDs/s, errors by HTTP status and the
latency percentiles p50, p90, p99, p999 and max, and checks that no ID was
handed out twice.

--batch 0 or 1 uses Leaf's single-ID routes (/api/segment/get/{tag},
/api/snowflake/get/{tag}), which Java Leaf serves too; --batch N > 1 uses
leaf-go's batch API (/api/v1/segment/{tag}?count=N, /api/v1/snowflake?count=N).

It exits with 3 when an ID was seen twice and with 1 when no request
succeeded. --timeout bounds each request.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c.server, c.timeout = strings.TrimRight(g.server, "/"), g.timeout
			if err := c.check(cmd); err != nil {
				return err
			}
			res := runBench(cmd.Context(), c)
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				res.write(e.stdout)
			}
			return res.verdict()
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.mode, "mode", modeSegment, "segment or snowflake")
	f.StringVar(&c.tag, "tag", "leaf-segment-test", "biz tag to load (segment); the key of the single-ID snowflake route")
	f.IntVar(&c.concurrency, "concurrency", 16, "workers, each with one request in flight")
	f.DurationVar(&c.duration, "duration", 10*time.Second, "how long to run (not applied with --requests unless given too)")
	f.Int64Var(&c.requests, "requests", 0, "stop after this many requests in total (0: run for --duration)")
	f.IntVar(&c.batch, "batch", 0, "IDs per request: 0 or 1 for Leaf's single-ID route, N > 1 for the batch API")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON (durations in nanoseconds)")
	return cmd
}

// check validates the flags.
func (c *benchConfig) check(cmd *cobra.Command) error {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--server %q: want http://host:port or https://host:port", c.server)
	}
	switch {
	case c.mode != modeSegment && c.mode != modeSnowflake:
		return usagef("--mode %q: want segment or snowflake", c.mode)
	case c.concurrency < 1:
		return usagef("--concurrency must be at least 1, got %d", c.concurrency)
	case c.requests < 0:
		return usagef("--requests must not be negative, got %d", c.requests)
	case c.batch < 0:
		return usagef("--batch must not be negative, got %d", c.batch)
	}
	if err := store.ValidateTag(c.tag); err != nil {
		return usagef("--tag: %w", err)
	}
	if c.requests > 0 && !cmd.Flags().Changed("duration") {
		c.duration = 0
	}
	if c.requests == 0 && c.duration <= 0 {
		return usagef("--duration must be positive, got %v", c.duration)
	}
	return nil
}
