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

// 10. An upstream transactional producer aborts about one transaction in three while sinks
// run: no aborted record may reach the database, and the gaps left by markers and aborted
// records must not confuse the stored positions.
func scenarioAbortingProducer(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 4)
	procs := []*testbed.Process{r.sink(base()), r.sink(base())}
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
	for txn, end := 0, time.Now().Add(phase); time.Now().Before(end); txn++ {
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			v := fmt.Sprintf(`{"event_id":"tx-%d-%d-%d","account_id":"acct-%d","delta":%d}`, r.seed, txn, i, r.rng.IntN(41), 1+r.rng.IntN(100))
			if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &r.p.Topic, Partition: kafka.PartitionAny},
				Key: []byte(fmt.Sprint(i)), Value: []byte(v)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for pr.Flush(1000) > 0 {
		}
		if r.rng.IntN(3) == 0 {
			err = pr.AbortTransaction(ctx)
			r.fault("aborted transaction of 50 records")
		} else {
			err = pr.CommitTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.heal()
	// Mismatch counts ledger rows at offsets that are not committed records: an aborted
	// record or a marker applied would show there.
	r.finish(120 * time.Second)
	stopAll(procs, 45*time.Second)
}

// 11a. Records not yet applied are deleted (retention, DeleteRecords) below a partition's
// stored offset while its sink is down. On restart that partition stops with a clear error
// and its position does not move; the other partition goes on.
func scenarioRecordsDeleted(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 2)
	first := r.sink(base())
	r.p.Produce(t, 400, r.seed)
	r.p.WaitCaughtUp(t, 90*time.Second)
	first.StopClean(60 * time.Second)
	before := storedNext(t, r)
	r.p.Produce(t, 400, r.seed+1)

	ends, err := logEnds(r)
	if err != nil {
		t.Fatal(err)
	}
	cut := before[0] + (ends[0]-before[0])/2 // inside the records partition 0 has not applied
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": r.p.Env.Brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &r.p.Topic, Partition: 0, Offset: kafka.Offset(cut)}}); err != nil {
		t.Fatal(err)
	}
	second := r.sink(base())
	second.WaitOutput("stored offset is out of the log's range", 60*time.Second)
	r.fault(fmt.Sprintf("records below offset %d deleted; partition 0 stopped at %d", cut, before[0]))
	r.heal()
	r.finishWith(120*time.Second, finishOpts{stopped: true}, func(v verdict) string {
		after := storedNext(t, r)
		if after[0] != before[0] {
			return fmt.Sprintf("partition 0 moved from %d to %d", before[0], after[0])
		}
		if after[1] != ends[1] {
			return fmt.Sprintf("partition 1 at %d, want %d", after[1], ends[1])
		}
		return ""
	})
	second.StopClean(60 * time.Second)
}

// 11b. The topic is deleted and created again with the same name while the sink is down.
// On restart every partition stops with a clear error; nothing of the new topic is applied
// and no position moves.
func scenarioTopicRecreated(t *testing.T) {
	t.Parallel()
	r := newRun(t, testbed.Require(t), 2)
	first := r.sink(base())
	r.p.Produce(t, 300, r.seed)
	r.p.WaitCaughtUp(t, 90*time.Second)
	first.StopClean(60 * time.Second)
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
	r.p.Produce(t, 1000, r.seed+1)
	second := r.sink(base())
	second.WaitOutput("topic was deleted and recreated", 60*time.Second)
	r.fault("topic deleted and recreated; partitions stopped")
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
		if strings.Count(second.Output(), "topic was deleted and recreated") < 2 {
			return "not every partition was stopped with the recreated-topic error"
		}
		return ""
	})
	second.StopClean(60 * time.Second)
}

func storedNext(t *testing.T, r *run) map[int32]int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT partition, next_offset FROM "+pgx.Identifier{r.p.OffsetsSchema, "offsets"}.Sanitize()+
		" WHERE pipeline = $1 AND topic = $2", r.p.Group, r.p.Topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			t.Fatal(err)
		}
		out[p] = n
	}
	return out
}

func ledgerRows(t *testing.T, r *run) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), r.p.Env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{r.p.Schema, "ledger"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func logEnds(r *run) (map[int32]int64, error) {
	_, _, ends, err := readPartitions(context.Background(), r.p.Env.Brokers, r.p.Topic)
	return ends, err
}
