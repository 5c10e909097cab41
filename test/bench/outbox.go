package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/outbox"
	"github.com/eosink/eosink/outbox/relay"
)

// outboxRelay measures the relay (outbox/relay) in this process: the publish rate of a
// backlog of BENCH_OUTBOX_EVENTS events (default 200,000, committed beforehand in
// transactions of 500 over 4 shards), then the latency from an event's insert to a
// read_committed consumer receiving it, at BENCH_OUTBOX_RATE events/s (default 1,000) for 15 s.
func (b *bench) outboxRelay(ctx context.Context) error {
	n := envInt("BENCH_OUTBOX_EVENTS", 200_000)
	rate := envInt("BENCH_OUTBOX_RATE", 1000)
	const schema, shards = "bench_outbox", 4
	conn, err := pgx.Connect(ctx, b.url)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	conn.Close(ctx)
	if err != nil {
		return err
	}
	if err := outbox.Migrate(ctx, b.url, schema); err != nil {
		return err
	}
	ob, err := outbox.New(outbox.Config{Schema: schema, Shards: shards})
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, b.url)
	if err != nil {
		return err
	}
	defer pool.Close()
	run := time.Now().Unix()
	topic := fmt.Sprintf("bench-outbox-%d", run)
	if err := createTopic(ctx, b.brokers, topic, b.partitions); err != nil {
		return err
	}
	insert := func(from, count int, value func(int) []byte) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			evs := make([]outbox.Event, count)
			for i := range evs {
				id := strconv.Itoa(from + i)
				evs[i] = outbox.Event{Topic: topic, Key: []byte(id), Value: value(from + i), EventID: id}
			}
			return ob.Add(ctx, tx, evs...)
		})
	}
	b.logf("outbox: committing a backlog of %d events", n)
	for i := 0; i < n; i += 500 {
		if err := insert(i, min(500, n-i), func(int) []byte { return []byte("backlog") }); err != nil {
			return err
		}
	}

	retention := time.Hour
	r, err := relay.New(relay.Config{DatabaseURL: b.url, Schema: schema, Kafka: kafka.ConfigMap{"bootstrap.servers": b.brokers},
		Name: fmt.Sprintf("bench-outbox-%d", run), Shards: shards, PositionTopic: topic + "-positions", BatchSize: 1000,
		PollInterval: 10 * time.Millisecond, Retention: &retention, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(rctx) }()
	defer func() { stop(); <-done }()
	for r.Stats().Published < int64(n) {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("relay stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(start) // includes the producers' InitTransactions and the position read
	b.rep.Measurements["outbox_relay"] = &Measurement{Name: "outbox_relay", Records: int64(n), Seconds: took.Seconds(),
		RecordsPerSecond: float64(n) / took.Seconds(),
		Description:      fmt.Sprintf("eosink relay publishing a committed backlog of %d outbox events, %d shards, 1000 per Kafka transaction (from its start)", n, shards)}
	b.logf("outbox: relay published %d events in %s (%.0f/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())

	// Latency: a consumer with read_committed from the start; the events of this phase carry
	// their insert time.
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": b.brokers, "group.id": topic, "isolation.level": "read_committed",
		"auto.offset.reset": "earliest", "enable.auto.commit": false})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		return err
	}
	var mu sync.Mutex
	var lat []float64
	cctx, stopConsumer := context.WithCancel(ctx)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for cctx.Err() == nil {
			m, ok := c.Poll(100).(*kafka.Message)
			if !ok {
				continue
			}
			if ts, err := strconv.ParseInt(string(m.Value), 10, 64); err == nil {
				mu.Lock()
				lat = append(lat, float64(time.Now().UnixNano()-ts)/1e6)
				mu.Unlock()
			}
		}
	}()
	const per = 10
	total := rate * 15
	tick := time.Second * per / time.Duration(rate)
	next := time.Now()
	for i := 0; i < total; i += per {
		time.Sleep(time.Until(next))
		next = next.Add(tick)
		if err := insert(n+i, per, func(int) []byte { return strconv.AppendInt(nil, time.Now().UnixNano(), 10) }); err != nil {
			stopConsumer()
			<-consumed
			return err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopConsumer()
	<-consumed
	if len(lat) < total {
		return fmt.Errorf("outbox latency: %d of %d events received", len(lat), total)
	}
	slices.Sort(lat)
	m := &Measurement{Name: "outbox_latency", Records: int64(total), Seconds: 15, RecordsPerSecond: float64(rate),
		P50ms: lat[len(lat)/2], P99ms: lat[len(lat)*99/100],
		Description: fmt.Sprintf("outbox insert (before its COMMIT) to a read_committed consumer receiving the event, %d events/s in transactions of %d, relay polling every 10 ms", rate, per)}
	b.rep.Measurements[m.Name] = m
	b.logf("outbox: latency at %d events/s: p50 %.0f ms, p99 %.0f ms", rate, m.P50ms, m.P99ms)
	return nil
}
