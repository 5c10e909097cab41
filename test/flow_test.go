package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/examples/points/app"
	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestSlowPartitionDoesNotStallOthers: partition 0's handler blocks; partitions 1 and 2
// still apply everything. Released, partition 0 catches up too.
func TestSlowPartitionDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 3)
	p.Produce(t, 900, 51)
	base := app.Handler(p.Schema)
	release := make(chan struct{})
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if b.Partition == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return base(ctx, tx, b)
	}
	r := startSink(t, p.config(t, h))
	ends := p.logEnds(t)
	testbed.Eventually(t, 60*time.Second, "partitions 1 and 2 to finish while 0 is blocked", func() (bool, string) {
		n1, _ := p.storedOrZero(t, 1)
		n2, _ := p.storedOrZero(t, 2)
		return n1 == ends[1] && n2 == ends[2], fmt.Sprintf("p1 %d/%d p2 %d/%d", n1, ends[1], n2, ends[2])
	})
	if n0, _ := p.storedOrZero(t, 0); n0 != 0 {
		t.Fatalf("blocked partition 0 moved to %d", n0)
	}
	close(release)
	p.WaitCaughtUp(t, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryIsBoundedByPausing: with a small per-partition buffer and a slow handler, the
// sink pauses fetching instead of buffering the whole topic, and still applies everything once.
func TestMemoryIsBoundedByPausing(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 4000, 52) // about 80 bytes each
	base := app.Handler(p.Schema)
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		time.Sleep(5 * time.Millisecond)
		return base(ctx, tx, b)
	}
	cfg := p.config(t, h)
	cfg.MaxBatchBytes = 4 << 10
	cfg.MaxBufferedBytes = 16 << 10
	cfg.Kafka["max.partition.fetch.bytes"] = 8 << 10
	r := startSink(t, cfg)
	p.WaitCaughtUp(t, 90*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := r.s.Stats(); st.Pauses == 0 {
		t.Fatalf("never paused (stats %+v): the buffer bound did not engage", st)
	}
}

// TestMemoryIsBoundedAcrossPartitions: with a per-partition buffer far larger than the
// sink-wide one (MaxTotalBufferedBytes) and a slow handler, the records held over all eight
// partitions stay near the total cap, not at eight times the per-partition one, and
// everything is still applied once.
func TestMemoryIsBoundedAcrossPartitions(t *testing.T) {
	t.Parallel()
	const parts, total, fetch = 8, 16 << 10, 4 << 10
	p := newPipeline(t, parts)
	p.Produce(t, 8000, 53) // about 80 bytes each, 1000 a partition
	base := app.Handler(p.Schema)
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		time.Sleep(5 * time.Millisecond)
		return base(ctx, tx, b)
	}
	cfg := p.config(t, h)
	cfg.MaxBatchBytes = 4 << 10
	cfg.MaxBufferedBytes = 1 << 20 // a partition alone never fills it: only the total pauses
	cfg.MaxTotalBufferedBytes = total
	cfg.Kafka["max.partition.fetch.bytes"] = fetch
	r := startSink(t, cfg)
	var peak int64
	caught, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			peak = max(peak, r.s.Stats().BufferedBytes)
			select {
			case <-caught:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	p.WaitCaughtUp(t, 120*time.Second)
	close(caught)
	<-done
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	st := r.s.Stats()
	if st.CapWaits == 0 {
		t.Fatalf("never waited at the cap (stats %+v): the total bound did not engage", st)
	}
	// At the cap the sink stops taking records until commits free memory; only a total
	// held at the cap for a second pauses partitions on their fair share (the total then
	// stays under twice the cap), and what librdkafka delivered before a pause took effect
	// can land on top: about a fetch a partition.
	if bound := int64(2*total + parts*fetch); peak > bound {
		t.Fatalf("peak buffered %d bytes over all partitions, want at most %d (cap %d)", peak, bound, total)
	}
	if st.BufferedBytes != 0 {
		t.Fatalf("%d bytes still counted as buffered after the stop", st.BufferedBytes)
	}
	t.Logf("peak buffered %d bytes over %d partitions (cap %d, per partition %d), %d waits at the cap, %d pauses", peak, parts, total,
		cfg.MaxBufferedBytes, st.CapWaits, st.Pauses)
}

