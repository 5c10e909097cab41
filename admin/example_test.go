package admin_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
)

// Read the lag of a pipeline, then skip its backlog on one partition, as
// `eosink lag` and `eosink offsets set -to latest` do.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c := admin.New(pool, "eosink", kafka.ConfigMap{"bootstrap.servers": os.Getenv("KAFKA_BOOTSTRAP_SERVERS")})

	positions, err := c.List(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range positions {
		fmt.Printf("%s[%d]: next offset %d, lag %d\n", p.Topic, p.Partition, p.NextOffset, p.Lag)
	}

	sel := admin.Selector{Pipeline: "orders", Topic: "orders", Partition: new(int32(0))}
	changes, err := c.Reset(ctx, sel, admin.Latest(), "alice", "skip the backlog after the outage", 5)
	if err != nil {
		log.Fatal(err)
	}
	for _, ch := range changes {
		fmt.Printf("%s[%d] moved to %d\n", ch.Topic, ch.Partition, ch.To)
	}
}

// List the oldest dead letters of a pipeline, as `eosink dlq list` does; a Client for dead
// letters alone needs no Kafka configuration.
func ExampleClient_DeadLetters() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c := admin.New(pool, "eosink", nil)

	list, err := c.DeadLetters(ctx, admin.DeadLetterFilter{Pipeline: "orders", Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range list {
		fmt.Printf("%d: %s[%d]@%d failed %d times: %s\n", d.ID, d.Topic, d.Partition, d.Offset, d.Failures, d.Error)
	}
}
