package segment_test

import (
	"context"
	"fmt"
	"log"

	"github.com/leaf-go/leaf/segment"
	"github.com/leaf-go/leaf/store"
	"github.com/leaf-go/leaf/store/sqlite"
)

// Leaf's sample row (leaf-segment-test, max_id 1, step 2000) hands out 1, 2,
// 3, … ; the 2001st ID is 2001, from the segment prefetched in the background.
func ExampleGenerator_Get() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Memory, true)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, store.Row{BizTag: "leaf-segment-test", MaxID: 1, Step: 2000}); err != nil {
		log.Fatal(err)
	}
	g, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	for i := 1; i <= 2001; i++ {
		id, err := g.Get(ctx, "leaf-segment-test")
		if err != nil {
			log.Fatal(err)
		}
		if i <= 3 || i == 2001 {
			fmt.Println(id)
		}
	}
	_, err = g.Get(ctx, "no-such-tag")
	fmt.Println(segment.Code(err), err)
	// Output:
	// 1
	// 2
	// 3
	// 2001
	// -2 segment: biz tag not found: "no-such-tag"
}

// A caller that asks for IDs of one tag over and over resolves it once; the
// handle's Get skips the tag lookup of Generator.Get and shares its buffer,
// so the two may be mixed.
func ExampleGenerator_Tag() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Memory, true)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, store.Row{BizTag: "order", MaxID: 1, Step: 1000}); err != nil {
		log.Fatal(err)
	}
	g, err := segment.New(ctx, st, segment.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	order, err := g.Tag(ctx, "order")
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		id, err := order.Get(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
	id, _ := g.Get(ctx, "order")
	fmt.Println(id)

	_, err = g.Tag(ctx, "no-such-tag")
	fmt.Println(segment.Code(err), err)
	// Output:
	// 1
	// 2
	// 3
	// 4
	// -2 segment: biz tag not found: "no-such-tag"
}
