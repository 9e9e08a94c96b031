package snowflake_test

import (
	"context"
	"fmt"

	"github.com/leaf-go/leaf/snowflake"
)

// The first worked example of docs/contract.md §6: one second after Twitter's epoch, datacenter 1, machine 1.
func ExampleComposeTwitter() {
	id, err := snowflake.ComposeTwitter(1288834975657, 1, 1, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(id)
	// Output: 4194439168
}

// The second worked example of docs/contract.md §6, decoded back in both views of the worker bits.
func ExampleDecompose() {
	id, err := snowflake.ComposeTwitter(1700000000000, 7, 13, 4095)
	if err != nil {
		panic(err)
	}
	p := snowflake.Decompose(id)
	fmt.Println(id)
	fmt.Println(p.Millis, p.Datacenter, p.Machine, p.Sequence)
	fmt.Println("worker", p.Worker, p.Time().Format("2006-01-02T15:04:05.000Z07:00"))
	// Output:
	// 1724551110457221119
	// 1700000000000 7 13 4095
	// worker 237 2023-11-14T22:13:20.000Z
}

func ExampleCompose() {
	id, err := snowflake.Compose(1700000000000, 237, 4095)
	if err != nil {
		panic(err)
	}
	fmt.Println(id)
	// Output: 1724551110457221119
}

func ExampleLayout_End() {
	fmt.Println(snowflake.DefaultLayout().End().Format("2006-01-02T15:04:05.000Z07:00"))
	// Output: 2080-07-10T17:30:30.209Z
}

func ExampleGenerator_Next() {
	g, err := snowflake.New(context.Background(), snowflake.Settings{WorkerID: 237})
	if err != nil {
		panic(err)
	}
	id, err := g.Next(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(snowflake.Decompose(id).Worker)
	// Output: 237
}
