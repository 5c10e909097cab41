package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/failpoint"
	"github.com/eosink/eosink/internal/offsets"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/rebalance"
)

// A set's commits. Each group of units commits in one transaction: the lease check, every
// moved offset, the units' writes and the resolution of the open dead letters at the moved
// offsets (resolve.go) (commitOnce). A group whose last unit is Continued (a
// piece of a source transaction too large to hold) leaves its transaction open, and the
// groups after it write into the same one until a group ends with a unit that is not
// continued (commitOpen): then the lease check, the offsets of every unit since BEGIN and
// COMMIT. Commits run one at a time on the ownership's committer goroutine, so the open
// transaction is that goroutine's alone.

// openTx is a transaction left open by continued units.
type openTx struct {
	tx             pgx.Tx
	moved          map[partitionKey]int64
	records, bytes int
	began          time.Time
}

// committed is the outcome of a commit: the ranges it moved (none while a transaction
// stays open).
type committed struct {
	ranges []rebalance.Range
	err    error
}

// commit applies group. Transient errors retry the same group; a COMMIT whose outcome is
// unknown ends the ownership (errRestartSet): the next one reads what the database holds.
// A group of an open transaction is not retried (the pieces before it are not held any
// more): its errors roll the transaction back and end the ownership.
func (w *ownership) commit(ctx context.Context, group []Unit) ([]rebalance.Range, error) {
	if w.open != nil || group[len(group)-1].Continued() {
		return w.commitOpen(ctx, group)
	}
	s := w.s
	backoff := s.cfg.RetryBackoff
	for {
		ranges, err := w.commitOnce(ctx, group)
		if err == nil || !isRetryable(err) || errors.Is(err, errRestartSet) || ctx.Err() != nil {
			return ranges, err
		}
		s.m.retry(err)
		s.log.Warn("set: commit failed, retrying", "set", w.o.Name, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, s.cfg.MaxRetryBackoff)
	}
}

// commitOnce is one try of a group's commit. It reads the owned positions, which the loop
// changes only once the commit's outcome is in (settle).
func (w *ownership) commitOnce(ctx context.Context, group []Unit) ([]rebalance.Range, error) {
	s := w.s
	o := &openTx{moved: map[partitionKey]int64{}, began: time.Now()}
	failpoint.Eval(failpoint.AfterFetch)
	o.add(group)
	ranges, err := w.ranges(o)
	if err != nil {
		return nil, err
	}
	// BEGIN, the lease check and the offset updates in one round trip (Store.Begin); on any
	// error the transaction has been rolled back.
	tx, err := s.store.Begin(ctx, s.pool, pgx.TxOptions{IsoLevel: s.cfg.IsolationLevel},
		&offsets.LeaseCheck{Name: w.o.Name, Epoch: w.lease.Epoch}, ranges...)
	if err != nil {
		return nil, err
	}
	o.tx = tx
	finished := false
	defer func() {
		if !finished {
			rollback(tx)
		}
	}()
	failpoint.Eval(failpoint.AfterOffsetUpdate)
	if err := w.seq.Apply(ctx, ownedTx{tx}, group); err != nil {
		return nil, err
	}
	if err := w.resolveApplied(ctx, tx, ranges); err != nil {
		return nil, err
	}
	finished = true
	return ranges, w.finish(ctx, o)
}

// commitOpen writes group into the open transaction, beginning it for the first group. The
// lease check and the offsets come last, with COMMIT, when group ends the continued units:
// taken first, the lease row's lock would stop this instance's own renewals for as long
// as the transaction stays open. A zombie holding the open transaction's locks on target
// rows is ended by the server after the sessions' idle_in_transaction_session_timeout
// (Config.IdleInTransactionTimeout), so that a new holder never waits on it for longer.
func (w *ownership) commitOpen(ctx context.Context, group []Unit) (ranges []rebalance.Range, err error) {
	s := w.s
	if w.open == nil {
		failpoint.Eval(failpoint.AfterFetch)
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: s.cfg.IsolationLevel})
		if err != nil {
			return nil, fmt.Errorf("%w: begin: %v", errRestartSet, err)
		}
		w.open = &openTx{tx: tx, moved: map[partitionKey]int64{}, began: time.Now()}
		s.log.Info("set: a unit too large to hold streams into one transaction", "set", w.o.Name, "waiting", w.seq.Waiting())
	}
	o := w.open
	o.add(group)
	if err := w.seq.Apply(ctx, ownedTx{o.tx}, group); err != nil {
		return nil, w.abandon(err)
	}
	if group[len(group)-1].Continued() {
		return nil, nil
	}
	if err := s.store.CheckLease(ctx, o.tx, w.o.Name, w.lease.Epoch); err != nil {
		return nil, w.abandon(err)
	}
	if ranges, err = w.advance(ctx, o); err != nil {
		return nil, w.abandon(err)
	}
	if err := w.resolveApplied(ctx, o.tx, ranges); err != nil {
		return nil, w.abandon(err)
	}
	failpoint.Eval(failpoint.AfterOffsetUpdate)
	w.open = nil
	if err := w.finish(ctx, o); err != nil {
		if isRetryable(err) && !errors.Is(err, errRestartSet) {
			err = fmt.Errorf("%w: %v", errRestartSet, err)
		}
		return nil, err
	}
	s.log.Info("set: the unit streamed is committed", "set", w.o.Name, "records", o.records, "bytes", o.bytes,
		"took", time.Since(o.began).Round(time.Millisecond))
	return ranges, nil
}

