package sink

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// benchMessages are n records as the consumer hands them over: the bench's 150-byte JSON
// values, keyed by id, no headers.
func benchMessages(topic string, n int) []*kafka.Message {
	msgs := make([]*kafka.Message, n)
	for i := range msgs {
		v := fmt.Sprintf(`{"id":%d,"account":"acct-%04d","amount":%d,"currency":"EUR","ts":"2026-11-30T07:00:00.123Z","note":"payment received, thank you"}`,
			i, (i*7919)%10000, i%1000)
		msgs[i] = &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0, Offset: kafka.Offset(i)},
			Key: []byte(fmt.Sprint(i)), Value: []byte(v), Timestamp: time.UnixMilli(1700000000000 + int64(i))}
	}
	return msgs
}

// BenchmarkDispatchToBatch is the engine's share of the poll -> map -> COPY path, per
// record: a consumed message becomes a Record (dispatch), is queued on its partition's
// worker (push), and leaves in a batch of 5,000 (nextBatch), which is given back as the
// worker does after its commit. The Kafka client's cgo crossing and the plugin's mapping
// are measured elsewhere (kafka_consume in the bench; sink/table's BenchmarkEncode).
//
//	go test -run '^$' -bench 'BenchmarkDispatchToBatch' -benchmem -count 6 ./sink/
func BenchmarkDispatchToBatch(b *testing.B) {
	const batch = 5000
	msgs := benchMessages("bench", batch)
	cfg := &workerConfig{limits: batchLimits{maxBatchRecords: batch, maxBatchBytes: 64 << 20, maxBatchWait: time.Hour, maxBufferedBytes: 1 << 40}}
	cfg.total = &(&Sink{}).buffered
	p := newPoller(&Config{}, nil, &metrics{}, nil, &pollClock{})
	w := newWorker(cfg, "bench", 0, 1, 0)
	p.workers[partitionKey{"bench", 0}] = w
	b.ReportAllocs()
	cpu0 := cpuTime()
	var offset kafka.Offset
	for b.Loop() {
		for _, m := range msgs {
			m.TopicPartition.Offset = offset
			offset++
			p.dispatch(m)
		}
		recs, _ := w.nextBatch()
		if len(recs) != batch {
			b.Fatalf("batch of %d records, want %d", len(recs), batch)
		}
		size := 0
		for i := range recs {
			size += memSize(&recs[i])
		}
		w.settled(recs, size, true)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
	// CPU time (the process's, GC included) rather than elapsed time: on a loaded machine the
	// elapsed time counts the waits for a core too.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/record")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
