package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/testbed"
)

// 12. Retention past a commit marker: a transactional producer leaves a commit marker as the
// last offset of each partition; the sink applies everything and stops; the log start moves
// to the log end (DeleteRecords), deleting only markers. The restarted sink claims every
// partition (no stop) and applies what comes next.
func scenarioRetentionPastMarker(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 2)
	first := r.sink(base())
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers,
		"transactional.id": testbed.Name(t, "tx"), "go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	ctx := context.Background()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	for txn := 0; txn < 6; txn++ {
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			v := fmt.Sprintf(`{"event_id":"tx-%d-%d-%d","account_id":"acct-%d","delta":%d}`, r.seed, txn, i, r.rng.IntN(41), 1+r.rng.IntN(100))
			if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &r.p.Topic, Partition: int32(i % 2)},
				Key: []byte(fmt.Sprint(i)), Value: []byte(v)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for pr.Flush(1000) > 0 {
		}
		if err := pr.CommitTransaction(ctx); err != nil {
			t.Fatal(err)
		}
	}
	r.p.WaitCaughtUp(t, 90*time.Second)
	ends, err := logEnds(r) // last committed record + 1
	if err != nil {
		t.Fatal(err)
	}
	highs := watermarkHighs(t, r)
	// The sink moves past the trailing markers once it has seen each partition's end.
	testbed.Eventually(t, 30*time.Second, "the stored positions past the trailing markers", func() (bool, string) {
		next := storedNext(t, r)
		for p, h := range highs {
			if next[p] != h {
				return false, fmt.Sprint(next, highs)
			}
		}
		return true, ""
	})
	first.StopClean(60 * time.Second)

	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for p, h := range highs {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := a.DeleteRecords(dctx, []kafka.TopicPartition{{Topic: &r.p.Topic, Partition: p, Offset: kafka.Offset(h)}})
		cancel()
		if err != nil || res.DeleteRecordsResults[0].TopicPartition.Error != nil {
			t.Fatalf("delete records: %v %+v", err, res)
		}
		if h > ends[p] {
			r.fault(fmt.Sprintf("partition %d: log start moved to %d, past the commit marker at %d", p, h, ends[p]))
		}
	}
	second := r.sink(base())
	r.p.Produce(t, 400, r.seed+1)
	r.heal()
	r.finish(120*time.Second, func(verdict) string {
		if second.Contains(`msg="partition stopped"`) {
			return "a partition stopped after only markers were deleted"
		}
		return ""
	})
	second.StopClean(60 * time.Second)
}

func watermarkHighs(t *testing.T, r *run) map[int32]int64 {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers, "group.id": "eosink-chaos-verifier"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[int32]int64{}
	for p := int32(0); p < 2; p++ {
		_, high, err := c.QueryWatermarkOffsets(r.p.Topic, p, 10000)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = high
	}
	return out
}

// 13. The topic is deleted and created again while the sink runs, with fewer records than
// the stored positions: librdkafka's position sits above the new log and nothing is
// fetched. Every partition stops loudly within seconds (the ERROR line with reason
// topic_recreated, the stop on its offsets row); nothing of the new topic is applied and no
// position moves.
func scenarioTopicRecreatedRunning(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 2)
	sink := r.sink(base())
	r.p.Produce(t, 400, r.seed)
	r.p.WaitCaughtUp(t, 90*time.Second)
	before := storedNext(t, r)
	rowsBefore := ledgerRows(t, r)

	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := a.DeleteTopics(ctx, []string{r.p.Topic}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, 60*time.Second, "the topic to be created again", func() (bool, string) {
		res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: r.p.Topic, NumPartitions: 2, ReplicationFactor: 1}})
		if err != nil {
			return false, err.Error()
		}
		return res[0].Error.Code() == kafka.ErrNoError, res[0].Error.String()
	})
	recreated := time.Now()
	r.p.Produce(t, 20, r.seed+1)
	testbed.Eventually(t, 30*time.Second, "both partitions stopped with reason topic_recreated", func() (bool, string) {
		n, rows := strings.Count(sink.Output(), "reason=topic_recreated"), stoppedRows(t, r, "topic_recreated")
		return n >= 2 && rows == 2, fmt.Sprintf("%d ERROR lines, %d offsets rows", n, rows)
	})
	r.fault(fmt.Sprintf("topic recreated while running; both partitions stopped within %s", time.Since(recreated).Round(time.Second)))
	r.heal()
	r.finishWith(60*time.Second, finishOpts{stopped: true, recreated: true}, func(verdict) string {
		after := storedNext(t, r)
		for p, n := range before {
			if after[p] != n {
				return fmt.Sprintf("partition %d moved from %d to %d", p, n, after[p])
			}
		}
		if n := ledgerRows(t, r); n != rowsBefore {
			return fmt.Sprintf("ledger grew from %d to %d rows after the topic was recreated", rowsBefore, n)
		}
		if n := stoppedRows(t, r, "topic_recreated"); n != 2 {
			return fmt.Sprintf("%d offsets rows record the stop, want 2", n)
		}
		return ""
	})
	sink.StopClean(60 * time.Second)
}

// stoppedRows counts the pipeline's offsets rows stopped for reason (what `eosink status`
// shows).
func stoppedRows(t *testing.T, r *run, reason string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
		" WHERE pipeline = $1 AND stopped_reason = $2", r.p.Group, reason).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
