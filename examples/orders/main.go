// Command orders is the inbox example: it produces order events of which some are
// republished with the same event_id at new offsets, and verifies that the pipeline in
// pipeline.yaml applied each event exactly once.
//
//	orders setup                      create the order_lines table (schema.sql)
//	orders produce -events 10000      produce events, republishing some
//	orders verify                     compare the log with the table and the dead letters
//
// The database comes from DATABASE_URL and the broker from KAFKA_BOOTSTRAP_SERVERS; the
// topic, schema and pipeline from flags, defaulting to the environment variables that
// pipeline.yaml reads.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"syscall"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: orders setup|produce|verify [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), "Kafka bootstrap servers")
	dbURL := fs.String("database-url", "", "PostgreSQL URL (default $DATABASE_URL)")
	topic := fs.String("topic", env("ORDERS_TOPIC", "orders"), "topic")
	schema := fs.String("schema", env("ORDERS_SCHEMA", "public"), "schema of order_lines")
	offsetsSchema := fs.String("offsets-schema", env("ORDERS_OFFSETS_SCHEMA", "eosink"), "eosink's schema (offsets, dead letters, inbox)")
	pipeline := fs.String("pipeline", env("ORDERS_PIPELINE", "orders"), "pipeline name")
	events := fs.Int("events", 10000, "produce: distinct events")
	republish := fs.Float64("republish", 0.1, "produce: fraction of events sent again with the same payload")
	conflicts := fs.Int("conflicts", 5, "produce: events sent again with a different payload")
	seed := fs.Uint64("seed", 1, "produce: random seed")
	_ = fs.Parse(os.Args[2:])
	if *dbURL == "" {
		*dbURL = os.Getenv("DATABASE_URL")
	}
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, *dbURL, *schema)
	case "produce":
		err = produce(*brokers, *topic, *events, *republish, *conflicts, *seed)
	case "verify":
		var rep report
		rep, err = verify(ctx, *brokers, *topic, *dbURL, *schema, *offsetsSchema, *pipeline)
		rep.print()
		if err == nil && !rep.ok() {
			err = errors.New("verification failed")
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s+"; SET search_path TO "+s+"; "+schemaSQL)
	return err
}

// Order is one event.
type Order struct {
	EventID  string `json:"event_id"`
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

// produce sends n events keyed by order id, then republishes a fraction of them unchanged and
// a few with another amount, so that duplicates land at new offsets of the same partition.
func produce(brokers, topic string, n int, republish float64, conflicts int, seed uint64) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true, "linger.ms": 10,
		"go.logs.channel.enable": false})
	if err != nil {
		return err
	}
	defer p.Close()
	// Delivery reports: count failures (Flush also waits for unread reports).
	failed := 0
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		for ev := range p.Events() {
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				failed++
			}
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 7))
	orders := make([]Order, n)
	sent := 0
	send := func(o Order) error {
		v, _ := json.Marshal(o)
		sent++
		return p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: []byte(o.OrderID), Value: v}, nil)
	}
	for i := range orders {
		orders[i] = Order{EventID: fmt.Sprintf("evt-%d-%d", seed, i), OrderID: fmt.Sprintf("ord-%d", i),
			Customer: fmt.Sprintf("c-%d", rng.IntN(100)), Amount: 1 + rng.IntN(500)}
		if err := send(orders[i]); err != nil {
			return err
		}
	}
	for i := range orders {
		if rng.Float64() < republish {
			if err := send(orders[i]); err != nil {
				return err
			}
		}
	}
	for range conflicts {
		o := orders[rng.IntN(n)]
		o.Amount += 1000
		if err := send(o); err != nil {
			return err
		}
	}
	left := p.Flush(60_000)
	p.Close()
	<-reports
	if left > 0 || failed > 0 {
		return fmt.Errorf("%d records not delivered, %d failed", left, failed)
	}
	fmt.Printf("produced: %d records (%d events)\n", sent, n)
	return nil
}

type report struct {
	Records, Events, Republished, Conflicts int
	Applied, Duplicates, Lost, Wrong        int
	DeadLetters, CountedDuplicates          int
	Lag                                     int64
}

func (r report) ok() bool {
	return r.Applied == r.Events && r.Duplicates == 0 && r.Lost == 0 && r.Wrong == 0 &&
		r.DeadLetters == r.Conflicts && r.CountedDuplicates == r.Republished && r.Lag == 0
}

