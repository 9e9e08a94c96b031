package mysql_test

import (
	"context"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/storetest"
)

func open(t *testing.T, dsn string) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), dsn, true)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, dbtest.MySQL(t)) })
}
