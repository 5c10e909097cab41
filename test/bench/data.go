package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// The benchmark's records: JSON of about 150 bytes,
//
//	{"id":123,"account":"acct-0017","amount":42,"currency":"EUR","ts":"2026-11-30T07:00:00.123Z","note":"..."}
//
// keyed by id and spread over the partitions by i % partitions, so every run sees the
// same bytes. width selects the note's length: narrow rows drop it, wide ones are ~1 KiB.
func appendRecord(buf []byte, i int64, width string) []byte {
	buf = append(buf, `{"id":`...)
	buf = strconv.AppendInt(buf, i, 10)
	buf = append(buf, `,"account":"acct-`...)
	buf = appendPadded(buf, (i*7919)%10000, 4)
	buf = append(buf, `","amount":`...)
	buf = strconv.AppendInt(buf, i%1000, 10)
	buf = append(buf, `,"currency":"EUR","ts":"2026-11-30T07:00:00.123Z"`...)
	switch width {
	case "narrow":
	case "wide":
		buf = append(buf, `,"note":"`...)
		for range 15 {
			buf = append(buf, "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod "...)
		}
		buf = append(buf, '"')
	default:
		buf = append(buf, `,"note":"payment received, thank you"`...)
	}
	return append(buf, '}')
}

// appendEnvelope wraps the record the way Kafka Connect's JsonConverter with
// schemas.enable=true expects it, which the Debezium JDBC sink requires.
func appendEnvelope(buf []byte, i int64) []byte {
	buf = append(buf, `{"schema":{"type":"struct","name":"bench.Record","optional":false,"fields":[`+
		`{"field":"id","type":"int64","optional":false},{"field":"account","type":"string","optional":false},`+
		`{"field":"amount","type":"int64","optional":false},{"field":"currency","type":"string","optional":false},`+
		`{"field":"ts","type":"string","optional":false,"name":"io.debezium.time.ZonedTimestamp","version":1},`+
		`{"field":"note","type":"string","optional":true}]},"payload":`...)
	buf = appendRecord(buf, i, "normal")
	return append(buf, '}')
}

func appendPadded(buf []byte, v int64, width int) []byte {
	s := strconv.FormatInt(v, 10)
	for range width - len(s) {
		buf = append(buf, '0')
	}
	return append(buf, s...)
}

// createTopic creates topic with the given partitions, deleting an old one first.
func createTopic(ctx context.Context, brokers, topic string, partitions int) error {
	a, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": brokers})
	if err != nil {
		return err
	}
	defer a.Close()
	_, _ = a.DeleteTopics(ctx, []string{topic})
	for attempt := 0; ; attempt++ {
		res, err := a.CreateTopics(ctx, []kafka.TopicSpecification{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}})
		if err == nil && res[0].Error.Code() == kafka.ErrNoError {
			break
		}
		if err == nil && res[0].Error.Code() != kafka.ErrTopicAlreadyExists && !res[0].Error.IsRetriable() {
			return fmt.Errorf("create topic %s: %v", topic, res[0].Error) // an invalid name: waiting does not help
		}
		if attempt > 40 {
			return fmt.Errorf("create topic %s: %v %v", topic, err, res)
		}
		time.Sleep(500 * time.Millisecond) // the deletion is still in progress
	}
	for range 60 { // until the metadata has every partition
		md, err := a.GetMetadata(&topic, false, 5000)
		if err == nil && len(md.Topics[topic].Partitions) == partitions && md.Topics[topic].Error.Code() == kafka.ErrNoError {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("topic %s not in the metadata", topic)
}

// preload writes n records to a new topic, with the producer not competing with any sink.
func preload(ctx context.Context, brokers, topic string, partitions int, n int64, format string) (time.Duration, error) {
	if err := createTopic(ctx, brokers, topic, partitions); err != nil {
		return 0, err
	}
	began := time.Now()
	// The records' keys are all distinct: a record whose delivery failed may be sent again.
	p, err := newProducer(kafka.ConfigMap{"bootstrap.servers": brokers, "enable.idempotence": true,
		"linger.ms": 20, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 64 << 10}, true)
	if err != nil {
		return 0, err
	}
	var buf []byte
	for i := range n {
		switch format {
		case "envelope":
			buf = appendEnvelope(buf[:0], i)
		default:
			buf = appendRecord(buf[:0], i, format)
		}
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: int32(i % int64(partitions))},
			Key: strconv.AppendInt(nil, i, 10), Value: append([]byte(nil), buf...)}
		if err := p.produce(ctx, m); err != nil {
			_, _ = p.close(10 * time.Second)
			return 0, fmt.Errorf("preload %s: %w", topic, err)
		}
	}
	st, err := p.close(5 * time.Minute)
	if err != nil {
		return 0, fmt.Errorf("preload %s: %w (%s)", topic, err, st)
	}
	if st.QueueFull > 0 || st.Resent > 0 {
		fmt.Fprintf(os.Stderr, "bench: preload %s: %s\n", topic, st)
	}
	return time.Since(began), nil
}
