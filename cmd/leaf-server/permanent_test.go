package main

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
)

// TestPermanentDBErrorAtStart: a database that does not exist, or refuses
// the credentials, stops the start with that error (store.ErrPermanent), on
// PostgreSQL and MariaDB; before, leaf-server served and retried it in the
// background for good, its segment routes answering -1 until someone read
// the log. (Transient errors are still retried: TestStartDatabaseDown in
// internal/testing/faults.)
func TestPermanentDBErrorAtStart(t *testing.T) {
	pg, err := url.Parse(dbtest.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB, noRole := *pg, *pg
	noDB.Path = "/leaf_no_such_db"
	noRole.User = url.UserPassword("leaf_no_such_role", "wrong")
	my, err := mysql.ParseDSN(strings.TrimPrefix(dbtest.MySQL(t), "mysql://"))
	if err != nil {
		t.Fatal(err)
	}
	myNoDB, myNoUser := my.Clone(), my.Clone()
	myNoDB.DBName = "leaf_no_such_db"
	myNoUser.User, myNoUser.Passwd = "leaf_no_such_user", "wrong"
	tests := []struct {
		name, dsn, want string
	}{
		{"postgres no database", noDB.String(), "3D000"},
		{"postgres no role", noRole.String(), "28"},
		{"mysql no database", "mysql://" + myNoDB.FormatDSN(), "1049"},
		{"mysql access denied", "mysql://" + myNoUser.FormatDSN(), "Access denied"}, // MariaDB: 1698, MySQL: 1045
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bound only ends a run that serves (the old behaviour); the
			// refusal returns long before it.
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			err := run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--snowflake=false", "--segment-dsn", tt.dsn},
				env(nil), io.Discard, io.Discard)
			if !errors.Is(err, store.ErrPermanent) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run with %s = %v, want %v with %s", tt.name, err, store.ErrPermanent, tt.want)
			}
			if ctx.Err() != nil {
				t.Errorf("run returned only when its context ended: %v", err)
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
