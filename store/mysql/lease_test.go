package mysql_test

import (
	"context"
	"testing"

	"github.com/leaf-go/leaf/internal/dbtest"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/mysql"
	"github.com/leaf-go/leaf/store/storetest"
)

func TestLease(t *testing.T) {
	storetest.RunLease(t, func(t *testing.T) store.LeaseStore { return open(t, dbtest.MySQL(t)) })
}

// TestClaimRace: 16 servers claim at once, five rounds: 16 distinct worker
// IDs every round. "no lock" claims with a read that does not lock, as
// TiDB's SKIP LOCKED (and YugabyteDB's or CockroachDB's reads under some
// settings): only the UPDATE's re-check of the generation and the expiry
// keeps the claimers apart there.
func TestClaimRace(t *testing.T) {
	for _, noLock := range []bool{false, true} {
		t.Run(map[bool]string{false: "skip locked", true: "no lock"}[noLock], func(t *testing.T) {
			dsn := dbtest.MySQL(t)
			open(t, dsn) // migrates
			handles := make([]store.LeaseStore, storetest.Claimers)
			for i := range handles {
				s, err := mysql.Open(context.Background(), dsn, false)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				handles[i] = s
				if noLock {
					handles[i] = mysql.NoLockStore{Store: s}
				}
			}
			storetest.RunClaimRace(t, handles)
		})
	}
}
