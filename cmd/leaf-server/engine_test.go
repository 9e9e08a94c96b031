package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/store/sqlite"
)

func TestLogEngine(t *testing.T) {
	st, err := sqlite.Open(context.Background(), ":memory:", true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	logEngine(context.Background(), st, slog.New(slog.NewTextHandler(&buf, nil)))
	if got := buf.String(); !strings.Contains(got, `msg="database engine" engine=sqlite version=3.`) {
		t.Errorf("logEngine logged %q, want the engine and its version", got)
	}
}
