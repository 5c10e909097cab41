package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// Log ranges while running.
//
// Every rangeCheckInterval, and at once when librdkafka reports an offset out of range, the
// poll goroutine checks each running partition against the broker: the log start and high
// watermark (two ListOffsets requests, earliest and latest, for all partitions) and the
// topic id (DescribeTopics). The broker queries run on a goroutine of their own; a failed
// query is retried at the next interval. A partition is stopped (loudly, stopLedger.record) when
//   - the topic id differs from the one stored at the claim (ErrTopicRecreated);
//   - the next record it needs was deleted: its fetch position is below the log start;
//   - the log was truncated: its stored or fetch position is above the high watermark.
// librdkafka's own position can sit above a recreated or truncated log without an error,
// so that nothing is fetched and nothing stops; this check is what catches it.
//
// The end of a partition (enable.partition.eof) moves the stored position past trailing
// transaction markers: librdkafka, reading with read_committed, reports the end at offset P
// only after delivering every committed record below P, so once the worker has committed
// what it was given, [next, P) holds no committed record, and the worker advances the row
// to P in a transaction of its own (the same conditional update as a batch). Retention may
// then delete those markers without stopping the partition at its next claim.

// rangeChecker is the state of the checks; poll goroutine only, except what the probe
// goroutine sends on results.
type rangeChecker struct {
	last    time.Time
	due     bool               // checked at the next turn of the poll loop
	busy    bool               // a probe is running
	results chan []rangeProbe  // capacity 1
	quit    chan struct{}      // closed by closeRanges: a probe in flight asks the broker no more
	admin   *kafka.AdminClient // derived from the consumer, for topic ids and offsets
}

// rangeProbe is one partition's range as the broker told it.
type rangeProbe struct {
	k           partitionKey
	w           *worker
	next, fetch int64 // the positions before the broker was asked
	low, high   int64
	topicID     string // the broker's; "" when unknown
	err         error
}

// requestRangeCheck makes the next turn of the poll loop check every partition.
func (p *poller) requestRangeCheck() { p.ranges.due = true }

// rangeChecks runs on the poll goroutine: it applies the results of a finished probe and
// starts a new one when due.
func (p *poller) rangeChecks() {
	rc := &p.ranges
	if rc.results == nil {
		rc.results, rc.quit = make(chan []rangeProbe, 1), make(chan struct{})
		rc.last = time.Now()
	}
	select {
	case probes := <-rc.results:
		rc.busy = false
		p.applyRanges(probes)
	default:
	}
	if rc.busy || (!rc.due && time.Since(rc.last) < rangeCheckInterval) {
		return
	}
	var probes []rangeProbe
	for k, w := range p.workers {
		if !w.dead.Load() {
			probes = append(probes, rangeProbe{k: k, w: w, next: w.next.Load(), fetch: w.fetchNext})
		}
	}
	rc.last, rc.due = time.Now(), false
	if len(probes) == 0 {
		return
	}
	if rc.admin == nil {
		a, err := kafka.NewAdminClientFromConsumer(p.consumer)
		if err != nil {
			p.log.Warn("no admin client for the topic id check", "err", err)
		}
		rc.admin = a
	}
	rc.busy = true
	go func(c *kafka.Consumer, a *kafka.AdminClient, results chan<- []rangeProbe, quit <-chan struct{}) {
		results <- probeRanges(c, a, probes, quit)
	}(p.consumer, rc.admin, rc.results, rc.quit)
}

// errProbeStopped is a probe's error for the partitions it did not ask about: the sink was
// stopping (closeRanges).
var errProbeStopped = errors.New("eosink: range check stopped: the sink is stopping")

// probeRanges asks the broker (any goroutine) until quit is closed. With an admin client
// it asks for every partition's log start and end in two ListOffsets requests; without one
// (it could not be made), one partition after the other (QueryWatermarkOffsets), each query
// waiting its turn on the connection behind the consumer's fetch, which the broker holds up
// to fetch.wait.max.ms when there is nothing to read: over 256 partitions that took minutes,
// and stopping must not wait for all of it.
func probeRanges(c *kafka.Consumer, a *kafka.AdminClient, probes []rangeProbe, quit <-chan struct{}) []rangeProbe {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	ids := map[string]string{}
	if a != nil {
		var names []string
		for _, p := range probes {
			if _, ok := ids[p.k.topic]; !ok {
				ids[p.k.topic] = ""
				names = append(names, p.k.topic)
			}
		}
		qctx, cancel := context.WithTimeout(ctx, brokerQueryTimeout)
		res, err := a.DescribeTopics(qctx, kafka.NewTopicCollectionOfTopicNames(names))
		cancel()
		if err == nil {
			for _, d := range res.TopicDescriptions {
				if d.Error.Code() == kafka.ErrNoError {
					ids[d.Name] = d.TopicID.String()
				}
			}
		}
	}
	for i := range probes {
		probes[i].topicID = ids[probes[i].k.topic]
	}
	if a != nil {
		listOffsets(ctx, a, probes)
	}
	for i := range probes {
		p := &probes[i]
		select {
		case <-quit:
			if a == nil || p.err != nil {
				p.err = errProbeStopped
			}
			continue
		default:
		}
		if a == nil {
			p.low, p.high, p.err = c.QueryWatermarkOffsets(p.k.topic, p.k.partition, int(brokerQueryTimeout.Milliseconds()))
		}
	}
	return probes
}

