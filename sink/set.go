package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/eosink/eosink/internal/offsets"
)

// Sets: partitions owned together (a Sequencer's), outside any consumer group.
//
// librdkafka has no custom assignor, and under the consumer protocol the broker assigns, so
// a set's partitions are owned through the database: a lease row (offsets.Store.TakeLease)
// that one instance holds at a time. The holder claims every partition of the set (an
// epoch bump each, as a group member's claim), assigns them by hand at their stored
// positions and commits Units with the lease's epoch checked first in every transaction.
// The others stand by, polling the lease, and take it when the holder released it or its
// renewals stopped for LeaseTimeout. A takeover bumps the lease's epoch and every
// partition's: the old holder's next commit fails on either, so it never commits again,
// whatever it had assembled.

// ErrLeaseLost means the set's lease was taken by another instance (or moved by an
// operator): this instance stands by again.
var ErrLeaseLost = offsets.ErrLeaseLost

// DefaultLeaseTimeout is SequenceOptions.LeaseTimeout's default.
const DefaultLeaseTimeout = 10 * time.Second

// DefaultIncompleteAfter is SequenceOptions.IncompleteAfter's default: the changes a
// sequence waits for that long are not in the log (deleted by retention, or never
// written). A connector that restarts within it sends them again.
const DefaultIncompleteAfter = 2 * time.Minute

// errRestartSet ends an ownership so that it starts again from the stored positions: a
// COMMIT whose outcome is unknown, the set's topics or partitions changed.
var errRestartSet = errors.New("eosink: the set's ownership starts again from the stored positions")

// sequenced returns the plugin's set options when it applies a set.
func sequenced(p Plugin) (Sequencer, SequenceOptions, bool) {
	sq, ok := p.(Sequencer)
	if !ok {
		return nil, SequenceOptions{}, false
	}
	o, ok := sq.Sequenced()
	if o.LeaseTimeout <= 0 {
		o.LeaseTimeout = DefaultLeaseTimeout
	}
	if o.IncompleteAfter <= 0 {
		o.IncompleteAfter = DefaultIncompleteAfter
	}
	return sq, o, ok
}

// runSet stands by for the set's lease, owns the set while it holds it, and stands by
// again when it loses it, until ctx ends or the set stops on an error.
func (s *Sink) runSet(ctx context.Context, c *kafka.Consumer, sq Sequencer, o SequenceOptions) error {
	backoff := s.cfg.RetryBackoff
	for {
		lease, err := s.awaitLease(ctx, o)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.m.claims.add(1)
		s.log.Info("set: lease taken; claiming its partitions", "set", o.Name, "epoch", lease.Epoch)
		err = s.ownSet(ctx, c, sq, o, lease)
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if rerr := s.store.ReleaseLease(rctx, o.Name, lease.Epoch); rerr != nil {
				s.log.Warn("set: could not release the lease: a standby takes it after the lease timeout", "set", o.Name, "err", rerr)
			}
			cancel()
			return nil
		}
		switch {
		case errors.Is(err, ErrLeaseLost):
			s.m.fenced.add(1)
			s.log.Warn("set: another instance owns the set now; standing by", "set", o.Name, "err", err)
			backoff = s.cfg.RetryBackoff
			continue
		case errors.Is(err, ErrFenced):
			s.m.fenced.add(1)
			s.log.Warn("set: a partition of the set was claimed or moved (an operator's move, or another instance); "+
				"taking the lease again if it is free", "set", o.Name, "err", err)
			backoff = s.cfg.RetryBackoff
			continue
		case errors.Is(err, errRestartSet), isRetryable(err), kafkaTransient(err):
			s.m.retry(err)
			s.log.Warn("set: ownership ends; starting again from the stored positions", "set", o.Name, "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
				continue
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, s.cfg.MaxRetryBackoff)
			continue
		}
		s.log.Error("set stopped", "set", o.Name, "err", err)
		return err
	}
}