func (r report) print() {
	fmt.Printf("records in the log: %d\nevents: %d\nrepublished (same payload): %d\nconflicts (other payload): %d\n"+
		"applied: %d\nduplicates: %d\nlost: %d\nwrong payload applied: %d\ndead letters: %d\nduplicates counted by the inbox: %d\nlag: %d\n",
		r.Records, r.Events, r.Republished, r.Conflicts, r.Applied, r.Duplicates, r.Lost, r.Wrong, r.DeadLetters, r.CountedDuplicates, r.Lag)
}

// verify reads the log independently of the sink and compares: each event's first payload
// applied once, later identical copies counted as duplicates, different ones dead-lettered.
func verify(ctx context.Context, brokers, topic, url, schema, offsetsSchema, pipeline string) (report, error) {
	var rep report
	recs, ends, err := readLog(brokers, topic)
	if err != nil {
		return rep, err
	}
	first := map[string]Order{}
	for _, o := range recs {
		rep.Records++
		f, seen := first[o.EventID]
		switch {
		case !seen:
			first[o.EventID] = o
		case f == o:
			rep.Republished++
		default:
			rep.Conflicts++
		}
	}
	rep.Events = len(first)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return rep, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT event_id, order_id, customer, amount FROM "+pgx.Identifier{schema, "order_lines"}.Sanitize())
	if err != nil {
		return rep, err
	}
	seen := map[string]int{}
	var o Order
	if _, err := pgx.ForEachRow(rows, []any{&o.EventID, &o.OrderID, &o.Customer, &o.Amount}, func() error {
		seen[o.EventID]++
		if first[o.EventID] != o {
			rep.Wrong++
		}
		return nil
	}); err != nil {
		return rep, err
	}
	for id := range first {
		switch n := seen[id]; {
		case n == 0:
			rep.Lost++
		default:
			rep.Applied++
			rep.Duplicates += n - 1
		}
	}
	q := func(sql string, args ...any) (int64, error) {
		var n int64
		err := conn.QueryRow(ctx, sql, args...).Scan(&n)
		return n, err
	}
	dl, err := q("SELECT count(*) FROM "+pgx.Identifier{offsetsSchema, "dead_letters"}.Sanitize()+" WHERE pipeline = $1 AND topic = $2", pipeline, topic)
	if err != nil {
		return rep, err
	}
	dups, err := q("SELECT coalesce(sum(duplicates), 0) FROM "+pgx.Identifier{offsetsSchema, "inbox"}.Sanitize()+" WHERE topic = $1", topic)
	if err != nil {
		return rep, err
	}
	rep.DeadLetters, rep.CountedDuplicates = int(dl), int(dups)
	for part, end := range ends {
		var next int64
		err := conn.QueryRow(ctx, "SELECT next_offset FROM "+pgx.Identifier{offsetsSchema, "offsets"}.Sanitize()+
			" WHERE pipeline = $1 AND topic = $2 AND partition = $3", pipeline, topic, part).Scan(&next)
		if errors.Is(err, pgx.ErrNoRows) {
			next = 0
		} else if err != nil {
			return rep, err
		}
		rep.Lag += max(end-next, 0)
	}
	return rep, nil
}

// readLog reads every partition from its start to its end, in offset order per partition.
func readLog(brokers, topic string) ([]Order, map[int32]int64, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "orders-verify",
		"enable.auto.commit": false, "isolation.level": "read_committed", "enable.partition.eof": true, "go.logs.channel.enable": false})
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return nil, nil, err
	}
	var parts []kafka.TopicPartition
	ends := map[int32]int64{}
	for _, p := range md.Topics[topic].Partitions {
		low, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return nil, nil, err
		}
		ends[p.ID] = high
		if high > low {
			parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(low)})
		}
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i].Partition < parts[j].Partition })
	byPart := map[int32][]Order{}
	if err := c.Assign(parts); err != nil {
		return nil, nil, err
	}
	remaining := len(parts)
	deadline := time.Now().Add(2 * time.Minute)
	for remaining > 0 {
		if time.Now().After(deadline) {
			return nil, nil, errors.New("reading the log timed out")
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			var o Order
			if err := json.Unmarshal(e.Value, &o); err != nil {
				return nil, nil, fmt.Errorf("offset %v: %w", e.TopicPartition, err)
			}
			byPart[e.TopicPartition.Partition] = append(byPart[e.TopicPartition.Partition], o)
		case kafka.PartitionEOF:
			remaining--
		case kafka.Error:
			if e.IsFatal() {
				return nil, nil, e
			}
		}
	}
	var all []Order
	for _, p := range parts {
		all = append(all, byPart[p.Partition]...)
	}
	return all, ends, nil
}
