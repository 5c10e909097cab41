package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/rebalance"
)

// setCheckEvery is how often an ownership looks again at the set's topics (a new partition,
// a new topic matching a pattern) and reports what the sequence waits for.
const setCheckEvery = 15 * time.Second

// ErrSetIncomplete: the sequence waits for records that are in none of the set's
// partitions, each read to its end: a source transaction's changes were deleted by
// retention before they were applied, or never written. Nothing of it was applied; the set
// stops (docs/cdc.md, "Transaction consistency").
var ErrSetIncomplete = errors.New("eosink: a unit cannot be completed from the log")

// owned is one partition of an ownership: the epoch claimed and the stored next offset;
// openDead is the highest offset of its open dead letters at or above the claimed position,
// noOpenDeadLetter for none (resolve.go). The loop changes next and openDead once a
// commit's outcome is in; the committer reads them.
type owned struct {
	epoch, next, openDead int64
}

// ownership is one holding of a set's lease.
type ownership struct {
	s     *Sink
	c     *kafka.Consumer
	o     SequenceOptions
	lease offsets.Lease
	seq   Sequence
	parts map[partitionKey]*owned
	open  *openTx // the committer's transaction left open by continued units

	// deferred holds, per paused partition, the record the sequence could not take yet
	// (ErrSequenceFull): it is given again before the partition resumes.
	deferred map[partitionKey]*Record
}

// ownSet owns the set under lease until ctx ends, the lease is lost, or an error ends the
// ownership: it claims every partition of the set, assigns them at their stored positions
// and commits what the sequence assembles.
func (s *Sink) ownSet(ctx context.Context, c *kafka.Consumer, sq Sequencer, o SequenceOptions, lease offsets.Lease) error {
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	lost := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		s.renewLease(octx, o, lease.Epoch, func() { close(lost); cancel() })
	}()
	defer func() { cancel(); <-renewed }()

	w := &ownership{s: s, c: c, o: o, lease: lease, parts: map[partitionKey]*owned{}, deferred: map[partitionKey]*Record{}}
	tps, err := w.claim(octx)
	if err != nil {
		return w.ended(lost, err)
	}
	if w.seq, err = sq.NewSequence(octx, s.pool); err != nil {
		return w.ended(lost, err)
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("eosink: set %q: assign: %w", o.Name, err)
	}
	defer func() {
		if err := c.Unassign(); err != nil {
			s.log.Warn("set: unassign failed", "set", o.Name, "err", err)
		}
	}()
	s.log.Info("set: owned", "set", o.Name, "epoch", lease.Epoch, "partitions", len(tps))
	return w.ended(lost, w.run(octx))
}

// ended returns ErrLeaseLost for an ownership whose lease the renewals found taken.
func (w *ownership) ended(lost chan struct{}, err error) error {
	select {
	case <-lost:
		return fmt.Errorf("eosink: set %q: %w", w.o.Name, ErrLeaseLost)
	default:
		return err
	}
}

