package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// latencies are the percentiles of the completed requests' latencies.
type latencies struct {
	P50  time.Duration `json:"p50"`
	P90  time.Duration `json:"p90"`
	P99  time.Duration `json:"p99"`
	P999 time.Duration `json:"p999"`
	Max  time.Duration `json:"max"`
}

// benchResult is what a run measured. Durations are in nanoseconds in JSON.
type benchResult struct {
	URL         string        `json:"url"`
	Mode        string        `json:"mode"`
	Concurrency int           `json:"concurrency"`
	Batch       int           `json:"batch"`
	Elapsed     time.Duration `json:"elapsed"`
	Interrupted bool          `json:"interrupted"` // stopped by Ctrl-C/SIGTERM
	// Requests counts completed requests, OK plus Failed. Requests cut off
	// by the end of the run are not counted.
	Requests      int64             `json:"requests"`
	OK            int64             `json:"ok"`
	Failed        int64             `json:"failed"`
	RequestsPerS  float64           `json:"requests_per_second"`
	IDs           int64             `json:"ids"`
	IDsPerS       float64           `json:"ids_per_second"`
	Duplicates    int64             `json:"duplicates"`     // IDs seen more than once (each extra sighting counts)
	DuplicateIDs  []string          `json:"duplicate_ids"`  // up to 10 examples
	Errors        map[string]int64  `json:"errors"`         // by HTTP status, "transport" or "bad body"
	ErrorExamples map[string]string `json:"error_examples"` // the first message or body of each kind
	Latency       latencies         `json:"latency"`
}

// verdict is the run's error: errDuplicate when an ID was seen twice, a
// failure when no request succeeded, nil otherwise.
func (r *benchResult) verdict() error {
	switch {
	case r.Duplicates > 0:
		return fmt.Errorf("%w: %d IDs handed out more than once (e.g. %s)", errDuplicate, r.Duplicates, strings.Join(r.DuplicateIDs, ", "))
	case r.Requests == 0:
		return errors.New("bench: no request completed")
	case r.OK == 0:
		return fmt.Errorf("bench: all %d requests failed", r.Requests)
	}
	return nil
}

// write prints the human-readable report.
func (r *benchResult) write(w io.Writer) {
	fprintf(w, "target      %s (%s, %d workers, %d ID(s) per request)\n", r.URL, r.Mode, r.Concurrency, r.Batch)
	note := ""
	if r.Interrupted {
		note = " (interrupted)"
	}
	fprintf(w, "requests    %d (%d ok, %d failed) in %v%s\n", r.Requests, r.OK, r.Failed, r.Elapsed.Round(time.Millisecond), note)
	fprintf(w, "rate        %.1f requests/s, %.1f IDs/s\n", r.RequestsPerS, r.IDsPerS)
	l := r.Latency
	fprintf(w, "latency     p50 %v  p90 %v  p99 %v  p999 %v  max %v\n", round(l.P50), round(l.P90), round(l.P99), round(l.P999), round(l.Max))
	if r.Duplicates == 0 {
		fprintf(w, "unique      %d IDs, no duplicates\n", r.IDs)
	} else {
		fprintf(w, "unique      %d IDs, %d DUPLICATES (e.g. %s)\n", r.IDs, r.Duplicates, strings.Join(r.DuplicateIDs, ", "))
	}
	if len(r.Errors) == 0 {
		fprintf(w, "errors      none\n")
		return
	}
	kinds := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for i, k := range kinds {
		label := "errors"
		if i > 0 {
			label = ""
		}
		fprintf(w, "%-12s%s: %d (first: %s)\n", label, k, r.Errors[k], strconv.Quote(r.ErrorExamples[k]))
	}
}

// round shortens a latency for the report.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