// listOffsets sets each probe's low and high (the log start, and the high watermark: the
// latest offset read uncommitted), or its err, in one request for each.
func listOffsets(ctx context.Context, a *kafka.AdminClient, probes []rangeProbe) {
	for _, spec := range []kafka.OffsetSpec{kafka.EarliestOffsetSpec, kafka.LatestOffsetSpec} {
		req := make(map[kafka.TopicPartition]kafka.OffsetSpec, len(probes))
		for i := range probes {
			req[kafka.TopicPartition{Topic: &probes[i].k.topic, Partition: probes[i].k.partition}] = spec
		}
		qctx, cancel := context.WithTimeout(ctx, brokerQueryTimeout)
		res, err := a.ListOffsets(qctx, req, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadUncommitted))
		cancel()
		got := make(map[partitionKey]kafka.ListOffsetsResultInfo, len(res.ResultInfos))
		for tp, info := range res.ResultInfos {
			if tp.Topic != nil {
				got[partitionKey{*tp.Topic, tp.Partition}] = info
			}
		}
		for i := range probes {
			p := &probes[i]
			if p.err != nil {
				continue
			}
			info, ok := got[p.k]
			switch {
			case err != nil:
				p.err = err
			case !ok:
				p.err = fmt.Errorf("the broker's answer has no offsets of %s[%d]", p.k.topic, p.k.partition)
			case info.Error.Code() != kafka.ErrNoError:
				p.err = info.Error
			case spec == kafka.EarliestOffsetSpec:
				p.low = int64(info.Offset)
			default:
				p.high = int64(info.Offset)
			}
		}
	}
}

// applyRanges stops the partitions whose position no longer fits their log.
func (p *poller) applyRanges(probes []rangeProbe) {
	for _, pr := range probes {
		w := pr.w
		if p.workers[pr.k] != w || w.dead.Load() {
			continue // revoked, claimed again or stopped meanwhile
		}
		// The log grows while the broker is asked: compare the positions from before the
		// query with its high watermark, and the latest fetch position with its log start.
		var cause error
		next, fetch := pr.next, w.fetchNext
		switch {
		case pr.topicID != "" && w.topicID != "" && pr.topicID != w.topicID:
			cause = fmt.Errorf("%w: stored topic id %s, broker has %s", ErrTopicRecreated, w.topicID, pr.topicID)
		case pr.err != nil:
			p.log.Warn("query watermark offsets failed; checking again shortly", "topic", pr.k.topic, "partition", pr.k.partition, "err", pr.err)
			continue
		case fetch < pr.low || pr.next > pr.high || pr.fetch > pr.high:
			cause = fmt.Errorf("%w: stored next offset %d, fetch position %d, log has %d..%d", ErrOffsetOutOfRange, next, fetch, pr.low, pr.high)
		default:
			continue
		}
		w.cancel()
		<-w.done
		w.fail(&PartitionError{Topic: pr.k.topic, Partition: pr.k.partition, Err: cause})
		p.pause(pr.k, w)
	}
}

// closeRanges stops a probe in flight after its current query, waits for it and releases
// the admin client; before the consumer closes.
func (p *poller) closeRanges() {
	rc := &p.ranges
	if rc.quit != nil {
		close(rc.quit)
		rc.quit = nil
	}
	if rc.busy {
		<-rc.results
		rc.busy = false
	}
	if rc.admin != nil {
		rc.admin.Close()
		rc.admin = nil
	}
}

// atEnd handles the end of a partition at e.Offset (poll goroutine): every committed record
// below it was delivered, so the worker may move its position past what lies between.
func (p *poller) atEnd(e kafka.PartitionEOF) {
	w := p.workers[partitionKey{*e.Topic, e.Partition}]
	end := int64(e.Offset)
	if w == nil || w.dead.Load() || end <= w.fetchNext {
		return
	}
	w.fetchNext = end
	w.skipTo(end)
}
