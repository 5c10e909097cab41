package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

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
// and this instance claims it again (poller_contest.go). Partitions stopped when they were claimed (out of range, topic
// recreated) were never assigned; they take a new position at their next assignment.

// ErrReclaimFailed: after an operator's reset, claiming the partition again kept failing
// for ClaimTimeout (a lock held on the row, the database unreachable). It is listed by
// PartitionErrors, wrapped in a *PartitionError, until a later try succeeds; the sink tries
// again every MaxRetryBackoff.
var ErrReclaimFailed = errors.New("eosink: claiming the partition again after an operator reset failed")

// rechecks are requests to the poll goroutine to read partitions' rows again: one partition
// (a fence, a contest's grace period over, a retry), or all of them (a reset's notice). Any
// goroutine sends; the poll goroutine serves them (serveRechecks).
type rechecks struct {
	one chan partitionKey
	all chan struct{} // capacity 1
}

func newRechecks() rechecks {
	return rechecks{one: make(chan partitionKey, recheckQueueLen), all: make(chan struct{}, 1)}
}

// request asks the poll goroutine to look at a partition's row (any goroutine).
func (r rechecks) request(k partitionKey) {
	select {
	case r.one <- k:
	default:
		r.requestAll() // queue full: look at everything
	}
}

// requestAll asks the poll goroutine to look at every partition's row (any goroutine).
func (r rechecks) requestAll() {
	select {
	case r.all <- struct{}{}:
	default:
	}
}

// serveRechecks runs on the poll goroutine.
func (p *poller) serveRechecks() {
	for {
		select {
		case k := <-p.rechecks.one:
			p.reclaimIfReset(k)
		case <-p.rechecks.all:
			for k := range p.workers {
				p.reclaimIfReset(k)
			}
		default:
			return
		}
	}
}

// reclaimIfReset claims k again if an operator moved it since this instance claimed it.
func (p *poller) reclaimIfReset(k partitionKey) {
	w := p.workers[k]
	if w == nil {
		return // revoked meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ClaimTimeout)
	defer cancel()
	pos, found, err := p.store.Peek(ctx, k.topic, k.partition) // the reset committed before its notice
	if err != nil {
		if w.dead.Load() { // fenced, and nothing else will look at it again
			p.reclaimFailed(k, err)
			return
		}
		p.log.Warn("could not read the offset row after a notice; looking again later", "topic", k.topic, "partition", k.partition, "err", err)
		time.AfterFunc(p.cfg.MaxRetryBackoff, func() { p.rechecks.request(k) })
		return
	}
	if found && pos.Epoch != w.epoch && !p.resetOfMine(pos, w) {
		// Another instance's claim fenced this worker (poller_contest.go). Nothing it holds can
		// commit under the epoch it had: stop it, if it has not stopped yet.
		if !w.dead.Load() {
			w.cancel()
			select {
			case <-w.done:
			case <-time.After(stopGrace):
				p.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)", "topic", k.topic, "partition", k.partition)
			}
		}
		p.contest(ctx, k, w, pos)
		return
	}
	if !found || !p.resetOfMine(pos, w) {
		return // still ours: nothing to do here
	}
	// Abort the old worker: whatever it has in flight is fenced by the new epoch anyway. A
	// handler that ignores cancellation is left behind after a grace period.
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(stopGrace):
		p.log.Error("a handler ignored cancellation; leaving it behind (its commits will be fenced)", "topic", k.topic, "partition", k.partition)
	}
	cl, pos, err := p.reclaim(ctx, k, w, pos)
	if errors.Is(err, rebalance.ErrClaimTaken) {
		// Another instance claimed it between our read and our claim: it is theirs, unless
		// this instance still holds the partition after the grace period (poller_contest.go).
		p.log.Warn("partition claimed by another instance before this one could claim it again after an operator reset; stopped here",
			"topic", k.topic, "partition", k.partition, "owner", pos.Owner, "epoch", pos.Epoch)
		p.stops.record(k.topic, k.partition, &FencedError{Pipeline: p.cfg.Pipeline, Topic: k.topic, Partition: k.partition,
			Epoch: w.epoch, Start: w.next.Load()})
		p.contest(ctx, k, w, pos)
		return
	}
	if err != nil {
		p.reclaimFailed(k, err)
		return
	}
	if p.restartWorker(k, cl) {
		p.log.Info("partition claimed again after an operator reset", "topic", k.topic, "partition", k.partition,
			"from_offset", w.next.Load(), "to_offset", cl.NextOffset, "epoch", cl.Epoch, "by", pos.Owner)
	}
}

