package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// producer is the one way the benchmark produces to Kafka (the preloads and the latency
// run's producer alike). A full local queue (librdkafka's queue.buffering.max.messages or
// .kbytes; Produce returns kafka.ErrQueueFull) is not an error: produce serves delivery
// reports and sends the queue (a short Flush), backs off and tries again, for as long as
// deliveries make progress. Delivery reports are read and counted by code. With resend, a
// message whose delivery failed with a retriable error (a timeout, a broker gone) is produced
// again, up to maxAttempts; without it (where the order of a key's records matters), and for
// every other error, the first failure is kept and returned by the next produce and by close:
// the bench fails loudly rather than measure a topic with records missing.
type producer struct {
	p      *kafka.Producer
	resend bool

	mu       sync.Mutex
	retry    []*kafka.Message // retriable delivery failures waiting to be produced again
	failure  error            // the first permanent failure
	failures map[string]int64 // delivery errors by code

	accepted  atomic.Int64 // Produce calls that succeeded (resends included)
	settled   atomic.Int64 // delivery reports read
	delivered atomic.Int64
	queueFull atomic.Int64 // Produce calls that met a full queue
	resent    atomic.Int64
	done      chan struct{}
}

// produceStats is what a producer did.
type produceStats struct {
	Delivered      int64            `json:"delivered"`
	QueueFull      int64            `json:"queue_full,omitempty"`
	Resent         int64            `json:"resent,omitempty"`
	DeliveryErrors map[string]int64 `json:"delivery_errors,omitempty"`
}

func (s produceStats) String() string {
	return fmt.Sprintf("%d delivered, %d waits on a full queue, %d sent again, delivery errors %v", s.Delivered, s.QueueFull, s.Resent, s.DeliveryErrors)
}

const (
	// maxAttempts bounds how often a message whose delivery failed is produced (resend).
	maxAttempts = 5
	// queueFullPatience is how long produce waits on a full queue with no delivery report
	// at all before it gives up.
	queueFullPatience = 2 * time.Minute
	maxBackoff        = 100 * time.Millisecond
)

// newProducer creates the producer with cfg (delivery reports are always on).
func newProducer(cfg kafka.ConfigMap, resend bool) (*producer, error) {
	c := maps.Clone(cfg)
	c["go.delivery.reports"] = true
	// BENCH_PRODUCER_QUEUE_MESSAGES bounds every producer's local queue (a child's too: the
	// environment is inherited), to run the bench through full queues on purpose.
	if n := envInt("BENCH_PRODUCER_QUEUE_MESSAGES", 0); n > 0 {
		c["queue.buffering.max.messages"] = n
	}
	if _, ok := c["go.delivery.report.fields"]; !ok && !resend {
		c["go.delivery.report.fields"] = "none" // nothing to send again: no copy of key and value back
	}
	if _, ok := c["go.logs.channel.enable"]; !ok {
		c["go.logs.channel.enable"] = false
	}
	p, err := kafka.NewProducer(&c)
	if err != nil {
		return nil, err
	}
	pr := &producer{p: p, resend: resend, failures: map[string]int64{}, done: make(chan struct{})}
	go pr.serve()
	return pr, nil
}

// serve reads the events: delivery reports, and the producer's fatal errors.
func (pr *producer) serve() {
	defer close(pr.done)
	for ev := range pr.p.Events() {
		switch e := ev.(type) {
		case *kafka.Message:
			pr.report(e)
		case kafka.Error:
			// Other errors (a broker unreachable for a while) are librdkafka's to retry; a
			// delivery that fails for good comes back as a report.
			if e.IsFatal() {
				pr.fail(fmt.Errorf("producer: fatal error: %w", e))
			}
		}
	}
}

