package rebalance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/failpoint"
	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/pgerr"
)

// Lifecycle is what the Balancer drives for the partitions it claims. Its methods are called
// from the rebalance callback, that is from the goroutine that polls the consumer; they never
// run concurrently with each other. They must not call the consumer's Poll or Close.
type Lifecycle interface {
	// Start is called once a partition has been claimed, before it is assigned in Kafka.
	// Records of the partition arrive only after Start returns.
	Start(c Claim)
	// Stop is called for partitions being revoked (lost=false) or lost (lost=true), before
	// they are unassigned in Kafka. It returns when the partitions' in-flight batches have
	// committed (revoke) or been rolled back (lost). A lost partition must never commit.
	Stop(partitions []kafka.TopicPartition, lost bool)
	// Contested is called for a partition whose claim was abandoned: its row's epoch moved
	// since the assignment began (offsets.Store.ClaimAt), so another instance, or an operator, came
	// first and this callback may be one that ran past the group's timeouts. c holds the row
	// as read after the refusal (c.Epoch is not this instance's). The partition is assigned
	// in Kafka at c.NextOffset, but it must not be consumed under c.Epoch; the lifecycle may
	// claim it later with offsets.Store.ClaimIf if this instance still holds it then.
	Contested(c Claim)
	// Failed is called for a partition that was claimed but cannot be consumed (stored
	// offset out of range, topic recreated, no stored position). It is not assigned in Kafka.
	// The Balancer logs the refusal at Info only: Failed reports it (the sink logs an ERROR
	// with the remedy).
	Failed(err *PartitionError)
}

// Balancer claims partitions in the database on every assignment, assigns them in Kafka at
// the stored offset, and stops their work on revoke or loss. It handles eager and
// incremental (cooperative-sticky, and KIP-848 consumer protocol) rebalances alike.
//
// Use OnRebalance as the consumer's rebalance callback. Kafka's committed offsets are read
// only to create a missing row under the KafkaCommitted policy.
type Balancer struct {
	store     *offsets.Store
	initial   InitialPosition
	lifecycle Lifecycle
	log       *slog.Logger

	// BrokerTimeout bounds each broker query made during a claim. Defaults to 10s.
	BrokerTimeout time.Duration
	// ClaimTimeout bounds how long a claim retries transient database errors (a lock held
	// by a stalled previous owner, a lost connection) before the sink gives up. Defaults to 60s.
	ClaimTimeout time.Duration

	assigned map[partitionKey]bool // partitions assigned in Kafka by us
	admin    *kafka.AdminClient
	err      error
}

type partitionKey struct {
	topic     string
	partition int32
}

// NewBalancer returns a Balancer that claims through store (the sink's offsets store),
// creating rows with the initial policy, and drives lifecycle.
func NewBalancer(store *offsets.Store, initial InitialPosition, lifecycle Lifecycle, log *slog.Logger) *Balancer {
	if log == nil {
		log = slog.Default()
	}
	return &Balancer{
		store: store, initial: initial, lifecycle: lifecycle, log: log,
		BrokerTimeout: 10 * time.Second, ClaimTimeout: 60 * time.Second,
		assigned: map[partitionKey]bool{},
	}
}

// Err returns the error that made the Balancer give up, if any. After an error the sink must
// close the consumer: partitions it could not claim were not assigned.
func (b *Balancer) Err() error { return b.err }

// OnRebalance is the kafka.RebalanceCb. It always calls the assign or unassign method
// itself, so that librdkafka never falls back to positions of its own.
func (b *Balancer) OnRebalance(c *kafka.Consumer, ev kafka.Event) error {
	cooperative := c.GetRebalanceProtocol() == "COOPERATIVE"
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		return b.assign(c, e.Partitions, cooperative)
	case kafka.RevokedPartitions:
		return b.revoke(c, e.Partitions, cooperative, c.AssignmentLost())
	}
	return nil
}

