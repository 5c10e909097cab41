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
	warned   map[partitionKey]int64 // Kafka's value last warned about (under commitMu)
	checked  time.Time              // last divergence check (under commitMu)

	quit chan struct{}
	done chan struct{}
}

func newKafkaCommitter(c *kafka.Consumer, every time.Duration, log *slog.Logger) *kafkaCommitter {
	k := &kafkaCommitter{c: c, log: log, pending: map[partitionKey]int64{}, sent: map[partitionKey]int64{}, warned: map[partitionKey]int64{},
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
	if time.Since(k.checked) >= divergenceCheckEvery {
		k.checked = time.Now()
		k.checkDivergence()
	}
}

// checkDivergence warns, once per value, about partitions whose committed offset in Kafka
// differs from the stored position last sent: Kafka's tools then show a wrong lag (commits
// failing, or another client committing for the group). Positions never come from it.
func (k *kafkaCommitter) checkDivergence() {
	if len(k.sent) == 0 {
		return
	}
	parts := make([]kafka.TopicPartition, 0, len(k.sent))
	for key := range k.sent {
		parts = append(parts, kafka.TopicPartition{Topic: &key.topic, Partition: key.partition})
	}
	got, err := k.c.Committed(parts, int(brokerQueryTimeout.Milliseconds()))
	if err != nil {
		k.log.Debug("read the group's committed offsets", "err", err)
		return
	}
	committed := map[partitionKey]int64{}
	for _, tp := range got {
		if tp.Error == nil && tp.Offset >= 0 {
			committed[partitionKey{*tp.Topic, tp.Partition}] = int64(tp.Offset)
		}
	}
	for _, d := range divergences(k.sent, committed, k.warned) {
		k.log.Warn("the group's committed offset in Kafka differs from the stored position; Kafka's lag tools are wrong for it "+
			"(eosink reads positions from the database only)", "topic", d.key.topic, "partition", d.key.partition,
			"kafka_committed", d.kafka, "stored", d.stored)
	}
}

type divergence struct {
	key           partitionKey
	stored, kafka int64
}

// divergences compares what was sent with what Kafka has (-1 or missing: nothing) and
// returns the differences not yet warned about, recording them in warned.
func divergences(sent, committed, warned map[partitionKey]int64) []divergence {
	var out []divergence
	for key, stored := range sent {
		kv, ok := committed[key]
		if !ok {
			kv = -1
		}
		if kv == stored {
			delete(warned, key)
			continue
		}
		if w, ok := warned[key]; ok && w == kv {
			continue
		}
		warned[key] = kv
		out = append(out, divergence{key: key, stored: stored, kafka: kv})
	}
	return out
}

func (k *kafkaCommitter) close() {
	close(k.quit)
	<-k.done
}
