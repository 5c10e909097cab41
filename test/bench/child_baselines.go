package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eosink/eosink/internal/engine"
	"github.com/eosink/eosink/sink"
)

// runCopy copies the same rows from memory with pgx's CopyFrom: the database's limit. Rows
// go in chunks of batch rows, one transaction each, from up to 4 connections at once.
func runCopy(ctx context.Context, a childArgs) (childResult, error) {
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	type row = []any
	rows := make([]row, a.records)
	ts, _ := time.Parse(time.RFC3339Nano, "2026-11-30T07:00:00.123Z")
	for i := range a.records {
		rows[i] = row{i, fmt.Sprintf("acct-%04d", (i*7919)%10000), int32(i % 1000), "EUR", ts, "payment received, thank you"}
	}
	began := time.Now()
	var next atomic.Int64
	workers := min(4, a.partitions)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				from := next.Add(int64(a.batch)) - int64(a.batch)
				if from >= a.records {
					errs <- nil
					return
				}
				to := min(from+int64(a.batch), a.records)
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					_, err := tx.CopyFrom(ctx, pgx.Identifier{a.schema, a.table}, []string{"id", "account", "amount", "currency", "ts", "note"},
						pgx.CopyFromRows(rows[from:to]))
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			return childResult{}, err
		}
	}
	took := time.Since(began).Seconds()
	return childResult{Records: a.records, Seconds: took, Wall: took}, nil
}

// runALO is the at-least-once baseline: the same consumer, per-partition batching and plugin,
// but each batch commits in PostgreSQL and then its offset is committed to Kafka; no offsets
// table. A crash between the two commits applies the batch again.
func runALO(ctx context.Context, a childArgs) (childResult, error) {
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
		"queued.max.messages.kbytes": 65536, "fetch.queue.backoff.ms": 0, "go.logs.channel.enable": false, "session.timeout.ms": 6000})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var applied atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := map[int32]chan sink.Record{}
	done := make(chan error, 1)
	var wg sync.WaitGroup
	worker := func(part int32, q chan sink.Record) {
		defer wg.Done()
		var batch []sink.Record
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			err := pgx.BeginFunc(rctx, pool, func(tx pgx.Tx) error {
				_, err := engine.WriteBatch(rctx, tx, pl, sink.Batch{Topic: a.topic, Partition: part, Records: batch}, engine.WriteOptions{})
				return err
			})
			if err != nil {
				return err
			}
			last := batch[len(batch)-1].Offset
			if _, err := c.CommitOffsets([]kafka.TopicPartition{{Topic: &a.topic, Partition: part, Offset: kafka.Offset(last + 1)}}); err != nil {
				return err
			}
			applied.Add(int64(len(batch)))
			batch = batch[:0]
			return nil
		}
		timer := time.NewTimer(a.wait)
		for {
			select {
			case r := <-q:
				batch = append(batch, r)
				if len(batch) < a.batch {
					continue
				}
			case <-timer.C:
				timer.Reset(a.wait)
			case <-rctx.Done():
				return
			}
			if err := flush(); err != nil {
				if rctx.Err() == nil {
					select {
					case done <- err:
					default:
					}
				}
				return
			}
		}
	}
	go func() {
		for rctx.Err() == nil {
			switch e := c.Poll(100).(type) {
			case *kafka.Message:
				p := e.TopicPartition.Partition
				q := queues[p]
				if q == nil {
					q = make(chan sink.Record, 20000)
					queues[p] = q
					wg.Add(1)
					go worker(p, q)
				}
				q <- sink.Record{Topic: a.topic, Partition: p, Offset: int64(e.TopicPartition.Offset), Key: e.Key, Value: e.Value, Timestamp: e.Timestamp}
			case kafka.Error:
				if e.IsFatal() {
					done <- e
					return
				}
			}
		}
	}()
	began := time.Now()
	res, err := watch(ctx, a.records, a.limit, done, applied.Load, nil)
	cancel()
	wg.Wait()
	res.Wall = time.Since(began).Seconds()
	return res, err
}

// runPerMessage is common practice: one record, one transaction with an idempotent write
// (upsert by id), one synchronous Kafka commit.
func runPerMessage(ctx context.Context, a childArgs) (childResult, error) {
	a.kind = "upsert"
	pl, err := a.plugin()
	if err != nil {
		return childResult{}, err
	}
	pool, err := pgxpool.New(ctx, a.dbURL())
	if err != nil {
		return childResult{}, err
	}
	defer pool.Close()
	if pr, ok := pl.(sink.Preparer); ok {
		if err := pr.Prepare(ctx, pool); err != nil {
			return childResult{}, err
		}
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "go.logs.channel.enable": false})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var applied atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		for rctx.Err() == nil {
			ev := c.Poll(100)
			m, ok := ev.(*kafka.Message)
			if !ok {
				continue
			}
			r := sink.Record{Topic: a.topic, Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset), Key: m.Key, Value: m.Value}
			err := pgx.BeginFunc(rctx, pool, func(tx pgx.Tx) error {
				_, err := engine.WriteBatch(rctx, tx, pl, sink.Batch{Topic: a.topic, Partition: r.Partition, Records: []sink.Record{r}}, engine.WriteOptions{})
				return err
			})
			if err == nil {
				_, err = c.CommitMessage(m)
			}
			if err != nil {
				if rctx.Err() == nil {
					done <- err
				}
				return
			}
			applied.Add(1)
		}
	}()
	began := time.Now()
	res, err := watch(ctx, a.records, a.limit, done, applied.Load, nil)
	cancel()
	res.Wall = time.Since(began).Seconds()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return res, err
}

// runConsume only reads the topic, with the sink's consumer settings, and writes nothing:
// the rate the Kafka client can deliver records to Go on this machine, a ceiling for every
// contender that reads Kafka through it.
func runConsume(ctx context.Context, a childArgs) (childResult, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": a.brokers, "group.id": a.group,
		"enable.auto.commit": false, "auto.offset.reset": "earliest", "isolation.level": "read_committed",
		"queued.max.messages.kbytes": 65536, "fetch.queue.backoff.ms": 0, "go.logs.channel.enable": false})
	if err != nil {
		return childResult{}, err
	}
	defer c.Close()
	if err := c.Subscribe(a.topic, nil); err != nil {
		return childResult{}, err
	}
	var n int64
	var first time.Time
	began := time.Now()
	for n < a.records && ctx.Err() == nil {
		if _, ok := c.Poll(100).(*kafka.Message); ok {
			if n == 0 {
				first = time.Now()
			}
			n++
		}
	}
	return childResult{Records: n - 1, Seconds: time.Since(first).Seconds(), Wall: time.Since(began).Seconds()}, ctx.Err()
}