func (pr *producer) report(m *kafka.Message) {
	defer pr.settled.Add(1) // last: a message to send again is in retry before it counts as settled
	err := m.TopicPartition.Error
	if err == nil {
		pr.delivered.Add(1)
		return
	}
	code, retriable := "unknown", false
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		code = kerr.Code().String()
		retriable = kerr.IsRetriable() || kerr.IsTimeout() || kerr.Code() == kafka.ErrMsgTimedOut ||
			kerr.Code() == kafka.ErrTimedOut || kerr.Code() == kafka.ErrTransport || kerr.Code() == kafka.ErrAllBrokersDown
	}
	attempts, _ := m.Opaque.(int)
	attempts++
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.failures[code]++
	if pr.resend && retriable && attempts < maxAttempts {
		m.Opaque, m.TopicPartition.Error = attempts, nil
		pr.retry = append(pr.retry, m)
		return
	}
	if pr.failure == nil {
		topic := ""
		if m.TopicPartition.Topic != nil {
			topic = *m.TopicPartition.Topic
		}
		what := fmt.Sprintf("attempt %d", attempts)
		if code != err.Error() {
			what = code + ", " + what
		}
		pr.failure = fmt.Errorf("delivery to %s [%d] failed (%s): %w", topic, m.TopicPartition.Partition, what, err)
	}
}

func (pr *producer) fail(err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.failure == nil {
		pr.failure = err
	}
}

func (pr *producer) err() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.failure
}

// produce sends m, first the messages to send again; it waits on a full queue.
func (pr *producer) produce(ctx context.Context, m *kafka.Message) error {
	if err := pr.err(); err != nil {
		return err
	}
	if err := pr.sendRetries(ctx); err != nil {
		return err
	}
	return pr.send(ctx, m)
}

func (pr *producer) sendRetries(ctx context.Context) error {
	pr.mu.Lock()
	retry := pr.retry
	pr.retry = nil
	pr.mu.Unlock()
	for _, m := range retry {
		if err := pr.send(ctx, m); err != nil {
			return err
		}
		pr.resent.Add(1)
	}
	return nil
}

// send produces m; on a full queue it serves the delivery reports and sends what is queued
// (Flush for the backoff, 1 ms doubling to 100 ms) and tries again.
func (pr *producer) send(ctx context.Context, m *kafka.Message) error {
	backoff := time.Millisecond
	var stuckSince time.Time
	var settledThen int64
	for {
		err := pr.p.Produce(m, nil)
		if err == nil {
			pr.accepted.Add(1)
			return nil
		}
		var kerr kafka.Error
		if !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull {
			topic := ""
			if m.TopicPartition.Topic != nil {
				topic = *m.TopicPartition.Topic
			}
			return fmt.Errorf("produce to %s [%d]: %w", topic, m.TopicPartition.Partition, err)
		}
		pr.queueFull.Add(1)
		if n := pr.settled.Load(); stuckSince.IsZero() || n != settledThen {
			stuckSince, settledThen = time.Now(), n
		} else if time.Since(stuckSince) > queueFullPatience {
			return fmt.Errorf("the producer's queue stayed full for %s with no delivery report: %w", queueFullPatience, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		pr.p.Flush(int(backoff.Milliseconds()))
		backoff = min(2*backoff, maxBackoff)
		if err := pr.err(); err != nil {
			return err
		}
	}
}

// close waits up to timeout for every message to be delivered (sending again what failed
// with a retriable error), closes the producer and returns what it did, with the first
// permanent failure or the count of what was not delivered.
func (pr *producer) close(timeout time.Duration) (produceStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var err error
	for {
		if err = pr.sendRetries(ctx); err != nil {
			break
		}
		pr.p.Flush(100)
		pr.mu.Lock()
		waiting := len(pr.retry)
		pr.mu.Unlock()
		if waiting == 0 && pr.settled.Load() >= pr.accepted.Load() {
			break
		}
		time.Sleep(time.Millisecond) // the last report is being read
		if ctx.Err() != nil {
			err = fmt.Errorf("%d records not delivered after %s", pr.accepted.Load()-pr.settled.Load()+int64(waiting), timeout)
			break
		}
	}
	pr.p.Close()
	<-pr.done
	pr.mu.Lock()
	s := produceStats{Delivered: pr.delivered.Load(), QueueFull: pr.queueFull.Load(), Resent: pr.resent.Load()}
	if len(pr.failures) > 0 {
		s.DeliveryErrors = maps.Clone(pr.failures)
	}
	if pr.failure != nil {
		err = pr.failure
	}
	pr.mu.Unlock()
	return s, err
}
