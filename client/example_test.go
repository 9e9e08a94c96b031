package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/leaf-go/leaf/client"
)

// A client over three leaf-go servers with the defaults: batches of 1000
// IDs per tag, prefetched when fewer than 200 are left.
func Example() {
	c, err := client.New("http://leaf-1:8080", client.Options{
		Servers: []string{"http://leaf-2:8080", "http://leaf-3:8080"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	id, err := c.Segment(context.Background(), "order")
	switch {
	case errors.Is(err, client.ErrTagNotFound):
		log.Fatal("create the tag first: leafctl tag create order")
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("order", id)
}

// Against Java Leaf, which has no batch route: one request per ID on Leaf's
// own routes.
func Example_javaLeaf() {
	c, err := client.New("http://java-leaf:8080", client.Options{LeafCompatible: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	id, err := c.Snowflake(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(id)
}
