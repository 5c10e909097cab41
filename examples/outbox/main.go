// Command outbox is the transactional outbox example: the whole chain Kafka → PostgreSQL →
// Kafka → PostgreSQL, with demo.sh injecting faults along it (`make outbox`).
//
//	outbox setup    create the topics and the orders and ledger tables (schema.sql)
//	outbox produce  produce -orders N order records to the orders topic over -duration
//	outbox verify   count, independently of the sinks and the relay, what each stage holds
//
// Stage 1 (stage1.yaml) consumes orders and writes each order and its event into the outbox
// in one transaction; `eosink relay` (relay.yaml) publishes the events to order-events;
// stage 2 (stage2.yaml) applies them into the ledger through the inbox. The flags default to
// the environment variables the YAML files read.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/outbox"
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
		fmt.Fprintln(os.Stderr, "usage: outbox setup|produce|verify [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	brokers := fs.String("brokers", os.Getenv("KAFKA_BOOTSTRAP_SERVERS"), "Kafka bootstrap servers")
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	ordersTopic := fs.String("orders-topic", env("ORDERS_TOPIC", "orders"), "topic of the orders")
	eventsTopic := fs.String("events-topic", env("EVENTS_TOPIC", "order-events"), "topic of the events the relay publishes")
	schema := fs.String("schema", env("SHOP_SCHEMA", "shop"), "schema of the orders and ledger tables")
	partitions := fs.Int("partitions", 6, "setup: partitions of both topics")
	n := fs.Int("orders", 20000, "produce: orders")
	duration := fs.Duration("duration", 20*time.Second, "produce: spread the orders over this long")
	quiet := fs.Bool("quiet", false, "verify: print nothing, only the exit code")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "setup":
		err = setup(ctx, *brokers, *dbURL, *schema, *partitions, *ordersTopic, *eventsTopic)
	case "produce":
		err = produce(ctx, *brokers, *ordersTopic, *n, *duration)
	case "verify":
		var r report
		r, err = verify(ctx, *brokers, *dbURL, *schema, *ordersTopic, *eventsTopic)
		if err == nil && !*quiet {
			r.print()
		}
		if err == nil && !r.ok() {
			err = errors.New("verification failed")
		}
		if *quiet && err != nil {
			os.Exit(1)
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		os.Exit(1)
	}
}

func setup(ctx context.Context, brokers, url, schema string, partitions int, topics ...string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s+"; SET search_path TO "+s+"; "+schemaSQL); err != nil {
		return err
	}
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		return err
	}
	defer a.Close()
	var specs []kafka.TopicSpecification
	for _, t := range topics {
		specs = append(specs, kafka.TopicSpecification{Topic: t, NumPartitions: partitions, ReplicationFactor: 1})
	}
	res, err := a.CreateTopics(ctx, specs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return fmt.Errorf("create topic %s: %v", r.Topic, r.Error)
		}
	}
	return nil
}

// Order is one record of the orders topic.
type Order struct {
	OrderID  string `json:"order_id"`
	Customer string `json:"customer"`
	Amount   int    `json:"amount"`
}

// produce sends n orders, keyed by order id, evenly over d, idempotently.
func produce(ctx context.Context, brokers, topic string, n int, d time.Duration) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true, "linger.ms": 10,
		"message.timeout.ms": 300000})
	if err != nil {
		return err
	}
	defer p.Close()
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
	start := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if due := start.Add(d * time.Duration(i) / time.Duration(n)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		v, _ := json.Marshal(Order{OrderID: fmt.Sprintf("o-%d", i), Customer: fmt.Sprintf("c-%d", i%97), Amount: 1 + i%500})
		for {
			err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
				Key: fmt.Appendf(nil, "o-%d", i), Value: v}, nil)
			if ke, ok := err.(kafka.Error); ok && ke.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	for p.Flush(1000) > 0 {
	}
	p.Close()
	<-reports
	if failed > 0 {
		return fmt.Errorf("%d of %d orders not delivered", failed, n)
	}
	fmt.Printf("produced %d orders to %s in %s\n", n, topic, time.Since(start).Round(time.Millisecond))
	return nil
}

