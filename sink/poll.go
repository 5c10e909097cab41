package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/rebalance"
)

// poll is the consumer loop: it serves rebalance callbacks, hands records to partition
// workers, and pauses and resumes partitions to bound memory.
func (s *Sink) poll(ctx context.Context, bal *rebalance.Balancer) error {
	c := s.consumer
	for ctx.Err() == nil {
		s.polled.Store(time.Now().UnixNano())
		ev := c.Poll(100)
		if err := bal.Err(); err != nil {
			return err
		}
		switch e := ev.(type) {
		case nil:
		case *kafka.Message:
			s.dispatch(e)
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("eosink: kafka fatal error: %w", e)
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				// auto.offset.reset=error: librdkafka stopped a partition whose position left
				// the log. Find which, and stop it loudly.
				s.log.Error("kafka reports an offset out of range", "err", e)
				s.checkRanges()
			} else {
				s.log.Warn("kafka error", "code", e.Code().String(), "err", e)
			}
		default:
			s.log.Debug("kafka event", "event", e.String())
		}
		s.resumeDrained()
		s.serveRechecks()
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

// checkRanges stops every partition whose stored position is outside its log.
func (s *Sink) checkRanges() {
	for k, w := range s.workers {
		if w.dead.Load() {
			continue
		}
		low, high, err := s.consumer.QueryWatermarkOffsets(k.topic, k.partition, 10000)
		if err != nil {
			s.log.Warn("query watermark offsets", "topic", k.topic, "partition", k.partition, "err", err)
			continue
		}
		// librdkafka complains about its fetch position, which may be ahead of the stored one.
		next, fetch := w.next.Load(), w.fetchNext
		if next < low || next > high || fetch < low || fetch > high {
			w.cancel()
			<-w.done
			s.partitionFailed(w, &PartitionError{Topic: k.topic, Partition: k.partition,
				Err: fmt.Errorf("%w: stored next offset %d, fetch position %d, log has %d..%d", ErrOffsetOutOfRange, next, fetch, low, high)})
			s.pause(k, w)
		}
	}
}
