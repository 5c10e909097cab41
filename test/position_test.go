package test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// TestPositionComesFromDatabase: Kafka's committed offset says 10, the offsets table says
// 60. The sink resumes at 60, even under the kafka-committed policy, and bumps the epoch.
func TestPositionComesFromDatabase(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 100, 11)
	p.commitKafkaOffset(t, 0, 10)
	p.setStored(t, 0, 60, 5)

	cfg := p.config(t, nil)
	cfg.InitialPosition = sink.KafkaCommitted
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the stored offset to reach 100", func() (bool, string) {
		next, _ := p.stored(t, 0)
		return next == 100, fmt.Sprintf("next_offset %d", next)
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	n, lo, hi := p.ledgerOffsets(t)
	if n != 40 || lo != 60 || hi != 99 {
		t.Fatalf("ledger: %d rows, offsets %d..%d; want 40 rows, 60..99", n, lo, hi)
	}
	if _, epoch := p.stored(t, 0); epoch != 6 {
		t.Fatalf("epoch %d, want 6 (one claim on top of 5)", epoch)
	}
}

// TestInitialPositionPolicies covers a partition with no stored row.
func TestInitialPositionPolicies(t *testing.T) {
	t.Run("kafka-committed takes over the group's offset", func(t *testing.T) {
		t.Parallel()
		p := newPipeline(t, 1)
		p.Produce(t, 50, 12)
		p.commitKafkaOffset(t, 0, 10)
		cfg := p.config(t, nil)
		cfg.InitialPosition = sink.KafkaCommitted
		r := startSink(t, cfg)
		testbed.Eventually(t, 60*time.Second, "catch-up", func() (bool, string) {
			next, _ := p.storedOrZero(t, 0)
			return next == 50, fmt.Sprint(next)
		})
		_ = r.stop(t)
		if n, lo, _ := p.ledgerOffsets(t); n != 40 || lo != 10 {
			t.Fatalf("ledger: %d rows from offset %d; want 40 from 10", n, lo)
		}
	})
	t.Run("latest skips what is in the log", func(t *testing.T) {
		t.Parallel()
		p := newPipeline(t, 1)
		p.Produce(t, 30, 13)
		cfg := p.config(t, nil)
		cfg.InitialPosition = sink.Latest
		r := startSink(t, cfg)
		testbed.Eventually(t, 60*time.Second, "the row to be created", func() (bool, string) {
			next, epoch := p.storedOrZero(t, 0)
			return epoch == 1, fmt.Sprint(next, epoch)
		})
		p.Produce(t, 5, 14)
		testbed.Eventually(t, 60*time.Second, "the new records", func() (bool, string) {
			n, _, _ := p.ledgerOffsets(t)
			return n == 5, fmt.Sprint(n)
		})
		_ = r.stop(t)
		if n, lo, _ := p.ledgerOffsets(t); n != 5 || lo != 30 {
			t.Fatalf("ledger: %d rows from %d; want 5 from 30", n, lo)
		}
	})
	t.Run("error refuses the partition", func(t *testing.T) {
		t.Parallel()
		p := newPipeline(t, 1)
		p.Produce(t, 10, 15)
		cfg := p.config(t, nil)
		cfg.InitialPosition = sink.ErrorPosition
		r := startSink(t, cfg)
		waitPartitionError(t, r, sink.ErrNoStoredPosition)
		_ = r.stop(t)
		if n, _, _ := p.ledgerOffsets(t); n != 0 {
			t.Fatalf("ledger has %d rows, want 0", n)
		}
	})
}

// TestOffsetOutOfRangeStopsPartition: records below the stored offset were deleted, or the
// stored offset is past the log end. The partition stops loudly; nothing moves.
func TestOffsetOutOfRangeStopsPartition(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 2)
	p.Produce(t, 200, 16)
	// Partition 0: delete records below 10 while the stored position is 5.
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &p.Topic, Partition: 0, Offset: 10}})
	if err != nil || res.DeleteRecordsResults[0].TopicPartition.Error != nil {
		t.Fatalf("delete records: %v %+v", err, res)
	}
	p.setStored(t, 0, 5, 1)
	// Partition 1: stored position far past the end.
	p.setStored(t, 1, 100000, 1)

	r := startSink(t, p.config(t, nil))
	testbed.Eventually(t, 60*time.Second, "both partitions to stop", func() (bool, string) {
		errs := r.s.PartitionErrors()
		n := 0
		for _, e := range errs {
			if errors.Is(e, sink.ErrOffsetOutOfRange) {
				n++
			}
		}
		return n == 2, fmt.Sprint(errs)
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n, _, _ := p.ledgerOffsets(t); n != 0 {
		t.Fatalf("ledger has %d rows, want 0", n)
	}
	if next, _ := p.stored(t, 0); next != 5 {
		t.Fatalf("partition 0 moved to %d", next)
	}
	if next, _ := p.stored(t, 1); next != 100000 {
		t.Fatalf("partition 1 moved to %d", next)
	}
}

func waitPartitionError(t *testing.T, r *running, target error) {
	t.Helper()
	testbed.Eventually(t, 60*time.Second, fmt.Sprintf("a partition error matching %v", target), func() (bool, string) {
		for _, e := range r.s.PartitionErrors() {
			if errors.Is(e, target) {
				return true, ""
			}
		}
		return false, fmt.Sprint(r.s.PartitionErrors())
	})
}

func (p *pipeline) storedOrZero(t *testing.T, partition int32) (next, epoch int64) {
	t.Helper()
	conn := connect(t, p)
	_ = conn.QueryRow(context.Background(), `SELECT next_offset, epoch FROM `+p.offsetsTable()+
		` WHERE pipeline = $1 AND topic = $2 AND partition = $3`, p.Group, p.Topic, partition).Scan(&next, &epoch)
	return next, epoch
}

// TestOffsetOutOfRangeWhileRunning: records the sink has not applied yet are deleted while it
// runs. When its fetch position falls below the log start, librdkafka (with
// auto.offset.reset=error) reports it, and the sink stops the partition instead of jumping.
func TestOffsetOutOfRangeWhileRunning(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 2000, 17)
	base := p.config(t, nil).Handler
	release := make(chan struct{})
	var first atomic.Bool
	h := func(ctx context.Context, tx pgx.Tx, b sink.Batch) error {
		if first.CompareAndSwap(false, true) {
			select { // hold the first batch while the records after it are deleted
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return base(ctx, tx, b)
	}
	cfg := p.config(t, h)
	cfg.MaxBatchBytes = 2 << 10
	cfg.MaxBufferedBytes = 4 << 10
	cfg.Kafka["max.partition.fetch.bytes"] = 1 << 10
	cfg.Kafka["queued.max.messages.kbytes"] = 1
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the partition to pause on a full buffer", func() (bool, string) {
		return r.s.Stats().Pauses > 0, fmt.Sprintf("%+v", r.s.Stats())
	})
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &p.Topic, Partition: 0, Offset: 1500}}); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitPartitionError(t, r, sink.ErrOffsetOutOfRange)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	next, _ := p.stored(t, 0)
	n, _, hi := p.ledgerOffsets(t)
	if next >= 1500 || int64(n) != next || hi != next-1 {
		t.Fatalf("stored %d, ledger %d rows up to %d: the sink jumped or lost its place", next, n, hi)
	}
	t.Logf("stopped at stored offset %d with the log starting at 1500", next)
}