// awaitLease takes the set's lease, standing by while another live instance holds it.
func (s *Sink) awaitLease(ctx context.Context, o SequenceOptions) (offsets.Lease, error) {
	poll := min(time.Second, o.LeaseTimeout/4)
	var holder string
	for {
		s.clock.touch()
		l, ok, err := s.store.TakeLease(ctx, o.Name, o.LeaseTimeout)
		switch {
		case ok:
			return l, nil
		case err != nil && ctx.Err() != nil:
			return offsets.Lease{}, ctx.Err()
		case err != nil:
			s.log.Warn("set: could not read or take the lease; retrying", "set", o.Name, "err", err)
		case l.Holder != holder:
			holder = l.Holder
			s.log.Info("set: standing by: another instance holds the lease", "set", o.Name, "holder", l.Holder,
				"renewed_ago", l.Age.Round(time.Millisecond), "takeover_after", o.LeaseTimeout)
		}
		select {
		case <-ctx.Done():
			return offsets.Lease{}, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// renewLease renews the lease every third of its timeout until ctx ends; it calls lost
// when the lease was taken by another instance.
func (s *Sink) renewLease(ctx context.Context, o SequenceOptions, epoch int64, lost func()) {
	t := time.NewTicker(o.LeaseTimeout / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.store.RenewLease(ctx, o.Name, epoch)
		switch {
		case errors.Is(err, ErrLeaseLost):
			lost()
			return
		case err != nil && ctx.Err() == nil:
			s.log.Warn("set: lease renewal failed; a standby takes the set if it keeps failing", "set", o.Name,
				"err", err, "lease_timeout", o.LeaseTimeout)
		}
	}
}

// SetError is a set that stopped: what it was applying and why. Nothing of the units
// named was committed.
type SetError struct {
	Set     string
	Waiting string // what the sequence waited for, if anything
	Err     error
}

func (e *SetError) Error() string {
	return fmt.Sprintf("eosink: set %q stopped: %v", e.Set, e.Err)
}

func (e *SetError) Unwrap() error { return e.Err }

// runSequenced is Run for a Sequencer's set: the heartbeat, then runSet, then the
// consumer's close.
func (s *Sink) runSequenced(ctx context.Context, c *kafka.Consumer, sq Sequencer, o SequenceOptions, started *bool) (err error) {
	pctx, stopPersister := context.WithCancel(context.Background())
	persisted := make(chan struct{})
	go func() {
		defer close(persisted)
		s.stops.run(pctx, s.store, s.beat)
	}()
	defer func() { stopPersister(); <-persisted }()
	if s.cfg.CommitToKafka {
		s.log.Warn("set: commit_to_kafka is ignored: a set's partitions are read outside any consumer group", "set", o.Name)
	}
	s.log.Info("sink started (set)", "set", o.Name, "topics", s.cfg.Topics, "with", o.Topics, "instance", s.cfg.InstanceID,
		"lease_timeout", o.LeaseTimeout)
	s.running.Store(true)
	*started = true
	err = s.runSet(ctx, c, sq, o)
	s.running.Store(false)
	s.setScraped(nil)
	if cerr := c.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("eosink: close consumer: %w", cerr)
	}
	st := s.Stats()
	s.log.Info("sink stopped", "records", st.Records, "batches", st.Batches, "retries", st.Retries, "fenced", st.Fenced, "err", err)
	return err
}

// kafkaTransient reports a Kafka error that a later try may not meet: a broker that
// restarts, a request that timed out. Fatal errors and a refused authentication are not.
func kafkaTransient(err error) bool {
	var ke kafka.Error
	if !errors.As(err, &ke) || ke.IsFatal() {
		return false
	}
	switch ke.Code() {
	case kafka.ErrAuthentication, kafka.ErrSaslAuthenticationFailed, kafka.ErrSsl, kafka.ErrTopicAuthorizationFailed,
		kafka.ErrGroupAuthorizationFailed, kafka.ErrClusterAuthorizationFailed:
		return false
	}
	return true
}
