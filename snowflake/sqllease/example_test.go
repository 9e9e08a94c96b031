package sqllease_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/leaf-go/leaf/snowflake"
	"github.com/leaf-go/leaf/snowflake/sqllease"
	"github.com/leaf-go/leaf/store/sqlite"
)

// Wiring a generator to a SQL lease: the Lease is the generator's Source. It
// gives the worker ID, keeps the time high-water mark in the lease row, and
// stops the generator once the lease may have expired.
func ExampleClaim() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "sqllease")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "leaf.db"), true)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	// A short lease keeps the example quick; the default is 10 s, renewed every 3 s.
	lease, err := sqllease.Claim(ctx, st, sqllease.Options{Owner: "10.0.0.7:8080",
		TTL: time.Second, Renew: 200 * time.Millisecond, Margin: 300 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Close(ctx) // stops renewing and frees the worker ID
	// A fresh table has no history of worker 0: the claim serves only TTL + Margin later,
	// when any holder whose row was deleted has stopped. The generator would refuse until
	// then; wait instead.
	if err := lease.WaitNoHistory(ctx); err != nil {
		fmt.Println(err)
		return
	}

	gen, err := snowflake.New(ctx, snowflake.Settings{Source: lease})
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := gen.Next(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("worker", snowflake.Decompose(id).Worker, "generation", lease.Generation())
	// Output: worker 0 generation 1
}