func (b *Balancer) assign(c *kafka.Consumer, parts []kafka.TopicPartition, cooperative bool) error {
	b.log.Info("partitions assigned", "count", len(parts), "partitions", describe(parts), "cooperative", cooperative)
	var toAssign []kafka.TopicPartition
	if b.err == nil && len(parts) > 0 {
		// The rows as they are when the assignment begins: each claim below is made only if
		// its row is still so. A callback that outlasts the group's timeouts (a slow broker
		// query, a stalled process) cannot learn that the partitions moved on meanwhile, but
		// the next owner's claim shows in the row, and this claim then gives way to it.
		epochs, err := b.epochs(parts)
		if err != nil {
			b.err = err
			parts = nil // claim nothing: the sink closes the consumer
		}
		failpoint.Eval(failpoint.InAssign)
		ids := b.topicIDs(c, parts)
		for _, p := range parts {
			expect, found := epochs[*p.Topic][p.Partition]
			claim, err := b.claim(c, p, ids[*p.Topic], expect, found)
			if errors.Is(err, ErrClaimTaken) {
				claim, err = b.contested(p, expect, found)
				if err == nil {
					b.lifecycle.Contested(claim)
					toAssign = append(toAssign, kafka.TopicPartition{Topic: p.Topic, Partition: p.Partition, Offset: kafka.Offset(claim.NextOffset)})
					continue
				}
			}
			if err != nil {
				var perr *PartitionError
				if errors.As(err, &perr) {
					b.log.Info("claim refused", "topic", perr.Topic, "partition", perr.Partition, "err", perr.Err) // Failed reports it
					b.lifecycle.Failed(perr)
					continue
				}
				b.err = err
				break
			}
			b.lifecycle.Start(claim)
			toAssign = append(toAssign, kafka.TopicPartition{Topic: p.Topic, Partition: p.Partition, Offset: kafka.Offset(claim.NextOffset)})
			b.log.Info("partition claimed", "topic", claim.Topic, "partition", claim.Partition,
				"epoch", claim.Epoch, "next_offset", claim.NextOffset, "created", claim.Created)
		}
	}
	if b.err != nil {
		// Give back what we started; nothing is assigned, the sink will close the consumer.
		if len(toAssign) > 0 {
			b.lifecycle.Stop(toAssign, true)
		}
		toAssign = nil
		b.log.Error("claim failed; stopping", "err", b.err)
	}
	var err error
	if cooperative {
		err = c.IncrementalAssign(toAssign)
	} else {
		err = c.Assign(toAssign)
		clear(b.assigned)
	}
	if err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("assign partitions: %w", err)
		}
		return b.err
	}
	for _, p := range toAssign {
		b.assigned[partitionKey{*p.Topic, p.Partition}] = true
	}
	if b.err == nil && len(parts) > 0 {
		failpoint.Eval(failpoint.AfterAssign)
	}
	return b.err
}

func (b *Balancer) revoke(c *kafka.Consumer, parts []kafka.TopicPartition, cooperative, lost bool) error {
	b.log.Info("partitions revoked", "count", len(parts), "partitions", describe(parts), "lost", lost)
	b.lifecycle.Stop(parts, lost)
	if !cooperative {
		clear(b.assigned)
		return c.Unassign()
	}
	var ours []kafka.TopicPartition
	for _, p := range parts {
		k := partitionKey{*p.Topic, p.Partition}
		if b.assigned[k] {
			ours = append(ours, p)
			delete(b.assigned, k)
		}
	}
	// Partitions we never assigned (stopped at claim) need no unassign, but librdkafka must
	// still see the callback act, so call it even with an empty list.
	return c.IncrementalUnassign(ours)
}

