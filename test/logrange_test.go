package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/testbed"
	"github.com/eosink/eosink/sink"
)

// txProducer returns a transactional producer with its transactions initialised.
func txProducer(t *testing.T, p *pipeline) *kafka.Producer {
	t.Helper()
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers, "transactional.id": testbed.Name(t, "tx"),
		"go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.Close)
	if err := pr.InitTransactions(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pr
}

// produceTx writes n points events to partition 0 inside an open transaction of pr, and
// commits it when commit is set.
func produceTx(t *testing.T, p *pipeline, pr *kafka.Producer, prefix string, n int, commit bool) {
	t.Helper()
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(`{"event_id":"%s-%d","account_id":"acct-%d","delta":%d}`, prefix, i, i%7, i+1)
		if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &p.Topic, Partition: 0},
			Key: []byte(fmt.Sprint(i % 7)), Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for pr.Flush(1000) > 0 {
	}
	if commit {
		if err := pr.CommitTransaction(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// watermarks returns partition 0's log start and high watermark.
func (p *pipeline) watermarks(t *testing.T) (low, high int64) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers, "group.id": "eosink-test-wm"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	low, high, err = c.QueryWatermarkOffsets(p.Topic, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	return low, high
}

// deleteRecordsTo deletes partition 0's records below offset.
func (p *pipeline) deleteRecordsTo(t *testing.T, offset int64) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &p.Topic, Partition: 0, Offset: kafka.Offset(offset)}})
	if err != nil || res.DeleteRecordsResults[0].TopicPartition.Error != nil {
		t.Fatalf("delete records: %v %+v", err, res)
	}
}

