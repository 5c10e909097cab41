package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

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
	for _, p := range procs {
		p.StopClean(45 * time.Second)
	}
}
