package mysql_test

import (
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/storetest"
)

func TestLease(t *testing.T) {
	storetest.RunLease(t, func(t *testing.T) store.LeaseStore { return open(t, dbtest.MySQL(t)) })
}