// topics returns the set's topics as the broker has them now, with their partitions.
func (w *ownership) topics(ctx context.Context) (map[string][]int32, error) {
	names, err := w.s.checkTopics(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range w.o.Topics {
		if !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	out := map[string][]int32{}
	for _, t := range names {
		md, err := w.s.metadata(ctx, &t, false, 10*time.Second)
		if err != nil {
			return nil, err
		}
		tm, ok := md.Topics[t]
		if !ok || tm.Error.Code() != kafka.ErrNoError {
			return nil, fmt.Errorf("eosink: set %q: topic %q does not exist on %s", w.o.Name, t, w.s.brokers())
		}
		for _, p := range tm.Partitions {
			out[t] = append(out[t], p.ID)
		}
		slices.Sort(out[t])
		if slices.Contains(w.o.SinglePartition, t) && len(out[t]) != 1 {
			return nil, &SetError{Set: w.o.Name, Err: fmt.Errorf("topic %q has %d partitions: it must have exactly one, "+
				"or the order of its records is lost (create it with one partition before the connector starts, "+
				"for example with Kafka Connect's topic.creation.* settings)", t, len(out[t]))}
		}
	}
	return out, nil
}

// claim claims every partition of the set and returns where to assign them.
func (w *ownership) claim(ctx context.Context) ([]kafka.TopicPartition, error) {
	set, err := w.topics(ctx)
	if err != nil {
		return nil, err
	}
	var tps []kafka.TopicPartition
	for t, ps := range set {
		for _, p := range ps {
			cl, err := w.claimOne(ctx, t, p)
			if err != nil {
				return nil, err
			}
			dead := openDeadLetterLimit(ctx, w.s.pool, w.s.resolve(), t, p, cl.NextOffset)
			w.parts[partitionKey{t, p}] = &owned{epoch: cl.Epoch, next: cl.NextOffset, openDead: dead}
			tps = append(tps, kafka.TopicPartition{Topic: &t, Partition: p, Offset: kafka.Offset(cl.NextOffset)})
		}
	}
	return tps, nil
}

// claimOne claims one partition (creating its row at the initial position) and checks the
// stored position against the log: records deleted before they were applied, or a log
// shorter than the position (the topic was recreated), stop the set.
func (w *ownership) claimOne(ctx context.Context, topic string, part int32) (offsets.Claim, error) {
	s := w.s
	low, high, err := w.c.QueryWatermarkOffsets(topic, part, 10_000)
	if err != nil {
		return offsets.Claim{}, fmt.Errorf("eosink: set %q: watermarks of %s[%d]: %w", w.o.Name, topic, part, err)
	}
	initial := func() (int64, error) {
		switch s.cfg.InitialPosition {
		case rebalance.Latest:
			return high, nil
		case rebalance.Error:
			return 0, &PartitionError{Topic: topic, Partition: part, Err: ErrNoStoredPosition}
		}
		return low, nil // earliest; kafka-committed has no meaning outside a group
	}
	cl, err := s.store.Claim(ctx, topic, part, "", initial)
	if err != nil {
		return offsets.Claim{}, err
	}
	if cl.NextOffset < low || cl.NextOffset > high {
		return offsets.Claim{}, &SetError{Set: w.o.Name, Err: &PartitionError{Topic: topic, Partition: part,
			Err: fmt.Errorf("%w: stored next offset %d, log holds [%d, %d): records were deleted before they were applied, "+
				"or the topic was recreated; the set cannot be applied whole from here (see docs/cdc.md, \"Transaction consistency\")",
				ErrOffsetOutOfRange, cl.NextOffset, low, high)}}
	}
	return cl, nil
}

// run reads the set's partitions and commits what the sequence assembles, in groups. One
// commit runs at a time, on its own goroutine, while the loop reads and assembles the next
// group; the loop stops reading when that group is full and the commit has not ended.
func (w *ownership) run(ctx context.Context) (err error) {
	s := w.s
	lim := s.cfg
	var group []Unit
	groupRecords, groupBytes := 0, 0
	var first time.Time
	check := time.Now()
	// A sequence may wait for the same unit, with every partition read to its end, for
	// IncompleteAfter before the set stops on ErrSetIncomplete: look at what it waits for
	// often enough for that, apart from the costlier check of the topics.
	waitCheck, logged := check, time.Time{}
	every := max(250*time.Millisecond, min(setCheckEvery, w.o.IncompleteAfter/4))
	var waiting string // what the sequence waited for at the last check, and since when
	var waitingSince time.Time
	var inflight chan committed // the commit running, nil when none
	defer func() {
		if inflight != nil {
			<-inflight // its transaction ends (and rolls back if ctx ended) before the ownership does
		}
		if w.open != nil {
			rollback(w.open.tx)
			w.open = nil
		}
		w.resumeAll() // librdkafka keeps a partition paused across assignments
	}()
	accepted := 0 // records the sequence took since deferred ones were last given again
	// chained: the last unit handed out was continued; closes: the group ends continued
	// units, and takes no more.
	chained, closes := false, false
	settle := func(c committed) error {
		inflight = nil
		if c.err != nil {
			return w.failed(c.err)
		}
		for _, r := range c.ranges {
			p := w.parts[partitionKey{r.Topic, r.Partition}]
			p.next = r.End
			if r.End > p.openDead {
				p.openDead = noOpenDeadLetter
			}
		}
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.clock.touch()
		// A group that is full or closed waits for the commit in flight before more is
		// read: what is read meanwhile would pile up outside the sequence's bounds.
		full := closes || groupRecords >= lim.MaxBatchRecords || groupBytes >= lim.MaxBatchBytes
		if full && inflight != nil {
			if err := settle(<-inflight); err != nil {
				return err
			}
		}
		idle := false
		if !full {
			switch e := w.c.Poll(50).(type) {
			case nil:
				idle = true
			case *kafka.Message:
				if e.TopicPartition.Error != nil {
					s.log.Warn("kafka partition error", "topic", *e.TopicPartition.Topic, "partition", e.TopicPartition.Partition, "err", e.TopicPartition.Error)
					break
				}
				r := recordOf(e)
				k := partitionKey{r.Topic, r.Partition}
				if w.deferred[k] != nil {
					// librdkafka delivers nothing of a paused partition; were it to, the
					// position it resumes from would pass this record: read again instead.
					return fmt.Errorf("%w: %s[%d]@%d delivered while paused", errRestartSet, r.Topic, r.Partition, r.Offset)
				}
				err := w.seq.Add(ctx, &r)
				if errors.Is(err, ErrSequenceFull) {
					if err := w.pause(k, &r); err != nil {
						return err
					}
					break
				}
				if err != nil {
					return w.failed(err)
				}
				accepted++
			case kafka.Error:
				if e.IsFatal() {
					return fmt.Errorf("eosink: kafka: %w", e)
				}
				s.log.Warn("kafka error", "code", e.Code().String(), "err", e)
			}
		}
		handed := false
		for !closes && groupRecords < lim.MaxBatchRecords && groupBytes < lim.MaxBatchBytes {
			u, ok := w.seq.Next()
			if !ok {
				break
			}
			handed = true
			if len(group) == 0 {
				first = time.Now()
			}
			group = append(group, u)
			n, b := u.Size()
			groupRecords, groupBytes = groupRecords+n, groupBytes+b
			// The end of continued units closes the group: their transaction commits
			// now, not with whatever streams after it.
			closes = chained && !u.Continued()
			chained = u.Continued()
		}
		if inflight != nil {
			select {
			case c := <-inflight:
				if err := settle(c); err != nil {
					return err
				}
			default:
			}
		}
		if len(w.deferred) > 0 && (handed || idle || accepted >= 64) {
			accepted = 0
			if err := w.giveDeferred(ctx); err != nil {
				return err
			}
		}
		full = groupRecords >= lim.MaxBatchRecords || groupBytes >= lim.MaxBatchBytes
		if inflight == nil && len(group) > 0 && (idle || full || closes || time.Since(first) >= lim.MaxBatchWait) {
			g := group
			group, groupRecords, groupBytes, closes = nil, 0, 0, false
			ch := make(chan committed, 1)
			inflight = ch
			go func() {
				ranges, err := w.commit(ctx, g)
				ch <- committed{ranges, err}
			}()
		}
		if time.Since(waitCheck) >= every {
			waitCheck = time.Now()
			now := w.seq.Waiting()
			if now == "" || now != waiting {
				waiting, waitingSince = now, time.Now()
			}
			if waiting != "" {
				if time.Since(logged) >= setCheckEvery {
					logged = time.Now()
					s.log.Info("set: waiting", "set", w.o.Name, "for", waiting, "since", waitingSince.Format(time.RFC3339))
				}
				if time.Since(waitingSince) >= w.o.IncompleteAfter {
					if err := w.readToEnd(); err != nil {
						return err
					}
				}
			}
		}
		if time.Since(check) >= setCheckEvery {
			check = time.Now()
			if err := w.changed(ctx); err != nil {
				return err
			}
		}
	}
}

// pause stops fetching k, whose record r the sequence could not take yet.
func (w *ownership) pause(k partitionKey, r *Record) error {
	if err := w.c.Pause([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
		return fmt.Errorf("%w: pause %s[%d]: %v", errRestartSet, k.topic, k.partition, err)
	}
	w.deferred[k] = r
	w.s.m.pauses.add(1)
	return nil
}

// giveDeferred gives the deferred records to the sequence again and resumes the partitions
// of those it takes.
func (w *ownership) giveDeferred(ctx context.Context) error {
	for k, r := range w.deferred {
		err := w.seq.Add(ctx, r)
		if errors.Is(err, ErrSequenceFull) {
			continue
		}
		if err != nil {
			return w.failed(err)
		}
		delete(w.deferred, k)
		if err := w.c.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
			return fmt.Errorf("%w: resume %s[%d]: %v", errRestartSet, k.topic, k.partition, err)
		}
	}
	return nil
}

// resumeAll resumes the paused partitions as the ownership ends.
func (w *ownership) resumeAll() {
	for k := range w.deferred {
		if err := w.c.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}}); err != nil {
			w.s.log.Warn("set: resume failed", "set", w.o.Name, "topic", k.topic, "partition", k.partition, "err", err)
		}
		delete(w.deferred, k)
	}
}

