// Command inventory is the helper of the inventory example (pipeline.yaml): it creates the
// tables, produces stock moves, and checks what the pipeline wrote.
//
//	inventory setup                   create the tables (schema.sql) in -schema, and the
//	                                  topic (-partitions 4) unless it exists
//	inventory produce -moves 20000    produce moves; some go to a closed warehouse (poison
//	                                  for the stock table only), some are published twice
//	inventory verify                  stock equals the sum of history per (sku, warehouse)
//
// The database comes from DATABASE_URL and the broker from KAFKA_BOOTSTRAP_SERVERS; the
// topic and schema from flags, defaulting to the variables pipeline.yaml reads.
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
)

//go:embed schema.sql
var schemaSQL string

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: inventory setup|produce|verify [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), "Kafka bootstrap servers")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	topic := fs.String("topic", env("INVENTORY_TOPIC", "stock-moves"), "topic")
	schema := fs.String("schema", env("INVENTORY_SCHEMA", "inventory"), "schema of the example's tables")
	partitions := fs.Int("partitions", 4, "setup: partitions of a topic created")
	moves := fs.Int("moves", 20000, "produce: moves")
	seed := fs.Uint64("seed", 1, "produce: random seed")
	_ = fs.Parse(os.Args[2:])
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "setup":
		if err = setup(ctx, *dbURL, *schema); err == nil {
			err = createTopic(ctx, *brokers, *topic, *partitions)
		}
	case "produce":
		err = produce(*brokers, *topic, *moves, *seed)
	case "verify":
		err = verify(ctx, *dbURL, *schema)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "inventory:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, strings.ReplaceAll(schemaSQL, "inventory", pgx.Identifier{schema}.Sanitize()))
	if err == nil {
		fmt.Printf("tables in schema %s\n", schema)
	}
	return err
}

// createTopic creates topic unless it exists.
func createTopic(ctx context.Context, brokers, topic string, partitions int) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		return err
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
	if err != nil {
		return err
	}
	if c := res[0].Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
		return res[0].Error
	}
	fmt.Printf("topic %s\n", topic)
	return nil
}

// produce sends n moves over 8 skus in 5 warehouses, keyed by sku, after a receipt of 1,000
// per (sku, warehouse); 1 in 1,667 goes to the closed warehouse wh-closed (no stock is kept
// there: the record is dead-lettered) and 1 in 50 is sent again later.
func produce(brokers, topic string, n int, seed uint64) error {
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true, "linger.ms": 5,
		"go.logs.channel.enable": false})
	if err != nil {
		return err
	}
	defer pr.Close()
	rng := rand.New(rand.NewPCG(seed, seed))
	start := time.Now().UTC().Truncate(time.Second)
	go func() { // delivery reports: fail on the first error
		for ev := range pr.Events() {
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				fmt.Fprintln(os.Stderr, "inventory: produce:", m.TopicPartition.Error)
				os.Exit(1)
			}
		}
	}()
	send := func(v string, sku string) error {
		return pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(sku), Value: []byte(v)}, nil)
	}
	move := func(id, sku, wh string, delta int, at time.Time) string {
		return fmt.Sprintf(`{"move_id": %q, "sku": %q, "warehouse": %q, "delta": %d, "at": %q}`, id, sku, wh, delta, at.Format(time.RFC3339))
	}
	for s := range 8 {
		for w := range 5 {
			sku := fmt.Sprintf("sku-%d", s)
			if err := send(move(fmt.Sprintf("r-%d-%d-%d", seed, s, w), sku, fmt.Sprintf("wh-%d", w), 1000, start), sku); err != nil {
				return err
			}
		}
	}
	type sent struct{ v, sku string }
	var all []sent
	for i := range n {
		sku, wh := fmt.Sprintf("sku-%d", rng.IntN(8)), fmt.Sprintf("wh-%d", rng.IntN(5))
		if i%1667 == 1000 {
			wh = "wh-closed"
		}
		m := sent{move(fmt.Sprintf("m-%d-%d", seed, i), sku, wh, rng.IntN(11)-5, start.Add(time.Duration(i+1)*time.Second)), sku}
		all = append(all, m)
		if err := send(m.v, m.sku); err != nil {
			return err
		}
		if i%50 == 49 && (i-20)%1667 != 1000 { // the same move again, later; not a poison one
			if err := send(all[i-20].v, all[i-20].sku); err != nil {
				return err
			}
		}
	}
	if left := pr.Flush(30000); left > 0 {
		return fmt.Errorf("%d moves not acknowledged", left)
	}
	fmt.Printf("produced %d moves (and receipts, repeats) to %s\n", n, topic)
	return nil
}

// verify compares stock with the sums of history per (sku, warehouse).
func verify(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	h, s := pgx.Identifier{schema, "history"}.Sanitize(), pgx.Identifier{schema, "stock"}.Sanitize()
	var moves, keys, differ int
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+h+`), (SELECT count(*) FROM `+s+`),
  (SELECT count(*) FROM `+s+` s FULL JOIN (SELECT sku, warehouse, sum(delta) total FROM `+h+` GROUP BY 1, 2) h USING (sku, warehouse)
   WHERE s.qty IS DISTINCT FROM h.total)`).Scan(&moves, &keys, &differ)
	if err != nil {
		return err
	}
	fmt.Printf("history: %d moves\nstock: %d (sku, warehouse)\ndiffering from the history's sums: %d\n", moves, keys, differ)
	if differ > 0 {
		return fmt.Errorf("%d stock rows differ from the sum of their moves", differ)
	}
	return nil
}
