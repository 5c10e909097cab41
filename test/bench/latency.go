package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/eosink/eosink/sink"
)

// produceAtRate sends a.rate records a second for a.limit and returns how many. A full
// queue makes the producer wait (it catches up on the schedule after); the stats say how often.
func produceAtRate(ctx context.Context, a childArgs) (int64, produceStats, error) {
	// Keys are not used and each record is counted once: one whose delivery failed may be
	// sent again.
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": a.brokers, "linger.ms": 5}, true)
	if err != nil {
		return 0, produceStats{}, err
	}
	var i int64
	var buf []byte
	began := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for time.Since(began) < a.limit {
		<-tick.C
		due := int64(time.Since(began).Seconds() * float64(a.rate))
		for ; i < due; i++ {
			buf = appendRecord(buf[:0], 1_000_000_000+i, a.format)
			if err := p.produce(ctx, &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &a.topic, Partition: int32(i % int64(a.partitions))},
				Value: append([]byte(nil), buf...)}); err != nil {
				st, _ := p.close(10 * time.Second)
				return i, st, err
			}
		}
	}
	st, err := p.close(60 * time.Second)
	return i, st, err
}

// latencies pairs each batch's record timestamps (taken in Write) with the end of the
// eosink.batch span that committed it.
type latencies struct {
	mu      sync.Mutex
	pending map[batchKey][]time.Time
	ms      []float64
}

type batchKey struct {
	partition int64
	last      int64
}

type latencyPlugin struct {
	sink.Plugin
	lat *latencies
}

func (p *latencyPlugin) Prepare(ctx context.Context, db sink.DB) error {
	if pr, ok := p.Plugin.(sink.Preparer); ok {
		return pr.Prepare(ctx, db)
	}
	return nil
}

func (p *latencyPlugin) Write(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
	if len(b.Records) > 0 {
		ts := make([]time.Time, len(b.Records))
		for i, r := range b.Records {
			ts[i] = r.Timestamp
		}
		p.lat.mu.Lock()
		p.lat.pending[batchKey{int64(b.Partition), b.Records[len(b.Records)-1].Offset}] = ts
		p.lat.mu.Unlock()
	}
	return p.Plugin.Write(ctx, tx, b)
}

func (l *latencies) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (l *latencies) Shutdown(context.Context) error                  { return nil }
func (l *latencies) ForceFlush(context.Context) error                { return nil }

func (l *latencies) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "eosink.batch" || s.Status().Code != 0 {
		return
	}
	var k batchKey
	for _, a := range s.Attributes() {
		switch a.Key {
		case "messaging.destination.partition.id":
			k.partition = a.Value.AsInt64()
		case "eosink.last_offset":
			k.last = a.Value.AsInt64()
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.pending[k] {
		l.ms = append(l.ms, float64(s.EndTime().Sub(t).Microseconds())/1000)
	}
	delete(l.pending, k)
}

func (l *latencies) percentiles() (p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ms) == 0 {
		return 0, 0
	}
	slices.Sort(l.ms)
	at := func(q float64) float64 { return l.ms[min(len(l.ms)-1, int(q*float64(len(l.ms))))] }
	return at(0.50), at(0.99)
}
