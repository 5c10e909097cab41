package testbed

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ReadCommitted reads every partition of topic with read_committed, from its start to its
// high watermark as it is when called, and calls f for each record. It fails t when a
// partition is not read to that end within timeout (a transaction left open holds
// read_committed back until the broker aborts it).
func ReadCommitted(t testing.TB, e Env, topic string, timeout time.Duration, f func(*kafka.Message)) {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "group.id": "testbed-read-committed",
		"enable.auto.commit": false, "isolation.level": "read_committed", "enable.partition.eof": true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md, err := c.GetMetadata(&topic, false, 10000)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]int64{}
	var tps []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		_, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if high > 0 {
			ends[p.ID] = high
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
		}
	}
	if len(tps) == 0 {
		return
	}
	if err := c.Assign(tps); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for len(ends) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("reading %s with read_committed: partitions %v not read to their end in %s", topic, ends, timeout)
		}
		switch m := c.Poll(200).(type) {
		case *kafka.Message:
			f(m)
			if int64(m.TopicPartition.Offset) >= ends[m.TopicPartition.Partition]-1 {
				delete(ends, m.TopicPartition.Partition)
			}
		case kafka.PartitionEOF:
			if int64(m.Offset) >= ends[m.Partition] {
				delete(ends, m.Partition)
			}
		}
	}
}

// Header returns the value of m's last header called key, and whether there is one.
func Header(m *kafka.Message, key string) (string, bool) {
	v, ok := "", false
	for _, h := range m.Headers {
		if h.Key == key {
			v, ok = string(h.Value), true
		}
	}
	return v, ok
}
