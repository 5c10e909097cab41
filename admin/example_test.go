package admin_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/admin"
	"github.com/eosink/eosink/sink"
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

// Replay the dead letters of a pipeline whose handler is Go code, as `eosink dlq replay`
// does for a pipeline with a config file: each record goes through the same handler in the
// transaction that resolves its dead letter (its edited value, when an operator edited it
// with `eosink dlq edit`), audited with the operator and the reason.
func ExampleClient_ReplayHandler() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	c := admin.New(pool, "eosink", nil)

	// The pipeline's sink.Config.Handler.
	handler := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		for _, r := range b.Records {
			if _, err := tx.Exec(ctx, "INSERT INTO orders (id, body) VALUES ($1, $2)", string(r.Key), r.Value); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := c.ReplayHandler(ctx, admin.DeadLetterFilter{Pipeline: "orders"}, handler,
		admin.ReplayOptions{Action: admin.Action{Operator: "alice", Reason: "orders.body widened in v1.4.2"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replayed %d, failed again %d %v\n", res.Replayed, res.FailedAgain, res.FailedIDs)
}