// report is what verify counted.
type report struct {
	produced        int // distinct order ids in the orders topic (read_committed)
	orders          int // rows in orders
	eventRecords    int // records in order-events in committed transactions
	eventIDs        int // distinct event ids among them
	eventsUnmatched int // event ids that are no order's
	ledgerRows      int // rows in the ledger
	ledgerIDs       int // distinct event ids in the ledger
	lost            int // orders whose event is missing from Kafka or the ledger
}

func (r report) ok() bool {
	return r.produced > 0 && r.orders == r.produced && r.eventRecords == r.produced && r.eventIDs == r.produced && r.eventsUnmatched == 0 &&
		r.ledgerRows == r.produced && r.ledgerIDs == r.produced && r.lost == 0
}

func (r report) print() {
	fmt.Printf("orders: %d (produced: %d)\n", r.orders, r.produced)
	fmt.Printf("events published: %d\n", r.eventIDs)
	fmt.Printf("events in committed Kafka transactions (read_committed): %d records, %d distinct event ids, %d duplicate event ids, %d not an order's\n",
		r.eventRecords, r.eventIDs, r.eventRecords-r.eventIDs, r.eventsUnmatched)
	fmt.Printf("applied downstream: %d\n", r.ledgerIDs)
	fmt.Printf("duplicates: %d\n", (r.eventRecords-r.eventIDs)+(r.ledgerRows-r.ledgerIDs))
	fmt.Printf("lost: %d\n", r.lost)
	if r.ok() {
		fmt.Println("verified: every order has exactly one event in Kafka and exactly one ledger row")
	} else {
		fmt.Println("NOT verified")
	}
}

// verify counts each stage from its own store: the orders topic and the events topic read
// with read_committed, and the orders and ledger tables.
func verify(ctx context.Context, brokers, url, schema, ordersTopic, eventsTopic string) (report, error) {
	var r report
	orderIDs := map[string]bool{}
	if err := readTopic(brokers, ordersTopic, func(m *kafka.Message) { orderIDs[string(m.Key)] = true }); err != nil {
		return r, err
	}
	r.produced = len(orderIDs)
	events := map[string]int{}
	if err := readTopic(brokers, eventsTopic, func(m *kafka.Message) {
		for _, h := range m.Headers {
			if h.Key == outbox.EventIDHeader {
				events[string(h.Value)]++
			}
		}
		r.eventRecords++
	}); err != nil {
		return r, err
	}
	r.eventIDs = len(events)
	for id := range events {
		if !orderIDs[id[len("order-created:"):]] {
			r.eventsUnmatched++
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return r, err
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+s+`.orders), (SELECT count(*) FROM `+s+`.ledger),
  (SELECT count(DISTINCT event_id) FROM `+s+`.ledger)`).Scan(&r.orders, &r.ledgerRows, &r.ledgerIDs); err != nil {
		return r, err
	}
	rows, err := conn.Query(ctx, `SELECT event_id FROM `+s+`.ledger`)
	if err != nil {
		return r, err
	}
	inLedger := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { inLedger[id] = true; return nil }); err != nil {
		return r, err
	}
	for o := range orderIDs {
		e := outbox.BusinessEventID("order-created", o)
		if events[e] == 0 || !inLedger[e] {
			r.lost++
		}
	}
	return r, nil
}

// readTopic reads every partition of topic from its start to its current end with
// read_committed, calling f for each record.
func readTopic(brokers, topic string, f func(*kafka.Message)) error {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": "outbox-verify", "enable.auto.commit": false,
		"isolation.level": "read_committed", "enable.partition.eof": true})
	if err != nil {
		return err
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		return err
	}
	ends := map[int32]int64{}
	var tps []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		_, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return err
		}
		if high > 0 {
			ends[p.ID] = high
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
		}
	}
	if len(tps) == 0 {
		return nil
	}
	if err := c.Assign(tps); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(ends) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: partitions %v not read to their end in 2m", topic, ends)
		}
		switch e := c.Poll(200).(type) {
		case *kafka.Message:
			f(e)
			if int64(e.TopicPartition.Offset) >= ends[e.TopicPartition.Partition]-1 {
				delete(ends, e.TopicPartition.Partition)
			}
		case kafka.PartitionEOF:
			if int64(e.Offset) >= ends[e.Partition] {
				delete(ends, e.Partition)
			}
		}
	}
	return nil
}
