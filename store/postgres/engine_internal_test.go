package postgres

import "testing"

func TestEngineOf(t *testing.T) {
	tests := []struct{ give, want string }{
		{"PostgreSQL 15.8 (Debian 15.8-0+deb12u1) on x86_64-pc-linux-gnu", "postgres"},
		{"CockroachDB CCL v24.1.0 (x86_64-pc-linux-gnu, built 2024/05/15 21:28:29, go1.22.2 X:nocoverageredesign)", "cockroachdb"},
		{"PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu", "yugabytedb"},
	}
	for _, tt := range tests {
		if got := engineOf(tt.give); got.Name != tt.want || got.Version != tt.give {
			t.Errorf("engineOf(%q) = %+v, want %s", tt.give, got, tt.want)
		}
	}
}
