package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/failpoint"
	"github.com/eosink/eosink/internal/pgerr"
	"github.com/eosink/eosink/rebalance"
)

// errNotCommitted marks a commit that was settled, by reading the offset row back, as not
// having happened. The batch is retried.
var errNotCommitted = errors.New("eosink: commit outcome was unknown and the stored offset shows it did not happen")

// isRetryable reports whether a failed batch may be tried again from the same position.
func isRetryable(err error) bool {
	if errors.Is(err, errNotCommitted) {
		return true
	}
	var he *HandlerError
	if errors.Is(err, ErrFenced) || errors.Is(err, ErrCommitUnsettled) || errors.As(err, &he) {
		return false
	}
	if errors.Is(err, ErrTransient) { // a plugin's Transient error
		return true
	}
	return pgerr.Classify(err) == pgerr.Transient
}

// commit is one try (t) of one batch of the partition, in one transaction:
//
//  1. the conditional offset update (epoch and expected next offset), which takes the row lock,
//     sent with BEGIN in one round trip;
//  2. the plugin's writes through the same transaction; with t.isolate, in savepoints around
//     poison records, which go to the dead-letter table (see deadletter.go); then the open
//     dead letters of the offsets the batch applied are resolved (resolve.go);
//  3. COMMIT. Only after it does the in-memory position advance.
//
// A COMMIT that fails on the connection has an unknown outcome and is settled by reading
// the row back. Poison met on the way ends the try as t.isolates decides (worker_retry.go).
func (w *worker) commit(batch []Record, t *tries) (err error) {
	cfg := w.cfg
	start := w.next.Load()
	end := batch[len(batch)-1].Offset + 1
	began := time.Now()
	span := w.startBatch(batch, t.attempt, t.isolate)
	defer func() { span.end(err, cfg.redactErrorValues) }()
	ctx := span.phase(cfg.tracer, "eosink.write")
	failpoint.Eval(failpoint.AfterFetch)

	// BEGIN and the conditional offset update in one round trip (Store.Begin); a fenced row
	// or any failure has rolled the transaction back.
	rng := rebalance.Range{Topic: w.topic, Partition: w.partition, Epoch: w.epoch, Start: start, End: end}
	tx, err := cfg.store.Begin(ctx, cfg.db, pgx.TxOptions{IsoLevel: cfg.isolationLevel}, nil, rng)
	if err != nil {
		if errors.Is(err, ErrFenced) {
			cfg.m.fenced.add(1)
		}
		return err
	}
	finished := false
	defer func() {
		if !finished {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = tx.Rollback(rctx)
			cancel()
		}
	}()
	failpoint.Eval(failpoint.AfterOffsetUpdate)

	res, err := writeBatch(ctx, tx, cfg.plugin, Batch{Topic: w.topic, Partition: w.partition, Records: batch},
		writeOptions{Isolate: t.isolate, CheckDeferred: t.isolate && t.checkDeferred, Schema: cfg.schema, Pipeline: cfg.pipeline,
			RedactErrorValues: cfg.redactErrorValues})
	if err != nil {
		w.logPanic(batch, err)
		if isRetryable(err) {
			return err
		}
		if t.isolates(cfg.onPoison, err, false) {
			return errIsolate
		}
		return &HandlerError{Topic: w.topic, Partition: w.partition, FirstOffset: batch[0].Offset, LastOffset: end - 1, Err: err}
	}
	for _, d := range res.DeadLettered {
		w.logPanic(batch, d.Err)
	}
	outcomes, err := w.admitDeadLetters(batch, res.DeadLettered)
	if err != nil {
		return err // the breaker tripped: roll back, nothing dead-lettered
	}
	if err := w.resolveApplied(ctx, tx, batch, res.DeadLettered); err != nil {
		return err
	}
	failpoint.Eval(failpoint.InHandler)
	if st := tx.Conn().PgConn().TxStatus(); st != 'T' {
		return &HandlerError{Topic: w.topic, Partition: w.partition, FirstOffset: batch[0].Offset, LastOffset: end - 1,
			Err: fmt.Errorf("%w (transaction status %q)", ErrTxFinished, st)}
	}

	failpoint.Eval(failpoint.BeforeCommit)
	finished = true
	pid := tx.Conn().PgConn().PID() // the session to end if this COMMIT's outcome is unknown
	ctx = span.phase(cfg.tracer, "eosink.commit")
	if err := tx.Commit(ctx); err != nil {
		if !pgerr.IsConnectionError(err) && ctx.Err() == nil {
			err = fmt.Errorf("commit: %w", err) // the server answered: rolled back
			if t.isolates(cfg.onPoison, err, true) {
				return errIsolateAtCommit // a deferred constraint: isolate, checking them per part
			}
			if IsPoison(err) {
				return &HandlerError{Topic: w.topic, Partition: w.partition, FirstOffset: batch[0].Offset, LastOffset: end - 1, Err: err}
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err() // aborted: the next owner reads the row
		}
		if err := w.settle(rng, pid, err); err != nil {
			return err
		}
	}
	failpoint.Eval(failpoint.AfterCommit)
	w.next.Store(end)
	w.committedTo(end)
	notifyCommitted(cfg.plugin, Offset{Topic: w.topic, Partition: w.partition, Next: end})
	w.deadLetters.add(outcomes)
	bytes := 0
	for i := range batch {
		bytes += recordSize(&batch[i])
	}
	cfg.m.committed(res.Applied, bytes, time.Since(began).Seconds())
	if n := len(res.DeadLettered); n > 0 {
		cfg.m.deadLetters.add(int64(n))
		for _, d := range res.DeadLettered {
			cfg.log.Warn("record dead-lettered", "topic", d.Record.Topic, "partition", d.Record.Partition,
				"offset", d.Record.Offset, "err", d.Err)
		}
	}
	if cfg.kcommit != nil {
		cfg.kcommit.note(w.topic, w.partition, end)
	}
	return nil
}

// ErrCommitUnsettled: a COMMIT's connection failed and reading the offset row back kept
// failing for ClaimTimeout, so the batch's outcome is unknown. The partition stops (a
// *PartitionError wrapping it); the next owner resumes from the stored row.
var ErrCommitUnsettled = errors.New("eosink: the outcome of a COMMIT could not be settled")

// settle resolves a COMMIT whose connection failed: the row says whether it happened.
// It returns nil if the commit happened, errNotCommitted if it did not, and a
// *FencedError if the partition has a new owner (whose position is then authoritative).
//
// The read waits for the row lock (Store.Read), which the old session, backend pid, holds
// until the server notices the lost connection; a half-open connection of a pool without
// idle_in_transaction_session_timeout can keep it for hours. So after each failed read it
// ends that session if it still holds the row (Store.TerminateHolder). Reads are retried with
// backoff, each failure logged, for up to ClaimTimeout; then it returns a *PartitionError
// wrapping ErrCommitUnsettled.
func (w *worker) settle(rng rebalance.Range, pid uint32, commitErr error) error {
	cfg := w.cfg
	cfg.log.Warn("commit outcome unknown; reading the offset row back", "topic", w.topic,
		"partition", w.partition, "start", rng.Start, "end", rng.End, "pid", pid, "err", commitErr)
	cfg.m.unknownCommits.add(1)
	ctx, cancel := context.WithTimeout(w.ctx, cfg.claimTimeout)
	defer cancel()
	backoff := cfg.retryBackoff
	for attempt := 1; ; attempt++ {
		pos, found, err := cfg.store.Read(ctx, w.topic, w.partition)
		if err == nil {
			switch {
			case found && pos.Epoch == rng.Epoch && pos.NextOffset == rng.End:
				cfg.log.Info("commit outcome settled: committed", "topic", w.topic, "partition", w.partition, "next_offset", rng.End)
				return nil
			case found && pos.Epoch == rng.Epoch && pos.NextOffset == rng.Start:
				cfg.log.Info("commit outcome settled: not committed; retrying", "topic", w.topic, "partition", w.partition)
				return errNotCommitted
			default:
				cfg.m.fenced.add(1)
				return &FencedError{Pipeline: cfg.pipeline, Topic: w.topic, Partition: w.partition, Epoch: rng.Epoch, Start: rng.Start}
			}
		}
		if w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		if ctx.Err() != nil {
			return &PartitionError{Topic: w.topic, Partition: w.partition,
				Err: fmt.Errorf("%w after %s (offsets %d..%d, epoch %d): %v", ErrCommitUnsettled, cfg.claimTimeout, rng.Start, rng.End-1, rng.Epoch, err)}
		}
		cfg.log.Warn("reading the offset row back failed; retrying", "topic", w.topic, "partition", w.partition,
			"attempt", attempt, "backoff", backoff, "err", err)
		if ok, terr := cfg.store.TerminateHolder(ctx, w.topic, w.partition, pid); terr != nil {
			cfg.log.Warn("could not end the old session of the COMMIT", "topic", w.topic, "partition", w.partition, "pid", pid, "err", terr)
		} else if ok {
			cfg.log.Warn("ended the old session of the COMMIT, which still held the offset row", "topic", w.topic,
				"partition", w.partition, "pid", pid)
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		backoff = min(2*backoff, cfg.maxRetryBackoff)
	}
}

var _ pgx.Tx = ownedTx{}