// readToEnd returns a *SetError wrapping ErrSetIncomplete when every partition of the set
// is read to its end (or paused): what the sequence waits for is not in the log.
func (w *ownership) readToEnd() error {
	var tps []kafka.TopicPartition
	for k := range w.parts {
		// A paused partition counts as read: the sequence refused its next record as
		// belonging after the unit it waits for, whose records on that partition come
		// before it.
		if w.deferred[k] == nil {
			tps = append(tps, kafka.TopicPartition{Topic: &k.topic, Partition: k.partition})
		}
	}
	pos, err := w.c.Position(tps)
	if err != nil {
		return nil // asked again at the next check
	}
	for _, tp := range pos {
		read := int64(tp.Offset)
		if read < 0 {
			read = w.parts[partitionKey{*tp.Topic, tp.Partition}].next
		}
		if _, high, err := w.c.GetWatermarkOffsets(*tp.Topic, tp.Partition); err == nil && read < high {
			return nil // the last fetch saw more: no need to ask the broker
		}
		_, high, err := w.c.QueryWatermarkOffsets(*tp.Topic, tp.Partition, 5_000)
		if err != nil || read < high {
			return nil
		}
	}
	return &SetError{Set: w.o.Name, Waiting: w.seq.Waiting(), Err: fmt.Errorf("%w: waiting for %s for %s with every partition read to its end: "+
		"its records were deleted by retention before they were applied, or never written; nothing of it was applied",
		ErrSetIncomplete, w.seq.Waiting(), w.o.IncompleteAfter)}
}

