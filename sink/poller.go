package sink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/rebalance"
)

// poller is the poll goroutine's subsystem. Run's goroutine polls the consumer (run), serves
// the rebalance callbacks from within Poll (it is the Balancer's rebalance.Lifecycle:
// poller_assign.go, poller_contest.go), hands records to the partition workers (dispatch),
// pauses and resumes partitions, checks their ranges (poller_ranges.go) and reads their rows
// again after a fence or an operator's reset (poller_reset.go). It owns the consumer, the
// workers map and the advisory Kafka commits; the fields below say which other goroutines
// may touch what.
type poller struct {
	// Set by New, then read-only.
	cfg   *Config
	log   *slog.Logger
	m     *metrics
	stops *stopLedger
	clock *pollClock
	// rechecks carries requests to read partitions' rows again (any goroutine sends; run
	// serves them).
	rechecks rechecks

	// Set by Run before the poll goroutine starts, then read-only.
	store *offsets.Store
	wcfg  *workerConfig // what every partition worker uses

	// Poll goroutine only.
	consumer *kafka.Consumer
	workers  map[partitionKey]*worker
	paused   map[partitionKey]*worker
	kcommit  *kafkaCommitter // nil without Config.CommitToKafka
	// contested are the partitions assigned here whose rows another instance's claim holds,
	// waiting for their grace period (poller_contest.go).
	contested map[partitionKey]contest
	ranges    rangeChecker // range checks while running (poller_ranges.go)

	liveMu sync.Mutex
	live   map[partitionKey]*worker // copy of workers for metrics and checkEpochs, under liveMu
}

func newPoller(cfg *Config, log *slog.Logger, m *metrics, stops *stopLedger, clock *pollClock) *poller {
	return &poller{
		cfg: cfg, log: log, m: m, stops: stops, clock: clock, rechecks: newRechecks(),
		workers: map[partitionKey]*worker{}, paused: map[partitionKey]*worker{}, contested: map[partitionKey]contest{},
		live: map[partitionKey]*worker{},
	}
}

// pollClock is when the poll loop last turned: written by the poll goroutine (touch), read by
// Healthy (any goroutine).
type pollClock struct {
	polled atomic.Int64 // monotonic nanos since clockStart of the last turn
}

// touch records that the poll loop turned (or made progress in a long callback).
func (c *pollClock) touch() { c.polled.Store(int64(time.Since(clockStart))) }

// since is the time since the last touch, on the monotonic clock.
func (c *pollClock) since() time.Duration {
	return time.Since(clockStart) - time.Duration(c.polled.Load())
}

// run is the consumer loop: it serves rebalance callbacks, hands records to partition
// workers, and bounds memory: it pauses and resumes partitions, and holds off polling at
// MaxTotalBufferedBytes (capgate.go).
func (p *poller) run(ctx context.Context, bal *rebalance.Balancer) error {
	c := p.consumer
	gate := capGate{pausing: &p.wcfg.capPausing}
	holding := false
	for ctx.Err() == nil {
		p.clock.touch()
		if gate.hold(p.wcfg.total.Load(), int64(p.wcfg.limits.maxTotalBufferedBytes), time.Now()) {
			// At MaxTotalBufferedBytes: take no records until commits free some (capgate.go).
			if !holding {
				holding = true
				p.m.capWaits.add(1)
			}
			if err := bal.Err(); err != nil {
				return err
			}
			time.Sleep(capWait)
			p.resumeDrained()
			p.serveRechecks()
			p.rangeChecks()
			continue
		}
		holding = false
		// Paused partitions resume from this loop (resumeDrained), after Poll returns: poll
		// often while any is paused (pausedPollMs).
		timeout := pollTimeoutMs
		if len(p.paused) > 0 {
			timeout = pausedPollMs
		}
		ev := c.Poll(timeout)
		if err := bal.Err(); err != nil {
			return err
		}
		switch e := ev.(type) {
		case nil:
		case *kafka.Message:
			p.dispatch(e)
		case kafka.PartitionEOF:
			p.atEnd(e)
		case kafka.Error:
			if e.IsFatal() {
				return fmt.Errorf("eosink: kafka fatal error: %w", e)
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				// auto.offset.reset=error: librdkafka stopped a partition whose position left
				// the log. Find which, and stop it loudly.
				p.log.Error("kafka reports an offset out of range", "err", e)
				p.requestRangeCheck()
			} else if isAuthError(e) || isTLSError(e) {
				// At start these end Run (connect.go); later (a password rotated on the
				// broker, a certificate expired) librdkafka retries while they last.
				p.log.Error("kafka authentication or TLS failed; librdkafka retries", "code", e.Code().String(), "err", e)
			} else {
				p.log.Warn("kafka error", "code", e.Code().String(), "err", e)
			}
		default:
			p.log.Debug("kafka event", "event", e.String())
		}
		p.resumeDrained()
		p.serveRechecks()
		p.rangeChecks()
	}
	return nil
}

func (p *poller) dispatch(m *kafka.Message) {
	tp := m.TopicPartition
	if tp.Error != nil {
		p.log.Warn("kafka partition error", "topic", *tp.Topic, "partition", tp.Partition, "err", tp.Error)
		return
	}
	k := partitionKey{*tp.Topic, tp.Partition}
	w := p.workers[k]
	if w == nil {
		return // not ours (any more): never committed, never lost
	}
	if w.dead.Load() {
		p.pause(k, w)
		return
	}
	if w.push(recordOf(m)) {
		p.pause(k, w)
	}
}

func (p *poller) pause(k partitionKey, w *worker) {
	if _, ok := p.paused[k]; ok {
		return
	}
	if err := p.consumer.Pause([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
		p.log.Warn("pause failed", "topic", k.topic, "partition", k.partition, "err", err)
		return
	}
	p.paused[k] = w
	p.m.pauses.add(1)
}

func (p *poller) resumeDrained() {
	for k, w := range p.paused {
		if w.dead.Load() || !w.canResume() {
			continue
		}
		if err := p.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
			p.log.Warn("resume failed", "topic", k.topic, "partition", k.partition, "err", err)
			continue
		}
		delete(p.paused, k)
	}
}
