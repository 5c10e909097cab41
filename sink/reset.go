package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/rebalance"
)

// Operator resets while the sink runs (`eosink offsets set`).
//
// A reset moves a row's next_offset, bumps its epoch (fencing the current owner) and writes
// the owner "reset by OPERATOR (was INSTANCE)", then notifies rebalance.NotifyChannel. The
// sink learns of it in two ways: a worker whose commit is fenced, and a notification (for
// partitions with no traffic). Either way the poll goroutine reads the row; only when it
// names this sink's InstanceID as the fenced owner does it claim the partition again and
// seek to the new position. A fence by another instance's claim stops the partition here;
// if this instance still holds it in Kafka a grace period later, that claim went nowhere
// and this instance claims it again (contest.go). Partitions stopped when they were claimed (out of range, topic
// recreated) were never assigned; they take a new position at their next assignment.

// ErrReclaimFailed: after an operator's reset, claiming the partition again kept failing
// for ClaimTimeout (a lock held on the row, the database unreachable). It is listed by
// PartitionErrors, wrapped in a *PartitionError, until a later try succeeds; the sink tries
// again every MaxRetryBackoff.
var ErrReclaimFailed = errors.New("eosink: claiming the partition again after an operator reset failed")

// requestRecheck asks the poll goroutine to look at a partition's row (any goroutine).
func (s *Sink) requestRecheck(k partitionKey) {
	select {
	case s.recheck <- k:
	default:
		s.recheckAll() // queue full: look at everything
	}
}

func (s *Sink) recheckAll() {
	select {
	case s.recheckEvery <- struct{}{}:
	default:
	}
}

// serveRechecks runs on the poll goroutine.
func (s *Sink) serveRechecks() {
	for {
		select {
		case k := <-s.recheck:
			s.reclaimIfReset(k)
		case <-s.recheckEvery:
			for k := range s.workers {
				s.reclaimIfReset(k)
			}
		default:
			return
		}
	}
}

// reclaimIfReset claims k again if an operator moved it since this instance claimed it.
func (s *Sink) reclaimIfReset(k partitionKey) {
	w := s.workers[k]
	if w == nil {
		return // revoked meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ClaimTimeout)
	defer cancel()
	pos, found, err := s.store.Peek(ctx, k.topic, k.partition) // the reset committed before its notice
	if err != nil {
		if w.dead.Load() { // fenced, and nothing else will look at it again
			s.reclaimFailed(k, err)
			return
		}
		s.log.Warn("could not read the offset row after a notice; looking again later", "topic", k.topic, "partition", k.partition, "err", err)
		time.AfterFunc(s.cfg.MaxRetryBackoff, func() { s.requestRecheck(k) })
		return
	}
	if found && pos.Epoch != w.epoch && !s.resetOfMine(pos, w) {
		// Another instance's claim fenced this worker (contest.go). Nothing it holds can
		// commit under the epoch it had: stop it, if it has not stopped yet.
		if !w.dead.Load() {
			w.cancel()
			select {
			case <-w.done:
			case <-time.After(5 * time.Second):
				s.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)", "topic", k.topic, "partition", k.partition)
			}
		}
		s.contest(ctx, k, w, pos)
		return
	}
	if !found || !s.resetOfMine(pos, w) {
		return // still ours: nothing to do here
	}
	// Abort the old worker: whatever it has in flight is fenced by the new epoch anyway. A
	// handler that ignores cancellation is left behind after a grace period.
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(5 * time.Second):
		s.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)", "topic", k.topic, "partition", k.partition)
	}
	cl, pos, err := s.reclaim(ctx, k, w, pos)
	if errors.Is(err, rebalance.ErrClaimTaken) {
		// Another instance claimed it between our read and our claim: it is theirs, unless
		// this instance still holds the partition after the grace period (contest.go).
		s.log.Warn("partition claimed by another instance before this one could claim it again after an operator reset; stopped here",
			"topic", k.topic, "partition", k.partition, "owner", pos.Owner, "epoch", pos.Epoch)
		s.recordFailure(k.topic, k.partition, &FencedError{Pipeline: s.cfg.Pipeline, Topic: k.topic, Partition: k.partition,
			Epoch: w.epoch, Start: w.next.Load()})
		s.contest(ctx, k, w, pos)
		return
	}
	if err != nil {
		s.reclaimFailed(k, err)
		return
	}
	if s.restartWorker(k, cl) {
		s.log.Info("partition claimed again after an operator reset", "topic", k.topic, "partition", k.partition,
			"from_offset", w.next.Load(), "to_offset", cl.NextOffset, "epoch", cl.Epoch, "by", pos.Owner)
	}
}