// TestRetentionPastCommitMarker (issue 11, finding 5): the last offset of the log is a
// transaction's commit marker. The sink applies every record, then the log start moves to
// the log end (retention, here DeleteRecords). Nothing unapplied was deleted, so the restarted
// sink claims the partition and goes on. When a record the sink never applied was deleted,
// the partition still stops.
func TestRetentionPastCommitMarker(t *testing.T) {
	t.Run("markers only", func(t *testing.T) {
		t.Parallel()
		p := newPipeline(t, 1)
		pr := txProducer(t, p)
		produceTx(t, p, pr, "a", 20, true)
		produceTx(t, p, pr, "b", 20, true)
		r := startSink(t, p.config(t, nil))
		testbed.Eventually(t, 60*time.Second, "40 records applied", func() (bool, string) {
			n, _, _ := p.ledgerOffsets(t)
			return n == 40, fmt.Sprint(n)
		})
		_, high := p.watermarks(t)
		// The sink moves its position past the trailing commit marker once it has seen it.
		deadline := time.Now().Add(10 * time.Second)
		for next, _ := p.stored(t, 0); next != high && time.Now().Before(deadline); next, _ = p.stored(t, 0) {
			time.Sleep(200 * time.Millisecond)
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		next, _ := p.stored(t, 0)
		t.Logf("stored next offset %d, log end %d (offset 40 is the commit marker)", next, high)
		p.deleteRecordsTo(t, high)

		r = startSink(t, p.config(t, nil))
		_, epoch := p.stored(t, 0)
		testbed.Eventually(t, 60*time.Second, "the partition claimed again", func() (bool, string) {
			_, e := p.stored(t, 0)
			return e > epoch, fmt.Sprint(e)
		})
		p.Produce(t, 10, 51)
		testbed.Eventually(t, 60*time.Second, "the new records applied", func() (bool, string) {
			if errs := r.s.PartitionErrors(); len(errs) > 0 {
				t.Fatalf("partition stopped: %v", errs)
			}
			n, _, _ := p.ledgerOffsets(t)
			return n == 50, fmt.Sprint(n)
		})
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a record deleted", func(t *testing.T) {
		t.Parallel()
		p := newPipeline(t, 1)
		pr := txProducer(t, p)
		produceTx(t, p, pr, "a", 20, true)
		r := startSink(t, p.config(t, nil))
		testbed.Eventually(t, 60*time.Second, "20 records applied", func() (bool, string) {
			n, _, _ := p.ledgerOffsets(t)
			return n == 20, fmt.Sprint(n)
		})
		time.Sleep(3 * time.Second)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		p.Produce(t, 5, 52) // never applied, then deleted
		_, high := p.watermarks(t)
		p.deleteRecordsTo(t, high)
		r = startSink(t, p.config(t, nil))
		waitPartitionError(t, r, sink.ErrOffsetOutOfRange)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if n, _, _ := p.ledgerOffsets(t); n != 20 {
			t.Fatalf("ledger has %d rows, want 20", n)
		}
	})
}

// TestLatestIsLastStableOffset (issue 11, item 11): the latest initial position is the last
// stable offset, as `eosink offsets set -to latest` uses: the records of a transaction open
// when the partition is first claimed are applied once it commits, not skipped.
func TestLatestIsLastStableOffset(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 10, 53) // may go to partition 0 only: one partition
	pr := txProducer(t, p)
	produceTx(t, p, pr, "open", 5, false)
	cfg := p.config(t, nil)
	cfg.InitialPosition = sink.Latest
	r := startSink(t, cfg)
	testbed.Eventually(t, 60*time.Second, "the row to be created", func() (bool, string) {
		next, epoch := p.storedOrZero(t, 0)
		return epoch == 1, fmt.Sprint(next, epoch)
	})
	if next, _ := p.stored(t, 0); next != 10 {
		t.Errorf("latest stored next offset %d, want the last stable offset 10", next)
	}
	if err := pr.CommitTransaction(context.Background()); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 30*time.Second, "the transaction's 5 records applied", func() (bool, string) {
		n, _, _ := p.ledgerOffsets(t)
		return n == 5, fmt.Sprint(n)
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// recreateTopic deletes the pipeline's topic and creates it again with one partition.
func (p *pipeline) recreateTopic(t *testing.T) {
	t.Helper()
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.DeleteTopics(ctx, []string{p.Topic}, kafka.SetAdminOperationTimeout(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 60*time.Second, "the topic to be created again", func() (bool, string) {
		res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: p.Topic, NumPartitions: 1, ReplicationFactor: 1}},
			kafka.SetAdminOperationTimeout(20*time.Second))
		if err != nil {
			return false, err.Error()
		}
		return res[0].Error.Code() == kafka.ErrNoError, res[0].Error.String()
	})
	testbed.Eventually(t, 30*time.Second, "the new topic in the metadata", func() (bool, string) {
		md, err := a.GetMetadata(&p.Topic, false, 5000)
		if err != nil {
			return false, err.Error()
		}
		tm, ok := md.Topics[p.Topic]
		return ok && tm.Error.Code() == kafka.ErrNoError && len(tm.Partitions) == 1, "not yet"
	})
}

// TestTopicRecreatedWhileRunning (issue 11, finding 8): the topic is deleted and created
// again while the sink runs, with fewer records than the stored position: librdkafka's
// position sits above the new log, nothing is fetched and nothing errs. The partition stops
// loudly within seconds: PartitionErrors, the ERROR line, eosink_partition_stopped and the
// offsets row.
func TestTopicRecreatedWhileRunning(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, 1)
	p.Produce(t, 30, 54)
	r := startSink(t, p.config(t, nil))
	testbed.Eventually(t, 60*time.Second, "30 records applied", func() (bool, string) {
		n, _, _ := p.ledgerOffsets(t)
		return n == 30, fmt.Sprint(n)
	})
	p.recreateTopic(t)
	p.Produce(t, 10, 55)
	start := time.Now()
	testbed.Eventually(t, 30*time.Second, "the partition to stop", func() (bool, string) {
		for _, e := range r.s.PartitionErrors() {
			if errors.Is(e, sink.ErrTopicRecreated) || errors.Is(e, sink.ErrOffsetOutOfRange) {
				return true, ""
			}
		}
		return false, fmt.Sprint(r.s.PartitionErrors())
	})
	t.Logf("stopped %s after the new topic's records were produced: %v", time.Since(start).Round(time.Millisecond), r.s.PartitionErrors())
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := p.ledgerOffsets(t); n != 30 {
		t.Fatalf("ledger has %d rows, want 30", n)
	}
}