// TestStuckPartitionHoldingTheTotalDoesNotStallOthers: partition 0's handler blocks while
// its buffer holds more than half of the sink-wide cap (MaxTotalBufferedBytes); partitions
// 1 and 2 still apply everything, resuming each time they have drained.
func TestStuckPartitionHoldingTheTotalDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 3)
	p.Produce(t, 1500, 54)
	base := app.Handler(p.Schema)
	release := make(chan struct{})
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if b.Partition == 0 {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return base(ctx, tx, b)
	}
	cfg := p.config(t, h)
	cfg.MaxBatchBytes = 2 << 10
	cfg.MaxBufferedBytes = 1 << 20 // partition 0 alone may hold the whole total
	cfg.MaxTotalBufferedBytes = 16 << 10
	cfg.Kafka["max.partition.fetch.bytes"] = 4 << 10
	r := startSink(t, cfg)
	ends := p.logEnds(t)
	testbed.Eventually(t, 90*time.Second, "partitions 1 and 2 to finish while 0 is blocked", func() (bool, string) {
		n1, _ := p.storedOrZero(t, 1)
		n2, _ := p.storedOrZero(t, 2)
		return n1 == ends[1] && n2 == ends[2], fmt.Sprintf("p1 %d/%d p2 %d/%d, buffered %d", n1, ends[1], n2, ends[2], r.s.Stats().BufferedBytes)
	})
	if n0, _ := p.storedOrZero(t, 0); n0 != 0 {
		t.Fatalf("blocked partition 0 moved to %d", n0)
	}
	// Partition 0 holds the total at the cap, so once it has stayed there for the cap's grace
	// the sink pauses partition 0 on its fair share. Partitions 1 and 2 may have finished
	// before any stay at the cap lasted that long (they keep bringing the total under it), so
	// the pause is waited for, not expected at once.
	testbed.Eventually(t, 20*time.Second, "partition 0 to hold half of the total and be paused", func() (bool, string) {
		st := r.s.Stats()
		return st.Pauses > 0 && st.BufferedBytes >= int64(cfg.MaxTotalBufferedBytes/2),
			fmt.Sprintf("stats %+v: partition 0 did not hold half of the total, so the test proves nothing", st)
	})
	close(release)
	p.WaitCaughtUp(t, 90*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestTransactionalProducerGaps: an upstream transactional producer aborts every third
// transaction. No aborted record reaches the database, and the offset gaps left by
// transaction markers and aborted records do not confuse the stored position.
func TestTransactionalProducerGaps(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers, "transactional.id": testbed.Name(t, "tx"),
		"go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	ctx := context.Background()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	r := startSink(t, p.config(t, nil))
	committed := 0
	for txn := 0; txn < 15; txn++ {
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			v := fmt.Sprintf(`{"event_id":"tx-%d-%d","account_id":"acct-%d","delta":%d}`, txn, i, i%7, i+1)
			if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &p.Topic, Partition: kafka.PartitionAny},
				Key: []byte(fmt.Sprint(i % 7)), Value: []byte(v)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// Deliver before ending: librdkafka can fail an abort with INVALID_TXN_STATE while
		// partitions are still being added to the transaction.
		for pr.Flush(1000) > 0 {
		}
		if txn%3 == 2 {
			err = pr.AbortTransaction(ctx)
		} else {
			err = pr.CommitTransaction(ctx)
			committed += 40
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rep := p.WaitCaughtUp(t, 90*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if rep.Produced != committed || rep.Applied != committed || rep.Unknown != 0 {
		t.Fatalf("want %d committed events applied and no aborted one, got %+v", committed, rep)
	}
	// The stored positions sit past the last record, with gaps behind them, and, once the
	// sink saw the end of the partition, past the trailing commit marker too (the log end).
	c := p.admin(testbed.Pool(t, p.Env))
	ps, err := c.List(ctx, p.Group)
	if err != nil {
		t.Fatal(err)
	}
	ends := p.logEnds(t)
	for _, pos := range ps {
		if end := ends[pos.Partition]; pos.NextOffset != end && pos.NextOffset != pos.LogEnd {
			t.Fatalf("partition %d stored %d, want %d (after the last record) or %d (the log end)", pos.Partition, pos.NextOffset, end, pos.LogEnd)
		}
		if pos.Lag != 0 || pos.Error != "" {
			t.Fatalf("lag of a caught-up partition: %+v", pos)
		}
	}
	if len(ps) != 2 {
		t.Fatalf("want 2 partitions, got %+v", ps)
	}
}

// logEnds returns each partition's last committed record offset + 1, read with
// read_committed by the verifier's reader.
func (p *pipeline) logEnds(t *testing.T) map[int32]int64 {
	t.Helper()
	ends, err := app.LogEnds(context.Background(), p.Env.Brokers, p.Topic)
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

// TestShutdownDrainsQueuedRecords: records fetched and waiting for a batch to fill are
// committed when Run's context is cancelled, not thrown away.
func TestShutdownDrainsQueuedRecords(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 300, 53)
	cfg := p.config(t, nil)
	cfg.MaxBatchRecords = 10000
	cfg.MaxBatchWait = 10 * time.Minute // nothing commits until the drain
	r := startSink(t, cfg)
	ends := p.logEnds(t)
	testbed.Eventually(t, 60*time.Second, "the records to be claimed and fetched", func() (bool, string) {
		_, epoch := p.storedOrZero(t, 0)
		return epoch == 1, "not claimed yet"
	})
	time.Sleep(2 * time.Second) // let the fetch fill the queue; nothing may commit before the drain
	if next, _ := p.stored(t, 0); next != 0 {
		t.Fatalf("committed to %d before the drain; the batch wait did not hold", next)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if next, _ := p.stored(t, 0); next != ends[0] {
		t.Fatalf("after the drain the stored offset is %d, want %d: queued records were dropped", next, ends[0])
	}
}

// TestPausedPartitionResumesAfterRebalance: partitions paused on a full buffer are revoked
// and handed back by an eager rebalance; they must fetch again, not stay paused for good.
func TestPausedPartitionResumesAfterRebalance(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 3000, 54)
	base := app.Handler(p.Schema)
	slow := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		time.Sleep(20 * time.Millisecond)
		return base(ctx, tx, b)
	}
	cfg := func() sink.Config {
		c := p.config(t, slow)
		c.MaxBatchBytes = 2 << 10
		c.MaxBufferedBytes = 8 << 10
		c.Kafka["max.partition.fetch.bytes"] = 4 << 10
		c.Kafka["partition.assignment.strategy"] = "range"
		return c
	}
	a := startSink(t, cfg())
	testbed.Eventually(t, 60*time.Second, "both partitions to pause", func() (bool, string) {
		return a.s.Stats().Pauses >= 2, fmt.Sprintf("%+v", a.s.Stats())
	})
	b := startSink(t, cfg()) // eager rebalance: everything is revoked, then split
	p.WaitCaughtUp(t, 120*time.Second)
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
}