// restartWorker starts a new worker for k, assigned in Kafka and claimed again as cl (poll
// goroutine), in place of the one that stopped, and seeks the consumer to cl's offset. It
// reports false, with the partition stopped, when the seek failed.
func (p *poller) restartWorker(k partitionKey, cl rebalance.Claim) bool {
	p.m.claims.add(1)
	delete(p.contested, k)
	nw := newWorker(p.wcfg, k.topic, k.partition, cl.Epoch, cl.NextOffset)
	p.workers[k] = nw
	p.setLive(k, nw)
	if _, ok := p.paused[k]; ok {
		delete(p.paused, k)
		_ = p.consumer.Resume([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition}})
	}
	p.stops.forget(k)
	if p.kcommit != nil {
		p.kcommit.forget(k.topic, k.partition)
	}
	go nw.run()
	// With an infinite timeout, no record fetched for the old position reaches us afterwards.
	res, err := p.consumer.SeekPartitions([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.partition, Offset: kafka.Offset(cl.NextOffset)}})
	if err == nil && len(res) == 1 && res[0].Error != nil {
		err = res[0].Error
	}
	if err != nil {
		p.log.Error("seek after claiming a partition again failed; stopping the partition", "topic", k.topic, "partition", k.partition, "err", err)
		nw.cancel()
		<-nw.done
		p.stops.record(k.topic, k.partition, err)
		return false
	}
	return true
}

// resetOfMine reports whether pos is an operator's change that fenced this instance's worker
// w, so that this instance, and only this one, claims the partition again.
func (p *poller) resetOfMine(pos rebalance.Position, w *worker) bool {
	was, ok := rebalance.ResetFrom(pos.Owner)
	return pos.Epoch != w.epoch && ok && was == p.cfg.InstanceID
}

// reclaim claims k again on the condition that its row still has the epoch of the
// operator's change read in pos (offsets.Store.ClaimIf), so that a zombie that read the
// same row cannot take the partition from an owner that claimed it meanwhile. Transient
// errors (a lock held past LockTimeout, a lost connection) are retried with backoff for up
// to ctx's deadline, reading the row again before each try. It returns an error matching
// rebalance.ErrClaimTaken, with the row read, when someone else came first.
func (p *poller) reclaim(ctx context.Context, k partitionKey, w *worker, pos rebalance.Position) (rebalance.Claim, rebalance.Position, error) {
	backoff := p.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		cl, err := p.store.ClaimIf(ctx, k.topic, k.partition, pos.Epoch)
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
			p.log.Warn("re-claim after an operator reset failed, retrying", "topic", k.topic, "partition", k.partition,
				"attempt", attempt, "backoff", backoff, "err", err)
		}
		select {
		case <-ctx.Done():
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d] after an operator reset: gave up after %s: %w", k.topic, k.partition, p.cfg.ClaimTimeout, err)
		case <-time.After(backoff):
		}
		backoff = min(max(2*backoff, p.cfg.RetryBackoff), p.cfg.MaxRetryBackoff)
		var found bool
		var perr error
		if pos, found, perr = p.store.Peek(ctx, k.topic, k.partition); perr != nil {
			continue // pos is unchanged: try the same claim again
		}
		switch {
		case !found:
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d]: offset row vanished: %w", k.topic, k.partition, rebalance.ErrClaimTaken)
		case pos.Owner == p.cfg.InstanceID && pos.Epoch == tried+1 && !errors.Is(err, rebalance.ErrClaimTaken):
			// The last try's COMMIT took effect although its connection failed.
			return rebalance.Claim{Topic: k.topic, Partition: k.partition, Epoch: pos.Epoch, NextOffset: pos.NextOffset}, pos, nil
		case !p.resetOfMine(pos, w):
			return rebalance.Claim{}, pos, fmt.Errorf("re-claim %s[%d]: %w", k.topic, k.partition, rebalance.ErrClaimTaken)
		}
	}
}

// reclaimFailed makes a failed re-claim loud (an ERROR line, PartitionErrors) and asks for
// another look at the partition after MaxRetryBackoff, so that it is claimed once the
// database lets it.
func (p *poller) reclaimFailed(k partitionKey, err error) {
	retry := p.cfg.MaxRetryBackoff
	p.log.Error("re-claim after an operator reset failed; partition paused, trying again later", "topic", k.topic,
		"partition", k.partition, "retry_in", retry, "err", err)
	p.stops.record(k.topic, k.partition, &PartitionError{Topic: k.topic, Partition: k.partition,
		Err: fmt.Errorf("%w: %w", ErrReclaimFailed, err)})
	time.AfterFunc(retry, func() { p.rechecks.request(k) })
}