// changed returns errRestartSet when the set's topics or partitions differ from those
// owned: a new topic matching a pattern, partitions added.
func (w *ownership) changed(ctx context.Context) error {
	set, err := w.topics(ctx)
	if err != nil {
		return err
	}
	n := 0
	for t, ps := range set {
		for _, p := range ps {
			if w.parts[partitionKey{t, p}] == nil {
				return fmt.Errorf("%w: %s[%d] is new", errRestartSet, t, p)
			}
			n++
		}
	}
	if n != len(w.parts) {
		return fmt.Errorf("%w: a partition is gone", errRestartSet)
	}
	// An operator's move (eosink offsets set) bumps the epoch: claim again at the new
	// position now rather than at the next commit, which it fences.
	var topics []string
	var parts []int32
	for k := range w.parts {
		topics, parts = append(topics, k.topic), append(parts, k.partition)
	}
	epochs, err := w.s.store.Epochs(ctx, topics, parts)
	if err != nil {
		return err
	}
	for k, o := range w.parts {
		if e, ok := epochs[k.topic][k.partition]; !ok || e != o.epoch {
			return fmt.Errorf("%w: %s[%d] was claimed or moved (epoch %d, now %d)", errRestartSet, k.topic, k.partition, o.epoch, e)
		}
	}
	return nil
}

// failed turns an error of the sequence into the ownership's end: retryable errors and
// fences end it (runSet starts again or stands by), others stop the set, naming what it
// waited for.
func (w *ownership) failed(err error) error {
	if isRetryable(err) || errors.Is(err, errRestartSet) || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrFenced) {
		return err
	}
	if se := (*SetError)(nil); errors.As(err, &se) {
		return err
	}
	return &SetError{Set: w.o.Name, Waiting: w.seq.Waiting(), Err: err}
}

// recordOf is the Record of a fetched message.
func recordOf(m *kafka.Message) Record {
	tp := m.TopicPartition
	r := Record{Topic: *tp.Topic, Partition: tp.Partition, Offset: int64(tp.Offset), Key: m.Key, Value: m.Value, Timestamp: m.Timestamp}
	if len(m.Headers) > 0 {
		r.Headers = make([]Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}
