package relay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/testbed"
)

// openTransaction leaves a transaction of another producer open on topic, with one record
// written (delivered to the broker, so that it holds the partition's last stable offset
// back), and returns the function that aborts it. The test's cleanup aborts it too.
func openTransaction(t *testing.T, env testbed.Env, topic, tid string) (abort func()) {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": env.Brokers, "transactional.id": tid,
		"transaction.timeout.ms": 120000})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	dr := make(chan kafka.Event, 1)
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: []byte(tid), Value: []byte(`{"xid": "1", "id": 1}`)}, dr); err != nil {
		t.Fatal(err)
	}
	if m := (<-dr).(*kafka.Message); m.TopicPartition.Error != nil {
		t.Fatal(m.TopicPartition.Error)
	}
	done := false
	abort = func() {
		if done {
			return
		}
		done = true
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := p.AbortTransaction(ctx); err != nil {
			t.Errorf("abort the open transaction: %v", err)
		}
		p.Close()
	}
	t.Cleanup(abort)
	return abort
}

// TestRelayReadsItsPositionPastAnOpenTransaction: every shard (of every relay sharing the
// position topic) writes its positions into one partition, so another shard's transaction
// may still be open below a position of ours that committed. A relay killed right after
// such a commit (before its status row is written) must not come back with the older
// position: the restart waits until the open transaction ends, reads the committed position
// past it, and publishes nothing again. Before the fix, the read stopped at the last stable
// offset (librdkafka's QueryWatermarkOffsets returns it to a read_committed client) and the
// restart published the killed relay's last transaction a second time.
func TestRelayReadsItsPositionPastAnOpenTransaction(t *testing.T) {
	b := newBed(t, 1)
	env := []string{"DATABASE_URL=" + b.env.DatabaseURL, "KAFKA_BOOTSTRAP_SERVERS=" + b.env.Brokers,
		"EOSINK_FAILPOINTS=relay-after-commit=kill@1"}
	first := testbed.StartProcess(t, eosinkBin, "relay-killed", []string{"relay", "-config", b.relayFile(1)}, env...)
	first.WaitOutput("relay shard publishing", 60*time.Second)

	// Another shard's transaction, open on the position topic from here on; then the first
	// relay commits one transaction (30 events and its position, past the open one) and is
	// killed at once.
	abort := openTransaction(t, b.env, b.posTopic, b.name+"-other-shard")
	b.commit("e", 0, 30)
	if err := first.Wait(60 * time.Second); !testbed.KilledBySIGKILL(err) || !first.Contains("failpoint fired: relay-after-commit") {
		t.Fatalf("first relay: exit %v, want SIGKILL by the failpoint after its commit\n%s", err, first.Output())
	}
	b.waitPublished(30, 60*time.Second)

	// The restart, with the transaction still open: it must wait for it, not publish.
	c, logs := b.logged()
	stop, _ := b.start(c)
	testbed.Eventually(t, 60*time.Second, "the restarted relay waits for the open transaction (or publishes again)", func() (bool, string) {
		counts, total := b.published()
		waits := strings.Contains(logs.String(), "reading the position waits for a transaction still open")
		return waits || total > 30, fmt.Sprintf("waiting logged: %t; %d records of %d distinct events in Kafka", waits, total, len(counts))
	})
	if strings.Contains(logs.String(), "relay shard publishing") {
		t.Errorf("the restarted relay read its position while a transaction below it was still open:\n%s", logs.String())
	}
	abort()
	b.commit("f", 0, 10)
	counts := b.waitPublished(40, 60*time.Second)
	expectIDs(t, counts, "e", 0, 30)
	expectIDs(t, counts, "f", 0, 10)
	if err := stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
}