// abandon rolls the open transaction back. Its earlier pieces are not held any more, so a
// transient error ends the ownership (errRestartSet: read again from the stored
// positions); others stop the set as any error does.
func (w *ownership) abandon(err error) error {
	rollback(w.open.tx)
	w.open = nil
	if isRetryable(err) && !errors.Is(err, errRestartSet) {
		return fmt.Errorf("%w: a unit streamed into one transaction failed: %v", errRestartSet, err)
	}
	return err
}

// add notes the group's positions and sizes.
func (o *openTx) add(group []Unit) {
	for _, u := range group {
		for _, p := range u.Positions() {
			o.moved[partitionKey{p.Topic, p.Partition}] = p.Next
		}
		n, b := u.Size()
		o.records, o.bytes = o.records+n, o.bytes+b
	}
}

// advance moves the stored offset of every partition the transaction's units moved, from
// the owned position (the compare-and-set of partition mode, with the claim's epoch).
func (w *ownership) advance(ctx context.Context, o *openTx) ([]rebalance.Range, error) {
	ranges, err := w.ranges(o)
	if err != nil {
		return nil, err
	}
	if err := w.s.store.Advance(ctx, o.tx, ranges...); err != nil {
		return nil, err
	}
	return ranges, nil
}

// ranges are the moves of the partitions o's units moved, from the owned positions.
func (w *ownership) ranges(o *openTx) ([]rebalance.Range, error) {
	var ranges []rebalance.Range
	for k, next := range o.moved {
		p := w.parts[k]
		if p == nil {
			return nil, fmt.Errorf("eosink: set %q: a unit names %s[%d], which the set does not own", w.o.Name, k.topic, k.partition)
		}
		if next < p.next {
			return nil, fmt.Errorf("eosink: set %q: a unit moves %s[%d] back from %d to %d", w.o.Name, k.topic, k.partition, p.next, next)
		}
		if next > p.next {
			ranges = append(ranges, rebalance.Range{Topic: k.topic, Partition: k.partition, Epoch: p.epoch, Start: p.next, End: next})
		}
	}
	return ranges, nil
}

// finish commits o's transaction (which is then ended, whatever the outcome).
func (w *ownership) finish(ctx context.Context, o *openTx) error {
	s := w.s
	failpoint.Eval(failpoint.InHandler)
	failpoint.Eval(failpoint.BeforeCommit)
	if err := o.tx.Commit(ctx); err != nil {
		if pgerr.IsConnectionError(err) || ctx.Err() != nil {
			s.m.unknownCommits.add(1)
			return fmt.Errorf("%w: commit: %v", errRestartSet, err)
		}
		return fmt.Errorf("commit: %w", err)
	}
	failpoint.Eval(failpoint.AfterCommit)
	s.m.committed(o.records, o.bytes, time.Since(o.began).Seconds())
	if _, ok := s.plugin.(CommitObserver); ok {
		offsets := make([]Offset, 0, len(o.moved))
		for k, next := range o.moved {
			offsets = append(offsets, Offset{Topic: k.topic, Partition: k.partition, Next: next})
		}
		notifyCommitted(s.plugin, offsets...)
	}
	return nil
}

// rollback ends tx, on a context of its own: the ownership's may have ended.
func rollback(tx pgx.Tx) {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = tx.Rollback(rctx)
	cancel()
}