// epochs reads the epochs of parts' rows (offsets.Store.Epochs), retrying transient errors for up
// to ClaimTimeout.
func (b *Balancer) epochs(parts []kafka.TopicPartition) (map[string]map[int32]int64, error) {
	topics := make([]string, len(parts))
	partitions := make([]int32, len(parts))
	for i, p := range parts {
		topics[i], partitions[i] = *p.Topic, p.Partition
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.ClaimTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for {
		epochs, err := b.store.Epochs(ctx, topics, partitions)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return epochs, err
		}
		b.log.Warn("reading the epochs of the assigned partitions failed, retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up after %s: %w", b.ClaimTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// contested reads the row of a partition whose claim was abandoned (ErrClaimTaken) for
// Lifecycle.Contested, and logs the abandonment. When the row cannot be read (or is gone)
// it returns a *PartitionError: the partition is then stopped here as refused at claim.
func (b *Balancer) contested(p kafka.TopicPartition, expect int64, found bool) (Claim, error) {
	cl := Claim{Topic: *p.Topic, Partition: p.Partition}
	ctx, cancel := context.WithTimeout(context.Background(), b.BrokerTimeout)
	defer cancel()
	pos, ok, err := b.store.Peek(ctx, cl.Topic, cl.Partition)
	if err == nil && !ok {
		err = errors.New("the row is gone")
	}
	if err != nil {
		return Claim{}, &PartitionError{Topic: cl.Topic, Partition: cl.Partition, Err: fmt.Errorf("%w; reading its row failed: %w", ErrClaimTaken, err)}
	}
	cl.Epoch, cl.NextOffset = pos.Epoch, pos.NextOffset
	b.log.Warn("claim abandoned: the partition was claimed by another instance after this assignment began",
		"topic", cl.Topic, "partition", cl.Partition, "expected_epoch", expect, "expected_row", found, "epoch", pos.Epoch, "owner", pos.Owner)
	return cl, nil
}

// claim claims one partition at the epoch read when the assignment began (expect, or no row
// when found is false; offsets.Store.ClaimAt), retrying transient database errors. An error matching
// ErrClaimTaken means another claim came first; a *PartitionError means this partition
// cannot be consumed; any other error means the sink cannot go on.
func (b *Balancer) claim(c *kafka.Consumer, p kafka.TopicPartition, topicID string, expect int64, found bool) (Claim, error) {
	topic, part := *p.Topic, p.Partition
	timeoutMs := int(b.BrokerTimeout.Milliseconds())
	var low, high int64 = -1, -1
	watermarks := func() error {
		if low >= 0 {
			return nil
		}
		l, h, err := c.QueryWatermarkOffsets(topic, part, timeoutMs)
		if err != nil {
			return fmt.Errorf("query watermark offsets of %s[%d]: %w", topic, part, err)
		}
		low, high = l, h
		return nil
	}
	initial := func() (int64, error) {
		switch b.initial {
		case Error:
			return 0, &PartitionError{Topic: topic, Partition: part, Err: ErrNoStoredPosition}
		case KafkaCommitted:
			got, err := c.Committed([]kafka.TopicPartition{{Topic: &topic, Partition: part}}, timeoutMs)
			if err != nil {
				return 0, fmt.Errorf("read Kafka committed offset of %s[%d]: %w", topic, part, err)
			}
			if len(got) == 1 && got[0].Error == nil && got[0].Offset >= 0 {
				return int64(got[0].Offset), nil
			}
			fallthrough // no committed offset: start at the log start
		case Earliest:
			err := watermarks()
			return low, err
		case Latest:
			// The "high" of a read_committed consumer is the last stable offset.
			err := watermarks()
			return high, err
		}
		return 0, fmt.Errorf("unknown initial position %v", b.initial)
	}

	ctx, cancel := context.WithTimeout(context.Background(), b.ClaimTimeout)
	defer cancel()
	backoff := 100 * time.Millisecond
	for retried := false; ; retried = true {
		cl, err := b.store.ClaimAt(ctx, topic, part, topicID, expect, found, initial)
		if errors.Is(err, ErrClaimTaken) && retried {
			// The last try's COMMIT may have taken effect although its connection failed.
			cl, err = b.ownBump(ctx, topic, part, expect, found, err)
		}
		if err == nil {
			cl, err = b.check(cl, topicID, watermarks, &low, &high)
			if err == nil {
				return cl, nil
			}
		}
		var perr *PartitionError
		if errors.As(err, &perr) || !retryable(err) || ctx.Err() != nil {
			return Claim{}, err
		}
		b.log.Warn("claim failed, retrying", "topic", topic, "partition", part, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return Claim{}, fmt.Errorf("claim %s[%d]: gave up after %s: %w", topic, part, b.ClaimTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// ownBump returns the row as a claim when it shows this instance's own claim of the epoch
// after expect (a retried claim whose earlier COMMIT took effect unseen); otherwise taken.
func (b *Balancer) ownBump(ctx context.Context, topic string, part int32, expect int64, found bool, taken error) (Claim, error) {
	if !found {
		expect = 0
	}
	pos, ok, err := b.store.Peek(ctx, topic, part)
	if err != nil || !ok || pos.Owner != b.store.Owner() || pos.Epoch != expect+1 {
		return Claim{}, taken
	}
	return Claim{Topic: topic, Partition: part, Epoch: pos.Epoch, NextOffset: pos.NextOffset, Created: pos.Epoch == 1}, nil
}

// retryable reports whether a claim that failed with err may be tried again: transient
// database errors, and broker errors that are not fatal (timeouts, a broker restarting).
func retryable(err error) bool {
	var kerr kafka.Error
	if errors.As(err, &kerr) {
		return !kerr.IsFatal()
	}
	return pgerr.Classify(err) == pgerr.Transient
}

// check refuses a claim whose stored position no longer fits the log.
func (b *Balancer) check(cl Claim, topicID string, watermarks func() error, low, high *int64) (Claim, error) {
	if topicID != "" && cl.TopicID != "" && cl.TopicID != topicID {
		return Claim{}, &PartitionError{Topic: cl.Topic, Partition: cl.Partition,
			Err: fmt.Errorf("%w: stored topic id %s, broker has %s", ErrTopicRecreated, cl.TopicID, topicID)}
	}
	if err := watermarks(); err != nil {
		return Claim{}, err
	}
	if cl.NextOffset < *low || cl.NextOffset > *high {
		return Claim{}, &PartitionError{Topic: cl.Topic, Partition: cl.Partition,
			Err: fmt.Errorf("%w: stored next offset %d, log has %d..%d", ErrOffsetOutOfRange, cl.NextOffset, *low, *high)}
	}
	return cl, nil
}

// topicIDs asks the broker for the ids of the topics in parts. A failure is logged and
// yields no ids: the recreated-topic check is then skipped for this claim, while the
// offset range check still runs.
func (b *Balancer) topicIDs(c *kafka.Consumer, parts []kafka.TopicPartition) map[string]string {
	ids := map[string]string{}
	var names []string
	for _, p := range parts {
		if _, ok := ids[*p.Topic]; !ok {
			ids[*p.Topic] = ""
			names = append(names, *p.Topic)
		}
	}
	if len(names) == 0 {
		return ids
	}
	if b.admin == nil {
		a, err := kafka.NewAdminClientFromConsumer(c)
		if err != nil {
			b.log.Warn("no admin client; skipping topic id check", "err", err)
			return ids
		}
		b.admin = a
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.BrokerTimeout)
	defer cancel()
	res, err := b.admin.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(names))
	if err != nil {
		b.log.Warn("describe topics failed; skipping topic id check", "err", err)
		return ids
	}
	for _, d := range res.TopicDescriptions {
		if d.Error.Code() == kafka.ErrNoError {
			ids[d.Name] = d.TopicID.String()
		}
	}
	return ids
}

// Close releases the admin client derived from the consumer. Call it before closing the
// consumer.
func (b *Balancer) Close() {
	if b.admin != nil {
		b.admin.Close()
		b.admin = nil
	}
}

func describe(parts []kafka.TopicPartition) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s[%d]", *p.Topic, p.Partition)
	}
	return s
}
