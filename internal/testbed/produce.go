package testbed

import (
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Msg is one record to produce. Partition -1 lets the key pick it.
type Msg struct {
	Partition int32
	Key       []byte
	Value     []byte // nil: a tombstone
	Headers   []kafka.Header
	Timestamp time.Time // the record's CreateTime; zero: the producer's now
}

// Produce writes msgs to topic in order, idempotently, and waits until all are acknowledged.
func Produce(t testing.TB, e Env, topic string, msgs []Msg) {
	t.Helper()
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": e.Brokers, "enable.idempotence": true,
		"linger.ms": 5, "go.logs.channel.enable": false})
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer pr.Close()
	done := make(chan kafka.Event, len(msgs))
	for _, m := range msgs {
		part := m.Partition
		if part < 0 {
			part = kafka.PartitionAny
		}
		if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: part},
			Key: m.Key, Value: m.Value, Headers: m.Headers, Timestamp: m.Timestamp}, done); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for range msgs {
		ev := <-done
		if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			t.Fatalf("produce: %v", m.TopicPartition.Error)
		}
	}
}