// restartWorker starts a new worker for k, assigned in Kafka and claimed again as cl (poll
// goroutine), in place of the one that stopped, and seeks the consumer to cl's offset. It
// reports false, with the partition stopped, when the seek failed.
func (s *Sink) restartWorker(k partitionKey, cl rebalance.Claim) bool {
	s.m.claims.add(1)
	delete(s.contested, k)
	nw := newWorker(s.wcfg, k.topic, k.partition, cl.Epoch, cl.NextOffset)
	s.workers[k] = nw
	s.setLive(k, nw)
	if _, ok := s.paused[k]; ok {
		delete(s.paused, k)
		_ = s.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}})
	}
	s.mu.Lock()
	delete(s.failed, k)
	s.mu.Unlock()
	if s.kcommit != nil {
		s.kcommit.forget(k.topic, k.partition)
	}
	go nw.run()
	// With an infinite timeout, no record fetched for the old position reaches us afterwards.
	res, err := s.consumer.SeekPartitions([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition, Offset: kafka.Offset(cl.NextOffset)}})
	if err == nil && len(res) == 1 && res[0].Error != nil {
		err = res[0].Error
	}
	if err != nil {
		s.log.Error("seek after claiming a partition again failed; stopping the partition", "topic", k.topic, "partition", k.partition, "err", err)
		nw.cancel()
		<-nw.done
		s.recordFailure(k.topic, k.partition, err)
		return false
	}
	return true
}

// resetOfMine reports whether pos is an operator's change that fenced this instance's worker
// w, so that this instance, and only this one, claims the partition again.
func (s *Sink) resetOfMine(pos rebalance.Position, w *worker) bool {
	was, ok := rebalance.ResetFrom(pos.Owner)
	return pos.Epoch != w.epoch && ok && was == s.cfg.InstanceID
}

// reclaim claims k again on the condition that its row still has the epoch of the
// operator's change read in pos (offsets.Store.ClaimIf), so that a zombie that read the
// same row cannot take the partition from an owner that claimed it meanwhile. Transient
// errors (a lock held past LockTimeout, a lost connection) are retried with backoff for up
// to ctx's deadline, reading the row again before each try. It returns an error matching
// rebalance.ErrClaimTaken, with the row read, when someone else came first.
func (s *Sink) reclaim(ctx context.Context, k partitionKey, w *worker, pos rebalance.Position) (rebalance.Claim, rebalance.Position, error) {
	backoff := s.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		cl, err := s.store.ClaimIf(ctx, k.topic, k.partition, pos.Epoch)
		if err == nil {
			return cl, pos, nil
		}
		if !errors.Is(err, rebalance.ErrClaimTaken) && pgerr.Classify(err) != pgerr.Transient {
			return cl, pos, err
		}
		tried := pos.Epoch
		if errors.Is(err, rebalance.ErrClaimTaken) {
			backoff = 0 // read the row at once: a newer reset of ours is claimed at its epoch
		} else {
			s.log.Warn("re-claim after an operator reset failed, retrying", "topic", k.topic, "partition", k.partition,
				"attempt", attempt, "backoff", backoff, "err", err)
		}
		select {
		case <-ctx.Done():
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d] after an operator reset: gave up after %s: %w", k.topic, k.partition, s.cfg.ClaimTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(max(2*backoff, s.cfg.RetryBackoff), s.cfg.MaxRetryBackoff)
		var found bool
		var perr error
		if pos, found, perr = s.store.Peek(ctx, k.topic, k.partition); perr != nil {
			continue // pos is unchanged: try the same claim again
		}
		switch {
		case !found:
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d]: offset row vanished: %w", k.topic, k.partition, rebalance.ErrClaimTaken)
		case pos.Owner == s.cfg.InstanceID && pos.Epoch == tried+1 && !errors.Is(err, rebalance.ErrClaimTaken):
			// The last try's COMMIT took effect although its connection failed.
			return rebalance.Claim{Topic: k.topic, Partition: k.partition, Epoch: pos.Epoch, NextOffset: pos.NextOffset}, pos, nil
		case !s.resetOfMine(pos, w):
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d]: %w", k.topic, k.partition, rebalance.ErrClaimTaken)
		}
	}
}

// reclaimFailed makes a failed re-claim loud (an ERROR line, PartitionErrors) and asks for
// another look at the partition after MaxRetryBackoff, so that it is claimed once the
// database lets it.
func (s *Sink) reclaimFailed(k partitionKey, err error) {
	retry := s.cfg.MaxRetryBackoff
	s.log.Error("re-claim after an operator reset failed; partition paused, trying again later", "topic", k.topic,
		"partition", k.partition, "retry_in", retry, "err", err)
	s.recordFailure(k.topic, k.partition, &PartitionError{Topic: k.topic, Partition: k.partition,
		Err: fmt.Errorf("%w: %w", ErrReclaimFailed, err)})
	time.AfterFunc(retry, func() { s.requestRecheck(k) })
}

// listen waits for notifications of operator resets on a dedicated connection and asks the
// poll goroutine to look at every partition. It reconnects after errors until ctx ends.
func (s *Sink) listen(ctx context.Context) {
	backoff := s.cfg.RetryBackoff
	for ctx.Err() == nil {
		// A connection from the pool (its BeforeConnect hooks apply), taken out of it.
		var conn *pgx.Conn
		pc, err := s.pool.Acquire(ctx)
		if err == nil {
			conn = pc.Hijack()
		}
		if err == nil {
			err = offsets.Listen(ctx, conn)
		}
		if err == nil {
			backoff = s.cfg.RetryBackoff
			s.recheckAll() // anything missed while not listening
			for {
				var n *pgconn.Notification
				n, err = conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				if n.Payload == s.cfg.Pipeline {
					s.recheckAll()
				}
			}
		}
		if conn != nil {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = conn.Close(cctx)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listening for operator resets failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxRetryBackoff)
	}
}
