package sink

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/rebalance"
)

// poll is the consumer loop: it serves rebalance callbacks, hands records to partition
// workers, and pauses and resumes partitions to bound memory.
func (s *Sink) poll(ctx context.Context, bal *rebalance.Balancer) error {
	c := s.consumer
	for ctx.Err() == nil {
		s.touch()
		ev := c.Poll(100)
		if err := bal.Err(); err != nil {
			return err
		}
		switch e := ev.(type) {
		case nil:
		case *kafka.Message:
			s.dispatch(e)
		case kafka.PartitionEOF:
			s.atEnd(e)
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("eosink: kafka fatal error: %w", e)
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				// auto.offset.reset=error: librdkafka stopped a partition whose position left
				// the log. Find which, and stop it loudly.
				s.log.Error("kafka reports an offset out of range", "err", e)
				s.requestRangeCheck()
			} else if isAuthError(e) || isTLSError(e) {
				// At start these end Run (connect.go); later (a password rotated on the
				// broker, a certificate expired) librdkafka retries while they last.
				s.log.Error("kafka authentication or TLS failed; librdkafka retries", "code", e.Code().String(), "err", e)
			} else {
				s.log.Warn("kafka error", "code", e.Code().String(), "err", e)
			}
		default:
			s.log.Debug("kafka event", "event", e.String())
		}
		s.resumeDrained()
		s.serveRechecks()
		s.rangeChecks()
	}
	return nil
}

func (s *Sink) dispatch(m *kafka.Message) {
	tp := m.TopicPartition
	if tp.Error != nil {
		s.log.Warn("kafka partition error", "topic", *tp.Topic, "partition", tp.Partition, "err", tp.Error)
		return
	}
	k := partitionKey{*tp.Topic, tp.Partition}
	w := s.workers[k]
	if w == nil {
		return // not ours (any more): never committed, never lost
	}
	if w.dead.Load() {
		s.pause(k, w)
		return
	}
	r := Record{
		Topic: k.topic, Partition: k.partition, Offset: int64(tp.Offset),
		Key: m.Key, Value: m.Value, Timestamp: m.Timestamp,
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	if w.push(r) {
		s.pause(k, w)
	}
}

func (s *Sink) pause(k partitionKey, w *worker) {
	if _, ok := s.paused[k]; ok {
		return
	}
	if err := s.consumer.Pause([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
		s.log.Warn("pause failed", "topic", k.topic, "partition", k.partition, "err", err)
		return
	}
	s.paused[k] = w
	s.m.pauses.add(1)
}

func (s *Sink) resumeDrained() {
	for k, w := range s.paused {
		if w.dead.Load() || !w.canResume() {
			continue
		}
		if err := s.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
			s.log.Warn("resume failed", "topic", k.topic, "partition", k.partition, "err", err)
			continue
		}
		delete(s.paused, k)
	}
}
