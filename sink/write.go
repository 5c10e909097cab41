package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine/hook"
	"github.com/eosink/eosink/internal/pgerr"
)

// errIsolate: the first attempt of a batch hit a poison record and the policy is DeadLetter.
// The batch is tried again at once, in a new transaction, with isolation.
var errIsolate = errors.New("eosink: batch holds a poison record; isolating it")

// errIsolateAtCommit: the batch's COMMIT failed with a data error (a deferred constraint) and
// the policy is DeadLetter. The batch is tried again at once, isolating with the deferred
// constraints checked at the end of each part (writeOptions.CheckDeferred).
var errIsolateAtCommit = fmt.Errorf("%w (a deferred constraint failed at COMMIT)", errIsolate)

// IsPoison reports whether err comes from the records rather than the database or the code:
// a *PoisonError, or a data error (SQLSTATE class 22 or 23, or 54000). Such errors are
// handled by Config.OnPoison; retrying them cannot help.
func IsPoison(err error) bool {
	return errors.Is(err, ErrPoison) || pgerr.Classify(err) == pgerr.Data
}

// poisonOffset returns the offset a *PoisonError names.
func poisonOffset(err error) (int64, bool) {
	var pe *PoisonError
	if errors.As(err, &pe) {
		return pe.Offset, true
	}
	return 0, false
}

// writeResult says what writeBatch did. Applied + Skipped + len(DeadLettered) is the number
// of records in the batch.
type writeResult struct {
	Applied      int        // records written by the plugin
	Skipped      int        // records the plugin reported as deliberately not applied (Skipped)
	DeadLettered []Poisoned // poison records written to the dead-letter table
}

// skipKey carries a *int, the records a Write reported skipped, in Write's context.
type skipKey struct{}

// Skipped tells the framework that n records of the batch being written were deliberately
// not applied, for example duplicates an inbox recognised: the offset still moves past them,
// but they are counted as skipped, not in the records applied (Stats.Records,
// eosink_records_applied_total). Call it from Plugin.Write with Write's ctx; elsewhere it
// does nothing. A write that is rolled back does not count.
func Skipped(ctx context.Context, n int) {
	if p, ok := ctx.Value(skipKey{}).(*int); ok {
		*p += n
	}
}

// countSkipped returns ctx in which Skipped counts into *n instead of into the caller's
// count. It is for plugins that write the same records through several others (package
// sink/multi, through internal/engine.CountSkipped), which count each one apart and then
// report one number themselves.
func countSkipped(ctx context.Context) (context.Context, *int) {
	n := new(int)
	return context.WithValue(ctx, skipKey{}, n), n
}

// write calls p.Write and returns how many records it reported skipped. A panic in Write
// becomes its *PanicError; the caller rolls back what Write did (its savepoint or the
// transaction), as after any error.
func write(ctx context.Context, tx pgx.Tx, p Plugin, b Batch) (skipped int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered(v)
		}
	}()
	err = p.Write(context.WithValue(ctx, skipKey{}, &skipped), ownedTx{tx}, b)
	return skipped, err
}

// writeOptions configure writeBatch. The type is package engine/hook's, so that the
// project's own packages fill it in too (internal/engine.WriteBatch).
type writeOptions = hook.WriteOptions

// writeBatch is the engine's write step, also lent to plugin conformance suites (sinktest),
// the replay of dead letters (admin) and tests through internal/engine.WriteBatch: it calls
// p.Write on tx for batch and, with opts.Isolate, isolates poison records (isolate.go) into
// the dead-letter table in the same transaction. The caller owns tx (BEGIN, the offset
// advance and COMMIT). An error is the plugin's: transient, poison (when not isolating), or
// fatal.
func writeBatch(ctx context.Context, tx pgx.Tx, p Plugin, batch Batch, opts writeOptions) (writeResult, error) {
	if !opts.Isolate {
		skipped, err := write(ctx, tx, p, batch)
		if err != nil {
			return writeResult{}, err
		}
		return writeResult{Applied: len(batch.Records) - skipped, Skipped: skipped}, nil
	}
	iso := isolator{ctx: ctx, tx: tx, p: p, topic: batch.Topic, partition: batch.Partition, checkDeferred: opts.CheckDeferred}
	if err := iso.run(batch.Records); err != nil {
		return writeResult{}, err
	}
	if len(iso.dead) > 0 {
		if err := insertDeadLetters(ctx, tx, opts, iso.dead); err != nil {
			return writeResult{}, err
		}
	}
	return writeResult{Applied: iso.written - iso.skipped, Skipped: iso.skipped, DeadLettered: iso.dead}, nil
}
