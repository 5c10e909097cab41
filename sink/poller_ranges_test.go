package sink

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TestProbeRangesAsksTheBroker: on the real broker, a probe reads each partition's log start
// and high watermark, in the two batched requests and one partition at a time alike: 4 and
// 10 for a partition of 10 records whose first 4 were deleted, 0 and 0 for an empty one.
func TestProbeRangesAsksTheBroker(t *testing.T) {
	brokers := os.Getenv("KAFKA_BOOTSTRAP_SERVERS")
	if brokers == "" {
		t.Fatal("KAFKA_BOOTSTRAP_SERVERS is not set: this test needs a real broker (make test starts one)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := fmt.Sprintf("probe-ranges-%d", time.Now().UnixNano())
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: 2, ReplicationFactor: 1}})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError {
		t.Fatalf("create topic: %v %v", err, res)
	}
	defer func() { _, _ = admin.DeleteTopics(context.Background(), []string{topic}) }()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": brokers, "go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 10 {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte{byte(i)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if left := p.Flush(30_000); left != 0 {
		t.Fatalf("%d records not delivered", left)
	}
	if _, err := admin.DeleteRecords(ctx, []kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: 4}}); err != nil {
		t.Fatal(err)
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": brokers, "group.id": topic})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ca, err := kafka.NewAdminClientFromConsumer(c)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	for _, a := range []*kafka.AdminClient{ca, nil} {
		probes := probeRanges(c, a, []rangeProbe{{k: partitionKey{topic, 0}}, {k: partitionKey{topic, 1}}}, make(chan struct{}))
		for i, want := range [][2]int64{{4, 10}, {0, 0}} {
			pr := probes[i]
			if pr.err != nil || pr.low != want[0] || pr.high != want[1] {
				t.Errorf("admin client %v, partition %d: low %d, high %d, err %v; want %d, %d", a != nil, i, pr.low, pr.high, pr.err, want[0], want[1])
			}
			if a != nil && pr.topicID == "" {
				t.Errorf("partition %d: no topic id", i)
			}
		}
	}
}
