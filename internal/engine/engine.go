// Package engine lends the project's own packages (the admin client, sink/sinktest,
// sink/multi and the tests) the parts of package sink's engine that they reuse and that a
// library user does not need: the write step, the skip count of a nested write and the stop
// remedies. They are package sink's own code, reached through package engine/hook, so that
// each exists once.
package engine

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/eosink/eosink/internal/engine/hook"
	"github.com/eosink/eosink/sink"
)

// WriteOptions configure WriteBatch.
type WriteOptions = hook.WriteOptions

// WriteResult says what WriteBatch did. Applied + Skipped + len(DeadLettered) is the number
// of records in the batch.
type WriteResult struct {
	Applied      int             // records written by the plugin
	Skipped      int             // records the plugin reported as deliberately not applied (sink.Skipped)
	DeadLettered []sink.Poisoned // poison records written to the dead-letter table
}

// writeBatch is package sink's write step; the assertion runs after sink's init set it.
var writeBatch = hook.WriteBatch.(func(context.Context, pgx.Tx, sink.Plugin, sink.Batch, hook.WriteOptions) (int, int, []sink.Poisoned, error))

// WriteBatch is the engine's write step, for plugin conformance suites (sinktest), replays of
// dead letters (admin) and tests: it calls p.Write on tx for batch and, with opts.Isolate,
// isolates poison records into the dead-letter table in the same transaction. The caller
// owns tx (BEGIN, the offset advance and COMMIT). An error is the plugin's: transient,
// poison (when not isolating), or fatal.
func WriteBatch(ctx context.Context, tx pgx.Tx, p sink.Plugin, batch sink.Batch, opts WriteOptions) (WriteResult, error) {
	applied, skipped, dead, err := writeBatch(ctx, tx, p, batch, opts)
	if err != nil {
		return WriteResult{}, err
	}
	return WriteResult{Applied: applied, Skipped: skipped, DeadLettered: dead}, nil
}

// CountSkipped returns ctx in which sink.Skipped counts into *n instead of into the caller's
// count. It is for plugins that write the same records through several others (package
// sink/multi), which count each one apart and then report one number themselves.
func CountSkipped(ctx context.Context) (context.Context, *int) { return hook.CountSkipped(ctx) }

// StopRemedy tells an operator what to do about a partition stopped for reason, one of the
// sink.Stop* words (sink.StopReason); `eosink status` shows it.
func StopRemedy(reason string) string { return hook.StopRemedy(reason) }
