package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	s := newLeafServer(t)
	out := leafctl(t, opts{}, "health", "--server", s.url)
	if out.err != nil || !strings.Contains(out.stdout, `"ready":true`) {
		t.Errorf("health against a ready server = %v (exit %d) %q, want success", out.err, out.code, out.stdout)
	}
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"ready":false}`, http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	if out := leafctl(t, opts{}, "health", "--server", notReady.URL); out.code != 1 {
		t.Errorf("health against a 503 server: exit %d, want 1", out.code)
	}
	if out := leafctl(t, opts{}, "health", "--server", "http://127.0.0.1:1"); out.code != 1 {
		t.Errorf("health against nothing: exit %d, want 1", out.code)
	}
}
