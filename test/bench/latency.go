package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

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
	pending map[batchKey]*batchTimes
	ms      []float64
	// children holds the ended eosink.fetch, eosink.write and eosink.commit spans of the
	// batch spans not ended yet, by the batch span's id.
	children map[trace.SpanID][]sdktrace.ReadOnlySpan
	// parts: per batch, from its oldest record, the milliseconds in each stage (breakdown).
	parts map[string][]float64
}

// batchTimes is what the plugin saw of one batch: its records' Kafka timestamps, and when
// Write was called and returned.
type batchTimes struct {
	ts                []time.Time
	written, returned time.Time
}

// The stages of the breakdown, in order; together they are the latency of a batch's oldest
// record.
var stages = []string{"fetch_queue", "batch_forming", "pool_begin_offset", "write_copy", "commit"}

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
	if len(b.Records) == 0 {
		return p.Plugin.Write(ctx, tx, b)
	}
	bt := &batchTimes{ts: make([]time.Time, len(b.Records)), written: time.Now()}
	for i, r := range b.Records {
		bt.ts[i] = r.Timestamp
	}
	err := p.Plugin.Write(ctx, tx, b)
	bt.returned = time.Now()
	p.lat.mu.Lock()
	p.lat.pending[batchKey{int64(b.Partition), b.Records[len(b.Records)-1].Offset}] = bt
	p.lat.mu.Unlock()
	return err
}

func (l *latencies) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (l *latencies) Shutdown(context.Context) error                  { return nil }
func (l *latencies) ForceFlush(context.Context) error                { return nil }

func (l *latencies) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() != "eosink.batch" {
		l.mu.Lock()
		id := s.Parent().SpanID()
		l.children[id] = append(l.children[id], s)
		l.mu.Unlock()
		return
	}
	l.mu.Lock()
	children := l.children[s.SpanContext().SpanID()]
	delete(l.children, s.SpanContext().SpanID())
	l.mu.Unlock()
	if s.Status().Code != 0 {
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
	bt := l.pending[k]
	delete(l.pending, k)
	if bt == nil {
		return
	}
	for _, t := range bt.ts {
		l.ms = append(l.ms, ms(s.EndTime().Sub(t)))
	}
	l.addParts(bt, children)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// addParts splits the latency of the batch's oldest record into the stages: in Kafka and the
// sink's queues until the batch began forming (fetch_queue: from the record's timestamp to
// the start of eosink.fetch, its push into the partition's queue), batch_forming
// (eosink.fetch, which includes waiting behind the partition's previous batch),
// pool_begin_offset (from the end of forming to the plugin's
// Write: a pool connection, BEGIN and the offset update), write_copy (the plugin's Write),
// and commit (eosink.commit). Batches without a fetch span (retries) are left out.
func (l *latencies) addParts(bt *batchTimes, children []sdktrace.ReadOnlySpan) {
	var fetch, commit sdktrace.ReadOnlySpan
	for _, c := range children {
		switch c.Name() {
		case "eosink.fetch":
			fetch = c
		case "eosink.commit":
			commit = c
		}
	}
	if fetch == nil || commit == nil || len(bt.ts) == 0 {
		return
	}
	oldest := slices.MinFunc(bt.ts, func(a, b time.Time) int { return a.Compare(b) })
	if l.parts == nil {
		l.parts = map[string][]float64{}
	}
	for i, d := range []time.Duration{fetch.StartTime().Sub(oldest), fetch.EndTime().Sub(fetch.StartTime()),
		bt.written.Sub(fetch.EndTime()), bt.returned.Sub(bt.written), commit.EndTime().Sub(commit.StartTime())} {
		l.parts[stages[i]] = append(l.parts[stages[i]], ms(d))
	}
}

// Stat is one stage of the latency breakdown over the batches, in milliseconds.
type Stat struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	N    int     `json:"batches"`
}

// breakdown is the latency of each batch's oldest record, split into the stages.
func (l *latencies) breakdown() map[string]Stat {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Stat{}
	for name, v := range l.parts {
		slices.Sort(v)
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		at := func(q float64) float64 { return v[min(len(v)-1, int(q*float64(len(v))))] }
		out[name] = Stat{Mean: sum / float64(len(v)), P50: at(0.5), P99: at(0.99), N: len(v)}
	}
	return out
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
