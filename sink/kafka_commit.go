package sink

import (
	"log/slog"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// kafkaCommitter sends the offsets stored in the database to Kafka as the group's committed
// offsets, in the background, so that standard lag tools see progress. The values are
// advisory: eosink never reads them back once a partition has a row.
type kafkaCommitter struct {
	c   *kafka.Consumer
	log *slog.Logger

	mu      sync.Mutex
	pending map[partitionKey]int64

	commitMu sync.Mutex             // serializes CommitOffsets calls
	sent     map[partitionKey]int64 // highest offset sent per partition (under commitMu)

	quit chan struct{}
	done chan struct{}
}

func newKafkaCommitter(c *kafka.Consumer, every time.Duration, log *slog.Logger) *kafkaCommitter {
	k := &kafkaCommitter{c: c, log: log, pending: map[partitionKey]int64{}, sent: map[partitionKey]int64{},
		quit: make(chan struct{}), done: make(chan struct{})}
	go k.loop(every)
	return k
}

// note records a database-committed next offset (any goroutine).
func (k *kafkaCommitter) note(topic string, partition int32, next int64) {
	k.mu.Lock()
	k.pending[partitionKey{topic, partition}] = next
	k.mu.Unlock()
}

// forget drops what was sent for a partition, so that a position moved back (by a reset)
// is committed again. Called when the partition is claimed.
func (k *kafkaCommitter) forget(topic string, partition int32) {
	key := partitionKey{topic, partition}
	k.commitMu.Lock()
	delete(k.sent, key)
	k.commitMu.Unlock()
	k.mu.Lock()
	delete(k.pending, key)
	k.mu.Unlock()
}

func (k *kafkaCommitter) loop(every time.Duration) {
	defer close(k.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			k.commit()
		case <-k.quit:
			k.commit()
			return
		}
	}
}

func (k *kafkaCommitter) commit() {
	k.commitMu.Lock()
	defer k.commitMu.Unlock()
	k.mu.Lock()
	var offs []kafka.TopicPartition
	for key, next := range k.pending {
		delete(k.pending, key)
		if next <= k.sent[key] {
			continue // never move Kafka's value backwards
		}
		k.sent[key] = next
		offs = append(offs, kafka.TopicPartition{Topic: &key.topic, Partition: key.partition, Offset: kafka.Offset(next)})
	}
	k.mu.Unlock()
	if len(offs) == 0 {
		return
	}
	if _, err := k.c.CommitOffsets(offs); err != nil {
		k.log.Debug("advisory Kafka commit failed (positions stay in the database)", "err", err)
	}
}

func (k *kafkaCommitter) close() {
	close(k.quit)
	<-k.done
}
