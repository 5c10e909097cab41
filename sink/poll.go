package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/rebalance"
)

// pausedPollMs is Poll's timeout while any partition is paused: how soon a partition whose
// buffer has drained fetches again.
const pausedPollMs = 5

// poll is the consumer loop: it serves rebalance callbacks, hands records to partition
// workers, and bounds memory: it pauses and resumes partitions, and holds off polling at
// MaxTotalBufferedBytes (capgate.go).
func (s *Sink) poll(ctx context.Context, bal *rebalance.Balancer) error {
	c := s.consumer
	gate := capGate{pausing: &s.wcfg.capPausing}
	holding := false
	for ctx.Err() == nil {
		s.touch()
		if gate.hold(s.buffered.Load(), int64(s.wcfg.limits.total), time.Now()) {
			// At MaxTotalBufferedBytes: take no records until commits free some (capgate.go).
			if !holding {
				holding = true
				s.m.capWaits.add(1)
			}
			if err := bal.Err(); err != nil {
				return err
			}
			time.Sleep(capWait)
			s.resumeDrained()
			s.serveRechecks()
			s.rangeChecks()
			continue
		}
		holding = false
		// Paused partitions resume from this loop (resumeDrained), after Poll returns. With
		// every partition paused no record ends a Poll early, and a drained partition would
		// sit idle for the whole timeout: records of a few KiB, whose buffers fill in a
		// batch or two, lost half their rate to that wait.
		timeout := 100
		if len(s.paused) > 0 {
			timeout = pausedPollMs
		}
		ev := c.Poll(timeout)
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
